package attribution

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity"
	"github.com/cupti-exporter/cupti-exporter/activity/record"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
)

// timeSliced simulates two pods sharing one GPU by time-slicing (no MPS): the GPU runs one
// context at a time in 0.25 ms slices while both have work, so each kernel's record spans the
// slices the other context ran too. Each process launches a random mix of a streaming kernel
// (1,000 bytes per ms of execution) and a spin kernel (no bytes), 0.5-3 ms of work each: pod0
// 80 % streaming, pod1 20 %.
type timeSliced struct {
	recs  [2][]record.Record
	exec  []execSpan // what really ran, for the sample values
	bytes [2]float64 // true bytes per pod
}

type execSpan struct {
	start, end int64
	stream     bool
}

func makeTimeSliced(rng *rand.Rand, span int64) timeSliced {
	const slice = ms / 4
	var ts timeSliced
	type job struct {
		left   int64 // work left (ns)
		stream bool
		start  int64 // first slice
		name   string
	}
	var cur [2]*job
	var idleUntil [2]int64
	t, turn := t0, 0
	for t < t0+span {
		for p := range 2 {
			if cur[p] == nil && t >= idleUntil[p] {
				stream := rng.Float64() < []float64{0.8, 0.2}[p] // pod0 mostly streams, pod1 mostly spins
				name := "spin"                                   // the same kernels in both pods
				if stream {
					name = "stream"
				}
				cur[p] = &job{left: ms/2 + rng.Int64N(5*ms/2), stream: stream, start: -1, name: name}
			}
		}
		p := turn
		if cur[p] == nil {
			p = 1 - p
		}
		if cur[p] == nil { // both idle
			t = min(idleUntil[0], idleUntil[1])
			continue
		}
		j := cur[p]
		if j.start < 0 {
			j.start = t
		}
		run := min(slice, j.left)
		ts.exec = append(ts.exec, execSpan{t, t + run, j.stream})
		if j.stream {
			ts.bytes[p] += 1000 * float64(run) / float64(ms)
		}
		j.left -= run
		t += run
		if j.left == 0 {
			ts.recs[p] = append(ts.recs[p], kernel(0, j.name, j.start, t))
			cur[p] = nil
			if rng.IntN(3) == 0 {
				idleUntil[p] = t + rng.Int64N(3*ms)
			}
		}
		turn = 1 - p
	}
	return ts
}

func (ts timeSliced) valueAt(s, e int64) []float64 {
	var bytes, active float64
	for _, x := range ts.exec { // a linear scan is fine for a test of a few seconds
		if x.end <= s || x.start >= e {
			continue
		}
		ov := float64(min(e, x.end) - max(s, x.start))
		active += ov
		if x.stream {
			bytes += 1000 * ov / float64(ms)
		}
	}
	return []float64{100 * active / float64(e-s), bytes}
}

// TestTwoPodsTimeSliced checks per-pod attribution on a GPU shared by two pods: the device
// counters are split between them, the rate estimator within a few percent of each pod's
// true bytes, and well ahead of the overlap split (docs/attribution.md "First measurements":
// -45 %/+51 % for the overlap split and within ±2.4 % for the rate split on an H200).
func TestTwoPodsTimeSliced(t *testing.T) {
	const span = 4 * int64(time.Second)
	ts := makeTimeSliced(rand.New(rand.NewPCG(3, 4)), span)
	errs := map[string][2]float64{}
	for _, est := range Estimators {
		a, clk := newTest(t, WithEstimator(est), WithWatermark(300*time.Millisecond))
		clk.set(t0 - ms)
		var procs [2]*record.Process
		for p := range 2 {
			var info activity.ProcessInfo
			procs[p], info = newProc(uint32(p+1), fmt.Sprintf("pod%d", p), "0")
			a.ProcessConnected(procs[p], info)
			a.Coverage(procs[p], []record.Interval{{Start: uint64(t0 - ms), End: uint64(t0 + 2*span)}})
		}
		var next [2]int
		step := 100 * ms
		for now := t0; now < t0+span; now += step {
			clk.set(now)
			for p := range 2 {
				var recs []record.Record
				for next[p] < len(ts.recs[p]) && int64(ts.recs[p][next[p]].Start) < now+step {
					recs = append(recs, ts.recs[p][next[p]])
					next[p]++
				}
				a.Records(procs[p], recs)
			}
			a.Add(pmdata.Batch{Device: 0, Metrics: testMetrics, Samples: samples(now, ms, int(step/ms), ts.valueAt)})
		}
		a.Flush()
		snap := a.Snapshot()
		checkSharing(t, snap, "time_sliced", 1)
		var e [2]float64
		for p := range 2 {
			got, _ := value(snap, "cupti_pod_pcie_bytes_total", "0", "GPU-aaaa", "ns", fmt.Sprintf("pod%d", p), "c", "kernel", "rx")
			e[p] = got/ts.bytes[p] - 1
		}
		errs[est] = e
		t.Logf("%s: pod0 bytes error %+.4f, pod1 %+.4f", est, e[0], e[1])
	}
	o, r := errs[EstimatorOverlap], errs[EstimatorRate]
	for p := range 2 {
		if math.Abs(r[p]) > 0.03 || math.Abs(r[p]) > math.Abs(o[p])/3 {
			t.Errorf("pod%d: rate split error %+.4f, want within 3 %% and well below the overlap split's %+.4f", p, r[p], o[p])
		}
	}
}
