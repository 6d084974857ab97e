package pipeline

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cupti-exporter/cupti-exporter/activity"
	"github.com/cupti-exporter/cupti-exporter/activity/receiver"
	"github.com/cupti-exporter/cupti-exporter/attribution"
	"github.com/cupti-exporter/cupti-exporter/health"
	"github.com/cupti-exporter/cupti-exporter/pmsample/aggregate"
	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// The series budget: the activity.* and attribution.* settings that bound what a node serves
// (docs/sizing.md measures each).

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
func budgetAggregatorOptions(c *Config) []aggregate.Option {
	return []aggregate.Option{
		aggregate.WithWindowMin(c.extraSeries("window_min")),
		aggregate.WithZeroReasons(c.extraSeries("zero_reasons")),
		aggregate.WithTiming(c.extraSeries("sampler_timing")),
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
	bounds, _ := receiver.ParseBounds(c.Activity.HistogramBuckets)
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
