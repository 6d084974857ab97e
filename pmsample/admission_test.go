//go:build cgo

package pmsample

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/pmsample/internal/pmtest"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
)

func TestAdmissionVerdict(t *testing.T) {
	var a admission
	now := time.Unix(0, 0)
	// 120 us per sample at 100 us: not sustainable; 120 / 0.6 = 200 us suggested.
	for i := range 10 {
		v, ok := a.observe(now.Add(time.Duration(i)*100*time.Millisecond), 120*time.Millisecond, 1000, 100*time.Microsecond)
		if i < admissionMinBatches-1 && ok {
			t.Fatalf("verdict after %d batches", i+1)
		}
		if ok {
			if !v.overloaded || v.suggested != 200*time.Microsecond || int(v.sustainable) != 7500 {
				t.Fatalf("verdict = %+v; want overloaded, 7500/s sustainable, 200us suggested", v)
			}
			if _, again := a.observe(now, time.Millisecond, 10, time.Millisecond); again {
				t.Fatal("a second verdict without reset")
			}
			break
		}
	}
	a.reset()
	var v verdict
	for i := range 3 {
		v, _ = a.observe(now.Add(time.Duration(i)*time.Second), 45*time.Millisecond, 1000, time.Millisecond)
	}
	if v.overloaded || v.suggested != time.Millisecond {
		t.Fatalf("45 us a sample at 1 ms: %+v, want sustainable", v)
	}
}

func TestAdmissionSaysWhatTheHostSustains(t *testing.T) {
	// The fake spends 2 ms evaluating each sample: 1 kHz cannot be sustained.
	r := runFake(t, "eval_cost_us=2000")
	eventually(t, "an admission verdict", func() bool { return strings.Contains(r.s.Status()[0].Reason, "sustain") })
	st := r.s.Status()[0]
	if st.State != pmdata.StateSampling || !st.Ready || !strings.Contains(st.Reason, "more than this host sustains") ||
		!strings.Contains(st.Reason, "--pmsample.backoff") || !strings.Contains(st.Reason, "samples/s") {
		t.Fatalf("status = %+v; want sampling, ready, and a reason with the sustainable rate", st)
	}
	if v, ok := pmtest.ValueOf(r.agg.Snapshot(), r.s.Devices()[0], "cupti_pm_sampling_interval_seconds"); !ok || v != 0.001 {
		t.Errorf("interval = %v %v; without backoff it stays at 1 ms", v, ok)
	}
}

func TestAdmissionBacksOff(t *testing.T) {
	r := runFake(t, "eval_cost_us=2000", WithRateBackoff(true))
	d := r.s.Devices()[0]
	eventually(t, "a backoff", func() bool {
		v, ok := pmtest.ValueOf(r.agg.Snapshot(), d, "cupti_pm_sampling_interval_seconds")
		return ok && v > 0.002
	})
	st := r.s.Status()[0]
	if !strings.Contains(st.Reason, "backed off from every 1ms to every") {
		t.Fatalf("status = %+v; want the backoff said", st)
	}
	// At the longer interval the device keeps up: over the next 500 ms it delivers most of what
	// the new rate implies, where before it lost most to full images. (The fake's cost is a
	// sleep, which a busy machine stretches, so the bounds are loose.)
	time.Sleep(300 * time.Millisecond)
	tl0 := r.c.timeline(0)
	time.Sleep(500 * time.Millisecond)
	tl := r.c.timeline(0)
	delivered, lost := float64(tl.delivered-tl0.delivered), tl.lostTotal()-tl0.lostTotal()
	if delivered < 2*lost || delivered == 0 {
		t.Errorf("after backing off: %.0f delivered, %.1f lost (%v)", delivered, lost, tl.lost)
	}
	// The interval changed mid-way, so check the time line instead of one rate: delivered
	// samples and losses tile it.
	if span := tl.last - tl.first; math.Abs(float64(tl.covered)-float64(span)) > 0.005*float64(span)+float64(r.c.lastInterval(0)) {
		t.Errorf("samples and losses cover %d ns of a %d ns time line", tl.covered, span)
	}
	if tl.lost["backoff"] <= 0 {
		t.Errorf("lost = %v; the restart is counted as backoff", tl.lost)
	}
}
