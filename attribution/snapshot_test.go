package attribution

import (
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
)

// TestSnapshotWaitsForAJoin: a scrape that meets a join holding the lock waits for it (up to
// snapshotWait) and serves what the join attributed; before, it served the snapshot of the
// scrape before, and a first scrape an empty one (run DC: a one-shot scrape of a live run
// found every attribution series at 0). A lock held longer than that still does not stall
// the scrape.
func TestSnapshotWaitsForAJoin(t *testing.T) {
	a, clk := newTest(t, WithWatermark(time.Second))
	p, info := newProc(10, "pod0", "0")
	a.ProcessConnected(p, info)
	a.Coverage(p, []record.Interval{{Start: uint64(t0), End: uint64(t0 + 3*int64(time.Second))}})
	a.Records(p, []record.Record{kernel(0, "k", t0, t0+2*int64(time.Second))})
	clk.set(t0 + 2*int64(time.Second))
	a.Add(pmdata.Batch{Device: 0, Metrics: testMetrics, Samples: samples(t0, ms, 2000, func(s, e int64) []float64 { return []float64{50, 1000} })})
	released := make(chan struct{}, 2)
	held := func(d time.Duration) {
		a.mu.Lock()
		go func() { time.Sleep(d); a.mu.Unlock(); released <- struct{}{} }()
	}
	held(20 * time.Millisecond)
	if v := sum(a.Snapshot(), "cupti_kernel_pcie_bytes_total", "0"); v <= 0 {
		t.Errorf("a scrape during a 20 ms join: %v bytes attributed, want the join's (the snapshot before it served)", v)
	}
	a.Add(pmdata.Batch{Device: 0, Metrics: testMetrics, Samples: samples(t0+2*int64(time.Second), ms, 10, func(s, e int64) []float64 { return []float64{50, 1000} })})
	held(time.Second)
	start := time.Now()
	a.Snapshot()
	if waited := time.Since(start); waited > snapshotWait+200*time.Millisecond {
		t.Errorf("a scrape behind a lock held 1 s waited %v, want at most about %v", waited, snapshotWait)
	}
	<-released // both holders are done
	<-released
}
