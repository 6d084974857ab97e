package attribution

import (
	"strings"
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity"
)

// Defaults of the Attributor's options.
const (
	DefaultWatermark         = 3 * time.Second
	DefaultEstimator         = EstimatorRate
	DefaultMaxPendingRecords = 2_000_000
	DefaultSeriesTTL         = 10 * time.Minute
	// DefaultFarClock is how far a record may lie from its device's newest sample (or from
	// the wall clock before the first sample) before it is taken for another clock.
	DefaultFarClock = time.Hour
)

// maxAhead is how far past the device's newest sample and the wall clock a record may end:
// CUPTI reports a kernel after it ends, so only a skew of clocks puts its end ahead. A record
// reaching further would be held (and joined with every sample) until its end.
const maxAhead = time.Minute

// Estimator names.
const (
	// EstimatorOverlap splits each sample by overlap time alone.
	EstimatorOverlap = "overlap"
	// EstimatorRate splits each sample by overlap time times the estimated rate of each
	// kernel class (an EM fit, see docs/attribution.md).
	EstimatorRate = "rate"
)

// Estimators lists the estimator names WithEstimator accepts.
var Estimators = []string{EstimatorOverlap, EstimatorRate}

// Option configures an Attributor.
type Option func(*config)

type config struct {
	watermark    time.Duration
	estimator    string
	maxPending   int
	farClock     time.Duration
	seriesTTL    time.Duration
	emPasses     int
	rateHalfLife time.Duration
	kernelLabel  KernelLabeler
	topKernels   int             // named kernel labels per device; 0: no limit
	kernelFams   map[string]bool // per-kernel families served (by stem); nil: all
	podFams      map[string]bool // per-pod families served (by stem); nil: all
	zeroReasons  bool            // per-GPU drop reasons at 0 before their first drop
	now          func() time.Time
	budget       *activity.Budget // nil: no limit (the memory is still counted)
}

func newConfig(opts []Option) config {
	c := config{
		watermark:    DefaultWatermark,
		estimator:    DefaultEstimator,
		maxPending:   DefaultMaxPendingRecords,
		farClock:     DefaultFarClock,
		seriesTTL:    DefaultSeriesTTL,
		emPasses:     5,
		rateHalfLife: 30 * time.Second,
		kernelLabel:  KernelLabelFunc(func(s string) string { return s }),
		now:          time.Now,
	}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// WithWatermark sets how long PM samples are held for the kernel records that overlap them
// (the activity library flushes about once a second): a device's samples are attributed once
// they end more than the watermark before its newest sample, or when no batch came for a
// watermark of wall time. Default 3 s; a non-positive value keeps the default.
func WithWatermark(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.watermark = d
		}
	}
}

// WithEstimator picks how a sample is split over the kernels that overlap it: "overlap"
// (by overlap time) or "rate" (by overlap time times each kernel class's estimated rate;
// the default). An unknown name keeps the default; New checks names given through flags.
func WithEstimator(name string) Option {
	return func(c *config) {
		if name == EstimatorOverlap || name == EstimatorRate {
			c.estimator = name
		}
	}
}

// WithMaxPendingRecords caps the kernel records held per device while their samples wait
// for the watermark; records beyond it are dropped and counted (reason pending_full).
// Default 2,000,000 (about 10 s at 200k kernels/s, 64 MB); a non-positive value keeps it.
func WithMaxPendingRecords(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.maxPending = n
		}
	}
}

// WithSeriesTTL sets how long a kernel or pod series that gets nothing more stays in the
// snapshot. Default ten minutes; a non-positive value keeps the default.
func WithSeriesTTL(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.seriesTTL = d
		}
	}
}

// KernelLabeler turns a mangled kernel name into its kernel label: the activity
// aggregator's bounded top-K label set ((*activity.Aggregator).KernelLabel), so that the
// attributed families share the labels of the kernel histograms. It is called with the
// Attributor's lock held and must not call back into it.
type KernelLabeler interface {
	KernelLabel(mangled string) string
}

// KernelLabelFunc is a function as a KernelLabeler.
type KernelLabelFunc func(mangled string) string

// KernelLabel calls f.
func (f KernelLabelFunc) KernelLabel(mangled string) string { return f(mangled) }

// WithKernelLabels sets the kernel labels. Without it the label is the mangled name (the
// class table still caps distinct names, the rest going to "other").
func WithKernelLabels(l KernelLabeler) Option {
	return func(c *config) {
		if l != nil {
			c.kernelLabel = l
		}
	}
}

// LabelKernelsWith sets the kernel labels as WithKernelLabels does, for a labeler made after
// the Attributor: the activity aggregator, which takes the Attributor as a listener when it
// is made.
func (a *Attributor) LabelKernelsWith(l KernelLabeler) {
	if l == nil {
		return
	}
	a.mu.Lock()
	a.cfg.kernelLabel = l
	a.mu.Unlock()
}

// The series budget the exporter's flags default to (docs/sizing.md): per device, the first
// BudgetTopKernels kernel labels get series of their own (the rest go to kernel="other");
// the per-kernel and per-pod families are those the dashboards read. The package's own
// defaults limit nothing.
const BudgetTopKernels = 4

var (
	BudgetKernelFamilies = []string{"dram_read_bytes", "dram_write_bytes", "sm_active_seconds", "tensor_pipe_active_seconds"}
	BudgetPodFamilies    = []string{"dram_read_bytes", "dram_write_bytes", "tensor_pipe_active_seconds", "nvlink_bytes"}
)

// WithTopKernels bounds the kernel labels of each device's per-kernel series: the first n
// labels (of those WithKernelLabels gives) that a device's samples are attributed to keep
// their own series while they last (the series TTL); later ones are attributed to
// kernel="other" of that device. The fixed labels ((idle), (untraced), (memcpy),
// (memset), other) do not count. 0 or less: no limit.
func WithTopKernels(n int) Option {
	return func(c *config) { c.topKernels = max(n, 0) }
}

// WithKernelFamilies and WithPodFamilies choose which attributed families are served per
// kernel (cupti_kernel_<stem>_total) and per pod (cupti_pod_<stem>_total), by stem: the
// family name without its cupti_kernel_ or cupti_pod_ prefix and _total suffix
// ("dram_read_bytes", "sm_active_seconds", "nvlink_bytes"). The sampled-time families
// (cupti_kernel_sampled_seconds_total, cupti_pod_sampled_seconds_total), the denominators,
// are always served. nil: every family; New refuses a stem no sampled metric makes.
func WithKernelFamilies(stems []string) Option {
	return func(c *config) { c.kernelFams = stemSet(stems) }
}

// WithPodFamilies: see WithKernelFamilies.
func WithPodFamilies(stems []string) Option {
	return func(c *config) { c.podFams = stemSet(stems) }
}

func stemSet(stems []string) map[string]bool {
	if stems == nil {
		return nil
	}
	m := make(map[string]bool, len(stems))
	for _, s := range stems {
		m[s] = true
	}
	return m
}

// FamilyStem is the stem of an attributed family name (see WithKernelFamilies).
func FamilyStem(name string) string {
	for _, p := range []string{"cupti_kernel_", "cupti_pod_"} {
		if strings.HasPrefix(name, p) {
			return strings.TrimSuffix(strings.TrimPrefix(name, p), "_total")
		}
	}
	return name
}

// WithZeroReasons serves cupti_attribution_dropped_samples_total for every reason of every
// GPU from the start, at 0; off by default, a reason's series appears at its first drop (no
// alert reads it; docs/sizing.md "An idle GPU").
func WithZeroReasons(on bool) Option {
	return func(c *config) { c.zeroReasons = on }
}

// WithBudget charges what clients can make the join hold (records waiting for their
// samples, kernel classes, series, the join's buffers) to b, the activity receiver's memory
// budget: past it, records are dropped (reason memory_budget) and new kernel names are
// joined as "other", both counted. nil: no limit.
func WithBudget(b *activity.Budget) Option {
	return func(c *config) { c.budget = b }
}

// WithClock replaces time.Now (tests).
func WithClock(now func() time.Time) Option {
	return func(c *config) {
		if now != nil {
			c.now = now
		}
	}
}
