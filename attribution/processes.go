package attribution

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cupti-exporter/cupti-exporter/attribution/turns"
	"github.com/cupti-exporter/cupti-exporter/gpuprocs"
)

// Pod series sources: a pod's series are from its kernel records, or estimated from NVML's
// per-process shares for a pod whose processes are not traced.
const (
	sourceKernel = "kernel"
	sourceNVML   = "nvml"
)

// maxObservations bounds the NVML observations held per device (about a minute at the
// health source's default cadence); maxObservedProcs the processes kept of one.
const (
	maxObservations  = 64
	maxObservedProcs = 256
)

// obsDropReasons are the reasons an observation is not used.
var obsDropReasons = []string{"invalid", "unknown_device", "late", "full"}

// nvmlObs is one held observation of a device, with what the join derived from it.
type nvmlObs struct {
	start, end int64
	shares     bool
	mig        bool // the GPU is in MIG mode: nothing is split by process
	mps        bool // procs lists an MPS client
	procs      []gpuprocs.Process
	listed     int // procs[:listed] are NVML's list, the rest carried from the period before

	classified bool
	untraced   []uproc // untraced processes NVML shows active (share > 0, or unknown)
	uShare     float64 // sum of their shares
	tShare     float64 // sum of the shares of the tracing processes NVML lists
	tMatched   int     // tracing processes found in NVML's list
	nTraced    int     // tracing processes present on the device in the period
	// Seconds of the period's samples joined so far: all, traced coverage, gaps.
	p, c, g float64
}

// uproc is an untraced process as the join splits samples over it.
type uproc struct {
	class int32
	pod   podKey
	share float64 // NaN: unknown
	mps   bool    // an MPS client: it runs in the server's context, beside the other clients
}

// ObserveProcesses takes one NVML observation of the processes on a GPU. Observations of a
// GPU must come in time order and before the watermark passes their period (the health
// source reads every second; the watermark is 3 s). It does not block on a join for long.
func (a *Attributor) ObserveProcesses(o gpuprocs.Observation) {
	a.mu.Lock()
	defer a.mu.Unlock()
	d := a.byUUID[strings.ToLower(o.UUID)]
	if d == nil {
		d = a.byGPU[o.GPU]
	}
	if d == nil {
		a.dropObs("unknown_device", "gpu", o.GPU, "uuid", o.UUID)
		return
	}
	start, end := o.Start.UnixNano(), o.End.UnixNano()
	switch {
	case end <= start || o.Start.IsZero():
		a.dropObs("invalid", "gpu", d.gpu, "start", o.Start, "end", o.End)
		return
	case end <= d.frontier:
		a.dropObs("late", "gpu", d.gpu, "end", o.End)
		return
	}
	if n := len(d.nvml); n > 0 && start < d.nvml[n-1].end { // overlaps the previous one: starts at its end
		start = d.nvml[n-1].end
		if end <= start {
			a.dropObs("invalid", "gpu", d.gpu, "start", o.Start, "end", o.End)
			return
		}
	}
	// Observations no sample will meet (sampling paused or idle-released: the join releases
	// held samples a watermark after the last batch) leave without a count.
	stale := a.cfg.now().UnixNano() - 4*int64(a.cfg.watermark)
	k := 0
	for k < len(d.nvml) && d.nvml[k].end < stale {
		k++
	}
	if k > 0 {
		d.nvml = append(d.nvml[:0], d.nvml[k:]...)
	}
	if len(d.nvml) >= maxObservations {
		a.dropObs("full", "gpu", d.gpu)
		d.nvml = append(d.nvml[:0], d.nvml[1:]...)
	}
	procs := o.Processes
	if len(procs) > maxObservedProcs {
		procs = procs[:maxObservedProcs]
	}
	obs := nvmlObs{start: start, end: end, shares: o.Shares, mig: o.MIG, procs: make([]gpuprocs.Process, len(procs))}
	for i, p := range procs {
		switch {
		case !o.Shares || math.IsNaN(p.SMShare):
			p.SMShare = math.NaN()
		default:
			p.SMShare = min(max(p.SMShare, 0), 1)
		}
		obs.procs[i] = p
	}
	obs.listed = len(obs.procs)
	if n := len(d.nvml); n > 0 && d.nvml[n-1].end == start {
		prev := &d.nvml[n-1]
		obs.procs = carryVanished(obs.procs, prev.procs[:prev.listed])
	}
	for _, p := range obs.procs {
		obs.mps = obs.mps || p.MPS == gpuprocs.MPSClient
	}
	d.nvml = append(d.nvml, obs)
	d.obsCount++
	a.dirty.Store(true)
}

// carryVanished adds to procs, with an unknown share, each process NVML listed in the period
// before (prev) that procs lacks, once (a carried process is not carried again): NVML lists
// the processes running at the end of a period, and the driver forgets the utilisation
// samples of a process that exited, so one that ran in part of the period and exited is in
// neither. Left out, its last period was the traced
// processes' alone: on run DE's recordings an untraced tensor process's last 0.9 s gave
// 6.4 % of the tensor-active seconds to a traced pod that never used the pipe
// (docs/attribution.md).
func carryVanished(procs, prev []gpuprocs.Process) []gpuprocs.Process {
	for _, p := range prev {
		if len(procs) >= maxObservedProcs {
			break
		}
		if !slices.ContainsFunc(procs, func(q gpuprocs.Process) bool { return q.PID == p.PID }) {
			p.SMShare = math.NaN()
			procs = append(procs, p)
		}
	}
	return procs
}

func (a *Attributor) dropObs(reason string, args ...any) {
	a.droppedObs[reason]++
	a.logBad("observation_"+reason, "NVML process observation left out of attribution", append(args, "reason", reason)...)
}

// classify finds the untraced processes of o (those NVML lists that are not a tracing
// process on d, matched by PID or by pod) that were active, once; a.mu is held.
func (a *Attributor) classify(d *devState, o *nvmlObs) {
	if o.classified {
		return
	}
	o.classified = true
	if o.mig { // processes in MIG instances run side by side: no turns, no shares to split by
		return
	}
	var tracing []*proc
	for _, ps := range a.procs {
		if ps.presStart < o.end && ps.presEnd > o.start && ps.onDevice(d) {
			tracing = append(tracing, ps)
		}
	}
	o.nTraced = len(tracing)
	for _, p := range o.procs {
		if p.MPS == gpuprocs.MPSServer { // runs its clients' kernels: their time, not its own
			continue
		}
		traced := false
		for _, ps := range tracing {
			if ps.pid == p.PID || (p.Pod != "" && ps.pod.pod == p.Pod && ps.pod.namespace == p.Namespace && ps.pod.container == p.Container) {
				traced = true
				break
			}
		}
		switch {
		case traced:
			o.tMatched++
			if !math.IsNaN(p.SMShare) {
				o.tShare += p.SMShare
			}
		case math.IsNaN(p.SMShare) || p.SMShare > 0 || d.switches:
			u := uproc{share: p.SMShare, mps: p.MPS == gpuprocs.MPSClient, pod: podKey{namespace: p.Namespace, pod: p.Pod, container: p.Container, source: sourceNVML}}
			key := "pid " + strconv.FormatUint(uint64(p.PID), 10)
			if p.Pod != "" {
				key = "pod " + p.Namespace + "/" + p.Pod + "/" + p.Container
			}
			u.class = a.classes.untracedID(key)
			o.untraced = append(o.untraced, u)
			if !math.IsNaN(p.SMShare) {
				o.uShare += p.SMShare
			}
		}
	}
}

// split says how much of the traced coverage (phi) and of the gaps (fGap) of o's samples
// belongs to its untraced processes, from the period's seconds joined so far and NVML's
// shares:
//
//   - untraced time in the period: uShare x P;
//   - inside the traced coverage C: what the tracing processes' own shares leave of it,
//     C - tShare x P (a traced kernel's record spans the slices other contexts ran), when
//     NVML lists them; else what the gaps G cannot hold, uShare x P - G;
//   - the rest of it in the gaps.
//
// Without shares (the driver has no per-process utilisation) the untraced processes take
// every gap and share the coverage as if they ran concurrently with the traced ones.
func (o *nvmlObs) split() (phi, fGap float64) {
	if !o.shares || math.IsNaN(o.uShare) || o.hasUnknown() {
		n := float64(len(o.untraced))
		return n / (n + float64(max(o.nTraced, 1))), 1
	}
	u := o.uShare * o.p
	x := u - o.g // the least of it that the gaps cannot hold
	if o.tMatched > 0 {
		x = max(x, o.c-o.tShare*o.p)
	}
	x = max(min(x, u, o.c), 0)
	if o.c > 0 {
		phi = x / o.c
	}
	if o.g > 0 {
		fGap = min(max((u-x)/o.g, 0), 1)
	}
	return phi, fGap
}

func (o *nvmlObs) hasUnknown() bool {
	for _, u := range o.untraced {
		if math.IsNaN(u.share) {
			return true
		}
	}
	return false
}

// applyNVML moves the part of each sample that belongs to untraced processes (NVML's
// observations) from the traced items and the gaps (built by join) to items of their own,
// and, where the device counts context switches, gives each sample to the context whose
// turn it was (turns.go); a.mu is held.
func (a *Attributor) applyNVML(d *devState, chunk []psample, local func(int32) int32) {
	sc := &d.sc
	sc.sobs, sc.sobsAll, sc.upods = sc.sobs[:0], sc.sobsAll[:0], sc.upods[:0]
	clear(sc.upodIdx)
	sc.switched = grow(sc.switched, len(chunk))
	any := false
	j := 0
	for s, smp := range chunk {
		var at int
		j, at = d.obsAt(j, smp)
		idx := int32(-1)
		if at >= 0 {
			o := &d.nvml[at]
			a.classify(d, o)
			if n := len(sc.sobsAll); n == 0 || sc.sobsAll[n-1] != int32(j) {
				sc.sobsAll = append(sc.sobsAll, int32(j))
			}
			switch {
			case o.mig:
				idx = int32(j)
				any = true
			case len(o.untraced) > 0:
				idx = int32(j)
				gap := sc.gapW[s]
				o.p += float64(smp.end - smp.start)
				o.g += gap
				o.c += sc.wsum[s] - gap
				any = true
			}
		}
		sc.sobs = append(sc.sobs, idx)
	}
	sc.mpsPIDs = d.mpsClients()
	byTurns := a.turns(d, chunk)
	sc.unc = grow(sc.unc, len(chunk))

	if !any && !byTurns {
		for s := range chunk {
			sc.unc[s] = a.overlapping(d, s)
		}
		return
	}
	// Rebuild the items: by owner where the turns are known, else traced items scaled by
	// 1-phi and gap items by 1-fGap (NVML's period shares); the untraced processes' items
	// after them.
	b := &itemBuilder{lc: sc.itemLC2[:0], proc: sc.itemProc2[:0], w: sc.itemW2[:0], run: sc.itemRun2[:0], x: sc.itemX2[:0], local: local, sc: sc}
	off2 := append(sc.off2[:0], 0)
	if sc.upodIdx == nil {
		sc.upodIdx = map[podKey]int32{}
	}
	untracedTurns := false
	for _, ctx := range sc.tCtx {
		untracedTurns = untracedTurns || ctx.Recordless()
	}
	for s := range chunk {
		lo, hi := sc.off[s], sc.off[s+1]
		switch {
		case sc.sobs[s] >= 0 && d.nvml[sc.sobs[s]].mig:
			// A MIG GPU: its instances run side by side and the samples cover all of them; no
			// split by process says whose the counters are (docs/attribution.md, "MIG").
			b.add(local(classUntraced), -1, sc.wsum[s], sc.wsum[s], sc.wsum[s])
			sc.unc[s] = 1
		case byTurns && sc.owners.Has(s) && a.owned(d, chunk, s):
			a.byOwner(d, chunk, s, b)
			sc.unc[s] = sc.owners.Doubt(s)
			sc.switched[s] = sc.owners.Switch(s)
			if untracedTurns {
				// Whose turns an untraced process took the rotation says, not a record: within
				// 5 % in some cases measured, off by 10-50 % in others (docs/attribution.md).
				sc.unc[s] = 1
			}
		case sc.sobs[s] >= 0 && d.nvml[sc.sobs[s]].mpsUntraced():
			a.byMPS(d, chunk, s, b)
			sc.unc[s] = 1
		case sc.sobs[s] >= 0:
			sc.unc[s] = a.byShares(d, chunk, s, b)
		default:
			sc.unc[s] = a.overlapping(d, s)
			b.lc, b.proc, b.w = append(b.lc, sc.itemLC[lo:hi]...), append(b.proc, sc.itemProc[lo:hi]...), append(b.w, sc.itemW[lo:hi]...)
			b.run, b.x = append(b.run, sc.itemRun[lo:hi]...), append(b.x, sc.itemX[lo:hi]...)
		}
		off2 = append(off2, int32(len(b.lc)))
	}
	sc.itemLC, sc.itemLC2 = b.lc, sc.itemLC
	sc.itemProc, sc.itemProc2 = b.proc, sc.itemProc
	sc.itemW, sc.itemW2 = b.w, sc.itemW
	sc.itemRun, sc.itemRun2 = b.run, sc.itemRun
	sc.itemX, sc.itemX2 = b.x, sc.itemX
	sc.off, sc.off2 = off2, sc.off
}

// itemBuilder collects the rebuilt items of a chunk (applyNVML).
type itemBuilder struct {
	lc, proc  []int32
	w, run, x []float64
	local     func(int32) int32
	sc        *scratch
}

// add appends an item of weight w whose records span run ns of the sample (capActive) and
// whose exposure is x ns (the rate fit).
func (b *itemBuilder) add(lc, proc int32, w, run, x float64) {
	if w > 0 {
		b.lc, b.proc, b.w = append(b.lc, lc), append(b.proc, proc), append(b.w, w)
		b.run, b.x = append(b.run, max(run, w)), append(b.x, x)
	}
}

// untraced adds an untraced process's item of weight w and exposure x: its class, and its
// pod's series (-2-k).
func (b *itemBuilder) untraced(class int32, pod podKey, w, x float64) {
	if w > 0 {
		b.add(b.local(class), b.podIndex(pod), w, w, x)
	}
}

// podIndex is the item process index (-2-k) of an untraced pod's series k.
func (b *itemBuilder) podIndex(pod podKey) int32 {
	sc := b.sc
	k, ok := sc.upodIdx[pod]
	if !ok {
		k = int32(len(sc.upods))
		sc.upodIdx[pod] = k
		sc.upods = append(sc.upods, pod)
	}
	return -2 - k
}

// owned reports whether sample s is split by owner: the GPU worked in it, or a traced
// record spans it (an idle sample keeps its idle and untraced gaps).
func (a *Attributor) owned(d *devState, chunk []psample, s int) bool {
	sc := &d.sc
	return sc.cover.Any(s) || a.busy(chunk[s])
}

// byOwner appends sample s's items split by its owner distribution (turns.go): a traced
// process that owns the sample gets the time its records span in it, the rest of its turn
// is quiet (it ran nothing: the counters are not idle's); an untraced process that owns it
// gets the whole sample.
//
// A sample that holds the one switch between two plain turns is split where the switch lies
// (splitSwitch). Any other sample that holds a switch is shared by the turns that pass in it,
// each by its owners' odds, but a traced process's part is at most the time its records span
// there, and a process one of whose records starts or ends there ran that span (a kernel
// starts and ends only in its turn; one resumed in the sample may have spanned another's turn
// there, which this overstates); what a turn cannot take goes to the others, not to quiet,
// but for the switches' own time, which no context ran (their cycles × SwitchNanosPerCycle).
// Measured on run BB's recordings, sharing by odds alone cost a bursty pod (a burst that ends
// early in the sample) 9 % of its bytes with every process traced; the fill gave the switches'
// time to the others too until this release (docs/attribution.md).
func (a *Attributor) byOwner(d *devState, chunk []psample, s int, b *itemBuilder) {
	sc := &d.sc
	n := len(sc.tCtx)
	g := sc.owners.Of(s)
	T := float64(chunk[s].end - chunk[s].start)
	act := a.activeShare(chunk[s])
	lo, hi := sc.off[s], sc.off[s+1]
	// Each context's time in the sample (tm), the most it can have (room: what its records
	// span; an untraced context, the whole sample) and its items' weight (ws).
	sc.tOwnT = grow(sc.tOwnT, 3*n)
	tm, room, ws := sc.tOwnT[:n], sc.tOwnT[n:2*n], sc.tOwnT[2*n:3*n]
	switchSample := sc.owners.Switch(s)
	cut := switchSample && sc.sliced // the records tell the turns that cut them (cut.go)
	for c, ctx := range sc.tCtx {
		room[c] = T
		edge := false // one of its records starts or ends in the sample
		if ctx.Key.Kind != turns.Untraced {
			room[c] = 0
			cov := &sc.cover
			for i := cov.Off[s]; i < cov.Off[s+1]; i++ {
				if ctx.Holds(cov.Slot[i]) {
					covered := cov.Time[i]
					if cut {
						covered = cov.Bound[i]
					}
					room[c] = max(room[c], min(covered, T)) // the MPS server's clients run side by side
					edge = edge || cov.Edge[i]
				}
			}
			for i := lo; i < hi; i++ {
				if ctx.Holds(sc.itemProc[i]) {
					ws[c] += sc.itemW[i]
				}
			}
			if ws[c] <= 0 {
				room[c] = 0
			}
		}
		switch {
		case !switchSample:
			tm[c] = g[c] * room[c]
		case edge && g[c] > minEdgeOdds:
			tm[c] = room[c]
		default:
			tm[c] = min(g[c]*T, room[c])
		}
	}
	if switchSample {
		avail := T - a.switchTime(chunk[s]) // no context ran during the switches
		if cut {
			sc.keepInside(s, avail, tm)
		}
		if !a.splitSwitch(d, chunk[s], s, tm, ws) {
			fillTurns(tm, room, g, avail)
		}
	}
	quiet := T
	for c := range n {
		quiet -= tm[c]
	}
	quiet = max(quiet, 0)
	for c, ctx := range sc.tCtx {
		if ctx.Key.Kind == turns.Untraced || tm[c] <= 0 {
			continue
		}
		for i := lo; i < hi; i++ {
			if ctx.Holds(sc.itemProc[i]) {
				nw := sc.itemW[i] * tm[c] / ws[c]
				x := nw * act // alone in its turn, it ran its owned time while the GPU worked
				if ctx.Key.Kind == turns.MPS {
					x = sc.itemX[i] * g[c] // the MPS server's clients run side by side
				}
				b.add(sc.itemLC[i], sc.itemProc[i], nw, sc.itemRun[i], x)
			}
		}
	}
	// Items of traced processes that are not states (a process that left before the chunk
	// yet has a record in it) keep nothing: their time is the owners'.
	b.add(b.local(classQuiet), -1, quiet, quiet, quiet)
	for c, ctx := range sc.tCtx {
		if ctx.Key.Kind == turns.Untraced {
			b.untraced(ctx.Class, sc.tPod[c], tm[c], tm[c]*act)
		}
	}
}

// splitSwitch sets each context's time (tm) in switch sample s (smp) where the turns place
// the one switch between two segments whose owners are plain (turns.Owners.Sides; each side's
// likeliest owner at least plainSides): the outgoing context ran from the sample's start to
// the switch, the incoming one from the switch's end to the sample's end, each for what its
// records cover there (an untraced context, all of it), and no context ran during the switch
// (its cycles × turns.SwitchNanosPerCycle): that time is quiet. A switch inside the sample is
// where the outgoing context's records end (it ran out of work) or the incoming one's begin,
// else halfway through the time their records allow. It reports false where the turns do not
// place the switch; byOwner then shares the sample by the turns' odds.
//
// Sharing every switch sample by the odds gave the time of the switch, about an eighth of a
// 1 ms sample, to the process whose long kernel spanned it (a streaming pod +1.2 to +3.3 %
// with every process traced); placed, the tune set's time-sliced cases replayed from runs
// DY-EC went from 216.0 to 165.3 points of error, and to 144.4 with the other switch samples
// filled to their time less the switches' (docs/attribution.md).
func (a *Attributor) splitSwitch(d *devState, smp psample, s int, tm, ws []float64) bool {
	sc := &d.sc
	place, before, after := sc.owners.Sides(s)
	if place == turns.NoPlace {
		return false
	}
	o, in := slices.Index(before, slices.Max(before)), slices.Index(after, slices.Max(after))
	if o == in || before[o] < plainSides || after[in] < plainSides ||
		sc.tCtx[o].Key.Kind == turns.MPS || sc.tCtx[in].Key.Kind == turns.MPS {
		return false
	}
	T := float64(smp.end - smp.start)
	dead := a.switchTime(smp)
	fo, to, co, recO := sc.spanIn(s, o, ws, T)
	fi, ti, ci, recI := sc.spanIn(s, in, ws, T)
	var sw float64 // where the switch starts, ns from the sample's start
	switch place {
	case turns.AtEnd:
		sw = T - dead
	case turns.AtStart:
		sw = 0
	default: // inside
		lo, hi := 0.0, T-dead
		if recO {
			lo = max(lo, fo)
			if to < T-edgeSlack {
				lo = max(lo, to)
			}
		}
		if recI {
			if fi > edgeSlack {
				hi = min(hi, fi-dead)
			}
			hi = min(hi, ti-dead)
		}
		switch {
		case recO && to < T-edgeSlack:
			sw = to
		case recI && fi > edgeSlack:
			sw = fi - dead
		default:
			sw = (lo + hi) / 2
		}
		sw = min(max(sw, 0), T-dead)
	}
	clear(tm)
	if to > fo {
		tm[o] = max(0, min(to, sw)-fo) * co / (to - fo)
	}
	if ti > fi {
		tm[in] = max(0, ti-max(fi, sw+dead)) * ci / (ti - fi)
	}
	return true
}

// switchTime is the ns of sample smp in which a context switch ran and no context did (its
// switch cycles × turns.SwitchNanosPerCycle), at most the sample.
func (a *Attributor) switchTime(smp psample) float64 {
	return min(a.switchCycles(smp)*turns.SwitchNanosPerCycle, float64(smp.end-smp.start))
}

// spanIn is what context c's records cover of switch sample s (of T ns): the first and last
// time covered (ns from the sample's start) and the time covered, and whether records tell it
// (a traced context with items there); an untraced context may have run through all of it.
func (sc *scratch) spanIn(s, c int, ws []float64, T float64) (from, to, covered float64, records bool) {
	ctx := sc.tCtx[c]
	if ctx.Key.Kind == turns.Untraced {
		return 0, T, T, false
	}
	if ws[c] <= 0 {
		return 0, 0, 0, false
	}
	cov := &sc.cover
	for j := cov.Off[s]; j < cov.Off[s+1]; j++ {
		if cov.Slot[j] == ctx.Slot {
			return cov.From[j], cov.To[j], cov.Time[j], cov.Time[j] > 0
		}
	}
	return 0, 0, 0, false
}

// plainSides: the owners of the segments around a switch are plain enough for splitSwitch to
// place it (chosen on the tune set of runs DY-EC's tap recordings, live and with processes
// hidden: 0.5 gave an untraced tensor process's active seconds to the other processes in
// samples whose owners were in doubt, up to 3.6 % of them; 0.7, 0.8 and 0.9 kept them within
// 1.34, 0.51 and 0.29 %, 0.95 and 0.99 under 0.3 %; the bytes were best at 0.8-0.9).
const plainSides = 0.9

// edgeSlack: a record's span that stops this close to a sample's edge reaches it (the clocks
// of records and samples agree to about 10 µs).
const edgeSlack = 10e3

// minEdgeOdds: a record edge in a switch sample gives its process the records' span there
// unless the turns all but rule it out (a record's clock may be 10 µs off the sample's).
const minEdgeOdds = 0.05

// keepInside keeps, in switch sample s, each context's time (tm) that its records surely ran
// there (Cover.Inside: uncut records wholly inside the sample and, where every process is
// traced, those that start or end in it) and scales the rest of every context's time down to
// what is left of avail (the sample less its switches) where the turns' odds and the
// records' spans gave out more than that. Without it a narrow bursty reader
// lost its bytes in the samples it shared with a fast reader whose records spanned them
// (t-nibble −7.3 to −12.7 %, runs FF-FJ; docs/attribution.md).
func (sc *scratch) keepInside(s int, avail float64, tm []float64) {
	n := len(sc.tCtx)
	sc.tSure = grow(sc.tSure, n)
	sure := sc.tSure
	var kept, rest float64
	cov := &sc.cover
	for c, ctx := range sc.tCtx {
		sure[c] = 0
		for i := cov.Off[s]; i < cov.Off[s+1]; i++ {
			if ctx.Holds(cov.Slot[i]) {
				sure[c] = min(tm[c], sure[c]+cov.Inside[i])
			}
		}
		kept += sure[c]
		rest += tm[c] - sure[c]
	}
	if left := max(0, avail-kept); rest > left && rest > 0 {
		for c := range tm {
			tm[c] = sure[c] + (tm[c]-sure[c])*left/rest
		}
	}
}

// fillTurns gives the time the turns of a switch sample could not take (their records span
// less than their odds' share) to the others, by their odds, none above its room, until they
// have T (the sample's time less its switches': no context ran then).
func fillTurns(tm, room, g []float64, T float64) {
	for range len(tm) {
		left := T
		var odds float64
		for c := range tm {
			left -= tm[c]
			if tm[c] < room[c] {
				odds += g[c]
			}
		}
		if left <= 1e-9*T || odds <= 0 {
			return
		}
		for c := range tm {
			if tm[c] < room[c] {
				tm[c] = min(room[c], tm[c]+left*g[c]/odds)
			}
		}
	}
}

// mpsUntraced reports whether every untraced process of o is an MPS client: they run side
// by side with the traced clients in the server's context, and NVML credits their time to
// the server (measured, run BB), so no share tells their part.
func (o *nvmlObs) mpsUntraced() bool {
	for _, u := range o.untraced {
		if !u.mps {
			return false
		}
	}
	return len(o.untraced) > 0
}

// byMPS appends sample s's items with the observation's untraced MPS clients beside the
// traced ones: in a sample in which the GPU worked, each untraced client runs the whole of
// it, side by side with the traced kernels (its exposure is the sample), and takes an equal
// part of the time with them; the time no traced kernel spans is theirs. The rate fit then
// gives them what the traced kernels' rates do not explain.
func (a *Attributor) byMPS(d *devState, chunk []psample, s int, b *itemBuilder) {
	sc := &d.sc
	lo, hi := sc.off[s], sc.off[s+1]
	o := &d.nvml[sc.sobs[s]]
	T := float64(chunk[s].end - chunk[s].start)
	if !a.busy(chunk[s]) {
		b.lc, b.proc, b.w = append(b.lc, sc.itemLC[lo:hi]...), append(b.proc, sc.itemProc[lo:hi]...), append(b.w, sc.itemW[lo:hi]...)
		b.run, b.x = append(b.run, sc.itemRun[lo:hi]...), append(b.x, sc.itemX[lo:hi]...)
		return
	}
	var procs []int32
	for i := lo; i < hi; i++ {
		if p := sc.itemProc[i]; p >= 0 && !slices.Contains(procs, p) {
			procs = append(procs, p)
		}
	}
	nu := float64(len(o.untraced))
	keep := float64(len(procs)) / (float64(len(procs)) + nu)
	var gap float64
	for i := lo; i < hi; i++ {
		if sc.itemProc[i] < 0 {
			gap += sc.itemW[i]
			continue
		}
		b.add(sc.itemLC[i], sc.itemProc[i], sc.itemW[i]*keep, sc.itemRun[i], sc.itemX[i])
	}
	uw := gap + (sc.wsum[s]-gap)*(1-keep)
	x := T * a.activeShare(chunk[s]) // it ran while the GPU worked
	for _, u := range o.untraced {
		b.add(b.local(u.class), b.podIndex(u.pod), uw/nu, T, x)
	}
}

// byShares appends sample s's items split by NVML's period shares (no turns known): the
// traced items keep 1-phi of their weight, the gaps 1-fGap, and the untraced processes of
// the observation take the rest in proportion to their shares. It returns how far the split
// rests on an estimate (the uncertainty gauge): 1, or 0 for one untraced process alone with
// the engine's activity in the sample.
func (a *Attributor) byShares(d *devState, chunk []psample, s int, b *itemBuilder) (unc float64) {
	sc := &d.sc
	lo, hi := sc.off[s], sc.off[s+1]
	o := &d.nvml[sc.sobs[s]]
	phi, fGap := o.split()
	unc = 1
	if o.nTraced == 0 {
		// No process on the GPU is traced: the untraced ones ran while its graphics engine
		// did, which the sample says for itself, better than NVML's share of the period (and
		// where NVML health read no share: a GPU with one process, health/processes.go). One
		// alone then owns what ran: no estimate.
		if busy, ok := a.engineBusy(chunk[s]); ok {
			fGap = busy
			if len(o.untraced) == 1 {
				unc = 0
			}
		}
	}
	var uw float64
	for i := lo; i < hi; i++ {
		lc, f := sc.itemLC[i], 1-phi
		switch sc.classes[lc] {
		case classIdle: // nothing ran: idle, with no share of the counters
			lc, f = b.local(classQuiet), 1-fGap
		case classUntraced:
			f = 1 - fGap
		}
		uw += sc.itemW[i] * (1 - f)
		b.add(lc, sc.itemProc[i], sc.itemW[i]*f, sc.itemRun[i], sc.itemX[i]*f)
	}
	if hi == lo { // a sample no record or gap reached (cannot happen: gaps cover it)
		uw = float64(chunk[s].end - chunk[s].start)
	}
	// By their shares; one whose share is unknown (a driver without per-process samples, or
	// a process carried from the period before) counts as the mean of the known ones, so the
	// parts add up to uw.
	var known float64
	n := 0
	for _, u := range o.untraced {
		if !math.IsNaN(u.share) {
			known += u.share
			n++
		}
	}
	share := func(u uproc) float64 {
		switch {
		case known <= 0:
			return 1
		case math.IsNaN(u.share):
			return known / float64(n)
		}
		return u.share
	}
	var total float64
	for _, u := range o.untraced {
		total += share(u)
	}
	for _, u := range o.untraced {
		f := share(u) / total
		b.untraced(u.class, u.pod, uw*f, uw*f)
	}
	return unc
}

// presentHalfLife is the half-life of the untraced-present share (the gauge).
const presentHalfLife = time.Minute

// overlapping is 1 when two or more traced processes have items in sample s, else 0: only
// the rate fit tells their parts apart there (no turns known).
func (a *Attributor) overlapping(d *devState, s int) float64 {
	sc := &d.sc
	first := int32(-1)
	for i := sc.off[s]; i < sc.off[s+1]; i++ {
		switch p := sc.itemProc[i]; {
		case p < 0:
		case first < 0:
			first = p
		case p != first:
			return 1
		}
	}
	return 0
}

// present adds the chunk's samples to the decayed seconds of the untraced-present gauge: a
// sample counts when NVML showed an untraced process active in it or some process on the
// device did not trace part of it; a.mu is held. Where NVML gave no share and no process on
// the device is traced, the sample's engine activity says whether the untraced ones ran (a
// lone process, whose share health does not read, may sit idle on the GPU).
func (a *Attributor) present(d *devState, chunk []psample) {
	sc := &d.sc
	var all, present, uncertain float64
	on := a.tracedOn(d, chunk[0].start, chunk[len(chunk)-1].end)
	j := 0
	for s, smp := range chunk {
		t := float64(smp.end-smp.start) / 1e9
		all += t
		var o *nvmlObs
		var at int
		if j, at = d.obsAt(j, smp); at >= 0 {
			o = &d.nvml[at]
		}
		if m := sharingOf(o, on, smp); m >= 0 {
			d.sharing[m] += t
		}
		observed := len(sc.sobs) > s && sc.sobs[s] >= 0
		if observed {
			if o := &d.nvml[sc.sobs[s]]; o.nTraced == 0 && o.hasUnknown() {
				busy, ok := a.engineBusy(smp)
				observed = !ok || busy > 0
			}
		}
		if observed || sc.measure(smp.start, smp.end) > 0 {
			present += t
		}
		uncertain += t * sc.unc[s]
	}
	decay := math.Exp2(-float64(chunk[len(chunk)-1].end-chunk[0].start) / float64(presentHalfLife))
	d.presentE = d.presentE*decay + present
	d.uncertainE = d.uncertainE*decay + uncertain
	d.sampledE = d.sampledE*decay + all
}

// The ways a GPU is shared (sharingLabels), by which docs/attribution.md measures the split's
// error: a shared sample's attributed time counts under one (cupti_attribution_sharing_seconds_total);
// a GPU with one process or none on it counts under none (an idle GPU's series budget).
const (
	sharingExclusive = iota - 1
	sharingTimeSliced
	sharingMPS
	sharingMIG
)

// tracedOn returns the traced processes present on device d at some time in [lo, hi), in
// d.sc.on (reused from chunk to chunk).
func (a *Attributor) tracedOn(d *devState, lo, hi int64) []*proc {
	on := d.sc.on[:0]
	for _, ps := range a.slots {
		if ps != nil && ps.presStart < hi && ps.presEnd > lo && ps.onDevice(d) {
			on = append(on, ps)
		}
	}
	d.sc.on = on
	return on
}

// obsAt returns the NVML observation that holds sample smp's middle (its index in d.nvml, -1
// if none), looking from index j on, and the index to look from for a later sample.
func (d *devState) obsAt(j int, smp psample) (next, at int) {
	mid := smp.start + (smp.end-smp.start)/2
	for j < len(d.nvml) && d.nvml[j].end <= mid {
		j++
	}
	if j < len(d.nvml) && d.nvml[j].start <= mid {
		return j, j
	}
	return j, -1
}

// sharingOf says how sample smp was shared: MIG or MPS where the NVML observation it falls
// in (o, nil if none) says so, else by how many processes were on the device: the traced ones
// present (on) and the untraced ones NVML showed active (sharingExclusive: one or none).
func sharingOf(o *nvmlObs, on []*proc, smp psample) int {
	n := 0
	if o != nil {
		switch {
		case o.mig:
			return sharingMIG
		case o.mps:
			return sharingMPS
		}
		n = len(o.untraced)
	}
	for _, ps := range on {
		if ps.presStart < smp.end && ps.presEnd > smp.start {
			n++
		}
	}
	if n >= 2 {
		return sharingTimeSliced
	}
	return sharingExclusive
}

// pruneObservations drops the observations the frontier has passed; a.mu is held.
func (d *devState) pruneObservations() {
	k := 0
	for k < len(d.nvml) && d.nvml[k].end <= d.frontier {
		k++
	}
	if k > 0 {
		d.nvml = append(d.nvml[:0], d.nvml[k:]...)
	}
}

// maxUntracedClasses bounds the classes of untraced processes (class ids are never
// reused, and PIDs come and go): beyond it they share the class of the untraced gaps, and
// keep their own pod series.
const maxUntracedClasses = 1024

// untracedID interns the class of an untraced process (by pod, else by PID); when the
// class table, or its share of untraced processes, is full it shares the class of the
// untraced gaps.
func (t *classTable) untracedID(key string) int32 {
	name := untracedPrefix + key
	if id, ok := t.byName[name]; ok {
		return id
	}
	if len(t.names) >= maxClasses || t.untraced >= maxUntracedClasses {
		return classUntraced
	}
	id := int32(len(t.names))
	t.byName[name] = id
	t.names = append(t.names, name)
	t.untraced++
	return id
}

// untracedPrefix marks the class names of untraced processes (no kernel name starts with
// a NUL byte).
const untracedPrefix = "\x00nvml "

// isUntraced reports whether class c is the untraced gaps' or an untraced process's.
func (t *classTable) isUntraced(c int32) bool {
	return c == classUntraced || (c >= firstNamedClass && len(t.names[c]) > len(untracedPrefix) && t.names[c][:len(untracedPrefix)] == untracedPrefix)
}
