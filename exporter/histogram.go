package exporter

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"

	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// Native histogram schemas Prometheus accepts for exponential buckets.
const (
	minSchema = -4
	maxSchema = 8
)

// newHistogram returns a const histogram carrying the classic buckets of h
// and, when h.Native, its native buckets as well, so that text scrapes see
// the classic form and protobuf scrapes both.
func newHistogram(desc *prometheus.Desc, h *snapshot.HistogramValue, created time.Time, labelValues []string) (prometheus.Metric, error) {
	if h == nil {
		return nil, errors.New("histogram sample without histogram value")
	}
	if len(h.Bounds) != len(h.Cumulative) {
		return nil, fmt.Errorf("histogram: %d bounds for %d cumulative counts", len(h.Bounds), len(h.Cumulative))
	}
	buckets := make(map[float64]uint64, len(h.Bounds))
	for i, b := range h.Bounds {
		buckets[b] = h.Cumulative[i]
	}
	classic, err := prometheus.NewConstHistogramWithCreatedTimestamp(desc, h.Count, h.Sum, buckets, created, labelValues...)
	if err != nil || !h.Native {
		return classic, err
	}
	if err := validateNative(h); err != nil {
		return nil, err
	}
	spans, deltas := nativeBuckets(h.PositiveBuckets)
	if len(spans) == 0 && h.ZeroThreshold == 0 && h.ZeroCount == 0 {
		// An empty span marks the histogram as native even with no observations.
		spans = []*dto.BucketSpan{{Offset: proto.Int32(0), Length: proto.Uint32(0)}}
	}
	return &dualHistogram{Metric: classic, schema: h.Schema, zeroThreshold: h.ZeroThreshold,
		zeroCount: h.ZeroCount, spans: spans, deltas: deltas}, nil
}

func validateNative(h *snapshot.HistogramValue) error {
	if h.Schema < minSchema || h.Schema > maxSchema {
		return fmt.Errorf("native histogram: schema %d outside [%d, %d]", h.Schema, minSchema, maxSchema)
	}
	total := h.ZeroCount
	for i, n := range h.PositiveBuckets {
		if n < 0 {
			return fmt.Errorf("native histogram: bucket %d has negative count %d", i, n)
		}
		total += uint64(n)
	}
	if total != h.Count && !(math.IsNaN(h.Sum) && total < h.Count) {
		return fmt.Errorf("native histogram: buckets hold %d observations, count is %d", total, h.Count)
	}
	return nil
}

// nativeBuckets encodes index -> count as Prometheus spans and deltas: each
// span starts Offset indexes after the previous span's end (the first after
// index 0), and each delta is the difference to the previous bucket's count.
func nativeBuckets(m map[int]int64) ([]*dto.BucketSpan, []int64) {
	idx := make([]int, 0, len(m))
	for i, n := range m {
		if n != 0 {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return nil, nil
	}
	slices.Sort(idx)
	var spans []*dto.BucketSpan
	deltas := make([]int64, len(idx))
	var prevCount int64
	next := 0 // index after the previous span
	for k, i := range idx {
		if k == 0 || i != idx[k-1]+1 {
			spans = append(spans, &dto.BucketSpan{Offset: proto.Int32(int32(i - next)), Length: proto.Uint32(0)})
		}
		s := spans[len(spans)-1]
		*s.Length++
		next = i + 1
		deltas[k] = m[i] - prevCount
		prevCount = m[i]
	}
	return spans, deltas
}

// dualHistogram adds native buckets to a classic const histogram.
type dualHistogram struct {
	prometheus.Metric
	schema        int32
	zeroThreshold float64
	zeroCount     uint64
	spans         []*dto.BucketSpan
	deltas        []int64
}

func (d *dualHistogram) Write(out *dto.Metric) error {
	if err := d.Metric.Write(out); err != nil {
		return err
	}
	h := out.Histogram
	h.Schema = proto.Int32(d.schema)
	h.ZeroThreshold = proto.Float64(d.zeroThreshold)
	h.ZeroCount = proto.Uint64(d.zeroCount)
	h.PositiveSpan = d.spans
	h.PositiveDelta = d.deltas
	return nil
}
