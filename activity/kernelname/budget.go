package kernelname

import (
	"sync"
	"time"
)

// Budget bounds the CPU time spent demangling: a token bucket that holds at most capacity
// and refills at rate per second. A name is demangled only while the bucket is not empty,
// and the thread CPU time its demangling took is taken out (the bucket can go below zero
// by one name per goroutine that was demangling at the time, each bounded by check).
// Safe for concurrent use.
type Budget struct {
	capacity, rate time.Duration
	now            func() time.Time

	mu     sync.Mutex
	tokens time.Duration
	last   time.Time
}

// NewBudget returns a full Budget of capacity that refills at rate per second.
func NewBudget(capacity, rate time.Duration) *Budget {
	return &Budget{capacity: capacity, rate: rate, now: time.Now, tokens: capacity, last: time.Now()}
}

// Short is the package's Short, but a name that check admits is demangled only while the
// budget lasts, else it is shortened as text and reason is OverBudget.
func (b *Budget) Short(mangled string) (label, reason string) {
	return short(mangled, b)
}

// allow refills the bucket and reports whether it is not empty.
func (b *Budget) allow() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	if d := now.Sub(b.last); d > 0 {
		b.tokens = min(b.capacity, b.tokens+time.Duration(float64(b.rate)*d.Seconds()))
		b.last = now
	}
	return b.tokens > 0
}

// charge takes d out of the bucket.
func (b *Budget) charge(d time.Duration) {
	b.mu.Lock()
	b.tokens -= d
	b.mu.Unlock()
}
