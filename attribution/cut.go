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
// the one it ended in. What the records say is whole only where every process on the GPU is
// traced (an untraced process's turns leave no records), so byOwner uses it only there.
// Before, on an H200 (runs FF-FJ): a narrow bursty reader whose records are never cut
// (t-nibble) was understated by 7.3-12.7 %, one whose bursts outlast a time slice (t-trickle:
// 56-65 % of its read records' time in cut records) overstated by up to 6.5 %; run FJ, live,
// met every target of both workload sets (docs/attribution.md, "Records cut by another's turn").

// cutEdge is a record's start or end, with its process slot.
type cutEdge struct {
	t    int64
	proc int32
}

// durSum sums the durations of a class's uncut records of one process, and their squares.
type durSum struct{ ns, ns2 float64 }

// typical is how long a kernel of the class that a turn cut runs: a switch falls in a kernel
// with odds in proportion to its duration, so the cut ones are the longer ones: the mean
// duration weighted by duration (sum of squares over sum), not the plain mean.
func (s durSum) typical() float64 { return s.ns2 / s.ns }

// cutRecords sets sc.cut[i] for each record of ready (sorted by start) inside whose span
// another process's record starts or ends, and sc.typical to the durations of each class's
// uncut records per process (key as kernelLocal's).
func (sc *scratch) cutRecords(ready []rec) {
	sc.cutEv = sc.cutEv[:0]
	for _, r := range ready {
		if r.proc >= 0 && r.end > r.start {
			sc.cutEv = append(sc.cutEv, cutEdge{r.start, r.proc}, cutEdge{r.end, r.proc})
		}
	}
	ev := sc.cutEv
	slices.SortFunc(ev, func(p, q cutEdge) int { return cmp.Compare(p.t, q.t) })
	// other[i]: the first edge at or after i of another process than edge i's
	sc.cutOther = grow(sc.cutOther, len(ev)+1)
	other := sc.cutOther
	other[len(ev)] = int32(len(ev))
	for i := len(ev) - 1; i >= 0; i-- {
		other[i] = other[i+1]
		if i+1 < len(ev) && ev[i+1].proc != ev[i].proc {
			other[i] = int32(i + 1)
		}
	}
	sc.cut = sc.cut[:0]
	clear(sc.typical)
	if sc.typical == nil {
		sc.typical = map[int64]durSum{}
	}
	for _, r := range ready {
		i, _ := slices.BinarySearchFunc(ev, r.start+1, func(e cutEdge, t int64) int { return cmp.Compare(e.t, t) })
		if i < len(ev) && ev[i].proc == r.proc {
			i = int(other[i])
		}
		cut := r.proc >= 0 && i < len(ev) && ev[i].t < r.end
		sc.cut = append(sc.cut, cut)
		if !cut && r.proc >= 0 && r.end > r.start {
			k := int64(r.class)<<32 | int64(uint32(r.proc))
			s := sc.typical[k]
			d := float64(r.end - r.start)
			s.ns += d
			s.ns2 += d * d
			sc.typical[k] = s
		}
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
	e := sc.sEdge
	slices.SortFunc(e, func(p, q cutEdge) int { return cmp.Compare(p.t, q.t) })
	n := len(e)
	sc.sNext, sc.sPrev = grow(sc.sNext, n+1), grow(sc.sPrev, n+1)
	sc.sNext[n] = int32(n)
	for i := n - 1; i >= 0; i-- {
		sc.sNext[i] = sc.sNext[i+1]
		if i+1 < n && e[i+1].proc != e[i].proc {
			sc.sNext[i] = int32(i + 1)
		}
	}
	for i := range n {
		sc.sPrev[i] = -1
		if i > 0 {
			sc.sPrev[i] = sc.sPrev[i-1]
			if e[i-1].proc != e[i].proc {
				sc.sPrev[i] = int32(i - 1)
			}
		}
	}
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
	e := sc.sEdge
	first, last := y, x // the other processes' record edges inside (x, y)
	i, _ := slices.BinarySearchFunc(e, x+1, func(c cutEdge, t int64) int { return cmp.Compare(c.t, t) })
	if i < len(e) && e[i].proc == r.proc {
		i = int(sc.sNext[i])
	}
	if i < len(e) && e[i].t < y {
		first = e[i].t
	}
	j, _ := slices.BinarySearchFunc(e, y, func(c cutEdge, t int64) int { return cmp.Compare(c.t, t) })
	if j--; j >= 0 && e[j].proc == r.proc {
		j = int(sc.sPrev[j])
	}
	if j >= 0 && e[j].t > x {
		last = e[j].t
	}
	ranBefore := sc.firstEnd[r.proc] <= r.start // a record of its own ended in the sample before it
	runsAfter := sc.lastStart[r.proc] >= r.end  // one of its own starts in the sample after it
	starts, ends := r.start > lo && r.start < hi, r.end > lo && r.end < hi
	typical := -1.0
	if s, ok := sc.typical[int64(r.class)<<32|int64(uint32(r.proc))]; ok {
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
