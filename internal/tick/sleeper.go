package tick

import "time"

// Sleeper sleeps on a kernel timer read through the runtime's network poller where one can be
// made, so that a loop that pauses between bursts of work (the give-way watch's looks at execs)
// does not wake the runtime's monitor thread as a Go timer does (package doc). It is for one
// goroutine at a time; Close it when done.
type Sleeper struct {
	fd *timerFD // nil: time.Sleep
}

// NewSleeper returns a Sleeper.
func NewSleeper() *Sleeper {
	s := &Sleeper{}
	if kernelTimers {
		if fd, err := newTimerFD(); err == nil { // armed by each Sleep
			s.fd = fd
		}
	}
	return s
}

// Sleep pauses the calling goroutine for d (at least a nanosecond on the kernel's timer).
func (s *Sleeper) Sleep(d time.Duration) {
	if s.fd == nil || s.fd.once(d) != nil || s.fd.wait() != nil {
		time.Sleep(d)
	}
}

// Close releases the kernel's timer.
func (s *Sleeper) Close() {
	if s.fd != nil {
		s.fd.close()
	}
}
