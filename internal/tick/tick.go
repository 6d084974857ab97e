// Package tick gives the exporter's periodic loops one timetable: a Ticker ticks on whole
// multiples of its period since the Unix epoch, so loops whose periods divide one another (PM
// sampling's decode every 100 ms, the profiler watch every 100 ms, the idle check, GPM, NVML
// health) wake together instead of each at its own phase.
//
// Why: a Go process whose goroutines all sleep puts its sysmon thread to sleep too, and the
// first system call after that wakes it into a millisecond of 20 µs polls. Every separate
// wake-up of the exporter cost about 0.2 ms of CPU on the H100 machine (run CV: 55 fewer
// wake-ups a second saved 11.5 ms of CPU a second, docs/performance.md); wake-ups that fall
// together pay it once.
package tick

import (
	"sync"
	"time"
)

// Ticker delivers a tick on C at each whole multiple of its period (wall clock); like a
// time.Ticker it drops ticks for a slow receiver. Call Stop when done.
type Ticker struct {
	C     <-chan time.Time
	c     chan time.Time
	timer *time.Timer
	now   func() time.Time

	mu      sync.Mutex // fire runs on the timer's goroutine
	period  time.Duration
	stopped bool
}

// New starts a Ticker of period d (> 0); its first tick is at the next multiple of d.
func New(d time.Duration) *Ticker {
	t := &Ticker{c: make(chan time.Time, 1), period: d, now: time.Now}
	t.C = t.c
	t.mu.Lock() // fire may run before AfterFunc returns
	defer t.mu.Unlock()
	t.timer = time.AfterFunc(Until(t.now(), d), t.fire)
	return t
}

// fire delivers a tick (dropped when the last one was not taken) and sets the timer to the
// next multiple of the period.
func (t *Ticker) fire() {
	now := t.now()
	select {
	case t.c <- now:
	default:
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.stopped {
		t.timer.Reset(Until(now, t.period))
	}
}

// Reset changes the period; the next tick is at the next multiple of d. A running Ticker
// already of period d is left as it is, so a loop may Reset to the period it wants each time.
func (t *Ticker) Reset(d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if d == t.period && !t.stopped {
		return
	}
	t.period, t.stopped = d, false
	t.timer.Reset(Until(t.now(), d))
}

// Stop ends the ticks (one already delivered may still be on C).
func (t *Ticker) Stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopped = true
	t.timer.Stop()
}

// Until is the time from now to the next whole multiple of d since the Unix epoch (a full d
// when now is on one).
func Until(now time.Time, d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	n := now.UnixNano()
	return time.Duration(d.Nanoseconds() - n%d.Nanoseconds())
}
