package attribution

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// rateFloor keeps every class's rate at least this fraction of the device's mean rate, so a
// class the fit once found quiet can still take a share when it stops being quiet.
const rateFloor = 1e-3

// The EM passes of a chunk stop once no rate moves by more than emSettled of itself, at the
// latest after the configured passes (5), or maxEMPassesNVML in a chunk with untraced
// processes' classes. Most chunks settle in the first pass (their rates carried from the
// chunk before): on a GPU with one untraced process, the fit's five fixed passes were a
// fifth of the join's CPU (BenchmarkJoinUntracedAlone); the splits stay within 0.01 point
// (share_offline.sh on runs BB and DE's recordings).
const (
	maxEMPassesNVML = 50
	emSettled       = 1e-4
)

// attribute splits the chunk's sample values over its items (d.sc, built by join) with the
// configured estimator and adds them to the kernel and pod series. Each sample's value is
// split by shares that sum to one, so the attributed parts add up to the sample's value
// (conservation) whatever the estimator; a.mu is held.
func (a *Attributor) attribute(d *devState, chunk []psample, now time.Time) {
	sc := &d.sc
	nl := len(sc.classes)
	a.chunkSeries(d, now)
	defer clear(sc.accP)
	a.markShared(d, len(chunk))
	sc.wholeTurnRates(&a.classes)
	a.exposure(d, now)
	a.chunkValues(d, chunk)
	ns := len(chunk)
	decay := 1.0
	if span := chunk[len(chunk)-1].end - chunk[0].start; span > 0 {
		decay = math.Exp2(-float64(span) / float64(a.cfg.rateHalfLife))
	}
	for row, m := range sc.metrics {
		v := sc.v[row*ns : (row+1)*ns]
		sc.r, sc.newA, sc.newAS = grow(sc.r, nl), grow(sc.newA, nl), grow(sc.newAS, nl)
		rate := a.cfg.estimator == EstimatorRate
		if rate {
			rate = a.fit(d, m, v, decay, chunk[len(chunk)-1].end-chunk[0].start)
		}
		a.splitMetric(d, m, v, rate)
		if a.cfg.estimator == EstimatorRate {
			for lc, c := range sc.classes {
				cr := d.rate(rateKey{c, sc.lpid[lc]})
				cr.grow(int(m) + 1)
				cr.a[m] = cr.a[m]*decay + sc.newA[lc]
				cr.as[m] = cr.as[m]*decay + sc.newAS[lc]
				cr.quiet[m] = -1
				if rate && lc < len(sc.quiet) {
					cr.quiet[m] = sc.quiet[lc]
				}
			}
		}
		sc.rows[m] = -1
	}
	if a.cfg.estimator == EstimatorRate {
		for lc, c := range sc.classes {
			cr := d.rate(rateKey{c, sc.lpid[lc]})
			cr.e = cr.e*decay + sc.exp[lc]
			cr.es = cr.es*decay + sc.expS[lc]
		}
	}
}

// chunkSeries finds the series the chunk adds to: each local class's kernel series
// (sc.accK) and each untraced pod's (sc.accU); sc.accP, by process slot, is sized here and
// filled on first use (podAcc), so a process with no item touches no pod series.
func (a *Attributor) chunkSeries(d *devState, now time.Time) {
	sc := &d.sc
	sc.accK = sc.accK[:0]
	for _, c := range sc.classes {
		label := a.classes.names[c]
		if a.classes.isUntraced(c) {
			label = labelUntraced
		} else if c >= firstNamedClass {
			if label = a.cfg.kernelLabel.KernelLabel(label); label == "" {
				label = labelOther
			}
			label = a.deviceKernelLabel(d, label)
		}
		sc.accK = append(sc.accK, touch(d.kernels, label, now))
	}
	if len(sc.accP) < len(a.slots) {
		sc.accP = make([]*acc, len(a.slots))
	}
	sc.accU = sc.accU[:0]
	for _, k := range sc.upods {
		c := touch(d.pods, k, now)
		c.prio = snapshot.PriorityNormal
		if k.pod != "" { // NVML's PID (the driver's) in the pod its cgroup names
			c.prio = snapshot.PriorityVerified
		}
		sc.accU = append(sc.accU, c)
	}
}

// podAcc is the pod series of an item's process slot: an untraced process's pod (slot < -1,
// estimated from NVML), a traced process's (touched at its first item), or nil (idle and
// untraced time).
func (a *Attributor) podAcc(d *devState, slot int32, now time.Time) *acc {
	sc := &d.sc
	if slot < -1 { // an untraced process's item: its pod, estimated from NVML
		return sc.accU[-2-slot]
	}
	if slot < 0 {
		return nil
	}
	if c := sc.accP[slot]; c != nil {
		return c
	}
	ps := a.slots[slot]
	c := touch(d.pods, ps.pod, now)
	c.prio = max(c.prio, ps.podPrio)
	sc.accP[slot] = c
	return c
}

// podOf is podAcc once exposure has touched the pod series of every item's process: small
// enough to inline where it is called for every item and metric (splitMetric).
func (sc *scratch) podOf(slot int32) *acc {
	if slot < -1 {
		return sc.accU[-2-slot]
	}
	if slot < 0 {
		return nil
	}
	return sc.accP[slot]
}

// exposure adds up the exposure (seconds) of each local class, over every sample (sc.exp)
// and over the solo ones (sc.expS), which the rate fit divides by, and the sampled seconds of
// each series and of each kind of time (d.kinds: kernels, idle, untraced).
func (a *Attributor) exposure(d *devState, now time.Time) {
	sc := &d.sc
	nl := len(sc.classes)
	sc.exp, sc.expS = grow(sc.exp, nl), grow(sc.expS, nl)
	s := 0
	for i, lc := range sc.itemLC {
		for int32(i) >= sc.off[s+1] {
			s++
		}
		w := sc.itemW[i] / 1e9
		sc.exp[lc] += sc.itemX[i] / 1e9
		if !sc.shared[s] {
			sc.expS[lc] += sc.itemX[i] / 1e9
		}
		sc.accK[lc].sampled += w
		if p := a.podAcc(d, sc.itemProc[i], now); p != nil {
			p.sampled += w
			p.uncertain += w * sc.unc[s]
		}
		switch c := sc.classes[lc]; {
		case c == classIdle || c == classQuiet:
			d.kinds[1] += w
		case a.classes.isUntraced(c):
			d.kinds[2] += w
		default:
			d.kinds[0] += w
		}
	}
}

// chunkValues lays the chunk's values out as one row per attributable metric (sc.metrics,
// sc.rows) and one column per sample (sc.v), as quantities: a rate times the sample's
// seconds, so that parts of it add up.
func (a *Attributor) chunkValues(d *devState, chunk []psample) {
	sc := &d.sc
	if len(sc.rows) < len(a.metrics) {
		sc.rows = make([]int32, len(a.metrics))
		for i := range sc.rows {
			sc.rows[i] = -1
		}
	}
	sc.metrics = sc.metrics[:0]
	ns := len(chunk)
	sc.v = sc.v[:0]
	var lastIdx []int32
	for si, s := range chunk {
		if len(s.idx) > 0 && (lastIdx == nil || &s.idx[0] != &lastIdx[0]) {
			lastIdx = s.idx
			for _, m := range s.idx {
				if a.metrics[m].ok && sc.rows[m] < 0 {
					sc.rows[m] = int32(len(sc.metrics))
					sc.metrics = append(sc.metrics, m)
					sc.v = append(sc.v, make([]float64, ns)...)
				}
			}
		}
		secs := float64(s.end-s.start) / 1e9
		for j, m := range s.idx {
			met := a.metrics[m]
			if !met.ok {
				continue
			}
			v := s.vals[j] * met.scale
			if met.q != quantityCount {
				v *= secs
			}
			sc.v[int(sc.rows[m])*ns+si] = v
		}
	}
}

// splitMetric splits metric m's values v (one per sample) over each sample's items, by
// weight or, where rate (the fit found rates), by exposure x rate, and adds the parts to the
// series; it sums each local class's parts into sc.newA and sc.newAS (solo samples) for the
// rates carried to the next chunk.
func (a *Attributor) splitMetric(d *devState, m int32, v []float64, rate bool) {
	sc := &d.sc
	clear(sc.newA)
	clear(sc.newAS)
	if int(m) >= len(d.total) {
		d.total = append(d.total, make([]float64, int(m)+1-len(d.total))...)
	}
	for s := range len(v) {
		x := v[s]
		d.total[m] += x
		lo, hi := sc.off[s], sc.off[s+1]
		if hi == lo {
			continue
		}
		denom := sc.wsum[s]
		useRate := false
		if rate {
			var dr float64
			for i := lo; i < hi; i++ {
				dr += sc.itemX[i] * sc.r[sc.itemLC[i]]
			}
			if dr > 0 {
				denom, useRate = dr, true
			}
		}
		sc.part = sc.part[:0]
		for i := lo; i < hi; i++ {
			w := sc.itemW[i]
			if useRate {
				w = sc.itemX[i] * sc.r[sc.itemLC[i]]
			}
			sc.part = append(sc.part, x*w/denom)
		}
		if useRate && a.metrics[m].q == quantitySeconds {
			sc.capActive(x, sc.wsum[s]/1e9, lo, hi)
		}
		for i := lo; i < hi; i++ {
			lc, part := sc.itemLC[i], sc.part[i-lo]
			sc.newA[lc] += part
			if !sc.shared[s] {
				sc.newAS[lc] += part
			}
			sc.accK[lc].add(m, part)
			if p := sc.podOf(sc.itemProc[i]); p != nil {
				p.add(m, part)
			}
		}
	}
}

// fit estimates the rate of each local class for metric m (into sc.r): EM passes that split
// the chunk by overlap x rate and re-estimate each rate as (carried quantity + its split) /
// (carried exposure + its exposure). Where a class ran alone for at least one sample's worth
// of time (solo, carried and this chunk's: no other process's item beside it; secs, the
// chunk's mean sample), its rate is re-estimated from those samples only and held in the
// shared ones: kernels of processes running side by side (MPS) slow each other unevenly,
// and one rate fitted over both mixes the two. It reports false when the chunk has nothing
// to fit.
func (a *Attributor) fit(d *devState, m int32, v []float64, decay float64, span int64) bool {
	sc := &d.sc
	secs := float64(span) / 1e9 / float64(len(v)) // the chunk's mean sample
	sumA, sumE, sumW := sc.fitPriors(d, m, decay)
	var sumV float64
	nonzero := false
	for _, x := range v {
		sumV += x
		nonzero = nonzero || x != 0
	}
	if !nonzero || sumE+sumW <= 0 {
		return false
	}
	mean := (sumA + sumV) / (sumE + sumW)
	floor := 0.0
	if mean > 0 {
		floor = rateFloor * mean
	}
	sc.startRates(mean, floor, secs)
	sc.quiet = sc.quiet[:0]
	if (len(sc.upods) > 0 || len(sc.mpsPIDs) > 0) && a.metrics[m].q == quantitySeconds {
		rule := quietSliced
		switch {
		case len(sc.mpsPIDs) > 0 && len(sc.upods) > 0:
			rule = quietMPS
		case len(sc.mpsPIDs) > 0:
			rule = quietMPSTraced
		}
		sc.quietCaps(v, rule)
		if rule.carried {
			sc.carryQuiet(d, m, floor, span)
		}
	}
	// A chunk with untraced processes' classes (NVML) converges slowly: their exposure is
	// spread over every sample of a period, so the fit goes on until the rates settle.
	passes := a.cfg.emPasses
	if len(sc.upods) > 0 {
		passes = maxEMPassesNVML
	}
	for range passes {
		sc.emSplit(v)
		if !sc.emRates(floor, secs) {
			break
		}
	}
	return true
}

// A ratio metric's rate beside untraced processes (issue 31). A traced kernel class that never
// uses a pipe picks up a rate for it from the samples the turns gave it while an untraced
// process ran there (time-sliced), or in which an untraced MPS client's kernels ran beside it
// and the estimate of the client's time fell short; the rate fit then hands it a share of
// every sample it shares with that process. On run BB's recordings a streaming kernel's class
// got a tensor-pipe rate of 0.18 of its time, 82 % of it from samples the tensor pipe was
// busy more than half of, and its pod up to 40 % of the tensor seconds (docs/attribution.md).
// What a class does in most of the samples it ran through is a bound on its rate there: a
// class ran at rate r through X seconds of a sample that counted x can have added at most
// r·X ≤ x. Where a quantile of these bounds is below a tenth of the fitted rate, the class
// was seen doing none of it in most of its samples and its rate is that quantile. Under MPS
// with every client traced too: clients run side by side, and a class beside another's pipe
// work through nearly all its samples keeps whatever rate the fit gives it.
const quietShare = 0.1 // a bound takes over only below this share of the fitted rate

// quietRule says which samples bound a class's rate and which of their bounds is taken.
type quietRule struct {
	q       float64 // the quantile of the bounds taken
	least   float64 // a sample bounds where the class ran at least this share of it (and some)
	samples int     // the fewest such samples a class needs in the chunk
	carried bool    // the chunk before's bound holds too, loosened by quietRecovery (carryQuiet)
}

// quietRecovery is how fast a carried bound loosens: it doubles every 100 ms of samples, so
// a class that starts to use the pipe is bounded by its quiet past for about a second at
// most (from the rate floor, 1/1000 of the device's mean rate, to it).
const quietRecovery = 100 * time.Millisecond

var (
	// quietSliced: time-sliced, the bound's median over the samples a class ran at least
	// half of, at least 8 (a turn's exposure is an estimate, off both ways now and then: a
	// lower quantile, or a smaller share of a sample, starves a class that does use the pipe).
	quietSliced = quietRule{q: 0.5, least: 0.5, samples: 8}
	// quietMPS: under MPS, the 10th percentile over every sample a class ran in, at least 3:
	// an exposure is a record's span, exact, so every sample bounds and the lowest bounds
	// count (the untraced client runs beside nearly every sample, so the median says little).
	// At 8 samples of at least half their time, a bursty client's 50-200 µs spin kernels ran
	// through too few in most 100 ms chunks and kept the rate the fit gave them: its pod got
	// 1.2-1.5 % of an untraced tensor client's active seconds (check set, runs DY-EC).
	//
	// And each class's bound is carried from chunk to chunk: a chunk in which the untraced
	// client's tensor work ran beside most of a class's samples bounds it loosely (the 10th
	// percentile 0.19-0.25 of the time for a streaming pod's spin kernels, where the chunks
	// around it read 0.00002), and with no bound from its quiet past the fit gave the class a
	// rate of 0.07-0.36 there: 1.15 % of the tensor seconds to the pod (the tune set's
	// mps3p-t:1, run ED). A class that uses the pipe at rate r bounds itself at r or above in
	// every sample, so its own past never bounds it below that.
	quietMPS = quietRule{q: 0.1, least: 0, samples: 3, carried: true}
	// quietMPSTraced: under MPS with every client traced, the same over the samples a class
	// ran at least half of. Side by side with another client's tensor kernels through nearly
	// all its samples, a streaming pod's spin kernels kept the tensor rate the fit gave them,
	// unbounded: 1.76 % of the tensor seconds to the pod (the tune set's mps3-t on an H200,
	// run FP). Over every sample a class ran in, the tensor client's own short kernels were
	// bounded by the samples they only began or ended in and lost up to 2.3 % of its seconds
	// (the check set's mps2-c, run EC's recording).
	quietMPSTraced = quietRule{q: 0.1, least: 0.5, samples: 3, carried: true}
)

// carryQuiet bounds each traced class of metric m by its bound of the chunk before, where it
// had one, loosened by the span's recovery (never from below floor): the lower of that and
// the chunk's own bound, or that alone where the class ran through too few samples.
func (sc *scratch) carryQuiet(d *devState, m int32, floor float64, span int64) {
	loosen := math.Exp2(float64(span) / float64(quietRecovery))
	for lc, c := range sc.classes {
		cr := d.carried[rateKey{c, sc.lpid[lc]}]
		if sc.lpid[lc] == 0 || cr == nil || int(m) >= len(cr.quiet) || cr.quiet[m] < 0 {
			continue
		}
		if b := max(cr.quiet[m], floor) * loosen; sc.quiet[lc] < 0 || b < sc.quiet[lc] {
			sc.quiet[lc] = b
		}
	}
}

// quietCaps sets sc.quiet[lc] for each traced class: the rule's quantile of x/X over the
// chunk's samples in which the class ran at least the rule's share of the sample (X its
// exposure seconds there, x the sample's value of the metric), or -1 where it ran so in fewer
// than the rule's samples.
func (sc *scratch) quietCaps(v []float64, rule quietRule) {
	nl := len(sc.classes)
	sc.quietX = grow(sc.quietX, nl)
	sc.quietB = sc.quietB[:0]
	for s, x := range v {
		lo, hi := sc.off[s], sc.off[s+1]
		for i := lo; i < hi; i++ {
			sc.quietX[sc.itemLC[i]] += sc.itemX[i]
		}
		for i := lo; i < hi; i++ {
			lc := sc.itemLC[i]
			if X := sc.quietX[lc]; X > 0 && X >= rule.least*sc.wsum[s] && sc.lpid[lc] != 0 {
				sc.quietB = append(sc.quietB, quietBound{lc, x / (X / 1e9)})
			}
			sc.quietX[lc] = 0 // once per sample and class
		}
	}
	slices.SortFunc(sc.quietB, func(a, b quietBound) int {
		return cmp.Or(cmp.Compare(a.lc, b.lc), cmp.Compare(a.b, b.b))
	})
	for range nl {
		sc.quiet = append(sc.quiet, -1)
	}
	for i := 0; i < len(sc.quietB); {
		j := i
		for j < len(sc.quietB) && sc.quietB[j].lc == sc.quietB[i].lc {
			j++
		}
		if n := j - i; n >= rule.samples {
			sc.quiet[sc.quietB[i].lc] = sc.quietB[i+int(rule.q*float64(n-1))].b
		}
		i = j
	}
}

// quietBound is one sample's bound on a class's rate (quietCaps).
type quietBound struct {
	lc int32
	b  float64
}

// fitPriors sets each local class's carried quantity and exposure of metric m, decayed to
// this chunk (sc.priorA, sc.priorE, and over the solo samples sc.priorAS, sc.priorES): the
// fit's prior. It returns their sums and that of the chunk's exposure.
func (sc *scratch) fitPriors(d *devState, m int32, decay float64) (sumA, sumE, sumW float64) {
	nl := len(sc.classes)
	sc.priorA, sc.priorE = grow(sc.priorA, nl), grow(sc.priorE, nl)
	sc.priorAS, sc.priorES = grow(sc.priorAS, nl), grow(sc.priorES, nl)
	for lc, c := range sc.classes {
		if cr := d.carried[rateKey{c, sc.lpid[lc]}]; cr != nil {
			sc.priorE[lc] = cr.e * decay
			sc.priorES[lc] = cr.es * decay
			if int(m) < len(cr.a) {
				sc.priorA[lc] = cr.a[m] * decay
				sc.priorAS[lc] = cr.as[m] * decay
			}
		}
		sumA += sc.priorA[lc]
		sumE += sc.priorE[lc]
		sumW += sc.exp[lc]
	}
	return sumA, sumE, sumW
}

// wholeTurnRates sets sc.soloFit: the local classes whose rate is fitted on their solo
// samples where they have enough solo time: every traced kernel class, and, where no MPS
// client is on the device, each untraced process's class. Time-sliced, a sample that holds a
// context switch is shared by two turns and counts less than their times at their rates (the
// switch runs nothing: on the tap recordings of run DY a switch sample read 2.4 GB of DRAM
// where a whole turn's read 3.05), so a rate fitted over such samples falls by how much of a
// class's time lies in switches. A bursty traced pod has half its bytes there: fitted over
// every sample beside untraced processes, its rate fell below theirs and the split of the
// switch samples took 6-7 % of its bytes (run DY's `ts3-c:1,2`, all of it in switch
// samples); with the untraced classes' rates still fitted over every sample (the traced ones'
// alone from whole turns), the untraced classes took the switches' whole deficit instead
// (−2.8 to −6.6 % there). Under MPS an untraced client's exposure is every busy sample, and
// its solo rate would be its rate alone in every shared one (tried: +28 % to +197 % for it).
func (sc *scratch) wholeTurnRates(classes *classTable) {
	sc.soloFit = sc.soloFit[:0]
	for lc, c := range sc.classes {
		sc.soloFit = append(sc.soloFit, sc.lpid[lc] != 0 || len(sc.mpsPIDs) == 0 && classes.isUntraced(c))
	}
}

// startRates sets the rates the EM passes start from: each class's carried rate (its solo
// one where it has enough solo time), the device's mean where it has none, never below floor
// (quiet kernels: 0).
func (sc *scratch) startRates(mean, floor, secs float64) {
	for lc, c := range sc.classes {
		r := mean
		if sc.soloFit[lc] && sc.priorES[lc] >= secs {
			r = sc.priorAS[lc] / sc.priorES[lc]
		} else if sc.priorE[lc] > 1e-9 {
			r = sc.priorA[lc] / sc.priorE[lc]
		}
		if c == classQuiet {
			r = 0
		}
		sc.r[lc] = max(r, floor)
	}
}

// emSplit is an EM pass's expectation: it splits each sample's value x over its items by
// exposure x the current rates (by time where no item has a rate) and sums each class's
// parts into sc.newA, and over the solo samples into sc.newAS.
func (sc *scratch) emSplit(v []float64) {
	nl := len(sc.classes)
	clear(sc.newA[:nl])
	clear(sc.newAS[:nl])
	for s, x := range v {
		lo, hi := sc.off[s], sc.off[s+1]
		if x == 0 || hi == lo {
			continue
		}
		solo := !sc.shared[s]
		if hi-lo == 1 {
			sc.newA[sc.itemLC[lo]] += x
			if solo {
				sc.newAS[sc.itemLC[lo]] += x
			}
			continue
		}
		var dr float64
		for i := lo; i < hi; i++ {
			dr += sc.itemX[i] * sc.r[sc.itemLC[i]]
		}
		// by time where no item has a rate, else by exposure x rate
		num, den := sc.itemX, dr
		if dr <= 0 {
			num, den = sc.itemW, sc.wsum[s]
		}
		for i := lo; i < hi; i++ {
			p := x * num[i] / den
			if dr > 0 {
				p *= sc.r[sc.itemLC[i]]
			}
			sc.newA[sc.itemLC[i]] += p
			if solo {
				sc.newAS[sc.itemLC[i]] += p
			}
		}
	}
}

// emRates is an EM pass's maximisation: each class's rate becomes (carried + split quantity)
// / (carried + chunk exposure), over the solo samples where the class has enough solo time.
// It reports whether a rate moved by more than emSettled of itself.
func (sc *scratch) emRates(floor, secs float64) bool {
	changed := false
	for lc, c := range sc.classes {
		e := sc.priorE[lc] + sc.exp[lc]
		if e <= 0 || c == classQuiet {
			continue
		}
		r := (sc.priorA[lc] + sc.newA[lc]) / e
		if es := sc.priorES[lc] + sc.expS[lc]; sc.soloFit[lc] && es >= secs {
			r = (sc.priorAS[lc] + sc.newAS[lc]) / es
		}
		if lc < len(sc.quiet) && sc.quiet[lc] >= 0 && sc.quiet[lc] <= quietShare*r {
			r = sc.quiet[lc]
		}
		r = max(r, floor)
		changed = changed || math.Abs(r-sc.r[lc]) > emSettled*max(r, floor)
		sc.r[lc] = r
	}
	return changed
}

// markShared sets sc.shared[s] for each of the chunk's ns samples, which then set no solo
// rate: whether the traced items exposed in it run side by side with another process's (MPS
// clients, NVML's observations say): another traced process's items, or an untraced
// process's (whose time is an estimate). Time-sliced processes never run side by side, but a
// sample that holds a context switch is shared by two turns: the switch itself runs nothing
// (150,000-320,000 cycles on an H100, turns.go), so the rates fitted over such samples fall
// below those of whole turns, for each class by how much of its time lies in switches. On
// runs BB and DE's recordings the all-traced time-sliced cases' worst pod moved from
// 3.7-8.1 % to 1.4-6.1 % with the rates of whole turns; beside untraced processes their
// classes take whole-turn rates too (wholeTurnRates; docs/attribution.md).
func (a *Attributor) markShared(d *devState, ns int) {
	sc := &d.sc
	sc.shared = grow(sc.shared, ns)
	copy(sc.shared, sc.switched) // applyNVML sized switched to the chunk
	mps := sc.mpsPIDs
	if len(mps) == 0 {
		return
	}
	for s := range ns {
		first, untraced, side := int32(-1), false, false
		for i := sc.off[s]; i < sc.off[s+1]; i++ {
			switch p := sc.itemProc[i]; {
			case p == -1 || sc.itemX[i] <= 0:
			case p < -1:
				untraced = true
			case first == -1:
				first = p
			case p != first:
				side = true
			}
		}
		if first < 0 || !untraced && !side {
			continue
		}
		ps := a.slots[first]
		sc.shared[s] = sc.shared[s] || ps != nil && mps[ps.pid]
	}
}

func (cr *classRate) grow(n int) {
	for len(cr.a) < n {
		cr.a, cr.as, cr.quiet = append(cr.a, 0), append(cr.as, 0), append(cr.quiet, -1)
	}
}

func (d *devState) rate(k rateKey) *classRate {
	cr := d.carried[k]
	if cr == nil {
		cr = &classRate{}
		d.carried[k] = cr
	}
	return cr
}

// touch returns the accumulator of k in m (a kernel's or a pod's series), created at now if
// new, and marks it used at now.
func touch[K comparable](m map[K]*acc, k K, now time.Time) *acc {
	c := m[k]
	if c == nil {
		c = &acc{start: now, prio: snapshot.PriorityClaimed} // a pod series: raised by who speaks for it
		m[k] = c
	}
	c.last = now
	return c
}

// deviceKernelLabel bounds the named kernel labels of device d to the first topKernels
// (WithTopKernels): a label with no series yet on d goes to "other" once d has that many.
func (a *Attributor) deviceKernelLabel(d *devState, label string) string {
	if a.cfg.topKernels <= 0 || label == labelOther {
		return label
	}
	if _, ok := d.kernels[label]; ok {
		return label
	}
	named := len(d.kernels)
	for _, l := range fixedKernelLabels {
		if _, ok := d.kernels[l]; ok {
			named--
		}
	}
	if named >= a.cfg.topKernels {
		return labelOther
	}
	return label
}

// grow returns s resized to n zeroed elements, reusing its array.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}

// capActive bounds the rate split of a ratio's active seconds x over the items lo..hi-1 of a
// sample of secs seconds (sc.part, in proportion to time x rate; the items' times add up to
// secs, the sample's wsum): an item cannot be active longer than it ran (its time, times the
// sample's ratio when the hardware gave one above 1), whatever rate the fit gave its class.
// The excess goes to the other items in proportion to their shares (water filling: package
// waterfill), so the sample's total is kept; it always fits.
//
// An untraced process's item has no such bound: its time is an estimate (NVML's shares, the
// turns), not a record's span, and where the estimate falls short the active time is still
// more likely its own than that of a kernel whose class the fit found inactive: bounded, a
// tensor pod left untraced gave 6-18 % of its tensor-active seconds to a traced pod that never
// used the pipe, most of it in samples holding a context switch (issue 31, run BB's
// recordings; docs/attribution.md).
func (sc *scratch) capActive(x, secs float64, lo, hi int32) {
	if secs <= 0 || x <= 0 {
		return
	}
	bound := max(1, x/secs) // active seconds per second an item may take
	estimated := func(j int32) bool { return sc.itemProc[lo+j] <= -2 }
	sc.limit = sc.limit[:0]
	over := false
	for j := range hi - lo {
		l := math.Inf(1)
		if !estimated(j) {
			l = max(sc.itemW[lo+j], sc.itemRun[lo+j]) / 1e9 * bound
		}
		sc.limit = append(sc.limit, l)
		over = over || sc.part[j] > l
	}
	if !over {
		return
	}
	left := sc.fill.Fill(x, sc.part, sc.limit)
	// Every item with a share is full: what is left goes to the untraced processes' items
	// without one, by their time, else to the items without one by their room.
	var room, free float64
	for j := range hi - lo {
		if estimated(j) {
			free += sc.itemW[lo+j]
		} else {
			room += sc.limit[j] - sc.part[j]
		}
	}
	for j := range hi - lo {
		switch {
		case left <= 0:
		case free > 0:
			if estimated(j) {
				sc.part[j] += left * sc.itemW[lo+j] / free
			}
		case room > 0:
			sc.part[j] += left * (sc.limit[j] - sc.part[j]) / room
		}
	}
}
