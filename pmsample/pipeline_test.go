//go:build cgo

package pmsample

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/pmsample/internal/pmtest"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
)

// The double pipeline must deliver what the serial one does: every sample once, in order,
// losses accounted the same way, sessions recreated after full images and overflows, groups
// rotated, pauses honoured (run with -race: the evaluator thread shares the runner's state).

func checkOrdered(t *testing.T, c *collector, dev int) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	var last uint64
	for _, b := range c.batches {
		if b.Device != dev {
			continue
		}
		for _, s := range b.Samples {
			if s.Start < last {
				t.Fatalf("sample [%d, %d] delivered after one that ended at %d", s.Start, s.End, last)
			}
			last = s.End
		}
	}
}

func TestPipelineDoubleHealthy(t *testing.T) {
	r := runFor(t, "", 300*time.Millisecond, WithPipeline(PipelineDouble))
	tl := r.c.timeline(0)
	checkRate(t, tl, time.Millisecond)
	checkOrdered(t, r.c, 0)
	checkOnlyRealLosses(t, r.c, tl)
	if tl.delivered < 50 {
		t.Errorf("delivered %d, lost %v", tl.delivered, tl.lost)
	}
	if n := r.c.sum(0, func(b pmdata.Batch) int { return b.DecodeErrors }); n != 0 {
		t.Errorf("%d decode errors", n)
	}
}

func TestPipelineDoubleLosses(t *testing.T) {
	for _, tc := range []struct{ faults, reason string }{
		{"skip_every=10", "gap"}, {"image_full", "image_full"}, {"overflow_at=3", "overflow"},
	} {
		t.Run(tc.faults, func(t *testing.T) {
			r := runFor(t, tc.faults, 300*time.Millisecond, WithPipeline(PipelineDouble))
			tl := r.c.timeline(0)
			checkRate(t, tl, time.Millisecond)
			checkOrdered(t, r.c, 0)
			if tl.lost[tc.reason] <= 0 || tl.delivered == 0 {
				t.Errorf("delivered %d, lost %v; want samples lost to %s", tl.delivered, tl.lost, tc.reason)
			}
		})
	}
}

func TestPipelineDoubleMultiplexAndPause(t *testing.T) {
	ms := pmtest.FakeMetrics(10)
	r := runFake(t, "", WithPipeline(PipelineDouble), WithMetrics(ms...), WithMultiplex(40*time.Millisecond))
	eventually(t, "both groups sampled", func() bool {
		return r.c.sum(0, func(b pmdata.Batch) int {
			if b.Metrics[0] == ms[8] {
				return len(b.Samples)
			}
			return 0
		}) > 50
	})
	if err := r.s.Pause(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	r.s.Resume()
	n := r.c.sum(0, samplesOf)
	eventually(t, "sampling after the pause", func() bool { return r.c.sum(0, samplesOf) > n+50 })
	tl := r.c.timeline(0)
	checkRate(t, tl, time.Millisecond)
	checkOrdered(t, r.c, 0)
	// (Full images are possible here when the evaluator falls behind, under -race on a busy
	// machine; they are counted like any other loss and checked by checkRate above.)
	if n := r.c.sum(0, func(b pmdata.Batch) int { return b.DecodeErrors }); n != 0 {
		t.Errorf("%d decode errors while rotating", n)
	}
	if tl.lost["paused"] < 80 {
		t.Errorf("lost = %v, want about 100 paused samples", tl.lost)
	}
}

func TestPipelineConfig(t *testing.T) {
	if _, err := newConfig([]Option{WithPipeline("triple")}); err == nil || !strings.Contains(err.Error(), "serial or double") {
		t.Fatalf("pipeline triple: %v", err)
	}
	c, err := newConfig(nil)
	if err != nil || c.pipeline != PipelineSerial {
		t.Fatalf("default pipeline = %q, %v", c.pipeline, err)
	}
}
