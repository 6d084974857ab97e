package cupti_test

import (
	"errors"
	"math"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/internal/cupti"
)

// TestRealCUPTI runs the whole PM sampling cycle against the machine's real CUPTI and GPU 0.
// It runs only with CUPTI_EXPORTER_REAL_TEST=1 (the GPU machine; see scripts/gpu/).
func TestRealCUPTI(t *testing.T) {
	if os.Getenv("CUPTI_EXPORTER_REAL_TEST") != "1" {
		t.Skip("set CUPTI_EXPORTER_REAL_TEST=1 on a machine with a GPU and CUPTI 13 to run this")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	l, err := cupti.Open(cupti.Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer l.Close()
	t.Logf("libcupti %s, API version %d, warnings %q", l.Path(), l.Version(), l.Warnings())
	devs, err := l.Devices()
	if err != nil || len(devs) == 0 {
		t.Fatalf("Devices = %v, %v", devs, err)
	}
	t.Logf("devices: %+v", devs)
	if err := l.PMSamplingSupported(0); err != nil {
		t.Fatalf("PMSamplingSupported: %v", err)
	}
	chip, err := l.ChipName(0)
	if err != nil {
		t.Fatal(err)
	}
	av, err := l.CounterAvailability(0)
	if err != nil {
		t.Fatal(err)
	}
	h, err := l.NewHost(chip, av)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	n := 0
	for _, typ := range []cupti.MetricType{cupti.MetricTypeCounter, cupti.MetricTypeRatio, cupti.MetricTypeThroughput} {
		names, err := h.BaseMetrics(typ)
		if err != nil {
			t.Fatal(err)
		}
		n += len(names)
	}
	subs, err := h.SubMetrics(cupti.MetricTypeCounter, "gr__cycles_active")
	if err != nil {
		t.Fatal(err)
	}
	props, err := h.Properties("gr__cycles_active.sum")
	if err != nil {
		t.Fatal(err)
	}
	maxPer, err := h.MaxMetricsPerPass()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("chip %s: %d base metrics, max %d per pass; gr__cycles_active sub-metrics %q; properties %+v", chip, n, maxPer, subs, props)
	if _, err := h.Properties("no__such_metric.sum"); !errors.Is(err, cupti.ErrInvalidMetricName) {
		t.Errorf("Properties(unknown) = %v", err)
	}

	metrics := []string{"sys__cycles_elapsed.avg.per_second", "gpc__cycles_elapsed.avg.per_second",
		"gr__cycles_active.sum.pct_of_peak_sustained_elapsed", "sm__cycles_active.avg.pct_of_peak_sustained_elapsed"}
	img, err := h.ConfigImage(metrics)
	if err != nil {
		t.Fatal(err)
	}
	defer img.Free()
	if p, err := img.Passes(); err != nil || p != 1 {
		t.Fatalf("Passes = %d, %v", p, err)
	}
	multi, err := h.ConfigImage([]string{"sm__throughput.avg.pct_of_peak_sustained_elapsed"})
	if err != nil {
		t.Fatal(err)
	}
	p19, _ := multi.Passes()
	multi.Free()
	t.Logf("config image %d bytes; sm__throughput alone needs %d passes", img.Size(), p19)

	s, err := l.Enable(0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Disable()
	if _, err := l.Enable(0); !errors.Is(err, cupti.ErrInvalidOperation) {
		t.Errorf("second Enable = %v", err)
	}
	if err := s.SetConfig(img, cupti.SetConfig{HardwareBufferSize: 64 << 20, Interval: 1_000_000, Trigger: cupti.TriggerGPUTime}); err != nil {
		t.Fatal(err)
	}
	cd, err := s.NewCounterData(metrics, 2000)
	if err != nil {
		t.Fatal(err)
	}
	defer cd.Free()
	start, _ := l.Timestamp()
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	res, err := s.Decode(cd)
	if err != nil {
		t.Fatal(err)
	}
	info, err := cd.Info()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("decode during sampling: %+v, info %+v, counter data %d bytes", res, info, cd.Size())
	if info.Completed < 100 {
		t.Errorf("%d samples in 300 ms at 1 kHz", info.Completed)
	}
	out := make([]float64, len(metrics))
	for i := 0; i < info.Completed; i++ {
		b, e, err := cd.SampleTimes(i)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Evaluate(cd, i, out); err != nil {
			t.Fatal(err)
		}
		for j, v := range out {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Errorf("sample %d metric %s = %v", i, metrics[j], v)
			}
		}
		if i < 3 || i == info.Completed-1 {
			t.Logf("sample %d: start %+.3f ms from Start, %d ns long: %v", i, float64(int64(b)-int64(start))/1e6, e-b, out)
		}
	}
	if err := cd.Reset(); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	res, err = s.Decode(cd)
	info, _ = cd.Info()
	t.Logf("drain after Stop: %+v, %v, info %+v", res, err, info)
	if err := s.Disable(); err != nil {
		t.Fatal(err)
	}
}
