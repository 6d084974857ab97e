package activity

import (
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// Budget is one memory budget shared by the activity receiver's connections (kernel-name
// tables, frame buffers, hello strings) and the Aggregator's per-device state. Holders
// reserve bytes before they keep them and release them when they let go; a refused
// reservation is the holder's cue to refuse the data and count it. The accounting is an
// estimate of live heap bytes, not of RSS: the Go runtime returns freed memory to the OS
// later (Release hurries it after large releases). Safe for concurrent use.
type Budget struct {
	limit int64
	used  atomic.Int64
	peak  atomic.Int64

	mu        sync.Mutex
	freed     int64     // released since the last return of memory to the OS
	lastFree  time.Time // when memory was last returned
	returning bool
}

// freeAfter is how much must be released before Release returns memory to the OS, and
// freeEvery how often at most.
const (
	freeAfter = 64 << 20
	freeEvery = 10 * time.Second
)

// NewBudget returns a budget of limit bytes; a non-positive limit means no limit.
func NewBudget(limit int64) *Budget { return &Budget{limit: limit} }

// Reserve takes n bytes from the budget and reports whether they fit; when they do not,
// nothing is taken.
func (b *Budget) Reserve(n int64) bool {
	if b == nil || n <= 0 {
		return true
	}
	for {
		u := b.used.Load()
		if b.limit > 0 && u+n > b.limit {
			return false
		}
		if b.used.CompareAndSwap(u, u+n) {
			for p := b.peak.Load(); u+n > p && !b.peak.CompareAndSwap(p, u+n); p = b.peak.Load() {
			}
			return true
		}
	}
}

// Charge takes n bytes whether or not they fit: memory already held (a join's scratch
// buffers), so that Used tells the truth and later reservations are refused until it is
// released.
func (b *Budget) Charge(n int64) {
	if b == nil || n <= 0 {
		return
	}
	u := b.used.Add(n)
	for p := b.peak.Load(); u > p && !b.peak.CompareAndSwap(p, u); p = b.peak.Load() {
	}
}

// Release gives back n bytes reserved earlier. After large releases (64 MiB, at most every
// 10 s) it asks the runtime, on another goroutine, to return free memory to the OS, so that
// RSS falls soon after a flood of clients has gone rather than minutes later.
func (b *Budget) Release(n int64) {
	if b == nil || n <= 0 {
		return
	}
	b.used.Add(-n)
	b.mu.Lock()
	b.freed += n
	now := time.Now()
	start := b.freed >= freeAfter && now.Sub(b.lastFree) >= freeEvery && !b.returning
	if start {
		b.freed, b.lastFree, b.returning = 0, now, true
	}
	b.mu.Unlock()
	if start {
		go func() {
			debug.FreeOSMemory()
			b.mu.Lock()
			b.returning = false
			b.mu.Unlock()
		}()
	}
}

// Used returns the bytes reserved now.
func (b *Budget) Used() int64 {
	if b == nil {
		return 0
	}
	return b.used.Load()
}

// Peak returns the most bytes ever reserved at once.
func (b *Budget) Peak() int64 {
	if b == nil {
		return 0
	}
	return b.peak.Load()
}

// Limit returns the budget's size in bytes (0: no limit).
func (b *Budget) Limit() int64 {
	if b == nil || b.limit < 0 {
		return 0
	}
	return b.limit
}
