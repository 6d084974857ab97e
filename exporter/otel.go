package exporter

import (
	"context"
	"log/slog"
	"math"
	"slices"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/prometheus/common/version"

	"github.com/cupti-exporter/cupti-exporter/mapping"
)

// scopeName is the instrumentation scope of every metric the OTLP outlet pushes.
const scopeName = "github.com/cupti-exporter/cupti-exporter/exporter"

// metricProducer is an OpenTelemetry sdk/metric Producer over the snapshots of
// a set of producers.
type metricProducer struct {
	producers []Producer
	start     time.Time // start time of counters and histograms whose samples have none
	logger    *slog.Logger
	drops     *dropCounter
}

// NewMetricProducer returns an OpenTelemetry Producer that converts the latest
// snapshots of producers to OTel metric data on every Produce:
//
//   - gauges become Gauges;
//   - counters become cumulative monotonic Sums, with the sample's Start as
//     start time, or the time NewMetricProducer was called when it has none;
//   - histograms with native buckets become ExponentialHistograms (the
//     Prometheus schema is the OTel scale; OTel offset = lowest Prometheus
//     index - 1, since Prometheus index i covers (b^(i-1), b^i] and OTel index
//     i covers (b^i, b^(i+1)]); other histograms become explicit-bucket
//     Histograms. A family is exponential only when all its series are native.
//
// Names and units come from mapping.Desc's OTelName and OTelUnit (Name and
// Unit when empty), label names become attribute keys. Families are merged
// across producers as on the Prometheus side; conflicting families, repeated
// label sets and invalid histograms are dropped (Produce still succeeds, since
// an error would stop the whole export).
func NewMetricProducer(producers ...Producer) sdkmetric.Producer {
	return newMetricProducer(producers, nil, nil)
}

func newMetricProducer(producers []Producer, logger *slog.Logger, drops *dropCounter) *metricProducer {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &metricProducer{producers: slices.Clone(producers), start: time.Now(), logger: logger, drops: drops}
}

// Produce converts the latest snapshots. It is safe for concurrent use and
// never blocks on sources.
func (p *metricProducer) Produce(context.Context) ([]metricdata.ScopeMetrics, error) {
	snaps := make([]*mapping.Snapshot, 0, len(p.producers))
	for _, pr := range p.producers {
		if s := pr.Snapshot(); s != nil {
			snaps = append(snaps, s)
		}
	}
	families, problems := merge(snaps)
	for _, pb := range problems {
		p.drops.add(pb.reason, pb.series)
		p.logger.Debug("series dropped from OTLP", "reason", pb.reason.String(), "err", pb.err)
	}
	metrics := make([]metricdata.Metrics, 0, len(families))
	for _, f := range families {
		if m, ok := p.convert(f); ok {
			metrics = append(metrics, m)
		}
	}
	if len(metrics) == 0 {
		return nil, nil
	}
	return []metricdata.ScopeMetrics{{
		Scope:   instrumentation.Scope{Name: scopeName, Version: version.Version},
		Metrics: metrics,
	}}, nil
}

func (p *metricProducer) convert(f *family) (metricdata.Metrics, bool) {
	d := f.desc
	m := metricdata.Metrics{Name: d.OTelName, Description: d.Help, Unit: d.OTelUnit}
	if m.Name == "" {
		m.Name = d.Name
	}
	if m.Unit == "" {
		m.Unit = d.Unit
	}
	switch d.Kind {
	case mapping.KindGauge:
		g := metricdata.Gauge[float64]{DataPoints: make([]metricdata.DataPoint[float64], len(f.series))}
		for i, s := range f.series {
			g.DataPoints[i] = metricdata.DataPoint[float64]{
				Attributes: attributes(d, s.sample), Time: pointTime(s), Value: s.sample.Value}
		}
		m.Data = g
	case mapping.KindCounter:
		sum := metricdata.Sum[float64]{Temporality: metricdata.CumulativeTemporality, IsMonotonic: true,
			DataPoints: make([]metricdata.DataPoint[float64], len(f.series))}
		for i, s := range f.series {
			sum.DataPoints[i] = metricdata.DataPoint[float64]{
				Attributes: attributes(d, s.sample), StartTime: p.startTime(s), Time: pointTime(s), Value: s.sample.Value}
		}
		m.Data = sum
	case mapping.KindHistogram:
		data, ok := p.histogram(f)
		if !ok {
			return m, false
		}
		m.Data = data
	default:
		p.drops.add(dropInvalid, len(f.series))
		return m, false
	}
	return m, true
}

// histogram converts a histogram family, dropping series without a valid value.
func (p *metricProducer) histogram(f *family) (metricdata.Aggregation, bool) {
	valid := make([]series, 0, len(f.series))
	native := true
	for _, s := range f.series {
		h := s.sample.Histogram
		if h == nil || len(h.Bounds) != len(h.Cumulative) || (h.Native && validateNative(h) != nil) {
			p.drops.add(dropInvalid, 1)
			continue
		}
		valid = append(valid, s)
		native = native && h.Native
	}
	if len(valid) == 0 {
		return nil, false
	}
	if native {
		eh := metricdata.ExponentialHistogram[float64]{Temporality: metricdata.CumulativeTemporality,
			DataPoints: make([]metricdata.ExponentialHistogramDataPoint[float64], len(valid))}
		for i, s := range valid {
			h := s.sample.Histogram
			eh.DataPoints[i] = metricdata.ExponentialHistogramDataPoint[float64]{
				Attributes: attributes(f.desc, s.sample), StartTime: p.startTime(s), Time: pointTime(s),
				Count: h.Count, Sum: h.Sum, Scale: h.Schema, ZeroCount: h.ZeroCount, ZeroThreshold: h.ZeroThreshold,
				PositiveBucket: exponentialBucket(h.PositiveBuckets),
			}
		}
		return eh, true
	}
	hg := metricdata.Histogram[float64]{Temporality: metricdata.CumulativeTemporality,
		DataPoints: make([]metricdata.HistogramDataPoint[float64], len(valid))}
	for i, s := range valid {
		h := s.sample.Histogram
		hg.DataPoints[i] = metricdata.HistogramDataPoint[float64]{
			Attributes: attributes(f.desc, s.sample), StartTime: p.startTime(s), Time: pointTime(s),
			Count: h.Count, Sum: h.Sum, Bounds: slices.Clone(h.Bounds), BucketCounts: explicitCounts(h),
		}
	}
	return hg, true
}

// exponentialBucket turns Prometheus-indexed bucket counts into a dense OTel
// bucket: OTel index = Prometheus index - 1.
func exponentialBucket(m map[int]int64) metricdata.ExponentialBucket {
	lo, hi := math.MaxInt, math.MinInt
	for i, n := range m {
		if n != 0 {
			lo, hi = min(lo, i), max(hi, i)
		}
	}
	if lo > hi {
		return metricdata.ExponentialBucket{}
	}
	counts := make([]uint64, hi-lo+1)
	for i, n := range m {
		if n != 0 {
			counts[i-lo] = uint64(n)
		}
	}
	return metricdata.ExponentialBucket{Offset: int32(lo - 1), Counts: counts}
}

// explicitCounts turns cumulative classic buckets into per-bucket counts,
// the last one being the +Inf bucket.
func explicitCounts(h *mapping.HistogramValue) []uint64 {
	counts := make([]uint64, len(h.Bounds)+1)
	var prev uint64
	for i, c := range h.Cumulative {
		counts[i] = c - min(prev, c)
		prev = max(prev, c)
	}
	counts[len(h.Bounds)] = h.Count - min(prev, h.Count)
	return counts
}

func attributes(d *mapping.Desc, s *mapping.Sample) attribute.Set {
	kvs := make([]attribute.KeyValue, len(d.LabelNames))
	for i, n := range d.LabelNames {
		kvs[i] = attribute.String(n, s.LabelValues[i])
	}
	return attribute.NewSet(kvs...)
}

func pointTime(s series) time.Time {
	if s.time.IsZero() {
		return time.Now()
	}
	return s.time
}

func (p *metricProducer) startTime(s series) time.Time {
	if s.sample.Start.IsZero() {
		return p.start
	}
	return s.sample.Start
}
