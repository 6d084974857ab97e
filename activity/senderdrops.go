package activity

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/cupti-exporter/cupti-exporter/activity/record"

	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// MaxDropDelta is the largest increase of one sender drop counter the Aggregator takes
// from one report: 2^40 records is about 10^12, more than a process loses in days at
// 10^6 records/s. A larger jump is a corrupt or hostile report and is refused.
const MaxDropDelta = 1 << 40

// Reasons of cupti_activity_invalid_reports_total.
const (
	invalidDropsBackwards = "drops_backwards" // a cumulative counter went down on one connection
	invalidDropsJump      = "drops_jump"      // a counter grew by more than MaxDropDelta in one report
	// a counter passed what the process could have made in its life (plausible.go), or
	// version_refused passed 1
	invalidDropsImplausible = "drops_implausible"
)

var invalidReasons = []string{invalidDropsBackwards, invalidDropsJump, invalidDropsImplausible}

// versionRefused is the one drop reason that is not a record count: 1 for a process that
// refused to trace (docs/wire-format.md).
const versionRefused = "version_refused"

var invalidDesc = descs.Counter("cupti_activity_invalid_reports_total", "", "cupti.activity.reports.invalid", "{report}", "Reports from traced processes refused as implausible, by reason (drops_backwards: a cumulative "+
	"drop counter went down; drops_jump: it grew by more than 2^40 in one report; drops_implausible: it passed "+
	"the records the process could have made in its life, 10^8 a second, or version_refused passed 1; "+
	"coverage_implausible: a traced span ending in the future or longer than the process's life; "+
	"launch_ahead: a launch hint in the future).", "reason")

// takeSenderDropsLocked validates one report of cumulative counters and adds the
// increases. A counter may not go down, jump by more than MaxDropDelta, nor pass the records
// the process could have made since it started (lifeLimit.maxCount). A report of an older connection of the same process (it may drain after a
// newer one: the library sends its final counters on a fresh connection when the
// exporter stopped reading) carries lower counts: it is stale, not invalid, and ignored.
// a.mu is held.
func (a *Aggregator) takeSenderDropsLocked(p *record.Process, s *senderState, cumulative map[string]uint64) error {
	if s.conn != p {
		for reason, v := range cumulative {
			if v < s.last[reason] {
				return nil // stale: an older connection's report
			}
		}
		s.conn = p
	}
	var errs []error
	most := lifeLimit{start: lifeStart(p, s), now: uint64(a.cfg.now().UnixNano())}.maxCount()
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
		case reason == versionRefused && v > 1:
			a.countInvalidLocked(invalidDropsImplausible)
			errs = append(errs, fmt.Errorf("drop counter %s is %d: a process refuses to trace once", reason, v))
		case v > most:
			a.countInvalidLocked(invalidDropsImplausible)
			errs = append(errs, fmt.Errorf("drop counter %s is %d, more than the %d records the process could have made in its life", reason, v, most))
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

// InvalidReport counts a report of a traced process refused as implausible by the receiver
// (reason coverage_implausible or launch_ahead): cupti_activity_invalid_reports_total.
func (a *Aggregator) InvalidReport(reason string) {
	a.mu.Lock()
	a.countInvalidLocked(reason)
	a.mu.Unlock()
	a.gen.Add(1)
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
func (a *Aggregator) invalidReportsFamily() snapshot.Family {
	f := snapshot.Family{Desc: invalidDesc}
	for _, r := range invalidReasons {
		f.Samples = append(f.Samples, a.counter(float64(a.invalid[r]), r))
	}
	for r, v := range a.invalid { // the receiver's reasons, once seen
		if !slices.Contains(invalidReasons, r) {
			f.Samples = append(f.Samples, a.counter(float64(v), r))
		}
	}
	return sorted(f)
}
