package health

import (
	"time"

	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// builder collects the samples of one collection, by family, in Descs order.
type builder struct {
	start time.Time
	fams  map[*snapshot.Desc][]snapshot.Sample
}

func newBuilder(start time.Time) *builder {
	return &builder{start: start, fams: map[*snapshot.Desc][]snapshot.Sample{}}
}

func (b *builder) add(d *snapshot.Desc, v float64, labels ...string) {
	s := snapshot.Sample{LabelValues: labels, Value: v}
	if d.Kind == snapshot.KindCounter {
		s.Start = b.start
	}
	b.fams[d] = append(b.fams[d], s)
}

func (b *builder) snapshot(now time.Time) *snapshot.Snapshot {
	snap := &snapshot.Snapshot{Time: now}
	for _, d := range Descs() {
		if s := b.fams[d]; len(s) > 0 {
			snap.Families = append(snap.Families, snapshot.Family{Desc: d, Samples: s})
		}
	}
	return snap
}
