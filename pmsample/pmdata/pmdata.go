// Package pmdata is the data model of PM sampling that the sampler, the recordings and the
// consumers of PM samples (aggregator, attribution join, idle controller) share: the sampled
// devices, the catalog of metrics with their CUPTI properties, the batches of samples with
// their losses, the Source interface that delivers them, and the devices' sampling states
// (status.go). It imports nothing of the project.
package pmdata

import (
	"context"
	"time"
)

// MetricType is the CUPTI metric type of a base metric.
type MetricType uint8

const (
	TypeCounter    MetricType = iota // CUPTI_METRIC_TYPE_COUNTER
	TypeRatio                        // CUPTI_METRIC_TYPE_RATIO
	TypeThroughput                   // CUPTI_METRIC_TYPE_THROUGHPUT
)

// Properties are what CUPTI reports for a base metric.
type Properties struct {
	Type        MetricType
	HWUnit      string // e.g. "dram", "sm", "gpc"
	DimUnit     string // e.g. "byte", "cycle", "sys_cycle"
	Description string
}

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
	Name       string     `json:"name"` // full name with rollup and submetric
	Properties Properties `json:"properties"`
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
	// Rejected counts samples the guard.Guard (pmsample/guard) rejected, by the check that failed first: a metric
	// of Metrics, or guard.SpanCheck. Nil when none was.
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

// Consumer takes the batches a Source delivers: the PM aggregator, the attribution join, the
// idle controller. Add is called from the source's device goroutines and must not block for
// long; the batch is the consumer's to read, not to keep changing.
type Consumer interface {
	Add(Batch)
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

// Loss is a stretch of time during which a device was meant to be sampled but delivered no
// sample: the gap between two delivered samples (end of one to start of the next), or time
// spent paused, busy or in error. Samples is the number of samples the hardware interval
// implies for it, so that delivered + lost samples = configured rate x time.
type Loss struct {
	Reason     string  // one of LostReasons
	Start, End uint64  // ns on the CUPTI clock (Unix epoch)
	Samples    float64 // (End - Start) / hardware interval
}

// LostReasons are the causes a Loss can name, in the order the self-metrics list them:
//
//   - image_full: a decode stopped with COUNTER_DATA_FULL; the session was recreated.
//   - overflow: the hardware buffer overflowed; the session was recreated.
//   - decode_error: decode calls failed (after three in a row the session was recreated).
//   - invalid: decoded samples that could not be evaluated or had no valid time span.
//   - incomplete: a sample whose records a counter data image re-initialisation split (the
//     decode before ended inside it); its remainder alone reads up to 4.3 times the truth.
//   - out_of_range: decoded samples with a value the hardware cannot produce (pmsample/guard).
//   - start: from Start to the first delivered sample of a session nothing else explains
//     (the first sample, which began before Start, is dropped).
//   - rotation: multiplexing switched groups (a new session for the next group).
//   - stall: a started session delivered no sample for longer than 5 decode periods (at
//     least 1 s); the session was recreated.
//   - backoff: the session was restarted at a longer interval (pmsample.WithRateBackoff).
//   - paused, busy, error: the counters were released on request, held by another profiler,
//     or could not be acquired.
//   - idle_release: from the first sign of work on an idle-released GPU to its first sample
//     after the session was taken back (pmsample's release.go); the released time itself is no loss.
//   - duty_cycle: the session was released for the off phase of a duty cycle (pmsample.WithDutyCycle).
//   - yielded: the counters were given to a profiler found on the host (pmsample's GiveWay), until the first
//     sample after TakeBack.
//   - gap: samples missing between two delivered ones with no event to explain them.
var LostReasons = [...]string{"image_full", "overflow", "decode_error", "invalid", "incomplete", "out_of_range", "start", "rotation", "stall", "backoff", "paused", "busy", "error", "idle_release", "duty_cycle", "yielded", "gap"}

// Reject counts one sample the guard rejected for check (Rejected).
func (b *Batch) Reject(check string) {
	if b.Rejected == nil {
		b.Rejected = map[string]int{}
	}
	b.Rejected[check]++
}

// RejectedCount is the number of samples the guard rejected, all checks together.
func (b *Batch) RejectedCount() int {
	n := 0
	for _, c := range b.Rejected {
		n += c
	}
	return n
}
