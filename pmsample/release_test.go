package pmsample

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/pmsample/aggregate"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"

	"github.com/cupti-exporter/cupti-exporter/mapping"
)

func TestReleaseIdleThenReacquire(t *testing.T) {
	pm, other := newScriptPM(), newScriptPM()
	s := newTestSampler(t, []*scriptPM{pm, other}, oneGroup)
	c := start(t, s)
	eventually(t, "sampling", func() bool { return c.sum(0, samplesOf) > 0 })

	s.Release(0, "idle for 60s")
	eventually(t, "idle-released", func() bool { return s.Status()[0].State == pmdata.StateIdle })
	st := s.Status()[0]
	if !st.Ready || st.Reason != "idle for 60s" {
		t.Fatalf("released status = %+v, want ready with the reason", st)
	}
	if !pm.released() {
		t.Fatalf("session still held after Release: %v", pm.log())
	}
	if s.Status()[1].State != pmdata.StateSampling {
		t.Fatal("releasing device 0 stopped device 1")
	}
	n := c.sum(0, samplesOf)
	time.Sleep(30 * time.Millisecond)
	if c.sum(0, samplesOf) != n {
		t.Fatal("samples arrived while released")
	}
	s.Release(0, "again") // no-op
	if is := s.IdleStats()[0]; is.Releases != 1 || !is.Released || is.ReleasedSeconds < 0.03 {
		t.Fatalf("idle stats while released = %+v", is)
	}

	since := time.Now().Add(-50 * time.Millisecond) // the activity began 50 ms before it was seen
	t0 := time.Now()
	s.Reacquire(0, since)
	eventually(t, "samples after reacquire", func() bool { return c.sum(0, samplesOf) > n })
	if d := time.Since(t0); d > time.Second {
		t.Fatalf("reacquire took %v", d)
	}
	if st := s.Status()[0]; st.State != pmdata.StateSampling {
		t.Fatalf("state after reacquire = %s", st.State)
	}
	is := s.IdleStats()[0]
	if is.Reacquires != 1 || is.Released {
		t.Fatalf("idle stats after reacquire = %+v", is)
	}
	// The script's clock is not the wall clock: the first sample's start decides the missed
	// time; it is counted once and is positive when the first sample came after since.
	if is.MissedSeconds < 0 {
		t.Fatalf("missed = %v", is.MissedSeconds)
	}
	s.Reacquire(0, time.Time{}) // not released: no-op
	if s.IdleStats()[0].Reacquires != 1 {
		t.Fatal("reacquire of a sampling device counted")
	}
}

func TestReleaseMissedTimeCounted(t *testing.T) {
	pm := newScriptPM()
	pm.clock = uint64(time.Now().UnixNano()) // samples on the wall clock, as CUPTI's are
	s := newTestSampler(t, []*scriptPM{pm}, oneGroup)
	c := start(t, s)
	eventually(t, "sampling", func() bool { return c.sum(0, samplesOf) > 0 })
	s.Release(0, "idle")
	eventually(t, "idle-released", func() bool { return s.Status()[0].State == pmdata.StateIdle })
	time.Sleep(300 * time.Millisecond) // released time: must not show as a loss
	pm.set(func(p *scriptPM) { p.clock = uint64(time.Now().Add(200 * time.Millisecond).UnixNano()) })
	s.Reacquire(0, time.Now())
	eventually(t, "missed counted", func() bool { return s.IdleStats()[0].MissedSeconds > 0 })
	if m := s.IdleStats()[0].MissedSeconds; m < 0.15 || m > 0.5 {
		t.Fatalf("missed = %.3f s, want about 0.2 s (activity to first sample)", m)
	}
	// The same span is a loss with reason idle_release; the released time is no loss at all.
	eventually(t, "samples after reacquire", func() bool { return c.sum(0, samplesOf) > 10 })
	lost := map[string]float64{}
	c.mu.Lock()
	for _, b := range c.batches {
		for _, l := range b.Lost {
			lost[l.Reason] += float64(l.End-l.Start) / 1e9
		}
	}
	c.mu.Unlock()
	if v := lost["idle_release"]; v < 0.15 || v > 0.5 {
		t.Fatalf("idle_release loss = %.3f s, want about 0.2 s; losses %v", v, lost)
	}
	delete(lost, "idle_release")
	for reason, v := range lost {
		if v > 0.05 {
			t.Errorf("loss %s = %.3f s: released time counted as lost", reason, v)
		}
	}
}

func TestReleaseUserPauseWins(t *testing.T) {
	pm := newScriptPM()
	s := newTestSampler(t, []*scriptPM{pm}, oneGroup)
	c := start(t, s)
	eventually(t, "sampling", func() bool { return c.sum(0, samplesOf) > 0 })
	if err := s.Pause(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	s.Release(0, "idle")
	s.Reacquire(0, time.Now()) // activity: must not retake the counters of a paused device
	time.Sleep(30 * time.Millisecond)
	if st := s.Status()[0]; st.State != pmdata.StatePaused || !pm.released() {
		t.Fatalf("state %s, released %v: idle logic overrode a user pause", st.State, pm.released())
	}
	// Released while paused: Resume leaves it released until activity.
	s.Release(0, "idle")
	s.Resume()
	eventually(t, "idle-released after resume", func() bool { return s.Status()[0].State == pmdata.StateIdle })
	if !pm.released() {
		t.Fatal("resume retook the counters of an idle-released device")
	}
	s.Reacquire(0, time.Now())
	eventually(t, "sampling", func() bool { return s.Status()[0].State == pmdata.StateSampling })
}

func TestReleaseNotRunning(t *testing.T) {
	s := newTestSampler(t, []*scriptPM{newScriptPM()}, oneGroup)
	s.Release(0, "idle")
	if st := s.Status()[0]; st.State != pmdata.StateIdle || !st.Ready {
		t.Fatalf("status = %+v", st)
	}
	s.Release(7, "no such device") // ignored
}

func TestReleaseStateAndIdleMetrics(t *testing.T) {
	m, err := mapping.New()
	if err != nil {
		t.Fatal(err)
	}
	s := newTestSampler(t, []*scriptPM{newScriptPM()}, oneGroup)
	s.Release(0, "idle")
	agg := aggregate.New(m, s.Devices(), nil, nil, aggregate.WithStatus(s.Status))
	var got []string
	for _, f := range agg.Snapshot().Families {
		if f.Desc.Name == "cupti_pm_sampling_state" {
			for _, smp := range f.Samples {
				if smp.Value == 1 {
					got = append(got, smp.LabelValues[len(smp.LabelValues)-1])
				}
			}
		}
	}
	if strings.Join(got, ",") != "idle-released" {
		t.Fatalf("states at 1 = %v, want idle-released", got)
	}
	fams := NewIdleProducer(s).Snapshot().Families
	want := map[string]float64{"cupti_pm_idle_releases_total": 1, "cupti_pm_idle_reacquires_total": 0, "cupti_pm_idle_missed_seconds_total": 0}
	for _, f := range fams {
		if len(f.Samples) != 1 || f.Samples[0].LabelValues[0] != "0" {
			t.Fatalf("%s: samples %+v", f.Desc.Name, f.Samples)
		}
		if w, ok := want[f.Desc.Name]; ok && f.Samples[0].Value != w {
			t.Errorf("%s = %v, want %v", f.Desc.Name, f.Samples[0].Value, w)
		}
		delete(want, f.Desc.Name)
	}
	if len(want) != 0 {
		t.Fatalf("families missing: %v", want)
	}
}
