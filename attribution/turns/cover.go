package turns

// Cover is what a chunk's records say of each of its samples: each traced process's covered
// time in sample s, the first and last time they cover, and whether one of its records starts
// or ends inside it (entries Off[s]..Off[s+1]). The join fills it, sample by sample; its
// buffers are reused.
type Cover struct {
	Slot []int32   // the process slot
	Time []float64 // ns its records cover
	From []float64 // ns from the sample's start to the first time its records cover
	To   []float64 // ns from the sample's start to the last time its records cover
	Edge []bool    // one of its records starts or ends inside the sample
	Off  []int32
}

// Reset empties c for a new chunk, keeping its buffers.
func (c *Cover) Reset() {
	c.Slot, c.Time, c.From, c.To, c.Edge = c.Slot[:0], c.Time[:0], c.From[:0], c.To[:0], c.Edge[:0]
	c.Off = append(c.Off[:0], 0)
}

// Add adds the span [from, to) ns of the current sample (from its start) that a record of
// slot covers; edge: the record starts or ends inside it.
func (c *Cover) Add(slot int32, from, to float64, edge bool) {
	for i := int(c.Off[len(c.Off)-1]); i < len(c.Slot); i++ {
		if c.Slot[i] == slot {
			c.Time[i] += to - from
			c.From[i], c.To[i] = min(c.From[i], from), max(c.To[i], to)
			c.Edge[i] = c.Edge[i] || edge
			return
		}
	}
	c.Slot, c.Time, c.Edge = append(c.Slot, slot), append(c.Time, to-from), append(c.Edge, edge)
	c.From, c.To = append(c.From, from), append(c.To, to)
}

// EndSample closes the current sample's entries.
func (c *Cover) EndSample() { c.Off = append(c.Off, int32(len(c.Slot))) }

// Any reports whether a record covers part of sample s.
func (c *Cover) Any(s int) bool { return c.Off[s+1] > c.Off[s] }

// Bytes is the capacity of its buffers.
func (c *Cover) Bytes() int64 {
	return int64(4*(cap(c.Slot)+cap(c.Off)) + 8*(cap(c.Time)+cap(c.From)+cap(c.To)) + cap(c.Edge))
}

// Shed frees its buffers.
func (c *Cover) Shed() { *c = Cover{} }
