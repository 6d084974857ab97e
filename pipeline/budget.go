package pipeline

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/cupti-exporter/cupti-exporter/activity"
	"github.com/cupti-exporter/cupti-exporter/attribution"
	"github.com/cupti-exporter/cupti-exporter/health"
	"github.com/cupti-exporter/cupti-exporter/pmsample"
	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// The series budget: the activity.* and attribution.* settings that bound what a node serves
// (docs/sizing.md measures each).

func formatBounds(b []float64) []string {
	out := make([]string, len(b))
	for i, v := range b {
		out[i] = strconv.FormatFloat(v, 'g', -1, 64)
	}
	return out
}

// parseBounds reads histogram bucket bounds: positive, finite, increasing, at most 64.
func parseBounds(s []string) ([]float64, error) {
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

// familyStems is a family list as attribution takes it: nil for "all", else the stems
// (empty, not nil, for none).
func familyStems(list []string) []string {
	if slices.Contains(list, "all") {
		return nil
	}
	return append([]string{}, list...)
}

// validateBudget checks the budget settings.
func (c *Config) validateBudget() []error {
	var errs []error
	if c.Activity.TopKernels < 1 || c.Activity.TopKernels > 1000 {
		errs = append(errs, fmt.Errorf("activity.top_kernels must be between 1 and 1000, got %d", c.Activity.TopKernels))
	}
	if _, err := activity.ParseSplit(c.Activity.KernelHistogramSplit); err != nil {
		errs = append(errs, fmt.Errorf("activity.kernel_histogram_split: %w", err))
	}
	if _, err := activity.ParseSplit(c.Activity.CopyHistogramSplit); err != nil {
		errs = append(errs, fmt.Errorf("activity.copy_histogram_split: %w", err))
	}
	if _, err := parseBounds(c.Activity.HistogramBuckets); err != nil {
		errs = append(errs, fmt.Errorf("activity.histogram_buckets: %w", err))
	}
	for _, g := range c.Series.Extra {
		if g != "all" && !slices.Contains(extraSeriesGroups, g) {
			errs = append(errs, fmt.Errorf("series.extra: unknown group %q; want %s or all", g, strings.Join(extraSeriesGroups, ", ")))
		}
	}
	return errs
}

// extraSeriesGroups are the groups of series.extra: what an idle GPU does without by
// default (docs/sizing.md "An idle GPU").
var extraSeriesGroups = []string{"window_min", "zero_reasons", "sampler_timing", "nvml_detail"}

// extraSeries reports whether series.extra turns group on.
func (c *Config) extraSeries(group string) bool {
	return slices.Contains(c.Series.Extra, group) || slices.Contains(c.Series.Extra, "all")
}

// budgetAggregatorOptions are the PM aggregator's options of series.extra.
func budgetAggregatorOptions(c *Config) []pmsample.AggregatorOption {
	return []pmsample.AggregatorOption{
		pmsample.WithWindowMin(c.extraSeries("window_min")),
		pmsample.WithZeroReasons(c.extraSeries("zero_reasons")),
		pmsample.WithTiming(c.extraSeries("sampler_timing")),
	}
}

// healthView serves src (the NVML source or a recording's health) with what series.extra
// turns on.
func healthView(c *Config, src interface{ Snapshot() *snapshot.Snapshot }) *health.View {
	return health.NewView(src, health.WithDetail(c.extraSeries("nvml_detail")), health.WithZeroReasons(c.extraSeries("zero_reasons")))
}

// budgetActivityOptions are the activity options of the series budget; the configuration
// is validated.
func budgetActivityOptions(c *Config) []activity.Option {
	kernel, _ := activity.ParseSplit(c.Activity.KernelHistogramSplit)
	copies, _ := activity.ParseSplit(c.Activity.CopyHistogramSplit)
	bounds, _ := parseBounds(c.Activity.HistogramBuckets)
	return []activity.Option{
		activity.WithTopKernels(c.Activity.TopKernels),
		activity.WithKernelHistogramSplit(kernel),
		activity.WithCopyHistogramSplit(copies),
		activity.WithPodHistograms(c.Activity.PodHistograms),
		activity.WithHistogramBuckets(bounds),
	}
}

// budgetAttributionOptions are the attribution options of the series budget.
func budgetAttributionOptions(c *Config) []attribution.Option {
	return []attribution.Option{
		attribution.WithTopKernels(c.Attribution.TopKernels),
		attribution.WithKernelFamilies(familyStems(c.Attribution.KernelFamilies)),
		attribution.WithPodFamilies(familyStems(c.Attribution.PodFamilies)),
		attribution.WithZeroReasons(c.extraSeries("zero_reasons")),
	}
}
