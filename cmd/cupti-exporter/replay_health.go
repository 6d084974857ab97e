package main

import (
	"sync/atomic"

	"github.com/cupti-exporter/cupti-exporter/exporter"
	"github.com/cupti-exporter/cupti-exporter/mapping"
)

// replayHealth serves the health snapshots of a recording as source "health": the last
// one replayed, as it was recorded (timestamps shifted by the replay).
type replayHealth struct {
	snap atomic.Pointer[mapping.Snapshot]
}

// set is the replay's health sink.
func (h *replayHealth) set(s *mapping.Snapshot) { h.snap.Store(s) }

// Snapshot implements exporter.Producer; nil until the first health frame is replayed.
func (h *replayHealth) Snapshot() *mapping.Snapshot { return h.snap.Load() }

// status is ready once the first health frame is in.
func (h *replayHealth) status() []exporter.Status {
	if h.snap.Load() == nil {
		return []exporter.Status{{Source: "health", Reason: "waiting for the recording's first health frame"}}
	}
	return []exporter.Status{{Source: "health", Ready: true}}
}
