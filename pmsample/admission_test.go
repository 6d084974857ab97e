//go:build cgo

package pmsample

import (
	"strings"
	"testing"
	"time"
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
	if st.State != StateSampling || !st.Ready || !strings.Contains(st.Reason, "more than this host sustains") ||
		!strings.Contains(st.Reason, "--pmsample.backoff") || !strings.Contains(st.Reason, "samples/s") {
		t.Fatalf("status = %+v; want sampling, ready, and a reason with the sustainable rate", st)
	}
	if v, ok := valueOf(r.agg.Snapshot(), r.s.Devices()[0], "cupti_pm_sampling_interval_seconds"); !ok || v != 0.001 {
		t.Errorf("interval = %v %v; without backoff it stays at 1 ms", v, ok)
	}
}

func TestAdmissionBacksOff(t *testing.T) {
	r := runFake(t, "eval_cost_us=2000", WithRateBackoff(true))
	d := r.s.Devices()[0]
	eventually(t, "a backoff", func() bool {
		v, ok := valueOf(r.agg.Snapshot(), d, "cupti_pm_sampling_interval_seconds")
		return ok && v > 0.002
	})
	st := r.s.Status()[0]
	if !strings.Contains(st.Reason, "backed off from every 1ms to every") {
		t.Fatalf("status = %+v; want the backoff said", st)
	}
	iv, _ := valueOf(r.agg.Snapshot(), d, "cupti_pm_sampling_interval_seconds")
	// At the longer interval nothing more is lost to full images: sample for a while, then
	// compare the losses.
	time.Sleep(300 * time.Millisecond)
	before := r.c.timeline(0).lost["image_full"]
	n := r.c.sum(0, samplesOf)
	time.Sleep(500 * time.Millisecond)
	tl := r.c.timeline(0)
	if tl.lost["image_full"] > before+1 {
		t.Errorf("image_full losses grew from %.1f to %.1f after backing off to %v s", before, tl.lost["image_full"], iv)
	}
	if got := r.c.sum(0, samplesOf) - n; got < int(0.5/iv*0.7) {
		t.Errorf("%d samples in 500 ms at %v s; want about %.0f", got, iv, 0.5/iv)
	}
	if tl.lost["backoff"] <= 0 {
		t.Errorf("lost = %v; the restart is counted as backoff", tl.lost)
	}
}
