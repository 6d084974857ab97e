package gpmsource

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/cupti-exporter/cupti-exporter/internal/gpm"
	"github.com/cupti-exporter/cupti-exporter/internal/nvmlpci"
	"github.com/cupti-exporter/cupti-exporter/internal/tick"
	"github.com/cupti-exporter/cupti-exporter/mapping"
	"github.com/cupti-exporter/cupti-exporter/pmsample/aggregate"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
	"github.com/cupti-exporter/cupti-exporter/profilers/procfs"
	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// initRetry is how long Run waits before trying NVML again after Init failed.
const initRetry = 30 * time.Second

// lookupEvery is how often a GPU whose reads keep failing is looked up again by UUID (it may
// have been reset), and the MIG layout of a GPU in MIG mode read again.
const lookupEvery = 10 * time.Second

// Source reads, every period, the GPM metrics of the curated families (metrics.go) on every
// GPU with GPM (Hopper and newer) that wants them: every one in GPM mode (WithMode(ModeOnly)),
// else each GPU whose PM sampling cannot read it (WithPMStatus). It folds them into window
// statistics and counters like PM samples (a aggregate.Aggregator over the curated Perfworks
// names), so they come out under the curated families' own names. Fill serves them.
type Source struct {
	cfg config
	lib nvml.Interface
	log *slog.Logger
	m   *mapping.Mapper
	ms  []resolved

	started atomic.Bool                         // NVML was read: gpus is set
	migAgg  atomic.Pointer[migAggregator]       // MIG GPU instances; nil without any
	state   atomic.Pointer[map[string]gpuState] // by UUID, for Fill
	self    atomic.Pointer[snapshot.Snapshot]   // samples and failures

	curatedDesc map[*snapshot.Desc]bool // the Descs (mean, max, min) of the families GPM serves
	mig         migDescs

	holders   atomic.Pointer[map[string][]Holder] // by lower-case UUID
	holdersAt time.Time                           // last look for holders (Collect's goroutine)
	proc      procfs.FS                           // where holders are looked for (Collect's goroutine)

	initErr atomic.Pointer[string] // why NVML could not be read; nil once it was
	kick    chan struct{}          // Kick: PM sampling's state changed

	mu   sync.Mutex // guards gpus and all
	gpus []*gpu
	all  map[string]nvml.Device // every GPU NVML lists, by lower-case UUID
}

// New returns a Source reading through lib (nvml.New() for the real library, go-nvml's mock in
// tests), mapping through m (the PM aggregator's mapper, so the families share their Desc).
// Nothing is read until Run.
func New(lib nvml.Interface, m *mapping.Mapper, logger *slog.Logger, opts ...Option) (*Source, error) {
	cfg := newConfig(opts)
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	ms, err := resolve(m, cfg.families)
	if err != nil {
		return nil, err
	}
	s := &Source{cfg: cfg, lib: lib, log: logger.With("source", "gpm"), m: m, ms: ms, curatedDesc: map[*snapshot.Desc]bool{},
		proc: procfs.FS{Root: cfg.procRoot}, kick: make(chan struct{}, 1)}
	for _, r := range ms {
		met, err := m.Map(r.perfworks, r.props)
		if err != nil {
			return nil, err
		}
		for _, d := range met.Descs() {
			s.curatedDesc[d] = true
		}
	}
	s.state.Store(&map[string]gpuState{})
	s.holders.Store(&map[string][]Holder{})
	s.self.Store(&snapshot.Snapshot{Time: cfg.now()})
	return s, nil
}

// gpu is one GPU the source knows: its NVML handle, labels, GPM samples and counts.
type gpu struct {
	index    int
	dev      nvml.Device
	agg      *aggregate.Aggregator // its window statistics: one per GPU, so a read rebuilds one GPU's snapshot
	label    pmdata.Device         // labels of its series (gpu is PM sampling's index of its UUID when known)
	ms       []resolved            // the metrics it serves (those it refused at the first pair left out)
	ids      []nvml.GpmMetricId
	pair     *gpm.Pair
	probed   bool // the first pair has shown which metrics it serves
	reading  bool
	lastEnd  uint64 // ns, end of the newest pair (or failure) accounted
	failing  int    // reads failed in a row
	lookup   time.Time
	samples  uint64
	failures map[string]uint64 // by reason
	mig      []*instance       // its MIG GPU instances, when in MIG mode
	migSeen  time.Time         // when the MIG layout was read
}

// gpuState is what Fill needs of a GPU: whether GPM serves it now, and why not.
type gpuState struct {
	gpu     string // gpu label
	uuid    string
	reading bool // wanted and its last read succeeded
	wanted  bool
	problem string // the last failure, when not reading
}

// Run reads NVML until ctx ends; without NVML it logs why and retries every 30 s.
func (s *Source) Run(ctx context.Context) error {
	for {
		err := s.init()
		if err == "" {
			s.initErr.Store(nil)
			break
		}
		s.initErr.Store(&err)
		s.log.Warn("NVML unavailable; the curated metrics have no GPM source", "err", err, "retry_in", initRetry)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(initRetry):
		}
	}
	defer s.lib.Shutdown()
	defer s.free()
	t := tick.New(s.cfg.interval) // on the exporter's timetable (internal/tick)
	defer t.Stop()
	for {
		wait := s.cfg.interval
		if !s.collect() {
			// No GPU wants GPM: PM sampling serves them all. A state change (Kick) starts the
			// reads at once; the recheck only catches what no Kick announced.
			wait = s.cfg.recheck
		}
		t.Reset(wait)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-s.kick:
		}
	}
}

// idleRecheck is how long Run waits between collections while no GPU wants GPM: waking every
// interval to read nothing cost the process about 10 wake-ups a second (issue 32 item 5).
const idleRecheck = time.Second

// Kick makes Run collect now (PM sampling's state changed: a GPU may want GPM); it never
// blocks. Wire it to (*pmsample.Sampler).OnStateChange.
func (s *Source) Kick() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// init loads NVML and finds the GPUs with GPM; "" on success, else why not.
func (s *Source) init() string {
	if ret := s.lib.Init(); ret != nvml.SUCCESS {
		return "nvmlInit: " + nvml.ErrorString(ret)
	}
	n, ret := s.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		s.lib.Shutdown()
		return "nvmlDeviceGetCount: " + nvml.ErrorString(ret)
	}
	var gpus []*gpu
	all := map[string]nvml.Device{}
	for i := range n {
		dev, ret := s.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			s.log.Warn("GPU not readable through NVML; no GPM for it", "index", i, "err", nvml.ErrorString(ret))
			continue
		}
		g := &gpu{index: i, dev: dev, failures: map[string]uint64{}}
		g.label = s.identify(i, dev)
		all[strings.ToLower(g.label.UUID)] = dev
		if sup, ret := dev.GpmQueryDeviceSupport(); ret != nvml.SUCCESS || sup.IsSupportedDevice == 0 {
			s.log.Info("GPU without GPM (before Hopper, or not supported): its curated metrics come from PM sampling alone", "gpu", g.label.Index, "uuid", g.label.UUID)
			continue
		}
		p, ret := gpm.Alloc(s.lib)
		if ret != nvml.SUCCESS {
			s.log.Warn("GPM samples cannot be allocated; no GPM for this GPU", "gpu", g.label.Index, "err", nvml.ErrorString(ret))
			continue
		}
		g.pair = p
		g.ms = slices.Clone(s.ms)
		if !nvlinkUp(dev) {
			g.ms = slices.DeleteFunc(g.ms, func(m resolved) bool { return m.nvlink })
		}
		g.ids = idsOf(g.ms)
		labels := pmdata.Device{Index: i, UUID: g.label.UUID, Model: g.label.Model, Chip: g.label.Chip, PCIBusID: g.label.PCIBusID}
		g.agg = aggregate.New(s.m, []pmdata.Device{labels}, catalog(s.ms), s.log, s.aggOptions()...)
		gpus = append(gpus, g)
	}
	s.mu.Lock()
	s.gpus, s.all = gpus, all
	s.mu.Unlock()
	s.started.Store(true)
	s.log.Info("reading GPM for the curated metrics", "gpus", len(gpus), "of", n, "interval", s.cfg.interval, "mode", s.cfg.mode)
	return ""
}

func (s *Source) aggOptions() []aggregate.Option {
	return []aggregate.Option{aggregate.WithWindow(s.cfg.window), aggregate.WithWindowMin(s.cfg.windowMin), aggregate.WithClock(s.cfg.now)}
}

// identify gives a GPU's labels: PM sampling's device of its UUID when there is one (the gpu
// index CUDA gives it, the chip CUPTI names), else NVML's index, name and bus ID and the chip
// of its architecture where that names one.
func (s *Source) identify(i int, dev nvml.Device) pmdata.Device {
	uuid, _ := dev.GetUUID()
	for _, d := range s.cfg.devices() {
		if uuid != "" && strings.EqualFold(d.UUID, uuid) {
			return d
		}
	}
	out := pmdata.Device{Index: i, UUID: uuid}
	out.Model, _ = dev.GetName()
	if pci, ret := dev.GetPciInfo(); ret == nvml.SUCCESS {
		out.PCIBusID = nvmlpci.BusID(pci)
	}
	if a, ret := dev.GetArchitecture(); ret == nvml.SUCCESS {
		out.Chip = chips[a]
	}
	return out
}

// chips names the chip of the architectures that have one GPM-capable chip; others serve an
// empty chip label (PM sampling, when it runs, names it from CUPTI).
var chips = map[nvml.DeviceArchitecture]string{nvml.DEVICE_ARCH_HOPPER: "GH100"}

// nvlinkUp reports whether any NVLink link of dev is up: PM sampling leaves the NVLink
// counters out on a GPU without NVLink peers, and so does GPM.
func nvlinkUp(dev nvml.Device) bool {
	for l := range nvml.NVLINK_MAX_LINKS {
		if st, ret := dev.GetNvLinkState(l); ret == nvml.SUCCESS && st == nvml.FEATURE_ENABLED {
			return true
		}
	}
	return false
}

// idsOf lists the GPM metrics to ask for ms, each once, and DRAM_BW_UTIL, whose NaN tells a
// pair that saw no refresh (stale).
func idsOf(ms []resolved) []nvml.GpmMetricId {
	out := []nvml.GpmMetricId{nvml.GPM_METRIC_DRAM_BW_UTIL}
	for _, m := range ms {
		for _, id := range m.ids {
			if !slices.Contains(out, id) {
				out = append(out, id)
			}
		}
	}
	return out
}

// Collect reads every GPU that wants GPM once and publishes what it read. Run calls it every
// interval while a GPU wants GPM; tests call it directly.
func (s *Source) Collect() { s.collect() }

// collect is Collect; it reports whether it read anything (a GPU wanted GPM, or a GPU has MIG
// instances), so Run knows whether the next collection is due in an interval.
func (s *Source) collect() bool {
	if !s.started.Load() {
		return false
	}
	read := false
	want := s.wanted()
	s.mu.Lock()
	gpus := slices.Clone(s.gpus)
	s.mu.Unlock()
	states := make(map[string]gpuState, len(gpus))
	now := s.cfg.now()
	for _, g := range gpus {
		w := want(g.label.UUID)
		switch {
		case w && !g.reading:
			g.pair.Restart() // a pair never spans time GPM did not serve
			g.reading, g.lastEnd = true, 0
		case !w:
			g.reading = false
		}
		st := gpuState{gpu: strconv.Itoa(g.label.Index), uuid: g.label.UUID, wanted: w}
		read = read || w
		if w {
			st.problem = s.read(g, g.agg, now)
			st.reading = st.problem == ""
		}
		states[strings.ToLower(g.label.UUID)] = st
		if s.cfg.mig {
			s.readMIG(g, now)
			read = read || len(g.mig) > 0 // its instances are read every interval
		}
	}
	s.state.Store(&states)
	s.publishSelf(gpus)
	s.findHolders(now)
	return read
}

// wanted is, per UUID, whether GPM should read the GPU now: always in GPM mode (or without PM
// sampling), never with ModeOff, else while PM sampling does not sample it (a state other than
// sampling; a GPU PM sampling does not know is left alone).
func (s *Source) wanted() func(uuid string) bool {
	switch {
	case s.cfg.mode == ModeOff:
		return func(string) bool { return false }
	case s.cfg.mode == ModeOnly || s.cfg.pmStatus == nil:
		return func(string) bool { return true }
	}
	st := map[string]pmdata.State{}
	for _, d := range s.cfg.pmStatus() {
		st[strings.ToLower(d.UUID)] = d.State
	}
	return func(uuid string) bool {
		state, ok := st[strings.ToLower(uuid)]
		return ok && state != pmdata.StateSampling
	}
}

// read takes a GPM sample of g and, with its previous one, adds a sample of the curated metrics
// to agg. It returns what failed, "" on success (the first sample of a pair has nothing to add).
// A tick that comes less than 90 % of the interval after the previous sample (the ticker
// catching up after a slow NVML call) is skipped: GPM refreshes every 100 ms, and a shorter
// pair reads 0 for work that ran (at 50 ms, every other pair of a busy H100 read 0).
func (s *Source) read(g *gpu, agg *aggregate.Aggregator, now time.Time) string {
	ns := uint64(now.UnixNano())
	if g.lastEnd > 0 && ns < g.lastEnd+uint64(s.cfg.interval)*9/10 {
		return ""
	}
	mg, sampled, asked := g.pair.Take(s.lib, g.dev, g.ids...)
	switch {
	case sampled != nvml.SUCCESS:
		return s.fail(g, agg, "sample", "nvmlGpmSampleGet: "+nvml.ErrorString(sampled), ns)
	case mg == nil:
		g.lastEnd, g.failing = ns, 0
		return ""
	case asked != nvml.SUCCESS:
		return s.fail(g, agg, "metrics", "nvmlGpmMetricsGet: "+nvml.ErrorString(asked), ns)
	}
	r := readingsOf(mg, g.ids)
	if !g.probed { // the metrics the GPU refuses at its first pair are not asked again
		g.probed = true
		g.ms = s.served(g.ms, r, "gpu", g.label.Index)
		g.ids = idsOf(g.ms)
		if len(g.ms) == 0 {
			return s.fail(g, agg, "metric", "the GPU serves none of the GPM metrics", ns)
		}
	}
	if stale(r) { // merged into the next pair
		g.pair.Stale()
		g.failures["no_refresh"]++
		return ""
	}
	start := g.lastEnd
	g.lastEnd, g.failing = ns, 0
	if start == 0 || start >= ns {
		return ""
	}
	b, bad := sampleOf(g.index, g.ms, r, start, ns, s.cfg.interval)
	for reason, detail := range bad {
		g.failures[reason]++
		s.log.Debug("GPM reading left out", "gpu", g.label.Index, "reason", reason, "detail", detail)
	}
	if len(b.Metrics) == 0 { // counted above, by reason: the pair is a gap
		agg.Add(pmdata.Batch{Device: g.index, Lost: []pmdata.Loss{{Reason: "error", Start: start, End: ns}}})
		return "no valid reading in the pair"
	}
	agg.Add(b)
	g.samples++
	return ""
}

// stale reports whether a pair saw no GPM refresh between its samples: NVML then reads 0 for
// every activity and NaN for the DRAM bandwidth (0 of 0). On an H100 sampled every 100 ms this
// happened to 3 of 120 pairs under a matmul, every one with DRAM_BW_UTIL NaN and every other
// metric 0 (run BR); taken as readings, such a pair puts a 0 into the window of a busy GPU.
func stale(r map[nvml.GpmMetricId]reading) bool {
	for _, x := range r {
		if x.ret == nvml.SUCCESS && math.IsNaN(x.value) {
			return true
		}
	}
	return false
}

// readingsOf maps each id of a request to NVML's answer.
func readingsOf(mg *nvml.GpmMetricsGetType, ids []nvml.GpmMetricId) map[nvml.GpmMetricId]reading {
	out := make(map[nvml.GpmMetricId]reading, len(ids))
	for i, id := range ids {
		out[id] = reading{nvml.Return(mg.Metrics[i].NvmlReturn), mg.Metrics[i].Value}
	}
	return out
}

type reading struct {
	ret   nvml.Return
	value float64
}

// served keeps the metrics of ms whose every GPM metric r answered, logging the others once.
func (s *Source) served(ms []resolved, r map[nvml.GpmMetricId]reading, what string, which int) []resolved {
	var keep []resolved
	for _, m := range ms {
		ok := true
		for _, id := range m.ids {
			if ret := r[id].ret; ret != nvml.SUCCESS {
				s.log.Info("GPM metric not served here: its curated family is left out", what, which, "family", m.family, "direction", m.direction, "gpm_metric", int(id), "err", nvml.ErrorString(ret))
				ok = false
			}
		}
		if ok {
			keep = append(keep, m)
		}
	}
	return keep
}

// sampleOf is one pair's readings as a PM-like sample of device dev over [start, end] ns:
// the metrics of ms with a valid reading. A metric NVML failed, or read NaN or out of range,
// is left out of this sample alone (a gap in its window, bytes not counted), by reason.
func sampleOf(dev int, ms []resolved, r map[nvml.GpmMetricId]reading, start, end uint64, interval time.Duration) (pmdata.Batch, map[string]string) {
	span := float64(end-start) / 1e9
	b := pmdata.Batch{Device: dev, Interval: interval}
	smp := pmdata.Sample{Start: start, End: end}
	var bad map[string]string
	for _, m := range ms {
		sum, failed := 0.0, nvml.SUCCESS
		for _, id := range m.ids {
			x := r[id]
			if x.ret != nvml.SUCCESS {
				failed = x.ret
			}
			sum += x.value
		}
		reason, detail := "", ""
		v, ok := m.value(sum, span)
		switch {
		case failed != nvml.SUCCESS:
			reason, detail = "metric", m.family+": "+nvml.ErrorString(failed)
		case !ok:
			reason, detail = "invalid", fmt.Sprintf("%s %s: %g", m.family, m.direction, sum)
		}
		if reason != "" {
			if bad == nil {
				bad = map[string]string{}
			}
			bad[reason] = detail
			continue
		}
		b.Metrics = append(b.Metrics, m.perfworks)
		smp.Values = append(smp.Values, v)
	}
	if len(b.Metrics) > 0 {
		b.Samples = []pmdata.Sample{smp}
	}
	return b, bad
}

// fail counts a failed read of g by reason and moves its window on (the time is a gap: its
// gauges go absent once the window holds no reading, never 0).
func (s *Source) fail(g *gpu, agg *aggregate.Aggregator, reason, detail string, ns uint64) string {
	g.failures[reason]++
	g.failing++
	if g.failing == 1 {
		s.log.Warn("GPM read failed", "gpu", g.label.Index, "reason", reason, "err", detail)
	}
	if g.lastEnd > 0 && g.lastEnd < ns {
		agg.Add(pmdata.Batch{Device: g.index, Lost: []pmdata.Loss{{Reason: "error", Start: g.lastEnd, End: ns}}})
	}
	g.lastEnd = ns
	if reason == "sample" && g.failing >= 3 && s.cfg.now().Sub(g.lookup) > lookupEvery {
		g.lookup = s.cfg.now()
		if dev, ret := s.lib.DeviceGetHandleByUUID(g.label.UUID); ret == nvml.SUCCESS {
			g.dev = dev // a reset GPU may come back under a new handle
		}
	}
	return detail
}

// free releases the GPM samples.
func (s *Source) free() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.gpus {
		g.pair.Free()
		for _, in := range g.mig {
			in.pair.Free()
		}
	}
}
