package exporter

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// family is the union of the families of one name over all snapshots.
type family struct {
	desc   *snapshot.Desc // of the first family of this name
	series []series
}

type series struct {
	sample *snapshot.Sample
	time   time.Time // time of the snapshot the sample came from
}

// problem is a family or series that cannot be emitted.
type problem struct {
	desc   *snapshot.Desc
	reason dropReason
	err    error
	series int // how many series it drops
}

// maxSeriesPerFamily caps the series of one family (like the OTel SDK's cardinality limit):
// the sources bound their own labels (top-K kernels, pod TTLs), so reaching it means a bug,
// an unexpected workload or a flood of made-up identities. Past it the series of lowest
// priority (snapshot.Priority: claimed identities first, then normal, then verified; device
// series never) are folded into one overflow series whose every label is overflowLabel,
// and counted as dropped for reason "cardinality".
const maxSeriesPerFamily = 4096

// overflowLabel is every label value of a family's overflow series: no GPU index, pod
// name (DNS-1123) or kernel label can be it.
const overflowLabel = "(overflow)"

// merge joins the families of snaps by name, in order, sorted by name.
// A family whose kind or label names differ from the first of its name, a
// sample whose label values do not match its label names, and a repeated
// label set are returned as problems instead.
func merge(snaps []*snapshot.Snapshot) ([]*family, []problem) {
	byName := map[string]*family{}
	seen := map[string]struct{}{} // name + label values
	var problems []problem
	for _, s := range snaps {
		for fi := range s.Families {
			f := &s.Families[fi]
			if f.Desc == nil {
				continue
			}
			m, ok := byName[f.Desc.Name]
			if !ok {
				m = &family{desc: f.Desc}
				byName[f.Desc.Name] = m
			} else if m.desc.Kind != f.Desc.Kind || !slices.Equal(m.desc.LabelNames, f.Desc.LabelNames) {
				problems = append(problems, problem{f.Desc, dropConflict, fmt.Errorf(
					"merge family %s: %s with labels %v conflicts with %s with labels %v from another source",
					f.Desc.Name, f.Desc.Kind, f.Desc.LabelNames, m.desc.Kind, m.desc.LabelNames), len(f.Samples)})
				continue
			}
			for si := range f.Samples {
				smp := &f.Samples[si]
				if len(smp.LabelValues) != len(m.desc.LabelNames) {
					problems = append(problems, problem{m.desc, dropInvalid, fmt.Errorf(
						"series of %s: %d label values for %d label names %v",
						m.desc.Name, len(smp.LabelValues), len(m.desc.LabelNames), m.desc.LabelNames), 1})
					continue
				}
				key := m.desc.Name + "\xff" + strings.Join(smp.LabelValues, "\xff")
				if _, dup := seen[key]; dup {
					problems = append(problems, problem{m.desc, dropDuplicate, fmt.Errorf(
						"series of %s: duplicate label set %s", m.desc.Name, labelString(m.desc.LabelNames, smp.LabelValues)), 1})
					continue
				}
				seen[key] = struct{}{}
				m.series = append(m.series, series{sample: smp, time: s.Time})
			}
		}
	}
	out := make([]*family, 0, len(byName))
	for _, f := range byName {
		out = append(out, f)
		if n := f.capSeries(maxSeriesPerFamily); n > 0 {
			problems = append(problems, problem{f.desc, dropCardinality, fmt.Errorf(
				"family %s: %d series past the limit of %d per family folded into its overflow series", f.desc.Name, n, maxSeriesPerFamily), n})
		}
	}
	slices.SortFunc(out, func(a, b *family) int { return strings.Compare(a.desc.Name, b.desc.Name) })
	return out, problems
}

// capSeries keeps at most limit series in f: every device series, then the others by
// priority (in their order within a priority), the rest folded into one overflow series
// (sums of values, counts and classic buckets). It returns how many were folded.
func (f *family) capSeries(limit int) int {
	if len(f.series) <= limit || len(f.desc.LabelNames) == 0 {
		return 0
	}
	slices.SortStableFunc(f.series, func(a, b series) int { return int(b.sample.Priority) - int(a.sample.Priority) })
	keep := limit - 1 // room for the overflow series
	for keep < len(f.series) && f.series[keep].sample.Priority >= snapshot.PriorityDevice {
		keep++
	}
	if keep >= len(f.series) {
		return 0 // all of them device series
	}
	folded := f.series[keep:]
	over := overflowSample(f.desc, folded)
	f.series = append(f.series[:keep:keep], series{sample: over, time: folded[0].time})
	return len(folded)
}

// overflowSample sums the folded series into one: counters and gauges add up, histograms
// add their counts, sums and classic buckets (those with the first one's bounds; native
// buckets are left out). It starts at the earliest start.
func overflowSample(d *snapshot.Desc, folded []series) *snapshot.Sample {
	over := &snapshot.Sample{LabelValues: make([]string, len(d.LabelNames)), Priority: snapshot.PriorityClaimed}
	for i := range over.LabelValues {
		over.LabelValues[i] = overflowLabel
	}
	for _, s := range folded {
		smp := s.sample
		if over.Start.IsZero() || !smp.Start.IsZero() && smp.Start.Before(over.Start) {
			over.Start = smp.Start
		}
		over.Value += smp.Value
		h := smp.Histogram
		if d.Kind != snapshot.KindHistogram || h == nil {
			continue
		}
		if over.Histogram == nil {
			over.Histogram = &snapshot.HistogramValue{Bounds: h.Bounds, Cumulative: make([]uint64, len(h.Bounds))}
		}
		o := over.Histogram
		o.Count += h.Count
		o.Sum += h.Sum
		if slices.Equal(o.Bounds, h.Bounds) && len(h.Cumulative) == len(o.Cumulative) {
			for i, c := range h.Cumulative {
				o.Cumulative[i] += c
			}
		}
	}
	if d.Kind == snapshot.KindHistogram && over.Histogram == nil {
		over.Histogram = &snapshot.HistogramValue{}
	}
	return over
}

func labelString(names, values []string) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, n := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", n, values[i])
	}
	b.WriteByte('}')
	return b.String()
}

// dropReason is why a family or series was not emitted.
type dropReason int

const (
	dropConflict    dropReason = iota // kind or label names differ from the first family of the name
	dropDuplicate                     // label set already emitted
	dropInvalid                       // values that cannot form a metric (label count, bad histogram, bad name)
	dropCardinality                   // past maxSeriesPerFamily
	numDropReasons
)

func (r dropReason) String() string {
	return [...]string{"conflict", "duplicate", "invalid", "cardinality"}[r]
}

// dropCounter counts the series one outlet dropped, by reason.
type dropCounter struct {
	n [numDropReasons]atomic.Uint64
}

func (d *dropCounter) add(r dropReason, n int) {
	if d != nil && n > 0 {
		d.n[r].Add(uint64(n))
	}
}

// collect emits the counts as cupti_exporter_series_dropped_total{outlet,reason}.
func (d *dropCounter) collect(ch chan<- prometheus.Metric, outlet string) {
	for r := range numDropReasons {
		ch <- prometheus.MustNewConstMetric(seriesDroppedDesc, prometheus.CounterValue, float64(d.n[r].Load()), outlet, r.String())
	}
}
