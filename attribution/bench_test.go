package attribution

import (
	"fmt"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity"
	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/gpuprocs"
	"github.com/cupti-exporter/cupti-exporter/mapping"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
)

// loadGen produces one device's load: PM samples at a fixed interval and kernels of 20
// names, 3 us long with 2 us gaps (200k kernels/s), delivered in 100 ms batches, the records
// half a second late as the activity library's flushes make them.
type loadGen struct {
	a       *Attributor
	clk     *fakeClock
	p       *record.Process
	metrics []string
	now     int64 // start of the next step
	kt      int64 // start of the next kernel
	names   []string
	recs    []record.Record
	vals    []float64
}

func curatedLoad(tb testing.TB, est string) *loadGen {
	return curatedLoadN(tb, est, 9) // the nine single-pass metrics
}

// curatedLoadN is curatedLoad with the first n curated metrics (all of them: the default set
// on Hopper, the context-switch counter last).
func curatedLoadN(tb testing.TB, est string, n int) *loadGen {
	m, err := mapping.New()
	if err != nil {
		tb.Fatal(err)
	}
	var catalog []pmdata.CatalogEntry
	var metrics []string
	for _, c := range m.Curated()[:n] {
		p := pmdata.Properties{Type: pmdata.TypeCounter, DimUnit: "gpc_cycle"}
		if strings.HasSuffix(c.Name, "_bytes_total") {
			p.DimUnit = "byte"
		}
		catalog = append(catalog, pmdata.CatalogEntry{Name: c.Perfworks, Properties: p})
		metrics = append(metrics, c.Perfworks)
	}
	clk := &fakeClock{}
	clk.set(t0)
	a, err := New(testDevices, catalog, m, nil, WithClock(clk.now), WithEstimator(est))
	if err != nil {
		tb.Fatal(err)
	}
	g := &loadGen{a: a, clk: clk, metrics: metrics, now: t0, kt: t0, vals: make([]float64, len(metrics))}
	for i := range 20 {
		g.names = append(g.names, fmt.Sprintf("_Z6kernel%dPfS_i", i))
	}
	g.p = &record.Process{PID: 1}
	a.ProcessConnected(g.p, activity.ProcessInfo{Pod: "p", Namespace: "n", GPUs: []string{"0"}})
	return g
}

// step feeds 100 ms: the records that started up to 500 ms (the flush delay) before the
// step's end, and the samples of the step.
func (g *loadGen) step(interval int64) (samples, records int) {
	const stepNS = 100 * ms
	g.clk.set(g.now + stepNS)
	g.recs = g.recs[:0]
	for g.kt < g.now+stepNS-500*ms {
		g.recs = append(g.recs, kernel(0, g.names[(g.kt/5000)%20], g.kt, g.kt+3000))
		g.kt += 5000
	}
	g.a.Records(g.p, g.recs)
	n := g.samples(interval, stepNS)
	g.now += stepNS
	return n, len(g.recs)
}

// samples feeds the samples of [g.now, g.now+span) at the interval and returns their number.
func (g *loadGen) samples(interval, span int64) int {
	ss := make([]pmdata.Sample, span/interval)
	for i := range ss {
		s := g.now + int64(i)*interval
		v := make([]float64, len(g.metrics))
		for j := range v {
			v[j] = float64((s/interval+int64(j))%100) * 10
		}
		ss[i] = pmdata.Sample{Start: uint64(s), End: uint64(s + interval), Values: v}
	}
	g.a.Add(pmdata.Batch{Device: 0, Metrics: g.metrics, Samples: ss})
	return len(ss)
}

// BenchmarkJoin measures the join at 1 kHz sampling and 200k kernels/s on one device, with
// the nine default metrics: one op is one second of that load. ns/sample and ns/record
// divide the op's time by its samples and records; core-share is the fraction of one core
// the load needs (op time / 1 s), cpu-s/s the same from the process's CPU time (user +
// system, all threads, GC included), which a busy machine does not inflate.
func BenchmarkJoin(b *testing.B) {
	for _, est := range Estimators {
		for _, iv := range []int64{ms, ms / 10} {
			b.Run(fmt.Sprintf("%s/interval=%s", est, time.Duration(iv)), func(b *testing.B) {
				measureJoin(b, curatedLoad(b, est), iv)
			})
		}
	}
}

// BenchmarkJoinDefaultSet is BenchmarkJoin (rate, 1 ms) with the whole curated default set,
// whose last metric counts context switches (Hopper): the join is ready to tell turns apart,
// but with one process on the GPU it has none to tell (turnsMayCut).
func BenchmarkJoinDefaultSet(b *testing.B) {
	m, err := mapping.New()
	if err != nil {
		b.Fatal(err)
	}
	g := curatedLoadN(b, EstimatorRate, len(m.Curated()))
	g.step(ms)
	if !g.a.devs[0].switches {
		b.Fatal("the default set's samples do not count context switches")
	}
	measureJoin(b, g, ms)
}

// measureJoin warms g's load up past the watermark, then runs b.N seconds of it at interval iv
// and reports ns/sample and ns/record (the op's time over its samples and records),
// core-share (op time / 1 s) and cpu-s/s (the process's CPU time, all threads, GC included,
// which a busy machine does not inflate).
func measureJoin(b *testing.B, g *loadGen, iv int64) {
	for range 40 {
		g.step(iv)
	}
	var samples, records int
	cpu0 := cpuTime()
	b.ResetTimer()
	for range b.N {
		for range 10 {
			s, r := g.step(iv)
			samples += s
			records += r
		}
	}
	ns := float64(b.Elapsed().Nanoseconds())
	b.ReportMetric(ns/float64(samples), "ns/sample")
	b.ReportMetric(ns/float64(records), "ns/record")
	b.ReportMetric(ns/float64(b.N)/1e9, "core-share")
	b.ReportMetric((cpuTime()-cpu0).Seconds()/float64(b.N), "cpu-s/s")
}

// BenchmarkJoinUntracedAlone measures the join on a GPU that no traced process uses: 1 kHz
// samples of the nine default metrics with one untraced process that NVML lists once a
// second (nvml-observations), or with none (no-observations, NVML health off). One op is one
// second of that load; cpu-s/s is the process's CPU time for it (pmcostref's "defaults" on
// the GPU: one uninjected matmul).
func BenchmarkJoinUntracedAlone(b *testing.B) {
	for _, nvml := range []bool{false, true} {
		name := "no-observations"
		if nvml {
			name = "nvml-observations"
		}
		b.Run(name, func(b *testing.B) {
			g := curatedLoad(b, EstimatorRate)
			g.a.ProcessDisconnected(g.p)
			step := func() {
				const stepNS = 100 * ms
				g.clk.set(g.now + stepNS)
				if nvml && (g.now-t0)%int64(time.Second) == 0 {
					g.a.ObserveProcesses(gpuprocs.Observation{GPU: "0", UUID: "GPU-aaaa", Start: time.Unix(0, g.now), End: time.Unix(0, g.now+int64(time.Second)),
						Shares: true, Processes: []gpuprocs.Process{{PID: 77, SMShare: 0.98}}})
				}
				g.samples(ms, stepNS)
				g.now += stepNS
			}
			for range 40 {
				step()
			}
			cpu0 := cpuTime()
			b.ResetTimer()
			for range b.N {
				for range 10 {
					step()
				}
			}
			b.ReportMetric((cpuTime()-cpu0).Seconds()/float64(b.N), "cpu-s/s")
		})
	}
}

// TestMemoryBoundedByWatermark runs the 1 kHz, 200k kernels/s load for 60 simulated seconds
// and checks that held samples and records stay within what the watermark implies, that
// nothing is dropped, and that the heap does not grow with the run's length.
func TestMemoryBoundedByWatermark(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("long synthetic run")
	}
	g := curatedLoad(t, EstimatorRate)
	var heap [2]uint64
	for i := range 600 {
		g.step(ms)
		g.a.mu.Lock()
		d := g.a.devs[0]
		ns, nr := len(d.samples), d.pending.len()+len(d.carry)
		g.a.mu.Unlock()
		// 3 s watermark + 100 ms batch: at most 3,100 samples held; records: those of the
		// held time (the flush delay keeps 0.5 s of them away): 200k/s x 3.1 s
		if ns > 3100 || nr > 620_000 {
			t.Fatalf("step %d: %d samples and %d records held, more than the watermark allows", i, ns, nr)
		}
		if i == 150 || i == 599 {
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			heap[i/599] = ms.HeapAlloc
		}
	}
	snap := g.a.Snapshot()
	if d := sum(snap, "cupti_attribution_dropped_records_total"); d != 0 {
		t.Errorf("%v records dropped", d)
	}
	if late := sum(snap, "cupti_attribution_late_records_total"); late != 0 {
		t.Errorf("%v late records", late)
	}
	// kernels run 3 us of every 5 us: 60 % of the 57 s attributed (60 s minus the 3 s watermark)
	traced, _ := value(snap, "cupti_attribution_seconds_total", "0", "GPU-aaaa", "traced")
	all := sum(snap, "cupti_attribution_seconds_total", "0")
	if !near(all, 57, 1e-6) || !near(traced/all, 0.6, 1e-3) {
		t.Errorf("attributed %v s, traced %v s, want 57 s and 60 %% traced", all, traced)
	}
	t.Logf("heap after 15 s %d MB, after 60 s %d MB", heap[0]>>20, heap[1]>>20)
	if heap[1] > heap[0]*3/2+16<<20 {
		t.Errorf("heap grew from %d to %d bytes over the run", heap[0], heap[1])
	}
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkClassID measures a record's class lookup when its kernel name is not the last
// record's (a PyTorch process runs hundreds of kernels in turn): one map lookup, 13 ns on the
// build machine where the lookup to check and the lookup to intern took 24-25.
func BenchmarkClassID(b *testing.B) {
	a, _ := newTest(b)
	names := make([]string, 200)
	for i := range names {
		names[i] = fmt.Sprintf("_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_%dEEEvi", i)
		a.classID(names[i])
	}
	b.ResetTimer()
	for i := range b.N {
		a.classID(names[i%len(names)])
	}
}
