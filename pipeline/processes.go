package pipeline

import (
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/cupti-exporter/cupti-exporter/kubepods"
)

// maxCgroupBytes bounds the read of /proc/<pid>/cgroup (a few hundred bytes in practice).
const maxCgroupBytes = 64 << 10

// pidPodResolver resolves a PID NVML reports to its pod the way traced processes are
// resolved (the cgroup, then the informer's cache), reading the cgroup from procRoot
// (/proc: the exporter must see the host's PIDs, hostPID in Kubernetes). It does no network
// I/O; a PID that is gone or unreadable has no pod.
func pidPodResolver(r *kubepods.Resolver, procRoot string) func(pid uint32) (pod, namespace, container string, ok bool) {
	return func(pid uint32) (string, string, string, bool) {
		f, err := os.Open(filepath.Join(procRoot, strconv.FormatUint(uint64(pid), 10), "cgroup"))
		if err != nil {
			return "", "", "", false
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, maxCgroupBytes))
		if err != nil {
			return "", "", "", false
		}
		c, res := r.Lookup(string(b))
		if res != kubepods.Found {
			return "", "", "", false
		}
		return c.Pod, c.Namespace, c.Name, true
	}
}
