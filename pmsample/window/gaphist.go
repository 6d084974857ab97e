package window

import (
	"sort"

	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// DecodeGapBounds are the upper bounds (seconds) of cupti_pm_decode_gap_seconds: fine around
// the default decode period (100 ms) and up to 200 ms, past which a decode at 1 kHz fills the
// first image (100 ms of room, pmsample's config.go).
var DecodeGapBounds = [...]float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.11, 0.125, 0.15, 0.2, 0.25, 0.5, 1, 2.5, 5, 10}

// GapHistogram counts the gaps between a device's decodes (Batch.DecodeGap).
type GapHistogram struct {
	counts [len(DecodeGapBounds) + 1]uint64 // per bucket, not cumulative; the last is +Inf
	count  uint64
	sum    float64
}

// Observe counts one gap.
func (h *GapHistogram) Observe(seconds float64) {
	h.counts[sort.SearchFloat64s(DecodeGapBounds[:], seconds)]++ // first bound >= seconds
	h.count++
	h.sum += seconds
}

// Value is the histogram in the snapshot's form (cumulative classic buckets).
func (h *GapHistogram) Value() *snapshot.HistogramValue {
	v := &snapshot.HistogramValue{Count: h.count, Sum: h.sum, Bounds: DecodeGapBounds[:], Cumulative: make([]uint64, len(DecodeGapBounds))}
	var c uint64
	for i := range DecodeGapBounds {
		c += h.counts[i]
		v.Cumulative[i] = c
	}
	return v
}

// Count is the number of gaps observed.
func (h *GapHistogram) Count() uint64 { return h.count }
