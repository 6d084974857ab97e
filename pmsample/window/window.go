// Package window holds the statistics the PM aggregator (aggregate.Aggregator) keeps per device
// and metric: time-weighted buckets of one batch, windows of the last span of sample time
// (mean, max, min, covered time) and the histogram of decode gaps.
package window

import "math"

// Bucket holds the statistics of one gauge over the samples of one batch. Its times are the
// start of the first and the end of the last sample (ns).
type Bucket struct {
	start, end uint64
	sumVD      float64 // sum of value x duration (ns)
	dur        float64 // sum of durations (ns)
	max, min   float64
}

// NewBucket is an empty bucket.
func NewBucket() Bucket { return Bucket{max: math.Inf(-1), min: math.Inf(1)} }

// Add folds one sample in; the weight is its duration.
func (b *Bucket) Add(start, end uint64, v float64) {
	if b.dur == 0 || start < b.start {
		b.start = start
	}
	b.end = max(b.end, end)
	d := float64(end - start)
	b.sumVD += v * d
	b.dur += d
	b.max = max(b.max, v)
	b.min = min(b.min, v)
}

// Window keeps the buckets of the last span of sample time. A bucket leaves the window once
// its last sample ended at or before the newest end minus the span, so the window's
// granularity is one batch (one decode, 100 ms by default).
type Window struct {
	buckets []Bucket // oldest first
}

// Add appends a batch's bucket; an empty one is left out.
func (w *Window) Add(b Bucket) {
	if b.dur > 0 {
		w.buckets = append(w.buckets, b)
	}
}

// Expire drops the buckets that ended at or before cutoff (ns).
func (w *Window) Expire(cutoff uint64) {
	i := 0
	for i < len(w.buckets) && w.buckets[i].end <= cutoff {
		i++
	}
	if i > 0 {
		w.buckets = append(w.buckets[:0], w.buckets[i:]...)
	}
}

// Stats returns the time-weighted mean, max, min and the covered duration (ns) of the window;
// ok is false when it is empty.
func (w *Window) Stats() (mean, hi, lo, dur float64, ok bool) {
	if len(w.buckets) == 0 {
		return 0, 0, 0, 0, false
	}
	hi, lo = math.Inf(-1), math.Inf(1)
	var sum float64
	for _, b := range w.buckets {
		sum += b.sumVD
		dur += b.dur
		hi = max(hi, b.max)
		lo = min(lo, b.min)
	}
	return sum / dur, hi, lo, dur, true
}
