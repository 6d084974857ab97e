package turns

import (
	"math"
	"slices"
)

const (
	// emitNoCover is the emission of a traced process in a segment none of its records
	// spans (it cannot run then; not 0, so that a record lost or late does not break the
	// chain).
	emitNoCover = 1e-4
	// emitOtherEvent is the emission of a context in a segment in which another process's
	// record starts or ends (not 0: the clocks of records and samples agree to about 10 µs).
	emitOtherEvent = 1e-3
	// runUntraced is the prior chance that an untraced process has work at a switch, worth
	// rhoPrior switches; the turns it takes and those it is passed over in teach the rest.
	// That learning confirms itself: the turns the model gives an untraced process count as
	// taken, so from a high prior a process that often has nothing to run keeps turns that
	// were the others' (a bursty process hidden in run DY's three-process recording: learned
	// 0.94 after a second, still 0.72 after eight, its class +143 %). 0.8 was chosen on the
	// tune set (run DY's tap recordings of the tune workloads, live and with processes
	// hidden: 0.99, 0.9, 0.8, 0.7, 0.6 and 0.4, priors worth 5, 20 and 80 switches; flat
	// between 0.7 and 0.9); from it, processes that keep work queued learn 0.93-0.998 and the
	// hidden bursty one 0.64 (run DY).
	runUntraced = 0.8
	rhoPrior    = 20.0
	// emitNoShortEdge is the emission of a traced process for a short turn (between two
	// switches of one run of switch samples) in which none of its records starts or ends: a
	// turn ends before its time slice only when its context runs out of work, which a traced
	// process's records show (chosen on the tune set of runs DY-EA's tap recordings: flat from
	// 0.005 to 0.05; run DE's three-process recording, never tuned on, with its bursty process
	// hidden: its class +88 % → +1.4 %, the two traced pods −7.2 % and −6.1 % → +2.6 % and −1.2 %).
	emitNoShortEdge = 0.02
	// emitIdle is the emission of an untraced process in a segment in which the GPU did
	// nothing.
	emitIdle = 1e-3
	// emitImplausible is the emission of a context in a segment one of whose samples counted
	// what the context is known not to do (Signatures).
	emitImplausible = 0.05
	// minLikelihood keeps a segment that the Evidence of its samples makes all but
	// impossible for a context still possible: the evidence is a model of the samples.
	minLikelihood = 1e-6
	// transSelf is the chance that a context follows itself across a switch (a switch to a
	// context that is no state, such as the exporter's own).
	transSelf = 0.02
	// runTraced and runNotTraced: whether a traced process has work at a switch, as its
	// records say (one spans the switch, or none does).
	runTraced, runNotTraced = 0.98, 0.02
	// orderHalfLife is the half-life, in segments, of the evidence for a cyclic order.
	orderHalfLife = 5000.0
	// maxStates bounds the contexts the model tells apart ((n-1)! orders); with more,
	// NVML's shares split the samples (and the uncertainty gauge says so).
	maxStates = 5
	// minSwitchCycles is the switch cycles above which a sample holds a switch (measured on
	// an H100, run BB: one switch costs 150,000-320,000; a sample without one counts 0, and
	// one split across two samples leaves a few thousand in one of them).
	minSwitchCycles = 50_000
	// CyclesPerSwitch converts a run of samples' switch cycles into a number of switches
	// (two switches 350,000-550,000, three 600,000-700,000: a turn cut short inside a run).
	CyclesPerSwitch = 220_000
	// SwitchNanosPerCycle converts a switch sample's switch cycles into the time in which no
	// context ran: where the outgoing process's last record ends and the incoming one's first
	// starts in the sample holding the switch, 125 µs apart at the median (p10-p90 121-128)
	// for 205,000 cycles: 0.616-0.617 ns a cycle in every recording of both workload sets on
	// H100s (runs DY, EC, EI), 0.613-0.616 on an H200 (run EJ; docs/attribution.md).
	SwitchNanosPerCycle = 0.617
)

// Samples is what the model reads of a chunk's PM samples.
type Samples interface {
	Len() int
	// Nanoseconds is sample s's length.
	Nanoseconds(s int) int64
	// SwitchCycles is sample s's context-switch cycles, NaN when its metrics lack them.
	SwitchCycles(s int) float64
	// Busy reports whether sample s shows work besides the switch cycles.
	Busy(s int) bool
}

// Signatures is what Samples may tell besides: whether context ctx can have run through
// sample s, from what the sample counted and what the context is known to do (a pipe busy
// through most of the sample beside a context known never to use it). A segment with a
// sample that a context cannot have run through is unlikely its turn (emitImplausible).
type Signatures interface {
	Plausible(s int, ctx Context) bool
}

// Evidence is what Samples may tell besides Signatures, by degree: how likely what sample s
// counted is were it context ctx's turn, against a context of which nothing is known (1).
type Evidence interface {
	Likelihood(s int, ctx Context) float64
}

// State carries the model of one device across chunks.
type State struct {
	marker   float64 // switch cycles of the run of switch samples in progress
	inMarker bool
	pending  int // switches since the last segment of the last chunk
	keys     []Key
	alpha    []float64          // owner distribution of the last segment, by keys
	orders   map[string]float64 // decayed log-likelihood of each cyclic order
	q        map[Key][2]float64 // decayed owned segments with a record edge, and all owned
	rho      map[Key][2]float64 // an untraced context's decayed turns taken and passed over
}

// Forget drops what the state learned of context k (its process is gone).
func (st *State) Forget(k Key) { delete(st.q, k) }

// Remembered lists the contexts whose record edges the state has learned.
func (st *State) Remembered() []Key {
	keys := make([]Key, 0, len(st.q))
	for k := range st.q {
		keys = append(keys, k)
	}
	return keys
}

// Owners is the model's answer for one chunk: each sample's owner distribution over the
// chunk's contexts and how far it is in doubt. Its buffers are reused from chunk to chunk.
type Owners struct {
	n     int       // contexts
	own   []float64 // by sample, then context
	has   []bool
	doubt []float64 // 1 - the likeliest owner's probability, by sample
	seg   []int32   // each sample's segment; -1: it holds a switch or counts nothing
	cum   []float64 // a switch sample's run cycles before and after it (2 per sample)
	// A sample that holds the one switch between two segments: where the switch lies in it
	// (place) and the owners of the segments before and after it (sides, 2n per sample).
	place []Place
	sides []float64
}

// Place says where in a sample the one switch between two segments lies.
type Place uint8

const (
	NoPlace Place = iota // the sample holds no switch, or a run of several
	Inside               // the sample holds the whole switch, where in it unknown
	AtEnd                // the switch starts in the sample and ends in the next one
	AtStart              // the switch started in the sample before and ends in this one
)

// Sides is, for a sample that holds the one switch between two segments, where it lies and
// the owner distributions of the segments before (the outgoing context) and after it (the
// incoming one); place NoPlace for any other sample.
func (o *Owners) Sides(s int) (place Place, before, after []float64) {
	if o.place[s] == NoPlace {
		return NoPlace, nil, nil
	}
	return o.place[s], o.sides[2*s*o.n : (2*s+1)*o.n], o.sides[(2*s+1)*o.n : (2*s+2)*o.n]
}

// Has reports whether sample s has an owner distribution (its metrics count switches).
func (o *Owners) Has(s int) bool { return o.has[s] }

// Of is sample s's owner distribution, by context.
func (o *Owners) Of(s int) []float64 { return o.own[s*o.n : (s+1)*o.n] }

// Doubt is how far sample s's owner is in doubt: 1 - its likeliest owner's probability.
func (o *Owners) Doubt(s int) float64 { return o.doubt[s] }

// Switch reports whether sample s holds a switch.
func (o *Owners) Switch(s int) bool { return o.seg[s] < 0 }

// size makes o.own, o.doubt, o.place and o.sides hold zeroes for samples samples of n
// contexts, reusing their arrays.
func (o *Owners) size(samples, n int) {
	o.n = n
	o.own = zeroed(o.own, samples*n)
	o.doubt = zeroed(o.doubt, samples)
	o.place = zeroed(o.place, samples)
	o.sides = zeroed(o.sides, 2*samples*n)
}

// zeroed returns s resized to n zeroes, reusing its array.
func zeroed[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}

// Bytes is the capacity of its buffers.
func (o *Owners) Bytes() int64 {
	return int64(4*cap(o.seg) + 8*(cap(o.cum)+cap(o.doubt)+cap(o.own)+cap(o.sides)) + cap(o.has) + cap(o.place))
}

// Shed frees its buffers.
func (o *Owners) Shed() { *o = Owners{} }

// Chunk sets out to the owners of a chunk's samples (smp) over its contexts (ctxs), given
// what its records cover of each sample (cov), and learns from them. It reports whether it
// could tell: the samples count switches and two to maxStates contexts share the device.
func (st *State) Chunk(ctxs []Context, smp Samples, cov *Cover, out *Owners) bool {
	out.has = out.has[:0]
	n := len(ctxs)
	segs, counter := st.segments(smp, out)
	if !counter || n < 2 || n > maxStates || len(segs) == 0 {
		st.keys, st.alpha = st.keys[:0], st.alpha[:0]
		return false
	}
	m := &model{ctxs: ctxs, segs: segs, n: n, K: len(segs)}
	m.evidence(smp, cov)
	m.emissions(st)
	if sig, ok := smp.(Signatures); ok {
		m.signatures(sig)
	}
	if ev, ok := smp.(Evidence); ok {
		m.likelihoods(ev)
	}
	m.prior = st.prior(m.ctxs)
	decay := math.Exp2(-float64(m.K) / orderHalfLife)
	order := m.bestOrder(st, decay)
	m.smooth()
	m.learnRotation(st, order, decay)
	m.learnEdges(st, decay)
	st.keys, st.alpha = st.keys[:0], st.alpha[:0]
	for c, ctx := range ctxs {
		st.keys = append(st.keys, ctx.Key)
		st.alpha = append(st.alpha, m.alpha[(m.K-1)*n+c])
	}
	st.sampleOwners(smp, m, out)
	return true
}

// segment is a run of a chunk's samples without a switch.
type segment struct {
	first, last int // samples
	steps       int // switches since the segment before (the likeliest count)
}

// segments finds the chunk's segments (runs of samples without a switch) and the switches
// between them, into out.seg (each sample's segment, -1 for a switch sample or one that
// counts nothing) and out.cum; a run of switches may go on across chunks (st.marker,
// st.pending). counter says whether any sample counted switches.
func (st *State) segments(smp Samples, out *Owners) (segs []segment, counter bool) {
	steps := st.pending
	out.seg, out.cum = out.seg[:0], out.cum[:0]
	for s := range smp.Len() {
		c := smp.SwitchCycles(s)
		switch {
		case math.IsNaN(c):
			out.seg, out.cum = append(out.seg, -1), append(out.cum, 0, 0)
			continue
		case c > minSwitchCycles:
			counter = true
			out.seg, out.cum = append(out.seg, -1), append(out.cum, st.marker, st.marker+c) // the run's cycles before and after it
			st.marker += c
			st.inMarker = true
			continue
		}
		counter = true
		out.cum = append(out.cum, 0, 0)
		var cycles float64
		if st.inMarker {
			cycles = st.marker
			st.marker, st.inMarker = 0, false
		}
		i := len(out.seg)
		if k := len(segs); k > 0 && steps == 0 && cycles == 0 && segs[k-1].last == i-1 {
			segs[k-1].last = i
		} else {
			segs = append(segs, segment{first: i, last: i, steps: steps + switchCount(cycles)})
		}
		out.seg = append(out.seg, int32(len(segs)-1))
		steps = 0
	}
	st.pending = steps
	return segs, counter
}

// evidence is one context's evidence in one segment: the time its records cover (a fraction
// of the segment's), whether one of its records starts or ends inside it, and whether it had
// work at the switches before it (traced: a record spans them).
type evidence struct {
	cov  float64
	edge bool
	run  bool
	// shortEdge: one of its records starts or ends in the switch samples before the segment
	// (where a run holds two switches or more, the turns between them are short ones).
	shortEdge bool
}

// evidence sets m.ev and m.busy: each context's coverage and record edges in each segment,
// and whether it had work at the switches before each segment (traced: a record spans them),
// from what the records cover of each sample (cov).
func (m *model) evidence(smp Samples, cov *Cover) {
	n, segs := m.n, m.segs
	ev := make([]evidence, m.K*n)
	busy := make([]bool, m.K)
	ctxOf := map[int32]int{}
	for c, ctx := range m.ctxs {
		if ctx.Slot >= 0 {
			ctxOf[ctx.Slot] = c
		}
		for _, sl := range ctx.Slots {
			ctxOf[sl] = c
		}
	}
	for k, sg := range segs {
		var secs float64
		from := sg.first
		if k > 0 {
			from = segs[k-1].last + 1 // the switch samples before the segment
		}
		for s := from; s <= sg.last; s++ {
			in := s >= sg.first
			if in {
				secs += float64(smp.Nanoseconds(s))
				busy[k] = busy[k] || smp.Busy(s)
			}
			for i := cov.Off[s]; i < cov.Off[s+1]; i++ {
				c, ok := ctxOf[cov.Slot[i]]
				if !ok {
					continue
				}
				e := &ev[k*n+c]
				e.run = true
				if in {
					e.cov += cov.Time[i]
					e.edge = e.edge || cov.Edge[i]
				} else {
					e.shortEdge = e.shortEdge || cov.Edge[i]
				}
			}
		}
		for c := range n {
			ev[k*n+c].cov /= secs
		}
	}
	m.ev, m.busy = ev, busy
}

// sampleOwners sets each sample's owner distribution (out.own) and doubt (out.doubt): its
// segment's; a sample that holds switches averages the owners of the turns that pass in it
// (passingOwners).
func (st *State) sampleOwners(smp Samples, m *model, out *Owners) {
	n := m.n
	out.size(smp.Len(), n)
	next := 0 // the first segment after sample s
	turn := make([]float64, n)
	for s := range smp.Len() {
		row := out.own[s*n : (s+1)*n]
		out.has = append(out.has, true)
		if k := out.seg[s]; k >= 0 {
			copy(row, m.gamma[int(k)*n:int(k+1)*n])
			out.doubt[s] = m.doubt(int(k))
			next = int(k) + 1
			continue
		}
		if math.IsNaN(smp.SwitchCycles(s)) {
			out.has[s] = false
			continue
		}
		switch {
		case next > 0 && next < m.K:
			out.doubt[s] = max(m.doubt(next-1), m.doubt(next))
		case next > 0:
			out.doubt[s] = m.doubt(next - 1)
		default:
			out.doubt[s] = m.doubt(0)
		}
		m.place(out, s, next)
		// the run's switches, as far as the chunk goes
		m.passingOwners(row, turn, next, out.cum[2*s], out.cum[2*s+1], max(st.pending+switchCount(st.marker), 1))
	}
}

// place sets where switch sample s, before segment next, holds its switch, and the owners on
// either side, where the run of switch samples between the two segments holds one switch and
// is one sample (the switch is inside it) or two (it spans their boundary).
func (m *model) place(out *Owners, s, next int) {
	if next == 0 || next == m.K || m.segs[next].steps != 1 {
		return
	}
	n, first, last := m.n, m.segs[next-1].last+1, m.segs[next].first-1
	switch {
	case first == s && last == s:
		out.place[s] = Inside
	case first == s && last == s+1:
		out.place[s] = AtEnd
	case first == s-1 && last == s:
		out.place[s] = AtStart
	default:
		return
	}
	copy(out.sides[2*s*n:(2*s+1)*n], m.gamma[(next-1)*n:next*n])
	copy(out.sides[(2*s+1)*n:(2*s+2)*n], m.gamma[next*n:(next+1)*n])
}

// doubt is how far segment k's owner is in doubt: 1 - its likeliest owner's probability.
func (m *model) doubt(k int) float64 { return 1 - slices.Max(m.gamma[k*m.n:(k+1)*m.n]) }

// passingOwners sets row to the owner distribution of a switch sample before segment next:
// the mean over the turns that pass in it (the run's switches from cumBefore to cumAfter
// cycles; runSteps, the switches of a run the chunk ends in), each given the segments on both
// sides; turn is its scratch.
func (m *model) passingOwners(row, turn []float64, next int, cumBefore, cumAfter float64, runSteps int) {
	n, K := m.n, m.K
	before := m.prior
	if next > 0 {
		before = m.gamma[(next-1)*n : next*n]
	}
	var after, A []float64
	steps := runSteps
	if next < K {
		after, steps, A = m.gamma[next*n:(next+1)*n], max(m.segs[next].steps, 1), m.As[next*n*n:(next+1)*n*n]
	} else {
		A = m.As[(K-1)*n*n : K*n*n]
	}
	first := min(steps, int(cumBefore/CyclesPerSwitch))
	last := min(steps, max(first+1, int(math.Round(cumAfter/CyclesPerSwitch))))
	clear(row)
	for i := first; i <= last; i++ {
		copy(turn, before)
		for range min(i, 2*n) {
			stepForward(turn, A, m.tmp2)
			copy(turn, m.tmp2)
		}
		if after != nil {
			copy(m.tmp, after)
			for range min(steps-i, 2*n) {
				stepBackward(m.tmp, A, m.tmp2)
				copy(m.tmp, m.tmp2)
			}
			for c := range n {
				turn[c] *= m.tmp[c]
			}
		}
		normalize(turn)
		for c := range n {
			row[c] += turn[c] / float64(last-first+1)
		}
	}
}

// switchCount is the likeliest number of switches in a run of switch samples holding cycles
// (at least one for a run: measured on an H100, run BB, one switch costs 150,000-320,000
// cycles, two 350,000-550,000, three 600,000-700,000).
func switchCount(cycles float64) int {
	if cycles <= 0 {
		return 0
	}
	return max(1, int(math.Round(cycles/CyclesPerSwitch)))
}
