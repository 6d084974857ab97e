package attribution

import (
	"fmt"
	"slices"

	"github.com/cupti-exporter/cupti-exporter/internal/settings"
)

// Config is the exporter's attribution section (attribution.*): its YAML keys and flags,
// with help. What depends on other sections (the watermark against pmsample.decode_period)
// the exporter checks where the sections meet.
type Config struct {
	Enabled           bool              `yaml:"enabled" help:"Attribute PM samples to the kernels and pods that ran during them (needs PM sampling and activity)."`
	Watermark         settings.Duration `yaml:"watermark" help:"How long PM samples wait for the kernel records that overlap them before they are attributed; must exceed pmsample.decode_period (the default 3s becomes 2 decode periods + 1s when those are longer)."`
	Estimator         string            `yaml:"estimator" help:"How a sample is split over the kernels overlapping it: rate (overlap x each kernel's estimated rate) or overlap."`
	MaxPendingRecords int               `yaml:"max_pending_records" help:"Kernel records held per GPU while their samples wait; more are dropped and counted."`
	TopKernels        int               `yaml:"top_kernels" help:"Kernel labels per GPU in the attributed per-kernel families (the first that GPU runs, among activity.top_kernels); later ones go to that GPU's kernel=\"other\". 0: no limit."`
	KernelFamilies    []string          `yaml:"kernel_families" help:"Attributed families served per kernel, by stem (cupti_kernel_<stem>_total: dram_read_bytes, sm_active_seconds, pcie_bytes, ...); all: every one; empty: none. cupti_kernel_sampled_seconds_total always is."`
	PodFamilies       []string          `yaml:"pod_families" help:"Attributed families served per pod, by stem (cupti_pod_<stem>_total); all: every one; empty: none. cupti_pod_sampled_seconds_total always is."`
}

// DefaultConfig is the attribution section's default: the series budget the dashboards read
// (BudgetTopKernels, BudgetKernelFamilies, BudgetPodFamilies).
func DefaultConfig() Config {
	return Config{
		Enabled:           true,
		Watermark:         settings.Duration(DefaultWatermark),
		Estimator:         DefaultEstimator,
		MaxPendingRecords: DefaultMaxPendingRecords,
		TopKernels:        BudgetTopKernels,
		KernelFamilies:    slices.Clone(BudgetKernelFamilies),
		PodFamilies:       slices.Clone(BudgetPodFamilies),
	}
}

// Validate checks the section's values.
func (c Config) Validate() []error {
	var errs []error
	if c.Watermark <= 0 {
		errs = append(errs, fmt.Errorf("attribution.watermark must be positive, got %s", c.Watermark))
	}
	if err := ParseEstimator(c.Estimator); err != nil {
		errs = append(errs, fmt.Errorf("attribution.estimator: %w", err))
	}
	if c.MaxPendingRecords <= 0 {
		errs = append(errs, fmt.Errorf("attribution.max_pending_records must be positive, got %d", c.MaxPendingRecords))
	}
	if c.TopKernels < 0 {
		errs = append(errs, fmt.Errorf("attribution.top_kernels must not be negative, got %d", c.TopKernels))
	}
	return errs
}
