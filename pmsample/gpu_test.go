package pmsample

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/pmsample/aggregate"
	"github.com/cupti-exporter/cupti-exporter/pmsample/catalog"
	"github.com/cupti-exporter/cupti-exporter/pmsample/internal/pmtest"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"

	"github.com/cupti-exporter/cupti-exporter/internal/cupti"
	"github.com/cupti-exporter/cupti-exporter/mapping"
	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// requireGPU opens the real CUPTI when PMSAMPLE_GPU=1 (scripts/gpu runs it on the GPU machine),
// and skips otherwise, saying why. A "not supported" there fails the test.
func requireGPU(t *testing.T) *cupti.Lib {
	t.Helper()
	if os.Getenv("PMSAMPLE_GPU") != "1" {
		t.Skip("needs an NVIDIA GPU with CUPTI 13: set PMSAMPLE_GPU=1 (and CUPTI_LIBRARY if libcupti.so.13 is not on the loader path)")
	}
	lib, err := cupti.Open(cupti.Options{LibraryPath: os.Getenv("CUPTI_LIBRARY")})
	if err != nil {
		t.Fatalf("opening CUPTI on the GPU machine: %v (not supported: %v)", err, errors.Is(err, cupti.ErrNotSupported))
	}
	t.Cleanup(func() { _ = lib.Close() })
	return lib
}

// gpuOut writes v as JSON into $OUT/name when OUT is set.
func gpuOut(t *testing.T, name string, v any) {
	if dir := os.Getenv("OUT"); dir != "" {
		b, _ := json.MarshalIndent(v, "", "  ")
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Error(err)
		}
	}
}

func TestGPUPlanDefaults(t *testing.T) {
	lib := requireGPU(t)
	m, err := mapping.New()
	if err != nil {
		t.Fatal(err)
	}
	c, err := catalog.Open(lib, "0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	plan, err := c.Plan(DefaultMetrics(m), false)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("chip %s, default plan: %d metrics in the pass", c.Chip, len(plan.Groups[0].Metrics))
	for _, g := range plan.Groups {
		for _, n := range g.Metrics {
			t.Logf("  in:  %s", n)
		}
	}
	for _, r := range plan.Rejected {
		t.Logf("  out: %s: %s %v", r.Metric, r.Reason, r.Alternatives)
	}
	thr, err := c.Plan([]string{"sm__throughput.avg.pct_of_peak_sustained_elapsed"}, false)
	if err == nil && len(thr.Rejected) == 1 {
		t.Logf("sm__throughput: %s; alternatives %v", thr.Rejected[0].Reason, thr.Rejected[0].Alternatives)
	}
	gpuOut(t, "pmsample_plan.json", map[string]any{"chip": c.Chip, "defaults": plan, "sm_throughput": thr})
}

// TestGPUSample samples the defaults for PMSAMPLE_SECONDS (default 5) and checks rates and losses.
func TestGPUSample(t *testing.T) {
	lib := requireGPU(t)
	m, err := mapping.New()
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	s, err := New(lib, m, logger, WithDevices(0))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	agg := aggregate.New(m, s.Devices(), s.Catalog(), logger, aggregate.WithStatus(s.Status))
	defer func() {
		cd := s.runners[0].pm.(*cuptiDevice)
		t.Logf("DecodeData %v, evaluation %v for %d samples", cd.total.Decode, evaluation(cd.total), cd.evaluated)
	}()
	secs := 5 * time.Second
	if v, err := time.ParseDuration(os.Getenv("PMSAMPLE_SECONDS") + "s"); err == nil && v > 0 {
		secs = v
	}
	var decode time.Duration
	var batches int
	ctx, cancel := context.WithTimeout(context.Background(), secs)
	defer cancel()
	if err := s.Run(ctx, func(b pmdata.Batch) {
		if batches < 2 || b.SkippedInvalid > 0 || b.DroppedFirst > 0 { // where the first and the invalid samples fall
			first := uint64(0)
			if len(b.Samples) > 0 {
				first = b.Samples[0].Start
			}
			t.Logf("batch %d: %d samples (first starts %d), dropped first %d, invalid %d, incomplete %d", batches, len(b.Samples), first,
				b.DroppedFirst, b.SkippedInvalid, b.Incomplete)
		}
		decode += b.DecodeDuration
		batches++
		agg.Add(b)
	}); err != nil {
		t.Fatal(err)
	}
	snap := agg.Snapshot()
	d := s.Devices()[0]
	for _, f := range snap.Families {
		for _, x := range f.Samples {
			t.Logf("%s%v = %g", f.Desc.Name, x.LabelValues[len(snapshot.DeviceLabelNames):], x.Value)
		}
	}
	n, _ := pmtest.ValueOf(snap, d, "cupti_pm_samples_total")
	t.Logf("%d batches, mean decode+evaluate %v per batch, %.1f us per sample", batches, decode/time.Duration(max(batches, 1)),
		float64(decode.Microseconds())/max(n, 1))
	want := 0.8 * secs.Seconds() * 1000
	if os.Getenv("PMSAMPLE_EXPECT_BUSY") == "1" {
		want = 1000 // the counters were held by another sampler for part of the run
	}
	if n < want {
		t.Errorf("%v samples in %v, want at least %v at 1 kHz", n, secs, want)
	}
	for _, reason := range []string{"image_full", "overflow", "decode_error"} {
		if v, _ := pmtest.ValueOf(snap, d, "cupti_pm_decode_failures_total", reason); v != 0 {
			t.Errorf("decode failures{%s} = %v, want 0", reason, v)
		}
	}
	// Delivered + lost = rate x time (the time line of the run, from its first accounted
	// instant to the newest sample), within 0.5 %.
	var lost float64
	for _, reason := range pmdata.LostReasons {
		v, _ := pmtest.ValueOf(snap, d, "cupti_pm_samples_lost_total", reason)
		lost += v
		if v > 0 {
			t.Logf("lost to %s: %.1f samples", reason, v)
		}
	}
	if cov, ok := pmtest.ValueOf(snap, d, "cupti_pm_window_coverage_ratio"); ok {
		t.Logf("window coverage %.4f", cov)
	}
	if os.Getenv("PMSAMPLE_EXPECT_BUSY") != "1" && lost > 0.005*(n+lost)+2 {
		t.Errorf("%.1f samples lost of %.0f", lost, n+lost)
	}
	if v, _ := pmtest.ValueOf(snap, d, "cupti_pm_samples_dropped_total", "first_sample"); v != 1 {
		t.Errorf("first samples dropped = %v, want 1", v)
	}
	gpuOut(t, "pmsample_snapshot.json", snap)
}

// TestGPUWithoutAvailability samples as New does when another profiler held the counters at
// start (no availability image): with the defaults and with the nine one-pass defaults.
func TestGPUWithoutAvailability(t *testing.T) {
	lib := requireGPU(t)
	m, _ := mapping.New()
	skipAvailability = true
	defer func() { skipAvailability = false }()
	nine := DefaultMetrics(m)[:9]
	for _, tc := range []struct {
		name string
		opts []Option
	}{{"defaults", nil}, {"nine", []Option{WithMetrics(nine...)}}, {"four", []Option{WithMetrics(nine[:4]...)}}} {
		s, err := New(lib, m, nil, append(tc.opts, WithDevices(0))...)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		n := 0
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_ = s.Run(ctx, func(b pmdata.Batch) { n += len(b.Samples) })
		cancel()
		cd := s.runners[0].pm.(*cuptiDevice)
		t.Logf("%s: %d metrics %v: %d samples in 3 s; DecodeData %v, evaluation %v for %d samples (%.1f us/sample); status %+v",
			tc.name, len(s.Plan().Groups[0].Metrics), s.Plan().Groups[0].Metrics, n, cd.total.Decode, evaluation(cd.total), cd.evaluated,
			float64((cd.total.Decode+evaluation(cd.total)).Microseconds())/float64(max(cd.evaluated, 1)), s.Status()[0])
		s.Close()
	}
}

// evaluation is the time after DecodeData: sample times, evaluation and the image reset.
func evaluation(c pmdata.CallTimes) time.Duration { return c.SampleInfo + c.Evaluate + c.Reset }

// TestGPUMultiplexTurns samples the default set and the FP16 pipe, which needs a second pass on
// GH100, with multiplexing every second for 6 s: each group must deliver samples turn after
// turn (run M: the in-session switch went silent after the first turn), and no time may be
// lost to a stall. Each turn is a new session; the rotation loss per turn is logged.
func TestGPUMultiplexTurns(t *testing.T) {
	lib := requireGPU(t)
	m, err := mapping.New()
	if err != nil {
		t.Fatal(err)
	}
	// Without the NVLink metrics: a one-GPU machine has no links and explicit metrics are
	// strict (CUPTI_ERROR_UNKNOWN on a single H200, run V); stage pmmultiplex covers NVLink.
	var metrics []string
	for _, name := range DefaultMetrics(m) {
		if !strings.HasPrefix(name, "nvl") {
			metrics = append(metrics, name)
		}
	}
	metrics = append(metrics, "sm__inst_executed_pipe_fma_type_fp16.avg.pct_of_peak_sustained_elapsed")
	s, err := New(lib, m, nil, WithDevices(0), WithMetrics(metrics...), WithMultiplex(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n := len(s.Plan().Groups); n < 2 {
		t.Skipf("the metrics fit %d group on this GPU: nothing to multiplex", n)
	}
	turns := map[string]int{}
	samples := map[string]int{}
	lost := map[string]float64{}
	prev := ""
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
	defer cancel()
	_ = s.Run(ctx, func(b pmdata.Batch) {
		for _, l := range b.Lost {
			lost[l.Reason] += float64(l.End-l.Start) / 1e6
		}
		if len(b.Samples) == 0 {
			return
		}
		if g := b.Metrics[0]; g != prev {
			turns[g]++
			prev = g
		}
		samples[b.Metrics[0]] += len(b.Samples)
	})
	t.Logf("groups %d; turns %v; samples %v; lost ms by reason %v", len(s.Plan().Groups), turns, samples, lost)
	for _, g := range s.Plan().Groups {
		if turns[g.Metrics[0]] < 2 {
			t.Errorf("group led by %s delivered samples in %d turns of about 3, want at least 2", g.Metrics[0], turns[g.Metrics[0]])
		}
	}
	if lost["stall"] > 0 {
		t.Errorf("%.1f ms lost to stalled sessions", lost["stall"])
	}
	total := 0
	for _, n := range samples {
		total += n
	}
	if total < 4000 {
		t.Errorf("%d samples in 6 s at 1 kHz with a new session each second, want at least 4,000", total)
	}
	gpuOut(t, "pmsample_multiplex.json", map[string]any{"turns": turns, "samples": samples, "lost_ms": lost})
}
