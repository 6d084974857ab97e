package gpmsource

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/cupti-exporter/cupti-exporter/mapping"
	"github.com/cupti-exporter/cupti-exporter/pmsample/aggregate"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

const traceFile = "testdata/h100_gpm.tsv"

// pmSide is PM sampling as Fill sees it: a real pmsample aggregator of the curated metrics,
// fed by the test, and the per-GPU states the test sets.
type pmSide struct {
	agg     *aggregate.Aggregator
	devices []pmdata.Device
	mu      sync.Mutex
	state   map[int]pmdata.State
}

func (p *pmSide) status() []pmdata.DeviceStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []pmdata.DeviceStatus
	for _, d := range p.devices {
		out = append(out, pmdata.DeviceStatus{Device: d.Index, UUID: d.UUID, State: p.state[d.Index]})
	}
	return out
}

func (p *pmSide) set(gpu int, st pmdata.State) {
	p.mu.Lock()
	p.state[gpu] = st
	p.mu.Unlock()
}

// newPMSide samples every GPU of f with PM sampling: sm active 50 % and 1 MB read over PCIe
// per 100 ms, one sample per 100 ms from the clock's start for dur.
func newPMSide(t *testing.T, f *fakeNVML, m *mapping.Mapper, dur time.Duration) *pmSide {
	t.Helper()
	p := &pmSide{state: map[int]pmdata.State{}}
	for i, d := range f.Devices {
		uuid, _ := d.GetUUID()
		p.devices = append(p.devices, pmdata.Device{Index: i, UUID: uuid, Model: "NVIDIA H100 80GB HBM3", Chip: "GH100", PCIBusID: fmt.Sprintf("0000:%02x:00.0", i+1)})
		p.state[i] = pmdata.StateSampling
	}
	sm := "TPC.TriageCompute.sm__cycles_active.avg.pct_of_peak_sustained_elapsed"
	rx := "PCI.TriageCompute.pcie__read_bytes.sum"
	cat := []pmdata.CatalogEntry{
		{Name: sm, Properties: pmdata.Properties{Type: pmdata.TypeCounter, HWUnit: "sm", DimUnit: "gpc_cycle"}},
		{Name: rx, Properties: pmdata.Properties{Type: pmdata.TypeCounter, HWUnit: "pcie", DimUnit: "byte"}},
	}
	p.agg = aggregate.New(m, p.devices, cat, nil, aggregate.WithClock(f.clock.Now))
	t0 := uint64(f.clock.t0.UnixNano())
	for _, d := range p.devices {
		b := pmdata.Batch{Device: d.Index, Metrics: []string{sm, rx}}
		for at := time.Duration(0); at < dur; at += 100 * time.Millisecond {
			b.Samples = append(b.Samples, pmdata.Sample{Start: t0 + uint64(at), End: t0 + uint64(at+100*time.Millisecond), Values: []float64{50, 1e6}})
		}
		p.agg.Add(b)
	}
	return p
}

func newTestSource(t *testing.T, f *fakeNVML, m *mapping.Mapper, opts ...Option) *Source {
	t.Helper()
	s, err := New(f, m, nil, append([]Option{withClock(f.clock.Now)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	if msg := s.init(); msg != "" {
		t.Fatal(msg)
	}
	t.Cleanup(s.free)
	return s
}

// steps advances the clock one interval and collects, n times.
func steps(s *Source, f *fakeNVML, n int) {
	for range n {
		f.clock.advance(s.cfg.interval)
		s.Collect()
	}
}

// seriesOf lists the series of family name on the GPU with uuid: label maps with their value.
func seriesOf(snap *snapshot.Snapshot, name, uuid string) []map[string]string {
	var out []map[string]string
	for _, fam := range snap.Families {
		if fam.Desc.Name != name {
			continue
		}
		for _, smp := range fam.Samples {
			ls := map[string]string{}
			for i, n := range fam.Desc.LabelNames {
				ls[n] = smp.LabelValues[i]
			}
			if ls["uuid"] != uuid {
				continue
			}
			ls["value"] = fmt.Sprint(smp.Value)
			out = append(out, ls)
		}
	}
	return out
}

// seriesOfFamily are the series of fam on the GPU with uuid.
func seriesOfFamily(fam snapshot.Family, uuid string) []snapshot.Sample {
	ui := slices.Index(fam.Desc.LabelNames, "uuid")
	var out []snapshot.Sample
	for _, smp := range fam.Samples {
		if ui >= 0 && smp.LabelValues[ui] == uuid {
			out = append(out, smp)
		}
	}
	return out
}

// withLabel keeps the series whose label name has value v.
func withLabel(ss []map[string]string, name, v string) []map[string]string {
	return slices.DeleteFunc(ss, func(ls map[string]string) bool { return ls[name] != v })
}

func value(t *testing.T, ls map[string]string) float64 {
	t.Helper()
	var v float64
	if _, err := fmt.Sscan(ls["value"], &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// checkOneSource fails when a curated family has series of both sources, or two of one
// source, for one GPU and direction: sums and averages over GPUs would count it twice.
func checkOneSource(t *testing.T, s *Source, snap *snapshot.Snapshot) {
	t.Helper()
	for _, fam := range snap.Families {
		if !slices.Contains(fam.Desc.LabelNames, SourceLabel) || strings.HasPrefix(fam.Desc.Name, "cupti_mig_") {
			continue
		}
		seen := map[string]string{}
		for _, smp := range fam.Samples {
			key := strings.Join(smp.LabelValues[:len(smp.LabelValues)-1], ",")
			if src, dup := seen[key]; dup {
				t.Errorf("%s{%s}: served by %q and %q", fam.Desc.Name, key, src, smp.LabelValues[len(smp.LabelValues)-1])
			}
			seen[key] = smp.LabelValues[len(smp.LabelValues)-1]
		}
	}
}

// TestFillWhilePMCannot: a GPU whose PM sampling is busy gets its curated families from GPM,
// labelled source="gpm", with the window mean of what the GPU read; the GPU that samples keeps
// PM's; no GPU ever has both; when PM sampling samples again, PM's series are back; when
// neither reads, the counters are withheld and the gauges go absent once their window is
// empty, never 0.
func TestFillWhilePMCannot(t *testing.T) {
	tr := loadTrace(t, traceFile)
	f := newFakeNVML(t, tr, 2)
	m, _ := mapping.New()
	pm := newPMSide(t, f, m, 3*time.Second)
	s := newTestSource(t, f, m, WithPMDevices(func() []pmdata.Device { return pm.devices }), WithPMStatus(pm.status), WithWindow(10*time.Second))
	fill := s.Fill(pm.agg)
	u0, u1 := pm.devices[0].UUID, pm.devices[1].UUID

	pm.set(1, pmdata.StateBusy)
	steps(s, f, 50) // 5 s: GPU 1 read by GPM from the first tick
	snap := fill.Snapshot()
	checkOneSource(t, s, snap)
	sm0 := seriesOf(snap, "cupti_sm_active_ratio", u0)
	if len(sm0) != 1 || sm0[0][SourceLabel] != "" || value(t, sm0[0]) != 0.5 {
		t.Errorf("GPU 0 (sampling): want PM's sm active 0.5 without source, got %v", sm0)
	}
	sm1 := seriesOf(snap, "cupti_sm_active_ratio", u1)
	// GPM's first sample came at the first tick (0.1 s): its pairs cover 0.1-5.0 s.
	want := tr.mean(nvml.GPM_METRIC_SM_UTIL, 100*time.Millisecond, 5*time.Second) / 100
	if len(sm1) != 1 || sm1[0][SourceLabel] != GPMSource || math.Abs(value(t, sm1[0])-want) > 1e-9 {
		t.Errorf("GPU 1 (busy): want GPM's sm active %v labelled gpm, got %v", want, sm1)
	}
	rx1 := withLabel(seriesOf(snap, "cupti_pcie_bytes_total", u1), "direction", "rx")
	wantRx := tr.mean(nvml.GPM_METRIC_PCIE_RX_PER_SEC, 100*time.Millisecond, 5*time.Second) * mib * 4.9
	if len(rx1) != 1 || rx1[0][SourceLabel] != GPMSource || math.Abs(value(t, rx1[0])-wantRx) > 1e-6*wantRx+1 {
		t.Errorf("GPU 1 PCIe rx: want GPM's %v bytes, got %v", wantRx, rx1)
	}
	if rx0 := withLabel(seriesOf(snap, "cupti_pcie_bytes_total", u0), "direction", "rx"); len(rx0) != 1 || rx0[0][SourceLabel] != "" {
		t.Errorf("GPU 0 PCIe rx: want PM's alone, got %v", rx0)
	}
	for _, st := range fill.Status() {
		if st.UUID != u1 || !st.Ready || !strings.Contains(st.Reason, "PM sampling busy") {
			t.Errorf("status: want GPU 1 alone, ready, saying PM sampling is busy; got %+v", st)
		}
	}

	pm.set(1, pmdata.StateSampling) // PM sampling takes GPU 1 back
	steps(s, f, 1)
	snap = fill.Snapshot()
	checkOneSource(t, s, snap)
	if sm1 := seriesOf(snap, "cupti_sm_active_ratio", u1); len(sm1) != 1 || sm1[0][SourceLabel] != "" {
		t.Errorf("GPU 1 sampling again: want PM's series alone, got %v", sm1)
	}
	if len(fill.Status()) != 0 {
		t.Errorf("status while every GPU samples: want none, got %+v", fill.Status())
	}

	pm.set(1, pmdata.StateYielded) // given way to a profiler: GPM fills in as while busy
	steps(s, f, 10)
	snap = fill.Snapshot()
	checkOneSource(t, s, snap)
	if sm1 := seriesOf(snap, "cupti_sm_active_ratio", u1); len(sm1) != 1 || sm1[0][SourceLabel] != GPMSource {
		t.Errorf("GPU 1 yielded to a profiler: want GPM's series labelled gpm, got %v", sm1)
	}
	pm.set(1, pmdata.StateSampling)
	steps(s, f, 1)

	pm.set(1, pmdata.StatePaused) // paused, and GPM cannot read either
	f.mu.Lock()
	f.fail[1] = nvml.ERROR_GPU_IS_LOST
	f.mu.Unlock()
	steps(s, f, 1)
	snap = fill.Snapshot()
	checkOneSource(t, s, snap)
	if rx := seriesOf(snap, "cupti_pcie_bytes_total", u1); len(rx) != 0 {
		t.Errorf("GPU 1 read by neither: want no PCIe counter (a flat one reads as no traffic), got %v", rx)
	}
	steps(s, f, 110) // past the window
	snap = fill.Snapshot()
	for _, name := range []string{"cupti_sm_active_ratio", "cupti_sm_active_max_ratio", "cupti_tensor_pipe_active_ratio", "cupti_pcie_bytes_total"} {
		if got := seriesOf(snap, name, u1); len(got) != 0 {
			t.Errorf("GPU 1 read by neither for 11 s: want %s absent, got %v", name, got)
		}
	}
	if st := fill.Status(); len(st) != 1 || st[0].Ready || !strings.Contains(st[0].Reason, "gaps") {
		t.Errorf("status: want GPU 1 not ready, its series gaps; got %+v", st)
	}
	if got := withLabel(seriesOf(snap, "cupti_gpm_read_failures_total", u1), "reason", "sample"); len(got) != 1 || value(t, got[0]) != 111 {
		t.Errorf("failed reads: want 111 of reason sample, got %v", got)
	}
}

// TestOnlyMode: with no PM sampling every GPU's curated families come from GPM, those the GPU
// refused (NVLink without links) absent, with the sample count.
func TestOnlyMode(t *testing.T) {
	tr := loadTrace(t, traceFile)
	f := newFakeNVML(t, tr, 2)
	m, _ := mapping.New()
	s := newTestSource(t, f, m, WithMode(ModeOnly), WithWindow(10*time.Second))
	fill := s.Fill(nil)
	steps(s, f, 30)
	snap := fill.Snapshot()
	checkOneSource(t, s, snap)
	u0, _ := f.Devices[0].GetUUID()
	for _, x := range metrics {
		got := seriesOf(snap, x.family, u0)
		refused := slices.ContainsFunc(x.ids, func(id nvml.GpmMetricId) bool { return tr.refused[id] != 0 })
		if x.nvlink || refused {
			if len(got) != 0 {
				t.Errorf("%s: refused or no links, want absent, got %v", x.family, got)
			}
			continue
		}
		if x.direction != "" {
			got = withLabel(got, "direction", x.direction)
		}
		if len(got) != 1 || got[0][SourceLabel] != GPMSource || got[0]["gpu"] != "0" || got[0]["chip"] != "GH100" {
			t.Errorf("%s %s: want one series from GPM, gpu 0, chip GH100; got %v", x.family, x.direction, got)
			continue
		}
		w := 0.0
		for _, id := range x.ids {
			w += tr.mean(id, 100*time.Millisecond, 3*time.Second)
		}
		if x.mibps {
			w *= mib * 2.9
		} else {
			w /= 100
		}
		if v := value(t, got[0]); math.Abs(v-w) > 1e-9*max(1, w) {
			t.Errorf("%s %s = %v, want %v", x.family, x.direction, v, w)
		}
	}
	for _, name := range []string{"cupti_sm_occupancy_ratio", "cupti_fp16_pipe_active_ratio"} {
		if got := seriesOf(snap, name, u0); len(got) != 0 {
			t.Errorf("%s is another quantity in GPM (or unchecked): want it left out, got %v", name, got)
		}
	}
	if got := seriesOf(snap, "cupti_gpm_samples_total", u0); len(got) != 1 || value(t, got[0]) != 29 {
		t.Errorf("samples: want 29 pairs, got %v", got)
	}
	// The series of one GPU (docs/sizing.md "GPM mode"): six gauges with their window maximum,
	// PCIe in two directions, the sample count.
	n := 0
	for _, fam := range snap.Families {
		n += len(seriesOfFamily(fam, u0))
	}
	if n != 15 {
		t.Errorf("series of GPU 0 in GPM mode: %d, want 15", n)
	}
	if st := fill.Status(); len(st) != 2 || !st[0].Ready || !strings.Contains(st[0].Reason, "gpm.mode=only") {
		t.Errorf("status: want both GPUs ready in GPM mode, got %+v", st)
	}
}

// TestPMFamiliesOnly: in fill mode GPM fills only the families PM sampling's plan serves.
func TestPMFamiliesOnly(t *testing.T) {
	f := newFakeNVML(t, loadTrace(t, traceFile), 1)
	m, _ := mapping.New()
	pm := newPMSide(t, f, m, time.Second)
	pm.set(0, pmdata.StateError)
	s := newTestSource(t, f, m, WithPMDevices(func() []pmdata.Device { return pm.devices }), WithPMStatus(pm.status),
		WithPMFamilies(func(name string) bool { return strings.HasPrefix(name, "cupti_sm_active") }))
	steps(s, f, 5)
	snap := s.Fill(pm.agg).Snapshot()
	u0 := pm.devices[0].UUID
	if got := seriesOf(snap, "cupti_sm_active_ratio", u0); len(got) != 1 || got[0][SourceLabel] != GPMSource {
		t.Errorf("sm active: want GPM's, got %v", got)
	}
	if got := seriesOf(snap, "cupti_tensor_pipe_active_ratio", u0); len(got) != 0 {
		t.Errorf("tensor pipe, not in PM's plan: want absent, got %v", got)
	}
}

// TestStalePairs: GPM refreshes every 100 ms, and a pair whose samples saw the same refresh
// reads 0 for every activity and NaN for the DRAM bandwidth (the H100 did so for 3 of 120
// pairs under a matmul at 100 ms, and every other pair at 50 ms). Such a pair must not put a 0
// into the window of a busy GPU: it is merged into the next one, and counted.
func TestStalePairs(t *testing.T) {
	tr := loadTrace(t, traceFile)
	f := newFakeNVML(t, tr, 1)
	m, _ := mapping.New()
	s := newTestSource(t, f, m, WithMode(ModeOnly), WithWindow(time.Minute), WithWindowMin(true))
	f.clock.advance(3*time.Second + time.Millisecond) // the matmuls, just after a refresh
	s.Collect()
	for i := range 50 { // ticks 94 to 106 ms apart: some pairs fall within one refresh
		f.clock.advance(time.Duration(94+(i*7)%13) * time.Millisecond)
		s.Collect()
	}
	snap := s.Fill(nil).Snapshot()
	u0, _ := f.Devices[0].GetUUID()
	lo := seriesOf(snap, "cupti_sm_active_min_ratio", u0)
	if len(lo) != 1 || value(t, lo[0]) < 0.9 {
		t.Errorf("SM active minimum over the matmuls: want above 0.9 (no 0 of a stale pair), got %v", lo)
	}
	if got := withLabel(seriesOf(snap, "cupti_gpm_read_failures_total", u0), "reason", "no_refresh"); len(got) != 1 || value(t, got[0]) == 0 {
		t.Errorf("want the stale pairs counted as no_refresh, got %v", got)
	}
	if got := withLabel(seriesOf(snap, "cupti_gpm_read_failures_total", u0), "reason", "invalid"); len(got) != 0 {
		t.Errorf("a stale pair's NaN counted as an invalid reading: %v", got)
	}
}

// TestOutOfRange: a reading above what the hardware can produce is left out, counted.
func TestOutOfRange(t *testing.T) {
	tr := loadTrace(t, traceFile)
	f := newFakeNVML(t, tr, 1)
	f.scale[0] = 1e6
	f.clock.advance(3 * time.Second) // the matmuls: every reading is non-zero
	m, _ := mapping.New()
	s := newTestSource(t, f, m, WithMode(ModeOnly))
	steps(s, f, 10)
	snap := s.Fill(nil).Snapshot()
	u0, _ := f.Devices[0].GetUUID()
	if got := seriesOf(snap, "cupti_sm_active_ratio", u0); len(got) != 0 {
		t.Errorf("out-of-range readings served: %v", got)
	}
	if got := seriesOf(snap, "cupti_gpm_read_failures_total", u0); len(got) != 1 || got[0]["reason"] != "invalid" || value(t, got[0]) != 9 {
		t.Errorf("want 9 pairs counted invalid, got %v", got)
	}
}

// TestMIGInstances: a GPU in MIG mode also serves each GPU instance's metrics
// (nvmlGpmMigSampleGet) in the cupti_mig_* families, labelled with the instance and profile;
// the fake gives an instance half its GPU's readings.
func TestMIGInstances(t *testing.T) {
	tr := loadTrace(t, traceFile)
	f := newFakeNVML(t, tr, 2)
	f.migGIs[0] = []int{1, 2}
	m, _ := mapping.New()
	s := newTestSource(t, f, m, WithMode(ModeOnly))
	steps(s, f, 20)
	snap := s.Fill(nil).Snapshot()
	u0, _ := f.Devices[0].GetUUID()
	got := seriesOf(snap, "cupti_mig_sm_active_ratio", u0)
	if len(got) != 2 {
		t.Fatalf("want the two GPU instances of GPU 0, got %v", got)
	}
	want := tr.mean(nvml.GPM_METRIC_SM_UTIL, 100*time.Millisecond, 2*time.Second) / 200
	for i, ls := range got {
		if ls["gpu_instance_id"] != fmt.Sprint(i+1) || ls["profile"] != "1g.10gb" || ls[SourceLabel] != GPMSource || ls["gpu"] != "0" {
			t.Errorf("instance labels: %v", ls)
		}
		if v := value(t, ls); math.Abs(v-want) > 1e-9 {
			t.Errorf("instance %s sm active = %v, want %v", ls["gpu_instance_id"], v, want)
		}
	}
	u1, _ := f.Devices[1].GetUUID()
	if got := seriesOf(snap, "cupti_mig_sm_active_ratio", u1); len(got) != 0 {
		t.Errorf("GPU 1 is not in MIG mode: %v", got)
	}
}

// TestHolders: while GPU 1's PM sampling is busy, the process on it with a profiling library
// mapped is named in cupti_pm_counters_holder_info; one without is not.
func TestHolders(t *testing.T) {
	proc := t.TempDir()
	// What the processes mapped on an H100 (run BR): the application ncu profiled (4242,
	// under ncu 3888 through its launcher 3892), and a PyTorch process not profiled (4343).
	nsight := "/opt/nvidia/nsight-compute/2025.3.1/target/linux-desktop-glibc_2_11_3-x64/"
	for pid, p := range map[string]struct {
		comm, ppid string
		libs       []string
	}{
		"4242": {"python3", "3892", []string{"/usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04", nsight + "libcuda-injection.so", "/opt/torch/lib/libcupti.so.13",
			nsight + "libnvperf_host.so", nsight + "libnvperf_target.so", nsight + "libInterceptorInjectionTarget.so"}},
		"3892": {"TreeLauncherSub", "3888", []string{nsight + "libTreeLauncherTargetInjection.so"}},
		"3888": {"ncu", "1", []string{nsight + "libnvperf_host.so"}},
		"4343": {"python3", "1", []string{"/opt/torch/lib/libcupti.so.13", "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.580.159.04"}},
	} {
		dir := filepath.Join(proc, pid)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		var maps strings.Builder
		for _, lib := range p.libs {
			maps.WriteString("7f0000000000-7f0000001000 r-xp 00000000 08:01 1234                       " + lib + "\n")
		}
		for name, body := range map[string]string{"maps": maps.String(), "comm": p.comm + "\n", "status": "Name:\t" + p.comm + "\nPPid:\t" + p.ppid + "\n"} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	f := newFakeNVML(t, loadTrace(t, traceFile), 2)
	f.procs[1] = []uint32{4242, 4343}
	m, _ := mapping.New()
	pm := newPMSide(t, f, m, time.Second)
	pm.set(1, pmdata.StateBusy)
	s := newTestSource(t, f, m, WithPMDevices(func() []pmdata.Device { return pm.devices }), WithPMStatus(pm.status), WithProcRoot(proc))
	steps(s, f, 1)
	u1 := pm.devices[1].UUID
	if h := s.Holders(u1); len(h) != 1 || h[0].PID != 4242 || h[0].Command != "python3" || h[0].Library != "libInterceptorInjectionTarget.so" || h[0].Tool != "ncu (pid 3888)" {
		t.Fatalf("holders of GPU 1: %+v", h)
	}
	got := seriesOf(s.Fill(pm.agg).Snapshot(), "cupti_pm_counters_holder_info", u1)
	if len(got) != 1 || got[0]["pid"] != "4242" || got[0]["gpu"] != "1" {
		t.Errorf("holder series: %v", got)
	}
	pm.set(1, pmdata.StateSampling)
	steps(s, f, 21)
	if h := s.Holders(u1); len(h) != 0 {
		t.Errorf("holders after PM sampling took the GPU back: %+v", h)
	}
}

// TestScrapesWhileReading: scrapes (Fill's Snapshot and Status) run while the source reads;
// run with -race.
func TestScrapesWhileReading(t *testing.T) {
	f := newFakeNVML(t, loadTrace(t, traceFile), 2)
	f.migGIs[1] = []int{3}
	m, _ := mapping.New()
	pm := newPMSide(t, f, m, time.Second)
	pm.set(0, pmdata.StateBusy)
	s := newTestSource(t, f, m, WithPMDevices(func() []pmdata.Device { return pm.devices }), WithPMStatus(pm.status))
	fill := s.Fill(pm.agg)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 200 {
			pm.set(1, []pmdata.State{pmdata.StateSampling, pmdata.StatePaused}[i/50%2])
			steps(s, f, 1)
		}
	}()
	for {
		select {
		case <-done:
			if snap := fill.Snapshot(); len(snap.Families) == 0 {
				t.Error("no family after 200 reads")
			}
			return
		default:
			checkOneSource(t, s, fill.Snapshot())
			_ = fill.Status()
		}
	}
}

// BenchmarkCollect8GPUs is the exporter's side of one GPM read of 8 GPUs in GPM mode (the
// mock's NVML calls cost next to nothing; the real ones cost about 2-3 ms a GPU, run BR).
func BenchmarkCollect8GPUs(b *testing.B) {
	tr := &trace{step: 100 * time.Millisecond, values: map[nvml.GpmMetricId][]float64{}, refused: map[nvml.GpmMetricId]nvml.Return{}}
	for _, m := range metrics {
		for _, id := range m.ids {
			tr.values[id] = []float64{42, 43, 44}
		}
	}
	tr.values[nvml.GPM_METRIC_DRAM_BW_UTIL] = []float64{30, 31, 32}
	f := newFakeNVML(b, tr, 8)
	m, _ := mapping.New()
	s, err := New(f, m, nil, withClock(f.clock.Now), WithMode(ModeOnly))
	if err != nil {
		b.Fatal(err)
	}
	if msg := s.init(); msg != "" {
		b.Fatal(msg)
	}
	fill := s.Fill(nil)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		f.clock.advance(100 * time.Millisecond)
		s.Collect()
		if i%10 == 0 { // a scrape a second
			_ = fill.Snapshot()
		}
	}
}

// TestFamilies: WithFamilies limits what GPM serves and asks NVML for (leaving out the graphics
// engine, whose GPM metric is most of a read's cost on an H100: runs CC, CD), and a family GPM
// does not serve is refused with the ones it does.
func TestFamilies(t *testing.T) {
	tr := loadTrace(t, traceFile)
	f := newFakeNVML(t, tr, 1)
	m, _ := mapping.New()
	var some []string
	for _, fam := range Families() {
		if fam != "cupti_graphics_engine_active_ratio" {
			some = append(some, fam)
		}
	}
	s := newTestSource(t, f, m, WithMode(ModeOnly), WithFamilies(some))
	steps(s, f, 10)
	if n := f.asked[nvml.GPM_METRIC_GRAPHICS_UTIL]; n != 0 {
		t.Errorf("graphics asked %d times, want 0", n)
	}
	if n := f.asked[nvml.GPM_METRIC_SM_UTIL]; n != 9 {
		t.Errorf("SM asked %d times in 10 reads, want 9", n)
	}
	u0, _ := f.Devices[0].GetUUID()
	snap := s.Fill(nil).Snapshot()
	if got := seriesOf(snap, "cupti_graphics_engine_active_ratio", u0); len(got) != 0 {
		t.Errorf("graphics engine served though left out: %v", got)
	}
	if got := seriesOf(snap, "cupti_sm_active_ratio", u0); len(got) != 1 {
		t.Errorf("SM active: want one series, got %v", got)
	}
	if _, err := New(f, m, nil, WithFamilies([]string{"cupti_sm_occupancy_ratio"})); err == nil || !strings.Contains(err.Error(), "cupti_sm_active_ratio") {
		t.Errorf("a family GPM does not serve: err %v, want a refusal naming the ones it serves", err)
	}
}
