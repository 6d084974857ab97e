package gpm

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

// TestTakesNeverOverlap: Pairs of one process never call NVML's GPM at the same time (two
// goroutines sampling one GPU at once crashed inside nvmlGpmSampleGet on an H100, run CW).
func TestTakesNeverOverlap(t *testing.T) {
	var inFlight, most atomic.Int32
	enter := func() func() {
		n := inFlight.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(20 * time.Microsecond) // long enough for the other goroutine to come in
		return func() { inFlight.Add(-1) }
	}
	lib := &mock.Interface{
		GpmSampleAllocFunc: func() (nvml.GpmSample, nvml.Return) {
			return &mock.GpmSample{FreeFunc: func() nvml.Return { return nvml.SUCCESS }}, nvml.SUCCESS
		},
		GpmMetricsGetFunc: func(*nvml.GpmMetricsGetType) nvml.Return { defer enter()(); return nvml.SUCCESS },
	}
	dev := &mock.Device{
		GpmSampleGetFunc:    func(nvml.GpmSample) nvml.Return { defer enter()(); return nvml.SUCCESS },
		GpmMigSampleGetFunc: func(int, nvml.GpmSample) nvml.Return { defer enter()(); return nvml.SUCCESS },
	}
	var wg sync.WaitGroup
	for g := range 3 {
		p, ret := Alloc(lib)
		if ret != nvml.SUCCESS {
			t.Fatal(ret)
		}
		wg.Go(func() {
			defer p.Free()
			for range 200 {
				if g == 2 {
					p.TakeMIG(lib, dev, 1, nvml.GPM_METRIC_SM_UTIL)
				} else {
					p.Take(lib, dev, nvml.GPM_METRIC_SM_UTIL)
				}
			}
		})
	}
	wg.Wait()
	if m := most.Load(); m != 1 {
		t.Fatalf("GPM calls in flight at once: up to %d, want 1", m)
	}
}
