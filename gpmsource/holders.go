package gpmsource

import (
	"bytes"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
	"github.com/cupti-exporter/cupti-exporter/profilers/procfs"
)

// Holder is a process that holds a GPU's PM counters: one using the GPU (NVML lists it) that
// has a profiling library mapped.
type Holder struct {
	PID     int
	Command string // its comm
	Library string // the profiling library found in its memory map
	Tool    string // the profiler that started it, when one of its parents is (e.g. "ncu (pid 3888)")
}

// holderLibraries are the file names (substrings) of the libraries a process that collects
// PM counters has mapped, the most telling first: Nsight's injection into a profiled
// application, NVIDIA's PerfWorks target library (loaded in the process whose counters a
// profiler reads), then any PerfWorks library (CUPTI's profiling and PM sampling, DCGM's
// profiling module: libnvperf_host, libnvperf_dcgm_host). Measured on an H100 (run BR): the
// application ncu profiled mapped libInterceptorInjectionTarget.so, libnvperf_target.so and
// libnvperf_host.so; a PyTorch process not profiled maps libcupti.so but no PerfWorks library.
var holderLibraries = []string{"InjectionTarget", "libnvperf_target", "libnvperf"}

// profilers are the commands that start a process whose counters they read.
var profilers = []string{"ncu", "nsys", "nv-hostengine", "dcgmi", "nsight-sys", "ncu-ui"}

// holdersEvery is how often the holders of busy GPUs are looked for.
const holdersEvery = 2 * time.Second

// maxMapsBytes bounds the memory map read of one process.
const maxMapsBytes = 8 << 20

// findHolders looks, on each GPU whose PM sampling is busy, for the processes NVML lists on it
// that have a profiling library mapped (this process excepted), and publishes them.
func (s *Source) findHolders(now time.Time) {
	if s.cfg.pmStatus == nil || now.Sub(s.holdersAt) < holdersEvery {
		return
	}
	s.holdersAt = now
	busy := map[string]bool{}
	for _, d := range s.cfg.pmStatus() {
		if d.State == pmdata.StateBusy {
			busy[strings.ToLower(d.UUID)] = true
		}
	}
	found := map[string][]Holder{}
	if len(busy) > 0 {
		s.mu.Lock()
		devs := s.all
		s.mu.Unlock()
		for uuid, dev := range devs {
			if !busy[uuid] {
				continue
			}
			procs, ret := dev.GetComputeRunningProcesses()
			if ret != nvml.SUCCESS {
				continue
			}
			self := uint32(os.Getpid())
			for _, p := range procs {
				if p.Pid == self {
					continue // the exporter holds a CUDA context too: no need to read its maps
				}
				if h, ok := holderOf(&s.proc, int(p.Pid)); ok {
					found[uuid] = append(found[uuid], h)
				}
			}
		}
	}
	s.holders.Store(&found)
}

// Holders are the processes found holding the PM counters of the GPU with uuid while its PM
// sampling is busy (looked for every 2 s); none when they cannot be known (a process of
// another PID namespace than procfs's, or none with a profiling library mapped).
func (s *Source) Holders(uuid string) []Holder {
	return (*s.holders.Load())[strings.ToLower(uuid)]
}

// holderOf reads /proc/<pid>/maps for a profiling library, and names the profiler among the
// process's parents.
func holderOf(fs *procfs.FS, pid int) (Holder, bool) {
	best, rank := "", len(holderLibraries)
	fs.Lines(strconv.Itoa(pid)+"/maps", maxMapsBytes, func(line []byte) bool {
		if i := bytes.LastIndexByte(line, '/'); i >= 0 {
			base := line[i+1:]
			for r, lib := range holderLibraries[:rank] {
				if bytes.Contains(base, []byte(lib)) {
					best, rank = string(base), r
					break
				}
			}
		}
		return rank > 0
	})
	if best == "" {
		return Holder{}, false
	}
	h := Holder{PID: pid, Command: comm(fs, pid), Library: best}
	for up, p := 0, parent(fs, pid); up < 4 && p > 1; up, p = up+1, parent(fs, p) {
		if c := comm(fs, p); slices.Contains(profilers, c) {
			h.Tool = c + " (pid " + strconv.Itoa(p) + ")"
			break
		}
	}
	return h, true
}

func comm(fs *procfs.FS, pid int) string {
	b, _ := fs.Read(strconv.Itoa(pid)+"/comm", procfs.MaxStat)
	return strings.TrimSpace(string(b))
}

// parent is the PPid of /proc/<pid>/status (in its first lines), 0 when unknown.
func parent(fs *procfs.FS, pid int) int {
	b, err := fs.Read(strconv.Itoa(pid)+"/status", procfs.MaxStatus)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "PPid:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

// String says who holds the counters, for /readyz.
func (h Holder) String() string {
	s := "pid " + strconv.Itoa(h.PID) + " (" + h.Command + ", " + h.Library
	if h.Tool != "" {
		s += ", started by " + h.Tool
	}
	return s + ")"
}
