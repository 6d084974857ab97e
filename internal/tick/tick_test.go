package tick

import (
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"
)

func TestUntil(t *testing.T) {
	const base = 1_800_000 * time.Second // a whole second of the clock
	for _, tc := range []struct {
		at   time.Duration // after base
		d    time.Duration
		want time.Duration
	}{
		{0, 100 * time.Millisecond, 100 * time.Millisecond}, // on a multiple: a full period
		{1, 100 * time.Millisecond, 100*time.Millisecond - 1},
		{30 * time.Millisecond, 100 * time.Millisecond, 70 * time.Millisecond},
		{130 * time.Millisecond, 200 * time.Millisecond, 70 * time.Millisecond},
		{999 * time.Millisecond, time.Second, time.Millisecond},
		{0, 0, 0},
	} {
		if got := Until(base+tc.at, tc.d); got != tc.want {
			t.Errorf("Until(+%v, %v) = %v, want %v", tc.at, tc.d, got, tc.want)
		}
	}
	// Periods that divide one another share their ticks: every multiple of 200 ms is one of 100 ms.
	for at := time.Duration(0); at < time.Second; at += 7 * time.Millisecond {
		now := base + at
		a, b := now+Until(now, 100*time.Millisecond), now+Until(now, 200*time.Millisecond)
		if b%(100*time.Millisecond) != 0 || a > b {
			t.Fatalf("at +%v: the 200 ms tick %v is not one of the 100 ms ticks (next %v)", at, b, a)
		}
	}
}

// TestTicker: ticks come near whole multiples of the period of the timetable's clock (most of
// them: a loaded machine may be late), Reset changes the period, Stop ends them.
func TestTicker(t *testing.T) {
	t.Run("kernel", testTicker)
	t.Run("go", func(t *testing.T) {
		kernelTimers = false
		defer func() { kernelTimers = true }()
		testTicker(t)
	})
}

func testTicker(t *testing.T) {
	const d = 50 * time.Millisecond
	tk := New(d)
	defer tk.Stop()
	early := 0
	for range 8 {
		select {
		case <-tk.C:
			if clockNow()%d < d/2 {
				early++
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no tick in 5 s")
		}
	}
	if early < 5 {
		t.Errorf("%d of 8 ticks in the first half of their period after a multiple of %v; want most", early, d)
	}
	tk.Reset(10 * time.Millisecond)
	start := time.Now()
	for range 5 {
		<-tk.C
	}
	if el := time.Since(start); el > 40*d {
		t.Errorf("5 ticks at 10 ms took %v after Reset", el)
	}
	tk.Stop()
	select { // one tick may have been delivered before Stop
	case <-tk.C:
	default:
	}
	select {
	case <-tk.C:
		t.Error("a tick after Stop")
	case <-time.After(100 * time.Millisecond):
	}
	tk.Reset(10 * time.Millisecond) // the period it had: a stopped Ticker starts again all the same
	select {
	case <-tk.C:
	case <-time.After(5 * time.Second):
		t.Error("no tick after Reset of a stopped Ticker")
	}
}

// TestTickersShareTheirWakeUps: tickers whose periods divide one another, made at different
// times, tick at the same instants of the clock (the point of the timetable).
func TestTickersShareTheirWakeUps(t *testing.T) {
	fast := New(20 * time.Millisecond)
	defer fast.Stop()
	time.Sleep(7 * time.Millisecond)
	slow := New(60 * time.Millisecond)
	defer slow.Stop()
	for range 3 {
		select {
		case <-slow.C:
		case <-time.After(5 * time.Second):
			t.Fatal("no tick in 5 s")
		}
		// The tick came at a multiple of 60 ms; the 20 ms ticker's fired at the same instant.
		if ph := clockNow() % (60 * time.Millisecond); ph > 30*time.Millisecond {
			t.Logf("a late tick (%v after its multiple): a loaded machine", ph)
			continue
		}
		select {
		case <-fast.C:
		case <-time.After(15 * time.Millisecond):
			t.Error("the 20 ms ticker did not tick with the 60 ms one")
		}
		for len(fast.C) > 0 {
			<-fast.C
		}
	}
}

// TestStopReleasesTheTimer: on Linux a Ticker is a timerfd with a reader; Stop closes the one
// and ends the other, so loops that start and stop tickers leak neither.
func TestStopReleasesTheTimer(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("timerfd is Linux's")
	}
	tk := New(time.Hour)
	if tk.fd == nil {
		t.Fatal("no timerfd on Linux: the ticker fell back to a Go timer")
	}
	tk.Stop()
	fds := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	fd0, g0 := fds(), runtime.NumGoroutine()
	for range 200 {
		tk := New(time.Hour)
		tk.Reset(time.Minute)
		tk.Stop()
		tk.Reset(time.Minute) // started again
		tk.Stop()
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > g0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if fd, g := fds(), runtime.NumGoroutine(); fd > fd0 || g > g0 {
		t.Errorf("after 200 tickers started, reset and stopped: %d open files (was %d), %d goroutines (was %d)", fd, fd0, g, g0)
	}
}

// TestSleeper: a Sleeper sleeps at least what it is asked (on the kernel's timer on Linux,
// armed again by each Sleep), not much longer, and Close releases its timer.
func TestSleeper(t *testing.T) {
	for _, kernel := range []bool{true, false} {
		t.Run(fmt.Sprintf("kernel=%v", kernel), func(t *testing.T) {
			defer func(k bool) { kernelTimers = k }(kernelTimers)
			kernelTimers = kernel
			s := NewSleeper()
			defer s.Close()
			if got := s.fd != nil; got != (kernel && runtime.GOOS == "linux") {
				t.Fatalf("kernel timer %v, want %v", got, kernel && runtime.GOOS == "linux")
			}
			for _, d := range []time.Duration{30 * time.Millisecond, time.Millisecond, 20 * time.Millisecond} {
				start := time.Now()
				s.Sleep(d)
				if got := time.Since(start); got < d || got > d+time.Second {
					t.Errorf("Sleep(%v) took %v", d, got)
				}
			}
		})
	}
	if runtime.GOOS != "linux" {
		return
	}
	fds := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	fd0 := fds()
	for range 100 {
		s := NewSleeper()
		s.Sleep(time.Microsecond)
		s.Close()
	}
	if fd := fds(); fd > fd0 {
		t.Errorf("after 100 sleepers closed: %d open files, was %d", fd, fd0)
	}
}
