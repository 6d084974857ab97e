package mapping

import "github.com/cupti-exporter/cupti-exporter/snapshot"

// This file fixes the API other packages build against. The implementation lives in the
// other files of this package.

// Metric is the result of mapping one full Perfworks metric name (with rollup and submetric).
type Metric struct {
	Perfworks string // the full Perfworks name, e.g. sm__cycles_active.avg.pct_of_peak_sustained_elapsed
	// Desc names the main series: for counters the _total counter, for gauges
	// (ratios, percentages, throughputs) the time-weighted mean over the window.
	// Its LabelNames are DeviceLabelNames followed by the names of Labels.
	Desc *snapshot.Desc
	// Max and Min name the window maximum and minimum of a gauge; nil for counters.
	Max, Min *snapshot.Desc
	Labels   []snapshot.Label // constant labels of this metric, values in Desc.LabelNames order after the device labels
	Scale    float64          // multiply the CUPTI value by this (0.01 for percentages -> ratio)

	owner string // what owns its series: the Perfworks name, or "curated NAME" for any candidate of a curated metric
}

// Descs are the families of the metric that are set: Desc, then Max and Min for a gauge.
func (m Metric) Descs() []*snapshot.Desc {
	out := make([]*snapshot.Desc, 0, 3)
	for _, d := range []*snapshot.Desc{m.Desc, m.Max, m.Min} {
		if d != nil {
			out = append(out, d)
		}
	}
	return out
}
