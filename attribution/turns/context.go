package turns

import "slices"

// Kind says what a context is.
type Kind uint8

const (
	Traced   Kind = iota // a traced process
	Untraced             // an untraced process (NVML lists it), by its class
	MPS                  // the MPS server's clients, one context
)

// Key names a context across chunks: a traced process (slot and pid: slots are reused), an
// untraced process (its class) or the MPS server's clients.
type Key struct {
	Kind Kind
	ID   int64
}

// TracedKey is the context of the traced process in slot with pid.
func TracedKey(slot int32, pid uint32) Key { return Key{Traced, int64(slot)<<32 | int64(pid)} }

// Context is one state of a chunk's model.
type Context struct {
	Key   Key
	Slot  int32   // traced: the process slot; -1 otherwise
	Class int32   // untraced: its class; -1 otherwise
	Slots []int32 // the MPS group: its traced clients
}

// Holds says whether process slot p is the context's: its traced process, or one of the MPS
// server's traced clients.
func (c Context) Holds(p int32) bool {
	return p == c.Slot || (c.Slot < 0 && slices.Contains(c.Slots, p))
}

// Recordless says whether no record of the context shows its turns: an untraced process, or
// the MPS server's clients when none is traced.
func (c Context) Recordless() bool {
	return c.Key.Kind == Untraced || c.Key.Kind == MPS && len(c.Slots) == 0
}
