package idle

import (
	"context"
	"encoding/binary"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/cupti-exporter/cupti-exporter/activity"
	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
)

// fakeGPU is what one mocked NVML device answers; tests change it between steps.
type fakeGPU struct {
	util   atomic.Uint32
	events atomic.Uint64
	mu     sync.Mutex
	pids   []uint32
	broken atomic.Bool
	calls  atomic.Int64
	// GPM: hasGPM makes it supported; smWork counts the SM time worked, as the hardware
	// counters do, and a sample holds its value when taken (fakeGPMSamples).
	hasGPM  atomic.Bool
	smWork  atomic.Uint64
	samples *fakeGPMSamples
	// Instant power draw in milliwatts (FI_DEV_POWER_INSTANT), the reads of it, and whether
	// the GPU lacks the field.
	powerMW    atomic.Uint32
	powerReads atomic.Int64
	noPower    atomic.Bool
	utilReads  atomic.Int64 // nvmlDeviceGetUtilizationRates calls
}

// fakeGPMSamples is the mocked NVML's GPM: what each sample read when taken, and the
// allocations and frees.
type fakeGPMSamples struct {
	mu            sync.Mutex
	taken         map[nvml.GpmSample]uint64
	allocs, frees int
}

func (s *fakeGPMSamples) alloc() (nvml.GpmSample, nvml.Return) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.allocs++
	smp := &mock.GpmSample{}
	smp.FreeFunc = func() nvml.Return {
		s.mu.Lock()
		s.frees++
		s.mu.Unlock()
		return nvml.SUCCESS
	}
	return smp, nvml.SUCCESS
}

// metrics answers SM utilisation 50 % when the GPU worked between the two samples, else 0.
func (s *fakeGPMSamples) metrics(m *nvml.GpmMetricsGetType) nvml.Return {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, okA := s.taken[m.Sample1]
	b, okB := s.taken[m.Sample2]
	if !okA || !okB || m.NumMetrics != 1 || nvml.GpmMetricId(m.Metrics[0].MetricId) != nvml.GPM_METRIC_SM_UTIL {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	m.Metrics[0].NvmlReturn, m.Metrics[0].Value = uint32(nvml.SUCCESS), 0
	if b > a {
		m.Metrics[0].Value = 50
	}
	return nvml.SUCCESS
}

func (s *fakeGPMSamples) counts() (allocs, frees int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.allocs, s.frees
}

func (f *fakeGPU) device() *mock.Device {
	ret := func() nvml.Return {
		f.calls.Add(1)
		if f.broken.Load() {
			return nvml.ERROR_GPU_IS_LOST
		}
		return nvml.SUCCESS
	}
	return &mock.Device{
		GetUtilizationRatesFunc: func() (nvml.Utilization, nvml.Return) {
			f.utilReads.Add(1)
			return nvml.Utilization{Gpu: f.util.Load()}, ret()
		},
		GetCurrentClocksEventReasonsFunc: func() (uint64, nvml.Return) { return f.events.Load(), ret() },
		GetFieldValuesFunc: func(v []nvml.FieldValue) nvml.Return {
			if r := ret(); r != nvml.SUCCESS {
				return r
			}
			f.powerReads.Add(1)
			if f.noPower.Load() || len(v) != 1 || v[0].FieldId != nvml.FI_DEV_POWER_INSTANT {
				v[0].NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
				return nvml.SUCCESS
			}
			v[0].ValueType = uint32(nvml.VALUE_TYPE_UNSIGNED_INT)
			binary.LittleEndian.PutUint32(v[0].Value[:], f.powerMW.Load())
			return nvml.SUCCESS
		},
		GpmQueryDeviceSupportFunc: func() (nvml.GpmSupport, nvml.Return) {
			return nvml.GpmSupport{IsSupportedDevice: uint32(b2u(f.hasGPM.Load()))}, nvml.SUCCESS
		},
		GpmSampleGetFunc: func(smp nvml.GpmSample) nvml.Return {
			if r := ret(); r != nvml.SUCCESS {
				return r
			}
			f.samples.mu.Lock()
			f.samples.taken[smp] = f.smWork.Load()
			f.samples.mu.Unlock()
			return nvml.SUCCESS
		},
		GetComputeRunningProcessesFunc: func() ([]nvml.ProcessInfo, nvml.Return) {
			f.mu.Lock()
			defer f.mu.Unlock()
			var out []nvml.ProcessInfo
			for _, p := range f.pids {
				out = append(out, nvml.ProcessInfo{Pid: p})
			}
			return out, ret()
		},
	}
}

// fakeNVML is a mocked NVML with one fakeGPU per UUID.
func fakeNVML(gpus map[string]*fakeGPU) *mock.Interface {
	samples := &fakeGPMSamples{taken: map[nvml.GpmSample]uint64{}}
	devs := map[string]*mock.Device{}
	for uuid, g := range gpus {
		g.samples = samples
		devs[uuid] = g.device()
	}
	return &mock.Interface{
		InitFunc:           func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc:       func() nvml.Return { return nvml.SUCCESS },
		GpmSampleAllocFunc: samples.alloc,
		GpmMetricsGetFunc:  samples.metrics,
		DeviceGetHandleByUUIDFunc: func(uuid string) (nvml.Device, nvml.Return) {
			if d, ok := devs[uuid]; ok {
				return d, nvml.SUCCESS
			}
			return nil, nvml.ERROR_NOT_FOUND
		},
	}
}

// fakeSampler records Release and Reacquire and answers states as pmsample does (a user
// pause wins).
type fakeSampler struct {
	mu       sync.Mutex
	devs     []pmdata.Device
	released map[int]bool
	paused   map[int]bool
	since    map[int]time.Time
	calls    []string
	looks    int // Status calls: one a step of the Controller
}

func newFakeSampler(n int) *fakeSampler {
	s := &fakeSampler{released: map[int]bool{}, paused: map[int]bool{}, since: map[int]time.Time{}}
	for i := range n {
		s.devs = append(s.devs, pmdata.Device{Index: i, UUID: uuidOf(i)})
	}
	return s
}

func uuidOf(i int) string { return "GPU-0000000" + string(rune('0'+i)) }

func (s *fakeSampler) Devices() []pmdata.Device { return s.devs }
func (s *fakeSampler) Status() []pmdata.DeviceStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.looks++
	var out []pmdata.DeviceStatus
	for _, d := range s.devs {
		st := pmdata.StateSampling
		switch {
		case s.paused[d.Index]:
			st = pmdata.StatePaused
		case s.released[d.Index]:
			st = pmdata.StateIdle
		}
		out = append(out, pmdata.DeviceStatus{Device: d.Index, State: st})
	}
	return out
}
func (s *fakeSampler) Release(d int, _ string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.released[d] = true
	s.calls = append(s.calls, "release")
}
func (s *fakeSampler) Reacquire(d int, since time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.released[d] = false
	s.since[d] = since
	s.calls = append(s.calls, "reacquire")
}
func (s *fakeSampler) steps() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.looks
}
func (s *fakeSampler) isReleased(d int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.released[d]
}

// rig drives a Controller step by step on a fake clock.
type rig struct {
	t   *testing.T
	c   *Controller
	s   *fakeSampler
	gpu []*fakeGPU
	now time.Time
}

func newRig(t *testing.T, n int, opts ...Option) *rig {
	r := &rig{t: t, s: newFakeSampler(n), now: time.Unix(1_800_000_000, 0)}
	gpus := map[string]*fakeGPU{}
	for i := range n {
		g := &fakeGPU{}
		g.events.Store(clockEventGPUIdle)
		g.powerMW.Store(80_000)
		r.gpu = append(r.gpu, g)
		gpus[uuidOf(i)] = g
	}
	opts = append([]Option{WithAfter(time.Second), WithPoll(20 * time.Millisecond), func(c *config) { c.now = func() time.Time { return r.now } }}, opts...)
	r.c = New(r.s, fakeNVML(gpus), nil, opts...)
	if ret := r.c.lib.Init(); ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	for _, d := range r.s.devs {
		h, _ := r.c.lib.DeviceGetHandleByUUID(d.UUID)
		r.c.gpus = append(r.c.gpus, &gpu{index: d.Index, h: h})
	}
	return r
}

// run advances the clock by d in poll steps.
func (r *rig) run(d time.Duration) {
	for end := r.now.Add(d); r.now.Before(end); {
		r.now = r.now.Add(r.c.cfg.poll)
		r.c.step(r.now)
	}
}

// releaseAll runs until every GPU is released (or fails).
func (r *rig) releaseAll() {
	r.t.Helper()
	r.run(1300 * time.Millisecond)
	for i := range r.gpu {
		if !r.s.isReleased(i) {
			r.t.Fatalf("gpu %d not released after 1.3 s idle (after = 1 s)", i)
		}
	}
}

func TestIdleReleasesAfterDelay(t *testing.T) {
	r := newRig(t, 2)
	r.gpu[1].util.Store(30) // busy GPU
	r.run(900 * time.Millisecond)
	if r.s.isReleased(0) {
		t.Fatal("released before the delay")
	}
	r.run(400 * time.Millisecond)
	if !r.s.isReleased(0) {
		t.Fatal("idle GPU not released after the delay")
	}
	if r.s.isReleased(1) {
		t.Fatal("busy GPU released")
	}
}

// TestIdleBusyCountersReadNoUtilisation: while the counters see SM activity the check makes no
// NVML utilisation call (a cgo call wakes the Go runtime's monitor thread, issue 32 item 5);
// once they see none it reads NVML again, and a GPU that NVML sees busy is not released.
func TestIdleBusyCountersReadNoUtilisation(t *testing.T) {
	r := newRig(t, 1)
	r.gpu[0].util.Store(30)
	for range 100 { // 2 s of batches with SM active 50 %
		r.c.Add(smBatch(r.now, 50))
		r.run(r.c.cfg.poll)
	}
	if n := r.gpu[0].utilReads.Load(); n != 0 {
		t.Fatalf("%d utilisation reads while the counters saw the GPU busy, want 0", n)
	}
	r.run(2 * time.Second) // the counters quiet, NVML busy
	if n := r.gpu[0].utilReads.Load(); n < 3 {
		t.Fatalf("%d utilisation reads in 2 s of quiet counters, want one every check (500 ms)", n)
	}
	if r.s.isReleased(0) {
		t.Fatal("released a GPU that NVML sees busy")
	}
}

func TestIdleActivityResetsDelay(t *testing.T) {
	r := newRig(t, 1)
	r.run(800 * time.Millisecond)
	r.c.Records(nil, nil) // no process: nothing
	p := &record.Process{PID: 42}
	r.c.ProcessConnected(p, activity.ProcessInfo{GPUs: []string{"0"}})
	r.run(800 * time.Millisecond)
	if r.s.isReleased(0) {
		t.Fatal("released 0.8 s after a process connected (delay 1 s)")
	}
	// A PM batch with SM active above 0.1 % also resets it; one below does not.
	r.run(900 * time.Millisecond)
	r.c.Add(smBatch(r.now, 5))
	r.run(200 * time.Millisecond)
	if r.s.isReleased(0) {
		t.Fatal("released despite SM active 5 %")
	}
	r.c.Add(smBatch(r.now, 0.01))
	r.run(1100 * time.Millisecond)
	if !r.s.isReleased(0) {
		t.Fatal("not released with SM active 0.01 %")
	}
}

func smBatch(at time.Time, pct float64) pmdata.Batch {
	t0 := uint64(at.UnixNano())
	return pmdata.Batch{Device: 0, Metrics: []string{"dram__bytes_read.sum", "TPC.TriageCompute.sm__cycles_active.avg.pct_of_peak_sustained_elapsed"},
		Samples: []pmdata.Sample{{Start: t0, End: t0 + 1e6, Values: []float64{1e6, pct}}}}
}

func TestIdleReacquireOnNVMLSignals(t *testing.T) {
	for _, tc := range []struct {
		name  string
		wake  func(g *fakeGPU)
		polls int  // within this many polls (processes are listed every 100 ms: 5 polls)
		gpm   bool // the GPU has GPM
	}{
		{"gpu_idle bit clears", func(g *fakeGPU) { g.events.Store(0) }, 1, false},
		{"utilisation", func(g *fakeGPU) { g.util.Store(3) }, 1, false},
		{"new process", func(g *fakeGPU) { g.mu.Lock(); g.pids = append(g.pids, 4242); g.mu.Unlock() }, 5, false},
		// GPM sees the work between two polls while NVML's own signals still say idle.
		{"GPM SM utilisation", func(g *fakeGPU) { g.smWork.Add(1) }, 1, true},
		{"instant power 20 W up", func(g *fakeGPU) { g.powerMW.Store(100_000) }, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, 1)
			r.gpu[0].hasGPM.Store(tc.gpm)
			r.gpu[0].mu.Lock()
			r.gpu[0].pids = []uint32{100} // a process holding the GPU idle does not prevent release
			r.gpu[0].mu.Unlock()
			r.releaseAll()
			r.run(500 * time.Millisecond)
			if !r.s.isReleased(0) {
				t.Fatal("reacquired without activity")
			}
			quiet := r.now
			tc.wake(r.gpu[0])
			r.run(time.Duration(tc.polls) * r.c.cfg.poll)
			if r.s.isReleased(0) {
				t.Fatalf("not reacquired within %d polls", tc.polls)
			}
			if since := r.s.since[0]; since.After(quiet) || quiet.Sub(since) > time.Duration(tc.polls)*r.c.cfg.poll {
				t.Fatalf("since = %v, want the last quiet poll %v", since, quiet)
			}
		})
	}
}

func TestIdleReacquireOnKernelRecord(t *testing.T) {
	r := newRig(t, 2)
	p := &record.Process{PID: 7}
	// The process sees host GPU 1 as its CUDA device 0.
	r.c.ProcessConnected(p, activity.ProcessInfo{GPUs: []string{"1"}})
	r.releaseAll()
	// A record that ended before the release (flushed late) is not a sign.
	old := r.now.Add(-5 * time.Second)
	r.c.Records(p, []record.Record{{Kind: record.KindKernel, Device: 0, Start: uint64(old.UnixNano()), End: uint64(old.Add(time.Millisecond).UnixNano())}})
	r.run(100 * time.Millisecond)
	if !r.s.isReleased(1) {
		t.Fatal("a stale record reacquired")
	}
	start := r.now.Add(-5 * time.Millisecond)
	r.c.Records(p, []record.Record{{Kind: record.KindKernel, Device: 0, Start: uint64(start.UnixNano()), End: uint64(start.Add(time.Millisecond).UnixNano())}})
	r.c.step(r.now) // the listener pokes Run: one step, no poll wait
	if r.s.isReleased(1) {
		t.Fatal("kernel record did not reacquire gpu 1")
	}
	if !r.s.isReleased(0) {
		t.Fatal("a record of gpu 1 reacquired gpu 0")
	}
	if got := r.s.since[1]; !got.Equal(start) {
		t.Fatalf("since = %v, want the kernel start %v", got, start)
	}
	r.c.ProcessDisconnected(p)
}

// A launch hint (the injected library saw the process submit work after a quiet spell) wakes
// every GPU of the process at once, from the time of the call; a hint from before the release
// wakes nothing.
func TestIdleReacquireOnLaunch(t *testing.T) {
	r := newRig(t, 3)
	p := &record.Process{PID: 7}
	r.c.ProcessConnected(p, activity.ProcessInfo{GPUs: []string{"2", "0", "9"}}) // "9": not a GPU here
	r.releaseAll()
	r.c.Launched(p, uint64(r.now.Add(-5*time.Second).UnixNano()))
	r.c.step(r.now)
	if !r.s.isReleased(0) || !r.s.isReleased(2) {
		t.Fatal("a launch from before the release woke a GPU")
	}
	at := r.now.Add(-3 * time.Millisecond)
	r.c.Launched(p, uint64(at.UnixNano()))
	r.c.step(r.now) // the hint pokes Run: one step, no poll wait
	if r.s.isReleased(0) || r.s.isReleased(2) {
		t.Fatal("the launch did not wake the process's GPUs 0 and 2")
	}
	if !r.s.isReleased(1) {
		t.Fatal("the launch woke GPU 1, which the process does not use")
	}
	if !r.s.since[0].Equal(at) || !r.s.since[2].Equal(at) {
		t.Fatalf("since = %v / %v, want the call's time %v", r.s.since[0], r.s.since[2], at)
	}
	r.c.ProcessDisconnected(p)
}

func TestIdleUserPauseNotOverridden(t *testing.T) {
	r := newRig(t, 1)
	r.s.mu.Lock()
	r.s.paused[0] = true
	r.s.mu.Unlock()
	r.run(3 * time.Second)
	if r.s.calls != nil {
		t.Fatalf("calls on a paused device: %v", r.s.calls)
	}
}

func TestIdleNVMLLostReacquires(t *testing.T) {
	r := newRig(t, 1)
	r.releaseAll()
	r.gpu[0].broken.Store(true)
	r.run(4 * r.c.cfg.poll)
	if r.s.isReleased(0) {
		t.Fatal("a GPU NVML cannot read stayed released (blind)")
	}
	r.run(3 * time.Second)
	if r.s.isReleased(0) {
		t.Fatal("released while NVML cannot read utilisation")
	}
}

func TestIdleWithoutNVMLReleasesNothing(t *testing.T) {
	s := newFakeSampler(1)
	lib := &mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }}
	c := New(s, lib, nil, WithAfter(time.Millisecond))
	if err := c.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(s.calls) != 0 {
		t.Fatalf("calls without NVML: %v", s.calls)
	}
}

func b2u(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Without GPM (or with it turned off) SM work alone wakes nothing: the NVML signals decide.
// With it, the samples are allocated once per GPU and freed when Run ends.
func TestIdleGPMOffAndFreed(t *testing.T) {
	for _, tc := range []struct {
		name string
		has  bool
		opts []Option
	}{{"no GPM on the GPU", false, nil}, {"GPM turned off", true, []Option{WithGPM(false)}}} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, 1, tc.opts...)
			r.gpu[0].hasGPM.Store(tc.has)
			r.releaseAll()
			r.gpu[0].smWork.Add(1)
			r.run(200 * time.Millisecond)
			if !r.s.isReleased(0) {
				t.Fatal("woken by SM work that only GPM could see")
			}
		})
	}

	s := newFakeSampler(2)
	gpus := map[string]*fakeGPU{}
	for i := range 2 {
		g := &fakeGPU{}
		g.events.Store(clockEventGPUIdle)
		g.hasGPM.Store(true)
		gpus[uuidOf(i)] = g
	}
	lib := fakeNVML(gpus)
	c := New(s, lib, nil, WithAfter(30*time.Millisecond), WithPoll(5*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = c.Run(ctx); close(done) }()
	deadline := time.Now().Add(5 * time.Second)
	for !(s.isReleased(0) && s.isReleased(1)) {
		if time.Now().After(deadline) {
			t.Fatal("not released")
		}
		time.Sleep(time.Millisecond)
	}
	gpus[uuidOf(1)].smWork.Add(1)
	for s.isReleased(1) {
		if time.Now().After(deadline) {
			t.Fatal("GPU 1 not woken by GPM")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	allocs, frees := gpus[uuidOf(0)].samples.counts()
	if allocs != 4 || frees != 4 {
		t.Fatalf("GPM samples: %d allocated, %d freed; want 2 per GPU, all freed", allocs, frees)
	}
}

// The power signal measures the rise from the lowest reading since the release: a GPU that
// cools after the release wakes on a rise from where it settled, small swings wake nothing,
// and each release starts its own lowest reading.
func TestIdlePowerRiseFromLowest(t *testing.T) {
	r := newRig(t, 1)
	g := r.gpu[0]
	stays := func(mw uint32, why string) {
		t.Helper()
		g.powerMW.Store(mw)
		r.run(100 * time.Millisecond)
		if !r.s.isReleased(0) {
			t.Fatalf("woken at %d mW: %s", mw, why)
		}
	}
	r.releaseAll()
	stays(95_000, "15 W over the 80 W it was released at")
	stays(70_000, "it cooled")
	stays(89_000, "19 W over the 70 W it cooled to")
	g.powerMW.Store(90_000)
	r.run(r.c.cfg.poll)
	if r.s.isReleased(0) {
		t.Fatal("not woken 20 W over the lowest reading")
	}
	r.releaseAll() // released again at 90 W: the 70 W of the last release is forgotten
	stays(105_000, "15 W over this release's lowest")
	g.powerMW.Store(110_000)
	r.run(r.c.cfg.poll)
	if r.s.isReleased(0) {
		t.Fatal("not woken 20 W over this release's lowest")
	}
}

// With the power signal off nothing reads the field; on a GPU without it the other signals
// still wake it, and the missing field is not counted as an NVML failure.
func TestIdlePowerOffOrMissing(t *testing.T) {
	r := newRig(t, 1, WithPowerRise(0))
	r.releaseAll()
	r.gpu[0].powerMW.Store(500_000)
	r.run(200 * time.Millisecond)
	if !r.s.isReleased(0) || r.gpu[0].powerReads.Load() != 0 {
		t.Fatalf("power signal off: released %v, %d power reads", r.s.isReleased(0), r.gpu[0].powerReads.Load())
	}

	r = newRig(t, 1, WithCheck(time.Hour)) // no utilisation reads while sampling: only the watch's
	r.gpu[0].noPower.Store(true)
	r.releaseAll()
	r.run(time.Second)
	if !r.s.isReleased(0) {
		t.Fatal("a GPU without the power field was woken")
	}
	if n := r.gpu[0].powerReads.Load(); n != 1 {
		t.Fatalf("%d power reads on a GPU without the field, want 1 (then it is left alone)", n)
	}
	r.gpu[0].util.Store(5)
	r.run(r.c.cfg.poll)
	if r.s.isReleased(0) {
		t.Fatal("utilisation did not wake a GPU without the power field")
	}
}

// TestIdleRunCadence: while every GPU is sampled, Run looks every check interval, not every
// poll, and a sign of activity does not wake it (it only keeps the GPU from idling): polling
// at 20 ms cost the process about 50 wake-ups a second (issue 32 item 5). Once a GPU is
// released, Run polls every poll again and a sign wakes it at once.
func TestIdleRunCadence(t *testing.T) {
	s := newFakeSampler(1)
	g := &fakeGPU{}
	g.events.Store(clockEventGPUIdle)
	g.util.Store(50) // busy: never released while it stays so
	c := New(s, fakeNVML(map[string]*fakeGPU{uuidOf(0): g}), nil, WithAfter(20*time.Millisecond), WithPoll(time.Millisecond), WithCheck(100*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = c.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	p := &record.Process{}
	c.ProcessConnected(p, activity.ProcessInfo{GPUs: []string{"0"}})
	time.Sleep(50 * time.Millisecond)
	before := s.steps()
	for range 50 { // kernel records every 10 ms for 500 ms
		c.Records(p, []record.Record{{Kind: record.KindKernel, Device: 0, Start: uint64(time.Now().UnixNano()), End: uint64(time.Now().UnixNano())}})
		time.Sleep(10 * time.Millisecond)
	}
	// 500 ms at a 100 ms check: about 5 steps; at the 1 ms poll, or woken by each record, 50-500
	if n := s.steps() - before; n > 15 {
		t.Errorf("sampled GPU: want a step every check (about 5 in 500 ms), got %d", n)
	}
	g.util.Store(0)
	deadline := time.Now().Add(5 * time.Second)
	for !s.isReleased(0) {
		if time.Now().After(deadline) {
			t.Fatal("idle GPU not released")
		}
		time.Sleep(time.Millisecond)
	}
	before = s.steps()
	time.Sleep(200 * time.Millisecond)
	if n := s.steps() - before; n < 40 {
		t.Errorf("released GPU: want a step every poll (about 200 in 200 ms), got %d", n)
	}
}
