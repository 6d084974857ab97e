package pmsample

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/cupti-exporter/cupti-exporter/pmsample/catalog"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"

	"github.com/cupti-exporter/cupti-exporter/internal/cupti"
	"github.com/cupti-exporter/cupti-exporter/mapping"
)

// Sampler is the CUPTI PM Sampling source: one goroutine per device, locked to its OS thread,
// owning that device's session. It implements Source.
type Sampler struct {
	cfg     config
	logger  *slog.Logger
	runners []*runner
	catalog []pmdata.CatalogEntry
	plan    catalog.PlanResult
	running sync.Mutex // held while Run runs

	changeMu sync.Mutex
	onChange []func()      // OnStateChange's listeners
	changed  chan struct{} // closed at the next change of a device's state (changeSignal); nil until asked for
}

var _ pmdata.Source = (*Sampler)(nil)

// New prepares sampling on every visible (or chosen) device: checks support, reads the chip,
// plans the metrics into single-pass groups and builds their config images. Devices that
// cannot sample are kept with state error, so Status reports them. m supplies the curated
// default metrics.
func New(lib *cupti.Lib, m *mapping.Mapper, logger *slog.Logger, opts ...Option) (*Sampler, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	logger = logger.With("source", "pmsample")
	infos, err := lib.Devices()
	if err != nil {
		return nil, fmt.Errorf("listing cuda devices: %w", err)
	}
	s := &Sampler{cfg: cfg, logger: logger}
	plans := map[string]catalog.PlanResult{} // by chip
	for _, info := range infos {
		if cfg.devices != nil && !containsInt(cfg.devices, info.Index) {
			continue
		}
		dev := pmdata.Device{Index: info.Index, UUID: info.UUID, Model: info.Name, PCIBusID: info.PCIBusID}
		pm, groups, err := s.prepare(lib, m, &dev, plans)
		var pe planError
		if errors.As(err, &pe) {
			s.Close()
			return nil, err
		}
		r := newRunner(s, dev, pm, groups)
		if err != nil {
			logger.Warn("device cannot pm sample", "gpu", dev.Index, "err", err)
			r.setState(pmdata.StateError, err.Error())
			r.fixed = true
		}
		s.runners = append(s.runners, r)
	}
	if len(s.runners) == 0 {
		return nil, errors.New("starting pm sampling: no cuda device selected")
	}
	return s, nil
}

// prepare opens the host object of one device and plans its metrics (once per chip).
func (s *Sampler) prepare(lib *cupti.Lib, m *mapping.Mapper, dev *pmdata.Device, plans map[string]catalog.PlanResult) (pmDevice, []catalog.Group, error) {
	if err := lib.PMSamplingSupported(dev.Index); err != nil {
		return nil, nil, fmt.Errorf("checking pm sampling support: %w", err)
	}
	chip, err := lib.ChipName(dev.Index)
	if err != nil {
		return nil, nil, fmt.Errorf("reading chip name: %w", err)
	}
	dev.Chip = chip
	var avail []byte
	switch {
	case s.cfg.countersInUse:
		err = errors.New("a profiler was found on the host: not read until its counters are taken back")
	case skipAvailability:
		err = errors.New("skipped by a test")
	default:
		avail, err = lib.CounterAvailability(dev.Index)
	}
	if err != nil {
		s.logger.Info("counter availability unknown; planning from the chip name", "gpu", dev.Index, "err", err)
		avail = nil
	}
	host, err := lib.NewHost(chip, avail)
	if err != nil {
		return nil, nil, fmt.Errorf("opening profiler host for %s: %w", chip, err)
	}
	hc := catalog.NewHost(lib, host)
	plan, ok := plans[chip]
	if !ok {
		if plan, err = s.planFor(hc, chip, m); err != nil {
			host.Close()
			return nil, nil, planError{fmt.Errorf("planning pm sampling metrics for %s: %w", chip, err)}
		}
		plans[chip] = plan
		if s.catalog == nil {
			s.plan = plan
		}
		// Every chip's metrics: chips resolve the curated metrics to different names.
		for _, name := range plan.Metrics() {
			if slices.ContainsFunc(s.catalog, func(e pmdata.CatalogEntry) bool { return e.Name == name }) {
				continue
			}
			p, err := hc.Properties(name)
			if err != nil {
				s.logger.Warn("metric properties unknown", "metric", name, "err", err)
			}
			s.catalog = append(s.catalog, pmdata.CatalogEntry{Name: name, Properties: p})
		}
	}
	if s.cfg.metricSet != "" {
		// Planning above checked the set's name; CUPTI 13.2 also wants it when the host object
		// that builds the session's config image is initialised.
		setHost, err := lib.NewHostForSet(chip, s.cfg.metricSet, avail)
		host.Close()
		if err != nil {
			return nil, nil, fmt.Errorf("opening profiler host for %s, single-pass set %s: %w", chip, s.cfg.metricSet, err)
		}
		host = setHost
	}
	groups := plan.Groups
	if s.cfg.multiplex == 0 {
		groups = groups[:1]
	}
	pm, err := newCuptiDevice(lib, dev.Index, host, groups, s.cfg)
	if err != nil {
		host.Close()
		return nil, nil, err
	}
	pm.log = s.logger
	if avail == nil {
		pm.chip, pm.needAvail = chip, true
		pm.replan = func(h catalog.MetricHost) (catalog.PlanResult, error) { return s.planFor(h, chip, m) }
	}
	return pm, groups, nil
}

// skipAvailability makes New plan without the counter availability image, as it must when
// another profiler holds the counters (tests only).
var skipAvailability bool

// planError is a planning failure: a configuration error, not a device problem.
type planError struct{ error }

func (e planError) Unwrap() error { return e.error }

func (s *Sampler) planFor(h catalog.MetricHost, chip string, m *mapping.Mapper) (catalog.PlanResult, error) {
	p, err := catalog.NewPlanner(h)
	if err != nil {
		return catalog.PlanResult{}, err
	}
	if s.cfg.metricSet != "" {
		return p.PlanSet(s.cfg.metricSet)
	}
	if len(s.cfg.metrics) > 0 {
		if err := catalog.OneCandidateEach(s.cfg.metrics, m.Curated()); err != nil {
			return catalog.PlanResult{}, err
		}
		return p.Plan(s.cfg.metrics, s.cfg.multiplex > 0, true)
	}
	plan, _, err := p.PlanDefaults(chip, m.Curated(), s.cfg.multiplex > 0)
	for _, r := range plan.Rejected {
		s.logger.Info("default metric left out", "chip", chip, "metric", r.Metric, "reason", r.Reason)
	}
	return plan, err
}

// DefaultMetrics lists the GH100 Perfworks names of the curated (DCGM-comparable) metrics in
// priority order; other chips resolve their own (Catalog.DefaultSet).
func DefaultMetrics(m *mapping.Mapper) []string {
	var out []string
	for _, c := range m.Curated() {
		out = append(out, c.Perfworks)
	}
	return out
}

// Devices lists the sampled devices.
func (s *Sampler) Devices() []pmdata.Device {
	out := make([]pmdata.Device, len(s.runners))
	for i, r := range s.runners {
		out[i] = r.dev
	}
	return out
}

// Catalog lists the planned metrics with their properties.
func (s *Sampler) Catalog() []pmdata.CatalogEntry { return s.catalog }

// Plan is the plan the sampler runs.
func (s *Sampler) Plan() catalog.PlanResult { return s.plan }

// Run samples every device until ctx ends, then stops and releases the counters. It returns
// nil after ctx ends (also when no device can sample: Status says why); it may run once at a time.
func (s *Sampler) Run(ctx context.Context, sink func(pmdata.Batch)) error {
	if !s.running.TryLock() {
		return errors.New("pm sampler: already running")
	}
	defer s.running.Unlock()
	var wg sync.WaitGroup
	for _, r := range s.runners {
		if r.fixed {
			continue
		}
		r.queue = newSinkQueue(sink)
		wg.Go(func() {
			r.run(ctx, r.observe(r.queue.put)) // observe: missed time after an idle release (release.go)
			r.queue.close()
		})
	}
	wg.Wait()
	<-ctx.Done() // devices that cannot sample keep reporting their state until the end
	return nil
}

// Close frees the host objects and config images. It waits for Run to return, so cancel
// Run's context first: freeing them under a running decode crashed CUPTI (SIGSEGV in
// cuptiPmSamplingDecodeData, seen on an H200 when the exporter stopped at 10 kHz).
func (s *Sampler) Close() {
	s.running.Lock()
	defer s.running.Unlock()
	for _, r := range s.runners {
		if r.pm != nil {
			r.pm.Close()
		}
	}
}

// OnStateChange calls f (which must not block) each time a device's state changes, so a
// reader of Status that acts on a change (GPM filling a gap) need not poll it.
func (s *Sampler) OnStateChange(f func()) {
	s.changeMu.Lock()
	defer s.changeMu.Unlock()
	s.onChange = append(s.onChange, f)
}

// stateChanged tells OnStateChange's listeners and wakes the waiters of changeSignal.
func (s *Sampler) stateChanged() {
	s.changeMu.Lock()
	fs := s.onChange
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
	s.changeMu.Unlock()
	for _, f := range fs {
		f()
	}
}

// changeSignal returns a channel that is closed at the next change of a device's state.
func (s *Sampler) changeSignal() <-chan struct{} {
	s.changeMu.Lock()
	defer s.changeMu.Unlock()
	if s.changed == nil {
		s.changed = make(chan struct{})
	}
	return s.changed
}

// Status reports every device's state.
func (s *Sampler) Status() []pmdata.DeviceStatus {
	out := make([]pmdata.DeviceStatus, len(s.runners))
	for i, r := range s.runners {
		out[i] = r.status()
	}
	return out
}

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}
