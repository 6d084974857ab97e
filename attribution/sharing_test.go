package attribution

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity"
	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/attribution/turns"
	"github.com/cupti-exporter/cupti-exporter/gpuprocs"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// TestTimeSlicedManyProcesses is issue 31's regression for three and more processes
// time-slicing a GPU with untraced ones among them: 2 ms turns kept across kernels in a
// fixed rotation, the context-switch counter in the samples, NVML's period shares. Every
// traced pod keeps its own bytes (bound 8 %) and the untraced processes' class theirs
// (bound 15 %). The join before the turns model applied the context switches only to one
// traced beside one untraced process; with more it split by NVML's shares: the traced pods
// were off by +20 % to +60 % here.
func TestTimeSlicedManyProcesses(t *testing.T) {
	const span = 12 * int64(time.Second)
	stream := [2]string{"stream", "spin"}
	other := [2]string{"copy_big", "wait"}
	traced := func(pid uint32, pod string, s, rate float64, names [2]string) simProc {
		return simProc{pid: pid, pod: pod, traced: true, stream: s, rate: rate, names: names, pause: 0.3}
	}
	bursty := func(pid uint32, pod string, s, rate float64, names [2]string) simProc {
		return simProc{pid: pid, pod: pod, traced: true, stream: s, rate: rate, names: names, pause: 0.9}
	}
	untraced := func(pid uint32, s, rate float64, names [2]string) simProc {
		return simProc{pid: pid, stream: s, rate: rate, names: names, pause: 0.3}
	}
	cases := []struct {
		name  string
		procs []simProc
		bound float64 // of a traced pod's error (default 8 %)
	}{
		{"2 traced + 1 untraced", []simProc{traced(10, "pod0", 0.7, 1000, stream), traced(11, "pod1", 0.3, 1000, stream), untraced(20, 0.6, 1500, other)}, 0},
		{"1 traced + 2 untraced", []simProc{traced(10, "pod0", 0.5, 1000, stream), untraced(20, 0.6, 1500, other), untraced(21, 0.4, 800, stream)}, 0},
		{"3 traced + 1 untraced", []simProc{traced(10, "pod0", 0.7, 1000, stream), traced(11, "pod1", 0.3, 1000, stream),
			traced(12, "pod2", 0.5, 2000, other), untraced(20, 0.6, 1500, other)}, 0},
		{"3 traced", []simProc{traced(10, "pod0", 0.7, 1000, stream), traced(11, "pod1", 0.3, 1000, stream), traced(12, "pod2", 0.5, 2000, other)}, 0},
		// A pod whose kernels end early in a sample holding a switch gave the rest of its
		// share to quiet (-4.2 % to -5.4 % here; -9 % on run BB's recordings); now to the
		// other turns.
		{"3 traced, one bursty", []simProc{bursty(10, "pod0", 0.9, 1500, stream), traced(11, "pod1", 0.7, 1000, stream), traced(12, "pod2", 0.5, 2000, other)}, 0.035},
	}
	for _, c := range cases {
		for seed := range uint64(3) {
			t.Run(fmt.Sprintf("%s/seed%d", c.name, seed), func(t *testing.T) {
				g := makeSlicedGPU(rand.New(rand.NewPCG(seed, 31)), c.procs, span, 2*ms, true)
				g.switches = true
				snap := runShared(t, g, span)
				var errs []string
				var untr, untrTruth float64
				for p, sp := range g.procs {
					if !sp.traced {
						untrTruth += g.bytes[p]
						continue
					}
					got := byLabels(snap, "cupti_pod_pcie_bytes_total", map[string]string{"pod": sp.pod, "source": "kernel"})
					e := got/g.bytes[p] - 1
					errs = append(errs, fmt.Sprintf("%s %+.3f", sp.pod, e))
					bound := c.bound
					if bound == 0 {
						bound = 0.08
					}
					if math.Abs(e) > bound {
						t.Errorf("traced %s: %.4g bytes, truth %.4g (%+.1f %%, bound %.1f %%)", sp.pod, got, g.bytes[p], 100*e, 100*bound)
					}
				}
				if untrTruth > 0 {
					untr = byLabels(snap, "cupti_kernel_pcie_bytes_total", map[string]string{"kernel": labelUntraced})
					e := untr/untrTruth - 1
					errs = append(errs, fmt.Sprintf("(untraced) %+.3f", e))
					if math.Abs(e) > 0.15 {
						t.Errorf("(untraced): %.4g bytes, truth %.4g (%+.1f %%, bound 15 %%)", untr, untrTruth, 100*e)
					}
				}
				// The gauge says which of these rest on an estimate: the turns an untraced
				// process took, not the turns of traced ones alone.
				u, _ := value(snap, "cupti_attribution_uncertain_ratio", "0")
				t.Logf("bytes errors: %s; uncertain %.2f", strings.Join(errs, ", "), u)
				if untrTruth > 0 && u < 0.5 || untrTruth == 0 && u > 0.2 {
					t.Errorf("uncertain ratio %.2f with untraced processes %v", u, untrTruth > 0)
				}
			})
		}
	}
}

// TestSwitchTimeIsNobodys: where each change of the running process takes as long as real
// ones (turns.CyclesPerSwitch × turns.SwitchNanosPerCycle, nothing running meanwhile), the
// time of a switch belongs to no process. Shared by the turns' odds, it went to a process
// whose kernel spanned the switch, and the pod whose kernels read the most bytes a second got
// more than its own beside ones that read fewer: +0.8 to +1.0 %, the others −2.0 % to −3.8 %
// (within 2.2 % with the switch placed, turns.Owners.Sides, and its time quiet).
func TestSwitchTimeIsNobodys(t *testing.T) {
	const span = 12 * int64(time.Second)
	procs := []simProc{
		{pid: 10, pod: "pod0", traced: true, stream: 0.9, rate: 3000, names: [2]string{"stream", "spin"}, pause: 0.1},
		{pid: 11, pod: "pod1", traced: true, stream: 0.5, rate: 500, names: [2]string{"light", "wait"}, pause: 0.3},
		{pid: 12, pod: "pod2", traced: true, stream: 0.7, rate: 1000, names: [2]string{"copy", "idle"}, pause: 0.3},
	}
	dead := int64(turns.CyclesPerSwitch * turns.SwitchNanosPerCycle)
	for seed := range uint64(3) {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			g := makeSwitchingGPU(rand.New(rand.NewPCG(seed, 51)), procs, span, 2*ms, true, dead)
			g.switches = true
			snap := runShared(t, g, span)
			var errs []string
			for p, sp := range g.procs {
				got := byLabels(snap, "cupti_pod_pcie_bytes_total", map[string]string{"pod": sp.pod, "source": "kernel"})
				e := got/g.bytes[p] - 1
				errs = append(errs, fmt.Sprintf("%s %+.2f %%", sp.pod, 100*e))
				if math.Abs(e) > 0.03 {
					t.Errorf("%s: %.4g bytes, truth %.4g (%+.2f %%, bound 3 %%)", sp.pod, got, g.bytes[p], 100*e)
				}
			}
			t.Logf("%d switches; bytes errors: %s", len(g.switchAt), strings.Join(errs, ", "))
		})
	}
}

// TestMIGGPUNotSplit: on a GPU in MIG mode the instances run side by side and the samples
// cover them all, so the join splits nothing by process: NVML's processes of every instance
// get no class, the traced records that still map to the GPU keep nothing, every sample's
// time and bytes go to kernel="(untraced)", and the uncertainty gauge says 1. Conservation
// holds as everywhere.
func TestMIGGPUNotSplit(t *testing.T) {
	a, clk := oneKernelGPU(t)
	a.ObserveProcesses(gpuprocs.Observation{GPU: "0", UUID: "GPU-aaaa", Start: time.Unix(0, t0), End: time.Unix(0, t0+2*int64(time.Second)),
		Shares: true, MIG: true, Processes: []gpuprocs.Process{{PID: 10, SMShare: 0.5}, {PID: 20, SMShare: 0.4}}})
	clk.set(t0 + 2*int64(time.Second))
	a.Add(pmdata.Batch{Device: 0, Metrics: testMetrics, Samples: samples(t0, ms, 1000, func(s, e int64) []float64 { return []float64{50, 1000} })})
	clk.advance(5 * time.Second)
	a.Flush()
	snap := a.Snapshot()
	all := sum(snap, "cupti_kernel_pcie_bytes_total", "0")
	untr := byLabels(snap, "cupti_kernel_pcie_bytes_total", map[string]string{"kernel": labelUntraced})
	if !near(all, 1000*1000, 1e-9) || !near(untr, all, 1e-9) {
		t.Errorf("bytes: (untraced) %v of %v, want all of 1e6", untr, all)
	}
	if pod := byLabels(snap, "cupti_pod_pcie_bytes_total", map[string]string{"pod": "pod0"}); pod != 0 {
		t.Errorf("traced pod0 got %v bytes on a MIG GPU, want none", pod)
	}
	if n := byLabels(snap, "cupti_pod_sampled_seconds_total", map[string]string{"source": sourceNVML}); n != 0 {
		t.Errorf("NVML's processes got %v s on a MIG GPU, want none", n)
	}
	if u, _ := value(snap, "cupti_attribution_uncertain_ratio", "0"); u != 1 {
		t.Errorf("uncertain ratio %v on a MIG GPU, want 1", u)
	}
	checkSharing(t, snap, "mig", 1)
}

// oneKernelGPU is a join (watermark 1 s) with one traced process, pod0 (pid 10), on GPU 0,
// traced from t0 for 3 s, that ran one kernel from t0+100 ms to t0+900 ms.
func oneKernelGPU(t *testing.T) (*Attributor, *fakeClock) {
	a, clk := newTest(t, WithWatermark(time.Second))
	p, info := newProc(10, "pod0", "0")
	a.ProcessConnected(p, info)
	a.Coverage(p, []record.Interval{{Start: uint64(t0), End: uint64(t0 + 3*int64(time.Second))}})
	a.Records(p, []record.Record{kernel(0, "k", t0+100*ms, t0+900*ms)})
	return a, clk
}

// checkSharing checks that at least share of the attributed sample time counted under
// cupti_attribution_sharing_seconds_total's mode.
func checkSharing(t *testing.T, snap *snapshot.Snapshot, mode string, share float64) {
	t.Helper()
	all := sum(snap, "cupti_attribution_seconds_total", "0")
	got := byLabels(snap, "cupti_attribution_sharing_seconds_total", map[string]string{"mode": mode})
	if all <= 0 || got < share*all-1e-9 {
		t.Errorf("sharing: %v s of %v counted as %s, want at least %.0f %%", got, all, mode, 100*share)
	}
}

// TestSharingExclusive: a GPU with one traced process on it, and no NVML observation, counts
// none of its time as shared (no series); a second process connected on it makes the time it
// was present time-sliced.
func TestSharingExclusive(t *testing.T) {
	a, clk := oneKernelGPU(t)
	clk.set(t0 + int64(time.Second))
	a.Add(pmdata.Batch{Device: 0, Metrics: testMetrics, Samples: samples(t0, ms, 1000, func(s, e int64) []float64 { return []float64{50, 1000} })})
	clk.advance(5 * time.Second)
	a.Flush()
	snap := a.Snapshot()
	if all := sum(snap, "cupti_attribution_seconds_total", "0"); !near(all, 1, 1e-6) {
		t.Errorf("attributed %v s, want 1", all)
	}
	if n := sum(snap, "cupti_attribution_sharing_seconds_total", "0"); n != 0 {
		t.Errorf("one process alone counted %v s as shared, want none (no series)", n)
	}
	q, info2 := newProc(11, "pod1", "0")
	a.ProcessConnected(q, info2)
	start := clk.now().UnixNano()
	a.Coverage(q, []record.Interval{{Start: uint64(start), End: uint64(start + 3*int64(time.Second))}})
	a.Add(pmdata.Batch{Device: 0, Metrics: testMetrics, Samples: samples(start, ms, 1000, func(s, e int64) []float64 { return []float64{50, 1000} })})
	clk.advance(5 * time.Second)
	a.Flush()
	snap = a.Snapshot()
	sliced := byLabels(snap, "cupti_attribution_sharing_seconds_total", map[string]string{"mode": "time_sliced"})
	if !near(sliced, 1, 1e-6) {
		t.Errorf("two processes on the GPU for 1 s counted %v s as time_sliced, want 1", sliced)
	}
}

// mpsGPU simulates MPS: the clients' kernels run side by side in the server's context
// (each moves its own bytes per ms whatever the others do) and the context-switch counter
// stays at 0; NVML lists the server (credited with the GPU's time) and the clients (none).
type mpsGPU struct {
	recs  [][]record.Record
	runs  [][2]int64 // per client, its kernels' spans
	rates []float64  // per record, bytes per ns
	owner []int
	bytes []float64
	// slowed: per record, the spans in which another client's kernel ran beside it, and the
	// share of its rate it keeps there (slow; 1 without).
	beside [][][2]int64
	keep   []float64
}

// slow makes each client's kernels move keep[c] of their bytes per ns while a kernel of
// another client runs beside them, and recounts the clients' bytes.
func (g *mpsGPU) slow(keep []float64) {
	g.beside, g.keep = make([][][2]int64, len(g.runs)), make([]float64, len(g.runs))
	clear(g.bytes)
	for i, r := range g.runs {
		g.keep[i] = keep[g.owner[i]]
		for j, o := range g.runs {
			if g.owner[j] != g.owner[i] && o[0] < r[1] && r[0] < o[1] {
				g.beside[i] = append(g.beside[i], [2]int64{max(r[0], o[0]), min(r[1], o[1])})
			}
		}
		g.bytes[g.owner[i]] += g.bytesIn(i, r[0], r[1])
	}
}

// bytesIn is what record i moved in [s, e).
func (g *mpsGPU) bytesIn(i int, s, e int64) float64 {
	r := g.runs[i]
	ov := min(e, r[1]) - max(s, r[0])
	if ov <= 0 {
		return 0
	}
	b := g.rates[i] * float64(ov)
	if g.keep != nil {
		for _, x := range g.beside[i] {
			if o := min(e, x[1]) - max(s, x[0]); o > 0 {
				b -= g.rates[i] * (1 - g.keep[i]) * float64(o)
			}
		}
	}
	return b
}

// makeMPS lays out each client's kernels over span: 40 % spin kernels (no bytes), the rest
// streaming at rate[c] bytes per ms, 0.25-3.25 ms each, an idle gap of up to 2 ms after each
// with probability gap[c].
func makeMPS(rng *rand.Rand, clients int, span int64, rate, gap []float64) *mpsGPU {
	g := &mpsGPU{recs: make([][]record.Record, clients), bytes: make([]float64, clients)}
	for c := range clients {
		t := t0
		for t < t0+span {
			d := ms/4 + rng.Int64N(3*ms)
			name, r := "stream", rate[c]/float64(ms)
			if rng.Float64() < 0.4 {
				name, r = "spin", 0
			}
			g.recs[c] = append(g.recs[c], kernel(0, name, t, t+d))
			g.runs = append(g.runs, [2]int64{t, t + d})
			g.rates = append(g.rates, r)
			g.owner = append(g.owner, c)
			g.bytes[c] += r * float64(d)
			t += d
			if rng.Float64() < gap[c] {
				t += rng.Int64N(2 * ms)
			}
		}
	}
	return g
}

func (g *mpsGPU) valueAt(s, e int64) []float64 {
	var bytes, active float64
	for i, r := range g.runs {
		if ov := min(e, r[1]) - max(s, r[0]); ov > 0 {
			bytes += g.bytesIn(i, s, e)
			active = max(active, float64(ov))
		}
	}
	return []float64{100 * active / float64(e-s), bytes, 0}
}

// runMPS joins g's two traced clients' records and samples over span, with NVML's
// observations of an MPS server and its clients each second, and returns the snapshot.
func runMPS(t *testing.T, g *mpsGPU, span int64) *snapshot.Snapshot {
	t.Helper()
	a, clk := newTest(t, WithWatermark(time.Second))
	procs := make([]*record.Process, 2)
	for c := range procs {
		var info activity.ProcessInfo
		procs[c], info = newProc(uint32(10+c), fmt.Sprintf("pod%d", c), "0")
		a.ProcessConnected(procs[c], info)
		a.Coverage(procs[c], []record.Interval{{Start: uint64(t0 - ms), End: uint64(t0 + 2*span)}})
	}
	next := make([]int, 2)
	step := 100 * ms
	metrics := append(slices.Clip(testMetrics), switchMetric)
	for now := t0; now < t0+span; now += step {
		clk.set(now + step)
		for c := range procs {
			var recs []record.Record
			for next[c] < len(g.recs[c]) && int64(g.recs[c][next[c]].Start) < now+step {
				recs = append(recs, g.recs[c][next[c]])
				next[c]++
			}
			a.Records(procs[c], recs)
		}
		if (now+step-t0)%int64(time.Second) == 0 {
			a.ObserveProcesses(gpuprocs.Observation{GPU: "0", Start: time.Unix(0, now+step-int64(time.Second)), End: time.Unix(0, now+step), Shares: true,
				Processes: []gpuprocs.Process{{PID: 99, SMShare: 0.99, MPS: gpuprocs.MPSServer}, {PID: 10, MPS: gpuprocs.MPSClient}, {PID: 11, MPS: gpuprocs.MPSClient}}})
		}
		a.Add(pmdata.Batch{Device: 0, Metrics: metrics, Samples: samples(now, ms, int(step/ms), g.valueAt)})
	}
	clk.advance(5 * time.Second)
	a.Flush()
	return a.Snapshot()
}

// TestMPSClients is issue 31's regression for MPS: NVML lists the MPS server beside its
// clients and credits it with the GPU's time; the join must not take it for a workload (the
// join before this gave it nearly every byte: the traced clients were off by -87 % and -100 %
// on an H100, run BB), and the clients' concurrent kernels are split by the rate fit: each
// traced client within 5 %.
func TestMPSClients(t *testing.T) {
	const span = 8 * int64(time.Second)
	for seed := range uint64(3) {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			g := makeMPS(rand.New(rand.NewPCG(seed, 31)), 2, span, []float64{1000, 2500}, []float64{0.3, 0.3})
			snap := runMPS(t, g, span)
			procs := g.recs
			for c := range procs {
				got := byLabels(snap, "cupti_pod_pcie_bytes_total", map[string]string{"pod": fmt.Sprintf("pod%d", c), "source": "kernel"})
				e := got/g.bytes[c] - 1
				t.Logf("MPS client pod%d: bytes error %+.4f", c, e)
				if math.Abs(e) > 0.05 {
					t.Errorf("MPS client pod%d: %.4g bytes, truth %.4g (%+.1f %%, bound 5 %%)", c, got, g.bytes[c], 100*e)
				}
			}
			if u := byLabels(snap, "cupti_kernel_pcie_bytes_total", map[string]string{"kernel": labelUntraced}); u > 0.001*(g.bytes[0]+g.bytes[1]) {
				t.Errorf("(untraced) got %.4g bytes: the MPS server taken for a workload", u)
			}
			if s := byLabels(snap, "cupti_pod_sampled_seconds_total", map[string]string{"source": sourceNVML}); s > 0 {
				t.Errorf("NVML's processes got %.3f s: the MPS server taken for a workload", s)
			}
		})
	}
}

// TestUntracedIdleEdges is issue 31's regression for the untraced process's exposure: a
// sample it owns in which the GPU hardly worked (here: it starts up alone with short, light
// kernels while the traced pod waits; in the H100 recordings of run BB, 0.37 s of the 4.1 s
// an untraced client owned had the engine active less than half the time, nearly all within
// one second) exposes it to the rate fit only for the time the graphics engine was active.
// Counted whole, those samples lowered its rate, and the samples shared at a context switch
// gave it too little for the rest of the run: on the recordings, an untraced client −26 %
// (−8 % by active time); here the untraced process −22 % and the traced pod +33 % before,
// within 8 % after (−5 %, +8 %: samples holding a switch are shared as byOwner says).
func TestUntracedIdleEdges(t *testing.T) {
	const span, warm = 12 * int64(time.Second), 2 * int64(time.Second)
	procs := []simProc{
		{pid: 10, pod: "pod0", traced: true, stream: 0.6, rate: 1000, names: [2]string{"stream", "spin"}, pause: 0.3},
		{pid: 20, stream: 0.6, rate: 1500, names: [2]string{"copy_big", "wait"}, pause: 0.3},
	}
	for seed := range uint64(3) {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			g := makeSlicedGPU(rand.New(rand.NewPCG(seed, 41)), procs, span-warm, 2*ms, true)
			g.switches = true
			g.startUp(1, warm, 30*time.Microsecond, 10)
			snap := runShared(t, g, span)
			got := byLabels(snap, "cupti_kernel_pcie_bytes_total", map[string]string{"kernel": labelUntraced})
			pod := byLabels(snap, "cupti_pod_pcie_bytes_total", map[string]string{"pod": "pod0", "source": "kernel"})
			eu, et := got/g.bytes[1]-1, pod/g.bytes[0]-1
			t.Logf("untraced %+.3f, traced %+.3f", eu, et)
			if math.Abs(eu) > 0.08 || math.Abs(et) > 0.08 {
				t.Errorf("untraced %+.1f %%, traced pod %+.1f %% (bound 8 %%)", 100*eu, 100*et)
			}
		})
	}
}

// startUp delays the timeline by warm, in which process p runs alone a kernel of length k
// every millisecond moving rate bytes/ms (a process starting up while the others wait).
func (g *sharedGPU) startUp(p int, warm int64, k time.Duration, rate float64) {
	for i := range g.exec {
		g.exec[i].start += warm
		g.exec[i].end += warm
	}
	for _, recs := range g.recs {
		for i := range recs {
			recs[i].Start += uint64(warm)
			recs[i].End += uint64(warm)
		}
	}
	var pre []simExec
	for t := t0; t+int64(k) <= t0+warm; t += ms {
		pre = append(pre, simExec{t, t + int64(k), p, rate / float64(ms)})
		g.bytes[p] += rate / float64(ms) * float64(k)
	}
	g.exec = append(pre, g.exec...)
	if !g.procs[p].traced {
		return
	}
	for _, x := range pre {
		g.recs[p] = append(g.recs[p], kernel(0, g.procs[p].names[0], x.start, x.end))
	}
	slices.SortFunc(g.recs[p], func(a, b record.Record) int { return int(a.Start - b.Start) })
}

// TestMPSAloneAndBeside is issue 31's regression for MPS clients that slow each other: a
// client's kernel moves its own bytes per ms alone, and beside a kernel of the other client the
// two share a DRAM bandwidth below what both move alone, each in proportion to what it moves
// alone (both keep 57 % here). One client is rarely alone (a gap after 10 % of its kernels),
// the other often (90 %). One rate per kernel fitted over every sample averages its alone and
// beside samples, in other proportions for each client, and splits the shared samples by those
// averages (the often-alone client −12 % and −9 % on two of the three seeds); fitted where the
// client ran alone and held in the shared samples, the split follows what each moves alone.
// Each client within 5 %. (Where the clients keep unequal shares, e.g. a narrow kernel
// slowed more than a wide one, neither fit is within 5 %: docs/attribution.md.)
func TestMPSAloneAndBeside(t *testing.T) {
	const span = 8 * int64(time.Second)
	for seed := range uint64(3) {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			g := makeMPS(rand.New(rand.NewPCG(seed, 31)), 2, span, []float64{1000, 2500}, []float64{0.9, 0.1})
			g.slow([]float64{0.57, 0.57})
			snap := runMPS(t, g, span)
			checkSharing(t, snap, "mps", 0.85)
			for c := range 2 {
				got := byLabels(snap, "cupti_pod_pcie_bytes_total", map[string]string{"pod": fmt.Sprintf("pod%d", c), "source": "kernel"})
				e := got/g.bytes[c] - 1
				t.Logf("MPS client pod%d: bytes error %+.4f", c, e)
				if math.Abs(e) > 0.05 {
					t.Errorf("MPS client pod%d: %.4g bytes, truth %.4g (%+.1f %%, bound 5 %%)", c, got, g.bytes[c], 100*e)
				}
			}
		})
	}
}
