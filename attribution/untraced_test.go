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

// simProc is one process of a simulated GPU shared by time-slicing.
type simProc struct {
	pid        uint32
	pod        string // its pod ("" none)
	traced     bool   // loads the injection library: its kernel records reach the join
	resolvable bool   // untraced: NVML's PID resolves to its pod
	stream     float64
	rate       float64 // bytes per ms of a streaming kernel
	names      [2]string
	pause      float64 // chance of an idle gap (0-4 ms) after each kernel
	// exit: the process starts no kernel after t0+exit (0: it runs throughout) and is gone
	// from NVML's list, and from its utilisation samples, at the first read after that.
	exit int64
}

// sharedGPU is a timeline of processes time-slicing GPU 0 in 0.25 ms slices: a kernel's
// record spans the slices the other contexts ran too; each process alternates streaming
// kernels (rate bytes/ms) and spin kernels (none) of 0.5-3 ms with idle gaps.
type sharedGPU struct {
	procs []simProc
	// switches: the PM samples count context-switch cycles (turns.CyclesPerSwitch at every change
	// of the running process), as FE_A.TriageCompute.gpu__gr_cycles_active_cmd_ctxsw does.
	switches bool
	// noShares: NVML's observations carry no per-process shares (NVML health reads none for a
	// GPU that lists one process).
	noShares bool
	// dead: each change of the running process takes this long, in which nothing runs (the
	// switch's cycles spread over it); 0: changes take no time, and a sample counts
	// turns.CyclesPerSwitch where the next process starts.
	dead     int64
	switchAt []int64 // the start of each change, where dead > 0
	recs     [][]record.Record
	exec     []simExec
	bytes    []float64 // true bytes per process
	idle     float64   // seconds nothing ran
}

type simExec struct {
	start, end int64
	proc       int
	rate       float64 // bytes per ns
}

func makeSharedGPU(rng *rand.Rand, procs []simProc, span int64) *sharedGPU {
	return makeSlicedGPU(rng, procs, span, ms/4, false)
}

// makeSlicedGPU is makeSharedGPU with turns of the given length. With keepTurn a process
// keeps the GPU across its kernels until its turn is over or it has no work, as the
// hardware's scheduler does (scripts/gpu/tsprobe.cu: 2.09 ms turns on an H100); without,
// the turn passes at every kernel's end too.
func makeSlicedGPU(rng *rand.Rand, procs []simProc, span, slice int64, keepTurn bool) *sharedGPU {
	return makeSwitchingGPU(rng, procs, span, slice, keepTurn, 0)
}

// makeSwitchingGPU is makeSlicedGPU with each change of the running process taking dead ns.
func makeSwitchingGPU(rng *rand.Rand, procs []simProc, span, slice int64, keepTurn bool, dead int64) *sharedGPU {
	g := &sharedGPU{procs: procs, recs: make([][]record.Record, len(procs)), bytes: make([]float64, len(procs)), dead: dead}
	type job struct {
		left, start int64
		rate        float64
		name        string
	}
	cur := make([]*job, len(procs))
	idleUntil := make([]int64, len(procs))
	t, turn := t0, 0
	owner, turnLeft := -1, int64(0)
	for t < t0+span {
		for p, sp := range procs {
			if sp.exit > 0 && t >= t0+sp.exit {
				idleUntil[p] = math.MaxInt64
			}
			if cur[p] == nil && t >= idleUntil[p] {
				j := &job{left: ms/2 + rng.Int64N(5*ms/2), start: -1, name: sp.names[1]}
				if rng.Float64() < sp.stream {
					j.rate, j.name = sp.rate/float64(ms), sp.names[0]
				}
				cur[p] = j
			}
		}
		p := -1
		if keepTurn && owner >= 0 && cur[owner] != nil && turnLeft > 0 {
			p = owner
		}
		for k := range procs {
			if p >= 0 {
				break
			}
			if q := (turn + k) % len(procs); cur[q] != nil {
				p, owner, turnLeft = q, q, slice
			}
		}
		if p < 0 { // all idle until the first one wakes
			next := int64(math.MaxInt64)
			for _, u := range idleUntil {
				next = min(next, u)
			}
			g.idle += float64(next-t) / 1e9
			t = next
			continue
		}
		if n := len(g.exec); dead > 0 && n > 0 && g.exec[n-1].proc != p {
			g.switchAt = append(g.switchAt, t)
			t += dead
		}
		j := cur[p]
		if j.start < 0 {
			j.start = t
		}
		run := min(slice, j.left)
		if keepTurn {
			run = min(turnLeft, j.left)
			turnLeft -= run
		}
		g.exec = append(g.exec, simExec{t, t + run, p, j.rate})
		g.bytes[p] += j.rate * float64(run)
		j.left -= run
		t += run
		if j.left == 0 {
			g.recs[p] = append(g.recs[p], kernel(0, j.name, j.start, t))
			cur[p] = nil
			if rng.Float64() < procs[p].pause {
				idleUntil[p] = t + rng.Int64N(4*ms)
			}
		}
		if !keepTurn || turnLeft == 0 || cur[p] == nil && idleUntil[p] > t {
			turn, owner = p+1, -1
		}
	}
	return g
}

// valueAt is a PM sample of [s, e): SM active (percent) and bytes.
func (g *sharedGPU) valueAt(s, e int64) []float64 {
	var bytes, active float64
	i := g.search(s)
	for ; i < len(g.exec) && g.exec[i].start < e; i++ {
		x := g.exec[i]
		ov := float64(min(e, x.end) - max(s, x.start))
		if ov <= 0 {
			continue
		}
		active += ov
		bytes += x.rate * ov
	}
	if !g.switches {
		return []float64{100 * active / float64(e-s), bytes}
	}
	var cycles float64
	for i := max(g.search(s), 1); g.dead == 0 && i < len(g.exec) && g.exec[i].start < e; i++ {
		if g.exec[i].start >= s && g.exec[i].proc != g.exec[i-1].proc {
			cycles += turns.CyclesPerSwitch
		}
	}
	var switching float64 // the graphics engine counts a switch as active (H100, run EC's recordings)
	for i, _ := slices.BinarySearch(g.switchAt, s-g.dead); i < len(g.switchAt) && g.switchAt[i] < e; i++ {
		ov := max(0, float64(min(e, g.switchAt[i]+g.dead)-max(s, g.switchAt[i])))
		cycles += ov / float64(g.dead) * turns.CyclesPerSwitch
		switching += ov
	}
	return []float64{100 * active / float64(e-s), bytes, cycles, 100 * (active + switching) / float64(e-s)}
}

// search is the first exec span that ends after t.
func (g *sharedGPU) search(t int64) int {
	lo, hi := 0, len(g.exec)
	for lo < hi {
		m := (lo + hi) / 2
		if g.exec[m].end <= t {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// shares is what NVML's per-process utilisation reports for [s, e): each process's share
// of the time it ran, in whole percent.
func (g *sharedGPU) shares(s, e int64) []float64 {
	out := make([]float64, len(g.procs))
	for i := g.search(s); i < len(g.exec) && g.exec[i].start < e; i++ {
		x := g.exec[i]
		out[x.proc] += float64(max(0, min(e, x.end)-max(s, x.start)))
	}
	for p := range out {
		out[p] = math.Round(100*out[p]/float64(e-s)) / 100
	}
	return out
}

// runShared feeds the timeline to an Attributor: 1 ms samples in 100 ms batches, the
// traced processes' records with them, and NVML's process list every second (at the end of
// its period, like the health source). It checks conservation after every batch.
func runShared(t *testing.T, g *sharedGPU, span int64) *snapshot.Snapshot {
	t.Helper()
	a, clk := newTest(t, append([]Option{WithWatermark(time.Second)}, simOpts...)...)
	clk.set(t0 - ms)
	procs := make([]*record.Process, len(g.procs))
	for i, sp := range g.procs {
		if !sp.traced {
			continue
		}
		var info activity.ProcessInfo
		procs[i], info = newProc(sp.pid, sp.pod, "0")
		a.ProcessConnected(procs[i], info)
		a.Coverage(procs[i], []record.Interval{{Start: uint64(t0 - ms), End: uint64(t0 + 2*span)}})
	}
	next := make([]int, len(g.procs))
	step, period := 100*ms, int64(time.Second)
	var device [2]float64
	for now := t0; now < t0+span; now += step {
		clk.set(now + step)
		for p := range g.procs {
			if procs[p] == nil {
				continue
			}
			var recs []record.Record
			for next[p] < len(g.recs[p]) && int64(g.recs[p][next[p]].Start) < now+step {
				recs = append(recs, g.recs[p][next[p]])
				next[p]++
			}
			a.Records(procs[p], recs)
		}
		if (now+step-t0)%period == 0 {
			s, e := now+step-period, now+step
			obs := gpuprocs.Observation{GPU: "0", UUID: "GPU-aaaa", Start: time.Unix(0, s), End: time.Unix(0, e), Shares: !g.noShares}
			for p, share := range g.shares(s, e) {
				if g.noShares {
					share = math.NaN()
				}
				sp := g.procs[p]
				if sp.exit > 0 && t0+sp.exit < e { // exited: NVML neither lists it nor keeps its samples
					continue
				}
				op := gpuprocs.Process{PID: sp.pid, SMShare: share}
				if sp.traced || sp.resolvable {
					op.Namespace, op.Pod, op.Container = "ns", sp.pod, "c"
				}
				obs.Processes = append(obs.Processes, op)
			}
			a.ObserveProcesses(obs)
		}
		ss := samples(now, ms, int(step/ms), g.valueAt)
		for _, s := range ss {
			device[0] += s.Values[0] / 100 * float64(s.End-s.Start) / 1e9
			device[1] += s.Values[1]
		}
		metrics := testMetrics
		if g.switches {
			metrics = append(slices.Clip(testMetrics), switchMetric, grActive)
		}
		a.Add(pmdata.Batch{Device: 0, Metrics: metrics, Samples: ss})
	}
	clk.advance(5 * time.Second)
	a.Flush()
	if debugHook != nil {
		debugHook(a)
	}
	snap := a.Snapshot()
	for i, name := range []string{"cupti_kernel_sm_active_seconds_total", "cupti_kernel_pcie_bytes_total"} {
		if got := sum(snap, name, "0"); !near(got, device[i], 1e-9) {
			t.Errorf("conservation: %s attributed %v, device %v", name, got, device[i])
		}
	}
	// Once the traced processes are gone and collected, no device keeps their rates or
	// their turns' record (the join must not grow with process churn).
	for _, p := range procs {
		if p != nil {
			a.ProcessDisconnected(p)
		}
	}
	clk.advance(5 * time.Second)
	for _, p := range procs { // the receiver's next batch runs the join's upkeep
		if p != nil {
			a.Records(p, nil)
			break
		}
	}
	for _, d := range a.devOrder {
		for _, k := range d.turn.Remembered() {
			if k.Kind == turns.Traced {
				t.Errorf("GPU %s still holds the turns of traced context %x after its process was collected", d.gpu, k.ID)
			}
		}
		for k := range d.carried {
			if k.pid != 0 {
				t.Errorf("GPU %s still holds a rate of pid %d after its process was collected", d.gpu, k.pid)
			}
		}
	}
	return snap
}

var (
	debugHook func(*Attributor)
	simOpts   []Option
)

// byLabels sums the series of family name whose labels (by name) have the wanted values;
// a label the family does not have is not a condition.
func byLabels(snap *snapshot.Snapshot, name string, want map[string]string) float64 {
	var t float64
	for _, f := range snap.Families {
		if f.Desc.Name != name {
			continue
		}
	next:
		for _, s := range f.Samples {
			for i, l := range f.Desc.LabelNames {
				if w, ok := want[l]; ok && s.LabelValues[i] != w {
					continue next
				}
			}
			t += s.Value
		}
	}
	return t
}

// TestUntracedProcesses is the property of issue 21: on a GPU time-sliced between a traced
// pod and a process that loads no library, with NVML's process list and per-process SM
// shares, the untraced process's bytes land on its own pod (marked source="nvml") or on
// kernel="(untraced)" (within 15 %), the traced pod keeps its own (within 25 % here; the
// simulated processes are far burstier than the GPU ground truth, see
// docs/attribution.md), "(idle)" gets neither time nor bytes while NVML shows the process
// running, and conservation stays exact. The join before NVML was wired in gave the
// untraced neighbour's bytes to the traced pod (+88.6 % on an H100; +80-170 % here).
// A GPU kept full by three processes at steady shares leaves the split between an
// untraced process and the traced kernels it always runs beside unidentified: that case
// is only logged (docs/attribution.md states it).
func TestUntracedProcesses(t *testing.T) {
	const span = 12 * int64(time.Second)
	stream, spin := [2]string{"stream", "spin"}, [2]string{"stream", "spin"}
	other := [2]string{"copy_big", "wait"}
	cases := []struct {
		name    string
		procs   []simProc
		tracedE float64 // error bound of traced pods
		untrE   float64 // error bound of untraced ones
	}{
		{"same kernel names, untraced without a pod", []simProc{
			{pid: 10, pod: "pod0", traced: true, stream: 0.6, rate: 1000, names: stream, pause: 0.3},
			{pid: 20, pod: "", stream: 0.6, rate: 1000, names: spin, pause: 0.3},
		}, 0.10, 0.15},
		{"different kernels and rate, untraced pod resolved", []simProc{
			{pid: 10, pod: "pod0", traced: true, stream: 0.5, rate: 1000, names: stream, pause: 0.3},
			{pid: 20, pod: "pod1", resolvable: true, stream: 0.8, rate: 2000, names: other, pause: 0.2},
		}, 0.25, 0.15},
		{"GPU kept full: two traced pods and an untraced process (logged)", []simProc{
			{pid: 10, pod: "pod0", traced: true, stream: 0.7, rate: 1000, names: stream, pause: 0.3},
			{pid: 11, pod: "pod2", traced: true, stream: 0.3, rate: 1000, names: stream, pause: 0.3},
			{pid: 20, pod: "pod1", resolvable: true, stream: 0.5, rate: 1500, names: other, pause: 0.3},
		}, math.Inf(1), math.Inf(1)},
	}
	for _, c := range cases {
		for seed := range uint64(3) {
			t.Run(fmt.Sprintf("%s/seed%d", c.name, seed), func(t *testing.T) {
				g := makeSharedGPU(rand.New(rand.NewPCG(seed, 21)), c.procs, span)
				snap := runShared(t, g, span)
				var untracedNoPod, untracedNoPodTruth float64
				for p, sp := range g.procs {
					truth := g.bytes[p]
					var got float64
					switch {
					case sp.traced:
						got = byLabels(snap, "cupti_pod_pcie_bytes_total", map[string]string{"pod": sp.pod, "source": "kernel"})
					case sp.resolvable:
						got = byLabels(snap, "cupti_pod_pcie_bytes_total", map[string]string{"pod": sp.pod, "source": "nvml"})
					default:
						untracedNoPodTruth += truth
						continue
					}
					bound := c.tracedE
					if !sp.traced {
						bound = c.untrE
					}
					e := got/truth - 1
					t.Logf("pid %d pod %q traced %v: bytes error %+.4f", sp.pid, sp.pod, sp.traced, e)
					if math.Abs(e) > bound {
						t.Errorf("pid %d (pod %q, traced %v): attributed %.4g bytes, truth %.4g (%+.1f %%, bound %.0f %%)",
							sp.pid, sp.pod, sp.traced, got, truth, 100*e, 100*bound)
					}
				}
				if untracedNoPodTruth > 0 {
					untracedNoPod = byLabels(snap, "cupti_kernel_pcie_bytes_total", map[string]string{"kernel": labelUntraced})
					e := untracedNoPod/untracedNoPodTruth - 1
					t.Logf("untraced without a pod: (untraced) bytes error %+.4f", e)
					if math.Abs(e) > 0.15 {
						t.Errorf("kernel=(untraced): %.4g bytes, the untraced process moved %.4g (%+.1f %%)", untracedNoPod, untracedNoPodTruth, 100*e)
					}
				}
				idle := byLabels(snap, "cupti_kernel_sampled_seconds_total", map[string]string{"kernel": labelIdle})
				if idle > g.idle+0.005*float64(span)/1e9 { // NVML's shares are whole percent
					t.Errorf("(idle) got %.3f s, the GPU was idle %.3f s: idle time while NVML showed a process running", idle, g.idle)
				}
				idleBytes := byLabels(snap, "cupti_kernel_pcie_bytes_total", map[string]string{"kernel": labelIdle})
				if all := sum(snap, "cupti_kernel_pcie_bytes_total", "0"); idleBytes > 0.01*all {
					t.Errorf("(idle) got %.4g of %.4g bytes", idleBytes, all)
				}
			})
		}
	}
}

// TestUntracedPodsOnly: no process is traced; two pods share the GPU by time-slicing and
// only NVML knows them. The device counters are split between them by their SM time
// shares and the rate fit (issue 21, item 5): within 15 % when their rates are alike;
// when they differ at steady shares the fit cannot tell them apart and the split follows
// the time shares (logged; docs/attribution.md quotes it).
func TestUntracedPodsOnly(t *testing.T) {
	const span = 12 * int64(time.Second)
	for _, c := range []struct {
		name  string
		procs []simProc
		bound float64
	}{
		{"alike", []simProc{
			{pid: 20, pod: "pod1", resolvable: true, stream: 0.6, rate: 1000, names: [2]string{"a", "b"}, pause: 0.3},
			{pid: 21, pod: "pod2", resolvable: true, stream: 0.6, rate: 1000, names: [2]string{"a", "b"}, pause: 0.3},
		}, 0.15},
		{"different", []simProc{
			{pid: 20, pod: "pod1", resolvable: true, stream: 0.8, rate: 2000, names: [2]string{"a", "b"}, pause: 0.3},
			{pid: 21, pod: "pod2", resolvable: true, stream: 0.2, rate: 1000, names: [2]string{"a", "b"}, pause: 0.3},
		}, math.Inf(1)},
	} {
		for seed := range uint64(3) {
			t.Run(fmt.Sprintf("%s/seed%d", c.name, seed), func(t *testing.T) {
				g := makeSharedGPU(rand.New(rand.NewPCG(seed, 5)), c.procs, span)
				snap := runShared(t, g, span)
				var errs []string
				for p, sp := range g.procs {
					got := byLabels(snap, "cupti_pod_pcie_bytes_total", map[string]string{"pod": sp.pod, "source": "nvml"})
					e := got/g.bytes[p] - 1
					errs = append(errs, fmt.Sprintf("%s %+.4f", sp.pod, e))
					if math.Abs(e) > c.bound {
						t.Errorf("%s: attributed %.4g bytes, truth %.4g (%+.1f %%)", sp.pod, got, g.bytes[p], 100*e)
					}
				}
				t.Logf("untraced pods only (%s): bytes errors %s", c.name, strings.Join(errs, ", "))
			})
		}
	}
}

// TestUntracedAloneByEngine: where no process on the GPU is traced, an untraced process ran
// while the graphics engine did, which each sample says. Without NVML's shares (health reads
// none for a GPU that lists one process) the process got the whole period, idle included:
// its sampled seconds 1.66-1.72 x the time it ran here; with them within 0.2 %, as now both.
func TestUntracedAloneByEngine(t *testing.T) {
	const span = 12 * int64(time.Second)
	proc := simProc{pid: 20, pod: "pod1", resolvable: true, stream: 0.6, rate: 1000, names: [2]string{"a", "b"}, pause: 0.6}
	for _, noShares := range []bool{false, true} {
		for seed := range uint64(3) {
			t.Run(fmt.Sprintf("shares=%v/seed%d", !noShares, seed), func(t *testing.T) {
				g := makeSlicedGPU(rand.New(rand.NewPCG(seed, 61)), []simProc{proc}, span, 2*ms, true)
				g.switches, g.noShares = true, noShares
				var ran float64
				for _, x := range g.exec {
					ran += float64(x.end-x.start) / 1e9
				}
				snap := runShared(t, g, span)
				labels := map[string]string{"pod": "pod1", "source": "nvml"}
				secs := byLabels(snap, "cupti_pod_sampled_seconds_total", labels)
				bytes := byLabels(snap, "cupti_pod_pcie_bytes_total", labels)
				t.Logf("sampled %.3f s of %.3f s run; bytes %.4g of %.4g", secs, ran, bytes, g.bytes[0])
				if math.Abs(secs/ran-1) > 0.02 {
					t.Errorf("sampled seconds %.3f, the process ran %.3f s (bound 2 %%)", secs, ran)
				}
				if math.Abs(bytes/g.bytes[0]-1) > 0.01 {
					t.Errorf("bytes %.4g, truth %.4g (bound 1 %%)", bytes, g.bytes[0])
				}
				// One process alone owns what ran: the split rests on no estimate.
				if u, ok := value(snap, "cupti_attribution_uncertain_ratio", "0"); ok && u > 0.01 {
					t.Errorf("uncertain ratio %.2f for one untraced process alone on the GPU, want 0", u)
				}
			})
		}
	}
}

// TestIdleLoneProcessNotPresent: NVML health reads no share for a GPU that lists one process,
// so the join is told of a process that may sit idle there (a notebook holding the GPU). It is
// present while the engine works, not while it idles: two idle seconds and two busy ones read
// about half (1.00 before the engine's activity was asked).
func TestIdleLoneProcessNotPresent(t *testing.T) {
	a, clk := newTest(t, WithWatermark(time.Second))
	metrics := append(slices.Clip(testMetrics), switchMetric, grActive)
	for sec := range int64(4) {
		s, e := t0+sec*int64(time.Second), t0+(sec+1)*int64(time.Second)
		a.ObserveProcesses(gpuprocs.Observation{GPU: "0", UUID: "GPU-aaaa", Start: time.Unix(0, s), End: time.Unix(0, e),
			Processes: []gpuprocs.Process{{PID: 20, SMShare: math.NaN()}}})
		busy := float64(sec / 2) // idle, idle, busy, busy
		clk.set(e)
		a.Add(pmdata.Batch{Device: 0, Metrics: metrics, Samples: samples(s, ms, 1000, func(int64, int64) []float64 {
			return []float64{100 * busy, 1000 * busy, 0, 100 * busy}
		})})
	}
	clk.advance(5 * time.Second)
	a.Flush()
	snap := a.Snapshot()
	p, ok := value(snap, "cupti_attribution_untraced_present_ratio", "0")
	if !ok || p < 0.45 || p > 0.56 {
		t.Errorf("untraced present %.3f (ok %v) with the lone process busy half the time, want about 0.5", p, ok)
	}
	if b := byLabels(snap, "cupti_kernel_pcie_bytes_total", map[string]string{"kernel": labelUntraced}); b != 2*1000*1000 {
		t.Errorf("untraced bytes %v, want every byte of the busy seconds (2e6)", b)
	}
}

// TestUntracedClassesBounded: PIDs come and go, and class ids are never reused; past
// maxUntracedClasses untraced processes share the class of the untraced gaps, so kernel
// names keep their room in the class table.
func TestUntracedClassesBounded(t *testing.T) {
	var ct classTable
	ct.init()
	for pid := range maxUntracedClasses + 10 {
		c := ct.untracedID(fmt.Sprint("pid ", pid))
		if pid < maxUntracedClasses && (c < firstNamedClass || !ct.isUntraced(c)) {
			t.Fatalf("pid %d: class %d, want one of its own", pid, c)
		}
		if pid >= maxUntracedClasses && c != classUntraced {
			t.Fatalf("pid %d past the cap: class %d, want the untraced gaps' %d", pid, c, classUntraced)
		}
	}
	if k := ct.id("_Z6kernelv"); k < firstNamedClass || ct.isUntraced(k) {
		t.Errorf("a kernel name after the cap: class %d", k)
	}
}

// TestObservationsBounded: observations of a GPU with no samples (sampling paused or
// idle-released) do not pile up or count as dropped; bad ones are counted by reason.
func TestObservationsBounded(t *testing.T) {
	a, clk := newTest(t)
	obs := func(start, end int64, gpu string) {
		a.ObserveProcesses(gpuprocs.Observation{GPU: gpu, Start: time.Unix(0, start), End: time.Unix(0, end), Shares: true,
			Processes: []gpuprocs.Process{{PID: 7, SMShare: 0.5}}})
	}
	for i := range int64(600) { // ten minutes at 1 s, no PM samples
		clk.set(t0 + (i+1)*int64(time.Second))
		obs(t0+i*int64(time.Second), t0+(i+1)*int64(time.Second), "0")
	}
	a.mu.Lock()
	held := len(a.devs[0].nvml)
	a.mu.Unlock()
	if held > 16 {
		t.Errorf("%d observations held without samples, want those of the last few watermarks", held)
	}
	obs(t0+5, t0+5, "0") // end <= start
	obs(t0, t0+1, "9")   // no such GPU
	snap := a.Snapshot()
	for reason, want := range map[string]float64{"invalid": 1, "unknown_device": 1, "full": 0, "late": 0} {
		if got, _ := value(snap, "cupti_attribution_dropped_process_observations_total", reason); got != want {
			t.Errorf("dropped observations %s = %v, want %v", reason, got, want)
		}
	}
}

// TestUntracedProcessExits: NVML lists the processes running when it is read, at the end
// of each period, and forgets the utilisation samples of one that exited, so an untraced
// process's last period is in no observation. The join carries it, with an unknown share,
// into the period after the last one that listed it: without, the turns of that period had
// no untraced context and its work went to the traced pod beside it (here the untraced
// process −31 % and the traced pod +9 % to +10 % before, within 0.6 % after; on run DE's recordings
// 6.4 % of the tensor-active seconds to a pod that never used the pipe).
func TestUntracedProcessExits(t *testing.T) {
	const span = 8 * int64(time.Second)
	procs := []simProc{
		{pid: 10, pod: "pod0", traced: true, stream: 0.6, rate: 1000, names: [2]string{"stream", "spin"}, pause: 0.3},
		{pid: 20, stream: 0.8, rate: 1500, names: [2]string{"copy_big", "wait"}, pause: 0.2, exit: 2*int64(time.Second) + 900*ms},
	}
	for seed := range uint64(3) {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			g := makeSlicedGPU(rand.New(rand.NewPCG(seed, 41)), procs, span, 2*ms, true)
			g.switches = true
			snap := runShared(t, g, span)
			traced := byLabels(snap, "cupti_pod_pcie_bytes_total", map[string]string{"pod": "pod0", "source": "kernel"})
			untraced := byLabels(snap, "cupti_kernel_pcie_bytes_total", map[string]string{"kernel": labelUntraced})
			et, eu := traced/g.bytes[0]-1, untraced/g.bytes[1]-1
			// Carried once: no time after the period it exited in.
			us, _ := value(snap, "cupti_attribution_seconds_total", "0", "GPU-aaaa", "untraced")
			t.Logf("traced pod0 %+.4f, untraced %+.4f; untraced seconds %.3f", et, eu, us)
			if math.Abs(et) > 0.08 || math.Abs(eu) > 0.15 {
				t.Errorf("traced pod0 %+.1f %% (bound 8 %%), untraced %+.1f %% (bound 15 %%)", 100*et, 100*eu)
			}
			var ran float64 // seconds the untraced process held the GPU
			for _, x := range g.exec {
				if x.proc == 1 {
					ran += float64(x.end-x.start) / 1e9
				}
			}
			if us > 1.15*ran {
				t.Errorf("untraced seconds %.3f, the process ran %.3f s: carried on after the period it exited in", us, ran)
			}
		})
	}
}
