package attribution

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/gpuprocs"
	"github.com/cupti-exporter/cupti-exporter/mapping"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// edgeTimeline is one kernel from 0.5 to 2.5 ms and four 1 ms samples that read exactly its
// overlap (SM active 100 % and 2,000 PCIe bytes per ms while it runs, nothing otherwise).
func edgeTimeline(t *testing.T, est string) *snapshot.Snapshot {
	t.Helper()
	a, _ := newTest(t, WithEstimator(est))
	p, info := newProc(7, "trainer", "0")
	a.ProcessConnected(p, info)
	a.Coverage(p, []record.Interval{{Start: uint64(t0 - ms), End: uint64(t0 + 10*ms)}})
	a.Records(p, []record.Record{kernel(0, "A", t0+ms/2, t0+5*ms/2)})
	a.Add(pmdata.Batch{Device: 0, Metrics: testMetrics, Samples: samples(t0, ms, 4, func(s, e int64) []float64 {
		ov := float64(max(0, min(e, t0+5*ms/2)-max(s, t0+ms/2))) / float64(ms)
		return []float64{100 * ov, 2000 * ov}
	})})
	a.Flush()
	return a.Snapshot()
}

// TestOverlapSplit checks the plain split by overlap time on a kernel that straddles two
// samples, and that the gap time of a process that traced it is idle.
func TestOverlapSplit(t *testing.T) {
	snap := edgeTimeline(t, EstimatorOverlap)
	want := []struct {
		name   string
		labels []string
		v      float64
	}{
		{"cupti_kernel_sampled_seconds_total", []string{"0", "GPU-aaaa", "A"}, 0.002},
		{"cupti_kernel_sampled_seconds_total", []string{"0", "GPU-aaaa", "(idle)"}, 0.002},
		{"cupti_kernel_sm_active_seconds_total", []string{"0", "GPU-aaaa", "A"}, 0.0015},
		{"cupti_kernel_sm_active_seconds_total", []string{"0", "GPU-aaaa", "(idle)"}, 0.0005},
		{"cupti_kernel_pcie_bytes_total", []string{"0", "GPU-aaaa", "A", "rx"}, 3000},
		{"cupti_kernel_pcie_bytes_total", []string{"0", "GPU-aaaa", "(idle)", "rx"}, 1000},
		{"cupti_pod_sampled_seconds_total", []string{"0", "GPU-aaaa", "ns", "trainer", "c", "kernel"}, 0.002},
		{"cupti_pod_pcie_bytes_total", []string{"0", "GPU-aaaa", "ns", "trainer", "c", "kernel", "rx"}, 3000},
		{"cupti_pod_sm_active_seconds_total", []string{"0", "GPU-aaaa", "ns", "trainer", "c", "kernel"}, 0.0015},
		{"cupti_attribution_seconds_total", []string{"0", "GPU-aaaa", "traced"}, 0.002},
		{"cupti_attribution_seconds_total", []string{"0", "GPU-aaaa", "idle"}, 0.002},
		{"cupti_attribution_seconds_total", []string{"0", "GPU-aaaa", "untraced"}, 0},
	}
	for _, w := range want {
		got, ok := value(snap, w.name, w.labels...)
		if !ok || !near(got, w.v, 1e-9) {
			t.Errorf("%s%v = %v (present %v), want %v", w.name, w.labels, got, ok, w.v)
		}
	}
	if _, ok := value(snap, "cupti_kernel_sampled_seconds_total", "0", "GPU-aaaa", "(untraced)"); ok {
		t.Errorf("(untraced) series present although the process traced the whole time")
	}
}

// TestRateSplitEdge checks that the rate estimator gives the straddled samples' values to
// the kernel whose rate explains them, not to the idle time beside it.
func TestRateSplitEdge(t *testing.T) {
	snap := edgeTimeline(t, EstimatorRate)
	got, _ := value(snap, "cupti_kernel_pcie_bytes_total", "0", "GPU-aaaa", "A", "rx")
	idle, _ := value(snap, "cupti_kernel_pcie_bytes_total", "0", "GPU-aaaa", "(idle)", "rx")
	if got < 3950 || !near(got+idle, 4000, 1e-12) {
		t.Errorf("rate split: A %v bytes, idle %v, want A near 4000 (the truth) and A+idle = 4000", got, idle)
	}
	sec, _ := value(snap, "cupti_kernel_sampled_seconds_total", "0", "GPU-aaaa", "A")
	if !near(sec, 0.002, 1e-12) {
		t.Errorf("sampled seconds of A %v, want the overlap 0.002 whatever the estimator", sec)
	}
}

// TestConcurrentKernelsShare checks that two kernels running at once share the overlap.
func TestConcurrentKernelsShare(t *testing.T) {
	a, _ := newTest(t, WithEstimator(EstimatorOverlap))
	p, info := newProc(7, "", "0")
	a.ProcessConnected(p, info)
	a.Coverage(p, []record.Interval{{Start: uint64(t0), End: uint64(t0 + 10*ms)}})
	a.Records(p, []record.Record{kernel(0, "A", t0, t0+ms), kernel(0, "B", t0+ms/2, t0+ms)})
	a.Add(pmdata.Batch{Device: 0, Metrics: testMetrics, Samples: samples(t0, ms, 1, func(s, e int64) []float64 { return []float64{100, 900} })})
	a.Flush()
	snap := a.Snapshot()
	// A alone for 0.5 ms, A and B for 0.5 ms: A 0.75 ms, B 0.25 ms.
	for k, w := range map[string]float64{"A": 0.00075, "B": 0.00025} {
		if got, _ := value(snap, "cupti_kernel_sampled_seconds_total", "0", "GPU-aaaa", k); !near(got, w, 1e-12) {
			t.Errorf("%s sampled %v, want %v", k, got, w)
		}
	}
	if got, _ := value(snap, "cupti_kernel_pcie_bytes_total", "0", "GPU-aaaa", "B", "rx"); !near(got, 225, 1e-9) {
		t.Errorf("B bytes %v, want 225", got)
	}
	// A process without a pod is attributed to pod="".
	if got, _ := value(snap, "cupti_pod_pcie_bytes_total", "0", "GPU-aaaa", "", "", "", "kernel", "rx"); !near(got, 900, 1e-9) {
		t.Errorf("pod=\"\" bytes %v, want 900", got)
	}
}

// TestIdleUntracedRule checks which gap time is idle and which untraced.
func TestIdleUntracedRule(t *testing.T) {
	batch := pmdata.Batch{Device: 0, Metrics: testMetrics, Samples: samples(t0, ms, 10, func(s, e int64) []float64 { return []float64{0, 10} })}
	kinds := func(a *Attributor) (idle, untraced float64) {
		a.Add(batch)
		a.Flush()
		snap := a.Snapshot()
		idle, _ = value(snap, "cupti_attribution_seconds_total", "0", "GPU-aaaa", "idle")
		untraced, _ = value(snap, "cupti_attribution_seconds_total", "0", "GPU-aaaa", "untraced")
		return idle, untraced
	}
	t.Run("no process", func(t *testing.T) {
		a, _ := newTest(t)
		if i, u := kinds(a); !near(i, 0.01, 1e-12) || u != 0 {
			t.Errorf("idle %v untraced %v, want all 10 ms idle", i, u)
		}
	})
	t.Run("old library (no coverage)", func(t *testing.T) {
		a, clk := newTest(t)
		clk.set(t0 - ms)
		p, info := newProc(1, "", "0")
		a.ProcessConnected(p, info)
		if i, u := kinds(a); i != 0 || !near(u, 0.01, 1e-12) {
			t.Errorf("idle %v untraced %v, want all untraced", i, u)
		}
	})
	t.Run("coverage gap", func(t *testing.T) {
		a, clk := newTest(t)
		clk.set(t0 - ms)
		p, info := newProc(1, "", "0")
		a.ProcessConnected(p, info)
		// traced 0-4 ms and 6-10 ms, lossy 4-6 ms (lossy spans count as untraced)
		a.Coverage(p, []record.Interval{{Start: uint64(t0 - ms), End: uint64(t0 + 4*ms)}, {Start: uint64(t0 + 4*ms), End: uint64(t0 + 6*ms), Lossy: true}, {Start: uint64(t0 + 6*ms), End: uint64(t0 + 20*ms)}})
		if i, u := kinds(a); !near(i, 0.008, 1e-12) || !near(u, 0.002, 1e-12) {
			t.Errorf("idle %v untraced %v, want 8 ms idle, 2 ms untraced", i, u)
		}
	})
	t.Run("second process untraced", func(t *testing.T) {
		a, clk := newTest(t)
		clk.set(t0 - ms)
		p, info := newProc(1, "", "0")
		a.ProcessConnected(p, info)
		a.Coverage(p, []record.Interval{{Start: uint64(t0 - ms), End: uint64(t0 + 20*ms)}})
		q, qinfo := newProc(2, "", "1", "0") // ordinal 1 is GPU 0
		clk.set(t0 + 5*ms)
		a.ProcessConnected(q, qinfo)
		if i, u := kinds(a); !near(i, 0.005, 1e-12) || !near(u, 0.005, 1e-12) {
			t.Errorf("idle %v untraced %v, want 5 ms each (the second process joined at 5 ms)", i, u)
		}
	})
	t.Run("process on another GPU", func(t *testing.T) {
		a, clk := newTest(t)
		clk.set(t0 - ms)
		p, info := newProc(1, "", "1")
		a.ProcessConnected(p, info)
		if i, u := kinds(a); !near(i, 0.01, 1e-12) || u != 0 {
			t.Errorf("idle %v untraced %v, want all idle", i, u)
		}
	})
	t.Run("NVML processes", func(t *testing.T) {
		nan := math.NaN()
		for _, tc := range []struct {
			name     string
			procs    []gpuprocs.Process
			untraced bool
		}{
			{"none", nil, false},
			{"only the traced one", []gpuprocs.Process{{PID: 1, SMShare: 0.3}}, false},
			{"untraced, not running", []gpuprocs.Process{{PID: 1, SMShare: 0.3}, {PID: 99, SMShare: 0}}, false},
			{"untraced, running all the time", []gpuprocs.Process{{PID: 1, SMShare: 0}, {PID: 99, SMShare: 1}}, true},
			{"untraced, running a fifth of the time", []gpuprocs.Process{{PID: 1, SMShare: 0}, {PID: 99, SMShare: 0.2}}, true},
			{"untraced, activity unknown", []gpuprocs.Process{{PID: 1, SMShare: nan}, {PID: 99, SMShare: nan}}, true},
			{"traced by pod, another PID namespace", []gpuprocs.Process{{PID: 4001, SMShare: 0.5, Namespace: "ns", Pod: "p1", Container: "c"}}, false},
		} {
			a, clk := newTest(t)
			clk.set(t0 - ms)
			p, info := newProc(1, "p1", "0")
			a.ProcessConnected(p, info)
			a.Coverage(p, []record.Interval{{Start: uint64(t0 - ms), End: uint64(t0 + 20*ms)}})
			a.ObserveProcesses(gpuprocs.Observation{GPU: "0", Start: time.Unix(0, t0-ms), End: time.Unix(0, t0+20*ms), Shares: true, Processes: tc.procs})
			i, u := kinds(a)
			if tc.name == "untraced, running a fifth of the time" {
				if !near(i, 0.008, 1e-12) || !near(u, 0.002, 1e-12) {
					t.Errorf("%s: idle %v untraced %v, want 8 ms idle, 2 ms untraced (its share of the gap)", tc.name, i, u)
				}
				continue
			}
			if tc.untraced && (i != 0 || !near(u, 0.01, 1e-12)) || !tc.untraced && (u != 0 || !near(i, 0.01, 1e-12)) {
				t.Errorf("%s: idle %v untraced %v, want untraced=%v", tc.name, i, u, tc.untraced)
			}
		}
	})
	t.Run("disconnected process", func(t *testing.T) {
		a, clk := newTest(t)
		clk.set(t0 - ms)
		p, info := newProc(1, "", "0")
		a.ProcessConnected(p, info)
		clk.set(t0 + 3*ms)
		a.ProcessDisconnected(p)
		if i, u := kinds(a); !near(i, 0.007, 1e-12) || !near(u, 0.003, 1e-12) {
			t.Errorf("idle %v untraced %v, want 3 ms untraced (while connected), 7 ms idle", i, u)
		}
	})
}

// TestWatermark checks that samples wait for the watermark, that a late record is counted
// and only its part after the frontier is joined, and that a device without batches for a
// watermark of wall time is released.
func TestWatermark(t *testing.T) {
	a, clk := newTest(t, WithWatermark(100*time.Millisecond), WithEstimator(EstimatorOverlap))
	p, info := newProc(1, "", "0")
	clk.set(t0 - ms)
	a.ProcessConnected(p, info)
	flat := func(s, e int64) []float64 { return []float64{50, 100} }
	a.Add(pmdata.Batch{Device: 0, Metrics: testMetrics, Samples: samples(t0, ms, 50, flat)})
	snap := a.Snapshot()
	if v := sum(snap, "cupti_attribution_seconds_total", "0"); v != 0 {
		t.Fatalf("attributed %v s before the watermark passed", v)
	}
	if lag, _ := value(snap, "cupti_attribution_lag_seconds", "0"); !near(lag, 0.05, 1e-9) {
		t.Errorf("lag %v, want 0.05 (nothing attributed yet)", lag)
	}
	// 150 ms of samples: the first 50 ms are released (newest end 150 ms - 100 ms).
	a.Add(pmdata.Batch{Device: 0, Metrics: testMetrics, Samples: samples(t0+50*ms, ms, 100, flat)})
	snap = a.Snapshot()
	if v := sum(snap, "cupti_attribution_seconds_total", "0"); !near(v, 0.05, 1e-12) {
		t.Fatalf("attributed %v s, want 0.05", v)
	}
	if lag, _ := value(snap, "cupti_attribution_lag_seconds", "0"); !near(lag, 0.1, 1e-9) {
		t.Errorf("lag %v, want 0.1", lag)
	}
	// A record from 40 to 60 ms arrives now: 10 ms of it are late.
	a.Records(p, []record.Record{kernel(0, "K", t0+40*ms, t0+60*ms)})
	clk.set(t0 + 400*ms) // no batch for more than the watermark
	a.Add(pmdata.Batch{Device: 1})
	snap = a.Snapshot()
	if v := sum(snap, "cupti_attribution_seconds_total", "0"); !near(v, 0.15, 1e-12) {
		t.Errorf("attributed %v s after the timed release, want 0.15", v)
	}
	if n, _ := value(snap, "cupti_attribution_late_records_total", "0"); n != 1 {
		t.Errorf("late records %v, want 1", n)
	}
	if s, _ := value(snap, "cupti_attribution_late_seconds_total", "0"); !near(s, 0.01, 1e-9) {
		t.Errorf("late seconds %v, want 0.01", s)
	}
	if k, _ := value(snap, "cupti_kernel_sampled_seconds_total", "0", "GPU-aaaa", "K"); !near(k, 0.01, 1e-12) {
		t.Errorf("K sampled %v, want the 10 ms after the frontier", k)
	}
	if n, _ := value(snap, "cupti_attribution_pending_records", "0"); n != 0 {
		t.Errorf("pending records %v after release, want 0", n)
	}
}

// TestBadInput feeds malformed and foreign input: each is counted, nothing panics and the
// join still conserves.
func TestBadInput(t *testing.T) {
	a, clk := newTest(t, WithEstimator(EstimatorRate))
	clk.set(t0 - ms)
	p, info := newProc(1, "pod", "0", "7") // ordinal 1 is a GPU the join does not sample
	a.ProcessConnected(p, info)
	stranger := &record.Process{PID: 66}
	a.Records(stranger, []record.Record{kernel(0, "X", t0, t0+ms)})
	a.Coverage(stranger, []record.Interval{{Start: uint64(t0), End: uint64(t0 + ms)}})
	a.Records(p, []record.Record{
		kernel(0, "backwards", t0+2*ms, t0+ms),
		kernel(0, "far", t0+2*int64(time.Hour), t0+2*int64(time.Hour)+ms),
		kernel(1, "unsampled", t0, t0+ms),
		kernel(5, "no such ordinal", t0, t0+ms),
		kernel(0, "good", t0, t0+3*ms),
	})
	a.Coverage(p, []record.Interval{
		{Start: uint64(t0 + 5*ms), End: uint64(t0 + 8*ms)},
		{Start: uint64(t0), End: uint64(t0 + 6*ms)}, // out of order and overlapping: merged
		{Start: uint64(t0 + 9*ms), End: uint64(t0 + 9*ms)},
		{Start: uint64(t0 - 3*int64(time.Hour)), End: uint64(t0 - 2*int64(time.Hour))},
	})
	// samples: one invalid (end < start), one with NaN, then good ones
	bad := samples(t0, ms, 10, func(s, e int64) []float64 { return []float64{40, 123} })
	bad = append(bad, pmdata.Sample{Start: uint64(t0 + 20*ms), End: uint64(t0 + 19*ms), Values: []float64{1, 1}})
	a.Add(pmdata.Batch{Device: 0, Metrics: testMetrics, Samples: bad})
	a.Add(pmdata.Batch{Device: 0, Metrics: testMetrics, Samples: []pmdata.Sample{{Start: uint64(t0 + 30*ms), End: uint64(t0 + 31*ms), Values: []float64{0}}}})
	a.Add(pmdata.Batch{Device: 3, Metrics: testMetrics, Samples: samples(t0, ms, 2, func(s, e int64) []float64 { return []float64{1, 2} })})
	a.Flush()
	// a sample before the frontier
	a.Add(pmdata.Batch{Device: 0, Metrics: testMetrics, Samples: samples(t0+2*ms, ms, 1, func(s, e int64) []float64 { return []float64{1, 1} })})
	snap := a.Snapshot()
	for reason, want := range map[string]float64{"unknown_process": 1, "bad_span": 1, "far_clock": 1, "unknown_device": 2, "pending_full": 0} {
		if got, _ := value(snap, "cupti_attribution_dropped_records_total", reason); got != want {
			t.Errorf("dropped records %s = %v, want %v", reason, got, want)
		}
	}
	for reason, want := range map[string]float64{"unknown_process": 1, "bad_span": 1, "far_clock": 1, "out_of_order": 1} {
		if got, _ := value(snap, "cupti_attribution_bad_coverage_spans_total", reason); got != want {
			t.Errorf("bad coverage %s = %v, want %v", reason, got, want)
		}
	}
	for reason, want := range map[string]float64{"invalid": 2, "before_frontier": 1} {
		if got, _ := value(snap, "cupti_attribution_dropped_samples_total", "0", "GPU-aaaa", reason); got != want {
			t.Errorf("dropped samples %s = %v, want %v", reason, got, want)
		}
	}
	// Conservation on device 0: 10 valid samples of 123 bytes.
	if got := sum(snap, "cupti_kernel_pcie_bytes_total", "0"); !near(got, 1230, 1e-12) {
		t.Errorf("attributed bytes %v, want 1230", got)
	}
	if got, _ := value(snap, "cupti_kernel_sampled_seconds_total", "0", "GPU-aaaa", "good"); !near(got, 0.003, 1e-12) {
		t.Errorf("good kernel sampled %v, want 0.003", got)
	}
	// The unknown device 3 got its own series.
	if got := sum(snap, "cupti_kernel_pcie_bytes_total", "3"); !near(got, 4, 1e-12) {
		t.Errorf("device 3 bytes %v, want 4", got)
	}
}

// TestPendingFull checks the cap on pending records.
func TestPendingFull(t *testing.T) {
	a, _ := newTest(t, WithMaxPendingRecords(10))
	p, info := newProc(1, "", "0")
	a.ProcessConnected(p, info)
	var recs []record.Record
	for i := range 25 {
		recs = append(recs, kernel(0, "K", t0+int64(i)*ms, t0+int64(i)*ms+ms/2))
	}
	a.Records(p, recs)
	snap := a.Snapshot()
	if got, _ := value(snap, "cupti_attribution_dropped_records_total", "pending_full"); got != 15 {
		t.Errorf("pending_full %v, want 15", got)
	}
	if got, _ := value(snap, "cupti_attribution_pending_records", "0"); got != 10 {
		t.Errorf("pending %v, want 10", got)
	}
}

// TestDerivedNames checks the attributed family names of the curated metrics.
func TestDerivedNames(t *testing.T) {
	m, err := mapping.New()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"cupti_sm_active_ratio":          "cupti_kernel_sm_active_seconds_total",
		"cupti_tensor_pipe_active_ratio": "cupti_kernel_tensor_pipe_active_seconds_total",
		"cupti_sm_occupancy_ratio":       "cupti_kernel_sm_occupancy_seconds_total",
		"cupti_pcie_bytes_total":         "cupti_kernel_pcie_bytes_total",
		"cupti_nvlink_bytes_total":       "cupti_kernel_nvlink_bytes_total",
		"cupti_dram_read_bytes_total":    "cupti_kernel_dram_read_bytes_total",
		"cupti_dram_write_bytes_total":   "cupti_kernel_dram_write_bytes_total",
	}
	seen := map[string]bool{}
	for _, c := range m.Curated() {
		props := pmdata.Properties{Type: pmdata.TypeCounter, DimUnit: "gpc_cycle"}
		if strings.HasSuffix(c.Name, "_bytes_total") {
			props.DimUnit = "byte"
		}
		if isContextSwitchMetric(c.Perfworks) { // tells the join whose turn a sample was; not attributed
			continue
		}
		met, err := m.Map(c.Perfworks, props)
		if err != nil {
			t.Fatalf("%s: %v", c.Perfworks, err)
		}
		kd, pd, _, ok := derived(met)
		if !ok {
			t.Errorf("%s: not attributable", c.Name)
			continue
		}
		if w, listed := want[c.Name]; listed {
			seen[c.Name] = true
			if kd.Name != w {
				t.Errorf("%s -> %s, want %s", c.Name, kd.Name, w)
			}
		}
		if wantPod := "cupti_pod_" + kd.Name[len("cupti_kernel_"):]; pd.Name != wantPod {
			t.Errorf("%s: pod family %s, want %s", c.Name, pd.Name, wantPod)
		}
		if len(c.Labels) > 0 && kd.LabelNames[len(kd.LabelNames)-1] != "direction" {
			t.Errorf("%s: label names %v lack direction", kd.Name, kd.LabelNames)
		}
		if kd.Kind != snapshot.KindCounter || (kd.Unit != "seconds" && kd.Unit != "bytes") {
			t.Errorf("%s: kind %v unit %q", kd.Name, kd.Kind, kd.Unit)
		}
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("curated %s missing", name)
		}
	}
}

// TestClassesNamedLater checks that kernels first seen after earlier joins keep their own
// label. On the H200 (2026-11-23, PyTorch phases) the matmul and elementwise kernels, first
// launched after the first join, were credited to "(memset)": the class-to-local map grew
// without marking its new entries unused. Each chunk here brings a new kernel name.
func TestClassesNamedLater(t *testing.T) {
	for _, est := range []string{EstimatorOverlap, EstimatorRate} {
		a, clk := newTest(t, WithEstimator(est), WithWatermark(2*time.Duration(ms)))
		p, info := newProc(7, "trainer", "0")
		a.ProcessConnected(p, info)
		a.Coverage(p, []record.Interval{{Start: uint64(t0 - ms), End: uint64(t0 + 100*ms)}})
		names := []string{"first", "second", "third", "fourth", "fifth", "sixth", "seventh"}
		for i, name := range names {
			s := t0 + int64(i)*10*ms
			a.Records(p, []record.Record{
				{Kind: record.KindMemset, Device: 0, Start: uint64(s), End: uint64(s + ms/100)},
				kernel(0, name, s+ms, s+9*ms),
			})
			a.Add(pmdata.Batch{Device: 0, Metrics: testMetrics, Samples: samples(s, ms, 10, func(x, y int64) []float64 {
				if x >= s+ms && y <= s+9*ms {
					return []float64{100, float64(1000 * (i + 1))}
				}
				return []float64{0, 0}
			})})
			clk.advance(10 * time.Millisecond)
		}
		a.Flush()
		snap := a.Snapshot()
		for i, name := range names {
			got, ok := value(snap, "cupti_kernel_pcie_bytes_total", "0", "GPU-aaaa", name, "rx")
			if want := float64(8 * 1000 * (i + 1)); !ok || !near(got, want, 1e-6) {
				t.Errorf("%s: kernel %q got %v bytes (present %v), want %v", est, name, got, ok, want)
			}
		}
		if got, _ := value(snap, "cupti_kernel_sampled_seconds_total", "0", "GPU-aaaa", "(memset)"); got > float64(7*ms/100)*1e-9*1.01 {
			t.Errorf("%s: (memset) sampled %v s, more than its records last", est, got)
		}
	}
}
