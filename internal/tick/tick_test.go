package tick

import (
	"testing"
	"time"
)

func TestUntil(t *testing.T) {
	base := time.Unix(1_800_000_000, 0) // a whole second
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
		if got := Until(base.Add(tc.at), tc.d); got != tc.want {
			t.Errorf("Until(+%v, %v) = %v, want %v", tc.at, tc.d, got, tc.want)
		}
	}
	// Periods that divide one another share their ticks: every multiple of 200 ms is one of 100 ms.
	for at := time.Duration(0); at < time.Second; at += 7 * time.Millisecond {
		now := base.Add(at)
		a, b := now.Add(Until(now, 100*time.Millisecond)), now.Add(Until(now, 200*time.Millisecond))
		if b.UnixNano()%int64(100*time.Millisecond) != 0 || a.After(b) {
			t.Fatalf("at +%v: the 200 ms tick %v is not one of the 100 ms ticks (next %v)", at, b, a)
		}
	}
}

// TestTicker: ticks come near whole multiples of the period (most of them: a loaded machine
// may be late), Reset changes the period, Stop ends them.
func TestTicker(t *testing.T) {
	const d = 50 * time.Millisecond
	tk := New(d)
	defer tk.Stop()
	early := 0
	for range 8 {
		select {
		case at := <-tk.C:
			if at.UnixNano()%int64(d) < int64(d/2) {
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
