package attribution

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/cupti-exporter/cupti-exporter/activity"
	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// A flood of records that reach far into the future (so the join holds every one) and of
// new kernel names stays inside the budget: the excess is dropped and counted, the gauge
// shows the join's share, and the heap follows the budget.
func TestFloodStaysInBudget(t *testing.T) {
	const limit = 32 << 20
	budget := activity.NewBudget(limit)
	a, clk := newTest(t, WithBudget(budget))
	var procs []*record.Process
	for i := range 16 {
		p, info := newProc(uint32(100+i), fmt.Sprintf("pod%d", i), "0", "1")
		a.ProcessConnected(p, info)
		procs = append(procs, p)
	}
	runtime.GC()
	var m0 runtime.MemStats
	runtime.ReadMemStats(&m0)
	now, sent := t0, 0
	for step := range 40 { // 4 s of 100 ms batches: the first joins run with the records held
		for d := range 2 {
			a.Add(pmdata.Batch{Device: d, Metrics: testMetrics, Samples: samples(now, ms, 100, func(s, e int64) []float64 { return []float64{50, 1000} })})
		}
		for c, p := range procs {
			recs := make([]record.Record, 2000)
			for i := range recs {
				s := now + int64(i)*1000
				recs[i] = kernel(uint32(i%2), fmt.Sprintf("_Z5flood_%d_%d_%d", c, step, i%64), s, s+50*1000*ms)
			}
			a.Records(p, recs)
			sent += len(recs)
		}
		// Records are refused at the limit; the join's buffers and the per-class state it
		// makes (bounded by the class table) are charged on top.
		const bound = limit + 2*scratchKeep + 2*maxClasses*(accBytes+rateBytes+25*2)
		if used := budget.Used(); used > bound {
			t.Fatalf("step %d: %d bytes charged to a budget of %d (classes %d, records %d, kernels %d, rates %d, scratch %d)", step, used, limit,
				a.mem.classes, (a.devs[0].held.Load()+a.devs[1].held.Load())*recBytes, len(a.devs[0].kernels)+len(a.devs[1].kernels), len(a.devs[0].carried)+len(a.devs[1].carried), a.devs[0].sc.bytes+a.devs[1].sc.bytes)
		}
		now += 100 * ms
		clk.set(now)
	}
	runtime.GC()
	var m1 runtime.MemStats
	runtime.ReadMemStats(&m1)
	snap := a.Snapshot()
	held := sum(snap, "cupti_attribution_pending_records")
	dropped, _ := value(snap, "cupti_attribution_dropped_records_total", "memory_budget")
	mem, _ := value(snap, "cupti_attribution_memory_bytes")
	folded, _ := value(snap, "cupti_attribution_folded_kernel_names_total", "memory_budget")
	t.Logf("%d records sent: %.0f held, %.0f dropped (memory_budget), %.0f names folded; join memory %.1f MiB, budget used %.1f MiB; heap %d -> %d MiB",
		sent, held, dropped, folded, mem/(1<<20), float64(budget.Used())/(1<<20), m0.HeapInuse>>20, m1.HeapInuse>>20)
	if dropped == 0 || held == 0 {
		t.Errorf("held %g, dropped %g: want both (the flood passes the budget)", held, dropped)
	}
	if held*recBytes > limit {
		t.Errorf("%g records held, %g bytes past the budget", held, held*recBytes)
	}
	if mem <= 0 || mem != float64(budget.Used()) {
		t.Errorf("cupti_attribution_memory_bytes = %g, want the budget's %d (the join is its only holder)", mem, budget.Used())
	}
	if grown := int64(m1.HeapInuse) - int64(m0.HeapInuse); grown > 3*limit {
		t.Errorf("heap grew by %d MiB under a %d MiB budget", grown>>20, limit>>20)
	}
	runtime.KeepAlive(a)

	// Once the processes are gone and their time attributed, the records are given back.
	for _, p := range procs {
		a.ProcessDisconnected(p)
	}
	clk.set(now + 60_000*ms)
	for d := range 2 {
		a.Add(pmdata.Batch{Device: d, Metrics: testMetrics, Samples: samples(now+55_000*ms, ms, 10, func(s, e int64) []float64 { return []float64{50, 1000} })})
	}
	a.Flush()
	if v := sum(a.Snapshot(), "cupti_attribution_pending_records"); v != 0 {
		t.Errorf("%g records still held after their time passed", v)
	}
	if used := budget.Used(); used > limit/2 {
		t.Errorf("%d bytes still charged after the flood ended", used)
	}
}

// A record cannot end in the future (CUPTI reports a kernel once it ended): one ending more
// than a minute past the newest sample and the wall clock is dropped, not held until then.
func TestRecordEndingAheadDropped(t *testing.T) {
	a, _ := newTest(t)
	p, info := newProc(7, "trainer", "0")
	a.ProcessConnected(p, info)
	a.Records(p, []record.Record{kernel(0, "A", t0, t0+ms), kernel(0, "B", t0, t0+2*60_000*ms)})
	snap := a.Snapshot()
	if v, _ := value(snap, "cupti_attribution_dropped_records_total", "ends_ahead"); v != 1 {
		t.Errorf("ends_ahead drops %g, want 1", v)
	}
	if v := sum(snap, "cupti_attribution_pending_records"); v != 1 {
		t.Errorf("%g records held, want the honest one", v)
	}
}

// Pod series carry the rank of who vouches for the pod (the exporter's cap folds claimed
// ones first): verified when a verified process's cgroup named it, claimed when only hellos
// did, normal without a pod.
func TestPodSeriesPriority(t *testing.T) {
	a, _ := newTest(t)
	for i, pr := range []snapshot.Priority{snapshot.PriorityVerified, snapshot.PriorityClaimed, snapshot.PriorityNormal} {
		p, info := newProc(uint32(10+i), []string{"legit", "claimed", ""}[i], "0")
		info.PodPriority = pr
		a.ProcessConnected(p, info)
		a.Coverage(p, []record.Interval{{Start: uint64(t0 - ms), End: uint64(t0 + 10*ms)}})
		a.Records(p, []record.Record{kernel(0, "A", t0+int64(i)*ms, t0+int64(i+1)*ms)})
	}
	a.Add(pmdata.Batch{Device: 0, Metrics: testMetrics, Samples: samples(t0, ms, 4, func(s, e int64) []float64 { return []float64{100, 1000} })})
	a.Flush()
	got := map[string]snapshot.Priority{}
	for _, f := range a.Snapshot().Families {
		if f.Desc.Name == "cupti_pod_sampled_seconds_total" {
			for _, s := range f.Samples {
				got[s.LabelValues[3]] = s.Priority
			}
		}
	}
	want := map[string]snapshot.Priority{"legit": snapshot.PriorityVerified, "claimed": snapshot.PriorityClaimed, "": snapshot.PriorityNormal}
	for pod, pr := range want {
		if got[pod] != pr {
			t.Errorf("pod %q priority %d, want %d (all: %v)", pod, got[pod], pr, got)
		}
	}
}
