package health

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/cupti-exporter/cupti-exporter/exporter"
	"github.com/cupti-exporter/cupti-exporter/gpuprocs"
	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// reading is what a fake GPU answers; a field set in unsupported answers NOT_SUPPORTED.
type reading struct {
	powerMW, limitMW uint32
	energyMJ         uint64
	tempC            uint32
	smMHz, memMHz    uint32
	maxMHz           uint32
	maxFails         int // GetMaxClockInfo answers UNKNOWN this many more times
	events           uint64
	nvlinkErrs       uint64
	procs            []nvml.ProcessInfo
	mps              []nvml.ProcessInfo // MPS clients
	unsupported      map[string]bool
	lost             atomic.Bool
	calls            map[string]*atomic.Int64
	all              *atomic.Int64 // every call, when set
}

func (r *reading) ret(field string) nvml.Return {
	if c := r.calls[field]; c != nil {
		c.Add(1)
	}
	if r.all != nil {
		r.all.Add(1)
	}
	switch {
	case r.lost.Load():
		return nvml.ERROR_GPU_IS_LOST
	case r.unsupported[field]:
		return nvml.ERROR_NOT_SUPPORTED
	}
	return nvml.SUCCESS
}

// fakeGPU answers every NVML call the Source makes on d from r.
func fakeGPU(d *server.Device, r *reading) {
	d.MemoryInfo = nvml.Memory{Total: 80 << 30, Used: 3 << 30, Free: 77 << 30}
	d.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) { return d.MemoryInfo, r.ret("memory") }
	d.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
		var p nvml.PciInfo
		for i, c := range "00000000:1B:00.0" {
			p.BusId[i] = int8(c)
		}
		return p, nvml.SUCCESS
	}
	d.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
		return nvml.Memory_v2{Total: 80 << 30, Reserved: 600 << 20, Used: 3 << 30, Free: 77<<30 - 600<<20}, r.ret("memory_v2")
	}
	d.GetEncoderUtilizationFunc = func() (uint32, uint32, nvml.Return) { return 0, 167000, r.ret("encoder") }
	d.GetDecoderUtilizationFunc = func() (uint32, uint32, nvml.Return) { return 3, 167000, r.ret("decoder") }
	d.GetBAR1MemoryInfoFunc = func() (nvml.BAR1Memory, nvml.Return) {
		return nvml.BAR1Memory{Bar1Total: 128 << 30, Bar1Used: 5 << 20}, r.ret("bar1")
	}
	d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
		return nvml.Utilization{Gpu: 40, Memory: 7}, r.ret("utilization")
	}
	d.GetPowerUsageFunc = func() (uint32, nvml.Return) { return r.powerMW, r.ret("power") }
	d.GetEnforcedPowerLimitFunc = func() (uint32, nvml.Return) { return r.limitMW, r.ret("power_limit") }
	d.GetTotalEnergyConsumptionFunc = func() (uint64, nvml.Return) { return r.energyMJ, r.ret("energy") }
	d.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return r.tempC, r.ret("temperature") }
	d.GetFieldValuesFunc = func(v []nvml.FieldValue) nvml.Return { return r.fieldValues(v) }
	d.GetClockInfoFunc = func(t nvml.ClockType) (uint32, nvml.Return) {
		if t == nvml.CLOCK_MEM {
			return r.memMHz, r.ret("clock")
		}
		return r.smMHz, r.ret("clock")
	}
	d.GetMaxClockInfoFunc = func(nvml.ClockType) (uint32, nvml.Return) {
		if ret := r.ret("max_clock"); ret != nvml.SUCCESS {
			return 0, ret
		}
		if r.maxFails > 0 {
			r.maxFails--
			return 0, nvml.ERROR_UNKNOWN
		}
		return r.maxMHz, nvml.SUCCESS
	}
	d.GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) { return r.events, r.ret("clock_events") }
	d.GetTotalEccErrorsFunc = func(t nvml.MemoryErrorType, _ nvml.EccCounterType) (uint64, nvml.Return) {
		return uint64(t) * 2, r.ret("ecc")
	}
	d.GetRetiredPagesFunc = func(nvml.PageRetirementCause) ([]uint64, nvml.Return) { return nil, nvml.ERROR_NOT_SUPPORTED }
	d.GetRetiredPagesPendingStatusFunc = func() (nvml.EnableState, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	d.GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) { return 2, 1, true, false, r.ret("remapped_rows") }
	d.GetPcieReplayCounterFunc = func() (int, nvml.Return) { return 9, r.ret("pcie_replays") }
	d.GetNvLinkStateFunc = func(link int) (nvml.EnableState, nvml.Return) {
		if link >= 18 {
			return 0, nvml.ERROR_INVALID_ARGUMENT
		}
		return nvml.FEATURE_ENABLED, r.ret("nvlink_state")
	}
	d.GetNvLinkErrorCounterFunc = func(int, nvml.NvLinkErrorCounter) (uint64, nvml.Return) { return r.nvlinkErrs, r.ret("nvlink") }
	d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return r.procs, r.ret("processes") }
	d.GetMPSComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return r.mps, r.ret("mps_processes") }
	d.GetProcessUtilizationFunc = func(uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) { return nil, nvml.ERROR_NOT_FOUND }
	d.GetMigModeFunc = func() (int, int, nvml.Return) { return d.MigMode, d.MigMode, r.ret("mig") }
	d.GetSupportedEventTypesFunc = func() (uint64, nvml.Return) { return nvml.EventTypeXidCriticalError, nvml.SUCCESS }
	d.RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return nvml.SUCCESS }
}

func newFakeServer(t testing.TB) (*server.Server, []*reading) {
	t.Helper()
	s := dgxh100.New()
	rs := make([]*reading, len(s.Devices))
	for i, d := range s.Devices {
		rs[i] = &reading{powerMW: 312500, limitMW: 700000, energyMJ: 123456789, tempC: 44, smMHz: 1980, memMHz: 2619, maxMHz: 1980,
			events: 0x1 | 0x4, unsupported: map[string]bool{}, calls: map[string]*atomic.Int64{"memory_temperature": {}}}
		fakeGPU(d.(*server.Device), rs[i])
	}
	return s, rs
}

// series finds the value of name with the given label values (a subset, by name).
func series(t testing.TB, snap *snapshot.Snapshot, name string, want map[string]string) (float64, bool) {
	t.Helper()
	for _, f := range snap.Families {
		if f.Desc.Name != name {
			continue
		}
	next:
		for _, s := range f.Samples {
			for i, l := range f.Desc.LabelNames {
				if v, ok := want[l]; ok && s.LabelValues[i] != v {
					continue next
				}
			}
			return s.Value, true
		}
	}
	return 0, false
}

func family(snap *snapshot.Snapshot, name string) *snapshot.Family {
	for i := range snap.Families {
		if snap.Families[i].Desc.Name == name {
			return &snap.Families[i]
		}
	}
	return nil
}

func started(t testing.TB, s *Source) {
	t.Helper()
	if err := s.init(); err != nil {
		t.Fatalf("init: %+v", err)
	}
}

func TestCollectEveryGPU(t *testing.T) {
	srv, rs := newFakeServer(t)
	var logs bytes.Buffer
	src := New(srv, slog.New(slog.NewTextHandler(&logs, nil)), WithoutEvents(),
		WithGPUResolver(func(uuid string) (string, bool) { return "", false }))
	rs[0].unsupported["memory_temperature"] = true
	started(t, src)
	src.Collect()
	src.Collect()
	snap := src.Snapshot()
	if f := family(snap, "cupti_gpu_power_watts"); f == nil || len(f.Samples) != 8 {
		t.Fatalf("power of 8 GPUs expected, got %+v", f)
	}
	gpu1 := map[string]string{"gpu": "1"}
	for name, want := range map[string]float64{
		"cupti_gpu_power_watts":                312.5,
		"cupti_gpu_power_limit_watts":          700,
		"cupti_gpu_energy_joules_total":        123456.789,
		"cupti_gpu_temperature_celsius":        44,
		"cupti_gpu_memory_temperature_celsius": 51,
		"cupti_gpu_memory_used_bytes":          3 << 30,
		"cupti_nvml_gpu_utilization_ratio":     0.4,
		"cupti_gpu_pcie_replays_total":         9,
	} {
		got, ok := series(t, snap, name, gpu1)
		if !ok || got != want {
			t.Errorf("%s{gpu=1} = %v (present %v), want %v", name, got, ok, want)
		}
	}
	if v, _ := series(t, snap, "cupti_gpu_clock_hertz", map[string]string{"gpu": "1", "clock": "memory"}); v != 2619e6 {
		t.Errorf("memory clock = %v Hz, want 2.619e9", v)
	}
	if v, _ := series(t, snap, "cupti_gpu_clock_event_reasons", map[string]string{"gpu": "1", "reason": "sw_power_cap"}); v != 1 {
		t.Errorf("sw_power_cap state = %v, want 1", v)
	}
	if v, _ := series(t, snap, "cupti_gpu_clock_event_reasons", map[string]string{"gpu": "1", "reason": "hw_slowdown"}); v != 0 {
		t.Errorf("hw_slowdown state = %v, want 0", v)
	}
	if v, _ := series(t, snap, "cupti_gpu_clock_event_seconds_total", map[string]string{"gpu": "1", "reason": "thermal"}); v != 2 {
		t.Errorf("thermal violation = %v s, want 2", v)
	}
	if v, _ := series(t, snap, "cupti_gpu_pcie_replays_total", map[string]string{"pci_bus_id": "0000:1b:00.0"}); v != 9 {
		t.Errorf("pci_bus_id not normalised to CUDA's form: %+v", family(snap, "cupti_gpu_pcie_replays_total").Samples[0])
	}
	// unsupported: absent (not zero) on GPU 0 only, read once, logged once
	if _, ok := series(t, snap, "cupti_gpu_memory_temperature_celsius", map[string]string{"gpu": "0"}); ok {
		t.Error("unsupported memory temperature reported on GPU 0")
	}
	if n := rs[0].calls["memory_temperature"].Load(); n != 1 {
		t.Errorf("unsupported field read %d times, want once", n)
	}
	if n := strings.Count(logs.String(), "field=memory_temperature"); n != 1 {
		t.Errorf("unsupported field logged %d times, want once:\n%s", n, logs.String())
	}
	if f := family(snap, "cupti_gpu_retired_pages"); f != nil {
		t.Errorf("retired pages unsupported on H100 but reported: %+v", f.Samples)
	}
	if f := family(snap, "cupti_gpu_nvlink_up"); f == nil || len(f.Samples) != 8*18 {
		t.Errorf("want 18 NVLink links per GPU, got %v", f)
	}
	for _, st := range src.Status() {
		if !st.Ready {
			t.Errorf("not ready: %+v", st)
		}
	}
}

func TestGPULostKeepsOthersAndRecovers(t *testing.T) {
	srv, rs := newFakeServer(t)
	src := New(srv, nil, WithoutEvents())
	started(t, src)
	rs[3].lost.Store(true)
	src.Collect()
	snap := src.Snapshot()
	if _, ok := series(t, snap, "cupti_gpu_power_watts", map[string]string{"gpu": "3"}); ok {
		t.Error("lost GPU 3 still reported")
	}
	if f := family(snap, "cupti_gpu_power_watts"); f == nil || len(f.Samples) != 7 {
		t.Fatalf("the 7 other GPUs must keep reporting, got %v", f)
	}
	var lost *DeviceStatus
	for _, st := range src.Status() {
		if st.Device == "3" {
			lost = &st
		}
	}
	if lost == nil || lost.Ready || lost.Reason != "gpu_lost" || !strings.Contains(lost.Detail, "GPU_IS_LOST") && !strings.Contains(lost.Detail, "lost") {
		t.Fatalf("status of GPU 3 = %+v, want not ready, reason gpu_lost", lost)
	}
	rs[3].lost.Store(false)
	src.Collect()
	if _, ok := series(t, src.Snapshot(), "cupti_gpu_power_watts", map[string]string{"gpu": "3"}); !ok {
		t.Error("GPU 3 did not come back")
	}
	for _, st := range src.Status() {
		if !st.Ready {
			t.Errorf("still not ready after recovery: %+v", st)
		}
	}
}

func TestNoNVMLReportsWhy(t *testing.T) {
	for _, c := range []struct {
		ret    nvml.Return
		count  int
		reason string
	}{{nvml.ERROR_LIBRARY_NOT_FOUND, 0, "no_nvml"}, {nvml.SUCCESS, 0, "no_gpu"}, {nvml.ERROR_NO_PERMISSION, 0, "nvml_error"}} {
		lib := &mock.Interface{
			InitFunc:           func() nvml.Return { return c.ret },
			ShutdownFunc:       func() nvml.Return { return nvml.SUCCESS },
			DeviceGetCountFunc: func() (int, nvml.Return) { return c.count, nvml.SUCCESS },
		}
		src := New(lib, nil)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- src.Run(ctx) }()
		deadline := time.Now().Add(5 * time.Second)
		for src.Status()[0].Reason == "starting" && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		st := src.Status()
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if len(st) != 1 || st[0].Ready || st[0].Reason != c.reason || st[0].Detail == "" {
			t.Errorf("Init %v, %d GPUs: status %+v, want reason %s with a remedy", c.ret, c.count, st, c.reason)
		}
		if len(src.Snapshot().Families) != 0 {
			t.Errorf("families without NVML: %+v", src.Snapshot().Families)
		}
	}
}

func TestXIDCountedPerCode(t *testing.T) {
	srv, _ := newFakeServer(t)
	dev := srv.Devices[2]
	var n atomic.Int64
	set := &mock.EventSet{
		FreeFunc: func() nvml.Return { return nvml.SUCCESS },
		WaitFunc: func(uint32) (nvml.EventData, nvml.Return) {
			switch n.Add(1) {
			case 1, 2:
				return nvml.EventData{Device: dev, EventType: nvml.EventTypeXidCriticalError, EventData: 79}, nvml.SUCCESS
			case 3:
				return nvml.EventData{Device: dev, EventType: nvml.EventTypeXidCriticalError, EventData: 48}, nvml.SUCCESS
			}
			time.Sleep(time.Millisecond)
			return nvml.EventData{}, nvml.ERROR_TIMEOUT
		},
	}
	srv.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) { return set, nvml.SUCCESS }
	now := time.Unix(1795299125, 0)
	src := New(srv, nil, withClock(func() time.Time { return now }))
	started(t, src)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { src.watchXIDs(ctx); close(done) }()
	for n.Load() < 4 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	src.Collect()
	snap := src.Snapshot()
	if v, _ := series(t, snap, "cupti_gpu_xid_errors_total", map[string]string{"gpu": "2", "xid": "79"}); v != 2 {
		t.Errorf("xid 79 count = %v, want 2", v)
	}
	if v, _ := series(t, snap, "cupti_gpu_xid_errors_total", map[string]string{"gpu": "2", "xid": "48"}); v != 1 {
		t.Errorf("xid 48 count = %v, want 1", v)
	}
	if v, _ := series(t, snap, "cupti_gpu_xid_last_timestamp_seconds", map[string]string{"xid": "79"}); v != float64(now.Unix()) {
		t.Errorf("last xid time = %v, want %v", v, now.Unix())
	}
}

func TestProcessMemoryWithPods(t *testing.T) {
	srv, rs := newFakeServer(t)
	rs[0].procs = []nvml.ProcessInfo{{Pid: 100, UsedGpuMemory: 1 << 30}, {Pid: 200, UsedGpuMemory: 2 << 30}}
	src := New(srv, nil, WithoutEvents(), WithPodResolver(func(pid uint32) (string, string, string, bool) {
		if pid == 100 {
			return "trainer-0", "ml", "main", true
		}
		return "", "", "", false
	}))
	started(t, src)
	src.Collect()
	snap := src.Snapshot()
	if v, _ := series(t, snap, "cupti_gpu_process_memory_bytes", map[string]string{"gpu": "0", "pid": "100", "pod": "trainer-0", "namespace": "ml", "container": "main"}); v != 1<<30 {
		t.Errorf("pid 100 memory = %v with its pod, want 1 GiB", v)
	}
	if v, _ := series(t, snap, "cupti_gpu_process_memory_bytes", map[string]string{"gpu": "0", "pid": "200", "pod": ""}); v != 2<<30 {
		t.Errorf("pid 200 memory = %v without a pod, want 2 GiB", v)
	}
}

func TestMIGInstances(t *testing.T) {
	srv, _ := newFakeServer(t)
	d := srv.Devices[0].(*server.Device)
	d.GetMigModeFunc = func() (int, int, nvml.Return) { return nvml.DEVICE_MIG_ENABLE, nvml.DEVICE_MIG_ENABLE, nvml.SUCCESS }
	d.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 7, nvml.SUCCESS }
	mig := &mock.Device{
		GetUUIDFunc:              func() (string, nvml.Return) { return "MIG-5d3c1b2a-0000-5000-8000-000000000005", nvml.SUCCESS },
		GetGpuInstanceIdFunc:     func() (int, nvml.Return) { return 5, nvml.SUCCESS },
		GetComputeInstanceIdFunc: func() (int, nvml.Return) { return 0, nvml.SUCCESS },
		GetMemoryInfoFunc:        func() (nvml.Memory, nvml.Return) { return nvml.Memory{Total: 10 << 30, Used: 1 << 30}, nvml.SUCCESS },
		GetNameFunc:              func() (string, nvml.Return) { return "NVIDIA H100 80GB HBM3 MIG 1g.10gb", nvml.SUCCESS },
	}
	d.GetMigDeviceHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if i == 0 {
			return mig, nvml.SUCCESS
		}
		return nil, nvml.ERROR_NOT_FOUND
	}
	d.GetGpuInstanceByIdFunc = func(id int) (nvml.GpuInstance, nvml.Return) {
		if id != 5 {
			return nil, nvml.ERROR_NOT_FOUND
		}
		return &mock.GpuInstance{GetInfoFunc: func() (nvml.GpuInstanceInfo, nvml.Return) {
			return nvml.GpuInstanceInfo{Id: 5, ProfileId: 19, Placement: nvml.GpuInstancePlacement{Start: 4, Size: 1}}, nvml.SUCCESS
		}}, nvml.SUCCESS
	}
	for _, dd := range srv.Devices[1:] {
		dd.(*server.Device).GetMigModeFunc = func() (int, int, nvml.Return) { return 0, 0, nvml.SUCCESS }
	}
	src := New(srv, nil, WithoutEvents())
	started(t, src)
	src.Collect()
	snap := src.Snapshot()
	if v, _ := series(t, snap, "cupti_gpu_mig_enabled", map[string]string{"gpu": "0"}); v != 1 {
		t.Error("MIG mode not reported on GPU 0")
	}
	if v, _ := series(t, snap, "cupti_gpu_mig_memory_used_bytes", map[string]string{"gpu": "0", "gpu_instance_id": "5", "compute_instance_id": "0", "profile": "1g.10gb"}); v != 1<<30 {
		t.Errorf("MIG instance memory = %v, want 1 GiB", v)
	}
	if u, ok := src.MIGDeviceUUID(d.UUID, 19, 4); !ok || u != "MIG-5d3c1b2a-0000-5000-8000-000000000005" {
		t.Errorf("MIG device of profile 19 at 4 = %q, %v; want its UUID", u, ok)
	}
}

// clockEventNs is what the fake serves for each clock-event field: the nanoseconds of
// nvmlDeviceGetViolationStatus's policy p as (p+1) s, where the field translates one (nvml.h),
// and 11 and 12 s for the two hardware slowdowns, which have none.
var clockEventNs = map[uint32]uint64{
	nvml.FI_DEV_PERF_POLICY_POWER: 1e9, nvml.FI_DEV_CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN: 2e9,
	nvml.FI_DEV_PERF_POLICY_THERMAL: 2e9, nvml.FI_DEV_PERF_POLICY_SYNC_BOOST: 3e9,
	nvml.FI_DEV_PERF_POLICY_BOARD_LIMIT: 4e9, nvml.FI_DEV_PERF_POLICY_LOW_UTILIZATION: 5e9,
	nvml.FI_DEV_PERF_POLICY_RELIABILITY: 6e9, nvml.FI_DEV_PERF_POLICY_TOTAL_APP_CLOCKS: 7e9,
	nvml.FI_DEV_PERF_POLICY_TOTAL_BASE_CLOCKS: 8e9, nvml.FI_DEV_CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN: 11e9,
	nvml.FI_DEV_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN: 12e9,
}

// fieldValues answers nvmlDeviceGetFieldValues as driver 580 did on an H100 (run EN): each
// field its own return and value type, the clock-event counters as unsigned long longs. A
// call for clock-event fields counts once as "violation"; "field_N" in unsupported makes
// field N answer NOT_SUPPORTED (an older driver), "violation" every clock-event field.
func (r *reading) fieldValues(v []nvml.FieldValue) nvml.Return {
	events := false
	for i := range v {
		if _, ok := clockEventNs[v[i].FieldId]; ok {
			events = true
		}
	}
	if events {
		if ret := r.ret("violation"); ret == nvml.ERROR_GPU_IS_LOST {
			return ret
		}
	}
	for i := range v {
		f := &v[i]
		ns, event := clockEventNs[f.FieldId]
		switch {
		case f.FieldId == nvml.FI_DEV_MEMORY_TEMP:
			if ret := r.ret("memory_temperature"); ret != nvml.SUCCESS {
				return ret
			}
			f.ValueType = uint32(nvml.VALUE_TYPE_UNSIGNED_INT)
			f.Value[0] = 51
		case event && !r.unsupported["violation"] && !r.unsupported[fmt.Sprintf("field_%d", f.FieldId)]:
			f.ValueType = uint32(nvml.VALUE_TYPE_UNSIGNED_LONG_LONG)
			binary.LittleEndian.PutUint64(f.Value[:], ns)
		default:
			f.NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
		}
	}
	return nvml.SUCCESS
}

// BenchmarkCollect8GPUs is one health collection of a DGX H100 (8 GPUs) against the mock:
// the cost of the exporter's side of a collection (target: <= 5 ms of CPU). The mock's calls
// cost nothing; what NVML's cost on a GPU is the calls made, reported as nvml_calls/op and, of
// those, the ones measured dear on an H100 (energy, violation status, maximum clocks, over 1 ms
// of CPU each in run BK) as dear_calls/op.
func BenchmarkCollect8GPUs(b *testing.B) {
	srv, rs := newFakeServer(b)
	var all, dear, bar1MIG atomic.Int64
	for _, r := range rs {
		r.procs = []nvml.ProcessInfo{{Pid: 100, UsedGpuMemory: 1 << 30}}
		r.all = &all
		for _, f := range []string{"energy", "violation", "max_clock"} {
			r.calls[f] = &dear
		}
		for _, f := range []string{"bar1", "mig"} {
			r.calls[f] = &bar1MIG
		}
	}
	src := New(srv, nil, WithoutEvents())
	started(b, src)
	all.Store(0)
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		src.Collect()
		n++
	}
	b.ReportMetric(float64(all.Load())/float64(n), "nvml_calls/op")
	b.ReportMetric(float64(dear.Load())/float64(n), "dear_calls/op")
	b.ReportMetric(float64(bar1MIG.Load())/float64(n), "bar1_mig_calls/op")
}

// TestFamiliesLint serves a full collection through the exporter's registry and lints it
// with promlint, as a scrape would see it.
func TestFamiliesLint(t *testing.T) {
	srv, rs := newFakeServer(t)
	rs[0].procs = []nvml.ProcessInfo{{Pid: 100, UsedGpuMemory: 1 << 30}}
	src := New(srv, nil, WithoutEvents())
	started(t, src)
	src.Collect()
	exp := exporter.New(nil, exporter.WithoutRuntimeMetrics())
	exp.Register("health", src)
	problems, err := testutil.GatherAndLint(exp.Registry())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "cupti_gpu") || strings.HasPrefix(p.Metric, "cupti_nvml") || strings.HasPrefix(p.Metric, "cupti_health") {
			t.Errorf("promlint: %s: %s", p.Metric, p.Text)
		}
	}
	n, err := testutil.GatherAndCount(exp.Registry(), "cupti_gpu_power_watts")
	if err != nil || n != 8 {
		t.Errorf("scrape has %d power series (err %v), want 8", n, err)
	}
}

// TestMemoryFallsBackToV1 checks that a GPU without the v2 memory query still reports its
// memory (from v1) and no reserved memory.
func TestMemoryFallsBackToV1(t *testing.T) {
	srv, rs := newFakeServer(t)
	rs[2].unsupported["memory_v2"] = true
	src := New(srv, nil, WithoutEvents())
	started(t, src)
	src.Collect()
	snap := src.Snapshot()
	if v, ok := series(t, snap, "cupti_gpu_memory_used_bytes", map[string]string{"gpu": "2"}); !ok || v != 3<<30 {
		t.Errorf("memory used on a v1-only GPU = %v (present %v), want 3 GiB", v, ok)
	}
	if _, ok := series(t, snap, "cupti_gpu_memory_reserved_bytes", map[string]string{"gpu": "2"}); ok {
		t.Error("reserved memory reported on a GPU without the v2 query")
	}
	if v, _ := series(t, snap, "cupti_gpu_memory_reserved_bytes", map[string]string{"gpu": "1"}); v != 600<<20 {
		t.Errorf("reserved memory on a v2 GPU = %v, want 600 MiB", v)
	}
}

// TestErrorCountersReadEveryTenth checks that the slow error and link counters are read on
// the first collection and every tenth after it, and repeated in between.
func TestErrorCountersReadEveryTenth(t *testing.T) {
	srv, rs := newFakeServer(t)
	rs[0].calls["nvlink"] = &atomic.Int64{}
	rs[0].nvlinkErrs = 3
	src := New(srv, nil, WithoutEvents())
	started(t, src)
	for i := range 12 {
		src.Collect()
		if i == 4 {
			rs[0].nvlinkErrs = 5 // not read before the eleventh collection
		}
		want := 3.0
		if i >= 10 {
			want = 5
		}
		if v, ok := series(t, src.Snapshot(), "cupti_gpu_nvlink_errors_total", map[string]string{"gpu": "0", "link": "0", "type": "replay"}); !ok || v != want {
			t.Fatalf("collection %d: nvlink errors %v (present %v), want %v", i, v, ok, want)
		}
	}
	// 18 links x 5 counters per read, two reads
	if n := rs[0].calls["nvlink"].Load(); n != 2*18*5 {
		t.Errorf("NVLink error counters read %d times in 12 collections, want %d (two reads)", n, 2*18*5)
	}
}

// TestMaxClocksReadOncePerIdentify checks that the maximum clocks, fixed while the driver
// holds the GPU, are read at the first collection only and served at every one, read again
// after a read that failed for a passing reason, and read anew when the GPU comes back after
// being lost (a reset or another driver may change them).
func TestMaxClocksReadOncePerIdentify(t *testing.T) {
	srv, rs := newFakeServer(t)
	rs[0].calls["max_clock"] = &atomic.Int64{}
	src := New(srv, nil, WithoutEvents())
	started(t, src)
	want := func(i int, mhz float64) {
		t.Helper()
		for _, c := range []string{"sm", "memory", "graphics"} {
			if v, ok := series(t, src.Snapshot(), "cupti_gpu_max_clock_hertz", map[string]string{"gpu": "0", "clock": c}); !ok || v != mhz*1e6 {
				t.Fatalf("collection %d: max %s clock %v (present %v), want %v MHz", i, c, v, ok, mhz)
			}
		}
	}
	for i := range 5 {
		src.Collect()
		if i == 1 {
			rs[0].maxMHz = 2100 // not seen: not read again while the GPU stays
		}
		want(i, 1980)
	}
	if n := rs[0].calls["max_clock"].Load(); n != 3 {
		t.Errorf("max clocks read %d times in 5 collections, want 3 (once per clock)", n)
	}
	rs[0].lost.Store(true)
	src.Collect()
	rs[0].lost.Store(false)
	src.Collect() // back: identified again, the max clocks read anew
	want(6, 2100)
	rs[0].lost.Store(true)
	src.Collect()
	rs[0].lost.Store(false)
	rs[0].maxFails = 1 // the first read after the return fails: served without it, read again next time
	rs[0].maxMHz = 1755
	src.Collect()
	if _, ok := series(t, src.Snapshot(), "cupti_gpu_max_clock_hertz", map[string]string{"gpu": "0", "clock": "sm"}); ok {
		t.Error("max SM clock served though its read failed")
	}
	src.Collect()
	want(9, 1755)
}

// TestCountersReadEveryTenth checks that the energy and clock-event (violation) counters,
// BAR1 memory and the MIG mode are read on the first collection and every tenth after it,
// repeated in between.
func TestCountersReadEveryTenth(t *testing.T) {
	srv, rs := newFakeServer(t)
	for _, f := range []string{"energy", "violation", "bar1", "mig"} {
		rs[0].calls[f] = &atomic.Int64{}
	}
	src := New(srv, nil, WithoutEvents())
	started(t, src)
	for i := range 12 {
		src.Collect()
		if i == 4 {
			rs[0].energyMJ += 5000 // not read before the eleventh collection
		}
		want := 123456.789
		if i >= 10 {
			want += 5
		}
		if v, ok := series(t, src.Snapshot(), "cupti_gpu_bar1_memory_used_bytes", map[string]string{"gpu": "0"}); !ok || v != 5<<20 {
			t.Fatalf("collection %d: BAR1 used %v (present %v), want 5 MiB", i, v, ok)
		}
		if v, ok := series(t, src.Snapshot(), "cupti_gpu_mig_enabled", map[string]string{"gpu": "0"}); !ok || v != 0 {
			t.Fatalf("collection %d: MIG mode %v (present %v), want 0", i, v, ok)
		}
		if v, ok := series(t, src.Snapshot(), "cupti_gpu_energy_joules_total", map[string]string{"gpu": "0"}); !ok || math.Abs(v-want) > 1e-6 {
			t.Fatalf("collection %d: energy %v (present %v), want %v", i, v, ok, want)
		}
		if v, ok := series(t, src.Snapshot(), "cupti_gpu_clock_event_seconds_total", map[string]string{"gpu": "0", "reason": "thermal"}); !ok || v != 2 {
			t.Fatalf("collection %d: thermal clock-event seconds %v (present %v), want 2", i, v, ok)
		}
	}
	if n := rs[0].calls["energy"].Load(); n != 2 {
		t.Errorf("energy read %d times in 12 collections, want 2", n)
	}
	if n := rs[0].calls["violation"].Load(); n != 2 {
		t.Errorf("clock-event counters read in %d calls in 12 collections, want 2 (one call for all of them)", n)
	}
	for _, f := range []string{"bar1", "mig"} {
		if n := rs[0].calls[f].Load(); n != 2 {
			t.Errorf("%s read %d times in 12 collections, want 2", f, n)
		}
	}
}

// TestSlowFieldsEveryTenSeconds checks that the slow fields are read every 10 s whatever the
// interval: every 100th collection at 100 ms, every collection at a minute.
func TestSlowFieldsEveryTenSeconds(t *testing.T) {
	for _, c := range []struct {
		interval    time.Duration
		collections int
		reads       int64
	}{{100 * time.Millisecond, 201, 3}, {time.Minute, 3, 3}, {20 * time.Second, 2, 2}} {
		srv, rs := newFakeServer(t)
		rs[0].calls["energy"] = &atomic.Int64{}
		src := New(srv, nil, WithoutEvents(), WithInterval(c.interval))
		started(t, src)
		for range c.collections {
			src.Collect()
		}
		if n := rs[0].calls["energy"].Load(); n != c.reads {
			t.Errorf("interval %v: energy read %d times in %d collections, want %d", c.interval, n, c.collections, c.reads)
		}
	}
}

// TestProcessListener checks the processes handed to the attribution join: NVML's running
// list with each process's mean SM share since the last collection (0 for a listed process
// with no sample, a process that ran but is no longer listed added), its pod, the period,
// and NaN shares where the driver has no per-process utilisation.
func TestProcessListener(t *testing.T) {
	srv, rs := newFakeServer(t)
	rs[0].procs = []nvml.ProcessInfo{{Pid: 100}, {Pid: 200}}
	var lastSeen []uint64
	d0 := srv.Devices[0].(*server.Device)
	d0.GetProcessUtilizationFunc = func(since uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
		lastSeen = append(lastSeen, since)
		if since >= 3000 {
			return nil, nvml.ERROR_NOT_FOUND
		}
		return []nvml.ProcessUtilizationSample{
			{Pid: 100, TimeStamp: 1000, SmUtil: 40}, {Pid: 100, TimeStamp: 2000, SmUtil: 60},
			{Pid: 300, TimeStamp: 3000, SmUtil: 10},
		}, nvml.SUCCESS
	}
	d1 := srv.Devices[1].(*server.Device)
	d1.GetProcessUtilizationFunc = func(uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) { return nil, nvml.ERROR_NOT_SUPPORTED }
	rs[1].procs = []nvml.ProcessInfo{{Pid: 500}}
	now := time.Unix(1_800_000_000, 0)
	got := map[string][]gpuprocs.Observation{}
	src := New(srv, nil, WithoutEvents(), withClock(func() time.Time { return now }),
		WithPodResolver(func(pid uint32) (string, string, string, bool) {
			if pid == 100 {
				return "trainer-0", "ml", "main", true
			}
			return "", "", "", false
		}),
		WithProcessListener(ProcessListenerFunc(func(p gpuprocs.Observation) { got[p.GPU] = append(got[p.GPU], p) })))
	started(t, src)
	src.Collect()
	now = now.Add(time.Second)
	src.Collect()
	g0 := got["0"]
	if len(g0) != 2 || len(got["2"]) != 2 {
		t.Fatalf("observations of gpu 0: %d, gpu 2: %d; want 2 each", len(g0), len(got["2"]))
	}
	first := g0[0]
	if !first.Shares || !first.End.Equal(time.Unix(1_800_000_000, 0)) || first.End.Sub(first.Start) != DefaultInterval {
		t.Errorf("first observation: shares %v, period %v..%v", first.Shares, first.Start, first.End)
	}
	want := map[uint32]float64{100: 0.5, 200: 0, 300: 0.1}
	if len(first.Processes) != len(want) {
		t.Fatalf("processes %+v, want pids 100, 200, 300", first.Processes)
	}
	for _, p := range first.Processes {
		if math.Abs(p.SMShare-want[p.PID]) > 1e-12 {
			t.Errorf("pid %d share %v, want %v", p.PID, p.SMShare, want[p.PID])
		}
		if p.PID == 100 && (p.Pod != "trainer-0" || p.Namespace != "ml" || p.Container != "main") {
			t.Errorf("pid 100 pod %+v", p)
		}
	}
	second := g0[1]
	if !second.Start.Equal(first.End) || second.End.Sub(second.Start) != time.Second {
		t.Errorf("second period %v..%v, want from the first collection", second.Start, second.End)
	}
	if len(lastSeen) != 2 || lastSeen[0] != 0 || lastSeen[1] != 3000 {
		t.Errorf("utilisation read since %v, want [0 3000]", lastSeen)
	}
	for _, p := range second.Processes {
		if p.SMShare != 0 {
			t.Errorf("second period: pid %d share %v, want 0 (NVML: no sample since)", p.PID, p.SMShare)
		}
	}
	g1 := got["1"][1]
	if g1.Shares || len(g1.Processes) != 1 || !math.IsNaN(g1.Processes[0].SMShare) {
		t.Errorf("gpu 1 without per-process utilisation: %+v, want the running list with NaN shares", g1)
	}
}

// TestProcessUtilisationOnlyWhenShared: the per-process utilisation (2.1 ms of CPU a read on
// an H100) is read only where the GPU lists more than one process now or at the read before;
// a lone process's observation has no shares. The first read after skipped ones averages the
// last interval's samples only, though NVML hands back older ones.
func TestProcessUtilisationOnlyWhenShared(t *testing.T) {
	srv, rs := newFakeServer(t)
	rs[0].procs = []nvml.ProcessInfo{{Pid: 100}}
	var reads []uint64
	d0 := srv.Devices[0].(*server.Device)
	d0.GetProcessUtilizationFunc = func(since uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
		reads = append(reads, since)
		return []nvml.ProcessUtilizationSample{ // one from 4 s before the newest, which is not this period's
			{Pid: 100, TimeStamp: 1_000_000, SmUtil: 100}, {Pid: 100, TimeStamp: 4_500_000, SmUtil: 20},
			{Pid: 200, TimeStamp: 4_800_000, SmUtil: 60}, {Pid: 100, TimeStamp: 5_000_000, SmUtil: 40},
		}, nvml.SUCCESS
	}
	now := time.Unix(1_800_000_000, 0)
	var got []gpuprocs.Observation
	src := New(srv, nil, WithoutEvents(), withClock(func() time.Time { return now }),
		WithProcessListener(ProcessListenerFunc(func(p gpuprocs.Observation) {
			if p.GPU == "0" {
				got = append(got, p)
			}
		})))
	started(t, src)
	collect := func(procs ...uint32) gpuprocs.Observation {
		t.Helper()
		rs[0].procs = nil
		for _, pid := range procs {
			rs[0].procs = append(rs[0].procs, nvml.ProcessInfo{Pid: pid})
		}
		src.Collect()
		now = now.Add(time.Second)
		return got[len(got)-1]
	}
	for range 3 {
		if o := collect(100); o.Shares || len(o.Processes) != 1 || !math.IsNaN(o.Processes[0].SMShare) {
			t.Fatalf("one process listed: %+v, want it without a share", o)
		}
	}
	if len(reads) != 0 {
		t.Fatalf("per-process utilisation read %d times with one process listed, want none", len(reads))
	}
	o := collect(100, 200)
	if !o.Shares || len(reads) != 1 {
		t.Fatalf("two processes: shares %v, %d reads; want shares from one read", o.Shares, len(reads))
	}
	want := map[uint32]float64{100: 0.3, 200: 0.6} // the samples of the last second only
	for _, p := range o.Processes {
		if math.Abs(p.SMShare-want[p.PID]) > 1e-12 {
			t.Errorf("pid %d share %v, want %v", p.PID, p.SMShare, want[p.PID])
		}
	}
	collect(100) // two listed the time before: still read
	collect(100)
	if len(reads) != 2 {
		t.Errorf("back to one process: %d reads in all, want 2 (the first collection after two were listed)", len(reads))
	}
}

// TestMPSProcesses: under MPS NVML lists the MPS server among the compute processes (the
// clients' kernels run in its context) and the clients in its MPS list. The server is told
// by its command line under the host's /proc and the clients by that list (one the compute
// list leaves out is added); without MPS nothing is marked, and a driver without the MPS
// list still marks the server.
func TestMPSProcesses(t *testing.T) {
	root := t.TempDir()
	for pid, argv0 := range map[string]string{"300": "/usr/bin/nvidia-cuda-mps-server", "100": "python3", "400": "nvidia-cuda-mps-control"} {
		if err := os.MkdirAll(filepath.Join(root, pid), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, pid, "cmdline"), []byte(argv0+"\x00-d\x00"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	srv, rs := newFakeServer(t)
	rs[0].procs = []nvml.ProcessInfo{{Pid: 300}, {Pid: 100}, {Pid: 400}, {Pid: 500}}
	rs[0].mps = []nvml.ProcessInfo{{Pid: 100}, {Pid: 101}}
	rs[1].procs = []nvml.ProcessInfo{{Pid: 300}, {Pid: 100}}
	rs[1].unsupported["mps_processes"] = true
	rs[2].procs = []nvml.ProcessInfo{{Pid: 100}}
	got := map[string]map[uint32]string{}
	src := New(srv, nil, WithoutEvents(), WithProcRoot(root), WithProcessListener(ProcessListenerFunc(func(p gpuprocs.Observation) {
		got[p.GPU] = map[uint32]string{}
		for _, q := range p.Processes {
			got[p.GPU][q.PID] = q.MPS
		}
	})))
	started(t, src)
	src.Collect()
	for gpu, want := range map[string]map[uint32]string{
		"0": {300: gpuprocs.MPSServer, 100: gpuprocs.MPSClient, 101: gpuprocs.MPSClient, 400: "", 500: ""},
		"1": {300: gpuprocs.MPSServer, 100: ""},
		"2": {100: ""},
	} {
		if !maps.Equal(got[gpu], want) {
			t.Errorf("gpu %s: MPS roles %v, want %v", gpu, got[gpu], want)
		}
	}
}

// TestMIGProcesses: on a GPU in MIG mode (go-nvml's mock with MIG switched on and a GPU
// instance made) the processes NVML lists for the whole GPU come with MIG set, so the join
// knows they ran side by side in instances; a GPU without MIG says so too.
func TestMIGProcesses(t *testing.T) {
	srv, rs := newFakeServer(t)
	d0 := srv.Devices[0].(*server.Device)
	if r1, r2 := d0.SetMigMode(nvml.DEVICE_MIG_ENABLE); r1 != nvml.SUCCESS || r2 != nvml.SUCCESS {
		t.Fatalf("SetMigMode: %v %v", r1, r2)
	}
	d0.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) { return 7, nvml.SUCCESS }
	d0.GetMigDeviceHandleByIndexFunc = func(int) (nvml.Device, nvml.Return) { return nil, nvml.ERROR_NOT_FOUND }
	rs[0].procs = []nvml.ProcessInfo{{Pid: 100, GpuInstanceId: 1, ComputeInstanceId: 0}, {Pid: 200, GpuInstanceId: 2, ComputeInstanceId: 0}}
	rs[1].procs = []nvml.ProcessInfo{{Pid: 300}}
	got := map[string]gpuprocs.Observation{}
	src := New(srv, nil, WithoutEvents(), WithProcessListener(ProcessListenerFunc(func(p gpuprocs.Observation) { got[p.GPU] = p })))
	started(t, src)
	src.Collect()
	if p := got["0"]; !p.MIG || len(p.Processes) != 2 {
		t.Errorf("MIG GPU 0: MIG %v, %d processes; want MIG and both instances' processes", p.MIG, len(p.Processes))
	}
	if p := got["1"]; p.MIG || len(p.Processes) != 1 {
		t.Errorf("GPU 1 without MIG: MIG %v, %d processes", p.MIG, len(p.Processes))
	}
}

// TestClockEventCountersInOneCall checks that the clock-event counters come from NVML's field
// values in one call, each reason from its field (the hardware slowdowns too), and that where
// the driver does not serve a reason's field (thermal's SW_THERM_SLOWDOWN, newer than the
// PERF_POLICY_THERMAL field) the same collection reads its older field, and later ones that
// field alone.
func TestClockEventCountersInOneCall(t *testing.T) {
	want := map[string]float64{"power": 1, "thermal": 2, "sync_boost": 3, "board_limit": 4, "low_utilization": 5,
		"reliability": 6, "app_clocks": 7, "base_clocks": 8, "hw_thermal_slowdown": 11, "hw_power_brake_slowdown": 12}
	for _, old := range []bool{false, true} {
		srv, rs := newFakeServer(t)
		rs[0].calls["violation"] = &atomic.Int64{}
		if old {
			rs[0].unsupported[fmt.Sprintf("field_%d", nvml.FI_DEV_CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN)] = true
			rs[0].unsupported[fmt.Sprintf("field_%d", nvml.FI_DEV_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN)] = true
		}
		src := New(srv, nil, WithoutEvents(), WithInterval(10*time.Second))
		started(t, src)
		for collection := range 3 {
			src.Collect()
			for reason, s := range want {
				v, ok := series(t, src.Snapshot(), "cupti_gpu_clock_event_seconds_total", map[string]string{"gpu": "0", "reason": reason})
				if old && reason == "hw_power_brake_slowdown" {
					if ok {
						t.Errorf("older driver, collection %d: %s served (%v) where the driver has no field for it", collection, reason, v)
					}
					continue
				}
				if !ok || v != s {
					t.Errorf("older driver %v, collection %d: %s = %v (present %v), want %v", old, collection, reason, v, ok, s)
				}
			}
		}
		// one call a collection; the older driver's first collection asks thermal's older field
		// in a second
		wantCalls := int64(3)
		if old {
			wantCalls = 4
		}
		if n := rs[0].calls["violation"].Load(); n != wantCalls {
			t.Errorf("older driver %v: %d field-value calls for the clock-event counters in 3 collections, want %d", old, n, wantCalls)
		}
	}
}
