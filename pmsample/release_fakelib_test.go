//go:build cgo

package pmsample

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"

	"github.com/cupti-exporter/cupti-exporter/internal/cupti/cuptitest"
)

// Against the fake libcupti: an idle release lets go of the session (as a pause does) while
// the other device samples on, and Reacquire takes it back.
func TestSamplerFakeLibIdleRelease(t *testing.T) {
	r := runFake(t, "")
	eventually(t, "sampling", func() bool { return r.c.sum(0, samplesOf) > 0 && r.c.sum(1, samplesOf) > 0 })
	var changes atomic.Int64 // OnStateChange: what GPM filling in waits on instead of polling
	r.s.OnStateChange(func() { changes.Add(1) })
	r.s.Release(0, "idle for 5s")
	eventually(t, "one session released", func() bool {
		return cuptitest.Query(t, "sessions") == 1 && r.s.Status()[0].State == pmdata.StateIdle
	})
	if st := r.s.Status(); !st[0].Ready || st[1].State != pmdata.StateSampling {
		t.Fatalf("status = %+v", st)
	}
	if n := changes.Load(); n != 1 {
		t.Fatalf("state changes told after the release: %d, want 1", n)
	}
	r.s.Reacquire(0, time.Now())
	eventually(t, "session retaken", func() bool {
		return cuptitest.Query(t, "sessions") == 2 && r.s.Status()[0].State == pmdata.StateSampling
	})
	if n := changes.Load(); n != 2 {
		t.Fatalf("state changes told after the retake: %d, want 2", n)
	}
	if is := r.s.IdleStats()[0]; is.Releases != 1 || is.Reacquires != 1 || is.ReleasedSeconds <= 0 {
		t.Fatalf("idle stats = %+v", is)
	}
}

// A duty cycle releases the session for the off phase of every cycle (the fake library then
// holds no session) and counts that time as lost with reason duty_cycle, about the off share
// of the run; samples flow again in every sampled phase.
func TestSamplerFakeLibDutyCycle(t *testing.T) {
	r := runFake(t, "", WithDutyCycle(0.5, time.Second))
	t0 := time.Now()
	eventually(t, "samples", func() bool { return r.c.sum(0, samplesOf) > 0 })
	eventually(t, "both sessions released for the off phase", func() bool { return cuptitest.Query(t, "sessions") == 0 })
	if st := r.s.Status()[0]; st.State != pmdata.StateSampling || !st.Ready {
		t.Fatalf("status in the off phase = %+v, want sampling and ready", st)
	}
	before := r.c.sum(0, samplesOf)
	eventually(t, "sampling again", func() bool { return r.c.sum(0, samplesOf) > before+100 })
	eventually(t, "a second off phase", func() bool { return cuptitest.Query(t, "sessions") == 0 && time.Since(t0) > 1500*time.Millisecond })
	eventually(t, "the second off phase accounted", func() bool { return dutyLost(r.c, 0) > 900*time.Millisecond })
	elapsed := time.Since(t0)
	if lost := dutyLost(r.c, 0); lost > elapsed/2+300*time.Millisecond {
		t.Fatalf("duty_cycle losses %v in %v: more than the off half", lost, elapsed)
	}
}

// dutyLost is the time device dev lost to the duty cycle so far.
func dutyLost(c *collector, dev int) time.Duration {
	var ns uint64
	c.sum(dev, func(b pmdata.Batch) int {
		for _, l := range b.Lost {
			if l.Reason == "duty_cycle" {
				ns += l.End - l.Start
			}
		}
		return 0
	})
	return time.Duration(ns)
}

// An idle release during a duty cycle's off phase wins over the next sampled phase: the
// device stays released (the other device samples on) until Reacquire.
func TestSamplerFakeLibDutyCycleIdleRelease(t *testing.T) {
	r := runFake(t, "", WithDutyCycle(0.5, time.Second))
	eventually(t, "the off phase", func() bool { return r.c.sum(0, samplesOf) > 0 && cuptitest.Query(t, "sessions") == 0 })
	r.s.Release(0, "idle for 5s")
	eventually(t, "device 0 idle-released", func() bool { return r.s.Status()[0].State == pmdata.StateIdle })
	eventually(t, "device 1 sampling again after the off phase, device 0 still released", func() bool {
		return cuptitest.Query(t, "sessions") == 1 && r.s.Status()[0].State == pmdata.StateIdle && r.s.Status()[1].State == pmdata.StateSampling
	})
	before := r.c.sum(0, samplesOf)
	r.s.Reacquire(0, time.Now())
	eventually(t, "device 0 sampling again", func() bool { return r.c.sum(0, samplesOf) > before+50 })
}
