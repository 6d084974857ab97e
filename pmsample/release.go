package pmsample

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"

	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// Self-metrics of idle release: one series per device.
var (
	idleReleasesDesc   = descs.Counter("cupti_pm_idle_releases_total", "", "cupti.pm.idle.releases", "{release}", "Times the PM session of an idle GPU was released (state idle-released).", snapshot.DeviceLabelNames...)
	idleReacquiresDesc = descs.Counter("cupti_pm_idle_reacquires_total", "", "cupti.pm.idle.reacquires", "{reacquire}", "Times the PM session was taken back after an idle release, on a sign of activity.", snapshot.DeviceLabelNames...)
	idleReleasedDesc   = descs.Counter("cupti_pm_idle_released_seconds_total", "seconds", "cupti.pm.idle.released", "s", "Time the PM session was released because the GPU was idle (no samples, by design).", snapshot.DeviceLabelNames...)
	idleMissedDesc     = descs.Counter("cupti_pm_idle_missed_seconds_total", "seconds", "cupti.pm.idle.missed", "s", "Time from the first sign of activity on a released GPU to its first PM sample after reacquiring: work that ran unsampled.", snapshot.DeviceLabelNames...)
)

// releaseState is the idle-release side of a runner, guarded by runner.mu.
type releaseState struct {
	released   bool
	reason     string
	since      time.Time // when the current release began
	releases   uint64
	reacquires uint64
	releasedS  float64 // closed released periods, seconds
	missedS    float64
	// activity is the earliest time the activity that ended the last release may have begun;
	// non-zero until the first sample after reacquiring arrives.
	activity time.Time
}

// IdleStats is the idle-release account of one device.
type IdleStats struct {
	Device          int
	Released        bool
	Releases        uint64
	Reacquires      uint64
	ReleasedSeconds float64 // including the current release
	MissedSeconds   float64
}

// Release releases the PM session of device (Stop after a last decode, Disable, as Pause
// does) because the GPU is idle; the device reports pmdata.StateIdle (ready) with reason until
// Reacquire. A user pause wins: a paused device stays paused and Resume does not end an idle
// release. Releasing a released device or an unknown one does nothing. It does not wait.
func (s *Sampler) Release(device int, reason string) {
	r := s.runner(device)
	if r == nil || r.fixed {
		return
	}
	r.mu.Lock()
	if r.rel.released {
		r.mu.Unlock()
		return
	}
	r.rel.released, r.rel.reason, r.rel.since = true, reason, time.Now()
	r.rel.releases++
	r.rel.activity = time.Time{}
	r.mu.Unlock()
	r.poke()
	if s.running.TryLock() { // not running: nothing holds the counters
		s.running.Unlock()
		if p, _ := r.paused(); !p {
			r.setState(pmdata.StateIdle, reason)
		}
	}
}

// Reacquire takes the PM session of a released device back at once (Enable, SetConfig,
// Start; poked, not waiting for a poll). since is the earliest time the activity that called
// for it may have begun: the time until the first sample is counted as missed. A device that
// is not released is left alone.
func (s *Sampler) Reacquire(device int, since time.Time) {
	r := s.runner(device)
	if r == nil {
		return
	}
	now := time.Now()
	r.mu.Lock()
	if !r.rel.released {
		r.mu.Unlock()
		return
	}
	if since.IsZero() || since.After(now) {
		since = now
	}
	r.rel.released = false
	r.rel.releasedS += now.Sub(r.rel.since).Seconds()
	r.rel.reacquires++
	r.rel.activity = since
	r.mu.Unlock()
	r.poke()
}

// IdleStats reports every device's idle-release account.
func (s *Sampler) IdleStats() []IdleStats {
	out := make([]IdleStats, len(s.runners))
	for i, r := range s.runners {
		out[i] = r.idleStats()
	}
	return out
}

// IdleFamilies returns the idle-release self-metrics of every device.
func IdleFamilies(devices []pmdata.Device, stats []IdleStats) []snapshot.Family {
	byIdx := map[int]pmdata.Device{}
	for _, d := range devices {
		byIdx[d.Index] = d
	}
	fams := []snapshot.Family{{Desc: idleMissedDesc}, {Desc: idleReacquiresDesc}, {Desc: idleReleasedDesc}, {Desc: idleReleasesDesc}}
	for _, st := range stats {
		d, ok := byIdx[st.Device]
		if !ok {
			d = pmdata.Device{Index: st.Device}
		}
		labels := []string{strconv.Itoa(d.Index), d.UUID, d.Model, d.Chip, d.PCIBusID}
		for i, v := range []float64{st.MissedSeconds, float64(st.Reacquires), st.ReleasedSeconds, float64(st.Releases)} {
			fams[i].Samples = append(fams[i].Samples, snapshot.Sample{LabelValues: labels, Value: v})
		}
	}
	for i := range fams {
		slices.SortFunc(fams[i].Samples, func(x, y snapshot.Sample) int { return slices.Compare(x.LabelValues, y.LabelValues) })
	}
	return fams
}

// IdleProducer publishes the idle-release self-metrics of a sampler as a snapshot of their
// own (exporter.Producer), so the PM aggregator needs no change.
type IdleProducer struct{ s *Sampler }

// NewIdleProducer returns a producer of s's idle-release metrics.
func NewIdleProducer(s *Sampler) *IdleProducer { return &IdleProducer{s: s} }

// Snapshot builds the families from the sampler's counters (a few mutex reads, no CUPTI).
func (p *IdleProducer) Snapshot() *snapshot.Snapshot {
	snap := &snapshot.Snapshot{Time: time.Now(), Families: IdleFamilies(p.s.Devices(), p.s.IdleStats())}
	slices.SortFunc(snap.Families, func(x, y snapshot.Family) int { return cmp.Compare(x.Desc.Name, y.Desc.Name) })
	return snap
}

func (s *Sampler) runner(device int) *runner {
	for _, r := range s.runners {
		if r.dev.Index == device {
			return r
		}
	}
	return nil
}

func (r *runner) idleStats() IdleStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := IdleStats{Device: r.dev.Index, Released: r.rel.released, Releases: r.rel.releases,
		Reacquires: r.rel.reacquires, ReleasedSeconds: r.rel.releasedS, MissedSeconds: r.rel.missedS}
	if r.rel.released {
		st.ReleasedSeconds += time.Since(r.rel.since).Seconds()
	}
	return st
}

// idleReleased reports whether the device is released for idleness, and why.
func (r *runner) idleReleased() (bool, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rel.released, r.rel.reason
}

// off reports whether the session must be let go now: a user pause, a profiler, or an idle
// release.
func (r *runner) off() bool {
	if p, _ := r.paused(); p {
		return true
	}
	if r.yielded() != nil {
		return true
	}
	rel, _ := r.idleReleased()
	return rel
}

// idleWait waits while the device is idle-released. Released time is no loss (nothing ran):
// a loss still open is accounted up to now and delivered, and on waking the account skips the
// released time. After a Reacquire, the time from the activity to the first sample is lost with
// reason idle_release (lossAccount.sample accounts it when that sample arrives).
func (r *runner) idleWait(ctx context.Context, sink func(pmdata.Batch)) {
	r.loss.flush(r.now())
	if lost := r.loss.take(); len(lost) > 0 {
		sink(pmdata.Batch{Device: r.dev.Index, Lost: lost, Interval: r.interval})
	}
	r.wait(ctx, time.Time{})
	now, prev := r.now(), r.loss.cursor
	r.loss.cursor, r.loss.cause = now, ""
	r.mu.Lock()
	released, act := r.rel.released, r.rel.activity
	r.mu.Unlock()
	if !released && !act.IsZero() {
		if a := uint64(act.UnixNano()); a < now {
			r.loss.cursor = max(prev, a)
		}
		r.loss.cause = "idle_release"
	}
}

// observe wraps the sink of a device: the first sample after a reacquire closes the missed
// time that began with the activity.
func (r *runner) observe(sink func(pmdata.Batch)) func(pmdata.Batch) {
	return func(b pmdata.Batch) {
		r.noteTakeBack(b)
		if len(b.Samples) > 0 {
			r.mu.Lock()
			if !r.rel.activity.IsZero() {
				first := b.Samples[0].Start
				for _, smp := range b.Samples[1:] {
					first = min(first, smp.Start)
				}
				if missed := time.Unix(0, int64(first)).Sub(r.rel.activity); missed > 0 {
					r.rel.missedS += missed.Seconds()
				}
				r.log.Info("pm sampling retaken after an idle release", "first_sample_after_activity", time.Unix(0, int64(first)).Sub(r.rel.activity),
					"first_sample_unix_ns", first, "activity_unix_ns", r.rel.activity.UnixNano(),
					"enable", r.acq.enable, "set_config", r.acq.setConfig, "start", r.acq.start)
				r.rel.activity = time.Time{}
			}
			r.mu.Unlock()
		}
		sink(b)
	}
}
