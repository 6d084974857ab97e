package exporter

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// coalescingGatherer lets concurrent scrapes share one Gather: a scrape that arrives while a
// gather runs waits for it and serves its result (at most one gather old) instead of
// starting its own. So 200 concurrent scrapers cost about one collection at a time, not
// 200, and cannot starve the PM decode loop of CPU. The families are shared read-only by
// the waiting requests (promhttp only encodes them).
type coalescingGatherer struct {
	g prometheus.Gatherer

	mu   sync.Mutex
	call *gatherCall // the gather in flight, if any
}

type gatherCall struct {
	done chan struct{}
	mfs  []*dto.MetricFamily
	err  error
}

// coalesce wraps g so that concurrent Gather calls share one.
func coalesce(g prometheus.Gatherer) prometheus.Gatherer {
	return &coalescingGatherer{g: g}
}

// Gather returns the result of the gather in flight, or runs one.
func (c *coalescingGatherer) Gather() ([]*dto.MetricFamily, error) {
	c.mu.Lock()
	if call := c.call; call != nil {
		c.mu.Unlock()
		<-call.done
		return call.mfs, call.err
	}
	call := &gatherCall{done: make(chan struct{})}
	c.call = call
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.call = nil
		c.mu.Unlock()
		close(call.done)
	}()
	call.mfs, call.err = c.g.Gather()
	return call.mfs, call.err
}
