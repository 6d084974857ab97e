package idle

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/internal/gpm"
	"github.com/cupti-exporter/cupti-exporter/internal/tick"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
)

// clockEventGPUIdle is the gpu_idle bit of nvmlDeviceGetCurrentClocksEventReasons.
const clockEventGPUIdle = 0x1

// Sampler is what a Controller drives: pmsample's *Sampler.
type Sampler interface {
	Devices() []pmdata.Device
	Status() []pmdata.DeviceStatus
	Release(device int, reason string)
	Reacquire(device int, since time.Time)
}

// Controller releases the PM session of idle GPUs and takes it back on the first sign of
// activity (see the package documentation).
type Controller struct {
	cfg  config
	s    Sampler
	lib  nvml.Interface
	log  *slog.Logger
	kick chan struct{} // poked by Add and the listener when a sign arrives while a GPU is released
	pid  uint32
	// anyReleased: a GPU is released now (set by Run after each step). Only then does a sign
	// need Run at once, and only then does Run poll every cfg.poll rather than every cfg.check.
	anyReleased atomic.Bool

	mu      sync.Mutex
	signals map[int]*signal           // by device index, consumed by Run
	procs   map[*record.Process][]int // device index by CUDA ordinal of each connected process (-1: unknown)
	byLabel map[string]int            // gpu label -> device index

	gpus []*gpu // owned by Run
}

// signal is activity seen by Add or the listener since Run last looked.
type signal struct {
	first, last time.Time // earliest start and latest end of the activity
	what        string    // what the earliest was
	pmBusy      bool      // a PM batch had SM active at or above the threshold
}

// gpu is the Run goroutine's view of one device.
type gpu struct {
	index      int
	h          nvml.Device
	quietSince time.Time // start of the current quiet stretch; zero: activity at the last check
	lastCheck  time.Time // last NVML utilisation read while sampling
	utilBusy   bool      // what that read said (an error counts as busy)
	released   bool
	releasedAt time.Time
	lastQuiet  time.Time // last poll that found nothing while released
	idleBit    bool      // the gpu_idle clock-event bit was seen set since the release
	pids       map[uint32]bool
	nvmlErrs   int
	polls      int // polls since the release
	// lastProcQuiet is the last process listing that found no new process.
	lastProcQuiet time.Time
	gpm           *gpm.Pair // GPM samples while released (gpm.go); nil without
	gpmOff        bool      // GPM cannot be had on this GPU
	powerLow      float64   // lowest instant power (W) since the release; 0: none read yet
	powerOff      bool      // the instant power cannot be read on this GPU
}

// procPeriod is how often a released GPU's compute processes are listed: the dearest of the
// three reads, and a context takes longer than this to create, so every poll would be waste.
const procPeriod = 100 * time.Millisecond

func (c *Controller) procEvery() int { return max(1, int(procPeriod/c.cfg.poll)) }

// New returns a Controller of s that reads NVML through lib (nvml.New() for the real
// library; a mock in tests). Nothing happens until Run.
func New(s Sampler, lib nvml.Interface, logger *slog.Logger, opts ...Option) *Controller {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c := &Controller{cfg: newConfig(opts), s: s, lib: lib, log: logger.With("source", "idle"),
		kick: make(chan struct{}, 1), pid: uint32(os.Getpid()),
		signals: map[int]*signal{}, procs: map[*record.Process][]int{}, byLabel: map[string]int{}}
	for _, d := range s.Devices() {
		c.byLabel[fmt.Sprint(d.Index)] = d.Index
	}
	return c
}

// Run watches the GPUs until ctx ends. Without NVML it logs why and releases nothing.
func (c *Controller) Run(ctx context.Context) error {
	if ret := c.lib.Init(); ret != nvml.SUCCESS {
		c.log.Warn("idle release is off: NVML unavailable, so an idle GPU could not be watched cheaply", "err", nvml.ErrorString(ret))
		return nil
	}
	defer c.lib.Shutdown()
	for _, d := range c.s.Devices() {
		h, ret := c.lib.DeviceGetHandleByUUID(d.UUID)
		if ret != nvml.SUCCESS {
			c.log.Warn("idle release is off for a GPU NVML does not know", "gpu", d.Index, "uuid", d.UUID, "err", nvml.ErrorString(ret))
			continue
		}
		c.gpus = append(c.gpus, &gpu{index: d.Index, h: h})
	}
	if len(c.gpus) == 0 {
		return nil
	}
	defer func() {
		for _, g := range c.gpus {
			g.gpmFree()
		}
	}()
	c.log.Info("releasing the PM session of idle GPUs", "after", c.cfg.after, "poll", c.cfg.poll)
	t := tick.New(c.cfg.check) // on the exporter's timetable (internal/tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-c.kick:
		}
		c.step(c.cfg.now())
		// While every GPU is sampled, nothing needs a look more often than the utilisation
		// check: polling at cfg.poll then cost about 50 wake-ups a second (issue 32 item 5).
		if c.anyReleased.Load() {
			t.Reset(c.cfg.poll)
		} else {
			t.Reset(c.cfg.check)
		}
	}
}

// step looks at every GPU once.
func (c *Controller) step(now time.Time) {
	states := map[int]pmdata.State{}
	for _, st := range c.s.Status() {
		states[st.Device] = st.State
	}
	released := false
	for _, g := range c.gpus {
		sig := c.take(g.index)
		if g.released {
			c.watch(g, sig, now)
		} else {
			c.checkIdle(g, sig, states[g.index], now)
		}
		released = released || g.released
	}
	c.anyReleased.Store(released)
}

// take consumes the signals of device i.
func (c *Controller) take(i int) signal {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.signals[i]
	if s == nil {
		return signal{}
	}
	delete(c.signals, i)
	return *s
}

// checkIdle follows a sampled GPU and releases it after the delay of quiet.
func (c *Controller) checkIdle(g *gpu, sig signal, st pmdata.State, now time.Time) {
	if st != pmdata.StateSampling { // only a held session is released; paused, busy, error: no
		g.quietSince = time.Time{}
		return
	}
	active := !sig.first.IsZero() || sig.pmBusy
	// NVML's utilisation only where the counters saw nothing: a busy GPU costs no cgo call (one
	// made while every goroutine sleeps wakes the Go runtime's monitor thread, issue 32 item 5).
	if !active && now.Sub(g.lastCheck) >= c.cfg.check {
		g.lastCheck = now
		u, ret := g.h.GetUtilizationRates()
		g.utilBusy = ret != nvml.SUCCESS || u.Gpu > 0 // unknown counts as busy
	}
	active = active || g.utilBusy
	switch {
	case active:
		g.quietSince = time.Time{}
	case g.quietSince.IsZero():
		g.quietSince = now
	case now.Sub(g.quietSince) >= c.cfg.after:
		c.release(g, now)
	}
}

func (c *Controller) release(g *gpu, now time.Time) {
	g.released, g.releasedAt, g.lastQuiet, g.lastProcQuiet, g.idleBit, g.nvmlErrs, g.polls = true, now, now, now, false, 0, 0
	g.powerLow = 0
	g.pids = c.processes(g)
	c.gpmStart(g)
	reason := fmt.Sprintf("GPU idle for %s (NVML utilisation 0, no kernels, SM active < %g%%): PM session released until work starts", c.cfg.after, c.cfg.smThreshold)
	c.s.Release(g.index, reason)
	c.log.Info("gpu idle: pm session released", "gpu", g.index, "idle_for", now.Sub(g.quietSince))
}

// watch polls a released GPU and reacquires on the first sign of activity.
func (c *Controller) watch(g *gpu, sig signal, now time.Time) {
	since, what := g.lastQuiet, ""
	if !sig.first.IsZero() && !sig.last.Before(g.releasedAt) { // older records were seen while sampling
		what = sig.what
		if first := later(sig.first, g.releasedAt); first.Before(since) {
			since = first
		}
	}
	ok := 0
	if what == "" {
		if busy, read := c.gpmBusy(g); read {
			ok++
			if busy {
				what = "gpm_sm_util"
			}
		}
	}
	if what == "" {
		if rose, read := c.powerRose(g); read {
			ok++
			if rose {
				what = "power"
			}
		}
	}
	if what == "" {
		if mask, ret := g.h.GetCurrentClocksEventReasons(); ret == nvml.SUCCESS {
			ok++
			switch {
			case mask&clockEventGPUIdle != 0:
				g.idleBit = true
			case g.idleBit:
				what = "clock_events"
			}
		}
	}
	if what == "" {
		if u, ret := g.h.GetUtilizationRates(); ret == nvml.SUCCESS {
			ok++
			if u.Gpu > 0 {
				what = "utilization"
			}
		}
	}
	g.polls++
	if what == "" && g.polls%c.procEvery() == 0 {
		if procs, ret := g.h.GetComputeRunningProcesses(); ret == nvml.SUCCESS {
			ok++
			seen := make(map[uint32]bool, len(procs))
			for _, p := range procs {
				seen[p.Pid] = true
				if p.Pid != c.pid && !g.pids[p.Pid] {
					what, since = "new_process", g.lastProcQuiet // it appeared after the last listing
				}
			}
			g.pids = seen
			if what == "" {
				g.lastProcQuiet = now
			}
		}
	}
	if what == "" && ok == 0 {
		if g.nvmlErrs++; g.nvmlErrs >= 3 { // blind: take the session back rather than miss work
			what = "nvml_error"
		}
	} else if ok > 0 {
		g.nvmlErrs = 0
	}
	if what == "" {
		g.lastQuiet = now
		return
	}
	g.released, g.quietSince, g.lastCheck, g.utilBusy = false, time.Time{}, time.Time{}, true
	c.s.Reacquire(g.index, since)
	c.log.Info("activity on an idle-released gpu: pm session retaken", "gpu", g.index, "signal", what,
		"since_unix_ns", since.UnixNano(), "released_for", now.Sub(g.releasedAt))
}

// processes lists the compute processes on g (nil when NVML cannot tell).
func (c *Controller) processes(g *gpu) map[uint32]bool {
	procs, ret := g.h.GetComputeRunningProcesses()
	if ret != nvml.SUCCESS {
		return nil
	}
	out := make(map[uint32]bool, len(procs))
	for _, p := range procs {
		out[p.Pid] = true
	}
	return out
}

// mark records activity on device i from first to last; c.mu is held.
func (c *Controller) mark(i int, first, last time.Time, what string) {
	s := c.signals[i]
	if s == nil {
		s = &signal{}
		c.signals[i] = s
	}
	if s.first.IsZero() || first.Before(s.first) {
		s.first, s.what = first, what
	}
	if last.After(s.last) {
		s.last = last
	}
}

func (c *Controller) poke() {
	if !c.anyReleased.Load() {
		return // a sign while sampling waits for the next step (it only keeps the GPU from idling)
	}
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
