package health

import (
	"time"

	"github.com/cupti-exporter/cupti-exporter/mapping"
)

// builder collects the samples of one collection, by family, in Descs order.
type builder struct {
	start time.Time
	fams  map[*mapping.Desc][]mapping.Sample
}

func newBuilder(start time.Time) *builder {
	return &builder{start: start, fams: map[*mapping.Desc][]mapping.Sample{}}
}

func (b *builder) add(d *mapping.Desc, v float64, labels ...string) {
	s := mapping.Sample{LabelValues: labels, Value: v}
	if d.Kind == mapping.KindCounter {
		s.Start = b.start
	}
	b.fams[d] = append(b.fams[d], s)
}

func (b *builder) snapshot(now time.Time) *mapping.Snapshot {
	snap := &mapping.Snapshot{Time: now}
	for _, d := range Descs() {
		if s := b.fams[d]; len(s) > 0 {
			snap.Families = append(snap.Families, mapping.Family{Desc: d, Samples: s})
		}
	}
	return snap
}
