package health

import (
	"log/slog"
	"sync"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// fakeGPM gives the fake server GPM: every GPU but the last supports it; a sample remembers
// its GPU and the collection it was taken in; GPU 1 has no DRAM bandwidth metric.
type fakeGPM struct {
	mu        sync.Mutex
	taken     map[nvml.GpmSample][2]int // sample -> GPU index, sequence number
	seq       int
	allocs    int
	frees     int
	queries   int
	misorders int // metric requests whose Sample1 is not older than Sample2
}

func newFakeGPM(srv *server.Server) *fakeGPM {
	f := &fakeGPM{taken: map[nvml.GpmSample][2]int{}}
	srv.GpmSampleAllocFunc = func() (nvml.GpmSample, nvml.Return) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.allocs++
		s := &mock.GpmSample{}
		s.FreeFunc = func() nvml.Return {
			f.mu.Lock()
			f.frees++
			f.mu.Unlock()
			return nvml.SUCCESS
		}
		return s, nvml.SUCCESS
	}
	srv.GpmMetricsGetFunc = func(m *nvml.GpmMetricsGetType) nvml.Return {
		f.mu.Lock()
		defer f.mu.Unlock()
		a, b := f.taken[m.Sample1], f.taken[m.Sample2]
		if a[1] >= b[1] || a[0] != b[0] {
			f.misorders++
		}
		for i := range m.NumMetrics {
			x := &m.Metrics[i]
			x.NvmlReturn = uint32(nvml.SUCCESS)
			switch nvml.GpmMetricId(x.MetricId) {
			case nvml.GPM_METRIC_SM_UTIL:
				x.Value = 42.5
			case nvml.GPM_METRIC_ANY_TENSOR_UTIL:
				x.Value = 100.4 // rounding above 100 %: served as 1
			case nvml.GPM_METRIC_DRAM_BW_UTIL:
				x.Value = 12
				if b[0] == 1 {
					x.NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
				}
			default:
				x.NvmlReturn = uint32(nvml.ERROR_INVALID_ARGUMENT)
			}
		}
		return nvml.SUCCESS
	}
	for i, d := range srv.Devices {
		dev := d.(*server.Device)
		dev.GpmQueryDeviceSupportFunc = func() (nvml.GpmSupport, nvml.Return) {
			f.mu.Lock()
			f.queries++
			f.mu.Unlock()
			return nvml.GpmSupport{Version: 1, IsSupportedDevice: uint32(min(len(srv.Devices)-1-i, 1))}, nvml.SUCCESS
		}
		dev.GpmSampleGetFunc = func(s nvml.GpmSample) nvml.Return {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.seq++
			f.taken[s] = [2]int{i, f.seq}
			return nvml.SUCCESS
		}
	}
	return f
}

// TestGPM: with WithGPM, every GPM-capable GPU gets the GPM ratios (from the second
// collection on: GPM needs two samples), labelled source="gpm"; a GPU without GPM and a
// metric a GPU does not support are absent, not zero; samples are allocated once per GPU,
// paired oldest first, and freed.
func TestGPM(t *testing.T) {
	srv, _ := newFakeServer(t)
	f := newFakeGPM(srv)
	src := New(srv, slog.New(slog.DiscardHandler), WithoutEvents(), WithGPM(true))
	started(t, src)
	src.Collect()
	for _, name := range []string{"cupti_gpm_sm_active_ratio", "cupti_gpm_tensor_active_ratio", "cupti_gpm_dram_bandwidth_ratio"} {
		if family(src.Snapshot(), name) != nil {
			t.Errorf("%s after one sample: GPM needs two", name)
		}
	}
	for range 3 {
		src.Collect()
	}
	snap := src.Snapshot()
	if f := family(snap, "cupti_gpm_sm_active_ratio"); f == nil || len(f.Samples) != 7 {
		t.Fatalf("SM active of the 7 GPM-capable GPUs expected, got %+v", f)
	}
	for _, c := range []struct {
		name string
		gpu  string
		want float64
		ok   bool
	}{
		{"cupti_gpm_sm_active_ratio", "0", 0.425, true},
		{"cupti_gpm_tensor_active_ratio", "0", 1, true},
		{"cupti_gpm_dram_bandwidth_ratio", "0", 0.12, true},
		{"cupti_gpm_dram_bandwidth_ratio", "1", 0, false}, // not supported on GPU 1
		{"cupti_gpm_sm_active_ratio", "1", 0.425, true},
		{"cupti_gpm_sm_active_ratio", "7", 0, false}, // no GPM
	} {
		v, ok := series(t, snap, c.name, map[string]string{"gpu": c.gpu, "source": "gpm"})
		if ok != c.ok || ok && v != c.want {
			t.Errorf("%s{gpu=%s} = %v (present %v), want %v (present %v)", c.name, c.gpu, v, ok, c.want, c.ok)
		}
	}
	if family(snap, "cupti_health_read_errors_total") != nil {
		t.Errorf("read errors: %+v", family(snap, "cupti_health_read_errors_total"))
	}
	f.mu.Lock()
	if f.allocs != 14 || f.queries != 8 || f.misorders != 0 {
		t.Errorf("%d samples allocated (want 2 per GPM GPU: 14), support queried %d times (want once per GPU: 8), %d pairs out of order",
			f.allocs, f.queries, f.misorders)
	}
	f.mu.Unlock()
	src.freeGPM()
	f.mu.Lock()
	if f.frees != 14 {
		t.Errorf("%d samples freed, want 14", f.frees)
	}
	f.mu.Unlock()
}

// TestGPMOff: without WithGPM, GPM is never touched.
func TestGPMOff(t *testing.T) {
	srv, _ := newFakeServer(t)
	f := newFakeGPM(srv)
	src := New(srv, slog.New(slog.DiscardHandler), WithoutEvents())
	started(t, src)
	src.Collect()
	src.Collect()
	if f.queries != 0 || f.allocs != 0 || family(src.Snapshot(), "cupti_gpm_sm_active_ratio") != nil {
		t.Errorf("GPM read without WithGPM: %d queries, %d samples", f.queries, f.allocs)
	}
}
