package attribution

import (
	"math"

	"github.com/cupti-exporter/cupti-exporter/attribution/turns"
	"github.com/cupti-exporter/cupti-exporter/gpuprocs"
)

// What the turn model (package turns) needs of a chunk, and its answer.

// turnContexts lists the chunk's contexts into sc.tCtx (and the untraced ones' pods into
// sc.tPod): the traced processes present on the device (the MPS clients among them as one
// group), and the untraced processes NVML shows (untraced MPS clients in the group too);
// a.mu is held.
func (a *Attributor) turnContexts(d *devState, lo, hi int64) {
	sc := &d.sc
	sc.tCtx, sc.tPod = sc.tCtx[:0], sc.tPod[:0]
	add := func(ctx turns.Context, pod podKey) {
		sc.tCtx, sc.tPod = append(sc.tCtx, ctx), append(sc.tPod, pod)
	}
	mps := sc.mpsPIDs
	untracedMPS := false
	seen := map[int32]bool{}
	for _, oi := range sc.sobsAll {
		for _, u := range d.nvml[oi].untraced {
			if u.mps {
				untracedMPS = true
				continue
			}
			if !seen[u.class] {
				seen[u.class] = true
				add(turns.Context{Key: turns.Key{Kind: turns.Untraced, ID: int64(u.class)}, Slot: -1, Class: u.class}, u.pod)
			}
		}
	}
	var group []int32
	for _, ps := range a.tracedOn(d, lo, hi) {
		if mps[ps.pid] {
			group = append(group, ps.slot)
			continue
		}
		add(turns.Context{Key: turns.TracedKey(ps.slot, ps.pid), Slot: ps.slot, Class: -1}, podKey{})
	}
	if len(group) > 0 || untracedMPS {
		add(turns.Context{Key: turns.Key{Kind: turns.MPS}, Slot: -1, Class: -1, Slots: group}, podKey{})
	}
	sc.sliced = true
	for _, ctx := range sc.tCtx {
		sc.sliced = sc.sliced && ctx.Key.Kind != turns.MPS
	}
}

// untracedOn says what NVML shows on device d in [lo, hi): listed, an untraced process; beside,
// one that is not an MPS client (its turns leave no records, so a record no other record cuts
// may still have been switched out for one of them: coverTurns); a.mu is held.
func (a *Attributor) untracedOn(d *devState, lo, hi int64) (listed, beside bool) {
	for i := range d.nvml {
		o := &d.nvml[i]
		if o.start >= hi {
			break
		}
		if o.end <= lo {
			continue
		}
		a.classify(d, o)
		for _, u := range o.untraced {
			listed, beside = true, beside || !u.mps
		}
	}
	return listed, beside
}

// turnsMayCut says whether the turns of any join part of the chunk [lo, hi) may read which of
// its records another's turn cut (cut.go): two or more processes may share the device, traced
// ones present or untraced ones NVML shows. A part's contexts are among the chunk's, so where
// the chunk has one process, the usual case, no part has two, and the flags would go unused:
// cutRecords cost 74-75 ns a record (BenchmarkCutRecords), 1.5 % of a core at 200k kernels a
// second. a.mu is held.
func (a *Attributor) turnsMayCut(d *devState, lo, hi int64, untraced bool) bool {
	n := len(a.tracedOn(d, lo, hi))
	return n >= 2 || n == 1 && untraced
}

// turns sets sc.owners (a distribution over sc.tCtx per sample) for the chunk's samples when
// the device counts context switches and two or more contexts share it; a.mu is held.
func (a *Attributor) turns(d *devState, chunk []psample) bool {
	sc := &d.sc
	if !d.switches || len(chunk) == 0 {
		sc.tCtx = sc.tCtx[:0]
		return false
	}
	a.turnContexts(d, chunk[0].start, chunk[len(chunk)-1].end)
	ts := &turnSamples{a: a, d: d, chunk: chunk}
	ts.readRates()
	if !d.turn.Chunk(sc.tCtx, ts, &sc.cover, &sc.owners) {
		return false
	}
	if turnsHook != nil {
		turnsHook(chunk, sc.tCtx, &sc.owners)
	}
	return true
}

// turnSamples is a chunk's samples as the turn model reads them.
type turnSamples struct {
	a     *Attributor
	d     *devState
	chunk []psample
	dramM int32 // the DRAM read metric's index, -1: the samples have none
}

// What a sample's pipes say of who ran through it (turns.Signatures).
const (
	// pipeActiveSuffix ends the names of the curated families of a pipe's active share: a
	// kernel uses the pipe or not, unlike the SMs, their occupancy or DRAM, which every kernel
	// uses in some measure.
	pipeActiveSuffix = "_pipe_active_ratio"
	// pipeBusy and pipeIdle: a pipe's active share at least pipeBusy of the sample, or at most
	// pipeIdle of it, says something of who ran; in between, anyone may have.
	pipeBusy = 0.5
	pipeIdle = 0.02
	// knownSolo is how much solo time a class needs (decayed, carried) for its rate to count
	// as known: ten samples at 1 ms.
	knownSolo = 0.01
)

// Plausible reports whether context ctx can have run through sample s (turns.Signatures;
// docs/attribution.md, "What the pipes say of the turns"). Not where a pipe was busy through at
// least pipeBusy of the sample while each of the context's classes there is known to keep it
// busy at most a tenth of that (an untraced process: pipeIdle of that, practically never), nor,
// for a traced process, where the pipe was idle while each of its kernels there is known to
// keep it busy pipeBusy of its time at least. A class whose rate is not known yet (too little
// solo time) objects to nothing. On run FD's `ts3f-t:2` (an H200; the tune set's bursty t-flick
// untraced beside a traced tensor process) the turns gave t-flick two thirds of samples in
// which the tensor pipe was 99.7 % busy, and the rate fit, carried, gave it 1.59 % of the
// tensor-active seconds, though it never used the pipe.
func (t *turnSamples) Plausible(s int, ctx turns.Context) bool {
	if ctx.Key.Kind == turns.MPS {
		return true // side by side: the clients' signatures add up
	}
	smp := t.chunk[s]
	for j, m := range smp.idx {
		met := t.a.metrics[m]
		if !met.pipe || math.IsNaN(smp.vals[j]) {
			continue
		}
		// An untraced process's class is all its kernels at once, a mix that uses a pipe by
		// turns: only one that never used it in its solo time cannot have kept it busy, and
		// one that did use it may not have at any one time.
		act := smp.vals[j] * met.scale
		busy, idle := act >= pipeBusy, act <= pipeIdle && ctx.Key.Kind == turns.Traced
		if !busy && !idle {
			continue
		}
		limit := quietShare // of a busy pipe, what a class known to run beside it keeps busy at most
		if ctx.Key.Kind == turns.Untraced {
			limit = pipeIdle
		}
		lo, hi, known := t.knownRates(s, ctx, m)
		if known && (busy && hi <= limit*act || idle && lo >= pipeBusy) {
			return false
		}
	}
	return true
}

// knownRates returns the lowest and highest carried solo rate of metric m among context ctx's
// classes in sample s (an untraced process: its class; a traced one: its records' classes
// there), known false where one of them is not known or it has none there.
func (t *turnSamples) knownRates(s int, ctx turns.Context, m int32) (lo, hi float64, known bool) {
	lo, hi = math.Inf(1), math.Inf(-1)
	rate := func(k rateKey) bool {
		r, ok := t.d.soloRate(k, m)
		if ok {
			lo, hi = min(lo, r), max(hi, r)
		}
		return ok
	}
	if ctx.Key.Kind == turns.Untraced {
		return lo, hi, rate(rateKey{ctx.Class, 0})
	}
	sc := &t.d.sc
	for i := sc.off[s]; i < sc.off[s+1]; i++ {
		if !ctx.Holds(sc.itemProc[i]) {
			continue
		}
		if lc := sc.itemLC[i]; !rate(rateKey{sc.classes[lc], sc.lpid[lc]}) {
			return lo, hi, false
		}
	}
	return lo, hi, hi >= lo
}

func (t *turnSamples) Len() int                   { return len(t.chunk) }
func (t *turnSamples) Nanoseconds(s int) int64    { return t.chunk[s].end - t.chunk[s].start }
func (t *turnSamples) SwitchCycles(s int) float64 { return t.a.switchCycles(t.chunk[s]) }
func (t *turnSamples) Busy(s int) bool            { return t.a.busy(t.chunk[s]) }

// turnsHook, when set (tests), sees every chunk's owner distributions.
var turnsHook func(chunk []psample, ctxs []turns.Context, own *turns.Owners)

// mpsClients are the PIDs that the NVML observations the chunk's samples meet list as MPS
// clients (nil when none), kept for the chunk in sc.mpsPIDs by applyNVML; a.mu is held.
func (d *devState) mpsClients() map[uint32]bool {
	var mps map[uint32]bool
	for _, oi := range d.sc.sobsAll {
		for _, p := range d.nvml[oi].procs {
			if p.MPS == gpuprocs.MPSClient {
				if mps == nil {
					mps = map[uint32]bool{}
				}
				mps[p.PID] = true
			}
		}
	}
	return mps
}

// What a sample's DRAM reads say of whose turn it was (turns.Evidence).
const (
	// dramReadBase is the Perfworks base of DRAM read bytes (dram__bytes_read.sum).
	dramReadBase = "dram__bytes_read"
	// dramSpread is how far a whole turn's read rate lies from what its kernels' solo rates
	// say, as a share of that (a normal spread), and dramFloor the least spread, as a share of
	// the device's highest rate seen (a kernel that reads next to nothing). Chosen on the tune
	// set's tap recordings of runs DY-FT (0.10, 0.15, 0.25 and 0.40; docs/attribution.md,
	// "How fast a turn read").
	dramSpread = 0.15
	dramFloor  = 0.05
	// dramMaxOdds bounds what one sample says, either way.
	dramMaxOdds = 5.0
)

// readRates sets each of the chunk's samples' DRAM read rate (bytes a second, sc.tRead; NaN
// where it has none, and in a sample holding a switch, whose reads are two turns') and the
// metric's index (t.dramM), and raises the device's highest read rate seen (d.dramPeak) to the
// chunk's, switch samples included.
func (t *turnSamples) readRates() {
	sc := &t.d.sc
	t.dramM = -1
	sc.tRead = grow(sc.tRead, len(t.chunk))
	for s, smp := range t.chunk {
		sc.tRead[s] = math.NaN()
		for j, m := range smp.idx {
			met := t.a.metrics[m]
			if !met.dramRead || math.IsNaN(smp.vals[j]) {
				continue
			}
			t.dramM = m
			if smp.end > smp.start {
				r := smp.vals[j] * met.scale
				if met.q == quantityCount {
					r /= float64(smp.end-smp.start) / 1e9
				}
				t.d.dramPeak = max(t.d.dramPeak, r)
				if !(t.a.switchCycles(smp) > 0) {
					sc.tRead[s] = r
				}
			}
			break
		}
	}
}

// Likelihood (turns.Evidence; docs/attribution.md, "How fast a turn read") weighs a traced
// process's turn by how near the sample's DRAM read rate lies to what its kernels there are
// known to read alone (their classes' carried solo rates), a normal density of spread
// dramSpread (at least dramFloor of the device's highest rate); against it, an untraced
// process, whose kernels no record names, reads at any rate up to the highest, equally likely
// (1). So a turn that read as the traced kernels read is theirs rather than the untraced
// process's, and one that read otherwise is rather the untraced process's: the rotation alone
// gave a narrow bursty untraced reader the turns of the long readers beside it, or theirs to
// it. A sample holding a switch (two turns' reads), a context whose kernels' rates are not
// known yet, an MPS group or a device without the metric say nothing.
func (t *turnSamples) Likelihood(s int, ctx turns.Context) float64 {
	peak := t.d.dramPeak
	if ctx.Key.Kind != turns.Traced || t.dramM < 0 || peak <= 0 {
		return 1
	}
	r := t.d.sc.tRead[s]
	if math.IsNaN(r) {
		return 1
	}
	e, known := t.expectedRate(s, ctx, t.dramM)
	if !known {
		return 1
	}
	sd := max(dramSpread*e, dramFloor*peak)
	z := (r - e) / sd
	l := peak / (math.Sqrt(2*math.Pi) * sd) * math.Exp(-z*z/2)
	return min(max(l, 1/dramMaxOdds), dramMaxOdds)
}

// expectedRate is the rate of metric m that traced context ctx's kernels in sample s are known
// to keep alone: their classes' carried solo rates, weighed by their time in the sample; known
// false where one of them is not known or it has none there.
func (t *turnSamples) expectedRate(s int, ctx turns.Context, m int32) (float64, bool) {
	sc := &t.d.sc
	var sum, w float64
	for i := sc.off[s]; i < sc.off[s+1]; i++ {
		if !ctx.Holds(sc.itemProc[i]) {
			continue
		}
		lc := sc.itemLC[i]
		r, ok := t.d.soloRate(rateKey{sc.classes[lc], sc.lpid[lc]}, m)
		if !ok {
			return 0, false
		}
		sum += r * sc.itemW[i]
		w += sc.itemW[i]
	}
	return sum / w, w > 0
}

// soloRate is class k's carried solo rate of metric m, known where the class has at least
// knownSolo of solo time.
func (d *devState) soloRate(k rateKey, m int32) (float64, bool) {
	cr := d.carried[k]
	if cr == nil || cr.es < knownSolo || int(m) >= len(cr.as) {
		return 0, false
	}
	return cr.as[m] / cr.es, true
}
