package health

import (
	"context"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/cupti-exporter/cupti-exporter/internal/tick"
	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// initRetry is how long a Source waits before trying NVML again after Init failed.
const initRetry = 30 * time.Second

// DeviceStatus is the state of the health source on one GPU (Device "" for the source
// as a whole, e.g. when NVML is missing).
type DeviceStatus struct {
	Device string // gpu label
	UUID   string
	Ready  bool
	Reason string // short code: no_nvml, no_gpu, gpu_lost, nvml_error
	Detail string // what happened and what to do
}

// Source reads every GPU's health from NVML on its own cadence. Snapshot and Status never
// call NVML and never block on it.
type Source struct {
	cfg   config
	lib   nvml.Interface
	log   *slog.Logger
	start time.Time

	mu     sync.Mutex // guards gpus, status, xids
	gpus   []*gpuState
	status []DeviceStatus
	xids   map[xidKey]*xidState

	info []string // driver, NVML and CUDA driver versions, set by init

	snap     atomic.Pointer[snapshot.Snapshot]
	migs     atomic.Pointer[map[migKey]string] // MIG UUID by GPU, profile and placement, from the last collection
	observer SnapshotObserver                  // told every collection's snapshot; set before Run
}

// migKey names a MIG device by its GPU (UUID, lower case) and its GPU instance's profile
// ID and placement start.
type migKey struct {
	gpu              string
	profileID, start int
}

// New returns a Source reading through lib (nvml.New() for the real library, a mock in
// tests). Nothing is read until Run.
func New(lib nvml.Interface, logger *slog.Logger, opts ...Option) *Source {
	cfg := newConfig(opts)
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Source{cfg: cfg, lib: lib, log: logger.With("source", "health"), start: cfg.now(), xids: map[xidKey]*xidState{}}
	s.status = []DeviceStatus{{Reason: "starting", Detail: "NVML not read yet"}}
	s.snap.Store(&snapshot.Snapshot{Time: s.start})
	return s
}

// Run initialises NVML, then reads every device each interval until ctx ends. Without
// NVML it reports why and retries every 30 s.
func (s *Source) Run(ctx context.Context) error {
	for {
		err := s.init()
		if err == nil {
			break
		}
		s.setWhole(err)
		s.log.Warn("NVML unavailable; health metrics are off", "err", err.Detail, "retry_in", initRetry)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(initRetry):
		}
	}
	defer s.lib.Shutdown()
	defer s.freeGPM() // before Shutdown
	if s.cfg.events {
		go s.watchXIDs(ctx)
	}
	t := tick.New(s.cfg.interval) // on the exporter's timetable (internal/tick)
	defer t.Stop()
	for {
		s.Collect()
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// init loads NVML and finds the devices.
func (s *Source) init() *DeviceStatus {
	if ret := s.lib.Init(); ret != nvml.SUCCESS {
		if ret == nvml.ERROR_LIBRARY_NOT_FOUND {
			return &DeviceStatus{Reason: "no_nvml", Detail: "NVML library (libnvidia-ml.so.1) not found: install the NVIDIA driver on the host, or mount it into the container (the NVIDIA container toolkit does)"}
		}
		return &DeviceStatus{Reason: "nvml_error", Detail: "nvmlInit: " + nvml.ErrorString(ret)}
	}
	n, ret := s.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		s.lib.Shutdown()
		return &DeviceStatus{Reason: "nvml_error", Detail: "nvmlDeviceGetCount: " + nvml.ErrorString(ret)}
	}
	if n == 0 {
		s.lib.Shutdown()
		return &DeviceStatus{Reason: "no_gpu", Detail: "NVML sees no GPU: check the driver (nvidia-smi) and that the container was given the devices"}
	}
	driver, _ := s.lib.SystemGetDriverVersion()
	nvmlVer, _ := s.lib.SystemGetNVMLVersion()
	cudaVer, _ := s.lib.SystemGetCudaDriverVersion()
	s.info = []string{driver, nvmlVer, strconv.Itoa(cudaVer)}
	gpus := make([]*gpuState, 0, n)
	for i := range n {
		g := &gpuState{index: i, unsupported: map[string]bool{}, errs: map[string]uint64{}, log: s.log, slowEvery: slowEvery(s.cfg.interval)}
		if dev, ret := s.lib.DeviceGetHandleByIndex(i); ret == nvml.SUCCESS {
			g.identify(dev, s.cfg.gpuResolver)
		} else {
			g.lose(ret)
		}
		gpus = append(gpus, g)
	}
	s.mu.Lock()
	s.gpus = gpus
	s.mu.Unlock()
	s.log.Info("reading GPU health from NVML", "gpus", n, "interval", s.cfg.interval)
	return nil
}

func (s *Source) setWhole(st *DeviceStatus) {
	s.mu.Lock()
	s.status = []DeviceStatus{*st}
	s.mu.Unlock()
}

// Collect reads every device once and publishes a new snapshot. Run calls it every
// interval; tests call it directly.
func (s *Source) Collect() {
	t0 := time.Now()
	s.mu.Lock()
	gpus := slices.Clone(s.gpus)
	s.mu.Unlock()
	b := newBuilder(s.start)
	if s.info != nil {
		b.add(infoDesc, 1, s.info...)
	}
	status := make([]DeviceStatus, 0, len(gpus))
	for _, g := range gpus {
		if g.lost {
			s.reacquire(g)
		}
		if !g.lost {
			procs := g.collect(b, s.cfg.podResolver, s.cfg.procRoot)
			if s.cfg.onProcesses != nil && !g.lost && procs != nil {
				g.observeProcesses(procs, s.cfg.now(), s.cfg.interval, s.cfg.onProcesses)
			}
		}
		if !g.lost && s.cfg.gpm {
			g.collectGPM(s.lib, b)
		}
		st := DeviceStatus{Device: g.gpu, UUID: g.uuid, Ready: !g.lost}
		if g.lost {
			st.Reason, st.Detail = "gpu_lost", g.lostReason
		}
		status = append(status, st)
	}
	s.mu.Lock()
	s.xidFamilies(b)
	for _, g := range gpus {
		for field, n := range g.errs {
			b.add(errorsDesc, float64(n), g.gpu, field)
		}
	}
	s.status = status
	s.mu.Unlock()
	migs := map[migKey]string{}
	for _, g := range gpus {
		if g.lost {
			continue
		}
		for uuid, p := range g.migs {
			migs[migKey{strings.ToLower(g.uuid), p.profileID, p.start}] = uuid
		}
	}
	s.migs.Store(&migs)
	b.add(collectDesc, time.Since(t0).Seconds())
	snap := b.snapshot(s.cfg.now())
	s.snap.Store(snap)
	if s.observer != nil {
		s.observer.Observe(snap)
	}
}

// ObserveWith has every snapshot the source makes told to o (the View serving it); call it
// before Run.
func (s *Source) ObserveWith(o SnapshotObserver) { s.observer = o }

// MIGDeviceUUID returns the UUID of the MIG device whose GPU instance has profile
// giProfileID and starts at placementStart on the GPU gpuUUID, as the last collection found
// it (ok false: no such MIG device, MIG off, or not collected yet). It never calls NVML.
func (s *Source) MIGDeviceUUID(gpuUUID string, giProfileID, placementStart int) (string, bool) {
	m := s.migs.Load()
	if m == nil {
		return "", false
	}
	uuid, ok := (*m)[migKey{strings.ToLower(gpuUUID), giProfileID, placementStart}]
	return uuid, ok
}

// freeGPM releases the GPM samples of every GPU.
func (s *Source) freeGPM() {
	s.mu.Lock()
	gpus := slices.Clone(s.gpus)
	s.mu.Unlock()
	for _, g := range gpus {
		g.freeGPM()
	}
}

// reacquire looks a lost GPU up again by UUID (or index): it comes back after a reset or
// a re-attach.
func (s *Source) reacquire(g *gpuState) {
	var dev nvml.Device
	ret := nvml.ERROR_NOT_FOUND
	if g.uuid != "" {
		dev, ret = s.lib.DeviceGetHandleByUUID(g.uuid)
	}
	if ret != nvml.SUCCESS {
		dev, ret = s.lib.DeviceGetHandleByIndex(g.index)
	}
	if ret != nvml.SUCCESS {
		return
	}
	if _, r := dev.GetUUID(); r != nvml.SUCCESS {
		return
	}
	g.identify(dev, s.cfg.gpuResolver)
	s.log.Info("GPU is back", "gpu", g.gpu, "uuid", g.uuid)
}

// Snapshot returns the families of the last collection.
func (s *Source) Snapshot() *snapshot.Snapshot { return s.snap.Load() }

// Status returns the state per device, or one entry for the whole source when NVML is
// unavailable.
func (s *Source) Status() []DeviceStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.status)
}

// gpuLabel is the gpu label of a device: the PM-sampling label of its UUID when known,
// else NVML's index.
func gpuLabel(uuid string, index int, resolve func(string) (string, bool)) string {
	if resolve != nil && uuid != "" {
		if gpu, ok := resolve(uuid); ok {
			return gpu
		}
	}
	return strconv.Itoa(index)
}
