package attribution

import (
	"cmp"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/cupti-exporter/cupti-exporter/attribution/turns"
	"github.com/cupti-exporter/cupti-exporter/attribution/waterfill"
	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// Class ids: a class is what the rate estimator fits one rate to (per device and metric):
// a kernel name, or one of these.
const (
	classIdle int32 = iota
	classUntraced
	classMemcpy
	classMemset
	// classQuiet is gap time while NVML shows an untraced process active that its share
	// does not fill: idle, and the rate fit holds its rate at the floor (nothing ran, so
	// the counters of such a gap are the untraced process's).
	classQuiet
	classOther // kernel names beyond maxClasses
	firstNamedClass
)

// maxClasses bounds the kernel names the join tells apart; further names share classOther
// (labelled "other").
const maxClasses = 8192

type classTable struct {
	byName   map[string]int32
	names    []string
	untraced int // classes of untraced processes (untracedID)
	last     string
	lastID   int32
}

func (t *classTable) init() {
	t.byName = map[string]int32{}
	t.names = []string{labelIdle, labelUntraced, labelMemcpy, labelMemset, labelIdle, labelOther}
	t.lastID = -1
}

// id interns a mangled kernel name.
func (t *classTable) id(name string) int32 {
	if t.lastID >= 0 && name == t.last {
		return t.lastID
	}
	id, ok := t.byName[name]
	if !ok {
		if len(t.names) >= maxClasses {
			return classOther
		}
		id = int32(len(t.names))
		t.byName[name] = id
		t.names = append(t.names, name)
	}
	t.last, t.lastID = name, id
	return id
}

// rec is a pending record, compactly: its span on the CUPTI clock, class and process slot.
type rec struct {
	start, end  int64
	class, proc int32
}

// psample is a held PM sample; idx maps its values to Attributor.metrics.
type psample struct {
	start, end int64
	idx        []int32
	vals       []float64
}

// acc is one attributed series set (a kernel label or a pod on one device).
type acc struct {
	sampled float64 // seconds
	// uncertain: seconds of sampled whose split rested on an estimate (a pod series only).
	uncertain float64
	vals      []float64 // by metric index
	has       []bool    // by metric index: got a value
	start     time.Time
	last      time.Time
	prio      snapshot.Priority // of a pod series: the highest of the processes it speaks for
}

func (c *acc) add(m int32, v float64) {
	if int(m) >= len(c.vals) {
		c.vals = append(c.vals, make([]float64, int(m)+1-len(c.vals))...)
		c.has = append(c.has, make([]bool, int(m)+1-len(c.has))...)
	}
	c.vals[m] += v
	c.has[m] = true
}

// rateKey is what the rate estimator fits one rate to: a class on a device, per process for a
// kernel (pid 0: every process's: idle, untraced, an untraced process's own class).
type rateKey struct {
	class int32
	pid   uint32
}

// classRate is the rate estimator's memory of one class on one device: decayed exposure
// seconds and decayed attributed quantity by metric index, over every sample (e, a) and over
// the solo samples only (es, as: no other process's item beside the class's; estimate.go).
type classRate struct {
	e, es float64
	a, as []float64
	quiet []float64 // by metric: the class's bound of a ratio's rate in the chunk before, -1: none (carryQuiet)
}

// devState is the join of one device.
type devState struct {
	gpu, uuid string
	dramPeak  float64  // the highest DRAM read rate seen, bytes a second (turns.go)
	labels    []string // gpu, uuid

	samples   []psample  // held, by start
	pending   pendingSet // records not yet in a chunk
	carry     []rec      // records of past chunks that reach past the frontier (by start)
	frontier  int64      // end of the newest attributed sample
	newest    int64      // end of the newest sample received
	lastBatch time.Time

	carried map[rateKey]*classRate // rate estimator state by class id and process
	turn    turns.State            // whose turn each sample was (package turns)
	// switches: its samples count context-switch cycles, so an untraced process NVML lists
	// counts as active even in a period none of NVML's draws credited it (ownership.go
	// tells its turns).
	switches bool

	nvml     []nvmlObs // NVML process observations the frontier has not passed, by start
	obsCount uint64    // observations taken
	// Decayed seconds of attributed samples, and of those with an untraced process present
	// (NVML showed one active, or a traced process did not trace part of the sample).
	presentE, sampledE float64
	// Decayed seconds of attributed samples whose split rested on an estimate (see unc).
	uncertainE float64

	kernels        map[string]*acc // by kernel label
	pods           map[podKey]*acc
	kinds          [3]float64 // seconds: traced, idle, untraced
	sharing        [3]float64 // seconds by how the GPU was shared (sharingLabels)
	late           uint64
	lateSeconds    float64
	joinSeconds    float64   // wall time spent in join
	droppedSamples [2]uint64 // invalid, before_frontier
	total          []float64 // attributed device totals by metric index (tests)

	sc   scratch
	held atomic.Int64 // pending and carried records, for the gauge read without the lock
}

// scratch holds buffers reused from chunk to chunk.
type scratch struct {
	itemLC   []int32   // local class of each item
	itemProc []int32   // process slot (-1: idle/untraced)
	itemW    []float64 // weight: overlap ns, concurrent kernels sharing
	// itemRun: how long the item's records span the sample (ns; concurrent kernels each
	// their own), what bounds a ratio's active time given to it (capActive)
	itemRun []float64
	// itemX: the item's exposure, the time the rate fit says it moved bytes at its rate (ns):
	// its records' span in the sample (kernels running side by side each run their whole
	// span), or its owned time where the turns are known; the weight for gaps.
	itemX   []float64
	off     []int32   // items of sample s: off[s]..off[s+1]
	wsum    []float64 // sum of weights of sample s
	active  []int32
	ev      []event
	gs      []float64
	loc     []int32         // class id -> local class shared by every process, -1
	locP    map[int64]int32 // (class id, process slot) -> a kernel's local class for that process
	lpid    []uint32        // local class -> the pid of its process, 0: every process's
	slotOf  []int32         // local class -> 1 + its item in the current sample, 0: none
	classes []int32         // local class -> class id
	accK    []*acc
	accP    []*acc // by proc slot
	u       []span
	uPre    []int64
	rows    []int32 // metric index -> row of v, -1
	metrics []int32 // row -> metric index
	v       []float64
	exp     []float64 // exposure seconds by local class
	r, newA []float64
	priorA  []float64
	priorE  []float64
	// The same over the solo samples only, and whether sample s is shared (markShared): by
	// the items of two or more processes running side by side, or by two turns (a context
	// switch in it, where every process is traced); switched[s]: sample s holds a context
	// switch and was split by its turns (applyNVML).
	expS, newAS      []float64
	priorAS, priorES []float64
	shared, switched []bool
	soloFit          []bool          // by local class: its rate is fitted on its solo samples (wholeTurnRates)
	mpsPIDs          map[uint32]bool // the MPS clients of the chunk's NVML observations (applyNVML: mpsClients), nil when none
	// quiet: each local class's bound on its rate of a ratio metric beside untraced
	// processes, -1 none (quietCaps); quietX and quietB its scratch.
	quiet   []float64
	quietX  []float64
	quietB  []quietBound
	part    []float64 // the parts of the current sample's items (estimate.go)
	limit   []float64 // the limits capActive gives the current sample's items
	fill    waterfill.Filler
	gapW    []float64 // gap (idle + untraced) weight of sample s
	sobs    []int32   // observation of sample s with active untraced processes, -1
	sobsAll []int32   // the observations the chunk's samples meet
	// Turns (turns.go): what the records cover of each sample, the chunk's contexts (and the
	// untraced ones' pods), each sample's owner distribution over them.
	cover  turns.Cover
	tCtx   []turns.Context
	tPod   []podKey
	owners turns.Owners
	tOwnT  []float64 // byOwner's scratch: each context's time, room and weight in a sample
	tSure  []float64 // keepInside's scratch: each context's time its uncut records span
	tRead  []float64 // each sample's DRAM read rate, bytes a second, NaN: none or a switch sample (turnSamples.readRates)
	// sliced: every context of the chunk is a time-sliced process, traced or untraced (no
	// MPS group), so the cut rules apply (cut.go)
	sliced bool
	// Records cut by another's turn (cut.go): cut[i] for ready[i]; the durations of each
	// class's uncut records per process (key as locP's); cutRecords' and cutLong's scratch;
	// besideUntraced: NVML lists an untraced process beside the chunk's (coverTurns).
	besideUntraced bool
	cut            []bool
	typical        map[int64]durSum
	cutEv          []cutEdge
	cutEnd         []cutEdge // cutRecords' record ends, sorted
	cutIdx         edgeIndex
	cutDur         []classDur
	// sampleEdges' index of one sample's record edges, for cutBound
	sEdge               []cutEdge
	sIdx                edgeIndex
	firstEnd, lastStart []int64 // by process slot
	on                  []*proc // tracedOn's answer
	// unc is how far sample s's split rested on an estimate (0..1): NVML's period shares (1),
	// records of several processes told apart by the rate fit alone (1), or an owner the
	// turns left in doubt (1 - its probability).
	unc     []float64
	upods   []podKey // pod of the untraced item -2-k
	upodIdx map[podKey]int32
	accU    []*acc // pod series of upods[k]
	// the rebuilt item arrays (applyNVML), swapped with the ones above
	itemLC2, itemProc2 []int32
	itemW2, itemRun2   []float64
	itemX2             []float64
	off2               []int32
	bytes              int64 // capacity of the buffers above after the last join
}

type event struct {
	t     int64
	delta int32
	k     int32 // index in active
}

// joinSpan is about how much device time one join takes: a released chunk is joined in parts
// of about this length. The rate fit, the quiet bounds and the turns run per part, so their
// result follows its length, which would otherwise be the decode period's (samples are released
// as each decode delivers them): replayed in 300 ms parts instead of 100 ms, run BB's MPS cases
// with an untraced client moved by up to 32 points and a two-client case's tensor share to a
// pod without tensor work from 0.02 to 1.28 % (scripts/gpu/sharesim -merge).
const joinSpan = int64(100 * time.Millisecond)

// release attributes the held samples of d that end by upTo; a.mu is held.
func (a *Attributor) release(d *devState, upTo int64, now time.Time) bool {
	if len(d.samples) == 0 {
		return false
	}
	if !slices.IsSortedFunc(d.samples, func(x, y psample) int { return cmp.Compare(x.start, y.start) }) {
		slices.SortStableFunc(d.samples, func(x, y psample) int { return cmp.Compare(x.start, y.start) })
	}
	n := 0
	for n < len(d.samples) && d.samples[n].end <= upTo {
		n++
	}
	if n == 0 {
		return false
	}
	chunk := d.samples[:n]
	fNew := d.frontier
	for _, s := range chunk {
		fNew = max(fNew, s.end)
	}
	ready := d.pending.take(d.carry, fNew)
	slices.SortFunc(ready, func(x, y rec) int { return cmp.Compare(x.start, y.start) })
	if d.switches {
		untraced, beside := a.untracedOn(d, chunk[0].start, fNew)
		d.sc.besideUntraced = beside
		if a.turnsMayCut(d, chunk[0].start, fNew, untraced) {
			d.sc.cutRecords(ready)
		} else {
			d.sc.cut = grow(d.sc.cut, len(ready)) // none cut: no turns will read them
		}
	}

	t := time.Now()
	// A sample makes at most one item per class and process of the records overlapping it
	// (plus idle and untraced): join the chunk in parts small enough to keep the scratch
	// buffers bounded.
	perSample := min(len(ready), len(a.classes.names)*max(len(a.procs), 1)) + 2
	part := max(1, maxJoinItems/perSample)
	// ... and in parts of about joinSpan each, whatever the decode period.
	if k := int(math.Round(float64(chunk[n-1].end-chunk[0].start) / float64(joinSpan))); k > 1 {
		part = min(part, (n+k-1)/k)
	}
	for i := 0; i < len(chunk); i += part {
		p := chunk[i:min(i+part, len(chunk))]
		a.join(d, p, ready, p[len(p)-1].end, now)
	}
	d.joinSeconds += time.Since(t).Seconds()
	if d.sc.bytes = d.sc.scratchBytes(); d.sc.bytes > scratchKeep {
		d.sc.shed()
		d.sc.bytes = d.sc.scratchBytes()
	}

	carry := ready[:0]
	for _, r := range ready {
		if r.end > fNew {
			carry = append(carry, r)
		} else {
			a.unref(r.proc)
		}
	}
	if cap(carry) > 2*len(carry)+recBlock { // a large chunk taken: do not keep its buffer
		carry = slices.Clone(carry)
	}
	d.carry = carry
	d.frontier = fNew
	d.pruneObservations()
	rest := copy(d.samples, d.samples[n:])
	clear(d.samples[rest:])
	d.samples = d.samples[:rest]
	return true
}

// join splits the samples of one chunk over the records that overlap them; a.mu is held.
func (a *Attributor) join(d *devState, chunk []psample, ready []rec, end int64, now time.Time) {
	sc := &d.sc
	a.untraced(d, chunk[0].start, end)
	a.resetJoin(sc)
	next := 0
	for _, s := range chunk {
		next = a.activeRecords(d, ready, next, s.start, s.end)
		idleW, untracedW, wsum := a.sampleItems(sc, ready, s.start, s.end)
		if d.switches { // what the turns need: each process's covered time and record edges
			sc.coverTurns(ready, s.start, s.end)
		}
		sc.off = append(sc.off, int32(len(sc.itemLC)))
		sc.wsum = append(sc.wsum, wsum)
		sc.gapW = append(sc.gapW, idleW+untracedW)
	}
	a.applyNVML(d, chunk, sc.local)
	a.present(d, chunk)
	a.attribute(d, chunk, now)
	for lc, c := range sc.classes {
		if sc.lpid[lc] == 0 {
			sc.loc[c] = -1
		}
	}
}

// resetJoin empties the chunk's local classes and items, keeping their buffers: every chunk
// numbers its classes afresh.
func (a *Attributor) resetJoin(sc *scratch) {
	// class id -> local class, -1 for none; classes named since the last chunk start at -1
	for len(sc.loc) < len(a.classes.names) {
		sc.loc = append(sc.loc, -1)
	}
	sc.classes, sc.lpid = sc.classes[:0], sc.lpid[:0]
	clear(sc.locP)
	if sc.locP == nil {
		sc.locP = map[int64]int32{}
	}
	sc.itemLC, sc.itemProc, sc.itemW, sc.itemRun, sc.itemX = sc.itemLC[:0], sc.itemProc[:0], sc.itemW[:0], sc.itemRun[:0], sc.itemX[:0]
	sc.off, sc.wsum, sc.gapW = append(sc.off[:0], 0), sc.wsum[:0], sc.gapW[:0]
	sc.cover.Reset()
	sc.active = sc.active[:0]
}

// kernelLocal is the chunk's local class of a record's class and process slot. A kernel's
// rate is fitted per process: pods that run the same kernel names at other launch widths or
// sizes move bytes at other rates (measured, run BB).
func (a *Attributor) kernelLocal(sc *scratch, class, slot int32) int32 {
	if slot < 0 || class < firstNamedClass && class != classMemcpy && class != classMemset && class != classOther {
		return sc.local(class)
	}
	key := classProc(class, slot)
	if l, ok := sc.locP[key]; ok {
		return l
	}
	l := int32(len(sc.classes))
	sc.locP[key] = l
	sc.classes, sc.lpid = append(sc.classes, class), append(sc.lpid, a.slots[slot].pid)
	return l
}

// activeRecords moves sc.active to the ready records overlapping the sample [lo, hi): those
// from next on that start before hi join, those that ended by lo leave (ready is sorted by
// start). It returns the next record not yet taken.
func (a *Attributor) activeRecords(d *devState, ready []rec, next int, lo, hi int64) int {
	sc := &d.sc
	for next < len(ready) && ready[next].start < hi {
		sc.active = append(sc.active, int32(next))
		next++
	}
	k := 0
	for _, ri := range sc.active {
		if ready[ri].end > lo {
			sc.active[k] = ri
			k++
		}
	}
	sc.active = sc.active[:k]
	if k > maxOverlap { // more records at once than a GPU runs: leave the latest out
		for _, ri := range sc.active[maxOverlap:] {
			ready[ri].end = ready[ri].start // ends the record: not carried, dropped once
		}
		a.drop("overlap_limit", uint64(k-maxOverlap), "more records overlap one sample than a GPU runs at once", "gpu", d.gpu)
		sc.active = sc.active[:maxOverlap]
	}
	return next
}

// sampleItems appends the items of the sample [lo, hi): one per class and process of the
// active records (weighted by their share of the time), then the idle and the untraced gaps
// between them. It returns the gaps' weights and the sum of all the weights.
func (a *Attributor) sampleItems(sc *scratch, ready []rec, lo, hi int64) (idleW, untracedW, wsum float64) {
	gap := func(x, y int64) {
		u := sc.measure(x, y)
		untracedW += float64(u)
		idleW += float64(y - x - u)
	}
	first := len(sc.itemLC)
	item := func(r rec, w float64) {
		wsum += w
		run := float64(min(r.end, hi) - max(r.start, lo)) // it ran (or waited for its turn) this long
		lc := a.kernelLocal(sc, r.class, r.proc)
		for int(lc) >= len(sc.slotOf) {
			sc.slotOf = append(sc.slotOf, 0)
		}
		// one item per class and process in a sample: the split is linear in the weight
		if i := sc.slotOf[lc] - 1; i >= 0 && sc.itemProc[i] == r.proc {
			sc.itemW[i] += w
			sc.itemRun[i] = min(sc.itemRun[i]+run, float64(hi-lo))
			sc.itemX[i] = sc.itemRun[i]
			return
		}
		sc.slotOf[lc] = int32(len(sc.itemLC)) + 1
		sc.itemLC = append(sc.itemLC, lc)
		sc.itemProc = append(sc.itemProc, r.proc)
		sc.itemW, sc.itemRun, sc.itemX = append(sc.itemW, w), append(sc.itemRun, run), append(sc.itemX, run)
	}
	switch len(sc.active) {
	case 0:
		gap(lo, hi)
	case 1:
		r := ready[sc.active[0]]
		x, y := max(r.start, lo), min(r.end, hi)
		if x >= y { // starts after this sample (it began before an earlier, longer one ended)
			gap(lo, hi)
			break
		}
		if x > lo {
			gap(lo, x)
		}
		item(r, float64(y-x))
		if y < hi {
			gap(y, hi)
		}
	default:
		sc.sweep(ready, lo, hi, gap, item)
	}
	if idleW > 0 {
		sc.itemLC, sc.itemProc, sc.itemW = append(sc.itemLC, sc.local(classIdle)), append(sc.itemProc, -1), append(sc.itemW, idleW)
		sc.itemRun, sc.itemX = append(sc.itemRun, idleW), append(sc.itemX, idleW)
		wsum += idleW
	}
	if untracedW > 0 {
		sc.itemLC, sc.itemProc, sc.itemW = append(sc.itemLC, sc.local(classUntraced)), append(sc.itemProc, -1), append(sc.itemW, untracedW)
		sc.itemRun, sc.itemX = append(sc.itemRun, untracedW), append(sc.itemX, untracedW)
		wsum += untracedW
	}
	for _, lc := range sc.itemLC[first:] {
		if int(lc) < len(sc.slotOf) {
			sc.slotOf[lc] = 0
		}
	}
	return idleW, untracedW, wsum
}

// coverTurns records the sample [lo, hi)'s entries for the turns (turns.go): each traced
// process's covered time, the first and last time covered, whether one of its records
// starts or ends inside it, the time of its uncut records that surely ran there (those wholly
// inside it; where no untraced process is listed, also those that start or end in it: no
// turn cut them, so each ran all its span) and the most its records may have run there
// (cut.go).
func (sc *scratch) coverTurns(ready []rec, lo, hi int64) {
	indexed := false
	for _, ri := range sc.active {
		r := ready[ri]
		if x, y := max(r.start, lo), min(r.end, hi); y > x && r.proc >= 0 {
			edge := (r.start > lo && r.start < hi) || (r.end > lo && r.end < hi)
			inside, bound := 0.0, float64(y-x)
			switch {
			case sc.cut[ri] && edge:
				if !indexed {
					sc.sampleEdges(ready, lo, hi)
					indexed = true
				}
				bound = sc.cutBound(r, x, y, lo, hi)
			case !sc.cut[ri] && edge && (r.start > lo && r.end < hi || !sc.besideUntraced):
				inside = float64(y - x)
			}
			sc.cover.Add(r.proc, float64(x-lo), float64(y-lo), edge, inside, bound)
		}
	}
	sc.cover.EndSample()
}

// local is the chunk's local class of class id c shared by every process (idle, untraced,
// an untraced process's class), created at its first use.
func (sc *scratch) local(class int32) int32 {
	for int(class) >= len(sc.loc) { // an untraced process's class, named by applyNVML
		sc.loc = append(sc.loc, -1)
	}
	if l := sc.loc[class]; l >= 0 {
		return l
	}
	l := int32(len(sc.classes))
	sc.loc[class] = l
	sc.classes, sc.lpid = append(sc.classes, class), append(sc.lpid, 0)
	return l
}

// sweep splits [lo, hi) among the active records that overlap it: a record's weight is the
// integral over its span of 1/(records running), so concurrent records share the time.
func (sc *scratch) sweep(ready []rec, lo, hi int64, gap func(x, y int64), item func(r rec, w float64)) {
	sc.ev = sc.ev[:0]
	for k, ri := range sc.active {
		r := ready[ri]
		x, y := max(r.start, lo), min(r.end, hi)
		if x >= y {
			continue
		}
		sc.ev = append(sc.ev, event{x, 1, int32(k)}, event{y, -1, int32(k)})
	}
	slices.SortFunc(sc.ev, func(p, q event) int { return cmp.Compare(p.t, q.t) })
	if cap(sc.gs) < len(sc.active) {
		sc.gs = make([]float64, len(sc.active)*2)
	}
	gs := sc.gs[:len(sc.active)]
	var g float64
	n, prev := 0, lo
	for _, e := range sc.ev {
		if e.t > prev {
			if n == 0 {
				gap(prev, e.t)
			} else {
				g += float64(e.t-prev) / float64(n)
			}
			prev = e.t
		}
		if e.delta > 0 {
			gs[e.k] = g
			n++
			continue
		}
		n--
		if w := g - gs[e.k]; w > 0 {
			item(ready[sc.active[e.k]], w)
		}
	}
	if prev < hi {
		gap(prev, hi)
	}
}

// untraced computes, for the chunk [lo, hi), the union of the time some process on d did
// not trace (present but outside its non-lossy coverage spans), into sc.u and its prefix
// lengths sc.uPre (the processes NVML shows beside them are applyNVML's); a.mu is held.
func (a *Attributor) untraced(d *devState, lo, hi int64) {
	sc := &d.sc
	sc.u = sc.u[:0]
	for _, ps := range a.procs {
		x, y := max(ps.presStart, lo), min(ps.presEnd, hi)
		if x >= y || !ps.onDevice(d) {
			continue
		}
		i, _ := slices.BinarySearchFunc(ps.spans, x, func(s span, t int64) int { return cmp.Compare(s.end, t+1) })
		cur := x
		for ; i < len(ps.spans) && ps.spans[i].start < y; i++ {
			if sp := ps.spans[i]; sp.start > cur {
				sc.u = append(sc.u, span{cur, sp.start})
			}
			cur = max(cur, ps.spans[i].end)
		}
		if cur < y {
			sc.u = append(sc.u, span{cur, y})
		}
	}
	slices.SortFunc(sc.u, func(p, q span) int { return cmp.Compare(p.start, q.start) })
	k := 0
	for _, s := range sc.u {
		if k > 0 && s.start <= sc.u[k-1].end {
			sc.u[k-1].end = max(sc.u[k-1].end, s.end)
			continue
		}
		sc.u[k] = s
		k++
	}
	sc.u = sc.u[:k]
	sc.uPre = sc.uPre[:0]
	var sum int64
	for _, s := range sc.u {
		sc.uPre = append(sc.uPre, sum)
		sum += s.end - s.start
	}
}

// measure is the untraced time inside [x, y).
func (sc *scratch) measure(x, y int64) int64 {
	if len(sc.u) == 0 {
		return 0
	}
	return min(sc.before(y)-sc.before(x), y-x)
}

// before is the untraced time before t.
func (sc *scratch) before(t int64) int64 {
	i, _ := slices.BinarySearchFunc(sc.u, t, func(s span, t int64) int { return cmp.Compare(s.start, t) })
	// spans 0..i-1 start before t
	if i == 0 {
		return 0
	}
	s := sc.u[i-1]
	return sc.uPre[i-1] + min(t, s.end) - s.start
}
