package activity

import (
	"math"
	"sort"

	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// Histogram settings. They match what client_golang's prometheus.NewHistogram does with
// NativeHistogramBucketFactor 1.1 (schema 3), the default zero threshold and
// NativeHistogramMaxBucketNumber, except that the bucket cap bounds the span of native
// buckets (highest index - lowest index + 1) rather than the number of populated ones.
const (
	nativeSchema        = 3                     // largest schema whose growth factor (1.0905) is <= 1.1
	nativeZeroThreshold = 2.938735877055719e-39 // 2^-128, client_golang's DefNativeHistogramZeroThreshold
	nativeMinSchema     = -4                    // resolution is never reduced below this
	defaultMaxBuckets   = 160                   // native bucket span cap (see WithMaxNativeBuckets)
)

// DefaultBuckets are the classic bucket upper bounds of the duration histograms, seconds:
// 9 bounds (12 series per histogram with +Inf, _sum and _count) from 10 µs to 1 s, closest
// where kernels and copies mostly fall. Native buckets keep the full resolution.
var DefaultBuckets = []float64{1e-5, 5e-5, 1e-4, 5e-4, 1e-3, 5e-3, 1e-2, 0.1, 1}

// FineBuckets are 22 bounds from 1 µs to 10 s in 1-2.5-5 steps (the default before 0.x):
// about twice the series of DefaultBuckets per histogram.
var FineBuckets = []float64{
	1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4,
	1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
}

// schema3Bounds[i] = 2^(i/8 - 1), rounded as client_golang's nativeHistogramBounds[3]
// (math.Exp2 differs in the last bit for some): the fractions (from math.Frexp) that split
// one power of two into the 8 buckets of schema 3.
var schema3Bounds = []float64{
	0.5, 0.5452538663326288, 0.5946035575013605, 0.6484197773255048,
	0.7071067811865475, 0.7711054127039704, 0.8408964152537144, 0.9170040432046711,
}

// histogram is a classic + native histogram of non-negative observations. It is not
// safe for concurrent use: the Aggregator guards it with its mutex, which makes an
// observation a few plain increments instead of client_golang's atomics and sync.Map.
type histogram struct {
	count     uint64
	sum       float64
	bounds    []float64 // classic upper bounds, shared and never modified
	classic   []uint64  // per classic bucket (not cumulative), len(bounds)+1 (last = +Inf)
	schema    int32
	zeroCount uint64
	offset    int      // native index of native[0]
	native    []uint64 // dense native buckets at schema
	max       int      // cap on len(native)
}

func newHistogram(bounds []float64, maxBuckets int) *histogram {
	return &histogram{
		bounds:  bounds,
		classic: make([]uint64, len(bounds)+1),
		schema:  nativeSchema,
		max:     maxBuckets,
	}
}

// observe adds one value (seconds, >= 0).
func (h *histogram) observe(v float64) {
	h.count++
	h.sum += v
	h.classic[sort.SearchFloat64s(h.bounds, v)]++
	if v <= nativeZeroThreshold {
		h.zeroCount++
		return
	}
	frac, exp := math.Frexp(v)
	k := sort.SearchFloat64s(schema3Bounds, frac) + (exp-1)<<nativeSchema
	h.addNative(reduceKey(k, nativeSchema-h.schema))
}

// reduceKey maps a native bucket index to the index d schemas lower: ceil(k / 2^d).
func reduceKey(k int, d int32) int {
	return (k + 1<<d - 1) >> d
}

func (h *histogram) addNative(k int) {
	if len(h.native) == 0 {
		h.offset = k
		h.native = append(h.native[:0], 1)
		return
	}
	lo, hi := h.offset, h.offset+len(h.native)-1
	if k >= lo && k <= hi {
		h.native[k-lo]++
		return
	}
	lo, hi = min(lo, k), max(hi, k)
	for hi-lo+1 > h.max && h.schema > nativeMinSchema {
		h.halve()
		k = reduceKey(k, 1)
		lo, hi = h.offset, h.offset+len(h.native)-1
		lo, hi = min(lo, k), max(hi, k)
	}
	if k < h.offset {
		grown := make([]uint64, hi-lo+1, max(hi-lo+1, 2*len(h.native)))
		copy(grown[h.offset-lo:], h.native)
		h.native, h.offset = grown, lo
	}
	for k-h.offset >= len(h.native) {
		h.native = append(h.native, 0)
	}
	h.native[k-h.offset]++
}

// halve lowers the schema by one, merging each pair of neighbouring buckets.
func (h *histogram) halve() {
	lo := reduceKey(h.offset, 1)
	hi := reduceKey(h.offset+len(h.native)-1, 1)
	merged := make([]uint64, hi-lo+1)
	for i, c := range h.native {
		merged[reduceKey(h.offset+i, 1)-lo] += c
	}
	h.native, h.offset = merged, lo
	h.schema--
}

// value copies the histogram into the snapshot model.
func (h *histogram) value() *snapshot.HistogramValue {
	v := &snapshot.HistogramValue{
		Count:         h.count,
		Sum:           h.sum,
		Bounds:        h.bounds, // shared and never modified
		Cumulative:    make([]uint64, len(h.bounds)),
		Native:        true,
		Schema:        h.schema,
		ZeroThreshold: nativeZeroThreshold,
		ZeroCount:     h.zeroCount,
	}
	var cum uint64
	for i := range v.Cumulative {
		cum += h.classic[i]
		v.Cumulative[i] = cum
	}
	n := 0
	for _, c := range h.native {
		if c != 0 {
			n++
		}
	}
	v.PositiveBuckets = make(map[int]int64, n)
	for i, c := range h.native {
		if c != 0 {
			v.PositiveBuckets[h.offset+i] = int64(c)
		}
	}
	return v
}
