package turns

import (
	"math"
	"testing"
)

// samples is a chunk of 1 ms samples: cycles[s] the switch cycles of sample s (NaN: the
// metrics lack the counter); every sample busy.
type samples struct{ cycles []float64 }

func (c samples) Len() int                   { return len(c.cycles) }
func (c samples) Nanoseconds(int) int64      { return 1e6 }
func (c samples) SwitchCycles(s int) float64 { return c.cycles[s] }
func (c samples) Busy(int) bool              { return true }

// twoTraced is the contexts of two traced processes, in slots 0 and 1.
func twoTraced() []Context {
	return []Context{
		{Key: TracedKey(0, 100), Slot: 0, Class: -1},
		{Key: TracedKey(1, 200), Slot: 1, Class: -1},
	}
}

// TestChunkFollowsRecordEdges: two traced processes take turns of three samples; each turn
// holds a record edge of its owner and records of both span it. The model gives each segment
// to its owner, splits the switch samples and forgets a process when told.
func TestChunkFollowsRecordEdges(t *testing.T) {
	ctxs := twoTraced()
	var smp samples
	var cov Cover
	cov.Reset()
	var owner []int // by sample: the turn's owner, -1 for a switch sample
	for turn := range 20 {
		if turn > 0 {
			smp.cycles = append(smp.cycles, CyclesPerSwitch)
			cov.Add(0, 0, 1e6, false, 0, 1e6)
			cov.Add(1, 0, 1e6, false, 0, 1e6)
			cov.EndSample()
			owner = append(owner, -1)
		}
		for i := range 3 {
			smp.cycles = append(smp.cycles, 0)
			cov.Add(0, 0, 1e6, false, 0, 1e6)
			cov.Add(1, 0, 1e6, false, 0, 1e6)
			cov.Add(int32(turn%2), 0, 0, i == 1, 0, 0) // the owner's record ends in the turn
			cov.EndSample()
			owner = append(owner, turn%2)
		}
	}
	if got := cov.Off[2] - cov.Off[1]; got != 2 {
		t.Fatalf("a sample with two processes' records has %d cover entries, want 2 (one a process)", got)
	}
	var st State
	var own Owners
	if !st.Chunk(ctxs, smp, &cov, &own) {
		t.Fatal("two contexts and a switch counter: the model did not run")
	}
	for s, o := range owner {
		if !own.Has(s) {
			t.Fatalf("sample %d has no owners", s)
		}
		if own.Switch(s) != (o < 0) {
			t.Errorf("sample %d: switch %v, want %v", s, own.Switch(s), o < 0)
		}
		if o < 0 {
			continue
		}
		if p := own.Of(s)[o]; p < 0.9 {
			t.Errorf("sample %d: its owner %d has probability %.3f", s, o, p)
		}
		if d := own.Doubt(s); d > 0.1 || math.Abs(d-(1-own.Of(s)[o])) > 1e-12 {
			t.Errorf("sample %d: doubt %.3f", s, d)
		}
	}
	if n := len(st.Remembered()); n != 2 {
		t.Errorf("the state remembers %d contexts, want 2", n)
	}
	st.Forget(ctxs[0].Key)
	if r := st.Remembered(); len(r) != 1 || r[0] != ctxs[1].Key {
		t.Errorf("after Forget the state remembers %v, want only %v", r, ctxs[1].Key)
	}
	if own.Bytes() <= 0 || cov.Bytes() <= 0 {
		t.Errorf("buffers counted as %d and %d bytes", own.Bytes(), cov.Bytes())
	}

	// One context, or samples without the counter: no owners.
	if st.Chunk(ctxs[:1], smp, &cov, &own) {
		t.Error("one context: the model ran")
	}
	nan := samples{cycles: make([]float64, len(smp.cycles))}
	for i := range nan.cycles {
		nan.cycles[i] = math.NaN()
	}
	if st.Chunk(ctxs, nan, &cov, &own) {
		t.Error("no switch counter: the model ran")
	}
}

// TestSidesPlaceTheSwitch: two traced processes take turns of three samples, the switch
// between them held by one sample, split across two, or spread over three. Sides says where
// the switch lies and which context goes out and which comes in, for one or two switch
// samples, and nothing for three.
func TestSidesPlaceTheSwitch(t *testing.T) {
	ctxs := twoTraced()
	var smp samples
	var cov Cover
	cov.Reset()
	type want struct {
		place   Place
		out, in int
	}
	var wants []want // by sample
	add := func(cycles float64, w want, edge int) {
		smp.cycles = append(smp.cycles, cycles)
		cov.Add(0, 0, 1e6, edge == 0, 0, 1e6)
		cov.Add(1, 0, 1e6, edge == 1, 0, 1e6)
		cov.EndSample()
		wants = append(wants, w)
	}
	for turn := range 30 {
		owner, prev := turn%2, 1-turn%2
		switch runs := [3][]float64{{1}, {0.6, 0.4}, {0.3, 0.4, 0.3}}[turn%3]; {
		case turn == 0:
		case len(runs) == 1:
			add(CyclesPerSwitch, want{Inside, prev, owner}, -1)
		case len(runs) == 2:
			add(0.6*CyclesPerSwitch, want{AtEnd, prev, owner}, -1)
			add(0.4*CyclesPerSwitch, want{AtStart, prev, owner}, -1)
		default:
			for _, f := range runs {
				add(f*CyclesPerSwitch, want{NoPlace, 0, 0}, -1)
			}
		}
		for i := range 3 {
			edge := -1
			if i == 1 {
				edge = owner // the owner's record ends in its turn
			}
			add(0, want{NoPlace, 0, 0}, edge)
		}
	}
	var st State
	var own Owners
	if !st.Chunk(ctxs, smp, &cov, &own) {
		t.Fatal("two contexts and a switch counter: the model did not run")
	}
	for s, w := range wants {
		place, before, after := own.Sides(s)
		if place != w.place {
			t.Errorf("sample %d: placed %d, want %d", s, place, w.place)
			continue
		}
		if place == NoPlace {
			if before != nil || after != nil {
				t.Errorf("sample %d: no place but owners %v, %v", s, before, after)
			}
			continue
		}
		if before[w.out] < 0.9 || after[w.in] < 0.9 {
			t.Errorf("sample %d: outgoing %d at %.3f, incoming %d at %.3f", s, w.out, before[w.out], w.in, after[w.in])
		}
	}
}

// TestOrderKeyIsCyclic: the same cycle listed from another context has one key; another cycle
// another.
func TestOrderKeyIsCyclic(t *testing.T) {
	ctxs := []Context{{Key: Key{Traced, 7}}, {Key: Key{Untraced, 3}}, {Key: Key{MPS, 0}}, {Key: Key{Traced, 2}}}
	if a, b := orderKey(ctxs, []int{0, 1, 2, 3}), orderKey(ctxs, []int{2, 3, 0, 1}); a != b {
		t.Errorf("one cycle, two keys: %q %q", a, b)
	}
	if a, b := orderKey(ctxs, []int{0, 1, 2, 3}), orderKey(ctxs, []int{0, 2, 1, 3}); a == b {
		t.Errorf("two cycles, one key %q", a)
	}
	seen := map[string]bool{}
	permute([]int{1, 2, 3}, func(p []int) { seen[orderKey(ctxs, append([]int{0}, p...))] = true })
	if len(seen) != 6 {
		t.Errorf("the permutations of three contexts after the first gave %d cycles, want 6", len(seen))
	}
}

// spanningTurns is a traced process whose one long kernel spans every sample (no record edge)
// taking turns of three samples with an untraced process, twenty turns: its contexts, samples
// and cover, and each sample's owner (-1: a switch sample), the traced process's turn first.
type spanningTurns struct {
	ctxs  []Context
	smp   samples
	cov   Cover
	owner []int
}

func newSpanningTurns() *spanningTurns {
	st := &spanningTurns{ctxs: []Context{
		{Key: TracedKey(0, 100), Slot: 0, Class: -1},
		{Key: Key{Untraced, 9}, Slot: -1, Class: 9},
	}}
	st.cov.Reset()
	for turn := range 20 {
		if turn > 0 {
			st.smp.cycles = append(st.smp.cycles, CyclesPerSwitch)
			st.cov.Add(0, 0, 1e6, false, 0, 1e6)
			st.cov.EndSample()
			st.owner = append(st.owner, -1)
		}
		for range 3 {
			st.smp.cycles = append(st.smp.cycles, 0)
			st.cov.Add(0, 0, 1e6, false, 0, 1e6)
			st.cov.EndSample()
			st.owner = append(st.owner, turn%2)
		}
	}
	return st
}

// traced reports whether sample s lies in one of the traced process's turns.
func (st *spanningTurns) traced(s int) bool { return st.owner[s] == 0 }

// right is the mean probability the model gives each segment's true owner, reading smp.
func (st *spanningTurns) right(t *testing.T, smp Samples) float64 {
	t.Helper()
	var state State
	var own Owners
	if !state.Chunk(st.ctxs, smp, &st.cov, &own) {
		t.Fatal("the model did not run")
	}
	p, n := 0.0, 0
	for s, o := range st.owner {
		if o >= 0 {
			p += own.Of(s)[o]
			n++
		}
	}
	return p / float64(n)
}

// signed is samples whose Signatures say the untraced process cannot have run through the
// traced kernel's turns (a pipe busy there that it is known never to use).
type signed struct {
	samples
	turns *spanningTurns
}

func (c signed) Plausible(s int, ctx Context) bool {
	return !(ctx.Key.Kind == Untraced && c.turns.traced(s))
}

// TestSignaturesTellTurnsApart: in spanningTurns the records cannot say whose turn a segment
// is, and the rotation says only that the turns alternate; the traced kernel keeps a pipe busy
// that the untraced process is known never to use, so the samples (Signatures) tell the turns
// apart.
func TestSignaturesTellTurnsApart(t *testing.T) {
	st := newSpanningTurns()
	without, with := st.right(t, st.smp), st.right(t, signed{st.smp, st})
	t.Logf("mean probability of a segment's owner: %.3f from the records and the rotation, %.3f with the pipes", without, with)
	if with < 0.95 || with <= without {
		t.Errorf("with the pipes the owners have %.3f (without %.3f), want at least 0.95 and more", with, without)
	}
}

// weighed is samples whose Evidence favours, in each sample, the traced context where its
// kernels' known read rate explains what the sample read (its own turns) and the untraced one
// elsewhere, by odds of 5 a sample, as the join's DRAM read evidence does at most.
type weighed struct {
	samples
	turns *spanningTurns
}

func (w weighed) Likelihood(s int, ctx Context) float64 {
	switch {
	case ctx.Key.Kind != Traced:
		return 1
	case w.turns.traced(s):
		return 5
	}
	return 0.2
}

// TestEvidenceTellsTurnsApart: in spanningTurns a degree of evidence (the traced kernel's read
// rate fits its own turns' samples), not a pipe the untraced process cannot have kept busy,
// tells the turns apart; and evidence that says nothing (1 for every context) leaves the
// owners where the rotation put them.
func TestEvidenceTellsTurnsApart(t *testing.T) {
	st := newSpanningTurns()
	without, with := st.right(t, st.smp), st.right(t, weighed{st.smp, st})
	t.Logf("mean probability of a segment's owner: %.3f from the records and the rotation, %.3f with the evidence", without, with)
	if with < 0.95 || with <= without {
		t.Errorf("with the evidence the owners have %.3f (without %.3f), want at least 0.95 and more", with, without)
	}
	if flat := st.right(t, flatEvidence{st.smp}); math.Abs(flat-without) > 1e-9 {
		t.Errorf("evidence of 1 everywhere moved the owners: %.6f, without %.6f", flat, without)
	}
}

// flatEvidence says nothing: 1 for every context and sample.
type flatEvidence struct{ samples }

func (flatEvidence) Likelihood(int, Context) float64 { return 1 }
