package attribution

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestCutRecords: a record inside whose span another process's record starts or ends was cut
// by that process's turn; its own process's records do not cut it, and the typical duration
// of a class comes from its process's uncut records only, weighted by duration.
func TestCutRecords(t *testing.T) {
	const m = int64(1e6)
	ready := []rec{
		{start: 0, end: 10 * m, class: 5, proc: 0},       // B's turn inside: cut
		{start: 2 * m, end: 3 * m, class: 7, proc: 1},    // inside A's record: not cut
		{start: 4 * m, end: 5 * m, class: 5, proc: 0},    // A's own, inside A's: not cut
		{start: 11 * m, end: 12 * m, class: 5, proc: 0},  // alone: not cut
		{start: 13 * m, end: 20 * m, class: 7, proc: 1},  // A's record ends inside: cut
		{start: 14 * m, end: 17 * m, class: 5, proc: 0},  // not cut
		{start: 21 * m, end: 22 * m, class: 5, proc: -1}, // no process: never cut
	}
	var sc scratch
	sc.cutRecords(ready)
	want := []bool{true, false, false, false, true, false, false}
	for i, c := range want {
		if sc.cut[i] != c {
			t.Errorf("record %d [%d, %d) ms of process %d: cut %v, want %v", i, ready[i].start/m, ready[i].end/m, ready[i].proc, sc.cut[i], c)
		}
	}
	// class 5 of process 0, uncut: 1, 1 and 3 ms: (1 + 1 + 9) / (1 + 1 + 3) ms
	if got := sc.typical[5<<32].typical(); math.Abs(got-2.2e6) > 1 {
		t.Errorf("typical duration of class 5 of process 0: %.0f ns, want 2.2 ms", got)
	}
	if s, ok := sc.typical[7<<32|1]; !ok || s.typical() != float64(m) {
		t.Errorf("typical duration of class 7 of process 1: %+v, want its one uncut record's 1 ms", s)
	}
}

// TestCutRecordsAsDefined: on random records of three processes (and some of none, and some
// empty), cutRecords cuts exactly the records inside whose span (strictly) another process's
// record starts or ends, as a search of every pair says; durations within three times one
// another, so that no record is cut for its length.
func TestCutRecordsAsDefined(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		ready := make([]rec, 1+rng.IntN(60))
		for i := range ready {
			s := int64(rng.IntN(40)) * 100 // ties on purpose
			ready[i] = rec{start: s, end: s + 100 + int64(rng.IntN(200)), proc: int32(rng.IntN(4)) - 1}
			if rng.IntN(10) == 0 {
				ready[i].end = s // empty: no edges, never cut
			}
		}
		slices.SortFunc(ready, func(p, q rec) int { return cmp.Compare(p.start, q.start) })
		var sc scratch
		sc.cutRecords(ready)
		for i, r := range ready {
			want := false
			for _, q := range ready {
				if r.proc < 0 || q.proc < 0 || q.proc == r.proc || q.end <= q.start {
					continue
				}
				want = want || (q.start > r.start && q.start < r.end) || (q.end > r.start && q.end < r.end)
			}
			if sc.cut[i] != want {
				t.Fatalf("round %d, record %d %+v: cut %v, want %v", round, i, r, sc.cut[i], want)
			}
		}
	}
}

// TestCutLong: a record longer than longCut times its class's median duration (by count) is
// cut, though no other record's edge falls inside it (an untraced process's turn, or one of a
// process whose own record spans it whole), also where most of the class's time is in such
// records (the duration-weighted mean would then be a bar the cut records set themselves), and
// the typical duration leaves it out.
func TestCutLong(t *testing.T) {
	const us = int64(1000)
	var ready []rec
	for i := range int64(9) { // class 3 of process 0: nine 100 µs kernels
		ready = append(ready, rec{start: i * 200 * us, end: i*200*us + 100*us, class: 3, proc: 0})
	}
	// two 2.5 ms records, switched out for another's turn: 5 of 5.9 ms
	ready = append(ready, rec{start: 2000 * us, end: 4500 * us, class: 3, proc: 0}, rec{start: 5000 * us, end: 7500 * us, class: 3, proc: 0})
	// a 390 µs record: under 4 × the 100 µs median
	ready = append(ready, rec{start: 8000 * us, end: 8390 * us, class: 3, proc: 0})
	// class 4 of process 1: one kernel, long, spanning the second 2.5 ms record whole (it was
	// preempted for process 0's turn): its own median, so not cut by length, and cut by the
	// edges of process 0's record
	ready = append(ready, rec{start: 4800 * us, end: 12000 * us, class: 4, proc: 1})
	slices.SortFunc(ready, func(p, q rec) int { return cmp.Compare(p.start, q.start) })
	var sc scratch
	sc.cutRecords(ready)
	for i, r := range ready {
		want := r.end-r.start == 2500*us || r.proc == 1
		if sc.cut[i] != want {
			t.Errorf("record %d of %d µs, process %d: cut %v, want %v", i, (r.end-r.start)/us, r.proc, sc.cut[i], want)
		}
	}
	typ := sc.typical[classProc(3, 0)].typical() / 1e3
	if want := (9*100*100 + 390*390) / (9*100 + 390.0); math.Abs(typ-want) > 1e-6 {
		t.Errorf("typical duration of class 3: %.3f µs, want %.3f", typ, want)
	}
	// A record as long as a sender may claim (a week): cut, and the class's typical duration
	// that of the others, not what a week's square leaves in a sum it was taken from.
	week := []rec{{start: 0, end: 7 * 24 * 3600 * 1e9, class: 3, proc: 0}}
	for i := range int64(9) {
		week = append(week, rec{start: 1000*us + i*200*us, end: 1100*us + i*200*us, class: 3, proc: 0})
	}
	sc.cutRecords(week)
	if !sc.cut[0] {
		t.Error("a week-long record of a 100 µs class: not cut")
	}
	if got := sc.typical[classProc(3, 0)].typical(); got != float64(100*us) {
		t.Errorf("typical duration beside a week-long record: %.0f ns, want 100,000", got)
	}
}

// TestCoverUncutEdge: in a sample that an uncut record starts or ends in, the time it covers
// there surely ran (Cover.Inside), its kernel having run all its span, where every process on
// the GPU is traced; beside an untraced process, whose turns leave no records, only an uncut
// record wholly inside the sample counts so. A cut record's time never does.
func TestCoverUncutEdge(t *testing.T) {
	const us = int64(1000)
	for _, c := range []struct {
		name         string
		ready        []rec // the first is the one checked, in the sample [1, 2) ms
		traced, untr float64
	}{
		{"uncut, ends in it", []rec{{start: 600 * us, end: 1300 * us}}, 300 * 1e3, 0},
		{"uncut, wholly inside", []rec{{start: 1100 * us, end: 1300 * us}}, 200 * 1e3, 200 * 1e3},
		{"cut, ends in it", []rec{{start: 600 * us, end: 1300 * us}, {start: 700 * us, end: 900 * us, proc: 1}}, 0, 0},
	} {
		for _, beside := range []bool{false, true} {
			var sc scratch
			sc.cutRecords(c.ready)
			sc.besideUntraced = beside
			sc.cover.Reset()
			for i := range c.ready {
				sc.active = append(sc.active, int32(i))
			}
			sc.coverTurns(c.ready, 1000*us, 2000*us)
			want := c.traced
			if beside {
				want = c.untr
			}
			if got := sc.cover.Inside[0]; got != want {
				t.Errorf("%s, beside an untraced process %v: %.0f µs sure, want %.0f", c.name, beside, got/1e3, want/1e3)
			}
		}
	}
}

// TestCutBound: how long a cut record may have run in the sample [0, 1 ms) it starts or ends
// in. Its process came in with it (no record of its own ended there before it): all it covers.
// It was running when a switch came (a record of its own ended there before): half of the rest
// of the sample, at most half its class's typical duration, never past another process's
// record edge. It resumed at a switch there (a record of its own starts after it): the same
// from its end back.
func TestCutBound(t *testing.T) {
	const us = 1000
	for _, c := range []struct {
		name    string
		ready   []rec // ready[0] is the cut record
		typical float64
		want    float64
	}{
		{"came in with it", []rec{{start: 200 * us, end: 5000 * us}}, 0, 800 * us},
		{"ran before it: half the rest", []rec{{start: 400 * us, end: 5000 * us}, {start: 100 * us, end: 300 * us}}, 0, 300 * us},
		{"ran before it: half its typical duration", []rec{{start: 400 * us, end: 5000 * us}, {start: 100 * us, end: 300 * us}}, 200 * us, 100 * us},
		{"ran before it: another's edge", []rec{{start: 400 * us, end: 5000 * us}, {start: 100 * us, end: 300 * us},
			{start: 450 * us, end: 3000 * us, proc: 1}}, 0, 50 * us},
		{"left after it", []rec{{start: -3000 * us, end: 500 * us}}, 0, 500 * us},
		{"resumed before it runs on", []rec{{start: -3000 * us, end: 500 * us}, {start: 600 * us, end: 900 * us}}, 0, 250 * us},
		{"starts and ends in the sample", []rec{{start: 100 * us, end: 900 * us}, {start: 300 * us, end: 700 * us, proc: 1}}, 0, 400 * us},
	} {
		t.Run(c.name, func(t *testing.T) {
			var sc scratch
			sc.typical = map[int64]durSum{}
			if c.typical > 0 {
				sc.typical[0] = durSum{ns: c.typical, ns2: c.typical * c.typical}
			}
			for i := range c.ready {
				sc.active = append(sc.active, int32(i))
			}
			r := c.ready[0]
			x, y := max(r.start, 0), min(r.end, 1000*us)
			sc.sampleEdges(c.ready, 0, 1000*us)
			if got := sc.cutBound(r, x, y, 0, 1000*us); math.Abs(got-c.want) > 1 {
				t.Errorf("%.0f µs, want %.0f", got/1e3, c.want/1e3)
			}
		})
	}
}

// BenchmarkCoverTurnsCut: one sample holding k records of two processes that cut one another
// (every record starts or ends in it), up to maxOverlap: the cover of a sample costs about
// the same per record whatever k (sampleEdges indexes the sample once, cutBound searches it),
// where a scan of the sample's records for each cut one cost k × k.
func BenchmarkCoverTurnsCut(b *testing.B) {
	for _, k := range []int{128, 1024, maxOverlap} {
		b.Run(fmt.Sprint("records=", k), func(b *testing.B) {
			const lo, hi = int64(0), int64(1e6)
			ready := make([]rec, k)
			for i := range ready {
				s := int64(i) * (hi / int64(k))
				ready[i] = rec{start: s, end: s + 2*hi, class: int32(i % 7), proc: int32(i % 2)}
			}
			var sc scratch
			sc.cutRecords(ready)
			for i := range ready {
				sc.active = append(sc.active, int32(i))
			}
			b.ResetTimer()
			for range b.N {
				sc.cover.Reset()
				sc.coverTurns(ready, lo, hi)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*k), "ns/record")
		})
	}
}

// BenchmarkCutRecords: a join part's records at 200,000 kernels a second (20,000 in 100 ms,
// two processes, 20 classes, one in fifty cut by a turn): the record edges sorted and searched,
// and the uncut records' durations sorted by class (cutLong), O(n log n).
func BenchmarkCutRecords(b *testing.B) {
	const n = 20000
	ready := make([]rec, n)
	for i := range ready {
		s := int64(i) * 5000
		d := int64(3000)
		if i%50 == 0 {
			d = 1e6 // switched out for another's turn
		}
		ready[i] = rec{start: s, end: s + d, class: int32(i % 20), proc: int32(i / 10 % 2)}
	}
	var sc scratch
	for range b.N {
		sc.cutRecords(ready)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/record")
}

// TestCutsOnlyWhereTurnsReadThem: the cut flags are worked out only for chunks whose turns
// read them. On a GPU whose samples count context switches but that one traced process has to
// itself (the usual case) cutRecords never runs; with two processes time-slicing it does, an
// untraced one that NVML shows included.
func TestCutsOnlyWhereTurnsReadThem(t *testing.T) {
	const span = 2 * int64(time.Second)
	pod := func(pid uint32, name string) simProc {
		return simProc{pid: pid, pod: name, traced: true, stream: 0.6, rate: 1000, names: [2]string{"stream", "spin"}, pause: 0.3}
	}
	for _, c := range []struct {
		name  string
		procs []simProc
		want  bool
	}{
		{"one process", []simProc{pod(10, "pod0")}, false},
		{"two time-sliced", []simProc{pod(10, "pod0"), pod(20, "pod1")}, true},
		{"one beside an untraced process", []simProc{pod(10, "pod0"), {pid: 20, stream: 0.6, rate: 1000, names: [2]string{"stream", "spin"}, pause: 0.3}}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := makeSlicedGPU(rand.New(rand.NewPCG(5, 6)), c.procs, span, 2*ms, true)
			g.switches = true
			ran := false
			debugHook = func(a *Attributor) {
				for _, d := range a.devOrder {
					ran = ran || d.sc.typical != nil // cutRecords makes it
				}
			}
			defer func() { debugHook = nil }()
			runShared(t, g, span)
			if ran != c.want {
				t.Errorf("cutRecords ran: %v, want %v", ran, c.want)
			}
		})
	}
}
