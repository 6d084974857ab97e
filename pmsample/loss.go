package pmsample

import (
	"github.com/cupti-exporter/cupti-exporter/pmsample/guard"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
)

// Losses of decoded samples that are not delivered: split by an image re-initialisation, or
// rejected by the Guard.
const (
	lostIncomplete = "incomplete"
	lostOutOfRange = guard.LostOutOfRange
)

// lossAccount follows one device's time line: the cursor is the end of the last time
// accounted for (a delivered sample or a loss); an open cause names why the time after the
// cursor is not being sampled. It is owned by the device goroutine.
type lossAccount struct {
	cursor uint64 // ns; 0 until the first session starts or the first failure
	cause  string // why samples are missing after the cursor; "" when nothing is known
	iv     uint64 // ns per sample: the newest delivered sample's length, else the configured interval
	out    []pmdata.Loss
}

func (a *lossAccount) add(reason string, start, end uint64) {
	if end <= start {
		return
	}
	iv := max(a.iv, 1)
	a.out = append(a.out, pmdata.Loss{Reason: reason, Start: start, End: end, Samples: float64(end-start) / float64(iv)})
}

// open records that from now on samples are missing because of reason. Time already open for
// another cause up to now is accounted to that cause first.
func (a *lossAccount) open(reason string, now uint64) {
	if a.cursor == 0 {
		a.cursor = now
	}
	if a.cause != "" && a.cause != reason && now > a.cursor {
		a.add(a.cause, a.cursor, now)
		a.cursor = now
	}
	a.cause = reason
}

// started marks a session start at now: the very first one begins the time line; a start
// with no open cause opens "start".
func (a *lossAccount) started(now uint64) {
	if a.cursor == 0 {
		a.cursor = now
	}
	if a.cause == "" {
		a.cause = "start"
	}
}

// stall accounts the time from the cursor to now to "stall", whatever cause was open (a
// session that took its start or its rotation and then delivered nothing), and leaves
// "stall" open until the next sample.
func (a *lossAccount) stall(now uint64) {
	a.cause = "stall"
	a.flush(now)
}

// flush accounts the open cause up to now (the device is idle: paused, busy, error).
func (a *lossAccount) flush(now uint64) {
	if a.cause != "" && a.cursor != 0 && now > a.cursor {
		a.add(a.cause, a.cursor, now)
		a.cursor = now
	}
}

// sample accounts the gap before a delivered sample and moves the cursor to its end.
func (a *lossAccount) sample(start, end uint64) {
	if end > start {
		a.iv = end - start
	}
	if a.cursor != 0 && start > a.cursor {
		reason := a.cause
		if reason == "" {
			reason = "gap"
		}
		a.add(reason, a.cursor, start)
	}
	a.cursor = max(a.cursor, end)
	a.cause = ""
}

// discard accounts a decoded sample that is not delivered (invalid, or begun before Start)
// to the open cause, or to reason when none is open; the cause stays open.
func (a *lossAccount) discard(start, end uint64, reason string) {
	if end <= start || a.cursor == 0 {
		return
	}
	if a.cause != "" {
		reason = a.cause
	}
	a.add(reason, max(a.cursor, start), end)
	a.cursor = max(a.cursor, end)
}

// take returns the losses accounted since the last take.
func (a *lossAccount) take() []pmdata.Loss {
	out := a.out
	a.out = nil
	return out
}
