package webhook

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// counters is a fixed set of named counters, emitted as one const metric each.
type counters struct {
	names []string
	by    map[string]*atomic.Uint64
}

func newCounters(names ...string) *counters {
	c := &counters{names: names, by: make(map[string]*atomic.Uint64, len(names))}
	for _, n := range names {
		c.by[n] = new(atomic.Uint64)
	}
	return c
}

// inc counts one for name, which must be one of the names given to newCounters.
func (c *counters) inc(name string) { c.by[name].Add(1) }

func (c *counters) get(name string) uint64 { return c.by[name].Load() }

func (c *counters) collect(ch chan<- prometheus.Metric, d *prometheus.Desc) {
	for _, n := range c.names {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(c.by[n].Load()), n)
	}
}
