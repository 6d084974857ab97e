package gpmsource

import (
	"bufio"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// trace is GPM as a real GPU read it: per metric id, the value of each 100 ms pair, and the
// return of the ids the GPU refused (testdata/h100_gpm.tsv, from gpmprobe on an H100: see the
// file's header).
type trace struct {
	step    time.Duration
	values  map[nvml.GpmMetricId][]float64
	refused map[nvml.GpmMetricId]nvml.Return
	n       int
}

// loadTrace reads a trace file: "# step_ms N", then "id ret v1 v2 ..." lines.
func loadTrace(t testing.TB, path string) *trace {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := &trace{step: 100 * time.Millisecond, values: map[nvml.GpmMetricId][]float64{}, refused: map[nvml.GpmMetricId]nvml.Return{}}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if ms, ok := strings.CutPrefix(line, "# step_ms "); ok {
			n, _ := strconv.Atoi(ms)
			tr.step = time.Duration(n) * time.Millisecond
		}
		if line == "" || line[0] == '#' {
			continue
		}
		p := strings.Fields(line)
		id, _ := strconv.Atoi(p[0])
		ret, _ := strconv.Atoi(p[1])
		if ret != 0 {
			tr.refused[nvml.GpmMetricId(id)] = nvml.Return(ret)
			continue
		}
		for _, x := range p[2:] {
			v, err := strconv.ParseFloat(x, 64)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			tr.values[nvml.GpmMetricId(id)] = append(tr.values[nvml.GpmMetricId(id)], v)
		}
		tr.n = max(tr.n, len(p)-2)
	}
	return tr
}

// mean is the time-weighted mean of id's readings between a and b (offsets from the trace's
// start, looping), as the hardware's counters integrate them; NaN when a pair of the span
// read NaN, as NVML answers for that pair.
func (tr *trace) mean(id nvml.GpmMetricId, a, b time.Duration) float64 {
	vs := tr.values[id]
	if len(vs) == 0 || b <= a {
		return math.NaN()
	}
	var sum float64
	for t := a; t < b; {
		i := int(t/tr.step) % len(vs)
		next := min((t/tr.step+1)*tr.step, b)
		sum += vs[i] * float64(next-t)
		t = next
	}
	return sum / float64(b-a)
}

// fakeNVML is go-nvml's mock of a DGX H100 whose GPM replays tr as the real one behaved (run
// BR): GPM refreshes its counters every 100 ms, so a sample holds them as of the last refresh
// before it was taken; NVML answers a metric between two samples with the trace's mean between
// their refreshes, and for a pair whose samples saw the same refresh 0 for every activity and
// NaN for the DRAM bandwidth (at 50 ms every other pair read so on the busy H100, at 100 ms 3
// of 120); it refuses what the real GPU refused, and fails a pair whose samples are out of
// order or of two GPUs.
type fakeNVML struct {
	*server.Server
	tr    *trace
	clock *fakeClock

	mu      sync.Mutex
	taken   map[nvml.GpmSample]sampleAt
	allocs  int
	frees   int
	fail    map[int]nvml.Return // GPU index -> what its GpmSampleGet returns
	scale   map[int]float64     // GPU index -> factor on its readings (tell GPUs apart)
	migGIs  map[int][]int       // GPU index -> its GPU instances (MIG mode)
	procs   map[int][]uint32    // GPU index -> compute processes
	queries int
	asked   map[nvml.GpmMetricId]int // metrics calls that asked for each id
	takes   map[int]int              // GPU index -> GPM samples taken of the whole GPU
}

type sampleAt struct {
	gpu, gi int // gi -1: the whole GPU
	at      time.Duration
}

type fakeClock struct {
	mu  sync.Mutex
	t0  time.Time
	now time.Duration
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t0.Add(c.now)
}

func (c *fakeClock) offset() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now += d
	c.mu.Unlock()
}

func newFakeNVML(t testing.TB, tr *trace, gpus int) *fakeNVML {
	srv := dgxh100.New()
	srv.Devices = srv.Devices[:gpus]
	f := &fakeNVML{Server: srv, tr: tr, clock: &fakeClock{t0: time.Unix(1_800_000_000, 0)},
		taken: map[nvml.GpmSample]sampleAt{}, fail: map[int]nvml.Return{}, scale: map[int]float64{},
		migGIs: map[int][]int{}, procs: map[int][]uint32{}, asked: map[nvml.GpmMetricId]int{}, takes: map[int]int{}}
	srv.DeviceGetCountFunc = func() (int, nvml.Return) { return len(srv.Devices), nvml.SUCCESS }
	srv.GpmSampleAllocFunc = func() (nvml.GpmSample, nvml.Return) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.allocs++
		s := &mock.GpmSample{}
		s.FreeFunc = func() nvml.Return {
			f.mu.Lock()
			f.frees++
			f.mu.Unlock()
			return nvml.SUCCESS
		}
		return s, nvml.SUCCESS
	}
	srv.GpmMetricsGetFunc = f.metrics
	for i, d := range srv.Devices {
		dev := d.(*server.Device)
		dev.GpmQueryDeviceSupportFunc = func() (nvml.GpmSupport, nvml.Return) {
			f.mu.Lock()
			f.queries++
			f.mu.Unlock()
			return nvml.GpmSupport{Version: 1, IsSupportedDevice: 1}, nvml.SUCCESS
		}
		dev.GpmSampleGetFunc = func(s nvml.GpmSample) nvml.Return { return f.take(s, i, -1) }
		dev.GpmMigSampleGetFunc = func(gi int, s nvml.GpmSample) nvml.Return { return f.take(s, i, gi) }
		dev.GetNvLinkStateFunc = func(int) (nvml.EnableState, nvml.Return) { return nvml.FEATURE_DISABLED, nvml.SUCCESS }
		dev.GetArchitectureFunc = func() (nvml.DeviceArchitecture, nvml.Return) { return nvml.DEVICE_ARCH_HOPPER, nvml.SUCCESS }
		dev.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
			f.mu.Lock()
			defer f.mu.Unlock()
			var out []nvml.ProcessInfo
			for _, p := range f.procs[i] {
				out = append(out, nvml.ProcessInfo{Pid: p})
			}
			return out, nvml.SUCCESS
		}
		dev.GetMigModeFunc = func() (int, int, nvml.Return) {
			f.mu.Lock()
			defer f.mu.Unlock()
			if len(f.migGIs[i]) > 0 {
				return nvml.DEVICE_MIG_ENABLE, nvml.DEVICE_MIG_ENABLE, nvml.SUCCESS
			}
			return nvml.DEVICE_MIG_DISABLE, nvml.DEVICE_MIG_DISABLE, nvml.SUCCESS
		}
		dev.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 7, nvml.SUCCESS }
		dev.GetMigDeviceHandleByIndexFunc = func(n int) (nvml.Device, nvml.Return) {
			f.mu.Lock()
			defer f.mu.Unlock()
			gis := f.migGIs[i]
			if n >= len(gis) {
				return nil, nvml.ERROR_NOT_FOUND
			}
			gi := gis[n]
			return &mock.Device{
				GetGpuInstanceIdFunc: func() (int, nvml.Return) { return gi, nvml.SUCCESS },
				GetNameFunc:          func() (string, nvml.Return) { return "NVIDIA H100 80GB HBM3 MIG 1g.10gb", nvml.SUCCESS },
			}, nvml.SUCCESS
		}
	}
	return f
}

func (f *fakeNVML) take(s nvml.GpmSample, gpu, gi int) nvml.Return {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.fail[gpu]; ok {
		return r
	}
	f.taken[s] = sampleAt{gpu: gpu, gi: gi, at: f.clock.offset()}
	if gi < 0 {
		f.takes[gpu]++
	}
	return nvml.SUCCESS
}

// metrics answers like nvmlGpmMetricsGet: per metric, its return and the trace's mean over the
// span between the two samples (a MIG instance reads half of its GPU's work).
func (f *fakeNVML) metrics(m *nvml.GpmMetricsGetType) nvml.Return {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, okA := f.taken[m.Sample1]
	b, okB := f.taken[m.Sample2]
	if !okA || !okB || a.gpu != b.gpu || a.gi != b.gi || a.at >= b.at {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	scale := 1.0
	if s, ok := f.scale[a.gpu]; ok {
		scale = s
	}
	ra, rb := a.at.Truncate(refresh), b.at.Truncate(refresh)
	if a.gi >= 0 {
		scale /= 2
	}
	for i := range m.NumMetrics {
		x := &m.Metrics[i]
		id := nvml.GpmMetricId(x.MetricId)
		f.asked[id]++
		if r, ok := f.tr.refused[id]; ok {
			x.NvmlReturn = uint32(r)
			continue
		}
		if _, ok := f.tr.values[id]; !ok {
			x.NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
			continue
		}
		x.NvmlReturn = uint32(nvml.SUCCESS)
		switch {
		case rb > ra:
			x.Value = f.tr.mean(id, ra, rb) * scale
		case id == nvml.GPM_METRIC_DRAM_BW_UTIL:
			x.Value = math.NaN() // bytes moved over peak bytes in no time
		default:
			x.Value = 0
		}
	}
	return nvml.SUCCESS
}

// refresh is how often GPM updates the counters a sample reads (NVML's documentation; run BR).
const refresh = 100 * time.Millisecond
