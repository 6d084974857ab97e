package health

import (
	"time"

	"github.com/cupti-exporter/cupti-exporter/gpuprocs"
)

// DefaultInterval is how often a Source reads every device.
const DefaultInterval = time.Second

// Option configures a Source.
type Option func(*config)

type config struct {
	interval    time.Duration
	gpuResolver func(uuid string) (gpu string, ok bool)
	podResolver func(pid uint32) (pod, namespace, container string, ok bool)
	procRoot    string // where /proc is: the MPS server is told by its command line
	onProcesses ProcessListener
	events      bool
	gpm         bool
	now         func() time.Time
}

func newConfig(opts []Option) config {
	c := config{interval: DefaultInterval, events: true, now: time.Now, procRoot: "/proc"}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// WithInterval sets how often every device is read (default 1 s); a non-positive value
// keeps the default.
func WithInterval(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.interval = d
		}
	}
}

// WithGPUResolver maps a GPU UUID to the gpu label the PM-sampling series carry (CUDA's
// device order may differ from NVML's). Without it, or when it answers !ok, the label is
// NVML's index.
func WithGPUResolver(f func(uuid string) (gpu string, ok bool)) Option {
	return func(c *config) { c.gpuResolver = f }
}

// WithPodResolver attributes a process using GPU memory to its pod, the way activity
// records are attributed. It must not block: it runs on the collection goroutine.
func WithPodResolver(f func(pid uint32) (pod, namespace, container string, ok bool)) Option {
	return func(c *config) { c.podResolver = f }
}

// WithProcRoot sets where the host's /proc is mounted (default /proc), read for the command
// line of the processes NVML lists: the MPS server is known by it.
func WithProcRoot(dir string) Option { return func(c *config) { c.procRoot = dir } }

// ProcessListener takes, after every collection of each GPU, the compute processes NVML
// lists on it with their share of SM time since the previous collection (the attribution
// join's (*attribution.Attributor).ObserveProcesses, or a recording's writer). It runs on
// the collection goroutine and must not block.
type ProcessListener interface {
	ObserveProcesses(gpuprocs.Observation)
}

// ProcessListenerFunc is a function as a ProcessListener.
type ProcessListenerFunc func(gpuprocs.Observation)

// ObserveProcesses calls f.
func (f ProcessListenerFunc) ObserveProcesses(o gpuprocs.Observation) { f(o) }

// WithProcessListener hands l every collection's compute processes of each GPU (a
// gpuprocs.Observation). Without it the per-process utilisation is not read.
func WithProcessListener(l ProcessListener) Option {
	return func(c *config) { c.onProcesses = l }
}

// WithGPM reads the GPM metrics (SM, tensor and DRAM bandwidth utilisation; Hopper and
// newer) every collection, as the cupti_gpm_* families labelled source="gpm".
func WithGPM(on bool) Option { return func(c *config) { c.gpm = on } }

// WithoutEvents turns off the XID event goroutine.
func WithoutEvents() Option { return func(c *config) { c.events = false } }

// withClock replaces time.Now in tests.
func withClock(now func() time.Time) Option { return func(c *config) { c.now = now } }
