package exporter

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// scopeName is the instrumentation scope of every metric the OTLP outlet pushes.
const scopeName = "github.com/cupti-exporter/cupti-exporter/exporter"

// metricProducer is an OpenTelemetry sdk/metric Producer over the snapshots of
// a set of producers.
type metricProducer struct {
	producers []Producer
	naming    Naming
	self      prometheus.Gatherer // self-metrics pushed besides the snapshots; nil: none
	start     time.Time           // start time of counters and histograms whose samples have none
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
// Names and units come from snapshot.Desc's OTelName and OTelUnit (Name and
// Unit when empty); labels become attributes as [OTelAttribute] renames them,
// empty label values are left out, families with a uuid label carry
// hw.type="gpu" and hw.vendor="NVIDIA", and Desc.OTelAttributes are added.
// Families are merged across producers as on the Prometheus side, then
// families that share an OTel name (hw.gpu.io for PCIe and NVLink) become one
// metric; conflicting families, repeated label or attribute sets and invalid
// histograms are dropped (Produce still succeeds, since an error would stop
// the whole export). A family without series is not exported.
//
// With [NamingPrometheus] (NewOTLP's OTLPConfig.Naming) names and attributes are instead
// the Prometheus names and labels, without units, and every histogram is an
// explicit-bucket Histogram of its classic buckets.
func NewMetricProducer(producers ...Producer) sdkmetric.Producer {
	return newMetricProducer(producers, NamingOTel, nil, nil, nil)
}

func newMetricProducer(producers []Producer, naming Naming, self prometheus.Gatherer, logger *slog.Logger, drops *dropCounter) *metricProducer {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &metricProducer{producers: slices.Clone(producers), naming: naming, self: self, start: time.Now(), logger: logger, drops: drops}
}

// Produce converts the latest snapshots. It is safe for concurrent use and
// never blocks on sources.
func (p *metricProducer) Produce(context.Context) ([]metricdata.ScopeMetrics, error) {
	snaps := make([]*snapshot.Snapshot, 0, len(p.producers))
	for _, pr := range p.producers {
		if s := pr.Snapshot(); s != nil {
			snaps = append(snaps, s)
		}
	}
	if p.self != nil {
		snaps = append(snaps, gatherSnapshot(p.self, p.logger))
	}
	families, problems := merge(snaps)
	for _, pb := range problems {
		p.drops.add(pb.reason, pb.series)
		p.logger.Debug("series dropped from OTLP", "reason", pb.reason.String(), "err", pb.err)
	}
	metrics := make([]metricdata.Metrics, 0, len(families))
	byName := map[string]int{} // OTel name -> index in metrics
	for _, f := range families {
		if len(f.series) == 0 {
			continue
		}
		m, ok := p.convert(f)
		if !ok {
			continue
		}
		i, seen := byName[m.Name]
		if !seen {
			byName[m.Name] = len(metrics)
			metrics = append(metrics, m)
			continue
		}
		if err := joinMetrics(&metrics[i], m); err != nil {
			p.drops.add(dropConflict, len(f.series))
			p.logger.Debug("series dropped from OTLP", "reason", dropConflict.String(), "err",
				fmt.Errorf("family %s: %w", f.desc.Name, err))
		}
	}
	if len(metrics) == 0 {
		return nil, nil
	}
	return []metricdata.ScopeMetrics{{
		Scope:   instrumentation.Scope{Name: scopeName, Version: ServiceVersion()},
		Metrics: metrics,
	}}, nil
}

func (p *metricProducer) convert(f *family) (metricdata.Metrics, bool) {
	d := f.desc
	m := metricdata.Metrics{Name: OTelName(d), Description: d.Help, Unit: d.OTelUnit}
	if m.Unit == "" {
		m.Unit = d.Unit
	}
	attributes := otelAttributes
	if p.naming == NamingPrometheus {
		// No unit: a Collector appends a unit suffix the name may not have
		// (cupti_exporter_build_info with unit "1" would arrive as ..._ratio).
		m.Name, m.Unit, attributes = d.Name, "", prometheusAttributes
	}
	switch d.Kind {
	case snapshot.KindGauge:
		g := metricdata.Gauge[float64]{DataPoints: make([]metricdata.DataPoint[float64], len(f.series))}
		for i, s := range f.series {
			g.DataPoints[i] = metricdata.DataPoint[float64]{
				Attributes: attributes(d, s.sample), Time: pointTime(s), Value: s.sample.Value}
		}
		m.Data = g
	case snapshot.KindCounter:
		sum := metricdata.Sum[float64]{Temporality: metricdata.CumulativeTemporality, IsMonotonic: true,
			DataPoints: make([]metricdata.DataPoint[float64], len(f.series))}
		for i, s := range f.series {
			sum.DataPoints[i] = metricdata.DataPoint[float64]{
				Attributes: attributes(d, s.sample), StartTime: p.startTime(s), Time: pointTime(s), Value: s.sample.Value}
		}
		m.Data = sum
	case snapshot.KindHistogram:
		data, ok := p.histogram(f, attributes)
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

// histogram converts a histogram family, dropping series without a valid value. With
// NamingPrometheus it is always the classic buckets: what a Prometheus without native
// histograms scrapes, and a remote-write receiver without them refuses a whole request
// that holds one native histogram.
func (p *metricProducer) histogram(f *family, attributes func(*snapshot.Desc, *snapshot.Sample) attribute.Set) (metricdata.Aggregation, bool) {
	valid := make([]series, 0, len(f.series))
	native := p.naming != NamingPrometheus
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
func explicitCounts(h *snapshot.HistogramValue) []uint64 {
	counts := make([]uint64, len(h.Bounds)+1)
	var prev uint64
	for i, c := range h.Cumulative {
		counts[i] = c - min(prev, c)
		prev = max(prev, c)
	}
	counts[len(h.Bounds)] = h.Count - min(prev, h.Count)
	return counts
}

// OpenTelemetry attributes of the Prometheus labels: the semantic conventions' keys where
// one exists, "cupti." + the label name for the rest. One table for every family, so that
// families added later (attribution) get the same treatment.
var (
	// otelAttributeKeys renames labels to semantic-convention attribute keys, and the
	// workload's pod, namespace and container to keys of their own: the k8s.* keys are the
	// resource's (the exporter's own pod, docs/otlp.md), and a data point that reused them
	// would name a second pod under the same key, which the Collector's k8sattributes
	// processor and backends that merge resource and point attributes cannot tell apart.
	otelAttributeKeys = map[string]string{
		"uuid":      "hw.id", // the GPU UUID: unique within the host, as hw.id must be
		"model":     "hw.model",
		"direction": "network.io.direction",
		"pod":       WorkloadAttributePrefix + "pod.name",
		"namespace": WorkloadAttributePrefix + "namespace.name",
		"container": WorkloadAttributePrefix + "container.name",
	}
	// otelAttributeValues renames label values where the convention fixes them.
	otelAttributeValues = map[string]map[string]string{
		"direction": {"rx": "receive", "tx": "transmit"},
	}
	// hwGPUAttributes go with hw.id on every GPU series (hw.type is required by the
	// hardware conventions; every GPU CUPTI sees is NVIDIA's).
	hwGPUAttributes = []attribute.KeyValue{attribute.String("hw.type", "gpu"), attribute.String("hw.vendor", "NVIDIA")}
)

const (
	// vendorAttributePrefix starts the key of every label the conventions do not cover.
	vendorAttributePrefix = "cupti."
	// WorkloadAttributePrefix starts the data-point keys of the workload that holds a GPU or
	// ran a kernel (cupti.workload.pod.name, .namespace.name, .container.name).
	WorkloadAttributePrefix = vendorAttributePrefix + "workload."
)

// OTelAttribute returns the OpenTelemetry attribute key and value of a Prometheus label:
// uuid is hw.id, model hw.model, direction network.io.direction (rx receive, tx transmit),
// pod, namespace and container cupti.workload.pod.name, cupti.workload.namespace.name and
// cupti.workload.container.name (never the resource's k8s.* keys); any other label is
// "cupti." + its name.
func OTelAttribute(label, value string) (key, val string) {
	key, ok := otelAttributeKeys[label]
	if !ok {
		key = vendorAttributePrefix + label
	}
	if v, ok := otelAttributeValues[label][value]; ok {
		value = v
	}
	return key, value
}

// OTelName returns the OpenTelemetry name of a family: its OTelName, or its Prometheus
// name when it has none.
func OTelName(d *snapshot.Desc) string {
	if d.OTelName != "" {
		return d.OTelName
	}
	return d.Name
}

// otelAttributes converts a series' labels: renamed by OTelAttribute, empty values left out,
// hw.type and hw.vendor added next to hw.id, then the family's constant OTelAttributes.
func otelAttributes(d *snapshot.Desc, s *snapshot.Sample) attribute.Set {
	kvs := make([]attribute.KeyValue, 0, len(d.LabelNames)+len(d.OTelAttributes)+len(hwGPUAttributes))
	for i, n := range d.LabelNames {
		if s.LabelValues[i] == "" {
			continue
		}
		k, v := OTelAttribute(n, s.LabelValues[i])
		kvs = append(kvs, attribute.String(k, v))
		if k == "hw.id" {
			kvs = append(kvs, hwGPUAttributes...)
		}
	}
	for _, a := range d.OTelAttributes {
		kvs = append(kvs, attribute.String(a.Name, a.Value))
	}
	return attribute.NewSet(kvs...)
}

// prometheusAttributes are a series' labels as they are, empty values left out (Prometheus
// reads an empty label as no label).
func prometheusAttributes(d *snapshot.Desc, s *snapshot.Sample) attribute.Set {
	kvs := make([]attribute.KeyValue, 0, len(d.LabelNames))
	for i, n := range d.LabelNames {
		if s.LabelValues[i] != "" {
			kvs = append(kvs, attribute.String(n, s.LabelValues[i]))
		}
	}
	return attribute.NewSet(kvs...)
}

// joinMetrics adds the data points of m to dst, two families that share one OTel name:
// they must have the same unit and kind of data, and no attribute set twice.
func joinMetrics(dst *metricdata.Metrics, m metricdata.Metrics) error {
	if dst.Unit != m.Unit {
		return fmt.Errorf("unit %q differs from %q of another family named %s", m.Unit, dst.Unit, m.Name)
	}
	switch a := dst.Data.(type) {
	case metricdata.Gauge[float64]:
		if b, ok := m.Data.(metricdata.Gauge[float64]); ok {
			return joinPoints(&a.DataPoints, b.DataPoints, func(p metricdata.DataPoint[float64]) attribute.Set { return p.Attributes },
				func() { dst.Data = a })
		}
	case metricdata.Sum[float64]:
		if b, ok := m.Data.(metricdata.Sum[float64]); ok && a.IsMonotonic == b.IsMonotonic && a.Temporality == b.Temporality {
			return joinPoints(&a.DataPoints, b.DataPoints, func(p metricdata.DataPoint[float64]) attribute.Set { return p.Attributes },
				func() { dst.Data = a })
		}
	case metricdata.Histogram[float64]:
		if b, ok := m.Data.(metricdata.Histogram[float64]); ok {
			return joinPoints(&a.DataPoints, b.DataPoints, func(p metricdata.HistogramDataPoint[float64]) attribute.Set { return p.Attributes },
				func() { dst.Data = a })
		}
	case metricdata.ExponentialHistogram[float64]:
		if b, ok := m.Data.(metricdata.ExponentialHistogram[float64]); ok {
			return joinPoints(&a.DataPoints, b.DataPoints, func(p metricdata.ExponentialHistogramDataPoint[float64]) attribute.Set { return p.Attributes },
				func() { dst.Data = a })
		}
	}
	return fmt.Errorf("kind %T differs from %T of another family named %s", m.Data, dst.Data, m.Name)
}

// joinPoints appends add to *dst unless an attribute set of add is already in *dst, then
// calls store to write the grown aggregation back.
func joinPoints[P any](dst *[]P, add []P, attrs func(P) attribute.Set, store func()) error {
	seen := make(map[attribute.Distinct]bool, len(*dst))
	for _, p := range *dst {
		set := attrs(p)
		seen[set.Equivalent()] = true
	}
	for _, p := range add {
		if set := attrs(p); seen[set.Equivalent()] {
			return fmt.Errorf("attribute set %s repeats in another family of the same OTel name", set.Encoded(attribute.DefaultEncoder()))
		}
	}
	*dst = append(*dst, add...)
	store()
	return nil
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
