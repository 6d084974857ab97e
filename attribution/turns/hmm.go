package turns

import (
	"math"
	"slices"
)

// model is one chunk's hidden Markov model: its states the n contexts (ctxs), its steps
// the K segments; the slices are by segment, then context (then context again for the
// transitions).
type model struct {
	ctxs  []Context
	segs  []segment
	n, K  int
	ev    []evidence
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
	short       []float64 // shortEm's
}

// emissions sets m.em, each context's likelihood of the evidence of each segment, and
// m.rhoOf, from what earlier chunks taught (st.q: how often a context's turns hold one of its
// record edges; st.rho: how often an untraced context has work at a switch).
func (m *model) emissions(st *State) {
	n, K, ev := m.n, m.K, m.ev
	if st.q == nil {
		st.q = map[Key][2]float64{}
	}
	qOf := make([]float64, n)
	for c, ctx := range m.ctxs {
		q := st.q[ctx.Key]
		qOf[c] = min(0.95, max(0.05, (q[0]+0.5)/(q[1]+1)))
	}
	// How often each untraced context has work at a switch (learned from the turns it took
	// and those it was passed over in).
	if st.rho == nil {
		st.rho = map[Key][2]float64{}
	}
	m.rhoOf = make([]float64, n)
	for c, ctx := range m.ctxs {
		r := st.rho[ctx.Key]
		m.rhoOf[c] = min(0.995, max(0.05, (r[0]+runUntraced*rhoPrior)/(r[0]+r[1]+rhoPrior)))
	}
	m.em = make([]float64, K*n)
	for k := range K {
		row := m.em[k*n : (k+1)*n]
		for c, ctx := range m.ctxs {
			e := ev[k*n+c]
			switch {
			case !m.busy[k] && ctx.Key.Kind == Untraced:
				row[c] = emitIdle
			case ctx.Key.Kind == Untraced:
				row[c] = 1
			case ctx.Key.Kind == MPS && len(ctx.Slots) == 0: // untraced clients only
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

// signatures lowers each context's emission of a segment with a sample that the context
// cannot have run through (Signatures). The records say which process can run a segment, the
// rotation whose turn it likely is; neither tells an untraced process's turn from a traced
// one's inside a traced kernel that spans both, where what the sample counted can.
func (m *model) signatures(sig Signatures) {
	for k, sg := range m.segs {
		row := m.em[k*m.n : (k+1)*m.n]
		for c, ctx := range m.ctxs {
			for s := sg.first; s <= sg.last; s++ {
				if !sig.Plausible(s, ctx) {
					row[c] *= emitImplausible
					break
				}
			}
		}
	}
}

// likelihoods multiplies each context's emission of a segment by the Evidence of the
// segment's samples, at least minLikelihood in all.
func (m *model) likelihoods(ev Evidence) {
	for k, sg := range m.segs {
		row := m.em[k*m.n : (k+1)*m.n]
		for c, ctx := range m.ctxs {
			l := 1.0
			for s := sg.first; s <= sg.last; s++ {
				l *= ev.Likelihood(s, ctx)
			}
			row[c] *= max(l, minLikelihood)
		}
	}
}

// prior is the owner distribution before the chunk's first segment: the last chunk's last
// one for the contexts it had, and a little for every context (one may have come).
func (st *State) prior(ctxs []Context) []float64 {
	prior := make([]float64, len(ctxs))
	for c, ctx := range ctxs {
		prior[c] = 1e-3
		if i := slices.Index(st.keys, ctx.Key); i >= 0 {
			prior[c] += st.alpha[i]
		}
	}
	normalize(prior)
	return prior
}

// runP is the chance that context c had work at the switch before segment k.
func (m *model) runP(k, c int) float64 {
	ctx := m.ctxs[c]
	switch {
	case ctx.Recordless():
		return m.rhoOf[c]
	case m.ev[k*m.n+c].run:
		return runTraced
	}
	return runNotTraced
}

// trans sets A to the transitions of a cyclic order (pos: positions(order)) at the switch
// before segment k: the next context that has work, in the order.
func (m *model) trans(order, pos []int, k int, A []float64) {
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
func (m *model) forward(order []int, As, alpha []float64) float64 {
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
		propagate(src, A, sg.steps, m.shortEm(k), m.tmp, stepForward, m.buf)
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
func (m *model) bestOrder(st *State, decay float64) []int {
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
func (m *model) smooth() {
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
		propagate(m.tmp, A, m.segs[k+1].steps, m.shortEm(k+1), beta[k*n:(k+1)*n], stepBackward, m.buf)
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
func (m *model) learnRotation(st *State, order []int, decay float64) {
	K, n := m.K, m.n
	pos := m.pos
	positions(order, pos)
	var taken, passed [maxStates]float64
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
		if ctx.Recordless() {
			r := st.rho[ctx.Key]
			st.rho[ctx.Key] = [2]float64{r[0]*decay + taken[c], r[1]*decay + passed[c]}
		}
	}
}

// learnEdges adds how often each context's turns hold one of its record edges (st.q, the
// emission's q), over the segments in which the GPU worked and its records cover.
func (m *model) learnEdges(st *State, decay float64) {
	n := m.n
	for c, ctx := range m.ctxs {
		if ctx.Recordless() {
			continue
		}
		q := st.q[ctx.Key]
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
		st.q[ctx.Key] = q
	}
}

// positions sets pos[c] to context c's place in order.
func positions(order, pos []int) {
	for i, c := range order {
		pos[c] = i
	}
}

// propagate moves an owner distribution p across the steps switches before a segment; step
// is one switch's move (forward or backward through A); between two switches, the short turn
// they bound is weighed by short (nil: none); buf (2 len(p)) is its scratch. (Counting the
// switches of a run with odds, each switch's cycles give or take 35,000-60,000, explained the
// H100 recordings of run BB worse than the likeliest count.)
func propagate(p, A []float64, steps int, short, out []float64, step func(p, A, out []float64), buf []float64) {
	n := len(p)
	cur, nxt := buf[:n], buf[n:2*n]
	copy(cur, p)
	for i := range min(steps, 2*n) {
		if i > 0 && short != nil {
			for c := range n {
				cur[c] *= short[c]
			}
		}
		step(cur, A, nxt)
		cur, nxt = nxt, cur
	}
	copy(out, cur)
}

// shortEm is the likelihood, for each context, of owning a turn between two switches of the
// run before segment k: a turn that short ends because its context ran out of work, which a
// traced process's records show as a record that starts or ends there (none: emitNoShortEdge);
// nil where the run holds one switch.
func (m *model) shortEm(k int) []float64 {
	if m.segs[k].steps < 2 {
		return nil
	}
	n := m.n
	if len(m.short) < n {
		m.short = make([]float64, n)
	}
	for c, ctx := range m.ctxs {
		m.short[c] = 1
		if !ctx.Recordless() && !m.ev[k*n+c].shortEdge {
			m.short[c] = emitNoShortEdge
		}
	}
	return m.short[:n]
}

// orderKey names a cyclic order of the chunk's contexts by their keys, from the least key
// on (the same cycle whichever context the chunk lists first).
func orderKey(ctxs []Context, order []int) string {
	less := func(x, y Key) bool { return x.Kind < y.Kind || x.Kind == y.Kind && x.ID < y.ID }
	first := 0
	for i, c := range order {
		if less(ctxs[c].Key, ctxs[order[first]].Key) {
			first = i
		}
	}
	b := make([]byte, 0, len(order)*9)
	for j := range order {
		k := ctxs[order[(first+j)%len(order)]].Key
		b = append(b, byte(k.Kind))
		for i := range 8 {
			b = append(b, byte(k.ID>>(8*i)))
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
