package cupti_test

import (
	"errors"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/internal/cupti"
	"github.com/cupti-exporter/cupti-exporter/internal/cupti/cuptitest"
)

func newHost(t *testing.T, l *cupti.Lib) *cupti.Host {
	t.Helper()
	av, err := l.CounterAvailability(0)
	if err != nil {
		t.Fatal(err)
	}
	h, err := l.NewHost("GH100", av)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func TestHostCatalog(t *testing.T) {
	l := open(t)
	h := newHost(t, l)
	for typ, n := range map[cupti.MetricType]int{cupti.MetricTypeCounter: 611, cupti.MetricTypeRatio: 605, cupti.MetricTypeThroughput: 63} {
		names, err := h.BaseMetrics(typ)
		if err != nil || len(names) != n {
			t.Errorf("BaseMetrics(%d) = %d names, %v; want %d", typ, len(names), err, n)
		}
	}
	subs, err := h.SubMetrics(cupti.MetricTypeCounter, "gr__cycles_active")
	if err != nil || !slices.Contains(subs, ".avg.pct_of_peak_sustained_elapsed") || !slices.Contains(subs, ".sum") {
		t.Errorf("SubMetrics = %q, %v", subs, err)
	}
	p, err := h.Properties("gr__cycles_active.sum")
	want := cupti.MetricProperties{Name: "gr__cycles_active.sum", Description: "fake description of gr__cycles_active",
		HWUnit: "gr", DimUnit: "sys_cycle", Type: cupti.MetricTypeCounter}
	if err != nil || p != want {
		t.Errorf("Properties = %+v, %v", p, err)
	}
	if p, err := h.Properties("dram__throughput"); err != nil || p.Type != cupti.MetricTypeThroughput || p.DimUnit != "percent" {
		t.Errorf("Properties(dram__throughput) = %+v, %v", p, err)
	}
	if _, err := h.Properties("no__such_metric.sum"); !errors.Is(err, cupti.ErrInvalidMetricName) ||
		!strings.Contains(err.Error(), "no__such_metric.sum") {
		t.Errorf("Properties(unknown) = %v", err)
	}
	if n, err := h.MaxMetricsPerPass(); err != nil || n != 212 {
		t.Errorf("MaxMetricsPerPass = %d, %v", n, err)
	}
	chips, err := l.SupportedChips()
	if err != nil || !slices.Contains(chips, "GH100") {
		t.Errorf("SupportedChips = %q, %v", chips, err)
	}
	if _, err := l.NewHost("XX999", nil); err == nil || !strings.Contains(err.Error(), "CUPTI_ERROR_INVALID_CHIP_NAME (46)") {
		t.Errorf("NewHost(XX999) = %v", err)
	}
}

func TestConfigImagePasses(t *testing.T) {
	l := open(t)
	h := newHost(t, l)
	four := []string{"sys__cycles_elapsed.avg.per_second", "gpc__cycles_elapsed.avg.per_second",
		"gr__cycles_active.sum.pct_of_peak_sustained_elapsed", "sm__cycles_active.avg.pct_of_peak_sustained_elapsed"}
	nine := append(append([]string(nil), four...), "dram__cycles_active.avg.pct_of_peak_sustained_elapsed",
		"pcie__read_bytes.sum", "pcie__write_bytes.sum", "sm__warps_active.avg.pct_of_peak_sustained_elapsed",
		"dram__throughput.avg.pct_of_peak_sustained_elapsed")
	for _, c := range []struct {
		metrics []string
		passes  int
	}{
		{four, 1}, {nine[:8], 1}, {nine, 2},
		{[]string{"sm__throughput.avg.pct_of_peak_sustained_elapsed"}, 19},
	} {
		img, err := h.ConfigImage(c.metrics)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := img.Passes(); err != nil || n != c.passes {
			t.Errorf("%d metrics: Passes = %d, %v; want %d", len(c.metrics), n, err, c.passes)
		}
		if img.Size() == 0 || !slices.Equal(img.Metrics(), c.metrics) {
			t.Errorf("image size %d, metrics %q", img.Size(), img.Metrics())
		}
		img.Free()
		img.Free()
		if _, err := img.Passes(); !errors.Is(err, cupti.ErrClosed) {
			t.Errorf("Passes after Free = %v", err)
		}
	}
	if _, err := h.ConfigImage([]string{"gr__cycles_active.bogus"}); !errors.Is(err, cupti.ErrInvalidMetricName) {
		t.Errorf("ConfigImage(bad) = %v", err)
	}
}

func TestNvperfMissing(t *testing.T) {
	l := open(t)
	cuptitest.Inject(t, "nvperf_missing")
	_, err := l.NewHost("GH100", nil)
	if err == nil || !strings.Contains(err.Error(), "CUPTI_ERROR_NOT_INITIALIZED (15)") ||
		!strings.Contains(err.Error(), "libnvperf_host.so") {
		t.Errorf("NewHost = %v", err)
	}
}

// A Host dropped without Close is de-initialised by its cleanup.
func TestHostCleanupSafetyNet(t *testing.T) {
	l := open(t)
	base := cuptitest.Query(t, "hosts")
	func() {
		if _, err := l.NewHost("GH100", nil); err != nil {
			t.Fatal(err)
		}
	}()
	if cuptitest.Query(t, "hosts") != base+1 {
		t.Fatal("host not counted")
	}
	deadline := time.Now().Add(5 * time.Second)
	for cuptitest.Query(t, "hosts") != base && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if got := cuptitest.Query(t, "hosts"); got != base {
		t.Errorf("live hosts %d, want %d: the cleanup did not run", got, base)
	}
}
