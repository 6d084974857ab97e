package attribution

import (
	"math"
	"strings"
)

// Ownership from context switches. Time-slicing gives each context on a GPU turns of about
// 2 ms (H100: 2.09 ms while two have work, scripts/gpu/tsprobe.cu), and every switch costs
// the front end about 250,000 cycles processing context-switch commands, which PM sampling
// counts (gpu__gr_cycles_active_cmd_ctxsw). So a sample without such cycles is owned by one
// context, and with one traced and one untraced process on the GPU the owner alternates at
// every switch. A traced kernel's record spans its neighbour's turns, so the records alone
// cannot say whose a covered sample is; the alternation can, once its phase is known, and
// the segments in which the traced process runs no kernel give the phase (they cannot be
// its own). A covered sample is then the traced kernels' (phi 0) or the untraced process's
// (phi 1); a sample holding a switch is split in half. Measured live on an H100 at the
// defaults (docs/attribution.md, run AT): the traced pod within +0.07 % and -2.5 % where
// NVML's period shares alone gave +11 % to +26 %.

const (
	// ctxswMin is the switch cycles above which a sample holds a switch (a switch costs
	// about 250,000; one split across two samples leaves a few thousand in one of them).
	ctxswMin = 50_000
	// ctxswPerSwitch converts a run of samples' switch cycles into a number of switches
	// (two switches inside one 1 ms sample happen when a turn is cut short).
	ctxswPerSwitch = 250_000
	// phaseReach is how many owned segments on each side of one vote on its phase.
	phaseReach = 4
	// anchorCoverage is the traced coverage below which an owned segment is not the traced
	// process's.
	anchorCoverage = 0.2
)

// contextSwitchBase is the counter of context-switch cycles; chips name it with or without
// the FE_A.TriageCompute triage prefix (the variant that fits a PM Sampling pass).
const contextSwitchBase = "gpu__gr_cycles_active_cmd_ctxsw"

// isContextSwitchMetric reports whether a Perfworks metric counts context-switch cycles.
func isContextSwitchMetric(name string) bool {
	for _, part := range strings.Split(name, ".") {
		if part == contextSwitchBase {
			return true
		}
	}
	return false
}

// ownerState carries the alternation across chunks of one device.
type ownerState struct {
	switches int     // switches counted so far (its parity is the current owner's)
	marker   float64 // switch cycles of the run of switch samples in progress
	inMarker bool
	mine     int8 // the parity of the traced process's turns, as last voted (carried across chunks)
	known    bool // mine is known
}

// Sample kinds of ownership, besides the parities 0 and 1.
const (
	parUnknown int8 = -1 // no switch counter in the sample
	parSwitch  int8 = -2 // the sample holds a switch
)

// switchCycles returns sample smp's context-switch cycles, or NaN when its metrics lack them.
func (a *Attributor) switchCycles(smp psample) float64 {
	for j, m := range smp.idx {
		if a.metrics[m].ctxsw {
			return smp.vals[j]
		}
	}
	return math.NaN()
}

// ownershipHook, when set (tests), sees every chunk's owners.
var ownershipHook func([]psample, []float64)

// busy reports whether sample smp shows work (a value above 0 besides the switch cycles):
// a gap of the traced process is the other's turn only if something ran.
func (a *Attributor) busy(smp psample) bool {
	for j, m := range smp.idx {
		if !a.metrics[m].ctxsw && smp.vals[j] > 0 {
			return true
		}
	}
	return false
}

// ownership sets sc.own[s] for the chunk's samples where exactly one traced and one
// untraced process were active (with more the turns rotate in an order the counter does not
// give): 0 where the traced process owned the sample, 1 where the untraced one did, 0.5 for
// a sample with a switch; -1 elsewhere or where the phase is not known yet; a.mu is held.
func (a *Attributor) ownership(d *devState, chunk []psample) {
	sc := &d.sc
	st := &d.owner
	sc.own, sc.par = sc.own[:0], sc.par[:0]
	two := false
	for s, smp := range chunk {
		sc.own = append(sc.own, -1)
		c := a.switchCycles(smp)
		p := parUnknown
		switch {
		case math.IsNaN(c):
		case c > ctxswMin:
			st.marker += c
			st.inMarker = true
			p = parSwitch
		default:
			if st.inMarker {
				st.switches += max(1, int(math.Round(st.marker/ctxswPerSwitch)))
				st.marker, st.inMarker = 0, false
			}
			p = int8(st.switches % 2)
		}
		sc.par = append(sc.par, p)
		if oi := sc.sobs[s]; oi >= 0 && p != parUnknown {
			o := &d.nvml[oi]
			if o.nTraced == 1 && len(o.untraced) == 1 {
				sc.own[s] = -2 // a candidate
				two = true
			}
		}
	}
	if !two {
		return // no candidate: every sample is -1 already
	}
	// Owned segments: runs of samples of one parity, [segStart, segEnd). One the traced
	// process barely covers is the other process's: it votes on the phase.
	sc.segStart, sc.segEnd, sc.segVote = sc.segStart[:0], sc.segEnd[:0], sc.segVote[:0]
	for s, p := range sc.par {
		if p < 0 {
			continue
		}
		if n := len(sc.segStart); n == 0 || int(sc.segEnd[n-1]) != s || sc.par[s-1] != p {
			sc.segStart, sc.segEnd = append(sc.segStart, int32(s)), append(sc.segEnd, int32(s))
			sc.segVote = append(sc.segVote, false)
		}
		sc.segEnd[len(sc.segEnd)-1] = int32(s + 1)
	}
	nseg := len(sc.segStart)
	for k := range nseg {
		var cov, all float64
		busy := false
		for s := sc.segStart[k]; s < sc.segEnd[k]; s++ {
			cov += sc.wsum[s] - sc.gapW[s]
			all += sc.wsum[s]
			busy = busy || a.busy(chunk[s])
		}
		sc.segVote[k] = busy && all > 0 && cov < anchorCoverage*all
	}
	// Each segment's phase from the votes within phaseReach segments (the nearest weigh
	// most), else the phase carried from the segment before.
	for k := range nseg {
		var notMine [2]float64
		for j := max(0, k-phaseReach); j <= min(nseg-1, k+phaseReach); j++ {
			if sc.segVote[j] {
				notMine[sc.par[sc.segStart[j]]] += 1 / float64(1+abs(int64(j-k)))
			}
		}
		switch {
		case notMine[0] > notMine[1]:
			st.mine, st.known = 1, true
		case notMine[1] > notMine[0]:
			st.mine, st.known = 0, true
		}
		for s := sc.segStart[k]; s < sc.segEnd[k]; s++ {
			switch {
			case sc.own[s] != -2 || !st.known:
				sc.own[s] = -1
			case sc.par[s] == st.mine:
				sc.own[s] = 0
			default:
				sc.own[s] = 1
			}
		}
	}
	if ownershipHook != nil {
		defer func() { ownershipHook(chunk, sc.own) }()
	}
	for s, p := range sc.par {
		if sc.own[s] == -2 {
			sc.own[s] = -1
			if p == parSwitch && st.known {
				// When in the sample the turn passed, the counter does not say: half each
				// (then split by rate). Taking a kernel's start or end inside the sample as
				// the switch fitted the simulation but not the H100 recordings (+14.7 %
				// instead of +9.8 %), so it is not done.
				sc.own[s] = 0.5
			}
		}
	}
}
