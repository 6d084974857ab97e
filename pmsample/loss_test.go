//go:build cgo

package pmsample

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/pmsample/internal/pmtest"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"

	"github.com/cupti-exporter/cupti-exporter/internal/cupti/cuptitest"
)

// timeline sums one device's batches: delivered samples, lost samples by cause, and the span
// from the start of the first accounted time to the end of the last.
type timeline struct {
	delivered   int
	lost        map[string]float64
	first, last uint64
	covered     uint64 // ns of delivered samples plus losses
}

func (c *collector) timeline(dev int) timeline {
	c.mu.Lock()
	defer c.mu.Unlock()
	tl := timeline{lost: map[string]float64{}}
	see := func(start, end uint64) {
		if tl.first == 0 || start < tl.first {
			tl.first = start
		}
		tl.last = max(tl.last, end)
		tl.covered += end - start
	}
	for _, b := range c.batches {
		if b.Device != dev {
			continue
		}
		for _, l := range b.Lost {
			tl.lost[l.Reason] += l.Samples
			see(l.Start, l.End)
		}
		for _, s := range b.Samples {
			tl.delivered++
			see(s.Start, s.End)
		}
	}
	return tl
}

func (tl timeline) lostTotal() float64 {
	var n float64
	for _, v := range tl.lost {
		n += v
	}
	return n
}

// checkRate asserts delivered + lost = configured rate x time: the samples the interval
// implies for the span, within 0.5 % and one sample, and that the accounted stretches tile
// the span without overlap.
func checkRate(t *testing.T, tl timeline, iv time.Duration) {
	t.Helper()
	want := float64(tl.last-tl.first) / float64(iv)
	got := float64(tl.delivered) + tl.lostTotal()
	t.Logf("span %.0f samples: delivered %d + lost %.1f %v", want, tl.delivered, tl.lostTotal(), tl.lost)
	if math.Abs(got-want) > 0.005*want+1 {
		t.Errorf("delivered + lost = %.1f samples, want %.1f (configured rate x time)", got, want)
	}
	if tl.covered > tl.last-tl.first+uint64(iv) {
		t.Errorf("samples and losses cover %d ns of a %d ns span: they overlap", tl.covered, tl.last-tl.first)
	}
}

func runFor(t *testing.T, faults string, d time.Duration, opts ...Option) fakeRun {
	t.Helper()
	r := runFake(t, faults, opts...)
	time.Sleep(d)
	return r
}

func TestLossHardwareGapsCounted(t *testing.T) {
	// The fake's hardware loses every 10th sample: 10 % of the rate is lost as "gap".
	r := runFor(t, "skip_every=10", 400*time.Millisecond)
	tl := r.c.timeline(0)
	checkRate(t, tl, time.Millisecond)
	// Among the stretches not lost to something else (a decode this busy machine delayed
	// past the image's slack loses a stretch to image_full), one sample in ten is a gap.
	if share := tl.lost["gap"] / (float64(tl.delivered) + tl.lost["gap"]); share < 0.08 || share > 0.12 {
		t.Errorf("gap share = %.3f, want about 0.1", share)
	}
}

func TestLossImageFullCountedInSamples(t *testing.T) {
	// Every decode reports a full image: the session is recreated each time and the samples
	// between the last of one session and the first of the next are lost to image_full,
	// counted in samples, not in decodes.
	r := runFor(t, "image_full", 400*time.Millisecond)
	tl := r.c.timeline(0)
	checkRate(t, tl, time.Millisecond)
	full := r.c.sum(0, func(b pmdata.Batch) int { return b.LostImageFull })
	if tl.lost["image_full"] < float64(full)/2 || full < 3 {
		t.Errorf("%d full decodes lost %.1f samples; want recreations counted as the samples they cost", full, tl.lost["image_full"])
	}
}

func TestLossOverflowCountedInSamples(t *testing.T) {
	r := runFor(t, "overflow_at=3", 300*time.Millisecond)
	tl := r.c.timeline(0)
	checkRate(t, tl, time.Millisecond)
	if tl.lost["overflow"] <= 0 {
		t.Errorf("lost = %v, want samples lost to the overflow", tl.lost)
	}
}

func TestLossPauseAndBusyCounted(t *testing.T) {
	r := runFake(t, "")
	eventually(t, "sampling", func() bool { return r.c.sum(0, samplesOf) > 20 })
	if err := r.s.Pause(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	// Paused time is accounted while paused, every decode period, not only at the resume.
	if tl := r.c.timeline(0); tl.lost["paused"] < 100 {
		t.Errorf("lost while paused = %v, want >= 100 samples of the 200 ms", tl.lost)
	}
	cuptitest.Inject(t, "busy_setconfig")
	r.s.Resume()
	time.Sleep(150 * time.Millisecond)
	cuptitest.Inject(t, "")
	n := r.c.sum(0, samplesOf)
	eventually(t, "sampling again", func() bool { return r.c.sum(0, samplesOf) > n+20 })
	tl := r.c.timeline(0)
	checkRate(t, tl, time.Millisecond)
	if tl.lost["paused"] < 180 || tl.lost["busy"] < 100 {
		t.Errorf("lost = %v, want about 200 paused and >= 100 busy samples", tl.lost)
	}
	// The aggregator publishes the same figures and a window coverage below 1.
	d := r.s.Devices()[0]
	s := r.agg.Snapshot()
	if v, ok := pmtest.ValueOf(s, d, "cupti_pm_samples_lost_total", "paused"); !ok || v < 180 {
		t.Errorf("cupti_pm_samples_lost_total{paused} = %v %v", v, ok)
	}
	if v, ok := pmtest.ValueOf(s, d, "cupti_pm_window_coverage_ratio"); !ok || v <= 0 || v >= 0.99 {
		t.Errorf("window coverage = %v %v, want a share below 1 after a pause", v, ok)
	}
}

func TestLossNoneWhenHealthy(t *testing.T) {
	r := runFor(t, "", 300*time.Millisecond)
	tl := r.c.timeline(0)
	checkRate(t, tl, time.Millisecond)
	checkOnlyRealLosses(t, r.c, tl)
	// The window (10 s) holds the whole run: its coverage is the delivered share.
	d := r.s.Devices()[0]
	want := float64(tl.delivered) / (float64(tl.delivered) + tl.lostTotal())
	if v, ok := pmtest.ValueOf(r.agg.Snapshot(), d, "cupti_pm_window_coverage_ratio"); !ok || math.Abs(v-want) > 0.02 {
		t.Errorf("window coverage = %v %v, want %.3f", v, ok, want)
	}
	if v, ok := pmtest.ValueOf(r.agg.Snapshot(), d, "cupti_pm_sampling_interval_seconds"); !ok || v != 0.001 {
		t.Errorf("interval gauge = %v %v, want 0.001", v, ok)
	}
}

// checkOnlyRealLosses asserts that a run without faults lost nothing but what a real event
// explains: the session's start (about one sample) and full images, which this busy build
// machine causes when it delays a decode past the image's slack (each counted in a batch).
func checkOnlyRealLosses(t *testing.T, c *collector, tl timeline) {
	t.Helper()
	for reason, n := range tl.lost {
		switch {
		case reason == "start" && n <= 2:
		case reason == "image_full" && c.sum(0, func(b pmdata.Batch) int { return b.LostImageFull }) > 0:
		default:
			t.Errorf("lost %.1f samples to %s on a healthy run (%v)", n, reason, tl.lost)
		}
	}
}

// lastInterval is the newest Batch.Interval of a device.
func (c *collector) lastInterval(dev int) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(c.batches) - 1; i >= 0; i-- {
		if b := c.batches[i]; b.Device == dev && b.Interval > 0 {
			return b.Interval
		}
	}
	return 0
}
