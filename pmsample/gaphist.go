package pmsample

import (
	"sort"

	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// decodeGapBounds are the upper bounds (seconds) of cupti_pm_decode_gap_seconds: fine around
// the default decode period (100 ms) and up to 200 ms, past which a decode at 1 kHz fills the
// first image (100 ms of room, config.go).
var decodeGapBounds = [...]float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.11, 0.125, 0.15, 0.2, 0.25, 0.5, 1, 2.5, 5, 10}

// gapHistogram counts the gaps between a device's decodes (Batch.DecodeGap).
type gapHistogram struct {
	counts [len(decodeGapBounds) + 1]uint64 // per bucket, not cumulative; the last is +Inf
	count  uint64
	sum    float64
}

func (h *gapHistogram) observe(seconds float64) {
	h.counts[sort.SearchFloat64s(decodeGapBounds[:], seconds)]++ // first bound >= seconds
	h.count++
	h.sum += seconds
}

// value is the histogram in the snapshot's form (cumulative classic buckets).
func (h *gapHistogram) value() *snapshot.HistogramValue {
	v := &snapshot.HistogramValue{Count: h.count, Sum: h.sum, Bounds: decodeGapBounds[:], Cumulative: make([]uint64, len(decodeGapBounds))}
	var c uint64
	for i := range decodeGapBounds {
		c += h.counts[i]
		v.Cumulative[i] = c
	}
	return v
}
