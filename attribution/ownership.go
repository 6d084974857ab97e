package attribution

import (
	"math"
	"strings"
)

// The GPU's context-switch counter. Every switch between the contexts that time-slice a GPU
// costs the front end cycles processing context-switch commands, which PM sampling counts
// (gpu__gr_cycles_active_cmd_ctxsw): a sample without such cycles is one context's alone.
// turns.go tells whose.

const (
	// ctxswMin is the switch cycles above which a sample holds a switch (measured on an H100,
	// run BB: one switch costs 150,000-320,000; a sample without one counts 0, and one split
	// across two samples leaves a few thousand in one of them).
	ctxswMin = 50_000
	// ctxswPerSwitch converts a run of samples' switch cycles into a number of switches (two
	// switches 350,000-550,000, three 600,000-700,000: a turn cut short inside a run).
	ctxswPerSwitch = 220_000
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
