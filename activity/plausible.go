package activity

import (
	"math"

	"github.com/cupti-exporter/cupti-exporter/activity/record"
)

// What a sender could have produced (docs/security.md, "Plausible records only"): no record
// lasts longer than its process has lived, and no drop counter counts more records than the
// process could have made in its life. The process's life starts at its start time (the
// kernel's, for a verified process), else when the exporter first heard of it. The receiver
// adds the checks that need the exporter's clock to be the records' (a record cannot end
// in the future), which a replay at another speed does not keep.

// MaxRecordDuration is the longest record taken from any sender, whatever its start time
// says (a recording's process, a claimed one): a week.
const MaxRecordDuration = 7 * 24 * 3600 * 1_000_000_000

// lifeSlack is how much earlier than its known start a process may have begun: start times
// count from the boot time in whole seconds, which a clock step can move (as the receiver's
// startTimeSlack).
const lifeSlack = 2 * 1_000_000_000

// MaxSenderRecordRate bounds the records a process can make in a second, and so what its
// drop counters can count: 10^8, 64 GPUs (the most a hello declares) each completing an
// operation every 640 ns; a tight launch loop makes about 1.1 x 10^5 kernels a second on an
// H200 (activity/inject/README.md).
const MaxSenderRecordRate = 100_000_000

// implausibleDuration is the drop reason of records longer than their sender's life.
const implausibleDuration = "implausible_duration"

// lifeStart is when p's process began, as far as the exporter can tell: its start time (the
// kernel's when verified), else when the exporter first heard of it.
func lifeStart(p *record.Process, s *senderState) uint64 {
	if p.StartTime != 0 {
		return p.StartTime
	}
	if s == nil || s.first.IsZero() {
		return 0
	}
	return uint64(s.first.UnixNano())
}

// lifeLimit bounds the records of one process at one moment.
type lifeLimit struct {
	start, now uint64 // ns since the epoch
}

// LifeSpan is the longest that anything of a process that began at start and ending at end
// could have lasted, seen at now: from the start (less the slack) to its end, or to now if it
// ends earlier (a replay shifts timestamps, tests use small ones). The receiver bounds
// coverage spans by it.
func LifeSpan(start, now, end uint64) uint64 {
	until := max(end, now)
	if until <= start {
		return lifeSlack
	}
	return until - start + lifeSlack
}

// maxDuration is the longest a record ending at end could have lasted: its LifeSpan, never
// over MaxRecordDuration.
func (l lifeLimit) maxDuration(end uint64) uint64 {
	return min(LifeSpan(l.start, l.now, end), MaxRecordDuration)
}

// allows says whether r lasts no longer than its process could have lived.
func (l lifeLimit) allows(r *record.Record) bool {
	return r.End <= r.Start || r.End-r.Start <= l.maxDuration(r.End)
}

// maxCount is the most records the process could have made (and so dropped) by now.
func (l lifeLimit) maxCount() uint64 {
	secs := float64(lifeSlack) / 1e9
	if l.now > l.start {
		secs += float64(l.now-l.start) / 1e9
	}
	n := secs * MaxSenderRecordRate
	if n >= math.MaxUint64 {
		return math.MaxUint64
	}
	return uint64(n)
}

// plausibleOnly copies the records of recs that life allows (implausible of them do not).
func plausibleOnly(recs []record.Record, life lifeLimit, implausible int) []record.Record {
	out := make([]record.Record, 0, len(recs)-implausible)
	for i := range recs {
		if life.allows(&recs[i]) {
			out = append(out, recs[i])
		}
	}
	return out
}
