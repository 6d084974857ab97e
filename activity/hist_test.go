package activity

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// nativeBuckets expands dto spans and deltas into index -> count.
func nativeBuckets(spans []*dto.BucketSpan, deltas []int64) map[int]int64 {
	out := make(map[int]int64)
	idx, d, count := 0, 0, int64(0)
	for _, s := range spans {
		idx += int(s.GetOffset())
		for range s.GetLength() {
			count += deltas[d]
			d++
			if count != 0 {
				out[idx] = count
			}
			idx++
		}
	}
	return out
}

// TestHistogramMatchesClientGolang observes the same values into our histogram and into a
// client_golang histogram with NativeHistogramBucketFactor 1.1 and compares every bucket.
func TestHistogramMatchesClientGolang(t *testing.T) {
	ref := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "ref", Help: "ref", Buckets: FineBuckets,
		NativeHistogramBucketFactor: 1.1, NativeHistogramMaxBucketNumber: 10000,
	})
	h := newHistogram(FineBuckets, 10000)
	rng := rand.New(rand.NewPCG(1, 2))
	values := []float64{0, 1e-9, 1e-6, 2.5e-6, 0.5, 1, 2, 0.25, 10, 11, math.Exp2(-20), math.Exp2(0.125)}
	for _, b := range schema3Bounds { // exact native bucket boundaries
		values = append(values, b, b*8, b/1024)
	}
	for range 20000 {
		values = append(values, math.Exp(rng.Float64()*20-16)) // ~1e-7 .. 50 s
	}
	for _, v := range values {
		ref.Observe(v)
		h.observe(v)
	}
	var m dto.Metric
	if err := ref.Write(&m); err != nil {
		t.Fatal(err)
	}
	rh := m.GetHistogram()
	got := h.value()
	if got.Count != rh.GetSampleCount() || math.Abs(got.Sum-rh.GetSampleSum()) > 1e-9*rh.GetSampleSum() {
		t.Errorf("count/sum = %d/%g, client_golang %d/%g", got.Count, got.Sum, rh.GetSampleCount(), rh.GetSampleSum())
	}
	for i, b := range rh.GetBucket() {
		if got.Bounds[i] != b.GetUpperBound() || got.Cumulative[i] != b.GetCumulativeCount() {
			t.Errorf("classic bucket %d: le=%g count %d, client_golang le=%g count %d",
				i, got.Bounds[i], got.Cumulative[i], b.GetUpperBound(), b.GetCumulativeCount())
		}
	}
	if got.Schema != rh.GetSchema() || got.ZeroCount != rh.GetZeroCount() || got.ZeroThreshold != rh.GetZeroThreshold() {
		t.Errorf("schema/zero = %d/%d/%g, client_golang %d/%d/%g", got.Schema, got.ZeroCount, got.ZeroThreshold,
			rh.GetSchema(), rh.GetZeroCount(), rh.GetZeroThreshold())
	}
	want := nativeBuckets(rh.GetPositiveSpan(), rh.GetPositiveDelta())
	if len(want) != len(got.PositiveBuckets) {
		t.Errorf("%d native buckets, client_golang %d", len(got.PositiveBuckets), len(want))
	}
	for k, v := range want {
		if got.PositiveBuckets[k] != v {
			t.Errorf("native bucket %d: %d, client_golang %d", k, got.PositiveBuckets[k], v)
		}
	}
}

// TestHistogramHalvesResolution checks that a histogram whose native span passes the cap
// lowers its schema and keeps every observation, in the bucket that contains it.
func TestHistogramHalvesResolution(t *testing.T) {
	h := newHistogram(FineBuckets, 16)
	vals := []float64{1e-6, 1e-3, 1, 1000}
	for _, v := range vals {
		h.observe(v)
	}
	got := h.value()
	if got.Schema >= nativeSchema {
		t.Fatalf("schema %d, want below %d after spanning 30 octaves with a 16-bucket cap", got.Schema, nativeSchema)
	}
	if n := len(h.native); n > 16 {
		t.Errorf("span %d buckets > cap 16", n)
	}
	var total int64
	base := math.Exp2(math.Exp2(-float64(got.Schema)))
	for _, v := range vals {
		k := int(math.Ceil(math.Log(v) / math.Log(base)))
		if got.PositiveBuckets[k] == 0 {
			t.Errorf("value %g: bucket %d empty at schema %d (%v)", v, k, got.Schema, got.PositiveBuckets)
		}
	}
	for _, c := range got.PositiveBuckets {
		total += c
	}
	if total != int64(len(vals)) {
		t.Errorf("native buckets hold %d observations, want %d", total, len(vals))
	}
}
