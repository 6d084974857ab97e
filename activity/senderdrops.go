package activity

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/cupti-exporter/cupti-exporter/mapping"
)

// MaxDropDelta is the largest increase of one sender drop counter the Aggregator takes
// from one report: 2^40 records is about 10^12, more than a process loses in days at
// 10^6 records/s. A larger jump is a corrupt or hostile report and is refused.
const MaxDropDelta = 1 << 40

// Reasons of cupti_activity_invalid_reports_total.
const (
	invalidDropsBackwards = "drops_backwards" // a cumulative counter went down on one connection
	invalidDropsJump      = "drops_jump"      // a counter grew by more than MaxDropDelta in one report
)

var invalidReasons = []string{invalidDropsBackwards, invalidDropsJump}

var invalidDesc = &mapping.Desc{
	Name: "cupti_activity_invalid_reports_total", Kind: mapping.KindCounter,
	Help: "Reports from traced processes refused as implausible, by reason (drops_backwards: a cumulative " +
		"drop counter went down; drops_jump: it grew by more than 2^40 in one report).",
	OTelName: "cupti.activity.reports.invalid", OTelUnit: "{report}", LabelNames: []string{"reason"},
}

// takeSenderDropsLocked validates one report of cumulative counters and adds the
// increases. A report of an older connection of the same process (it may drain after a
// newer one: the library sends its final counters on a fresh connection when the
// exporter stopped reading) carries lower counts: it is stale, not invalid, and ignored.
// a.mu is held.
func (a *Aggregator) takeSenderDropsLocked(p *Process, s *senderState, cumulative map[string]uint64) error {
	if s.conn != p {
		for reason, v := range cumulative {
			if v < s.last[reason] {
				return nil // stale: an older connection's report
			}
		}
		s.conn = p
	}
	var errs []error
	reasons := make([]string, 0, len(cumulative))
	for r := range cumulative {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for _, reason := range reasons {
		v, prev := cumulative[reason], s.last[reason]
		switch {
		case v == prev:
		case v < prev:
			a.countInvalidLocked(invalidDropsBackwards)
			errs = append(errs, fmt.Errorf("drop counter %s went down from %d to %d", reason, prev, v))
		case v-prev > MaxDropDelta:
			a.countInvalidLocked(invalidDropsJump)
			errs = append(errs, fmt.Errorf("drop counter %s jumped by %d (from %d to %d), more than %d", reason, v-prev, prev, v, uint64(MaxDropDelta)))
		default:
			a.dropped[reason] = addSat(a.dropped[reason], v-prev)
			s.last[reason] = v
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("refusing drop report of pid %d: %w", p.PID, errors.Join(errs...))
	}
	return nil
}

func (a *Aggregator) countInvalidLocked(reason string) {
	if a.invalid == nil {
		a.invalid = make(map[string]uint64)
	}
	a.invalid[reason] = addSat(a.invalid[reason], 1)
}

// addSat adds without wrapping: a counter stops at the largest uint64.
func addSat(a, b uint64) uint64 {
	if a > math.MaxUint64-b {
		return math.MaxUint64
	}
	return a + b
}

// invalidReportsFamily is cupti_activity_invalid_reports_total; a.mu is held.
func (a *Aggregator) invalidReportsFamily() mapping.Family {
	f := mapping.Family{Desc: invalidDesc}
	for _, r := range invalidReasons {
		f.Samples = append(f.Samples, a.counter(float64(a.invalid[r]), r))
	}
	return f
}
