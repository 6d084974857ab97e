package pmsample

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cupti-exporter/cupti-exporter/internal/tick"
	"github.com/cupti-exporter/cupti-exporter/pmsample/catalog"
	"github.com/cupti-exporter/cupti-exporter/pmsample/guard"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"

	"github.com/cupti-exporter/cupti-exporter/internal/cupti"
)

// runner owns one device.
type runner struct {
	s      *Sampler
	dev    pmdata.Device
	pm     pmDevice
	groups []catalog.Group
	fixed  bool // cannot sample at all; state stays error
	log    *slog.Logger

	mu          sync.Mutex
	st          pmdata.DeviceStatus
	pause       bool
	pausedUntil time.Time
	wake        chan struct{} // poked by Pause/Resume, Release/Reacquire
	rel         releaseState  // idle release (release.go)
	yield       yieldState    // given to a profiler (giveway.go)
	acq         acquireTimes  // durations of the last Enable, SetConfig and Start

	// session state, owned by the run goroutine
	enabled   bool
	group     int
	startNS   uint64
	decErrs   int
	interval  time.Duration // effective hardware interval (longer than configured after a backoff)
	loss      lossAccount
	adm       admission
	admit     string        // what admission found, for Status ("" when the rate is sustainable)
	backoffTo atomic.Int64  // ns: a backoff admission asked for, done at the next decode
	verdict   verdict       // admission's verdict behind backoffTo
	cpuMark   time.Duration // decode thread CPU at the previous batch
	// lastDecode is when the session's previous decode began (zero before its first); device
	// thread only.
	lastDecode time.Time
	// letGoTimes are the durations of the last letGo (device thread only): a give-way logs them,
	// since the profiler is refused until Disable.
	letGoTimes letGoTimes
	queue      *sinkQueue // the batches' way to the sink (Sampler.Run); nil in some tests
	pipe       *pipeline  // the evaluator thread with the double pipeline; nil: serial
	// lastSampleNS is the end of the newest delivered sample, or the session's start (ns on
	// the samples' clock); the evaluator thread of the double pipeline writes it too.
	lastSampleNS atomic.Uint64
	guard        *guard.Guard // for the metrics of guardFor (package guard); device thread only
	guardFor     []string
	rejects      rejectLog // the guard's rejections, logged at a bounded rate
}

// guardOf returns the guard for a group's metrics, built once per metric list.
func (r *runner) guardOf(metrics []string) *guard.Guard {
	if r.guard == nil || !slices.Equal(r.guardFor, metrics) {
		r.guard, r.guardFor = guard.New(r.dev.Chip, metrics), metrics
	}
	return r.guard
}

func newRunner(s *Sampler, dev pmdata.Device, pm pmDevice, groups []catalog.Group) *runner {
	r := &runner{s: s, dev: dev, pm: pm, groups: groups, wake: make(chan struct{}, 1),
		log: s.logger.With("gpu", dev.Index), interval: s.cfg.interval}
	r.loss.iv = uint64(r.interval.Nanoseconds())
	r.st = pmdata.DeviceStatus{Device: dev.Index, UUID: dev.UUID, State: pmdata.StateError, Reason: "sampler not running", Since: time.Now()}
	return r
}

func (r *runner) setState(st pmdata.State, reason string) {
	r.mu.Lock()
	changed := r.st.State != st
	if changed || r.st.Reason != reason {
		r.st.State, r.st.Reason, r.st.Since = st, reason, time.Now()
	}
	r.mu.Unlock()
	if changed {
		r.s.stateChanged()
	}
}

func (r *runner) status() pmdata.DeviceStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.st
	// A paused device is alive but samples nothing: not ready, saying until when (/readyz
	// lists it; the exporter stays live, and ready while another source produces).
	st.Ready = st.State == pmdata.StateSampling || st.State == pmdata.StateIdle
	if r.pause {
		st.PausedUntil = r.pausedUntil
	}
	if st.State == pmdata.StateYielded && r.yield.holder != nil {
		h := *r.yield.holder
		st.Holder = &h
	}
	if st.State == pmdata.StatePaused {
		st.Reason = "paused on request until resumed (PM counters not sampled)"
		if !st.PausedUntil.IsZero() {
			st.Reason = "paused on request until " + st.PausedUntil.UTC().Format(time.RFC3339) + " (PM counters not sampled)"
		}
	}
	return st
}

// paused reports whether sampling should be off now and, for a timed pause, when it ends.
func (r *runner) paused() (bool, time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pause && !r.pausedUntil.IsZero() && !time.Now().Before(r.pausedUntil) {
		r.pause, r.pausedUntil = false, time.Time{}
	}
	return r.pause, r.pausedUntil
}

// run is the device goroutine: acquire, sample, release; retry with backoff while the
// counters are busy or refused; wait while paused.
func (r *runner) run(ctx context.Context, sink func(pmdata.Batch)) {
	runtime.LockOSThread()
	// With its priority raised the thread ends with this goroutine (never unlocked) rather than
	// go back to the runtime's pool ahead of everything else.
	if err := raisePriority(); err != nil {
		r.log.Info("decode thread keeps the default priority: scrapes and other work can delay decoding", "nice", decodeNice, "err", err)
		defer runtime.UnlockOSThread()
	}
	if sd, ok := r.pm.(splitDecoder); ok && r.s.cfg.pipeline == PipelineDouble {
		r.pipe = newPipeline(sd)
		go r.pipe.run(r)
		defer func() { r.pipe.stop(); r.pipe = nil }()
	} else if r.s.cfg.pipeline == PipelineDouble {
		r.log.Info("this source decodes serially; the double pipeline needs the CUPTI source")
	}
	defer r.release()
	backoff := r.s.cfg.backoffMin
	for ctx.Err() == nil {
		if p, until := r.paused(); p {
			r.release()
			r.setState(pmdata.StatePaused, "paused on request")
			r.loss.open("paused", r.now())
			r.idle(ctx, until, sink)
			continue
		}
		if h := r.yielded(); h != nil { // given to a profiler (giveway.go); a user pause wins
			r.release()
			r.logLetGo(*h)
			r.yieldWait(ctx, sink)
			continue
		}
		if rel, why := r.idleReleased(); rel { // idle release (release.go); a user pause wins
			r.setState(pmdata.StateIdle, why)
			r.idleWait(ctx, sink)
			continue
		}
		err := r.acquire()
		if err == nil {
			backoff = r.s.cfg.backoffMin
			r.setState(pmdata.StateSampling, r.admit)
			err = r.sample(ctx, sink)
		}
		if errors.Is(err, errDutyOff) { // the session is released; sample again after the off phase
			r.loss.open("duty_cycle", r.now())
			r.idle(ctx, time.Now().Add(r.s.cfg.dutyOff), sink)
			continue
		}
		if errors.Is(err, errBusy) { // another client holds the counters: watch for them to free
			r.release()
			if r.status().State != pmdata.StateBusy {
				r.log.Warn("pm counters busy: another client holds them; retrying until they free", "every", r.s.cfg.busyPoll, "err", err)
			}
			r.setState(pmdata.StateBusy, err.Error())
			r.loss.open("busy", r.now())
			r.waitBusy(ctx, sink)
			continue
		}
		if err != nil {
			r.release()
			delay := backoff
			cause := "error"
			switch {
			case errors.Is(err, errPrivileges):
				r.setState(pmdata.StateError, err.Error())
				delay = r.s.cfg.privilegeRetry
			default:
				r.setState(pmdata.StateError, err.Error())
				backoff = min(backoff*2, r.s.cfg.backoffMax)
			}
			r.log.Warn("pm sampling stopped; retrying", "in", delay, "err", err)
			r.loss.open(cause, r.now())
			r.idle(ctx, time.Now().Add(delay), sink)
		}
	}
}

// wait sleeps until t (zero: forever), ctx ends or Pause/Resume pokes; it reports whether it
// was poked or ctx ended.
func (r *runner) wait(ctx context.Context, t time.Time) bool {
	var timer <-chan time.Time
	if !t.IsZero() {
		tm := time.NewTimer(time.Until(t))
		defer tm.Stop()
		timer = tm.C
	}
	select {
	case <-ctx.Done():
		return true
	case <-timer:
		return false
	case <-r.wake:
		return true
	}
}

// idle waits like wait while the device does not sample (paused, busy, error), and every
// decode period delivers a batch that accounts the time lost so far, so the lost-samples
// counters and the window coverage move while nothing is sampled.
func (r *runner) idle(ctx context.Context, until time.Time, sink func(pmdata.Batch)) {
	for ctx.Err() == nil {
		next := time.Now().Add(r.s.cfg.decodePeriod)
		last := !until.IsZero() && !next.Before(until)
		if last {
			next = until
		}
		woke := r.wait(ctx, next)
		if ctx.Err() != nil {
			return
		}
		r.loss.flush(r.now())
		if lost := r.loss.take(); len(lost) > 0 {
			sink(pmdata.Batch{Device: r.dev.Index, Lost: lost, Interval: r.interval})
		}
		if woke || last {
			return
		}
	}
}

// busyFor is how long a busy episode retries every busy poll; after it, every busyPollLong.
const (
	busyFor      = time.Minute
	busyPollLong = 5 * time.Second
)

// waitBusy waits before the next attempt to take counters another client holds: the busy poll
// (500 ms) for the first minute of the episode, so the session is back within about that once
// the client lets go, then 5 s (a client that holds them for long, such as DCGM's profiling
// module, costs each attempt's Enable and refused SetConfig no more than that). Reading the
// counter availability instead would be no cheaper: on an H100 it took 28 ms while the counters
// were held and 200-235 ms while free, and reads made a running ncu fail (run BK). A pause, a
// give-way, an idle release or ctx ending cuts the wait short.
func (r *runner) waitBusy(ctx context.Context, sink func(pmdata.Batch)) {
	r.mu.Lock()
	since := r.st.Since // of state busy
	r.mu.Unlock()
	poll := r.s.cfg.busyPoll
	if time.Since(since) >= busyFor {
		poll = max(poll, busyPollLong)
	}
	r.idle(ctx, time.Now().Add(poll), sink)
}

// clock is a device that reads the CUPTI clock (cuptiGetTimestamp), on which samples are stamped.
type clock interface{ now() uint64 }

// now is the current time on the samples' clock (ns, Unix epoch).
func (r *runner) now() uint64 {
	if c, ok := r.pm.(clock); ok {
		return c.now()
	}
	return uint64(time.Now().UnixNano())
}

// intervalSetter is a device whose hardware interval can change between sessions (backoff).
type intervalSetter interface{ setInterval(time.Duration) }

// refresher is a device that may have to re-plan before its first session (cuptiDevice.refresh).
type refresher interface {
	refresh() ([]catalog.Group, error)
}

// callTimer is a device that times its CUPTI calls (the CUPTI one; test fakes need not).
type callTimer interface{ takeCallTimes() pmdata.CallTimes }

// acquire is Enable, SetConfig(group 0), Start.
func (r *runner) acquire() error {
	if rp, ok := r.pm.(refresher); ok {
		groups, err := rp.refresh()
		if err != nil {
			return err
		}
		if groups != nil {
			r.groups = groups
			r.log.Info("metrics planned again with the counter availability image", "metrics", groups[0].Metrics)
			r.adm.reset() // a new metric set costs what it costs: measure again
		}
	}
	r.group = 0
	return r.acquireKeepGroup()
}

// acquireKeepGroup is Enable, SetConfig(r.group), Start.
func (r *runner) acquireKeepGroup() error {
	t0 := time.Now()
	if err := r.pm.Enable(); err != nil {
		return err
	}
	r.enabled = true
	r.mu.Lock()
	r.acq = acquireTimes{enable: time.Since(t0)}
	r.mu.Unlock()
	return r.configure()
}

// acquireTimes are the durations of the last session's calls (the retake log reports them).
type acquireTimes struct{ enable, setConfig, start time.Duration }

func (r *runner) configure() error {
	t0 := time.Now()
	if err := r.pm.SetConfig(r.group); err != nil {
		return err
	}
	r.mu.Lock()
	r.acq.setConfig = time.Since(t0)
	r.mu.Unlock()
	return r.start()
}

// start is Start; it begins the session's time line.
func (r *runner) start() error {
	t0 := time.Now()
	ts, err := r.pm.Start()
	r.mu.Lock()
	r.acq.start = time.Since(t0)
	r.mu.Unlock()
	if err != nil {
		return err
	}
	r.startNS = ts
	r.lastDecode = time.Time{}
	r.lastSampleNS.Store(ts)
	r.loss.started(ts)
	return nil
}

// release is Stop (best effort) and Disable.
func (r *runner) release() {
	r.pipe.wait() // the evaluator reads the images Disable frees
	if !r.enabled {
		return
	}
	_ = r.pm.Stop()
	if err := r.pm.Disable(); err != nil {
		r.log.Warn("releasing pm sampling", "err", err)
	}
	r.enabled = false
}

// sample runs one session: decode on the cadence, rotate groups when multiplexing, stop on
// ctx end or pause. A non-nil error means the session must be recreated after a backoff.
func (r *runner) sample(ctx context.Context, sink func(pmdata.Batch)) error {
	decodes := tick.New(r.s.cfg.decodePeriod) // on the timetable of the exporter's other loops
	defer decodes.Stop()
	var dutyEnd <-chan time.Time
	if r.s.cfg.dutyOff > 0 {
		t := time.NewTimer(r.s.cfg.dutyOn)
		defer t.Stop()
		dutyEnd = t.C
	}
	var rotate <-chan time.Time
	if r.s.cfg.multiplex > 0 && len(r.groups) > 1 {
		t := time.NewTicker(r.s.cfg.multiplex)
		defer t.Stop()
		rotate = t.C
	}
	for {
		select {
		case <-ctx.Done():
			r.drain(sink)
			return nil
		case <-r.wake:
			if r.off() { // paused or idle-released (release.go)
				r.letGo(sink)
				return nil
			}
		case <-decodes.C:
			if r.off() { // a timed pause that ended is cleared here too
				r.letGo(sink)
				return nil
			}
			if err := r.decode(sink); err != nil {
				return err
			}
		case <-dutyEnd:
			r.letGo(sink)
			return errDutyOff
		case <-rotate:
			// A new session for each turn: on an H200 (CUPTI 13.0) Stop, SetConfig and Start
			// in the same session returned no error and then no sample ever again (run M);
			// Disable and Enable is the path idle release and backoff proved there.
			r.drain(sink)
			r.loss.open("rotation", r.now())
			r.group = (r.group + 1) % len(r.groups)
			r.release()
			if err := r.acquireKeepGroup(); err != nil {
				return err
			}
		}
	}
}

// errDutyOff ends a session at the end of a duty cycle's sampled phase (WithDutyCycle).
var errDutyOff = errors.New("duty cycle: session released for the off phase")

// letGo ends sampling for a pause, an idle release or a duty cycle's off phase: Stop, a last
// decode, Disable. A session kept configured while released (Stop alone) would make the
// retake a Start, but it costs the idle power the release saves: +3.36 W on an H200, as much
// as sampling (run V).
func (r *runner) letGo(sink func(pmdata.Batch)) {
	t0 := time.Now()
	r.drain(sink)
	t1 := time.Now()
	r.release()
	t2 := time.Now()
	r.letGoTimes = letGoTimes{drain: t1.Sub(t0), release: t2.Sub(t1), at: t2}
}

// letGoTimes: Stop, the last decode and its evaluation (drain); waiting for the evaluator,
// Stop again and Disable (release); when it ended.
type letGoTimes struct {
	drain, release time.Duration
	at             time.Time
}

// drain stops sampling and decodes what is left; it reports whether the session died (see
// collect).
func (r *runner) drain(sink func(pmdata.Batch)) (dead bool) {
	if err := r.pm.Stop(); err != nil {
		r.log.Debug("stopping before drain", "err", err)
	}
	dead = r.collect(sink)
	r.pipe.wait()
	return dead
}

// decode decodes once and recreates the session (Disable, Enable, SetConfig, Start) after an
// overflow, which kills a keep-oldest session, after a full counter data image the device
// could not replace (CUPTI will not re-initialise it), or after three decode errors in a row.
// A pending backoff (admission) restarts the session at its longer interval.
func (r *runner) decode(sink func(pmdata.Batch)) error {
	dead := r.collect(sink)
	if !dead && r.decErrs == 0 && r.stalled() { // failing decodes have their own cause and recovery
		r.pipe.wait() // the evaluator may still deliver the last samples, and it owns the loss account
		if r.stalled() {
			now := r.now()
			r.log.Warn("pm sampling session delivered no sample for too long; recreating it", "for", time.Duration(now-r.lastSampleNS.Load()))
			r.loss.stall(now)
			r.release()
			return r.acquireKeepGroup()
		}
	}
	if !dead && r.decErrs < 3 {
		if r.backoffTo.Load() > 0 {
			return r.backOff(sink)
		}
		return nil
	}
	r.log.Warn("recreating pm sampling session", "decode_errors", r.decErrs)
	r.decErrs = 0
	r.release()
	return r.acquireKeepGroup()
}

// collect decodes once and delivers a batch with its losses; it reports whether the session
// is dead: an overflow, or a full counter data image that was not replaced by a fresh one in
// the same session. With the double pipeline it hands the decoded image to the evaluator
// thread instead (pipeline.go).
func (r *runner) collect(sink func(pmdata.Batch)) (dead bool) {
	if r.pipe != nil {
		return r.pipe.collect(r, sink)
	}
	gap := r.decodeGap()
	t0 := time.Now()
	b, fn := r.newBatch(r.group, r.startNS)
	b.DecodeGap = gap
	res, err := r.pm.Decode(r.group, fn)
	overflow, full := r.outcome(b, res, err)
	r.countDecodeError(overflow, full, err)
	b.DecodeDuration = time.Since(t0)
	r.deliver(b, sink, &r.cpuMark, b.DecodeDuration)
	return overflow || (full && (err != nil || !r.replacesImages()))
}

// decodeGap marks the start of a decode and returns the time since the session's previous one.
func (r *runner) decodeGap() time.Duration {
	now := time.Now()
	var gap time.Duration
	if !r.lastDecode.IsZero() {
		gap = now.Sub(r.lastDecode)
	}
	r.lastDecode = now
	return gap
}

// imageReplacer is a device that replaces a full counter data image with a fresh one in the
// same session (the CUPTI one); with others a full image ends the session.
type imageReplacer interface{ replacesFullImages() bool }

func (r *runner) replacesImages() bool {
	ir, ok := r.pm.(imageReplacer)
	return ok && ir.replacesFullImages()
}

// newBatch starts the batch of one decode of group g and returns the per-sample callback
// that fills it and accounts the device's time line (samples before startNS are dropped).
func (r *runner) newBatch(g int, startNS uint64) (*pmdata.Batch, func(start, end uint64, vals []float64)) {
	metrics := r.groups[g].Metrics
	b := &pmdata.Batch{Device: r.dev.Index, Metrics: metrics, Multiplexed: len(r.groups) > 1}
	n := len(metrics)
	gd := r.guardOf(metrics)
	var buf []float64 // values of many samples share one allocation
	// A decode period's samples, and a quarter more for a late decode: the batch's slices are
	// made once at that size (made at the first sample; an idle decode allocates nothing).
	expect := int(r.s.cfg.decodePeriod/r.interval)*5/4 + 1
	return b, func(start, end uint64, vals []float64) {
		switch {
		case vals != nil && len(vals) == 0: // incompleteSample
			b.Incomplete++
			r.loss.discard(start, end, lostIncomplete)
		case end > start && start < startNS:
			// Began before Start: dropped whatever its values, which CUPTI sometimes gives
			// as NaN for this sample (run DA, docs/gpu-validation.md).
			b.DroppedFirst++
			r.loss.discard(start, end, "start")
		case vals == nil || end <= start || hasNaN(vals):
			b.SkippedInvalid++
			r.loss.discard(start, end, "invalid")
		default:
			if bad := gd.Check(start, end, r.interval, vals); bad >= 0 {
				b.Reject(guard.Failed(metrics, bad))
				r.loss.discard(start, end, lostOutOfRange)
				r.rejects.report(r.log, r.pm, b, start, end, vals, bad)
				return
			}
			r.loss.sample(start, end)
			if b.Samples == nil {
				b.Samples = make([]pmdata.Sample, 0, expect)
			}
			if len(buf)+n > cap(buf) {
				buf = make([]float64, 0, n*max(expect-len(b.Samples), 64))
			}
			i := len(buf)
			buf = append(buf, vals...)
			b.Samples = append(b.Samples, pmdata.Sample{Start: start, End: end, Values: buf[i:len(buf):len(buf)]})
		}
	}
}

// decodeOutcome reads a decode's result: the hardware buffer overflowed, or the counter data
// image filled.
func decodeOutcome(res cupti.DecodeResult, err error) (overflow, full bool) {
	return res.Overflow || errors.Is(err, errOverflow), res.StopReason == cupti.StopCounterDataFull
}

// countDecodeError follows the decode errors in a row (decode recreates the session after
// three); an overflow or a full image is neither an error nor a success.
func (r *runner) countDecodeError(overflow, full bool, err error) {
	switch {
	case overflow || full:
	case err != nil:
		r.decErrs++
	default:
		r.decErrs = 0
	}
}

// outcome counts and logs what a decode reported and opens the matching loss cause.
func (r *runner) outcome(b *pmdata.Batch, res cupti.DecodeResult, err error) (overflow, full bool) {
	overflow, full = decodeOutcome(res, err)
	switch {
	case overflow:
		b.Overflows++
		r.loss.open("overflow", r.now())
		r.log.Warn("hardware buffer overflow: samples lost; decode more often or sample less often")
	case err != nil:
		b.DecodeErrors++
		r.loss.open("decode_error", r.now())
		r.log.Warn("decoding pm samples", "err", err)
	}
	if full {
		b.LostImageFull++
		r.loss.open("image_full", r.now())
		args := []any{"decode_gap", b.DecodeGap, "sink_blocked", r.queue.takeBlocked()}
		if c, ok := r.pm.(interface{ nextImageCapacity() int }); ok {
			args = append(args, "next_image_capacity", c.nextImageCapacity())
		}
		r.log.Warn("counter data image full: samples lost (a late decode); the images allocated from now on hold more", args...)
	}
	return overflow, full
}

// decoderCPU is a device whose decodes run on a thread of its own (cuptiDevice's decoder).
type decoderCPU interface{ decoderCPU() time.Duration }

// deliver completes a batch (call times, losses, interval, the thread's CPU since *mark),
// hands it to sink and feeds admission with cost, the time the slowest thread spent on it.
func (r *runner) deliver(b *pmdata.Batch, sink func(pmdata.Batch), mark *time.Duration, cost time.Duration) {
	if ct, ok := r.pm.(callTimer); ok {
		b.CUPTITime = ct.takeCallTimes()
	}
	b.Lost = r.loss.take()
	b.Interval = r.interval
	if cpu := threadCPU(); cpu > 0 {
		if dc, ok := r.pm.(decoderCPU); ok {
			cpu += dc.decoderCPU()
		}
		if *mark > 0 {
			b.ThreadCPU += cpu - *mark
		}
		*mark = cpu
	}
	if n := len(b.Samples); n > 0 {
		r.lastSampleNS.Store(b.Samples[n-1].End)
	}
	sink(*b)
	r.admitBatch(cost, len(b.Samples)+b.SkippedInvalid+b.DroppedFirst+b.Incomplete+b.RejectedCount())
}

// stalled reports whether the session has delivered no sample for longer than stallAfter
// since its newest sample or its start. A started session yields samples whether or not
// the GPU works (the trigger is GPU time), so silence means a session that took its
// configuration and then produced nothing: seen on an H200 after Stop, SetConfig, Start.
func (r *runner) stalled() bool {
	last := r.lastSampleNS.Load()
	now := r.now()
	return last != 0 && now > last && time.Duration(now-last) > r.stallAfter()
}

// stallAfter is max(5 decode periods, 20 intervals, the configured floor (1 s)): a late
// decode or a long interval is not a stall.
func (r *runner) stallAfter() time.Duration {
	return max(5*r.s.cfg.decodePeriod, 20*r.interval, r.s.cfg.stallFloor)
}

func hasNaN(vs []float64) bool {
	for _, v := range vs {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return true
		}
	}
	return false
}
