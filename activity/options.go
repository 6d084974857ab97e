package activity

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity/record"
)

// Defaults of the Aggregator's options.
const (
	DefaultTopKernels     = 15
	DefaultRerankInterval = time.Minute
	DefaultSeriesTTL      = 5 * time.Minute
)

// Option configures an Aggregator.
type Option func(*config)

type config struct {
	topKernels                       int
	rerankInterval                   time.Duration
	seriesTTL                        time.Duration
	maxBuckets                       int
	buckets                          []float64
	kernelSplit, copySplit           Split
	podHistograms                    bool
	gpuResolver                      func(uuid string) (gpu string, ok bool)
	deviceFilter                     func(uuid string) (exists, known bool)
	budget                           *Budget
	podResolver                      PodResolver
	trustHelloPods                   bool
	podRetryInterval, podRetryWindow time.Duration
	tap                              func(p *record.Process, recs []record.Record)
	listeners                        []Listener
	now                              func() time.Time
}

func newConfig(opts []Option) config {
	c := config{
		topKernels:       DefaultTopKernels,
		rerankInterval:   DefaultRerankInterval,
		seriesTTL:        DefaultSeriesTTL,
		maxBuckets:       defaultMaxBuckets,
		buckets:          DefaultBuckets,
		podHistograms:    true,
		podRetryInterval: DefaultPodRetryInterval,
		podRetryWindow:   DefaultPodRetryWindow,
		now:              time.Now,
	}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// WithTopKernels sets how many kernel names get their own kernel label (in
// cupti_kernel_duration_seconds and, through KernelLabel, the attributed kernel families);
// the others are merged into kernel="other" and counted in
// cupti_activity_kernels_folded_total. Default 15 (the dashboards show the top 15); a non-positive value keeps the default.
func WithTopKernels(k int) Option {
	return func(c *config) {
		if k > 0 {
			c.topKernels = k
		}
	}
}

// Split says which dimensions beyond its own a histogram family is split by: the GPU
// (labels gpu, uuid) and the pod (namespace, pod, container). A dimension that is not split
// keeps its labels, empty, so the label set stays the same whatever the split (and a
// Prometheus scraping with honor_labels keeps the pod labels empty).
type Split uint8

const (
	SplitGPU Split = 1 << iota
	SplitPod
)

// ParseSplit reads a split from a list of "gpu" and "pod" (empty: neither).
func ParseSplit(dims []string) (Split, error) {
	var s Split
	for _, d := range dims {
		switch d {
		case "gpu":
			s |= SplitGPU
		case "pod":
			s |= SplitPod
		default:
			return 0, fmt.Errorf("histogram split %q: want gpu or pod", d)
		}
	}
	return s, nil
}

// WithKernelHistogramSplit sets what cupti_kernel_duration_seconds is split by beyond the
// kernel name. Default neither: one histogram per kernel label for the node, so the family
// never multiplies GPUs x pods x kernels (per-pod GPU time stays in
// cupti_kernel_gpu_seconds_total, per-GPU kernel time in the attributed families).
func WithKernelHistogramSplit(s Split) Option {
	return func(c *config) { c.kernelSplit = s }
}

// WithCopyHistogramSplit sets what cupti_memcpy_duration_seconds and
// cupti_memset_duration_seconds are split by beyond their copy and memory kinds. Default
// neither; the byte counters are always per GPU and pod.
func WithCopyHistogramSplit(s Split) Option {
	return func(c *config) { c.copySplit = s }
}

// WithPodHistograms turns cupti_pod_kernel_duration_seconds (one histogram per GPU and pod)
// on or off. Default on.
func WithPodHistograms(on bool) Option {
	return func(c *config) { c.podHistograms = on }
}

// WithHistogramBuckets sets the classic bucket upper bounds (seconds) of every duration
// histogram; native buckets do not depend on them. Default DefaultBuckets; bounds that are
// not positive, finite and strictly increasing keep the default.
func WithHistogramBuckets(bounds []float64) Option {
	return func(c *config) {
		if validBounds(bounds) {
			c.buckets = slices.Clone(bounds)
		}
	}
}

func validBounds(b []float64) bool {
	if len(b) == 0 || len(b) > 64 {
		return false
	}
	for i, v := range b {
		if !(v > 0) || math.IsInf(v, 0) || i > 0 && v <= b[i-1] {
			return false
		}
	}
	return true
}

// WithRerankInterval sets how often the top kernels are re-ranked by recent GPU time.
// Default one minute; a non-positive value keeps the default.
func WithRerankInterval(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.rerankInterval = d
		}
	}
}

// WithSeriesTTL sets how long the per-pod series of a process stay after its last
// connection closed and its last record. Default five minutes; a non-positive value keeps
// the default.
func WithSeriesTTL(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.seriesTTL = d
		}
	}
}

// WithMaxNativeBuckets caps the span of native buckets of each histogram; past it the
// histogram halves its resolution. Default 160; values below 8 keep the default.
func WithMaxNativeBuckets(n int) Option {
	return func(c *config) {
		if n >= 8 {
			c.maxBuckets = n
		}
	}
}

// WithGPUResolver maps a device UUID (from a process's hello) to the host's GPU index,
// the gpu label the PM-sampling series carry. Without it, or when it answers !ok, the gpu
// label is the CUDA ordinal inside the process.
func WithGPUResolver(f func(uuid string) (gpu string, ok bool)) Option {
	return func(c *config) { c.gpuResolver = f }
}

// WithDeviceFilter tells the Aggregator which GPUs the host has: f reports whether the
// device uuid (from a hello) exists, and whether it knows the host's GPUs at all. Records
// of a device that does not exist are dropped and counted
// (cupti_activity_dropped_records_total{reason="unknown_device"}) and create no series;
// when f does not know, every device declared in a hello is taken. Records of an ordinal
// beyond the hello's device list are always dropped so.
func WithDeviceFilter(f func(uuid string) (exists, known bool)) Option {
	return func(c *config) { c.deviceFilter = f }
}

// WithBudget charges the per-device state (series of each GPU) to b, shared with the
// activity receiver; a device past the budget is refused like an unknown one.
func WithBudget(b *Budget) Option {
	return func(c *config) { c.budget = b }
}

// WithPodResolver attributes processes to pods (in node mode, from the cgroup of the hello:
// package kubepods). Its answer comes first; the hello's POD_NAME/POD_NAMESPACE (and
// CONTAINER_NAME) are the fallback when it finds no pod. It is called when a process
// connects, and again on later records while it answers PodPending (WithPodRetry), always
// outside the Aggregator's lock. Without a resolver the hello alone labels processes.
func WithPodResolver(f PodResolver) Option {
	return func(c *config) { c.podResolver = f }
}

// WithRecordTap calls f with every batch given to Add, before it is aggregated, on the
// caller's goroutine (one per connection: f must be safe for concurrent use). recs is
// reused after f returns; f must copy what it keeps.
func WithRecordTap(f func(p *record.Process, recs []record.Record)) Option {
	return func(c *config) { c.tap = f }
}

// withClock replaces time.Now in tests.
func withClock(now func() time.Time) Option {
	return func(c *config) { c.now = now }
}
