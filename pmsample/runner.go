package pmsample

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"runtime"
	"sync"
	"time"

	"github.com/cupti-exporter/cupti-exporter/internal/cupti"
)

// runner owns one device.
type runner struct {
	s      *Sampler
	dev    Device
	pm     pmDevice
	groups []Group
	fixed  bool // cannot sample at all; state stays error
	log    *slog.Logger

	mu          sync.Mutex
	st          DeviceStatus
	pause       bool
	pausedUntil time.Time
	wake        chan struct{} // poked by Pause/Resume, Release/Reacquire
	rel         releaseState  // idle release (release.go)

	// session state, owned by the run goroutine
	enabled bool
	group   int
	startNS uint64
	decErrs int
}

func newRunner(s *Sampler, dev Device, pm pmDevice, groups []Group) *runner {
	r := &runner{s: s, dev: dev, pm: pm, groups: groups, wake: make(chan struct{}, 1),
		log: s.logger.With("gpu", dev.Index)}
	r.st = DeviceStatus{Device: dev.Index, UUID: dev.UUID, State: StateError, Reason: "sampler not running", Since: time.Now()}
	return r
}

func (r *runner) setState(st State, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.st.State != st || r.st.Reason != reason {
		r.st.State, r.st.Reason, r.st.Since = st, reason, time.Now()
	}
}

func (r *runner) status() DeviceStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.st
	st.Ready = st.State == StateSampling || st.State == StatePaused || st.State == StateIdle
	if r.pause {
		st.PausedUntil = r.pausedUntil
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
func (r *runner) run(ctx context.Context, sink func(Batch)) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer r.release()
	backoff := r.s.cfg.backoffMin
	for ctx.Err() == nil {
		if p, until := r.paused(); p {
			r.setState(StatePaused, "paused on request")
			r.wait(ctx, until)
			continue
		}
		if rel, why := r.idleReleased(); rel { // idle release (release.go); a user pause wins
			r.setState(StateIdle, why)
			r.wait(ctx, time.Time{})
			continue
		}
		err := r.acquire()
		if err == nil {
			backoff = r.s.cfg.backoffMin
			r.setState(StateSampling, "")
			err = r.sample(ctx, sink)
		}
		if err != nil {
			r.release()
			delay := backoff
			switch {
			case errors.Is(err, errBusy):
				r.setState(StateBusy, err.Error())
				backoff = min(backoff*2, r.s.cfg.backoffMax)
			case errors.Is(err, errPrivileges):
				r.setState(StateError, err.Error())
				delay = r.s.cfg.privilegeRetry
			default:
				r.setState(StateError, err.Error())
				backoff = min(backoff*2, r.s.cfg.backoffMax)
			}
			r.log.Warn("pm sampling stopped; retrying", "in", delay, "err", err)
			r.wait(ctx, time.Now().Add(delay))
		}
	}
}

// wait sleeps until t (zero: forever), ctx ends or Pause/Resume pokes.
func (r *runner) wait(ctx context.Context, t time.Time) {
	var timer <-chan time.Time
	if !t.IsZero() {
		tm := time.NewTimer(time.Until(t))
		defer tm.Stop()
		timer = tm.C
	}
	select {
	case <-ctx.Done():
	case <-timer:
	case <-r.wake:
	}
}

// refresher is a device that may have to re-plan before its first session (cuptiDevice.refresh).
type refresher interface{ refresh() ([]Group, error) }

// callTimer is a device that times its CUPTI calls (the CUPTI one; test fakes need not).
type callTimer interface{ takeCallTimes() CallTimes }

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
		}
	}
	if err := r.pm.Enable(); err != nil {
		return err
	}
	r.enabled = true
	r.group = 0
	return r.configure()
}

func (r *runner) configure() error {
	if err := r.pm.SetConfig(r.group); err != nil {
		return err
	}
	ts, err := r.pm.Start()
	if err != nil {
		return err
	}
	r.startNS = ts
	return nil
}

// release is Stop (best effort) and Disable.
func (r *runner) release() {
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
func (r *runner) sample(ctx context.Context, sink func(Batch)) error {
	tick := time.NewTicker(r.s.cfg.decodePeriod)
	defer tick.Stop()
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
				r.drain(sink)
				r.release()
				return nil
			}
		case <-tick.C:
			if r.off() { // a timed pause that ended is cleared here too
				r.drain(sink)
				r.release()
				return nil
			}
			if err := r.decode(sink); err != nil {
				return err
			}
		case <-rotate:
			dead := r.drain(sink)
			r.group = (r.group + 1) % len(r.groups)
			if dead {
				r.release()
				if err := r.acquireKeepGroup(); err != nil {
					return err
				}
			} else if err := r.configure(); err != nil {
				return err
			}
		}
	}
}

// drain stops sampling and decodes what is left; it reports whether the session died (an
// overflow or a full image).
func (r *runner) drain(sink func(Batch)) (dead bool) {
	if err := r.pm.Stop(); err != nil {
		r.log.Debug("stopping before drain", "err", err)
	}
	return r.collect(sink)
}

// decode decodes once and recreates the session (Disable, Enable, SetConfig, Start) after an
// overflow, which kills a keep-oldest session, after a full counter data image, which CUPTI
// will not re-initialise, or after three decode errors in a row.
func (r *runner) decode(sink func(Batch)) error {
	if !r.collect(sink) && r.decErrs < 3 {
		return nil
	}
	r.log.Warn("recreating pm sampling session", "decode_errors", r.decErrs)
	r.decErrs = 0
	r.release()
	return r.acquireKeepGroup()
}

// collect decodes once and delivers a batch with its losses; it reports whether the session
// is dead (an overflow or a full counter data image).
func (r *runner) collect(sink func(Batch)) (dead bool) {
	t0 := time.Now()
	g := r.groups[r.group]
	b := Batch{Device: r.dev.Index, Metrics: g.Metrics, Multiplexed: len(r.groups) > 1}
	n := len(g.Metrics)
	var buf []float64 // values of many samples share one allocation
	res, err := r.pm.Decode(r.group, func(start, end uint64, vals []float64) {
		switch {
		case vals == nil || end <= start || hasNaN(vals):
			b.SkippedInvalid++
		case start < r.startNS:
			b.DroppedFirst++
		default:
			if len(buf)+n > cap(buf) {
				buf = make([]float64, 0, n*256)
			}
			i := len(buf)
			buf = append(buf, vals...)
			b.Samples = append(b.Samples, Sample{Start: start, End: end, Values: buf[i:len(buf):len(buf)]})
		}
	})
	overflow := res.Overflow || errors.Is(err, errOverflow)
	switch {
	case overflow:
		b.Overflows++
		r.log.Warn("hardware buffer overflow: samples lost; decode more often or sample less often")
	case err != nil:
		b.DecodeErrors++
		r.decErrs++
		r.log.Warn("decoding pm samples", "err", err)
	default:
		r.decErrs = 0
	}
	full := res.StopReason == cupti.StopCounterDataFull
	if full {
		b.LostImageFull++
		r.log.Warn("counter data image full: samples lost; decode more often or sample less often")
	}
	b.DecodeDuration = time.Since(t0)
	if ct, ok := r.pm.(callTimer); ok {
		b.CUPTITime = ct.takeCallTimes()
	}
	sink(b)
	return overflow || full
}

func (r *runner) acquireKeepGroup() error {
	g := r.group
	if err := r.pm.Enable(); err != nil {
		return err
	}
	r.enabled = true
	r.group = g
	return r.configure()
}

func hasNaN(vs []float64) bool {
	for _, v := range vs {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return true
		}
	}
	return false
}
