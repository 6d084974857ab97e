package exporter

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
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

// Concurrent requests with the same headers share one run of the handler; those with other
// headers get their own; a burst of distinct headers cannot grow the kept responses past
// maxCalls; the in-flight limit answers 503.
func TestCoalescingHandlerConcurrentSafe(t *testing.T) {
	var runs atomic.Int32
	h := coalesceRequests(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		if r.Header.Get("Accept") != "" {
			time.Sleep(20 * time.Millisecond)
		}
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("X-Accept", r.Header.Get("Accept"))
		io.WriteString(w, "body for "+r.Header.Get("Accept"))
	}), 0).(*coalescingHandler)
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			accept := []string{"a", "b"}[i%2]
			req := httptest.NewRequest("GET", "/metrics", nil)
			req.Header.Set("Accept", accept)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != 200 || rec.Body.String() != "body for "+accept || rec.Header().Get("X-Accept") != accept {
				t.Errorf("Accept %s: %d %q %v", accept, rec.Code, rec.Body.String(), rec.Header())
			}
		})
	}
	wg.Wait()
	if n := runs.Load(); n > 10 {
		t.Errorf("%d runs for 200 concurrent requests of two kinds", n)
	}
	for i := range 1000 {
		req := httptest.NewRequest("GET", fmt.Sprintf("/metrics?x=%d", i), nil)
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	if len(h.calls) > maxCalls {
		t.Errorf("%d responses kept, bound %d", len(h.calls), maxCalls)
	}

	block := make(chan struct{})
	limited := coalesceRequests(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-block }), 1)
	go limited.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/metrics", nil))
	time.Sleep(20 * time.Millisecond)
	rec := httptest.NewRecorder()
	limited.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	close(block)
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("second request past a limit of 1: %d, want 503", rec.Code)
	}
}
