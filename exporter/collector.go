package exporter

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// collector mirrors the latest snapshots of the exporter's producers as
// const metrics. It is unchecked: the families vary with the sources.
type collector struct {
	e *Exporter
}

// Describe sends nothing: the collector is unchecked.
func (c *collector) Describe(chan<- *prometheus.Desc) {}

// Collect emits the latest snapshot of every producer, the source status and
// the drop counts. It is safe to call concurrently and never blocks on sources.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	start := time.Now()
	families, problems := merge(c.e.snapshots())
	for _, f := range families {
		desc := promDesc(f.desc)
		for _, s := range f.series {
			m, err := newMetric(desc, f.desc.Kind, s.sample)
			if err != nil {
				c.e.drops.add(dropInvalid, 1)
				m = prometheus.NewInvalidMetric(desc, fmt.Errorf("series of %s %s: %w",
					f.desc.Name, labelString(f.desc.LabelNames, s.sample.LabelValues), err))
			}
			ch <- m
		}
	}
	for _, p := range problems {
		c.e.drops.add(p.reason, p.series)
		if p.reason == dropCardinality {
			continue // folded into the family's overflow series, which is served
		}
		ch <- prometheus.NewInvalidMetric(prometheus.NewDesc(p.desc.Name, p.desc.Help, p.desc.LabelNames, nil), p.err)
	}
	c.collectStatus(ch)
	c.e.drops.collect(ch, "prometheus")
	ch <- prometheus.MustNewConstMetric(collectDurationDesc, prometheus.GaugeValue, time.Since(start).Seconds())
}

// newMetric converts one sample to a const metric of the given kind.
func newMetric(desc *prometheus.Desc, kind snapshot.Kind, s *snapshot.Sample) (prometheus.Metric, error) {
	switch kind {
	case snapshot.KindGauge:
		return prometheus.NewConstMetric(desc, prometheus.GaugeValue, s.Value, s.LabelValues...)
	case snapshot.KindCounter:
		return prometheus.NewConstMetricWithCreatedTimestamp(desc, prometheus.CounterValue, s.Value, s.Start, s.LabelValues...)
	case snapshot.KindHistogram:
		return newHistogram(desc, s.Histogram, s.Start, s.LabelValues)
	}
	return nil, fmt.Errorf("unknown metric kind %d", kind)
}
