package activity

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity/record"
)

const ms = uint64(time.Millisecond)

// rec is a record of kind k on ordinal dev from a to b ms after t0.
func rec(k record.Kind, dev uint32, name string, a, b uint64) record.Record {
	const t0 = 1_000_000_000
	return record.Record{Kind: k, Device: dev, Start: t0 + a*ms, End: t0 + b*ms, Name: name}
}

func span(a, b uint64) record.Interval {
	const t0 = 1_000_000_000
	return record.Interval{Start: t0 + a*ms, End: t0 + b*ms}
}

const ncclKernel = "_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE"

// podTime returns the five states of cupti_pod_time_seconds_total of GPU gpu of the test pod,
// in ms, or nil without a series.
func podTime(t *testing.T, a *Aggregator, gpu string) []float64 {
	t.Helper()
	s := a.Snapshot()
	var out []float64
	for _, st := range splitStates {
		sm := sample(t, s, "cupti_pod_time_seconds_total", gpu, "GPU-"+map[string]string{"0": "aaaa", "1": "bbbb"}[gpu], "ml", "trainer-0", "main", st)
		if sm == nil {
			return nil
		}
		out = append(out, math.Round(sm.Value*1e6)/1e3)
	}
	return out
}

func splitDrops(t *testing.T, a *Aggregator) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, sm := range family(t, a.Snapshot(), "cupti_activity_split_dropped_records_total").Samples {
		out[sm.LabelValues[0]] = sm.Value
	}
	return out
}

func sameMS(got []float64, want ...float64) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if math.Abs(got[i]-want[i]) > 1e-6 {
			return false
		}
	}
	return true
}

// A span is cut into compute, communication, both at once, copies and idle; it is split when
// the next span arrives (a kernel running at its end comes later), the last one at the
// disconnect.
func TestTimeSplit(t *testing.T) {
	a := NewAggregator()
	p := testProcess(1)
	a.Connect(p)
	a.Add(p, []record.Record{
		rec(record.KindKernel, 0, "_Z4gemmv", 0, 10),  // compute 0-10
		rec(record.KindKernel, 0, ncclKernel, 10, 15), // communication 10-15
		rec(record.KindKernel, 0, "_Z4gemmv", 15, 20), // compute 15-16, overlap 16-20
		rec(record.KindKernel, 0, ncclKernel, 16, 22), // communication 20-22
		rec(record.KindMemcpy, 0, "", 25, 27),         // copy 25-27
	})
	a.Add(p, []record.Record{{Kind: record.KindMemset, Device: 0, Start: 1_000_000_000 + 26*ms, End: 1_000_000_000 + 28*ms}}) // copy 27-28
	a.Coverage(p, []record.Interval{span(0, 30)})
	if got := podTime(t, a, "0"); got != nil {
		t.Fatalf("the newest span was split before the next arrived: %v", got)
	}
	// A kernel running at the cut (28-33) arrives after the span [0, 30).
	a.Add(p, []record.Record{rec(record.KindKernel, 0, ncclKernel, 28, 33)})
	a.Coverage(p, []record.Interval{span(30, 40)})
	// compute 0-10 and 15-16, communication 10-15, 20-22 and 28-30, overlap 16-20, copy 25-28, idle 22-25
	if got := podTime(t, a, "0"); !sameMS(got, 11, 9, 4, 3, 3) {
		t.Errorf("first span (ms): %v, want compute 11, communication 9, overlap 4, copy 3, idle 3", got)
	}
	a.Disconnect(p)
	if got := podTime(t, a, "0"); !sameMS(got, 11, 12, 4, 3, 10) {
		t.Errorf("after the disconnect (ms): %v, want the second span's 3 ms of communication and 7 idle added", got)
	}
	if got := podTime(t, a, "1"); got != nil {
		t.Errorf("GPU 1, where the process ran nothing, has a split: %v", got)
	}
	if d := splitDrops(t, a); d["late"]+d["pending_full"]+d["memory_budget"]+d["no_coverage"] != 0 {
		t.Errorf("drops %v", d)
	}
}

// Time outside the spans (a duty cycle's off phase) is not counted, lossy spans are not split,
// records of time already split are counted as late, peer-to-peer copies are communication.
func TestTimeSplitSpans(t *testing.T) {
	a := NewAggregator()
	p := testProcess(2)
	a.Add(p, []record.Record{
		rec(record.KindKernel, 1, "_Z4gemmv", 0, 5),
		{Kind: record.KindMemcpy, Device: 1, Start: 1_000_000_000 + 5*ms, End: 1_000_000_000 + 8*ms, CopyKind: copyPtoP, SrcDevice: 0},
		rec(record.KindKernel, 1, "_Z4gemmv", 50, 60), // in a lossy span
		rec(record.KindKernel, 1, "_Z4gemmv", 100, 110),
	})
	a.Coverage(p, []record.Interval{span(0, 10), {Start: span(50, 60).Start, End: span(50, 60).End, Lossy: true}, span(100, 120), span(120, 130)})
	if got := podTime(t, a, "1"); !sameMS(got, 15, 3, 0, 0, 12) {
		t.Errorf("split (ms) %v, want compute 5+10, communication 3 (the PtoP copy), idle 2+10", got)
	}
	a.Add(p, []record.Record{rec(record.KindKernel, 1, "_Z4gemmv", 101, 102)}) // its span was split
	if d := splitDrops(t, a); d["late"] != 1 {
		t.Errorf("late records %v, want 1", d["late"])
	}
}

// Two processes of one pod on one GPU add up; the pod's series follows the pod labels.
func TestTimeSplitPodOfProcesses(t *testing.T) {
	a := NewAggregator()
	p1, p2 := testProcess(3), testProcess(4)
	for _, p := range []*record.Process{p1, p2} {
		a.Add(p, []record.Record{rec(record.KindKernel, 0, "_Z4gemmv", 0, 4)})
		a.Coverage(p, []record.Interval{span(0, 10)})
		a.Disconnect(p)
	}
	if got := podTime(t, a, "0"); !sameMS(got, 8, 0, 0, 0, 12) {
		t.Errorf("split (ms) %v, want 2 × (4 compute + 6 idle)", got)
	}
}

// A library that sends no coverage (wire version 1) holds a bounded number of records, counted
// when forgotten, and its budget comes back.
func TestTimeSplitWithoutCoverage(t *testing.T) {
	b := NewBudget(64 << 20)
	a := NewAggregator(WithBudget(b))
	p := testProcess(5)
	a.Connect(p)
	base := b.Used()
	batch := make([]record.Record, 1000)
	for i := range 200 {
		for j := range batch {
			k := uint64(i*len(batch) + j)
			batch[j] = record.Record{Kind: record.KindKernel, Device: 0, Start: 1e9 + k*1000, End: 1e9 + k*1000 + 500, Name: "_Z4gemmv"}
		}
		a.Add(p, batch)
	}
	if held := b.Used() - base; held > (maxSplitUncovered+splitBlock)*splitRecordBytes {
		t.Errorf("%d bytes held for a process without coverage, bound %d", held, maxSplitUncovered*splitRecordBytes)
	}
	if d := splitDrops(t, a); d["no_coverage"] < 200_000-maxSplitUncovered {
		t.Errorf("no_coverage drops %v, want at least %d", d["no_coverage"], 200_000-maxSplitUncovered)
	}
	a.Disconnect(p)
	if b.Used() != base {
		t.Errorf("budget %d after the disconnect, %d before the process", b.Used(), base)
	}
	if got := podTime(t, a, "0"); got != nil {
		t.Errorf("a process without coverage has a split: %v", got)
	}
}

// Past the memory budget records are left out of the split and counted; the histograms keep them.
func TestTimeSplitMemoryBudget(t *testing.T) {
	b := NewBudget(16 << 20)
	a := NewAggregator(WithBudget(b))
	p := testProcess(6)
	a.Connect(p)
	b.Charge(16 << 20) // full, after the GPUs were taken
	batch := make([]record.Record, splitBlock+10)
	for i := range batch {
		batch[i] = rec(record.KindKernel, 0, "_Z4gemmv", uint64(i), uint64(i)+1)
	}
	a.Add(p, batch)
	a.Coverage(p, []record.Interval{span(0, 1000), span(1000, 2000)})
	if d := splitDrops(t, a); d["memory_budget"] != 10 {
		t.Errorf("memory_budget drops %v, want 10 (the first %d records ride on the connection's charge)", d["memory_budget"], splitBlock)
	}
	if v := family(t, a.Snapshot(), "cupti_activity_records_total").Samples[0].Value; v != splitBlock+10 {
		t.Errorf("records %v, want every kernel counted", v)
	}
}

// Property: on random timelines (overlapping kernels of both classes, copies, spans with gaps
// and lossy ones; each record sent, in random order and batches, before the span in which it
// ends, as the library sends it: a kernel running at a cut comes with the next span), the
// states add up to the complete spans, and each equals a brute-force count, 0.1 ms at a time.
func TestTimeSplitProperty(t *testing.T) {
	for seed := range uint64(30) {
		rng := rand.New(rand.NewPCG(seed, 7))
		const unit = 100_000 // 0.1 ms: every time is a multiple
		const n = 400        // units
		var recs []record.Record
		for range 40 {
			a := 1 + uint64(rng.IntN(n))     // unit 0 is the first record's alone
			b := a + 1 + uint64(rng.IntN(9)) // shorter than a span, as kernels are than a flush period
			var r record.Record
			switch rng.IntN(4) {
			case 0:
				r = record.Record{Kind: record.KindKernel, Name: ncclKernel}
			case 1:
				r = record.Record{Kind: record.KindMemcpy, CopyKind: copyHtoD}
			default:
				r = record.Record{Kind: record.KindKernel, Name: "_Z4gemmv"}
			}
			r.Start, r.End = 1e9+a*unit, 1e9+b*unit
			recs = append(recs, r)
		}
		var spans []record.Interval
		for at := uint64(0); at < n+40; {
			l := 10 + uint64(rng.IntN(60))
			spans = append(spans, record.Interval{Start: 1e9 + at*unit, End: 1e9 + (at+l)*unit, Lossy: rng.IntN(6) == 0})
			at += l + uint64(rng.IntN(3))*10 // some gaps
		}
		// Brute force.
		var want [numSplitStates]float64
		for u := uint64(0); u < n+200; u++ {
			t0 := 1e9 + u*unit
			in := false
			for _, s := range spans {
				in = in || (!s.Lossy && t0 >= s.Start && t0 < s.End)
			}
			if !in {
				continue
			}
			var compute, comm, copies bool
			for _, r := range recs {
				if t0 >= r.Start && t0 < r.End {
					switch {
					case r.Kind == record.KindMemcpy:
						copies = true
					case r.Name == ncclKernel:
						comm = true
					default:
						compute = true
					}
				}
			}
			st := stateIdle
			switch {
			case compute && comm:
				st = stateOverlap
			case compute:
				st = stateCompute
			case comm:
				st = stateCommunication
			case copies:
				st = stateCopy
			}
			want[st] += unit / 1e9
		}
		// The aggregator.
		a := NewAggregator()
		p := testProcess(uint32(100 + seed))
		sent := make([]bool, len(recs))
		for i, s := range spans {
			var batch []record.Record
			for j, r := range recs {
				if !sent[j] && (r.End <= s.End || i == len(spans)-1) {
					batch = append(batch, r)
					sent[j] = true
				}
			}
			rng.Shuffle(len(batch), func(x, y int) { batch[x], batch[y] = batch[y], batch[x] })
			if i == 0 {
				batch = append([]record.Record{{Kind: record.KindKernel, Name: "_Z4gemmv", Start: 1e9, End: 1e9 + 1}}, batch...) // present from the start
				want[stateCompute] += 1e-9
				want[stateIdle] -= 1e-9
				if spans[0].Lossy {
					want[stateCompute] -= 1e-9
					want[stateIdle] += 1e-9
				}
			}
			cut := rng.IntN(len(batch) + 1)
			a.Add(p, batch[:cut])
			a.Add(p, batch[cut:])
			a.Coverage(p, []record.Interval{s})
		}
		a.Disconnect(p)
		got := podTime(t, a, "0")
		var total, wantTotal float64
		for st := range want {
			total += got[st]
			wantTotal += want[st] * 1e3
			if math.Abs(got[st]-want[st]*1e3) > 1e-3 {
				t.Errorf("seed %d: %s %.4f ms, brute force %.4f", seed, splitStates[st], got[st], want[st]*1e3)
			}
		}
		if d := splitDrops(t, a); d["late"] != 0 {
			t.Errorf("seed %d: late drops %v", seed, d)
		}
		if math.Abs(total-wantTotal) > 1e-3 {
			t.Errorf("seed %d: states add up to %.4f ms, the complete spans to %.4f", seed, total, wantTotal)
		}
	}
}

// BenchmarkAddWithSplit is the cost of Add per kernel record with the time split (records of a
// training step: compute kernels, an NCCL kernel, a copy), and of the split at each span.
//
//	go test ./activity -run '^$' -bench AddWithSplit
func BenchmarkAddWithSplit(b *testing.B) {
	a := NewAggregator()
	p := testProcess(9)
	a.Connect(p)
	names := []string{"_Z4gemmv", "_Z7softmaxv", ncclKernel, "_Z9layernormv"}
	batch := make([]record.Record, 1000)
	var at uint64 = 1e9
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		for j := range batch {
			batch[j] = record.Record{Kind: record.KindKernel, Device: 0, Start: at, End: at + 4000, Name: names[j%len(names)]}
			at += 5000
		}
		a.Add(p, batch)
		a.Coverage(p, []record.Interval{{Start: at - 5000*uint64(len(batch)), End: at}})
		_ = i
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch)), "ns/record")
}
