package attribution

import (
	"math"
	"slices"

	"github.com/cupti-exporter/cupti-exporter/gpuprocs"
)

// Whose turn each sample was, for any number of contexts time-slicing a GPU.
//
// Time-slicing gives each context with work a turn of about 2 ms (H100: 2.09 ms) in a fixed
// rotation that skips contexts with nothing to run, and every switch costs the front end about
// 220,000 cycles that PM sampling counts (ownership.go). So the samples between two switches
// (a segment) are one context's; measured on an H100 (run BB), no segment held the record
// edges of two processes. Which context's, the records and the samples say in part:
//
//   - a traced process owns a segment only while one of its records spans it (its records
//     span the turns of the others too, so coverage alone does not say whose it is);
//   - a record that starts or ends inside a segment makes it that process's turn (a kernel
//     starts and ends only while its context runs), and no other's;
//   - an untraced process (NVML lists it) can own any segment in which the GPU works;
//   - the rotation: after a context's turn comes the next context in a fixed cyclic order
//     that has work (a traced process has work while one of its records spans the switch;
//     an untraced one, with a probability).
//
// A hidden Markov model over the segments puts that together: its states are the contexts,
// its emissions the evidence above, its transitions the rotation, for each cyclic order of
// the contexts (up to maxTurnStates of them); the order that explains the segments best,
// over a decayed history, is used. Forward-backward gives each segment a distribution over
// its owner; a sample that holds switches averages the owners of the turns that pass in it.
// Under MPS the clients run in the server's one context: they are one state (the group),
// split among themselves by the rate fit.

const (
	// emitNoCover is the emission of a traced process in a segment none of its records
	// spans (it cannot run then; not 0, so that a record lost or late does not break the
	// chain).
	emitNoCover = 1e-4
	// emitOtherEvent is the emission of a context in a segment in which another process's
	// record starts or ends (not 0: the clocks of records and samples agree to about 10 µs).
	emitOtherEvent = 1e-3
	// runUntraced is the prior chance that an untraced process has work at a switch, worth
	// rhoPrior switches; the turns it takes and those it is passed over in teach the rest
	// (tuned on the tune set of run BB: workloads that keep work queued have it at a switch
	// nearly always).
	runUntraced = 0.99
	rhoPrior    = 20.0
	// emitIdle is the emission of an untraced process in a segment in which the GPU did
	// nothing.
	emitIdle = 1e-3
	// transSelf is the chance that a context follows itself across a switch (a switch to a
	// context that is no state, such as the exporter's own).
	transSelf = 0.02
	// runTraced and runNotTraced: whether a traced process has work at a switch, as its
	// records say (one spans the switch, or none does).
	runTraced, runNotTraced = 0.98, 0.02
	// orderHalfLife is the half-life, in segments, of the evidence for a cyclic order.
	orderHalfLife = 5000.0
	// maxTurnStates bounds the contexts the model tells apart ((n-1)! orders); with more,
	// NVML's shares split the samples (and the uncertainty gauge says so).
	maxTurnStates = 5
)

// ctxKey names a context across chunks: a traced process (slot and pid: slots are reused),
// an untraced process (its class) or the MPS server's clients.
type ctxKey struct {
	kind uint8 // ctxTraced, ctxUntraced, ctxMPS
	id   int64
}

const (
	ctxTraced uint8 = iota
	ctxUntraced
	ctxMPS
)

// tracedKey is the context of a traced process.
func tracedKey(ps *proc) ctxKey { return ctxKey{ctxTraced, int64(ps.slot)<<32 | int64(ps.pid)} }

// turnCtx is one state of a chunk's model.
type turnCtx struct {
	key   ctxKey
	slot  int32   // traced: the process slot; -1 otherwise
	class int32   // untraced: its class
	pod   podKey  // untraced: its pod series
	slots []int32 // the MPS group: its traced clients
}

// holds says whether process slot p is the context's: its traced process, or one of the MPS
// server's traced clients.
func (c turnCtx) holds(p int32) bool {
	return p == c.slot || (c.slot < 0 && slices.Contains(c.slots, p))
}

// recordless says whether no record of the context shows its turns: an untraced process, or
// the MPS server's clients when none is traced.
func (c turnCtx) recordless() bool {
	return c.key.kind == ctxUntraced || c.key.kind == ctxMPS && len(c.slots) == 0
}

// turnState carries the model of one device across chunks.
type turnState struct {
	marker   float64 // switch cycles of the run of switch samples in progress
	inMarker bool
	pending  int // switches since the last segment of the last chunk
	keys     []ctxKey
	alpha    []float64             // owner distribution of the last segment, by keys
	orders   map[string]float64    // decayed log-likelihood of each cyclic order
	q        map[ctxKey][2]float64 // decayed owned segments with a record edge, and all owned
	rho      map[ctxKey][2]float64 // an untraced context's decayed turns taken and passed over
}

// turnCover records, for each sample of a chunk, each traced process's covered time and
// whether one of its records starts or ends inside the sample (join fills it).
func (sc *scratch) turnCover(first int, slot int32, t float64, event bool) {
	for i := first; i < len(sc.tcSlot); i++ {
		if sc.tcSlot[i] == slot {
			sc.tcCov[i] += t
			sc.tcEv[i] = sc.tcEv[i] || event
			return
		}
	}
	sc.tcSlot, sc.tcCov, sc.tcEv = append(sc.tcSlot, slot), append(sc.tcCov, t), append(sc.tcEv, event)
}

// turnContexts lists the chunk's contexts: the traced processes present on the device (the
// MPS clients among them as one group), and the untraced processes NVML shows (untraced MPS
// clients in the group too); a.mu is held.
func (a *Attributor) turnContexts(d *devState, lo, hi int64) {
	sc := &d.sc
	sc.tCtx = sc.tCtx[:0]
	mps := map[uint32]bool{}
	untracedMPS := false
	seen := map[int32]bool{}
	for _, oi := range sc.sobsAll {
		o := &d.nvml[oi]
		for _, p := range o.procs {
			if p.MPS == gpuprocs.MPSClient {
				mps[p.PID] = true
			}
		}
		for _, u := range o.untraced {
			if u.mps {
				untracedMPS = true
				continue
			}
			if !seen[u.class] {
				seen[u.class] = true
				sc.tCtx = append(sc.tCtx, turnCtx{key: ctxKey{ctxUntraced, int64(u.class)}, slot: -1, class: u.class, pod: u.pod})
			}
		}
	}
	var group []int32
	for _, ps := range a.slots {
		if ps == nil || ps.presStart >= hi || ps.presEnd <= lo || !ps.onDevice(d) {
			continue
		}
		if mps[ps.pid] {
			group = append(group, ps.slot)
			continue
		}
		sc.tCtx = append(sc.tCtx, turnCtx{key: tracedKey(ps), slot: ps.slot, class: -1})
	}
	if len(group) > 0 || untracedMPS {
		sc.tCtx = append(sc.tCtx, turnCtx{key: ctxKey{kind: ctxMPS}, slot: -1, class: -1, slots: group})
	}
}

// turns sets sc.tOwn (a distribution over sc.tCtx per sample, where sc.tHas) for the
// chunk's samples when the device counts context switches and two or more contexts share
// it; a.mu is held.
func (a *Attributor) turns(d *devState, chunk []psample) bool {
	sc := &d.sc
	st := &d.turn
	sc.tHas = sc.tHas[:0]
	if !d.switches || len(chunk) == 0 {
		sc.tCtx = sc.tCtx[:0]
		return false
	}
	lo, hi := chunk[0].start, chunk[len(chunk)-1].end
	a.turnContexts(d, lo, hi)
	n := len(sc.tCtx)
	segs, counter := a.turnSegments(d, chunk)
	if !counter || n < 2 || n > maxTurnStates || len(segs) == 0 {
		st.keys, st.alpha = st.keys[:0], st.alpha[:0]
		return false
	}
	m := &turnModel{ctxs: sc.tCtx, segs: segs, n: n, K: len(segs)}
	a.turnEvidence(d, m, chunk)
	m.emissions(st)
	m.prior = st.prior(m.ctxs)
	decay := math.Exp2(-float64(m.K) / orderHalfLife)
	order := m.bestOrder(st, decay)
	m.smooth()
	m.learnRotation(st, order, decay)
	m.learnEdges(st, decay)
	st.keys, st.alpha = st.keys[:0], st.alpha[:0]
	for c, ctx := range sc.tCtx {
		st.keys = append(st.keys, ctx.key)
		st.alpha = append(st.alpha, m.alpha[(m.K-1)*n+c])
	}
	a.sampleOwners(d, chunk, m)
	if turnsHook != nil {
		turnsHook(chunk, sc.tCtx, sc.tOwn, sc.tHas)
	}
	return true
}

// turnSegment is a run of a chunk's samples without a switch.
type turnSegment struct {
	first, last int // samples
	steps       int // switches since the segment before (the likeliest count)
}

// turnEvid is one context's evidence in one segment: the time its records cover (a fraction
// of the segment's), whether one of its records starts or ends inside it, and whether it had
// work at the switches before it (traced: a record spans them).
type turnEvid struct {
	cov  float64
	edge bool
	run  bool
}

// turnModel is one chunk's hidden Markov model: its states the n contexts (ctxs), its steps
// the K segments; the slices are by segment, then context (then context again for the
// transitions).
type turnModel struct {
	ctxs  []turnCtx
	segs  []turnSegment
	n, K  int
	ev    []turnEvid
	busy  []bool    // whether the GPU worked in segment k
	em    []float64 // emissions
	rhoOf []float64 // how often each untraced context has work at a switch
	prior []float64 // the owner distribution before the first segment
	// The best order's transitions into each segment and forward distributions, and the
	// backward and smoothed ones.
	As, alpha   []float64
	beta, gamma []float64
	tmp, tmp2   []float64 // n each: scratch
	pos         []int     // positions of an order
	buf         []float64 // propagate's scratch
}

// turnSegments finds the chunk's segments (runs of samples without a switch) and the
// switches between them, into sc.tSeg (each sample's segment, -1 for a switch sample or one
// that counts nothing) and sc.tCum; a run of switches may go on across chunks (st.marker,
// st.pending). counter says whether any sample counted switches.
func (a *Attributor) turnSegments(d *devState, chunk []psample) (segs []turnSegment, counter bool) {
	sc := &d.sc
	st := &d.turn
	steps := st.pending
	sc.tSeg, sc.tCum = sc.tSeg[:0], sc.tCum[:0]
	for _, smp := range chunk {
		c := a.switchCycles(smp)
		switch {
		case math.IsNaN(c):
			sc.tSeg, sc.tCum = append(sc.tSeg, -1), append(sc.tCum, 0, 0)
			continue
		case c > ctxswMin:
			counter = true
			sc.tSeg, sc.tCum = append(sc.tSeg, -1), append(sc.tCum, st.marker, st.marker+c) // the run's cycles before and after it
			st.marker += c
			st.inMarker = true
			continue
		}
		counter = true
		sc.tCum = append(sc.tCum, 0, 0)
		var cycles float64
		if st.inMarker {
			cycles = st.marker
			st.marker, st.inMarker = 0, false
		}
		s := len(sc.tSeg)
		if k := len(segs); k > 0 && steps == 0 && cycles == 0 && segs[k-1].last == s-1 {
			segs[k-1].last = s
		} else {
			segs = append(segs, turnSegment{first: s, last: s, steps: steps + switchCount(cycles)})
		}
		sc.tSeg = append(sc.tSeg, int32(len(segs)-1))
		steps = 0
	}
	st.pending = steps
	return segs, counter
}

// turnEvidence sets m.ev and m.busy: each context's coverage and record edges in each
// segment, and whether it had work at the switches before each segment (traced: a record
// spans them), from what join recorded per sample (turnCover).
func (a *Attributor) turnEvidence(d *devState, m *turnModel, chunk []psample) {
	sc := &d.sc
	n, segs := m.n, m.segs
	ev := make([]turnEvid, m.K*n)
	busy := make([]bool, m.K)
	ctxOf := map[int32]int{}
	for c, ctx := range m.ctxs {
		if ctx.slot >= 0 {
			ctxOf[ctx.slot] = c
		}
		for _, sl := range ctx.slots {
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
				secs += float64(chunk[s].end - chunk[s].start)
				busy[k] = busy[k] || a.busy(chunk[s])
			}
			for i := sc.tcOff[s]; i < sc.tcOff[s+1]; i++ {
				c, ok := ctxOf[sc.tcSlot[i]]
				if !ok {
					continue
				}
				e := &ev[k*n+c]
				e.run = true
				if in {
					e.cov += sc.tcCov[i]
					e.edge = e.edge || sc.tcEv[i]
				}
			}
		}
		for c := range n {
			ev[k*n+c].cov /= secs
		}
	}
	m.ev, m.busy = ev, busy
}

// emissions sets m.em, each context's likelihood of the evidence of each segment, and
// m.rhoOf, from what earlier chunks taught (st.q: how often a context's turns hold one of its
// record edges; st.rho: how often an untraced context has work at a switch).
func (m *turnModel) emissions(st *turnState) {
	n, K, ev := m.n, m.K, m.ev
	if st.q == nil {
		st.q = map[ctxKey][2]float64{}
	}
	qOf := make([]float64, n)
	for c, ctx := range m.ctxs {
		q := st.q[ctx.key]
		qOf[c] = min(0.95, max(0.05, (q[0]+0.5)/(q[1]+1)))
	}
	// How often each untraced context has work at a switch (learned from the turns it took
	// and those it was passed over in).
	if st.rho == nil {
		st.rho = map[ctxKey][2]float64{}
	}
	m.rhoOf = make([]float64, n)
	for c, ctx := range m.ctxs {
		r := st.rho[ctx.key]
		m.rhoOf[c] = min(0.995, max(0.05, (r[0]+runUntraced*rhoPrior)/(r[0]+r[1]+rhoPrior)))
	}
	m.em = make([]float64, K*n)
	for k := range K {
		row := m.em[k*n : (k+1)*n]
		for c, ctx := range m.ctxs {
			e := ev[k*n+c]
			switch {
			case !m.busy[k] && ctx.key.kind == ctxUntraced:
				row[c] = emitIdle
			case ctx.key.kind == ctxUntraced:
				row[c] = 1
			case ctx.key.kind == ctxMPS && len(ctx.slots) == 0: // untraced clients only
				row[c] = 1
			case e.cov <= 0:
				row[c] = emitNoCover
			case e.edge:
				row[c] = qOf[c]
			default:
				row[c] = 1 - qOf[c]
			}
			for x := range n {
				if x != c && ev[k*n+x].edge {
					row[c] *= emitOtherEvent
				}
			}
		}
	}
}

// prior is the owner distribution before the chunk's first segment: the last chunk's last
// one for the contexts it had, and a little for every context (one may have come).
func (st *turnState) prior(ctxs []turnCtx) []float64 {
	prior := make([]float64, len(ctxs))
	for c, ctx := range ctxs {
		prior[c] = 1e-3
		if i := slices.Index(st.keys, ctx.key); i >= 0 {
			prior[c] += st.alpha[i]
		}
	}
	normalize(prior)
	return prior
}

// runP is the chance that context c had work at the switch before segment k.
func (m *turnModel) runP(k, c int) float64 {
	ctx := m.ctxs[c]
	switch {
	case ctx.recordless():
		return m.rhoOf[c]
	case m.ev[k*m.n+c].run:
		return runTraced
	}
	return runNotTraced
}

// trans sets A to the transitions of a cyclic order (pos: positions(order)) at the switch
// before segment k: the next context that has work, in the order.
func (m *turnModel) trans(order, pos []int, k int, A []float64) {
	n := m.n
	for b := range n {
		// A switch happened, so another context had work: the first in the order after b
		// (b itself again only through a context that is no state, transSelf).
		row := A[b*n : (b+1)*n]
		skip := 1.0
		var sum float64
		for j := 1; j < n; j++ {
			c := order[(pos[b]+j)%n]
			p := m.runP(k, c)
			row[c] = skip * p
			sum += row[c]
			skip *= 1 - p
		}
		for c := range n {
			row[c] *= (1 - transSelf) / sum
		}
		row[b] = transSelf
	}
}

// stepForward sets out = p A (one switch forward; A is len(p) x len(p)).
func stepForward(p []float64, A []float64, out []float64) {
	n := len(p)
	clear(out)
	for b := range n {
		for c := range n {
			out[c] += p[b] * A[b*n+c]
		}
	}
}

// stepBackward sets out = A p (one switch backward).
func stepBackward(p []float64, A []float64, out []float64) {
	n := len(p)
	clear(out)
	for b := range n {
		for c := range n {
			out[b] += A[b*n+c] * p[c]
		}
	}
}

// normalize scales p to sum to one (uniform where it sums to nothing) and returns its sum
// before (0 for none).
func normalize(p []float64) float64 {
	var s float64
	for _, x := range p {
		s += x
	}
	if s <= 0 || math.IsNaN(s) {
		for i := range p {
			p[i] = 1 / float64(len(p))
		}
		return 0
	}
	for i := range p {
		p[i] /= s
	}
	return s
}

// forward runs the forward pass of a cyclic order into As (the transitions into each
// segment) and alpha (the normalized forward distributions), and returns the order's
// log-likelihood of the chunk.
func (m *turnModel) forward(order []int, As, alpha []float64) float64 {
	n := m.n
	positions(order, m.pos)
	var ll float64
	for k, sg := range m.segs {
		A := As[k*n*n : (k+1)*n*n]
		m.trans(order, m.pos, k, A)
		src := m.prior
		if k > 0 {
			src = alpha[(k-1)*n : k*n]
		}
		propagate(src, A, sg.steps, m.tmp, stepForward, m.buf)
		row := alpha[k*n : (k+1)*n]
		for c := range n {
			row[c] = m.tmp[c] * m.em[k*n+c]
		}
		ll += math.Log(max(normalize(row), 1e-300))
	}
	return ll
}

// bestOrder scores every cyclic order of the contexts (the first kept first) on this chunk,
// adds it to its decayed history (st.orders) and returns the best, whose forward pass it
// leaves in m.As and m.alpha.
func (m *turnModel) bestOrder(st *turnState, decay float64) []int {
	K, n := m.K, m.n
	// The transitions into each segment and the forward distributions: of the best order so
	// far (m.As, m.alpha), and of the order being scored (wAs, wAlpha), swapped when it is
	// better.
	m.As, m.alpha = make([]float64, K*n*n), make([]float64, K*n)
	wAs, wAlpha := make([]float64, K*n*n), make([]float64, K*n)
	m.tmp, m.tmp2 = make([]float64, n), make([]float64, n)
	m.pos, m.buf = make([]int, n), make([]float64, 2*n)
	if st.orders == nil {
		st.orders = map[string]float64{}
	}
	var best []int
	bestScore := math.Inf(-1)
	rest := make([]int, n-1)
	for i := range rest {
		rest[i] = i + 1
	}
	permute(rest, func(p []int) {
		order := append([]int{0}, p...)
		key := orderKey(m.ctxs, order)
		score := st.orders[key]*decay + m.forward(order, wAs, wAlpha)
		st.orders[key] = score
		if score > bestScore {
			best, bestScore = order, score
			m.As, wAs, m.alpha, wAlpha = wAs, m.As, wAlpha, m.alpha
		}
	})
	if len(st.orders) > 4*120 { // contexts came and went: forget orders of old sets
		for k, v := range st.orders {
			if v < bestScore-1e6 {
				delete(st.orders, k)
			}
		}
	}
	return best
}

// smooth runs the backward pass (m.beta) of the best order and sets each segment's owner
// distribution given the whole chunk (m.gamma).
func (m *turnModel) smooth() {
	K, n := m.K, m.n
	m.beta, m.gamma = make([]float64, K*n), make([]float64, K*n)
	beta, gamma := m.beta, m.gamma
	for c := range n {
		beta[(K-1)*n+c] = 1
	}
	for k := K - 2; k >= 0; k-- {
		for c := range n {
			m.tmp[c] = m.em[(k+1)*n+c] * beta[(k+1)*n+c]
		}
		A := m.As[(k+1)*n*n : (k+2)*n*n]
		propagate(m.tmp, A, m.segs[k+1].steps, beta[k*n:(k+1)*n], stepBackward, m.buf)
		normalize(beta[k*n : (k+1)*n])
	}
	for k := range K {
		for c := range n {
			gamma[k*n+c] = m.alpha[k*n+c] * beta[k*n+c]
		}
		normalize(gamma[k*n : (k+1)*n])
	}
}

// learnRotation adds the untraced contexts' turns taken and passed over (st.rho), from the
// expected transitions of the switches counted once, in the best order.
func (m *turnModel) learnRotation(st *turnState, order []int, decay float64) {
	K, n := m.K, m.n
	pos := m.pos
	positions(order, pos)
	var taken, passed [maxTurnStates]float64
	xi := make([]float64, n*n)
	for k := 1; k < K; k++ {
		if m.segs[k].steps != 1 {
			continue
		}
		A := m.As[k*n*n : (k+1)*n*n]
		var z float64
		for b := range n {
			for c := range n {
				x := m.alpha[(k-1)*n+b] * A[b*n+c] * m.em[k*n+c] * m.beta[k*n+c]
				xi[b*n+c] = x
				z += x
			}
		}
		if z <= 0 {
			continue
		}
		for b := range n {
			for c := range n {
				x := xi[b*n+c] / z
				if x < 1e-4 || b == c {
					continue
				}
				taken[c] += x
				for j := pos[b] + 1; order[j%n] != c; j++ {
					passed[order[j%n]] += x
				}
			}
		}
	}
	for c, ctx := range m.ctxs {
		if ctx.recordless() {
			r := st.rho[ctx.key]
			st.rho[ctx.key] = [2]float64{r[0]*decay + taken[c], r[1]*decay + passed[c]}
		}
	}
}

// learnEdges adds how often each context's turns hold one of its record edges (st.q, the
// emission's q), over the segments in which the GPU worked and its records cover.
func (m *turnModel) learnEdges(st *turnState, decay float64) {
	n := m.n
	for c, ctx := range m.ctxs {
		if ctx.recordless() {
			continue
		}
		q := st.q[ctx.key]
		q[0] *= decay
		q[1] *= decay
		for k := range m.K {
			if m.busy[k] && m.ev[k*n+c].cov > 0 {
				g := m.gamma[k*n+c]
				q[1] += g
				if m.ev[k*n+c].edge {
					q[0] += g
				}
			}
		}
		st.q[ctx.key] = q
	}
}

// sampleOwners sets each sample's owner distribution (sc.tOwn) and doubt (sc.tUnc): its
// segment's; a sample that holds switches averages the owners of the turns that pass in it
// (passingOwners).
func (a *Attributor) sampleOwners(d *devState, chunk []psample, m *turnModel) {
	sc := &d.sc
	st := &d.turn
	n := m.n
	sc.tOwn = grow(sc.tOwn, len(chunk)*n)
	sc.tUnc = grow(sc.tUnc, len(chunk))
	next := 0 // the first segment after sample s
	turn := make([]float64, n)
	for s := range chunk {
		row := sc.tOwn[s*n : (s+1)*n]
		sc.tHas = append(sc.tHas, true)
		if k := sc.tSeg[s]; k >= 0 {
			copy(row, m.gamma[int(k)*n:int(k+1)*n])
			sc.tUnc[s] = m.doubt(int(k))
			next = int(k) + 1
			continue
		}
		if math.IsNaN(a.switchCycles(chunk[s])) {
			sc.tHas[s] = false
			continue
		}
		switch {
		case next > 0 && next < m.K:
			sc.tUnc[s] = max(m.doubt(next-1), m.doubt(next))
		case next > 0:
			sc.tUnc[s] = m.doubt(next - 1)
		default:
			sc.tUnc[s] = m.doubt(0)
		}
		// the run's switches, as far as the chunk goes
		m.passingOwners(row, turn, next, sc.tCum[2*s], sc.tCum[2*s+1], max(st.pending+switchCount(st.marker), 1))
	}
}

// doubt is how far segment k's owner is in doubt: 1 - its likeliest owner's probability.
func (m *turnModel) doubt(k int) float64 { return 1 - slices.Max(m.gamma[k*m.n:(k+1)*m.n]) }

// passingOwners sets row to the owner distribution of a switch sample before segment next:
// the mean over the turns that pass in it (the run's switches from cumBefore to cumAfter
// cycles; runSteps, the switches of a run the chunk ends in), each given the segments on both
// sides; turn is its scratch.
func (m *turnModel) passingOwners(row, turn []float64, next int, cumBefore, cumAfter float64, runSteps int) {
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
	first := min(steps, int(cumBefore/ctxswPerSwitch))
	last := min(steps, max(first+1, int(math.Round(cumAfter/ctxswPerSwitch))))
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
	return max(1, int(math.Round(cycles/ctxswPerSwitch)))
}

// positions sets pos[c] to context c's place in order.
func positions(order, pos []int) {
	for i, c := range order {
		pos[c] = i
	}
}

// propagate moves an owner distribution p across the steps switches before a segment; step
// is one switch's move (forward or backward through A); buf (2 len(p)) is its scratch.
// (Counting the switches of a run with odds, each switch's cycles give or take
// 35,000-60,000, explained the H100 recordings of run BB worse than the likeliest count.)
func propagate(p, A []float64, steps int, out []float64, step func(p, A, out []float64), buf []float64) {
	n := len(p)
	cur, nxt := buf[:n], buf[n:2*n]
	copy(cur, p)
	for range min(steps, 2*n) {
		step(cur, A, nxt)
		cur, nxt = nxt, cur
	}
	copy(out, cur)
}

// orderKey names a cyclic order of the chunk's contexts by their keys, from the least key
// on (the same cycle whichever context the chunk lists first).
func orderKey(ctxs []turnCtx, order []int) string {
	less := func(x, y ctxKey) bool { return x.kind < y.kind || x.kind == y.kind && x.id < y.id }
	first := 0
	for i, c := range order {
		if less(ctxs[c].key, ctxs[order[first]].key) {
			first = i
		}
	}
	b := make([]byte, 0, len(order)*9)
	for j := range order {
		k := ctxs[order[(first+j)%len(order)]].key
		b = append(b, k.kind)
		for i := range 8 {
			b = append(b, byte(k.id>>(8*i)))
		}
	}
	return string(b)
}

// permute calls f with every permutation of p (Heap's algorithm; p is reordered).
func permute(p []int, f func([]int)) {
	var gen func(k int)
	gen = func(k int) {
		if k <= 1 {
			f(p)
			return
		}
		for i := range k {
			gen(k - 1)
			if k%2 == 0 {
				p[i], p[k-1] = p[k-1], p[i]
			} else {
				p[0], p[k-1] = p[k-1], p[0]
			}
		}
	}
	gen(len(p))
}

// turnsHook, when set (tests), sees every chunk's owner distributions.
var turnsHook func(chunk []psample, ctxs []turnCtx, own []float64, has []bool)
