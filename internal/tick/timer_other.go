//go:build !linux

package tick

import (
	"errors"
	"time"
)

// clockNow reads the wall clock: without a timerfd the Go timers tick on its multiples.
func clockNow() time.Duration { return time.Duration(time.Now().UnixNano()) }

type timerFD struct{}

func newTimerFD() (*timerFD, error)       { return nil, errors.ErrUnsupported }
func (*timerFD) set(time.Duration) error  { return errors.ErrUnsupported }
func (*timerFD) once(time.Duration) error { return errors.ErrUnsupported }
func (*timerFD) wait() error              { return errors.ErrUnsupported }
func (*timerFD) close()                   {}
