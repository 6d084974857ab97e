package exporter

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
)

// 200 concurrent scrapes share a handful of gathers, and each gets a complete result.
func TestCoalescingGathererConcurrentSafe(t *testing.T) {
	var gathers, inFlight, maxInFlight atomic.Int32
	slow := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		gathers.Add(1)
		n := inFlight.Add(1)
		for m := maxInFlight.Load(); n > m && !maxInFlight.CompareAndSwap(m, n); m = maxInFlight.Load() {
		}
		time.Sleep(20 * time.Millisecond)
		inFlight.Add(-1)
		return []*dto.MetricFamily{{Name: proto.String("x_total"), Type: dto.MetricType_COUNTER.Enum(),
			Metric: []*dto.Metric{{Counter: &dto.Counter{Value: proto.Float64(1)}}}}}, nil
	})
	g := coalesce(slow)
	var wg sync.WaitGroup
	for range 200 {
		wg.Go(func() {
			for range 5 {
				mfs, err := g.Gather()
				if err != nil || len(mfs) != 1 || mfs[0].GetName() != "x_total" {
					t.Errorf("Gather: %v, %v", mfs, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if maxInFlight.Load() != 1 {
		t.Errorf("%d gathers ran at once, want 1", maxInFlight.Load())
	}
	// 1000 scrapes; each gather serves every scrape that arrived while it ran.
	if n := gathers.Load(); n > 100 {
		t.Errorf("%d gathers for 1000 concurrent scrapes, want them coalesced", n)
	} else {
		t.Logf("%d gathers served 1000 scrapes from 200 concurrent scrapers", n)
	}
}
