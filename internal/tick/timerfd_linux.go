package tick

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// The timetable's clock is CLOCK_MONOTONIC: the kernel's timers fire on it (a step of the wall
// clock moves no tick), and the Go timers of the fallback are set from the same readings.
func clockNow() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) != nil {
		return time.Duration(time.Now().UnixNano())
	}
	return time.Duration(ts.Nano())
}

// timerFD is a non-blocking timerfd that the runtime's network poller waits on.
type timerFD struct{ f *os.File }

// newTimerFD makes a timerfd that fires at every whole multiple of d of CLOCK_MONOTONIC.
func newTimerFD(d time.Duration) (*timerFD, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	t := &timerFD{f: os.NewFile(uintptr(fd), "tick")}
	if err := t.set(d); err != nil {
		t.close()
		return nil, err
	}
	return t, nil
}

// set arms the timer for the next multiple of d and every d after it (the kernel re-arms it).
func (t *timerFD) set(d time.Duration) error {
	rc, err := t.f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = rc.Control(func(fd uintptr) {
		now := clockNow()
		spec := unix.ItimerSpec{
			Value:    unix.NsecToTimespec(int64(now + Until(now, d))),
			Interval: unix.NsecToTimespec(int64(d)),
		}
		serr = unix.TimerfdSettime(int(fd), unix.TFD_TIMER_ABSTIME, &spec, nil)
	})
	if err != nil {
		return err
	}
	return serr
}

// wait blocks in the network poller until the timer fires (however often it fired since the
// last wait), or returns the error of a closed timer.
func (t *timerFD) wait() error {
	var b [8]byte
	_, err := t.f.Read(b[:])
	return err
}

func (t *timerFD) close() { t.f.Close() }
