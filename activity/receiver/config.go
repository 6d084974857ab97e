package receiver

import (
	"fmt"
	"io/fs"
	"strconv"

	"github.com/cupti-exporter/cupti-exporter/activity"
	"github.com/cupti-exporter/cupti-exporter/internal/settings"
)

// Config is the exporter's activity section (activity.*): the socket server's settings and
// the activity aggregator's series budget, with their YAML keys, flags and help.
type Config struct {
	Enabled bool   `yaml:"enabled" help:"Receive kernel and memcpy records from injected processes."`
	Socket  string `yaml:"socket" help:"Unix socket the injection library connects to."`
	// SocketMode is octal text so that YAML and flags read it the same way.
	SocketMode                string            `yaml:"socket_mode" help:"Permissions of the activity socket, octal (0666 lets workloads of any user connect)."`
	MaxConnections            int               `yaml:"max_connections" help:"Most concurrent activity connections; when full, a new one replaces the oldest that has not said hello, or one idle past activity.idle_timeout."`
	MemoryBudget              settings.ByteSize `yaml:"memory_budget" help:"Memory the activity receiver may hold for its connections (kernel-name tables, frame buffers), e.g. 256MiB; past it frames are refused and counted."`
	HelloTimeout              settings.Duration `yaml:"hello_timeout" help:"Close activity connections that have not sent their hello after this long."`
	IdleTimeout               settings.Duration `yaml:"idle_timeout" help:"An activity connection silent this long may be closed to make room when the connection limit is reached."`
	MaxConnectionsPerIdentity int               `yaml:"max_connections_per_identity" help:"Most concurrent activity connections of one verified identity (the processes of one container, by cgroup); its next one replaces its oldest connection without hello, else is refused."`
	ProcRoot                  string            `yaml:"proc_root" help:"procfs where the exporter reads the /proc entries of the processes that connect (their PID, start time and cgroup, checked against their hello); it must belong to the exporter's PID namespace, which should be the host's (hostPID) for processes of other pods to be verified."`
	TrustHelloPods            bool              `yaml:"trust_hello_pods" help:"Label processes with the pod their hello names (POD_NAME, POD_NAMESPACE) when nothing can check it (no pod informer, or a process the kernel cannot name). Only where trusted workloads alone reach the socket, such as a sidecar's."`
	// The series budget (docs/sizing.md).
	TopKernels           int      `yaml:"top_kernels" help:"Kernel names (by recent GPU time) that get their own kernel label in the node's kernel families; the rest are kernel=\"other\", counted in cupti_activity_kernels_folded_total."`
	KernelHistogramSplit []string `yaml:"kernel_histogram_split" help:"What cupti_kernel_duration_seconds is split by besides the kernel: gpu, pod, both (gpu,pod) or neither (empty: one histogram per kernel for the node)."`
	CopyHistogramSplit   []string `yaml:"copy_histogram_split" help:"What the memcpy and memset duration histograms are split by besides the copy and memory kinds: gpu, pod, both or neither (empty); their byte counters are always per GPU and pod."`
	PodHistograms        bool     `yaml:"pod_histograms" help:"Serve cupti_pod_kernel_duration_seconds, a kernel-duration histogram per GPU and pod."`
	HistogramBuckets     []string `yaml:"histogram_buckets" help:"Classic bucket upper bounds of the duration histograms, seconds, increasing (native buckets do not depend on them)."`
}

// DefaultMemoryBudget is the default activity.memory_budget: with the GPUs' ~80 MB each, it
// fits the chart's 1 GiB limit on 8 GPUs. MinMemoryBudget is the least accepted.
const (
	DefaultMemoryBudget = 128 << 20
	MinMemoryBudget     = 16 << 20
)

// DefaultConfig is the activity section's default.
func DefaultConfig() Config {
	return Config{
		Enabled:                   true,
		Socket:                    "/run/cupti-exporter/activity.sock",
		SocketMode:                "0660",
		MaxConnections:            DefaultMaxConnections,
		MemoryBudget:              DefaultMemoryBudget,
		HelloTimeout:              settings.Duration(DefaultHelloTimeout),
		IdleTimeout:               settings.Duration(DefaultIdleTimeout),
		ProcRoot:                  DefaultProcRoot,
		MaxConnectionsPerIdentity: DefaultMaxConnectionsPerIdentity,
		TopKernels:                activity.DefaultTopKernels,
		KernelHistogramSplit:      []string{},
		CopyHistogramSplit:        []string{},
		HistogramBuckets:          formatBounds(activity.DefaultBuckets),
	}
}

// Validate checks the section's values.
func (c Config) Validate() []error {
	var errs []error
	for _, d := range []struct {
		name string
		d    settings.Duration
	}{{"activity.hello_timeout", c.HelloTimeout}, {"activity.idle_timeout", c.IdleTimeout}} {
		if d.d <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, got %s", d.name, d.d))
		}
	}
	if c.TopKernels < 1 || c.TopKernels > 1000 {
		errs = append(errs, fmt.Errorf("activity.top_kernels must be between 1 and 1000, got %d", c.TopKernels))
	}
	if _, err := activity.ParseSplit(c.KernelHistogramSplit); err != nil {
		errs = append(errs, fmt.Errorf("activity.kernel_histogram_split: %w", err))
	}
	if _, err := activity.ParseSplit(c.CopyHistogramSplit); err != nil {
		errs = append(errs, fmt.Errorf("activity.copy_histogram_split: %w", err))
	}
	if _, err := ParseBounds(c.HistogramBuckets); err != nil {
		errs = append(errs, fmt.Errorf("activity.histogram_buckets: %w", err))
	}
	if _, err := c.socketMode(); err != nil {
		errs = append(errs, err)
	}
	if c.MaxConnectionsPerIdentity < 1 {
		errs = append(errs, fmt.Errorf("activity.max_connections_per_identity must be at least 1, got %d", c.MaxConnectionsPerIdentity))
	}
	if c.MaxConnections < 1 {
		errs = append(errs, fmt.Errorf("activity.max_connections must be at least 1, got %d", c.MaxConnections))
	}
	if c.MemoryBudget < MinMemoryBudget {
		errs = append(errs, fmt.Errorf("activity.memory_budget must be at least %s, got %s", settings.ByteSize(MinMemoryBudget), c.MemoryBudget))
	}
	return errs
}

// socketMode parses activity.socket_mode.
func (c Config) socketMode() (fs.FileMode, error) {
	m, err := strconv.ParseUint(c.SocketMode, 8, 32)
	if err != nil || m > 0o777 {
		return 0, fmt.Errorf("activity.socket_mode must be octal permissions such as 0660, got %q", c.SocketMode)
	}
	return fs.FileMode(m), nil
}

// SocketFileMode is activity.socket_mode once Validate has accepted it.
func (c Config) SocketFileMode() fs.FileMode {
	m, _ := c.socketMode()
	return m
}

func formatBounds(b []float64) []string {
	out := make([]string, len(b))
	for i, v := range b {
		out[i] = strconv.FormatFloat(v, 'g', -1, 64)
	}
	return out
}

// ParseBounds reads histogram bucket bounds (activity.histogram_buckets): positive, finite,
// increasing, at most 64.
func ParseBounds(s []string) ([]float64, error) {
	if len(s) == 0 || len(s) > 64 {
		return nil, fmt.Errorf("want 1 to 64 bounds, got %d", len(s))
	}
	out := make([]float64, len(s))
	for i, x := range s {
		v, err := strconv.ParseFloat(x, 64)
		if err != nil || !(v > 0) || v > 1e6 {
			return nil, fmt.Errorf("bound %q: want a positive number of seconds", x)
		}
		if i > 0 && v <= out[i-1] {
			return nil, fmt.Errorf("bounds must increase: %s after %s", x, s[i-1])
		}
		out[i] = v
	}
	return out, nil
}
