// Package snapshot is the metric data model every producer fills and the exporter serves:
// a Snapshot of Families, each a Desc and its Samples. It imports nothing of the project, so
// any package can publish metrics without depending on the packages that do work.
package snapshot

import "time"

// Kind is how a metric family behaves over time.
type Kind uint8

const (
	// KindGauge is a value that goes up and down (ratios, throughputs, window statistics).
	KindGauge Kind = iota
	// KindCounter is a monotonic total; its Prometheus name ends in _total.
	KindCounter
	// KindHistogram is a distribution with both classic and native (exponential) buckets.
	KindHistogram
)

func (k Kind) String() string {
	switch k {
	case KindGauge:
		return "gauge"
	case KindCounter:
		return "counter"
	case KindHistogram:
		return "histogram"
	}
	return "unknown"
}

// Desc describes one metric family as both outlets (Prometheus and OTLP) present it.
// A Desc is immutable once built; sources share them between snapshots.
type Desc struct {
	Name       string   // Prometheus name, e.g. cupti_sm_active_ratio or cupti_pcie_bytes_total
	Help       string   // one line of help text
	Kind       Kind     // gauge, counter or histogram
	Unit       string   // Prometheus unit suffix without underscore (ratio, bytes, seconds, ...); "" for none
	OTelName   string   // OpenTelemetry name, e.g. cupti.sm.active or hw.gpu.io
	OTelUnit   string   // UCUM unit for OTLP, e.g. "1", "By", "s", "By/s"
	LabelNames []string // label names, in the order of Sample.LabelValues
	// OTelAttributes are constant attributes every OTLP data point of the family carries
	// and Prometheus series do not (e.g. hw.gpu.task="general" on hw.gpu.utilization): they
	// tell apart families that share one OpenTelemetry name.
	OTelAttributes []Label
}

// HistogramValue holds one histogram with classic buckets and, when Schema is set,
// native (exponential) buckets in the Prometheus convention: bucket index i covers
// (base^(i-1), base^i] with base = 2^(2^-Schema).
type HistogramValue struct {
	Count uint64
	Sum   float64

	// Classic buckets: Bounds are the upper bounds (without +Inf), Cumulative[i]
	// counts observations <= Bounds[i].
	Bounds     []float64
	Cumulative []uint64

	// Native buckets; Native is false when the histogram has none.
	Native          bool
	Schema          int32
	ZeroThreshold   float64
	ZeroCount       uint64
	PositiveBuckets map[int]int64 // index -> count (not cumulative)
}

// Sample is one series of a family.
type Sample struct {
	LabelValues []string        // values in the order of Desc.LabelNames
	Value       float64         // gauges and counters
	Histogram   *HistogramValue // histograms only
	Start       time.Time       // start of the counter/histogram accumulation; zero for gauges
	// Priority orders the series of a family under the exporter's cardinality cap: past
	// the cap, lower priorities are folded into the family's overflow series first.
	Priority Priority
}

// Priority is how much a series must survive a cardinality cap (docs/sizing.md).
type Priority int8

const (
	// PriorityClaimed: the series speaks for a workload identity a client only claimed
	// (not verified by the kernel): folded first.
	PriorityClaimed Priority = -1
	// PriorityNormal is the default.
	PriorityNormal Priority = 0
	// PriorityVerified: a workload identity taken from the kernel (peer credentials,
	// /proc/<pid>/cgroup): kept before normal and claimed series.
	PriorityVerified Priority = 1
	// PriorityDevice: a series of a GPU itself; never folded.
	PriorityDevice Priority = 2
)

// Family is a metric family with its series.
type Family struct {
	Desc    *Desc
	Samples []Sample
}

// Snapshot is an immutable set of families produced by one source at one moment.
// Producers build a new Snapshot and publish it atomically; readers never modify it.
type Snapshot struct {
	Time     time.Time
	Families []Family
}

// Label is a constant name and value (a mapping rule's direction="rx", an OTLP attribute).
type Label struct{ Name, Value string }

// DeviceLabelNames are the labels every device series carries, in this order.
var DeviceLabelNames = []string{"gpu", "uuid", "model", "chip", "pci_bus_id"}

// DeviceLabels returns the label names of a device family with more labels: DeviceLabelNames
// followed by extra, in a slice of its own.
func DeviceLabels(extra ...string) []string {
	return append(append(make([]string, 0, len(DeviceLabelNames)+len(extra)), DeviceLabelNames...), extra...)
}
