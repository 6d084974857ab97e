package profilers

import (
	"strings"
	"testing"
)

// fakeProc is a process as the rules read it.
type fakeProc struct {
	name   string
	args   []string
	env    map[string]string
	mapped []string
}

func (p fakeProc) comm() string      { return p.name }
func (p fakeProc) cmdline() []string { return p.args }
func (p fakeProc) environ(k string) (string, bool) {
	v, ok := p.env[k]
	return v, ok
}
func (p fakeProc) maps(s string) bool {
	for _, m := range p.mapped {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

func TestRules(t *testing.T) {
	const ncuInject = "/opt/nvidia/nsight-compute/2025.3.1/target/linux-desktop-glibc_2_11_3-x64/libTreeLauncherTargetInjection.so"
	for _, c := range []struct {
		what  string
		p     fakeProc
		named []string
		tool  string // "": no match
	}{
		{"ncu front end", fakeProc{name: "ncu", args: []string{"ncu", "-c", "3", "./app"}}, nil, ToolNcu},
		{"ncu's target, injected", fakeProc{name: "app", env: map[string]string{"CUDA_INJECTION64_PATH": ncuInject}}, nil, ToolNcu},
		{"our own injection library is no profiler", fakeProc{name: "python3", env: map[string]string{"CUDA_INJECTION64_PATH": "/run/cupti-exporter/libcupti_exporter_inject.so"}}, nil, ""},
		{"nsys with GPU metrics", fakeProc{name: "nsys", args: []string{"nsys", "profile", "--gpu-metrics-devices=0", "./app"}}, nil, ToolNsys},
		{"nsys, older flag", fakeProc{name: "nsys", args: []string{"nsys", "profile", "--gpu-metrics-device", "all", "./app"}}, nil, ToolNsys},
		{"nsys tracing only", fakeProc{name: "nsys", args: []string{"nsys", "profile", "-t", "cuda", "./app"}}, nil, ""},
		{"a program named like the flag is not nsys", fakeProc{name: "python3", args: []string{"python3", "--gpu-metrics-devices=0"}}, nil, ""},
		{"DCGM without its profiling module", fakeProc{name: "nv-hostengine", mapped: []string{"/usr/lib/libdcgm.so.4"}}, nil, ""},
		{"DCGM with it", fakeProc{name: "nv-hostengine", mapped: []string{"/usr/lib/x86_64-linux-gnu/libdcgmmoduleprofiling.so.4"}}, nil, ToolDCGM},
		{"DCGM's load generator", fakeProc{name: "dcgmproftester1"}, nil, ToolDCGM},
		{"a named tool", fakeProc{name: "my-sampler"}, []string{"my-sampler"}, ToolNamed},
		{"a named prefix", fakeProc{name: "perfmon-7"}, []string{"perfmon-*"}, ToolNamed},
		{"a name longer than comm holds", fakeProc{name: "very-long-tool-"}, []string{"very-long-tool-name"}, ToolNamed},
		{"an ordinary process", fakeProc{name: "python3", args: []string{"python3", "train.py"}}, []string{"my-sampler"}, ""},
	} {
		r, ok := match(c.p, c.named)
		if got := map[bool]string{true: r.tool, false: ""}[ok]; got != c.tool {
			t.Errorf("%s: tool %q, want %q", c.what, got, c.tool)
		}
	}
	if !candidate("nv-hostengine") || candidate("ncu") {
		t.Error("candidate: want nv-hostengine (its module loads late) and not ncu")
	}
}
