package health

import (
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/cupti-exporter/cupti-exporter/gpuprocs"
	"github.com/cupti-exporter/cupti-exporter/internal/gpm"
	"github.com/cupti-exporter/cupti-exporter/internal/nvmlfield"
	"github.com/cupti-exporter/cupti-exporter/internal/nvmlpci"
	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// gpuState is what the Source knows of one GPU; only the collection goroutine touches it.
type gpuState struct {
	index       int
	dev         nvml.Device
	gpu, uuid   string
	labels      []string // deviceLabels values
	lost        bool
	lostReason  string
	links       []int           // NVLink links that answer
	unsupported map[string]bool // fields this GPU does not support: never read again
	errs        map[string]uint64
	gpm         *gpm.Pair // GPM samples, when WithGPM and supported
	log         *slog.Logger
	slowEvery   int           // collections from one read of the slow fields to the next
	slowTick    int           // collections since the slow fields were last read
	slowCache   []cachedValue // their values, repeated between reads
	static      []cachedValue // fields fixed while the driver holds the GPU (maximum clocks)
	staticRead  bool          // static holds them: read since the GPU was (re)identified
	lastProcs   time.Time     // the previous process observation (WithProcessListener)
	lastUtilTS  uint64        // newest per-process utilisation sample read (NVML's µs)
	lastListed  int           // processes the previous observation listed
	utilSkipped bool          // the per-process utilisation was not read at the last observation
	migRead     bool          // migOn holds the MIG mode, read on the slow cadence
	migOn       bool          // MIG mode was on at its last read
	eventField  []int         // per clockEventCounters entry, which of its fields the driver serves

	migs map[string]migPlacement // MIG UUID -> its GPU instance's placement, of the last collection
}

// slowPeriod: the slow fields are read every slowPeriod (every collection when the interval is
// as long) and repeated in between. They are the error and link counters (ECC, retired pages,
// remapped rows, PCIe replays, NVLink state and errors), which change rarely and are more than
// half of a collection's NVML calls (18 NVLink links × 6 calls on an H200), the energy and
// clock-event (violation) counters, cumulative counters that dashboards and alerts read as
// rates over minutes, and among NVML's dearest calls: on an H100 they were 0.26 s of the 0.44 s
// health spent in 20 s of collections (docs/gpu-validation.md run BK), and BAR1 memory and the
// MIG mode (0.4 and 0.3 ms a call, run CA), which change rarely. XID errors are events, read
// from NVML's queue every second (xid.go); power, clocks, temperatures, utilisation, the clock-event reasons and the
// MIG instances' memory are read every collection.
const slowPeriod = 10 * time.Second

// slowEvery is how many collections of interval apart make slowPeriod (at least one).
func slowEvery(interval time.Duration) int { return max(1, int(slowPeriod/interval)) }

type cachedValue struct {
	d     *descT
	v     float64
	extra []string
}

func (g *gpuState) identify(dev nvml.Device, resolve func(string) (string, bool)) {
	g.dev, g.lost, g.lostReason = dev, false, ""
	g.slowTick, g.slowCache = 0, nil    // read the slow fields at the next collection
	g.static, g.staticRead = nil, false // and the static ones: a reset or new driver may change them
	if g.gpm != nil {
		g.gpm.Restart() // a sample from before a reset does not pair with one after it
	}
	uuid, _ := dev.GetUUID()
	name, _ := dev.GetName()
	var bus string
	if pci, ret := dev.GetPciInfo(); ret == nvml.SUCCESS {
		bus = nvmlpci.BusID(pci)
	}
	g.uuid = uuid
	g.gpu = gpuLabel(uuid, g.index, resolve)
	g.labels = []string{g.gpu, uuid, name, bus}
	g.links = g.links[:0]
	for l := range nvml.NVLINK_MAX_LINKS {
		if _, ret := dev.GetNvLinkState(l); ret != nvml.SUCCESS {
			break
		}
		g.links = append(g.links, l)
	}
}

func (g *gpuState) lose(ret nvml.Return) {
	if !g.lost {
		g.log.Error("GPU lost: its health metrics are withheld until it answers again", "gpu", g.gpu, "uuid", g.uuid, "err", nvml.ErrorString(ret))
	}
	g.lost = true
	g.lostReason = "NVML: " + nvml.ErrorString(ret) + " (the GPU fell off the bus or is being reset: check dmesg for XID 79; retrying every collection)"
	if g.gpu == "" {
		g.gpu = strconv.Itoa(g.index)
	}
}

// skip reports whether field is known unsupported on this GPU (or the GPU is lost).
func (g *gpuState) skip(field string) bool { return g.lost || g.unsupported[field] }

// ok classifies the result of reading field: true on success; a field the GPU does not
// support is remembered and logged once; a lost GPU is marked; other errors are counted.
func (g *gpuState) ok(field string, ret nvml.Return) bool {
	switch ret {
	case nvml.SUCCESS:
		return true
	case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_FUNCTION_NOT_FOUND:
		g.unsupported[field] = true
		g.log.Info("not supported on this GPU: metric left out", "gpu", g.gpu, "field", field)
	case nvml.ERROR_GPU_IS_LOST:
		g.lose(ret)
	default:
		if g.errs[field] == 0 {
			g.log.Warn("NVML read failed", "gpu", g.gpu, "field", field, "err", nvml.ErrorString(ret))
		}
		g.errs[field]++
	}
	return false
}

// collect reads every supported field of the GPU into b; it returns the compute processes
// NVML listed (nil when the list could not be read).
func (g *gpuState) collect(b *builder, podOf func(uint32) (string, string, string, bool), procRoot string) []gpuprocs.Process {
	l := g.labels
	add := func(d *descT, v float64, extra ...string) { b.add(d, v, append(l[:len(l):len(l)], extra...)...) }
	// Memory as nvidia-smi shows it: the v2 query leaves the driver's reserved memory out
	// of "used" (v1 counted it in: 615 MiB more than nvidia-smi on an H200); v1 where v2
	// is not supported.
	v2 := false
	if !g.skip("memory_v2") {
		if m, ret := g.dev.GetMemoryInfo_v2(); g.ok("memory_v2", ret) {
			v2 = true
			add(memoryUsedDesc, float64(m.Used))
			add(memoryFreeDesc, float64(m.Free))
			add(memoryTotalDesc, float64(m.Total))
			add(memoryReservedDesc, float64(m.Reserved))
		}
	}
	if !v2 && !g.skip("memory") {
		if m, ret := g.dev.GetMemoryInfo(); g.ok("memory", ret) {
			add(memoryUsedDesc, float64(m.Used))
			add(memoryFreeDesc, float64(m.Free))
			add(memoryTotalDesc, float64(m.Total))
		}
	}
	if !g.skip("encoder") {
		if u, _, ret := g.dev.GetEncoderUtilization(); g.ok("encoder", ret) {
			add(encUtilDesc, float64(u)/100)
		}
	}
	if !g.skip("decoder") {
		if u, _, ret := g.dev.GetDecoderUtilization(); g.ok("decoder", ret) {
			add(decUtilDesc, float64(u)/100)
		}
	}
	if !g.skip("utilization") {
		if u, ret := g.dev.GetUtilizationRates(); g.ok("utilization", ret) {
			add(nvmlUtilDesc, float64(u.Gpu)/100)
			add(nvmlCopyUtilDesc, float64(u.Memory)/100)
		}
	}
	if !g.skip("power") {
		if mw, ret := g.dev.GetPowerUsage(); g.ok("power", ret) {
			add(powerDesc, float64(mw)/1000)
		}
	}
	if !g.skip("power_limit") {
		if mw, ret := g.dev.GetEnforcedPowerLimit(); g.ok("power_limit", ret) {
			add(powerLimitDesc, float64(mw)/1000)
		}
	}
	if !g.skip("temperature") {
		if c, ret := g.dev.GetTemperature(nvml.TEMPERATURE_GPU); g.ok("temperature", ret) {
			add(tempDesc, float64(c))
		}
	}
	if !g.skip("memory_temperature") {
		if v, ok := g.field(nvml.FI_DEV_MEMORY_TEMP, "memory_temperature"); ok {
			add(memTempDesc, v)
		}
	}
	for _, c := range clockDomains {
		if !g.skip("clock_" + c.name) {
			if mhz, ret := g.dev.GetClockInfo(c.t); g.ok("clock_"+c.name, ret) {
				add(clockDesc, float64(mhz)*1e6, c.name)
			}
		}
	}
	if !g.skip("clock_events") {
		if mask, ret := g.dev.GetCurrentClocksEventReasons(); g.ok("clock_events", ret) {
			for _, r := range clockEventReasons {
				add(clockEventDesc, b01(mask&r.bit != 0), r.name)
			}
		}
	}
	if !g.staticRead {
		g.static, g.staticRead = g.readStatic()
	}
	if g.slowTick%max(g.slowEvery, 1) == 0 {
		g.slowCache = g.slowCache[:0]
		keep := func(d *descT, v float64, extra ...string) {
			g.slowCache = append(g.slowCache, cachedValue{d, v, append([]string(nil), extra...)})
		}
		g.collectCounters(keep)
		g.collectErrors(keep)
		g.collectBAR1(keep)
		g.readMIGMode()
	}
	g.slowTick++
	for _, c := range g.static {
		add(c.d, c.v, c.extra...)
	}
	for _, c := range g.slowCache {
		add(c.d, c.v, c.extra...)
	}
	procs := g.collectProcesses(b, podOf, procRoot)
	g.collectMIG(add)
	return procs
}

// descT shortens the builder signatures.
type descT = snapshot.Desc

// readStatic reads the fields that stay fixed while the driver holds the GPU: its maximum
// clocks (nvmlDeviceGetMaxClockInfo, 1.5 ms of CPU a call on an H100 in run BK). done is false
// when a read failed for a reason other than not being supported: they are read again at the
// next collection. identify clears them, so a GPU that was reset or came back is read anew.
func (g *gpuState) readStatic() (out []cachedValue, done bool) {
	done = true
	for _, c := range clockDomains {
		f := "max_clock_" + c.name
		if g.skip(f) {
			continue
		}
		mhz, ret := g.dev.GetMaxClockInfo(c.t)
		if g.ok(f, ret) {
			out = append(out, cachedValue{maxClockDesc, float64(mhz) * 1e6, []string{c.name}})
		} else if !g.unsupported[f] {
			done = false
		}
	}
	return out, done
}

// collectCounters reads the cumulative energy and clock-event (violation) counters, the
// latter as field values in one call.
func (g *gpuState) collectCounters(add func(*descT, float64, ...string)) {
	if !g.skip("energy") {
		if mj, ret := g.dev.GetTotalEnergyConsumption(); g.ok("energy", ret) {
			add(energyDesc, float64(mj)/1000)
		}
	}
	if g.eventField == nil {
		g.eventField = make([]int, len(clockEventCounters))
	}
	var pending []int
	for i, c := range clockEventCounters {
		if !g.skip("violation_" + c.name) {
			pending = append(pending, i)
		}
	}
	// A field the driver does not serve is asked again at once as the reason's next field
	// (an older driver), so no reason misses a read; the next reads ask that one.
	for len(pending) > 0 {
		ids := make([]uint32, len(pending))
		for j, i := range pending {
			ids[j] = clockEventCounters[i].fields[g.eventField[i]]
		}
		vals, rets := make([]float64, len(ids)), make([]nvml.Return, len(ids))
		nvmlfield.ReadMany(g.dev, ids, vals, rets)
		var next []int
		for j, i := range pending {
			c := clockEventCounters[i]
			if rets[j] == nvml.ERROR_NOT_SUPPORTED && g.eventField[i]+1 < len(c.fields) {
				g.eventField[i]++
				next = append(next, i)
			} else if g.ok("violation_"+c.name, rets[j]) {
				add(violationDesc, vals[j]/1e9, c.name)
			}
		}
		pending = next
	}
}

func (g *gpuState) collectErrors(add func(*descT, float64, ...string)) {
	for _, e := range eccCounters {
		f := "ecc_" + e.typ + "_" + e.counter
		if !g.skip(f) {
			if n, ret := g.dev.GetTotalEccErrors(e.errType, e.counterType); g.ok(f, ret) {
				add(eccDesc, float64(n), e.typ, e.counter)
			}
		}
	}
	for _, c := range []struct {
		name  string
		cause nvml.PageRetirementCause
	}{{"single_bit", nvml.PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS}, {"double_bit", nvml.PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR}} {
		if f := "retired_pages_" + c.name; !g.skip(f) {
			if pages, ret := g.dev.GetRetiredPages(c.cause); g.ok(f, ret) {
				add(retiredDesc, float64(len(pages)), c.name)
			}
		}
	}
	if !g.skip("retired_pages_pending") {
		if st, ret := g.dev.GetRetiredPagesPendingStatus(); g.ok("retired_pages_pending", ret) {
			add(retiredPendingDesc, b01(st == nvml.FEATURE_ENABLED))
		}
	}
	if !g.skip("remapped_rows") {
		if corr, unc, pending, failed, ret := g.dev.GetRemappedRows(); g.ok("remapped_rows", ret) {
			add(remappedDesc, float64(corr), "correctable")
			add(remappedDesc, float64(unc), "uncorrectable")
			add(remapPendingDesc, b01(pending))
			add(remapFailedDesc, b01(failed))
		}
	}
	if !g.skip("pcie_replays") {
		if n, ret := g.dev.GetPcieReplayCounter(); g.ok("pcie_replays", ret) {
			add(pcieReplayDesc, float64(n))
		}
	}
	for _, link := range g.links {
		ls := strconv.Itoa(link)
		if st, ret := g.dev.GetNvLinkState(link); g.ok("nvlink_state", ret) {
			add(nvlinkUpDesc, b01(st == nvml.FEATURE_ENABLED), ls)
		}
		for _, c := range nvlinkCounters {
			if f := "nvlink_" + c.name; !g.skip(f) {
				if n, ret := g.dev.GetNvLinkErrorCounter(link, c.c); g.ok(f, ret) {
					add(nvlinkErrDesc, float64(n), ls, c.name)
				}
			}
		}
	}
}

func (g *gpuState) collectProcesses(b *builder, podOf func(uint32) (string, string, string, bool), procRoot string) []gpuprocs.Process {
	if g.skip("processes") {
		return nil
	}
	procs, ret := g.dev.GetComputeRunningProcesses()
	if !g.ok("processes", ret) {
		return nil
	}
	clients := g.mpsClients()
	for _, c := range clients { // a client the compute list leaves out is a compute process all the same
		if !slices.ContainsFunc(procs, func(p nvml.ProcessInfo) bool { return p.Pid == c.Pid }) {
			procs = append(procs, c)
		}
	}
	out := make([]gpuprocs.Process, 0, len(procs))
	for _, p := range procs {
		var pod, ns, ctr string
		if podOf != nil {
			pod, ns, ctr, _ = podOf(p.Pid)
		}
		b.add(procMemDesc, float64(p.UsedGpuMemory), append(append([]string{}, g.labels...), strconv.FormatUint(uint64(p.Pid), 10), ns, pod, ctr)...)
		q := gpuprocs.Process{PID: p.Pid, SMShare: math.NaN(), Namespace: ns, Pod: pod, Container: ctr}
		switch {
		case slices.ContainsFunc(clients, func(c nvml.ProcessInfo) bool { return c.Pid == p.Pid }):
			q.MPS = gpuprocs.MPSClient
		case isMPSServer(procRoot, p.Pid):
			q.MPS = gpuprocs.MPSServer
		}
		out = append(out, q)
	}
	return out
}

// mpsClients lists the MPS clients on the GPU (nvmlDeviceGetMPSComputeRunningProcesses); none
// where MPS is not running or the driver does not say.
func (g *gpuState) mpsClients() []nvml.ProcessInfo {
	if g.skip("mps_processes") {
		return nil
	}
	clients, ret := g.dev.GetMPSComputeRunningProcesses()
	if !g.ok("mps_processes", ret) {
		return nil
	}
	return clients
}

// collectBAR1 reads the BAR1 memory (0.4 ms of CPU a call on an H100, run CA), a slow field:
// its size is fixed and its use changes with the mappings a process makes, not from one
// second to the next.
func (g *gpuState) collectBAR1(add func(*descT, float64, ...string)) {
	if g.skip("bar1") {
		return
	}
	if m, ret := g.dev.GetBAR1MemoryInfo(); g.ok("bar1", ret) {
		add(bar1UsedDesc, float64(m.Bar1Used))
		add(bar1TotalDesc, float64(m.Bar1Total))
	}
}

// readMIGMode reads the MIG mode (0.3 ms of CPU a call on an H100, run CA) on the slow cadence:
// it changes only when an administrator switches it on an idle GPU. A failed read leaves it
// unknown (no MIG series) until the next one.
func (g *gpuState) readMIGMode() {
	g.migRead = false
	if g.skip("mig") {
		return
	}
	cur, _, ret := g.dev.GetMigMode()
	if g.ok("mig", ret) {
		g.migRead, g.migOn = true, cur == nvml.DEVICE_MIG_ENABLE
	}
}

// collectMIG reports the MIG mode (as last read) and, when it is on, each MIG device's
// memory, read every collection.
func (g *gpuState) collectMIG(add func(*descT, float64, ...string)) {
	if !g.migRead {
		return
	}
	add(migModeDesc, b01(g.migOn))
	if !g.migOn {
		g.migs = nil
		return
	}
	n, ret := g.dev.GetMaxMigDeviceCount()
	if !g.ok("mig_count", ret) {
		return
	}
	seen := make(map[string]migPlacement, len(g.migs))
	defer func() { g.migs = seen }()
	for i := range n {
		mig, ret := g.dev.GetMigDeviceHandleByIndex(i)
		if ret != nvml.SUCCESS {
			continue // an empty slot answers NOT_FOUND
		}
		gi, r1 := mig.GetGpuInstanceId()
		if r1 == nvml.SUCCESS {
			g.placeMIG(mig, gi, seen)
		}
		ci, r2 := mig.GetComputeInstanceId()
		m, r3 := mig.GetMemoryInfo()
		if r1 != nvml.SUCCESS || r2 != nvml.SUCCESS || r3 != nvml.SUCCESS {
			continue
		}
		name, _ := mig.GetName()
		profile := name
		if _, p, ok := strings.Cut(name, "MIG "); ok {
			profile = p
		}
		gs, cs := strconv.Itoa(gi), strconv.Itoa(ci)
		add(migMemDesc, float64(m.Used), gs, cs, profile)
		add(migMemTotalDesc, float64(m.Total), gs, cs, profile)
	}
}

// migPlacement is where a MIG device's GPU instance sits: its profile ID and the start of
// its placement, which is how NVIDIA's DRA driver names a MIG device it creates on demand.
type migPlacement struct{ profileID, start int }

// placeMIG records the MIG device's UUID with its GPU instance's profile and placement in
// seen. The placement of a UUID already known is not read again (a GPU instance keeps it
// for life; a new one gets a new UUID).
func (g *gpuState) placeMIG(mig nvml.Device, gi int, seen map[string]migPlacement) {
	uuid, ret := mig.GetUUID()
	if ret != nvml.SUCCESS || uuid == "" {
		return
	}
	if p, ok := g.migs[uuid]; ok {
		seen[uuid] = p
		return
	}
	if g.skip("mig_placement") {
		return
	}
	inst, ret := g.dev.GetGpuInstanceById(gi)
	if !g.ok("mig_placement", ret) {
		return
	}
	info, ret := inst.GetInfo()
	if !g.ok("mig_placement", ret) {
		return
	}
	seen[uuid] = migPlacement{profileID: int(info.ProfileId), start: int(info.Placement.Start)}
}

// field reads one NVML field value as a float.
func (g *gpuState) field(id uint32, name string) (float64, bool) {
	v, ret := nvmlfield.Read(g.dev, id)
	return v, g.ok(name, ret)
}

func b01(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

var clockDomains = []struct {
	name string
	t    nvml.ClockType
}{{"sm", nvml.CLOCK_SM}, {"memory", nvml.CLOCK_MEM}, {"graphics", nvml.CLOCK_GRAPHICS}}

// clockEventReasons are the bits of nvmlDeviceGetCurrentClocksEventReasons (nvml.h).
var clockEventReasons = []struct {
	name string
	bit  uint64
}{
	{"gpu_idle", 0x1}, {"applications_clocks_setting", 0x2}, {"sw_power_cap", 0x4}, {"hw_slowdown", 0x8},
	{"sync_boost", 0x10}, {"sw_thermal_slowdown", 0x20}, {"hw_thermal_slowdown", 0x40},
	{"hw_power_brake_slowdown", 0x80}, {"display_clock_setting", 0x100},
}

// clockEventCounters are the clock-event (violation) counters, the time (ns) the clocks were
// held below the requested level for each reason, as NVML field values: nvml.h names these
// fields as what replaces nvmlDeviceGetViolationStatus (deprecated in CUDA 13.0, to be removed
// in 14.0), and they read its values to the nanosecond (docs/gpu-validation.md run EN). A
// reason takes the first of its fields that the driver serves. The two hardware slowdowns have
// no policy of the old call.
var clockEventCounters = []struct {
	name   string
	fields []uint32
}{
	{"power", []uint32{nvml.FI_DEV_CLOCKS_EVENT_REASON_SW_POWER_CAP}},
	{"thermal", []uint32{nvml.FI_DEV_CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN, nvml.FI_DEV_PERF_POLICY_THERMAL}},
	{"sync_boost", []uint32{nvml.FI_DEV_CLOCKS_EVENT_REASON_SYNC_BOOST}},
	{"board_limit", []uint32{nvml.FI_DEV_PERF_POLICY_BOARD_LIMIT}},
	{"low_utilization", []uint32{nvml.FI_DEV_PERF_POLICY_LOW_UTILIZATION}},
	{"reliability", []uint32{nvml.FI_DEV_PERF_POLICY_RELIABILITY}},
	{"app_clocks", []uint32{nvml.FI_DEV_PERF_POLICY_TOTAL_APP_CLOCKS}}, // deprecated in nvml.h, still served by driver 580
	{"base_clocks", []uint32{nvml.FI_DEV_PERF_POLICY_TOTAL_BASE_CLOCKS}},
	{"hw_thermal_slowdown", []uint32{nvml.FI_DEV_CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN}},
	{"hw_power_brake_slowdown", []uint32{nvml.FI_DEV_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN}},
}

var eccCounters = []struct {
	typ, counter string
	errType      nvml.MemoryErrorType
	counterType  nvml.EccCounterType
}{
	{"corrected", "volatile", nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.VOLATILE_ECC},
	{"uncorrected", "volatile", nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.VOLATILE_ECC},
	{"corrected", "aggregate", nvml.MEMORY_ERROR_TYPE_CORRECTED, nvml.AGGREGATE_ECC},
	{"uncorrected", "aggregate", nvml.MEMORY_ERROR_TYPE_UNCORRECTED, nvml.AGGREGATE_ECC},
}

var nvlinkCounters = []struct {
	name string
	c    nvml.NvLinkErrorCounter
}{
	{"replay", nvml.NVLINK_ERROR_DL_REPLAY}, {"recovery", nvml.NVLINK_ERROR_DL_RECOVERY},
	{"crc_flit", nvml.NVLINK_ERROR_DL_CRC_FLIT}, {"crc_data", nvml.NVLINK_ERROR_DL_CRC_DATA},
	{"ecc_data", nvml.NVLINK_ERROR_DL_ECC_DATA},
}
