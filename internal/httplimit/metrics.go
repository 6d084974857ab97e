package httplimit

import (
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// Metrics counts the connections of a process's listeners by listener name (listeners of
// one name add up): <namespace>_http_connections (open now),
// <namespace>_http_connections_limit (the most held at once) and
// <namespace>_http_connections_closed_total{reason}. It is a prometheus.Collector.
type Metrics struct {
	openDesc, limitDesc, closedDesc *prometheus.Desc

	mu     sync.Mutex
	byName map[string]*counts
	names  []string // in the order added
}

type counts struct {
	limit  atomic.Int64
	open   atomic.Int64
	closed [len(reasons)]atomic.Uint64
}

// Descs returns the families of listeners named under namespace (cupti_exporter): open,
// limit and closed, with their OpenTelemetry names under the namespace's dotted form.
func Descs(namespace string) (open, limit, closed *snapshot.Desc) {
	var t snapshot.Table // families made per namespace, not one package's fixed table
	otel := strings.ReplaceAll(namespace, "_", ".") + ".http."
	return t.Gauge(namespace+"_http_connections", "", otel+"active_connections", "{connection}",
			"HTTP connections open now, by listener.", "listener"),
		t.Gauge(namespace+"_http_connections_limit", "", otel+"connection_limit", "{connection}",
			"Most HTTP connections a listener holds at once (docs/security.md, \"HTTP listeners\").", "listener"),
		t.Counter(namespace+"_http_connections_closed_total", "", otel+"closed_connections", "{connection}",
			"HTTP connections closed by a limit, by listener and reason: limit (refused, every connection was in a request), "+
				"evicted (waiting longest without a request, closed to make room for a newcomer), timeout (a header, read, write or idle timeout passed).",
			"listener", "reason")
}

// NewMetrics returns the metrics of listeners named under namespace (cupti_exporter).
func NewMetrics(namespace string) *Metrics {
	open, limit, closed := Descs(namespace)
	return &Metrics{openDesc: promDesc(open), limitDesc: promDesc(limit), closedDesc: promDesc(closed), byName: map[string]*counts{}}
}

// promDesc is d as client_golang describes it (no unit metadata, as before).
func promDesc(d *snapshot.Desc) *prometheus.Desc {
	return prometheus.NewDesc(d.Name, d.Help, d.LabelNames, nil)
}

func (m *Metrics) get(name string) *counts {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.byName[name]
	if !ok {
		c = &counts{}
		m.byName[name] = c
		m.names = append(m.names, name)
	}
	return c
}

// close counts a connection a limit closed for reason.
func (c *counts) close(reason string) {
	for i, r := range reasons {
		if r == reason {
			c.closed[i].Add(1)
		}
	}
}

// Closed returns how many connections of listener name a limit closed for reason.
func (m *Metrics) Closed(name, reason string) uint64 {
	c := m.get(name)
	for i, r := range reasons {
		if r == reason {
			return c.closed[i].Load()
		}
	}
	return 0
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.openDesc
	ch <- m.limitDesc
	ch <- m.closedDesc
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	names := m.names
	m.mu.Unlock()
	for _, n := range names {
		c := m.get(n)
		ch <- prometheus.MustNewConstMetric(m.openDesc, prometheus.GaugeValue, float64(c.open.Load()), n)
		ch <- prometheus.MustNewConstMetric(m.limitDesc, prometheus.GaugeValue, float64(c.limit.Load()), n)
		for i, r := range reasons {
			ch <- prometheus.MustNewConstMetric(m.closedDesc, prometheus.CounterValue, float64(c.closed[i].Load()), n, r)
		}
	}
}
