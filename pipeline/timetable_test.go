package pipeline

import (
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity/receiver"
	"github.com/cupti-exporter/cupti-exporter/health"
	"github.com/cupti-exporter/cupti-exporter/idle"
	"github.com/cupti-exporter/cupti-exporter/pmsample"
)

// TestLoopsOnTheDecodeTimetable: the loops that run while every GPU is sampled wake on whole
// multiples of their periods (internal/tick), so a period that is a multiple of the decode
// period wakes with a decode, and any other adds wake-ups of its own: about 0.2 ms of the
// process's CPU each on the H100 (docs/performance.md). The give-way poll is the one exception,
// kept on purpose: a profiler must be seen before it asks for the counters (docs/pm-sampling.md
// "Giving way by itself"); its 100 ms falls on the 100 ms decodes of short intervals only.
func TestLoopsOnTheDecodeTimetable(t *testing.T) {
	loops := map[string]time.Duration{
		"health interval":            health.DefaultInterval,
		"idle check while sampled":   idle.DefaultCheck,
		"activity socket file check": receiver.DefaultSocketCheck,
	}
	for _, decode := range []time.Duration{pmsample.DefaultDecodePeriod, pmsample.ShortIntervalDecodePeriod} {
		for name, d := range loops {
			if d%decode != 0 {
				t.Errorf("%s %v is not a multiple of the decode period %v: it wakes the process on its own", name, d, decode)
			}
		}
	}
}
