// Package tick gives the exporter's periodic loops one timetable: a Ticker ticks on whole
// multiples of its period of one clock, so loops whose periods divide one another (PM
// sampling's decode every 250 ms, the profiler watch every 100 ms, the idle check, GPM, NVML
// health) wake together instead of each at its own phase.
//
// Why: a Go process whose goroutines all sleep puts its sysmon thread to sleep too, and the
// first system call after that wakes it into a millisecond of 20 µs polls. Every separate
// wake-up of the exporter cost about 0.2 ms of CPU on the H100 machine (run CV: 55 fewer
// wake-ups a second saved 11.5 ms of CPU a second, docs/performance.md); wake-ups that fall
// together pay it once.
//
// On Linux a Ticker is a timerfd read through the runtime's network poller, not a Go timer:
// the monitor thread sleeps until the next Go timer is due, so each Go timer's expiry woke it
// too, besides the thread that ran the tick; a timerfd that fires wakes only the poller's
// thread, and the kernel re-arms it for the next multiple with no call of ours
// (docs/performance.md, "The timetable's timers"). Elsewhere, or where a timerfd cannot be
// made, a Go timer ticks on the same timetable.
package tick

import (
	"sync"
	"time"
)

// Ticker delivers a tick on C at each whole multiple of its period; like a time.Ticker it drops
// ticks for a slow receiver. Call Stop when done.
type Ticker struct {
	C <-chan time.Time
	c chan time.Time

	mu      sync.Mutex // fire runs on the timer's goroutine, the timerfd's reader on its own; both send under it
	period  time.Duration
	stopped bool
	fd      *timerFD    // the kernel's timer (Linux), or nil
	timer   *time.Timer // the Go timer where there is no timerFD
}

// New starts a Ticker of period d (> 0); its first tick is at the next multiple of d.
func New(d time.Duration) *Ticker {
	t := &Ticker{c: make(chan time.Time, 1), period: d}
	t.C = t.c
	t.mu.Lock() // fire may run before New returns
	defer t.mu.Unlock()
	t.start()
	return t
}

// kernelTimers is whether a Ticker tries a timerfd first (tests of the Go timers turn it off).
var kernelTimers = true

// start arms the kernel's timer, or a Go timer where none can be made; t.mu is held.
func (t *Ticker) start() {
	if kernelTimers {
		if fd, err := newTimerFD(); err == nil {
			if fd.set(t.period) == nil {
				t.fd = fd
				go t.read(fd)
				return
			}
			fd.close()
		}
	}
	if t.timer == nil {
		t.timer = time.AfterFunc(Until(clockNow(), t.period), t.fire)
	} else {
		t.timer.Reset(Until(clockNow(), t.period))
	}
}

// read delivers a tick each time the kernel's timer fires, until Stop closes it (or Reset
// replaces it); under t.mu, so that no tick follows Stop's return.
func (t *Ticker) read(fd *timerFD) {
	for fd.wait() == nil {
		t.mu.Lock()
		if t.fd == fd {
			t.send()
		}
		t.mu.Unlock()
	}
}

// fire delivers a tick and sets the Go timer to the next multiple of the period.
func (t *Ticker) fire() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.stopped && t.fd == nil {
		t.send()
		t.timer.Reset(Until(clockNow(), t.period))
	}
}

// send delivers a tick, dropped when the last one was not taken; t.mu is held.
func (t *Ticker) send() {
	select {
	case t.c <- time.Now():
	default:
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
	t.period = d
	if t.fd != nil && !t.stopped && t.fd.set(d) == nil {
		return
	}
	t.halt()
	t.stopped = false
	t.start()
}

// Stop ends the ticks: none is sent after it returns (one sent before may still be on C).
func (t *Ticker) Stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.halt()
	t.stopped = true
}

// halt stops whichever timer runs; t.mu is held.
func (t *Ticker) halt() {
	if t.fd != nil {
		t.fd.close() // its reader returns
		t.fd = nil
	}
	if t.timer != nil {
		t.timer.Stop()
	}
}

// Until is the time from now (a reading of the timetable's clock, as nanoseconds since its
// zero) to the next whole multiple of d (a full d when now is on one).
func Until(now time.Duration, d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return d - now%d
}
