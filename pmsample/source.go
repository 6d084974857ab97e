package pmsample

import (
	"context"
	"time"

	"github.com/cupti-exporter/cupti-exporter/mapping"
)

// Device identifies a sampled GPU; its fields become the device labels
// (gpu, uuid, model, chip, pci_bus_id).
type Device struct {
	Index    int    `json:"index"`
	UUID     string `json:"uuid"`
	Model    string `json:"model"`
	Chip     string `json:"chip"`
	PCIBusID string `json:"pci_bus_id"`
}

// CatalogEntry is a metric as the source knows it: full Perfworks name and the properties
// of its base metric.
type CatalogEntry struct {
	Name       string             `json:"name"` // full name with rollup and submetric
	Properties mapping.Properties `json:"properties"`
}

// Sample is one hardware sample: its GPU time span (ns on the Unix epoch) and one value per
// metric of the batch, in Batch.Metrics order.
type Sample struct {
	Start  uint64    `json:"start"`
	End    uint64    `json:"end"`
	Values []float64 `json:"values"`
}

// Batch is what one decode of one device produced. Loss counters are deltas since the
// previous batch of the same device.
type Batch struct {
	Device  int      // Device.Index
	Metrics []string // full Perfworks names; the same slice for every batch of a config
	Samples []Sample

	DroppedFirst   int // samples dropped because they began before Start
	SkippedInvalid int // samples with end <= start or NaN values
	// Incomplete counts samples whose counter records a counter data image re-initialisation
	// split (the first of a decode after one that ended inside a sample): not evaluated.
	Incomplete int
	// Rejected counts samples the Guard rejected, by the check that failed first: a metric
	// of Metrics, or SpanCheck. Nil when none was.
	Rejected      map[string]int
	LostImageFull int // decodes that stopped with COUNTER_DATA_FULL (samples lost; Lost says how many)
	Overflows     int // hardware buffer overflows (session recreated)
	DecodeErrors  int // decode calls that failed

	// Lost are the stretches of the device's time line without a delivered sample that were
	// accounted since the previous batch (gaps before this batch's samples, idle time while
	// paused, busy or in error). A batch may carry only losses.
	Lost []Loss
	// Interval is the hardware sampling interval in effect (0: unknown, e.g. an old recording).
	Interval time.Duration

	// DecodeDuration is the time the decode and evaluation of this batch took (0 if unknown).
	DecodeDuration time.Duration
	// DecodeGap is the time from the previous decode of the same session to this one (0 for
	// a session's first decode, or unknown): past the decode period by more than the image's
	// slack, samples are lost to a full image.
	DecodeGap time.Duration
	// CUPTITime is the time spent inside each CUPTI call while making this batch (zero for
	// replayed batches): it tells CUPTI's cost from the exporter's own.
	CUPTITime CallTimes
	// ThreadCPU is the CPU time the device's decode thread used since its previous batch
	// (CUPTI calls, session churn and the exporter's own work on that thread; 0 if unknown).
	ThreadCPU time.Duration
	// Multiplexed is set when this batch's metrics share the counters with other groups in
	// turns; the aggregator then reports the fraction of time they were observed.
	Multiplexed bool
}

// Source produces batches of PM samples. The CUPTI sampler and the recording replayer
// implement it.
type Source interface {
	// Devices lists the devices the source samples.
	Devices() []Device
	// Catalog lists the metrics the source samples, with their properties.
	Catalog() []CatalogEntry
	// Run delivers batches to sink until ctx ends or the source ends (replay without loop);
	// sink is called from one goroutine per device and must not block for long.
	Run(ctx context.Context, sink func(Batch)) error
}

// CallTimes is time spent inside the CUPTI calls of the decode path.
type CallTimes struct {
	Decode     time.Duration // cuptiPmSamplingDecodeData
	SampleInfo time.Duration // cuptiPmSamplingCounterDataGetSampleInfo, once per sample
	Evaluate   time.Duration // cuptiProfilerHostEvaluateToGpuValues, once per sample
	Reset      time.Duration // cuptiPmSamplingCounterDataImageInitialize
	// Session is Enable, SetConfig (with the counter data images it allocates and initialises)
	// and Disable: the cost of (re)creating sessions, after image-full decodes for instance.
	Session time.Duration
}
