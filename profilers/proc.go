package profilers

import (
	"bytes"
	"slices"
	"strconv"
	"strings"

	"github.com/cupti-exporter/cupti-exporter/profilers/procfs"
)

// process reads one process's files on demand, each at most once (the proc of the rules).
type process struct {
	fs      *procfs.FS
	pid     int
	name    string
	args    []string
	env     map[string]string
	argsErr bool
	envRead bool
}

func (p *process) comm() string { return p.name }

func (p *process) cmdline() []string {
	if p.args == nil && !p.argsErr {
		b, err := p.fs.Read(strconv.Itoa(p.pid)+"/cmdline", procfs.MaxCmdline)
		p.argsErr = err != nil
		p.args = procfs.SplitNUL(b)
	}
	return p.args
}

// envKeys are the variables a rule or the devices of a holder read.
var envKeys = []string{"CUDA_INJECTION64_PATH", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"}

// environ reads one of envKeys; another user's process needs CAP_SYS_PTRACE (else: absent).
func (p *process) environ(key string) (string, bool) {
	if !p.envRead {
		p.envRead = true
		p.env = map[string]string{}
		b, err := p.fs.Read(strconv.Itoa(p.pid)+"/environ", procfs.MaxEnviron)
		if err == nil {
			for _, kv := range procfs.SplitNUL(b) {
				if k, v, ok := strings.Cut(kv, "="); ok && slices.Contains(envKeys, k) {
					p.env[k] = v
				}
			}
		}
	}
	v, ok := p.env[key]
	return v, ok
}

// maps reports whether a file the process maps has substr in its base name.
func (p *process) maps(substr string) bool {
	found := false
	_ = p.fs.Lines(strconv.Itoa(p.pid)+"/maps", procfs.MaxMaps, func(line []byte) bool {
		if i := bytes.LastIndexByte(line, '/'); i >= 0 && bytes.Contains(line[i:], []byte(substr)) {
			found = true
		}
		return !found
	})
	return found
}
