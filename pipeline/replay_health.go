package pipeline

import (
	"slices"
	"sync/atomic"

	"github.com/cupti-exporter/cupti-exporter/exporter"
	"github.com/cupti-exporter/cupti-exporter/health"
	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// replayHealth serves the health snapshots of a recording as source "health": the last
// one replayed, as it was recorded (timestamps shifted by the replay), in this build's
// health families where it has them (canonical).
type replayHealth struct {
	snap atomic.Pointer[snapshot.Snapshot]
	view *health.View // told every frame (set before the replay runs); nil: not served
}

// healthDescs are this build's health families, by name.
var healthDescs = func() map[string]*snapshot.Desc {
	out := map[string]*snapshot.Desc{}
	for _, d := range health.Descs() {
		out[d.Name] = d
	}
	return out
}()

// set is the replay's health sink.
func (h *replayHealth) set(s *snapshot.Snapshot) {
	c := canonical(s)
	h.snap.Store(c)
	if h.view != nil {
		h.view.Observe(c)
	}
}

// canonical returns s with every recorded family that this build's health source also
// describes (same name, kind and labels) replaced by that description, so that a recording
// pushes OTLP under today's names and attributes, which recordings do not carry in full (no
// constant attributes such as hw.gpu.task).
func canonical(s *snapshot.Snapshot) *snapshot.Snapshot {
	if s == nil {
		return nil
	}
	out := &snapshot.Snapshot{Time: s.Time, Families: slices.Clone(s.Families)}
	for i, f := range out.Families {
		if f.Desc == nil {
			continue
		}
		if c := healthDescs[f.Desc.Name]; c != nil && c.Kind == f.Desc.Kind && slices.Equal(c.LabelNames, f.Desc.LabelNames) {
			out.Families[i].Desc = c
		}
	}
	return out
}

// Snapshot implements exporter.Producer; nil until the first health frame is replayed.
func (h *replayHealth) Snapshot() *snapshot.Snapshot { return h.snap.Load() }

// status is ready once the first health frame is in.
func (h *replayHealth) status() []exporter.Status {
	if h.snap.Load() == nil {
		return []exporter.Status{{Source: "health", Reason: "waiting for the recording's first health frame"}}
	}
	return []exporter.Status{{Source: "health", Ready: true}}
}
