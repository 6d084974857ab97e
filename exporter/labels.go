package exporter

import (
	"slices"

	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// attributionLabels are appended, in this order, to families with a uuid label.
var attributionLabels = []string{"pod", "namespace", "container"}

// labeledProducer shows the snapshots of p with pod attribution added. It wraps every
// producer, with or without a labeler: the pod labels are always present on device
// families, empty when unknown, so that a Prometheus scraping with honor_labels keeps them
// empty instead of filling them with the exporter pod's own target labels (which would
// credit every GPU to the exporter).
type labeledProducer struct {
	p       Producer
	labeler DeviceLabeler
}

func (l labeledProducer) Snapshot() *snapshot.Snapshot {
	return attributePods(l.p.Snapshot(), l.labeler)
}

// attributePods returns a copy of s in which every family with a "uuid" label and
// no "pod" label carries pod, namespace and container after its own labels, with the
// values labeler gives for the series' uuid, or empty strings when labeler is nil.
// s itself is not modified; families that need no change are shared.
func attributePods(s *snapshot.Snapshot, labeler DeviceLabeler) *snapshot.Snapshot {
	if s == nil {
		return nil
	}
	type owner struct{ pod, namespace, container string }
	memo := map[string]owner{}
	lookup := func(uuid string) owner {
		o, ok := memo[uuid]
		if !ok && labeler != nil {
			o.pod, o.namespace, o.container = labeler.DeviceLabels(uuid)
			memo[uuid] = o
		}
		return o
	}

	out := &snapshot.Snapshot{Time: s.Time, Families: make([]snapshot.Family, len(s.Families))}
	for i, f := range s.Families {
		out.Families[i] = f
		if f.Desc == nil || slices.Contains(f.Desc.LabelNames, "pod") {
			continue
		}
		u := slices.Index(f.Desc.LabelNames, "uuid")
		if u < 0 {
			continue
		}
		d := *f.Desc
		d.LabelNames = append(slices.Clip(f.Desc.LabelNames), attributionLabels...)
		samples := make([]snapshot.Sample, len(f.Samples))
		for j, smp := range f.Samples {
			var o owner
			if u < len(smp.LabelValues) {
				o = lookup(smp.LabelValues[u])
			}
			smp.LabelValues = append(slices.Clip(smp.LabelValues), o.pod, o.namespace, o.container)
			smp.Priority = snapshot.PriorityDevice // a GPU's own series: never folded by the cap
			samples[j] = smp
		}
		out.Families[i] = snapshot.Family{Desc: &d, Samples: samples}
	}
	return out
}
