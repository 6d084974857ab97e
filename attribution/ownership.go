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
