package attribution

import (
	"sync/atomic"

	"github.com/cupti-exporter/cupti-exporter/activity"
)

// What a client can make the join hold (records waiting for their samples, kernel classes,
// series and rate state, the join's scratch buffers) is charged to the activity receiver's
// memory budget (WithBudget), so that a flood of records is refused and counted instead of
// growing the heap: before, a 64-connection flood took RSS from 48 MB to 986 MB outside the
// budget. The sizes are estimates of live heap bytes, like the receiver's.
const (
	recBytes   = 64   // a held record: 24 B, its copy while a join takes it, bucket and slice growth
	recBlock   = 4096 // records reserved from the budget at once
	classBytes = 96   // a kernel class: map entry, name header; plus the name
	accBytes   = 96   // a series accumulator (kernel or pod), plus 9 B per metric
	rateBytes  = 96   // a class's rate state on a device, plus 24 B per metric
	procBytes  = 160  // a traced process, plus 16 B per coverage span

	// maxJoinItems bounds the items (sample x class x process) one join builds: a chunk of
	// samples is joined in parts so that the scratch buffers stay near 32 B x this.
	maxJoinItems = 1 << 18
	// scratchKeep is the most scratch a device keeps between joins; larger buffers (a join
	// of many overlapping records) are freed once used, so only one join's are ever live.
	scratchKeep = 1 << 20
	// maxOverlap bounds the records joined with one sample: a GPU runs at most 128 kernels
	// at once, so more than this are made up, and each would cost every sample it overlaps.
	maxOverlap = 8192
)

// memAccount is the join's share of the budget; a.mu guards it except pub.
type memAccount struct {
	budget  *activity.Budget
	charged int64        // bytes taken from the budget (or counted, without one)
	room    int          // records that fit in charged beyond those held
	classes int64        // bytes of the class table
	pub     atomic.Int64 // charged, for the gauge
}

// holdRecord makes room for one more held record, reserving a block of them from the budget
// at a time; false: the budget is full. a.mu is held.
func (a *Attributor) holdRecord() bool {
	m := &a.mem
	if m.room > 0 {
		m.room--
		return true
	}
	for _, n := range []int{recBlock, 1} {
		if m.budget.Reserve(int64(n * recBytes)) {
			m.charged += int64(n * recBytes)
			m.room = n - 1
			return true
		}
	}
	return false
}

// classRoom reports whether the budget takes a new kernel class named name. a.mu is held.
func (a *Attributor) classRoom(name string) bool {
	n := int64(classBytes + len(name))
	if !a.mem.budget.Reserve(n) {
		return false
	}
	a.mem.charged += n
	a.mem.classes += n
	return true
}

// settle charges (or gives back) the difference between what the join holds now and what it
// has taken from the budget, and publishes the gauges; a.mu is held. Memory already held (a
// join's scratch) is charged even past the limit, so that the receiver refuses more.
func (a *Attributor) settle() {
	m := &a.mem
	want := m.classes
	nm := int64(len(a.metrics))
	for _, d := range a.devOrder {
		held := d.pending.len() + len(d.carry)
		d.held.Store(int64(held))
		want += int64(held)*recBytes + d.sc.bytes
		want += int64(len(d.kernels)+len(d.pods)) * (accBytes + 9*nm)
		want += int64(len(d.carried)) * (rateBytes + 24*nm)
	}
	for _, ps := range a.procs {
		want += procBytes + 16*int64(cap(ps.spans))
	}
	switch diff := want - m.charged; {
	case diff > 0:
		m.budget.Charge(diff)
	case diff < 0:
		m.budget.Release(-diff)
	}
	m.charged, m.room = want, 0
	m.pub.Store(want)
}

// MemoryBytes returns the bytes the join holds, as charged to the budget.
func (a *Attributor) MemoryBytes() int64 { return a.mem.pub.Load() }

// shed frees the buffers whose size follows the records and samples of a join (the
// per-class ones stay: they are bounded by the class table).
func (sc *scratch) shed() {
	sc.itemLC, sc.itemProc, sc.itemW, sc.itemRun, sc.itemX, sc.off, sc.wsum, sc.gapW = nil, nil, nil, nil, nil, nil, nil, nil
	sc.itemLC2, sc.itemProc2, sc.itemW2, sc.itemRun2, sc.itemX2, sc.off2 = nil, nil, nil, nil, nil, nil
	sc.active, sc.ev, sc.gs, sc.v, sc.sobs, sc.u, sc.uPre = nil, nil, nil, nil, nil, nil, nil
	sc.sobsAll, sc.unc, sc.shared, sc.switched, sc.soloFit = nil, nil, nil, nil, nil
	sc.tOwnT, sc.tSure, sc.tRead, sc.on = nil, nil, nil, nil
	sc.cut, sc.cutEv, sc.cutEnd, sc.cutIdx, sc.typical, sc.cutDur = nil, nil, nil, edgeIndex{}, nil, nil
	sc.sEdge, sc.sIdx, sc.firstEnd, sc.lastStart = nil, edgeIndex{}, nil, nil
	sc.cover.Shed()
	sc.owners.Shed()
}

// scratchBytes sums the capacity of the join's reusable buffers.
func (sc *scratch) scratchBytes() int64 {
	const i32, f64 = 4, 8
	n := i32 * (cap(sc.itemLC) + cap(sc.itemProc) + cap(sc.off) + cap(sc.active) + cap(sc.loc) + cap(sc.slotOf) +
		cap(sc.classes) + cap(sc.rows) + cap(sc.metrics) + cap(sc.sobs) + cap(sc.itemLC2) + cap(sc.itemProc2) + cap(sc.off2) +
		cap(sc.lpid) + cap(sc.sobsAll) + cap(sc.cutIdx.next) + cap(sc.cutIdx.prev) + cap(sc.sIdx.next) + cap(sc.sIdx.prev))
	n += f64 * (cap(sc.itemW) + cap(sc.wsum) + cap(sc.gs) + cap(sc.v) + cap(sc.exp) + cap(sc.r) + cap(sc.newA) +
		cap(sc.priorA) + cap(sc.priorE) + cap(sc.gapW) + cap(sc.itemW2) + cap(sc.uPre) + 2*cap(sc.u) + cap(sc.part) + cap(sc.limit) +
		cap(sc.itemRun) + cap(sc.itemRun2) + cap(sc.itemX) + cap(sc.itemX2) +
		cap(sc.unc) + cap(sc.tOwnT) + cap(sc.tSure) + cap(sc.tRead) + cap(sc.on) +
		cap(sc.expS) + cap(sc.newAS) + cap(sc.priorAS) + cap(sc.priorES))
	n += 16*(cap(sc.ev)+cap(sc.cutEv)+cap(sc.cutEnd)+cap(sc.sEdge)+cap(sc.cutDur)) + 8*(cap(sc.accK)+cap(sc.accP)+cap(sc.accU)+cap(sc.firstEnd)+cap(sc.lastStart))
	n += cap(sc.shared) + cap(sc.switched) + cap(sc.soloFit) + cap(sc.cut) + 16*len(sc.locP) + 24*len(sc.typical) // the maps' entries (key and value), not their overhead
	return int64(n) + sc.cover.Bytes() + sc.owners.Bytes() + sc.fill.Bytes()
}
