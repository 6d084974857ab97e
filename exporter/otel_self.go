package exporter

import (
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/cupti-exporter/cupti-exporter/internal/httplimit"
	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// selfOTel names the exporter's own families over OTLP, name and UCUM unit: those of
// selfDescs, of its HTTP listeners (httplimit.Descs), and cupti_exporter_build_info (made by
// prometheus/common/version's collector). Built at first use, once the tables are filled.
var selfOTel = sync.OnceValue(func() map[string]struct{ name, unit string } {
	m := map[string]struct{ name, unit string }{"cupti_exporter_build_info": {"cupti.exporter.build_info", "1"}}
	open, limit, closed := httplimit.Descs(selfNamespace)
	for _, d := range append(selfDescs.Descs(), open, limit, closed) {
		m[d.Name] = struct{ name, unit string }{d.OTelName, d.OTelUnit}
	}
	return m
})

// SelfOTelName returns the OpenTelemetry name and unit of a family the exporter's
// self-metrics registry serves (Exporter.SelfMetrics): the table above for ours; the
// others (go_*, process_*) keep their Prometheus name (go_memstats_alloc_bytes and
// go_memstats_alloc_bytes_total are two families), the unit from its suffix.
func SelfOTelName(name string) (otelName, unit string) {
	if n, ok := selfOTel()[name]; ok {
		return n.name, n.unit
	}
	base := strings.TrimSuffix(name, "_total")
	for suffix, u := range map[string]string{"_seconds": "s", "_bytes": "By", "_ratio": "1"} {
		if strings.HasSuffix(base, suffix) {
			return name, u
		}
	}
	return name, ""
}

// gatherSnapshot turns what g gathers into a snapshot for the OTLP outlet: gauges,
// untyped values, counters and classic histograms. Summaries (go_gc_duration_seconds) have
// no counterpart in the producer and are left out; a gather error is logged and whatever
// was gathered is still used.
func gatherSnapshot(g prometheus.Gatherer, logger *slog.Logger) *snapshot.Snapshot {
	mfs, err := g.Gather()
	if err != nil {
		logger.Debug("gathering self-metrics for OTLP", "err", err)
	}
	now := time.Now()
	snap := &snapshot.Snapshot{Time: now, Families: make([]snapshot.Family, 0, len(mfs))}
	for _, mf := range mfs {
		if f, ok := selfFamily(mf); ok {
			snap.Families = append(snap.Families, f)
		}
	}
	return snap
}

func selfFamily(mf *dto.MetricFamily) (snapshot.Family, bool) {
	d := &snapshot.Desc{Name: mf.GetName(), Help: mf.GetHelp()}
	d.OTelName, d.OTelUnit = SelfOTelName(mf.GetName())
	switch mf.GetType() {
	case dto.MetricType_GAUGE, dto.MetricType_UNTYPED:
		d.Kind = snapshot.KindGauge
	case dto.MetricType_COUNTER:
		d.Kind = snapshot.KindCounter
	case dto.MetricType_HISTOGRAM:
		d.Kind = snapshot.KindHistogram
	default:
		return snapshot.Family{}, false
	}
	// Label names: the union over the family's metrics (client_golang gives them all the
	// same names; a missing one is an empty value, which the attributes leave out).
	for _, m := range mf.GetMetric() {
		for _, l := range m.GetLabel() {
			if !slices.Contains(d.LabelNames, l.GetName()) {
				d.LabelNames = append(d.LabelNames, l.GetName())
			}
		}
	}
	slices.Sort(d.LabelNames)
	f := snapshot.Family{Desc: d, Samples: make([]snapshot.Sample, 0, len(mf.GetMetric()))}
	for _, m := range mf.GetMetric() {
		s := snapshot.Sample{LabelValues: make([]string, len(d.LabelNames))}
		for _, l := range m.GetLabel() {
			s.LabelValues[slices.Index(d.LabelNames, l.GetName())] = l.GetValue()
		}
		switch d.Kind {
		case snapshot.KindGauge:
			s.Value = m.GetGauge().GetValue()
			if m.Untyped != nil {
				s.Value = m.GetUntyped().GetValue()
			}
		case snapshot.KindCounter:
			s.Value = m.GetCounter().GetValue()
			if ts := m.GetCounter().GetCreatedTimestamp(); ts != nil {
				s.Start = ts.AsTime()
			}
		case snapshot.KindHistogram:
			h := m.GetHistogram()
			v := &snapshot.HistogramValue{Count: h.GetSampleCount(), Sum: h.GetSampleSum()}
			for _, b := range h.GetBucket() {
				if math.IsInf(b.GetUpperBound(), 1) {
					continue
				}
				v.Bounds = append(v.Bounds, b.GetUpperBound())
				v.Cumulative = append(v.Cumulative, b.GetCumulativeCount())
			}
			s.Histogram = v
			if ts := h.GetCreatedTimestamp(); ts != nil {
				s.Start = ts.AsTime()
			}
		}
		f.Samples = append(f.Samples, s)
	}
	return f, true
}
