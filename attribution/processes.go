package attribution

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// ProcessObservation is what NVML saw of the compute processes on one GPU over a period:
// its running list and, where the driver has them, each process's share of SM time. The
// binary feeds it from the health source (cmd/); the join uses it to give the time and the
// counters of processes that load no injection library to classes of their own instead of
// to the traced kernels they overlap or to "(idle)" (docs/attribution.md, "Untraced
// processes").
type ProcessObservation struct {
	GPU, UUID  string // the device, by UUID or else by gpu label
	Start, End time.Time
	Shares     bool // SMShare was read; without it the processes' activity is unknown
	Processes  []ObservedProcess
}

// ObservedProcess is one process of a ProcessObservation.
type ObservedProcess struct {
	PID uint32 // in NVML's PID namespace
	// SMShare is the share of the period's time a kernel of the process ran (0..1); NaN:
	// unknown (the process is running, its activity is not known).
	SMShare float64
	// The process's pod, resolved from its cgroup ("" when not in a pod or unresolved).
	Namespace, Pod, Container string
}

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
	procs      []ObservedProcess

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
}

// ObserveProcesses takes one NVML observation of the processes on a GPU. Observations of a
// GPU must come in time order and before the watermark passes their period (the health
// source reads every second; the watermark is 3 s). It does not block on a join for long.
func (a *Attributor) ObserveProcesses(o ProcessObservation) {
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
	obs := nvmlObs{start: start, end: end, shares: o.Shares, procs: make([]ObservedProcess, len(procs))}
	for i, p := range procs {
		switch {
		case !o.Shares || math.IsNaN(p.SMShare):
			p.SMShare = math.NaN()
		default:
			p.SMShare = min(max(p.SMShare, 0), 1)
		}
		obs.procs[i] = p
	}
	d.nvml = append(d.nvml, obs)
	d.obsCount++
	a.dirty.Store(true)
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
	var tracing []*proc
	for _, ps := range a.procs {
		if ps.presStart < o.end && ps.presEnd > o.start && ps.onDevice(d) {
			tracing = append(tracing, ps)
		}
	}
	o.nTraced = len(tracing)
	for _, p := range o.procs {
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
			u := uproc{share: p.SMShare, pod: podKey{namespace: p.Namespace, pod: p.Pod, container: p.Container, source: sourceNVML}}
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

// applyNVML moves the part of each sample that NVML's observations give to untraced
// processes from the traced items and the gaps (built by join) to items of their own; a.mu
// is held.
func (a *Attributor) applyNVML(d *devState, chunk []psample, local func(int32) int32) {
	sc := &d.sc
	sc.sobs, sc.upods = sc.sobs[:0], sc.upods[:0]
	clear(sc.upodIdx)
	any := false
	j := 0
	for s, smp := range chunk {
		mid := smp.start + (smp.end-smp.start)/2
		for j < len(d.nvml) && d.nvml[j].end <= mid {
			j++
		}
		idx := int32(-1)
		if j < len(d.nvml) && d.nvml[j].start <= mid {
			o := &d.nvml[j]
			a.classify(d, o)
			if len(o.untraced) > 0 {
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
	if !any {
		return
	}
	a.ownership(d, chunk)
	// Rebuild the items: traced items scaled by 1-phi, gap items by 1-fGap, and the
	// untraced processes' items after them.
	lc2, proc2, w2 := sc.itemLC2[:0], sc.itemProc2[:0], sc.itemW2[:0]
	off2 := append(sc.off2[:0], 0)
	if sc.upodIdx == nil {
		sc.upodIdx = map[podKey]int32{}
	}
	for s := range chunk {
		lo, hi := sc.off[s], sc.off[s+1]
		oi := sc.sobs[s]
		if oi < 0 {
			lc2, proc2, w2 = append(lc2, sc.itemLC[lo:hi]...), append(proc2, sc.itemProc[lo:hi]...), append(w2, sc.itemW[lo:hi]...)
			off2 = append(off2, int32(len(lc2)))
			continue
		}
		o := &d.nvml[oi]
		phi, fGap := o.split()
		if own := sc.own[s]; own >= 0 { // the owner is known from the turns (ownership.go)
			phi, fGap = own, 1 // a gap is never the traced process's: its part is the untraced one's
		}
		var uw float64
		for i := lo; i < hi; i++ {
			lc, f := sc.itemLC[i], 1-phi
			switch sc.classes[lc] {
			case classIdle: // nothing ran: idle, with no share of the counters
				lc, f = local(classQuiet), 1-fGap
			case classUntraced:
				f = 1 - fGap
			}
			uw += sc.itemW[i] * (1 - f)
			if w := sc.itemW[i] * f; w > 0 {
				lc2, proc2, w2 = append(lc2, lc), append(proc2, sc.itemProc[i]), append(w2, w)
			}
		}
		if hi == lo { // a sample no record or gap reached (cannot happen: gaps cover it)
			uw = float64(chunk[s].end - chunk[s].start)
		}
		var total float64
		for _, u := range o.untraced {
			if !math.IsNaN(u.share) {
				total += u.share
			}
		}
		for _, u := range o.untraced {
			f := 1 / float64(len(o.untraced))
			if total > 0 && !math.IsNaN(u.share) {
				f = u.share / total
			}
			if w := uw * f; w > 0 {
				k, ok := sc.upodIdx[u.pod]
				if !ok {
					k = int32(len(sc.upods))
					sc.upodIdx[u.pod] = k
					sc.upods = append(sc.upods, u.pod)
				}
				lc2, proc2, w2 = append(lc2, local(u.class)), append(proc2, -2-k), append(w2, w)
			}
		}
		off2 = append(off2, int32(len(lc2)))
	}
	sc.itemLC, sc.itemLC2 = lc2, sc.itemLC
	sc.itemProc, sc.itemProc2 = proc2, sc.itemProc
	sc.itemW, sc.itemW2 = w2, sc.itemW
	sc.off, sc.off2 = off2, sc.off
}

// presentHalfLife is the half-life of the untraced-present share (the gauge).
const presentHalfLife = time.Minute

// present adds the chunk's samples to the decayed seconds of the untraced-present gauge: a
// sample counts when NVML showed an untraced process active in it or some process on the
// device did not trace part of it; a.mu is held.
func (a *Attributor) present(d *devState, chunk []psample) {
	sc := &d.sc
	var all, present float64
	for s, smp := range chunk {
		t := float64(smp.end-smp.start) / 1e9
		all += t
		if (len(sc.sobs) > s && sc.sobs[s] >= 0) || sc.measure(smp.start, smp.end) > 0 {
			present += t
		}
	}
	decay := math.Exp2(-float64(chunk[len(chunk)-1].end-chunk[0].start) / float64(presentHalfLife))
	d.presentE = d.presentE*decay + present
	d.sampledE = d.sampledE*decay + all
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
