package pmsample

import "math"

// bucket holds the statistics of one gauge over the samples of one batch. Its times are the
// start of the first and the end of the last sample (ns).
type bucket struct {
	start, end uint64
	sumVD      float64 // sum of value x duration (ns)
	dur        float64 // sum of durations (ns)
	max, min   float64
}

func newBucket() bucket { return bucket{max: math.Inf(-1), min: math.Inf(1)} }

// add folds one sample in; the weight is its duration.
func (b *bucket) add(start, end uint64, v float64) {
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

// window keeps the buckets of the last span of sample time. A bucket leaves the window once
// its last sample ended at or before the newest end minus the span, so the window's
// granularity is one batch (one decode, 100 ms by default).
type window struct {
	buckets []bucket // oldest first
}

func (w *window) add(b bucket) {
	if b.dur > 0 {
		w.buckets = append(w.buckets, b)
	}
}

// expire drops the buckets that ended at or before cutoff (ns).
func (w *window) expire(cutoff uint64) {
	i := 0
	for i < len(w.buckets) && w.buckets[i].end <= cutoff {
		i++
	}
	if i > 0 {
		w.buckets = append(w.buckets[:0], w.buckets[i:]...)
	}
}

// stats returns the time-weighted mean, max, min and the covered duration (ns) of the window;
// ok is false when it is empty.
func (w *window) stats() (mean, hi, lo, dur float64, ok bool) {
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
