package profilers

import (
	"path"
	"slices"
	"strings"
)

// Tools: the values of the tool label of cupti_pm_give_ways_total (bounded).
const (
	ToolNcu   = "ncu"
	ToolNsys  = "nsys"
	ToolDCGM  = "dcgm"
	ToolNamed = "named" // a process named by WithNames
)

// rule recognises the processes of one tool. A process matches when each of the rule's
// non-empty conditions holds.
type rule struct {
	tool string
	// names: the process name (comm, at most 15 bytes) is one of these, or starts with one that
	// ends in '*'.
	names []string
	// args: one of its arguments starts with one of these.
	args []string
	// inject: the base name of its CUDA_INJECTION64_PATH contains this (needs its environment).
	inject string
	// maps: a file it maps has a base name containing this (needs its mappings; read again
	// every mapsEvery polls, since a module can load long after the process started).
	maps string
}

// rules is what the exporter gives way to.
var rules = []rule{
	// Nsight Compute's front end: it starts before its target and ends after the target's
	// last kernel.
	{tool: ToolNcu, names: []string{"ncu"}},
	// A target Nsight Compute injected (a front end not seen, such as ncu --mode=attach's
	// launcher): its injection library.
	{tool: ToolNcu, inject: "TreeLauncherTargetInjection"},
	// Nsight Systems sampling GPU metrics (its other modes trace without the counters).
	{tool: ToolNsys, names: []string{"nsys"}, args: []string{"--gpu-metrics-device"}},
	// DCGM's host engine once its profiling module is loaded (DCGM_FI_PROF_* watched), and
	// DCGM's profiling load generator.
	{tool: ToolDCGM, names: []string{"nv-hostengine"}, maps: "libdcgmmoduleprofiling"},
	{tool: ToolDCGM, names: []string{"dcgmproftester*"}},
}

// proc is what a rule reads of a process; the fields that need a file are read on demand.
type proc interface {
	comm() string
	cmdline() []string
	environ(key string) (string, bool)
	maps(substr string) bool
}

// match returns the first rule (of rules, then the user's names) that p satisfies.
func match(p proc, named []string) (rule, bool) {
	comm := p.comm()
	for _, r := range rules {
		if r.names != nil && !nameMatches(comm, r.names) {
			continue
		}
		if r.args != nil && !slices.ContainsFunc(p.cmdline(), func(a string) bool { return hasAnyPrefix(a, r.args) }) {
			continue
		}
		if r.inject != "" {
			v, ok := p.environ("CUDA_INJECTION64_PATH")
			if !ok || !strings.Contains(path.Base(v), r.inject) {
				continue
			}
		}
		if r.maps != "" && !p.maps(r.maps) {
			continue
		}
		return r, true
	}
	if nameMatches(comm, named) {
		return rule{tool: ToolNamed}, true
	}
	return rule{}, false
}

// candidate reports whether p could match a rule that reads its mappings later (its name
// matches): such a process is examined again every mapsEvery polls.
func candidate(comm string) bool {
	for _, r := range rules {
		if r.maps != "" && nameMatches(comm, r.names) {
			return true
		}
	}
	return false
}

func nameMatches(comm string, names []string) bool {
	for _, n := range names {
		if p, ok := strings.CutSuffix(n, "*"); ok {
			if strings.HasPrefix(comm, p) {
				return true
			}
		} else if comm == n || (len(n) > maxComm && comm == n[:maxComm]) {
			return true
		}
	}
	return false
}

// maxComm is the length the kernel truncates a process name to.
const maxComm = 15

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
