package pmsample

// Loss is a stretch of time during which a device was meant to be sampled but delivered no
// sample: the gap between two delivered samples (end of one to start of the next), or time
// spent paused, busy or in error. Samples is the number of samples the hardware interval
// implies for it, so that delivered + lost samples = configured rate x time.
type Loss struct {
	Reason     string  // one of LostReasons
	Start, End uint64  // ns on the CUPTI clock (Unix epoch)
	Samples    float64 // (End - Start) / hardware interval
}

// LostReasons are the causes a Loss can name, in the order the self-metrics list them:
//
//   - image_full: a decode stopped with COUNTER_DATA_FULL; the session was recreated.
//   - overflow: the hardware buffer overflowed; the session was recreated.
//   - decode_error: decode calls failed (after three in a row the session was recreated).
//   - invalid: decoded samples that could not be evaluated or had no valid time span.
//   - incomplete: a sample whose records a counter data image re-initialisation split (the
//     decode before ended inside it); its remainder alone reads up to 4.3 times the truth.
//   - out_of_range: decoded samples with a value the hardware cannot produce (Guard).
//   - start: from Start to the first delivered sample of a session nothing else explains
//     (the first sample, which began before Start, is dropped).
//   - rotation: multiplexing switched groups (a new session for the next group).
//   - stall: a started session delivered no sample for longer than 5 decode periods (at
//     least 1 s); the session was recreated.
//   - backoff: the session was restarted at a longer interval (WithAutoBackoff).
//   - paused, busy, error: the counters were released on request, held by another profiler,
//     or could not be acquired.
//   - idle_release: from the first sign of work on an idle-released GPU to its first sample
//     after the session was taken back (release.go); the released time itself is no loss.
//   - duty_cycle: the session was released for the off phase of a duty cycle (WithDutyCycle).
//   - yielded: the counters were given to a profiler found on the host (GiveWay), until the first
//     sample after TakeBack.
//   - gap: samples missing between two delivered ones with no event to explain them.
var LostReasons = [...]string{"image_full", "overflow", "decode_error", "invalid", "incomplete", "out_of_range", "start", "rotation", "stall", "backoff", "paused", "busy", "error", "idle_release", "duty_cycle", "yielded", "gap"}

// Losses of decoded samples that are not delivered: split by an image re-initialisation, or
// rejected by the Guard.
const (
	lostIncomplete = "incomplete"
	lostOutOfRange = "out_of_range"
)

func lostIndex(reason string) int {
	for i, r := range LostReasons {
		if r == reason {
			return i
		}
	}
	return len(LostReasons) - 1 // gap
}

// lossAccount follows one device's time line: the cursor is the end of the last time
// accounted for (a delivered sample or a loss); an open cause names why the time after the
// cursor is not being sampled. It is owned by the device goroutine.
type lossAccount struct {
	cursor uint64 // ns; 0 until the first session starts or the first failure
	cause  string // why samples are missing after the cursor; "" when nothing is known
	iv     uint64 // ns per sample: the newest delivered sample's length, else the configured interval
	out    []Loss
}

func (a *lossAccount) add(reason string, start, end uint64) {
	if end <= start {
		return
	}
	iv := max(a.iv, 1)
	a.out = append(a.out, Loss{Reason: reason, Start: start, End: end, Samples: float64(end-start) / float64(iv)})
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
func (a *lossAccount) take() []Loss {
	out := a.out
	a.out = nil
	return out
}
