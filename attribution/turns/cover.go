package turns

// Cover is what a chunk's records say of each of its samples: each traced process's covered
// time in sample s, the first and last time they cover, whether one of its records starts
// or ends inside it, the time of its records that surely ran there and the most its records
// may have run there (entries Off[s]..Off[s+1]). The join fills it, sample by sample; its
// buffers are reused.
type Cover struct {
	Slot []int32   // the process slot
	Time []float64 // ns its records cover
	From []float64 // ns from the sample's start to the first time its records cover
	To   []float64 // ns from the sample's start to the last time its records cover
	Edge []bool    // one of its records starts or ends inside the sample
	// Inside: ns of its records that surely ran there: those no turn cut that start and end
	// inside the sample and, where every process is traced, that start or end in it (the
	// join's coverTurns). Bound: ns its records may have run there (a record another's turn
	// cut ran only part of its span; the join's cut.go).
	Inside, Bound []float64
	Off           []int32
}

// Reset empties c for a new chunk, keeping its buffers.
func (c *Cover) Reset() {
	c.Slot, c.Time, c.From, c.To, c.Edge = c.Slot[:0], c.Time[:0], c.From[:0], c.To[:0], c.Edge[:0]
	c.Inside, c.Bound = c.Inside[:0], c.Bound[:0]
	c.Off = append(c.Off[:0], 0)
}

// Add adds the span [from, to) ns of the current sample (from its start) that a record of
// slot covers; edge: the record starts or ends inside it; inside and bound: its ns that surely
// ran there and the most that may have (Cover.Inside, Cover.Bound).
func (c *Cover) Add(slot int32, from, to float64, edge bool, inside, bound float64) {
	for i := int(c.Off[len(c.Off)-1]); i < len(c.Slot); i++ {
		if c.Slot[i] == slot {
			c.Inside[i] += inside
			c.Bound[i] += bound
			c.Time[i] += to - from
			c.From[i], c.To[i] = min(c.From[i], from), max(c.To[i], to)
			c.Edge[i] = c.Edge[i] || edge
			return
		}
	}
	c.Slot, c.Time, c.Edge = append(c.Slot, slot), append(c.Time, to-from), append(c.Edge, edge)
	c.Inside, c.Bound = append(c.Inside, inside), append(c.Bound, bound)
	c.From, c.To = append(c.From, from), append(c.To, to)
}

// EndSample closes the current sample's entries.
func (c *Cover) EndSample() { c.Off = append(c.Off, int32(len(c.Slot))) }

// Any reports whether a record covers part of sample s.
func (c *Cover) Any(s int) bool { return c.Off[s+1] > c.Off[s] }

// Bytes is the capacity of its buffers.
func (c *Cover) Bytes() int64 {
	return int64(4*(cap(c.Slot)+cap(c.Off)) + 8*(cap(c.Time)+cap(c.From)+cap(c.To)+cap(c.Inside)+cap(c.Bound)) + cap(c.Edge))
}

// Shed frees its buffers.
func (c *Cover) Shed() { *c = Cover{} }
