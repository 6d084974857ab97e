package attribution

import (
	"cmp"
	"math"
	"slices"
)

// Records cut by another process's turn (time-slicing). A kernel starts and ends only in its
// own context's turn, so a record inside whose span another process's record starts or ends
// was switched out for part of it: its span is not time it ran. A preempted kernel runs about
// as long as its class's records that were not cut, split between the turn it started in and
// the one it ended in. A record is also cut where it lasts more than longCut times its class's
// median (cutLong): an untraced process's turns leave no records, and a turn of a process whose
// own record spans the whole of this one leaves no edge inside it. The rules hold wherever the
// GPU's processes are time-sliced (no MPS group: its clients run side by side).
// Before, on an H200 (runs FF-FJ): a narrow bursty reader whose records are never cut
// (t-nibble) was understated by 7.3-12.7 %, one whose bursts outlast a time slice (t-trickle:
// 56-65 % of its read records' time in cut records) overstated by up to 6.5 %; run FJ, live,
// met every target of both workload sets (docs/attribution.md, "Records cut by another's turn").
// Beside an untraced process, before cutLong, t-nibble read -4.9 to -21.7 % live (runs FL-FN);
// -0.2 to -5.4 % with it (runs FM, FN; docs/attribution.md, "Beside an untraced process").
// With every process traced, the length rule and the uncut records kept at a switch
// (coverTurns) took run FO's traced pods' errors from 47.3 to 25.6 points on the tune set and
// 52.8 to 45.7 on the check set (docs/attribution.md, "A record inside another's preempted record").

// cutEdge is a record's start or end, with its process slot.
type cutEdge struct {
	t    int64
	proc int32
}

// edgeIndex is a sorted list of record edges with, for each, the nearest edge of another
// process at or after it and at or before it: where another process ran near a time, in
// O(log n).
type edgeIndex struct {
	e          []cutEdge
	next, prev []int32 // next[len(e)] = len(e); prev -1 for none
}

// build sorts e (which the index keeps) and indexes it.
func (x *edgeIndex) build(e []cutEdge) {
	slices.SortFunc(e, func(p, q cutEdge) int { return cmp.Compare(p.t, q.t) })
	x.index(e)
}

// index indexes e, sorted by time, which the index keeps.
func (x *edgeIndex) index(e []cutEdge) {
	n := len(e)
	x.e, x.next, x.prev = e, grow(x.next, n+1), grow(x.prev, n+1)
	x.next[n] = int32(n)
	for i := n - 1; i >= 0; i-- {
		x.next[i] = x.next[i+1]
		if i+1 < n && e[i+1].proc != e[i].proc {
			x.next[i] = int32(i + 1)
		}
	}
	for i := range n {
		x.prev[i] = -1
		if i > 0 {
			x.prev[i] = x.prev[i-1]
			if e[i-1].proc != e[i].proc {
				x.prev[i] = int32(i - 1)
			}
		}
	}
}

// after is the first edge after t of another process than proc (math.MaxInt64: none).
func (x *edgeIndex) after(t int64, proc int32) int64 {
	i, _ := slices.BinarySearchFunc(x.e, t+1, func(c cutEdge, t int64) int { return cmp.Compare(c.t, t) })
	if i < len(x.e) && x.e[i].proc == proc {
		i = int(x.next[i])
	}
	if i < len(x.e) {
		return x.e[i].t
	}
	return math.MaxInt64
}

// before is the last edge before t of another process than proc (math.MinInt64: none).
func (x *edgeIndex) before(t int64, proc int32) int64 {
	j, _ := slices.BinarySearchFunc(x.e, t, func(c cutEdge, t int64) int { return cmp.Compare(c.t, t) })
	if j--; j >= 0 && x.e[j].proc == proc {
		j = int(x.prev[j])
	}
	if j >= 0 {
		return x.e[j].t
	}
	return math.MinInt64
}

// classProc is the key of a record class of one process slot (kernelLocal's locP, typical).
func classProc(class, slot int32) int64 { return int64(class)<<32 | int64(uint32(slot)) }

// durSum sums the durations of a class's uncut records of one process, and their squares.
type durSum struct{ ns, ns2 float64 }

// typical is how long a kernel of the class that a turn cut runs: a switch falls in a kernel
// with odds in proportion to its duration, so the cut ones are the longer ones: the mean
// duration weighted by duration (sum of squares over sum), not the plain mean.
func (s durSum) typical() float64 { return s.ns2 / s.ns }

// cutRecords sets sc.cut[i] for each record of ready (sorted by start) inside whose span
// another process's record starts or ends, or that is longer than its class's others allow
// (cutLong), and sc.typical to the durations of each class's uncut records per process (key
// as kernelLocal's).
//
// The records come sorted by start, so the edges are their starts, in order, merged with their
// ends, sorted, and the records' queries come in time order: one pass, not a search each.
func (sc *scratch) cutRecords(ready []rec) {
	sc.cutEnd = sc.cutEnd[:0]
	for _, r := range ready {
		if r.proc >= 0 && r.end > r.start {
			sc.cutEnd = append(sc.cutEnd, cutEdge{r.end, r.proc})
		}
	}
	slices.SortFunc(sc.cutEnd, func(p, q cutEdge) int { return cmp.Compare(p.t, q.t) })
	sc.cutEv = sc.cutEv[:0]
	j := 0
	for _, r := range ready {
		if r.proc < 0 || r.end <= r.start {
			continue
		}
		for ; j < len(sc.cutEnd) && sc.cutEnd[j].t < r.start; j++ {
			sc.cutEv = append(sc.cutEv, sc.cutEnd[j])
		}
		sc.cutEv = append(sc.cutEv, cutEdge{r.start, r.proc})
	}
	sc.cutEv = append(sc.cutEv, sc.cutEnd[j:]...)
	x := &sc.cutIdx
	x.index(sc.cutEv)
	sc.cut = sc.cut[:0]
	clear(sc.typical)
	if sc.typical == nil {
		sc.typical = map[int64]durSum{}
	}
	i := 0 // the first edge after the record's start
	for _, r := range ready {
		for i < len(x.e) && x.e[i].t <= r.start {
			i++
		}
		k := i
		if k < len(x.e) && x.e[k].proc == r.proc {
			k = int(x.next[k])
		}
		sc.cut = append(sc.cut, r.proc >= 0 && k < len(x.e) && x.e[k].t < r.end)
	}
	sc.cutLong(ready)
}

// longCut: a record longer than longCut times its class's median duration (by count) was
// switched out for part of it, whether or not another record's edge falls inside it: beside an
// untraced process no record tells its turns, and with every process traced a record can lie
// wholly inside another process's that was preempted for its turn and resumed after it (the
// check set's c-burst inside c-steady's long kernels: docs/attribution.md). A turn lasts a
// time slice, many times a short kernel, and the median, unlike the duration-weighted mean,
// holds while most of a class's time is in cut records (t-trickle: 56-65 %, few records).
// Replayed on the tune set, 3, 4 and 6 gave 49, 48 and 48 misses beside untraced processes;
// the weighted mean (typical) in its place let cut records raise their own bar (t-trickle
// +8 to +13 %).
const longCut = 4

// classDur is an uncut record's class key (classProc), duration and index in ready.
type classDur struct {
	key int64
	d   float64
	i   int32
}

// cutLong marks as cut the records of each class, not cut by another's edge, longer than
// longCut times the class's median, and sums sc.typical over the rest (only over them: a
// record may last up to a week, activity.MaxRecordDuration, and its square in a sum would
// swamp the others'). O(n log n).
func (sc *scratch) cutLong(ready []rec) {
	sc.cutDur = sc.cutDur[:0]
	for i, r := range ready {
		if !sc.cut[i] && r.proc >= 0 && r.end > r.start {
			sc.cutDur = append(sc.cutDur, classDur{classProc(r.class, r.proc), float64(r.end - r.start), int32(i)})
		}
	}
	slices.SortFunc(sc.cutDur, func(p, q classDur) int {
		return cmp.Or(cmp.Compare(p.key, q.key), cmp.Compare(p.d, q.d))
	})
	for lo := 0; lo < len(sc.cutDur); {
		hi := lo + 1
		for hi < len(sc.cutDur) && sc.cutDur[hi].key == sc.cutDur[lo].key {
			hi++
		}
		limit := longCut * sc.cutDur[lo+(hi-lo)/2].d
		var s durSum
		for _, c := range sc.cutDur[lo:hi] {
			if c.d > limit {
				sc.cut[c.i] = true
				continue
			}
			s.ns += c.d
			s.ns2 += c.d * c.d
		}
		sc.typical[sc.cutDur[lo].key] = s
		lo = hi
	}
}

// sampleEdges indexes the record edges strictly inside the sample [lo, hi) of the records
// overlapping it (sc.active), for cutBound: sorted by time, with the nearest edge of another
// process after and before each, and per process its first record end and last record start
// there. O(k log k) for k records, once a sample, so a sample of many records costs no
// k × k (maxOverlap is 8,192).
func (sc *scratch) sampleEdges(ready []rec, lo, hi int64) {
	sc.sEdge = sc.sEdge[:0]
	for _, qi := range sc.active {
		q := ready[qi]
		if q.proc < 0 {
			continue
		}
		for int(q.proc) >= len(sc.firstEnd) {
			sc.firstEnd, sc.lastStart = append(sc.firstEnd, 0), append(sc.lastStart, 0)
		}
		sc.firstEnd[q.proc], sc.lastStart[q.proc] = math.MaxInt64, math.MinInt64
	}
	for _, qi := range sc.active {
		q := ready[qi]
		if q.proc < 0 {
			continue
		}
		if q.start > lo && q.start < hi {
			sc.sEdge = append(sc.sEdge, cutEdge{q.start, q.proc})
			sc.lastStart[q.proc] = max(sc.lastStart[q.proc], q.start)
		}
		if q.end > lo && q.end < hi {
			sc.sEdge = append(sc.sEdge, cutEdge{q.end, q.proc})
			sc.firstEnd[q.proc] = min(sc.firstEnd[q.proc], q.end)
		}
	}
	sc.sIdx.build(sc.sEdge)
}

// cutBound is how long cut record r, which covers [x, y) of the sample [lo, hi) and starts or
// ends there, may have run in it (sampleEdges indexed the sample). A record that starts in the
// sample after one of its process's records ended there was running when a switch came: it
// ran from its start until that switch, which is not known (half of what it covers); one that
// ends in the sample before another of its process's records starts there resumed at a switch
// in the sample (half again). Never past another process's record edge in the sample (that
// process ran then) and at most half its class's typical duration (durSum.typical; the other
// half runs in the turn it resumed or started in). Otherwise its process came in with it, or
// left after it, and it ran all it covers. A record that starts and ends in the sample ran at
// most until the first such edge and from the last, and at most its class's typical duration.
func (sc *scratch) cutBound(r rec, x, y, lo, hi int64) float64 {
	// the other processes' record edges inside (x, y), else y and x
	first, last := min(sc.sIdx.after(x, r.proc), y), max(sc.sIdx.before(y, r.proc), x)
	ranBefore := sc.firstEnd[r.proc] <= r.start // a record of its own ended in the sample before it
	runsAfter := sc.lastStart[r.proc] >= r.end  // one of its own starts in the sample after it
	starts, ends := r.start > lo && r.start < hi, r.end > lo && r.end < hi
	typical := -1.0
	if s, ok := sc.typical[classProc(r.class, r.proc)]; ok {
		typical = s.typical()
	}
	var b, limit float64
	switch {
	case starts && ends:
		b, limit = float64(first-x)+float64(y-last), typical
	case starts && ranBefore:
		b, limit = min(float64(y-x)/2, float64(first-x)), typical/2
	case ends && runsAfter:
		b, limit = min(float64(y-x)/2, float64(y-last)), typical/2
	default:
		return float64(y - x)
	}
	if typical >= 0 {
		b = min(b, limit)
	}
	return b
}
