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

// A device whose counters were given to a profiler found on the host (package profilers
// decides, GiveWay and TakeBack act) is in pmdata.StateYielded: Stop, a last decode, Disable,
// then nothing until the profiler is gone.

// giveWaysDesc counts the give-ways of each device by tool.
var giveWaysDesc = descs.Counter("cupti_pm_give_ways_total", "", "cupti.pm.give_ways", "{give_way}", "Times the PM counters of the GPU were given to a profiler found on the host (tool: ncu, nsys, dcgm, named); the log names its process. Time without samples meanwhile is lost with reason yielded.", snapshot.DeviceLabels("tool")...)

// yieldState is the give-way side of a runner, guarded by runner.mu.
type yieldState struct {
	holder   *pmdata.Holder // nil: not given away
	since    time.Time
	counts   map[string]uint64 // give-ways by tool
	takeBack time.Time         // when the last TakeBack came, until the first sample after it
}

// GiveWay gives the PM counters of device to the profiler h: the session is let go (Stop, a
// last decode, Disable; the device thread does it at once) and the device reports
// pmdata.StateYielded until TakeBack. A user pause still wins; an idle release waits underneath. Giving way on a
// device already given away only updates the holder it names (not counted again).
func (s *Sampler) GiveWay(device int, h pmdata.Holder) {
	r := s.runner(device)
	if r == nil || r.fixed {
		return
	}
	r.mu.Lock()
	first := r.yield.holder == nil
	r.yield.holder = &h
	if first {
		r.yield.since = time.Now()
		if r.yield.counts == nil {
			r.yield.counts = map[string]uint64{}
		}
		r.yield.counts[h.Tool]++
		r.yield.takeBack = time.Time{}
	}
	r.mu.Unlock()
	if !first {
		if r.status().State == pmdata.StateYielded { // /readyz names the holder of now
			r.setState(pmdata.StateYielded, r.yieldReason())
		}
		return
	}
	r.log.Info("pm sampling gives way to a profiler", "tool", h.Tool, "pid", h.PID, "comm", h.Comm)
	r.poke()
	if s.running.TryLock() { // not running: nothing holds the counters
		s.running.Unlock()
		if p, _ := r.paused(); !p {
			r.setState(pmdata.StateYielded, r.yieldReason())
		}
	}
}

// TakeBack ends a give-way: the device takes its counters back at once (Enable, SetConfig,
// Start), unless a pause or an idle release keeps it off. The first sample after it is logged
// with its delay.
func (s *Sampler) TakeBack(device int) {
	r := s.runner(device)
	if r == nil {
		return
	}
	r.mu.Lock()
	h := r.yield.holder
	r.yield.holder = nil
	if h != nil {
		r.yield.takeBack = time.Now()
	}
	since := r.yield.since
	r.mu.Unlock()
	if h == nil {
		return
	}
	r.log.Info("pm sampling takes its counters back", "from", h.Tool, "pid", h.PID, "given_for", time.Since(since).Round(time.Millisecond))
	r.poke()
}

// logLetGo logs how long after the give-way the counters were free for the profiler h, and the
// let-go's parts (letGo's durations; zero when the session was already off, let go before the
// give-way by a pause or an idle release). A profiler that checks the counters before then is
// refused (docs/pm-sampling.md, "Giving way by itself").
func (r *runner) logLetGo(h pmdata.Holder) {
	r.mu.Lock()
	since := r.yield.since
	r.mu.Unlock()
	t := r.letGoTimes
	if t.at.Before(since) {
		t = letGoTimes{}
	}
	r.log.Info("pm counters free for the profiler", "tool", h.Tool, "pid", h.PID, "after_give_way", time.Since(since).Round(time.Microsecond),
		"stop_last_decode", t.drain.Round(time.Microsecond), "disable", t.release.Round(time.Microsecond))
}

// yielded returns the profiler the device's counters are given to, or nil.
func (r *runner) yielded() *pmdata.Holder {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.yield.holder
}

// yieldReason is the status reason of a device given away.
func (r *runner) yieldReason() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.yield.holder == nil {
		return ""
	}
	return "PM counters given to the profiler " + r.yield.holder.String() + " since " +
		r.yield.since.UTC().Format(time.RFC3339) + "; taken back when it exits"
}

// yieldWait waits while the device's counters are given away; the time is lost with reason
// yielded (also from the take-back to the first sample).
func (r *runner) yieldWait(ctx context.Context, sink func(pmdata.Batch)) {
	r.setState(pmdata.StateYielded, r.yieldReason())
	r.loss.open("yielded", r.now())
	r.idle(ctx, time.Time{}, sink) // until GiveWay, TakeBack, Pause or Resume pokes
}

// noteTakeBack logs the first sample after a take-back with its delay; sink wrapper, like observe.
func (r *runner) noteTakeBack(b pmdata.Batch) {
	if len(b.Samples) == 0 {
		return
	}
	r.mu.Lock()
	tb := r.yield.takeBack
	r.yield.takeBack = time.Time{}
	r.mu.Unlock()
	if tb.IsZero() {
		return
	}
	first := b.Samples[0].Start
	for _, smp := range b.Samples[1:] {
		first = min(first, smp.Start)
	}
	r.mu.Lock()
	acq := r.acq
	r.mu.Unlock()
	r.log.Info("pm sampling resumed after a profiler", "delivered_after_take_back", time.Since(tb).Round(time.Millisecond),
		"first_sample_began_after_take_back", time.Unix(0, int64(first)).Sub(tb).Round(time.Millisecond),
		"enable", acq.enable, "set_config", acq.setConfig, "start", acq.start)
}

// GiveWayCounts reports every device's give-ways by tool.
func (s *Sampler) GiveWayCounts() map[int]map[string]uint64 {
	out := map[int]map[string]uint64{}
	for _, r := range s.runners {
		r.mu.Lock()
		if len(r.yield.counts) > 0 {
			m := map[string]uint64{}
			for k, v := range r.yield.counts {
				m[k] = v
			}
			out[r.dev.Index] = m
		}
		r.mu.Unlock()
	}
	return out
}

// GiveWayProducer publishes cupti_pm_give_ways_total (exporter.Producer): a series appears at a
// device's first give-way to a tool.
type GiveWayProducer struct{ s *Sampler }

// NewGiveWayProducer returns a producer of s's give-way counter.
func NewGiveWayProducer(s *Sampler) *GiveWayProducer { return &GiveWayProducer{s: s} }

// Snapshot builds the family from the sampler's counts (mutex reads, no CUPTI).
func (p *GiveWayProducer) Snapshot() *snapshot.Snapshot {
	fam := snapshot.Family{Desc: giveWaysDesc}
	counts := p.s.GiveWayCounts()
	for _, d := range p.s.Devices() {
		for tool, n := range counts[d.Index] {
			fam.Samples = append(fam.Samples, snapshot.Sample{
				LabelValues: []string{strconv.Itoa(d.Index), d.UUID, d.Model, d.Chip, d.PCIBusID, tool}, Value: float64(n)})
		}
	}
	slices.SortFunc(fam.Samples, func(x, y snapshot.Sample) int { return slices.Compare(x.LabelValues, y.LabelValues) })
	snap := &snapshot.Snapshot{Time: time.Now()}
	if len(fam.Samples) > 0 {
		snap.Families = []snapshot.Family{fam}
	}
	slices.SortFunc(snap.Families, func(x, y snapshot.Family) int { return cmp.Compare(x.Desc.Name, y.Desc.Name) })
	return snap
}
