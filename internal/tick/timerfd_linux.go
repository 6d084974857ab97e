package tick

import (
	"os"
	"syscall"
	"time"
	"unsafe"

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
type timerFD struct {
	f  *os.File
	rc syscall.RawConn
}

// newTimerFD makes a timerfd of CLOCK_MONOTONIC, disarmed until set or once arms it.
func newTimerFD() (*timerFD, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	t := &timerFD{f: os.NewFile(uintptr(fd), "tick")}
	if t.rc, err = t.f.SyscallConn(); err != nil {
		t.close()
		return nil, err
	}
	return t, nil
}

// set arms the timer for the next multiple of d and every d after it (the kernel re-arms it).
func (t *timerFD) set(d time.Duration) error {
	now := clockNow()
	return t.settime(unix.TFD_TIMER_ABSTIME, unix.ItimerSpec{
		Value:    unix.NsecToTimespec(int64(now + Until(now, d))),
		Interval: unix.NsecToTimespec(int64(d)),
	})
}

// once arms the timer to fire once, d from now (not periodic, off the timetable).
func (t *timerFD) once(d time.Duration) error {
	return t.settime(0, unix.ItimerSpec{Value: unix.NsecToTimespec(int64(max(d, 1)))})
}

// settime arms the timer with spec (flags: timerfd_settime's).
func (t *timerFD) settime(flags int, spec unix.ItimerSpec) error {
	var serr error
	if err := t.rc.Control(func(fd uintptr) { serr = unix.TimerfdSettime(int(fd), flags, &spec, nil) }); err != nil {
		return err
	}
	return serr
}

// wait blocks in the network poller until the timer fires (however often it fired since the
// last wait), or returns the error of a closed timer.
//
// The expirations are read with a raw system call, which the Go scheduler is not told of: a
// system call made the usual way wakes the runtime's monitor thread (sysmon) from its deep sleep
// when every goroutine sleeps, as they do between ticks, so each tick of each loop woke it too.
// A raw read is safe here: the timerfd is non-blocking, and a read of it only copies a counter.
func (t *timerFD) wait() error {
	var b [8]byte
	var rerr error
	err := t.rc.Read(func(fd uintptr) bool {
		for {
			_, _, errno := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
			switch errno {
			case 0:
				return true
			case syscall.EAGAIN: // not fired yet: park in the poller
				return false
			case syscall.EINTR:
				continue
			}
			rerr = errno
			return true
		}
	})
	if err != nil {
		return err
	}
	return rerr
}

func (t *timerFD) close() { t.f.Close() }
