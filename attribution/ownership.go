package attribution

import (
	"math"
	"strings"
)

// The GPU's context-switch counter. Every switch between the contexts that time-slice a GPU
// costs the front end cycles processing context-switch commands, which PM sampling counts
// (gpu__gr_cycles_active_cmd_ctxsw): a sample without such cycles is one context's alone.
// Package turns tells whose (turns.CyclesPerSwitch: the cycles of one switch).

// contextSwitchBase is the counter of context-switch cycles; chips name it with or without
// the FE_A.TriageCompute triage prefix (the variant that fits a PM Sampling pass).
const contextSwitchBase = "gpu__gr_cycles_active_cmd_ctxsw"

// isContextSwitchMetric reports whether a Perfworks metric counts context-switch cycles.
func isContextSwitchMetric(name string) bool { return hasPart(name, contextSwitchBase) }

// engineActiveBase is the graphics engine's active cycles (FE_B.TriageCompute. on Hopper):
// the share of a sample in which any context ran work.
const engineActiveBase = "gr__cycles_active"

// isEngineActiveMetric reports whether a Perfworks metric is the graphics engine's activity.
func isEngineActiveMetric(name string) bool { return hasPart(name, engineActiveBase) }

// hasPart reports whether a dotted Perfworks name has base as one of its parts.
func hasPart(name, base string) bool {
	for _, part := range strings.Split(name, ".") {
		if part == base {
			return true
		}
	}
	return false
}

// minActiveShare keeps a busy sample's exposure above 0 (an item with none takes no part,
// whatever its rate).
const minActiveShare = 0.05

// activeShare returns the share of sample smp in which the graphics engine ran work (1 when
// the metrics lack it). Where the owner of a sample is known, its exposure to the rate fit
// is its owned time times this: a rate is then what a context moves per second it runs, the
// same for a traced process (whose records say when it ran) and an untraced one (whose owned
// samples include the GPU's idle edges). Measured on run BB's recordings, an untraced
// process's owned time counted whole lowered its rate, so samples shared at a switch gave it
// too little: an untraced client −26 % where the split by active time gave −8 %
// (docs/attribution.md, "Untraced processes").
func (a *Attributor) activeShare(smp psample) float64 {
	if b, ok := a.engineBusy(smp); ok {
		return max(minActiveShare, b)
	}
	return 1
}

// engineBusy returns the share of sample smp in which the graphics engine ran work (0..1),
// ok false when the sample lacks that metric.
func (a *Attributor) engineBusy(smp psample) (float64, bool) {
	for j, m := range smp.idx {
		if met := a.metrics[m]; met.engine && !math.IsNaN(smp.vals[j]) {
			return min(1, max(0, smp.vals[j]*met.scale)), true
		}
	}
	return 0, false
}

// switchCycles returns sample smp's context-switch cycles, or NaN when its metrics lack them.
func (a *Attributor) switchCycles(smp psample) float64 {
	for j, m := range smp.idx {
		if a.metrics[m].ctxsw {
			return smp.vals[j]
		}
	}
	return math.NaN()
}

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
