package pmsample

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/internal/cupti"
)

// TestGPUAvailabilityProbe reads device 0's counter availability every PMSAMPLE_PROBE_EVERY
// (50ms) for PMSAMPLE_PROBE_SECONDS (3) and logs how long each read took and whether the
// counters were busy, with a line per change (the unix time in ns), so that a GPU stage can
// see what the probe costs and what it sees while another process (the exporter, ncu) holds
// or frees the counters (issue 32).
func TestGPUAvailabilityProbe(t *testing.T) {
	lib := requireGPU(t)
	secs, _ := strconv.ParseFloat(os.Getenv("PMSAMPLE_PROBE_SECONDS"), 64)
	if secs <= 0 {
		secs = 3
	}
	every, err := time.ParseDuration(os.Getenv("PMSAMPLE_PROBE_EVERY"))
	if err != nil {
		every = 50 * time.Millisecond
	}
	var free, busy []time.Duration
	last := ""
	end := time.Now().Add(time.Duration(secs * float64(time.Second)))
	for time.Now().Before(end) {
		t0 := time.Now()
		_, err := lib.CounterAvailability(0)
		d := time.Since(t0)
		state := "free"
		switch {
		case err == nil:
			free = append(free, d)
		case errors.Is(err, cupti.ErrHardwareBusy):
			state = "busy"
			busy = append(busy, d)
		default:
			state = "error: " + err.Error()
		}
		if state != last {
			t.Logf("probe %d %s (%v)", t0.UnixNano(), state, d)
			last = state
		}
		time.Sleep(every)
	}
	t.Logf("probe summary: free %d reads, median %s; busy %d reads, median %s", len(free), median(free), len(busy), median(busy))
}

func median(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return fmt.Sprint(s[len(s)/2])
}
