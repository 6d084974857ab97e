package attribution

import (
	"fmt"
	"sync"
	"testing"

	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
)

// TestAttributorConcurrentSafe drives Add (one goroutine per device, as PM sources do),
// the listener calls (one goroutine per process, as connections do) and Snapshot at once;
// run with -race. Conservation must still hold after a Flush.
func TestAttributorConcurrentSafe(t *testing.T) {
	a, _ := newTest(t, WithEstimator(EstimatorRate))
	var wg sync.WaitGroup
	const steps = 200
	for dev := range 2 {
		wg.Go(func() {
			for i := range steps {
				s := t0 + int64(i)*10*ms
				a.Add(pmdata.Batch{Device: dev, Metrics: testMetrics, Samples: samples(s, ms, 10, func(s, e int64) []float64 { return []float64{50, 10} })})
			}
		})
	}
	for pid := range 3 {
		wg.Go(func() {
			p, info := newProc(uint32(pid+1), fmt.Sprint("pod", pid), "0", "1")
			a.ProcessConnected(p, info)
			for i := range steps {
				s := t0 + int64(i)*10*ms
				a.Coverage(p, []record.Interval{{Start: uint64(s), End: uint64(s + 10*ms)}})
				a.Records(p, []record.Record{kernel(uint32(i%2), "k", s, s+3*ms), kernel(0, "j", s+2*ms, s+9*ms)})
			}
			a.ProcessDisconnected(p)
		})
	}
	wg.Go(func() {
		for range steps {
			_ = a.Snapshot()
		}
	})
	wg.Wait()
	a.Flush()
	snap := a.Snapshot()
	for _, gpu := range []string{"0", "1"} {
		if got := sum(snap, "cupti_kernel_pcie_bytes_total", gpu); !near(got, 10*10*steps, 1e-9) {
			t.Errorf("gpu %s: attributed %v bytes, want %v", gpu, got, 10*10*steps)
		}
	}
}
