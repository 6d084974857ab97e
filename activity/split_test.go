package activity

import (
	"slices"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity/record"
)

// By default the duration histograms are node-wide: one kernel histogram per kernel label
// and one copy histogram per copy kind, whatever the GPUs and pods, with the GPU and pod
// labels empty; the byte and GPU-time counters stay per GPU and pod. Kernels folded into
// "other" are counted.
func TestHistogramsNodeWideByDefault(t *testing.T) {
	clk := newFakeClock()
	a := NewAggregator(WithTopKernels(1), withClock(clk.now))
	p1, p2 := testProcess(1), testProcess(2)
	p2.Pod = "trainer-1"
	a.Add(p1, []record.Record{kernel(0, "gemm", 1e6), kernel(1, "gemm", 2e6), kernel(0, "rare", 1e3)})
	a.Add(p2, []record.Record{kernel(0, "gemm", 3e6), {Kind: record.KindMemcpy, Device: 1, Start: 1, End: 11, Bytes: 8, CopyKind: 1, SrcKind: 2, DstKind: 3}})
	a.Add(p1, []record.Record{{Kind: record.KindMemcpy, Device: 0, Start: 1, End: 21, Bytes: 4, CopyKind: 1, SrcKind: 2, DstKind: 3}})
	s := a.Snapshot()
	if got := labelSets(family(t, s, "cupti_kernel_duration_seconds")); !slices.EqualFunc(got, [][]string{
		{"", "", "", "", "", "gemm"}, {"", "", "", "", "", "other"}}, slices.Equal) {
		t.Fatalf("kernel histograms %q, want one per kernel label for the node", got)
	}
	if h := mustSample(t, s, "cupti_kernel_duration_seconds", "", "", "", "", "", "gemm").Histogram; h.Count != 3 || !approx(h.Sum, 6e-3) {
		t.Errorf("gemm: %d kernels, %g s; want 3 and 0.006", h.Count, h.Sum)
	}
	if v := family(t, s, "cupti_activity_kernels_folded_total").Samples[0].Value; v != 1 {
		t.Errorf("folded %v, want 1 (rare)", v)
	}
	if n := len(family(t, s, "cupti_kernel_gpu_seconds_total").Samples); n != 3 {
		t.Errorf("%d GPU-time series, want 3 (pod 1 on GPUs 0 and 1, pod 2 on GPU 0)", n)
	}
	if got := labelSets(family(t, s, "cupti_memcpy_duration_seconds")); len(got) != 1 || got[0][0] != "" || got[0][3] != "" {
		t.Errorf("memcpy histograms %q, want one node-wide", got)
	}
	if h := family(t, s, "cupti_memcpy_duration_seconds").Samples[0].Histogram; h.Count != 2 {
		t.Errorf("memcpy histogram holds %d copies, want 2", h.Count)
	}
	if n := len(family(t, s, "cupti_memcpy_bytes_total").Samples); n != 2 {
		t.Errorf("%d memcpy byte series, want 2 (per GPU and pod)", n)
	}
	// A node-wide series expires after the TTL without records, like the others.
	clk.advance(DefaultSeriesTTL + time.Minute)
	a.Disconnect(p1)
	a.Disconnect(p2)
	clk.advance(DefaultSeriesTTL + time.Minute)
	if n := len(family(t, a.Snapshot(), "cupti_kernel_duration_seconds").Samples); n != 0 {
		t.Errorf("%d kernel histograms after the TTL, want 0", n)
	}
}

// The split, the buckets and the per-pod histogram are the user's.
func TestHistogramSplitAndBuckets(t *testing.T) {
	a := NewAggregator(WithKernelHistogramSplit(SplitGPU), WithHistogramBuckets([]float64{1e-3, 1}), WithPodHistograms(false))
	p := testProcess(1)
	a.Add(p, []record.Record{kernel(0, "k", 1e6), kernel(1, "k", 2e6)})
	s := a.Snapshot()
	h := mustSample(t, s, "cupti_kernel_duration_seconds", "1", "GPU-bbbb", "", "", "", "k").Histogram
	if !slices.Equal(h.Bounds, []float64{1e-3, 1}) || !slices.Equal(h.Cumulative, []uint64{0, 1}) {
		t.Errorf("bounds %v cumulative %v, want [0.001 1] [0 1]", h.Bounds, h.Cumulative)
	}
	for _, f := range s.Families {
		if f.Desc.Name == "cupti_pod_kernel_duration_seconds" {
			t.Error("per-pod histograms served although turned off")
		}
	}
	if _, err := ParseSplit([]string{"gpu", "pod"}); err != nil {
		t.Error(err)
	}
	if _, err := ParseSplit([]string{"kernel"}); err == nil {
		t.Error("split by kernel accepted: the kernel is always split")
	}
	// Invalid bounds keep the default.
	b := NewAggregator(WithHistogramBuckets([]float64{1, 0.5}))
	b.Add(p, []record.Record{kernel(0, "k", 1e6)})
	if got := family(t, b.Snapshot(), "cupti_kernel_duration_seconds").Samples[0].Histogram.Bounds; !slices.Equal(got, DefaultBuckets) {
		t.Errorf("bounds %v, want the default", got)
	}
}
