package pmsample

import (
	"encoding/json"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/internal/testutil"
	"github.com/cupti-exporter/cupti-exporter/pmsample/internal/pmtest"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
)

func TestGiveWayReleasesAndTakesBack(t *testing.T) {
	pm, other := newScriptPM(), newScriptPM()
	s := newTestSampler(t, []*scriptPM{pm, other}, oneGroup)
	var logs testutil.SyncBuffer
	s.runners[0].log = slog.New(slog.NewTextHandler(&logs, nil))
	c := start(t, s)
	eventually(t, "sampling", func() bool { return c.sum(0, samplesOf) > 0 && c.sum(1, samplesOf) > 0 })

	ncu := pmdata.Holder{Tool: "ncu", PID: 4242, Comm: "ncu"}
	s.GiveWay(0, ncu)
	eventually(t, "yielded", func() bool { return s.Status()[0].State == pmdata.StateYielded })
	// When the counters were free for it, and what the let-go took (Stop and the last decode;
	// Disable): the log a give-way lost to a profiler's early check is read by.
	free := regexp.MustCompile(`msg="pm counters free for the profiler" tool=ncu pid=4242 after_give_way=\S+ stop_last_decode=[1-9]\S* disable=\S+`)
	if !free.MatchString(logs.String()) {
		t.Fatalf("log %q: want a line when the counters were free, with the let-go's durations", logs.String())
	}
	st := s.Status()[0]
	if st.Ready || st.Holder == nil || *st.Holder != ncu || !strings.Contains(st.Reason, "ncu (pid 4242, ncu)") {
		t.Fatalf("yielded status = %+v, want not ready, naming the holder", st)
	}
	if !pm.released() {
		t.Fatalf("session still held after GiveWay: %v", pm.log())
	}
	if log := strings.Join(pm.log(), " "); !strings.HasSuffix(log, "Stop Stop Disable") {
		t.Fatalf("calls %q: want the release to end Stop (drain), Stop, Disable", log)
	}
	if s.Status()[1].State != pmdata.StateSampling {
		t.Fatal("giving GPU 0 away stopped GPU 1")
	}
	// A second holder of the same GPU (the first one's target, another profiler): named, not counted.
	s.GiveWay(0, pmdata.Holder{Tool: "nsys", PID: 7, Comm: "nsys"})
	if st := s.Status()[0]; st.Holder == nil || st.Holder.PID != 7 || !strings.Contains(st.Reason, "nsys (pid 7, nsys)") {
		t.Fatalf("status after a second give-way = %+v, want pid 7 named", st)
	}
	n := c.sum(0, samplesOf)
	time.Sleep(30 * time.Millisecond)
	if c.sum(0, samplesOf) != n {
		t.Fatal("samples while given away")
	}

	s.TakeBack(0)
	eventually(t, "samples after the take-back", func() bool { return c.sum(0, samplesOf) > n && s.Status()[0].State == pmdata.StateSampling })
	// (the script's clock stands still while released: the gap to the first sample after the
	// take-back is what is lost, with the give-way's reason)
	if lost := lostOf(c, 0, "yielded"); lost <= 0 {
		t.Fatalf("no time lost as yielded (%v)", lost)
	}
	if h := s.Status()[0].Holder; h != nil {
		t.Fatalf("holder %+v after the take-back", h)
	}
	s.TakeBack(0) // not given away: nothing
	if got := s.GiveWayCounts(); len(got) != 1 || got[0]["ncu"] != 1 || got[0]["nsys"] != 0 {
		t.Fatalf("give-way counts = %v, want GPU 0: ncu 1", got)
	}
	v, ok := pmtest.ValueOf(NewGiveWayProducer(s).Snapshot(), s.Devices()[0], "cupti_pm_give_ways_total", "ncu")
	if !ok || v != 1 {
		t.Fatalf("cupti_pm_give_ways_total{gpu=0,tool=ncu} = %v, %v; want 1", v, ok)
	}
	if _, ok := pmtest.ValueOf(NewGiveWayProducer(s).Snapshot(), s.Devices()[1], "cupti_pm_give_ways_total", "ncu"); ok {
		t.Fatal("a give-way series for GPU 1, which was never given away")
	}
	// The state and holder in the pause API's JSON, which the GPM fallback reads too.
	b, _ := json.Marshal(pmdata.DeviceStatus{State: pmdata.StateYielded, Holder: &ncu})
	if !strings.Contains(string(b), `"holder":{"tool":"ncu","pid":4242,"comm":"ncu"}`) {
		t.Fatalf("json %s", b)
	}
}

// lostOf sums the lost time (ns) of a reason on a device.
func lostOf(c *collector, dev int, reason string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ns uint64
	for _, b := range c.batches {
		for _, l := range b.Lost {
			if b.Device == dev && l.Reason == reason {
				ns += l.End - l.Start
			}
		}
	}
	return ns
}

func TestGiveWayPauseWinsAndIdleReleaseWaits(t *testing.T) {
	pm := newScriptPM()
	s := newTestSampler(t, []*scriptPM{pm}, oneGroup)
	var logs testutil.SyncBuffer
	s.runners[0].log = slog.New(slog.NewTextHandler(&logs, nil))
	c := start(t, s)
	eventually(t, "sampling", func() bool { return c.sum(0, samplesOf) > 0 })
	if err := s.Pause(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	s.GiveWay(0, pmdata.Holder{Tool: "ncu", PID: 1, Comm: "ncu"})
	time.Sleep(20 * time.Millisecond)
	if st := s.Status()[0].State; st != pmdata.StatePaused {
		t.Fatalf("state %s: a pause must win over a give-way", st)
	}
	s.Resume()
	eventually(t, "yielded after the resume", func() bool { return s.Status()[0].State == pmdata.StateYielded })
	// The pause let the session go before the give-way: no let-go of its own to report.
	if !strings.Contains(logs.String(), `pm counters free for the profiler" tool=ncu pid=1 after_give_way=`) ||
		!strings.Contains(logs.String(), "stop_last_decode=0s disable=0s") {
		t.Fatalf("log %q: want the counters free with no let-go of the give-way's own", logs.String())
	}
	// The idle controller sees the profiler's new process and asks for the session back: the
	// give-way holds it off; after the take-back the device samples.
	s.Release(0, "idle")
	s.Reacquire(0, time.Now())
	time.Sleep(20 * time.Millisecond)
	if st := s.Status()[0].State; st != pmdata.StateYielded || !pm.released() {
		t.Fatalf("state %s, released %v: a reacquire must not take the counters from a profiler", st, pm.released())
	}
	n := c.sum(0, samplesOf)
	s.TakeBack(0)
	eventually(t, "sampling after the take-back", func() bool { return s.Status()[0].State == pmdata.StateSampling && c.sum(0, samplesOf) > n })
	// Released for idleness while given away: back to idle-released, not sampling.
	s.GiveWay(0, pmdata.Holder{Tool: "ncu", PID: 2, Comm: "ncu"})
	eventually(t, "yielded", func() bool { return s.Status()[0].State == pmdata.StateYielded })
	s.Release(0, "idle again")
	s.TakeBack(0)
	eventually(t, "idle-released after the take-back", func() bool { return s.Status()[0].State == pmdata.StateIdle })
}

func TestGiveWayNotRunning(t *testing.T) {
	s := newTestSampler(t, []*scriptPM{newScriptPM()}, oneGroup)
	s.GiveWay(0, pmdata.Holder{Tool: "ncu", PID: 3, Comm: "ncu"})
	if st := s.Status()[0]; st.State != pmdata.StateYielded || st.Holder == nil {
		t.Fatalf("status %+v before Run, want yielded naming the holder", st)
	}
	s.GiveWay(9, pmdata.Holder{Tool: "ncu"}) // no such device: nothing
	s.TakeBack(9)
}

func TestBusyTriesAgainAtTheBusyPoll(t *testing.T) {
	pm := newScriptPM()
	pm.busyLeft = 1 << 30
	s := newTestSampler(t, []*scriptPM{pm}, oneGroup, WithBusyPoll(20*time.Millisecond), WithBackoff(time.Hour, time.Hour))
	c := start(t, s)
	eventually(t, "busy", func() bool { return s.Status()[0].State == pmdata.StateBusy })
	time.Sleep(150 * time.Millisecond)
	n := strings.Count(strings.Join(pm.log(), " "), "SetConfig")
	if n < 4 || n > 12 {
		t.Fatalf("%d attempts in about 150 ms, want one every 20 ms (not the hour-long backoff)", n)
	}
	pm.set(func(p *scriptPM) { p.busyLeft = 0 })
	t0 := time.Now()
	eventually(t, "sampling", func() bool { return c.sum(0, samplesOf) > 0 })
	if d := time.Since(t0); d > 500*time.Millisecond {
		t.Fatalf("sampling %v after the counters freed", d)
	}
	if lost := lostOf(c, 0, "busy"); lost == 0 {
		t.Fatal("no time lost as busy")
	}
}
