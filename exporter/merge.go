package exporter

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cupti-exporter/cupti-exporter/mapping"
)

// family is the union of the families of one name over all snapshots.
type family struct {
	desc   *mapping.Desc // of the first family of this name
	series []series
}

type series struct {
	sample *mapping.Sample
	time   time.Time // time of the snapshot the sample came from
}

// problem is a family or series that cannot be emitted.
type problem struct {
	desc   *mapping.Desc
	reason dropReason
	err    error
	series int // how many series it drops
}

// maxSeriesPerFamily caps the series of one family (like the OTel SDK's cardinality limit):
// the sources bound their own labels (top-K kernels, pod TTLs), so reaching it means a bug or
// an unexpected workload; the series past it are dropped and counted, never served unbounded.
const maxSeriesPerFamily = 4096

// merge joins the families of snaps by name, in order, sorted by name.
// A family whose kind or label names differ from the first of its name, a
// sample whose label values do not match its label names, and a repeated
// label set are returned as problems instead.
func merge(snaps []*mapping.Snapshot) ([]*family, []problem) {
	byName := map[string]*family{}
	seen := map[string]struct{}{} // name + label values
	overCap := map[*family]int{}  // series dropped past maxSeriesPerFamily
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
				if len(m.series) >= maxSeriesPerFamily {
					overCap[m]++
					continue
				}
				m.series = append(m.series, series{sample: smp, time: s.Time})
			}
		}
	}
	out := make([]*family, 0, len(byName))
	for _, f := range byName {
		out = append(out, f)
		if n := overCap[f]; n > 0 {
			problems = append(problems, problem{f.desc, dropCardinality, fmt.Errorf(
				"family %s: %d series past the limit of %d per family dropped", f.desc.Name, n, maxSeriesPerFamily), n})
		}
	}
	slices.SortFunc(out, func(a, b *family) int { return strings.Compare(a.desc.Name, b.desc.Name) })
	return out, problems
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
