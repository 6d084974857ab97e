// Package guard checks PM samples against what the hardware can produce, before any outlet:
// the live sampler screens each decoded sample (pmsample), a replay each recorded one
// (recording). bounds.go holds the peak memory and link rates per chip it bounds bytes by.
package guard

import (
	"strings"
	"time"

	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"

	"github.com/cupti-exporter/cupti-exporter/mapping"
)

// Guard checks every sample against what the hardware can produce before it reaches the
// window, attribution, a recording or OTLP (docs/pm-sampling.md "Sample guard"):
//
//   - a span: positive and within [interval/spanSlack, interval×spanSlack] of the hardware
//     interval (GPU-time samples last the interval to the microsecond; SYSCLK ones vary with the
//     clock, at most about 2×);
//   - a pct_of_peak submetric: within [0, 100]; up to pctTolerance points outside is rounding
//     and is clamped to the range, further is impossible;
//   - every value: not negative (beyond the same rounding for percentages);
//   - DRAM, PCIe and NVLink bytes: at most what the chip's fastest memory or link moves in the
//     sample's span (bounds.go), with rateSlack for counting granularity.
//
// A sample that fails any check is rejected whole (its other values came from the same
// counters) and counted by the first check it failed.
type Guard struct {
	limits []limit
	rates  linkRates
}

// Rounding and slack of the checks; documented with the guard in docs/pm-sampling.md.
const (
	pctTolerance = 1.0  // percentage points beyond [0, 100] clamped as rounding
	rateSlack    = 1.10 // bytes beyond the chip's peak rate × span, for counting granularity
	spanSlack    = 16   // a sample may last from interval/16 to 16 × interval
)

// LostOutOfRange is the reason (pmdata.LostReasons) of the time of a rejected sample.
const LostOutOfRange = "out_of_range"

// SpanCheck names the span check in rejection counts (no metric is called that).
const SpanCheck = "span"

type limitKind int

const (
	limitNonNegative    limitKind = iota // any counter or rate
	limitPercent                         // pct_of_peak_*: 0 to 100
	limitBytes                           // bytes of a memory or link: at most rate × span
	limitBytesPerSecond                  // the same as a rate
)

type limit struct {
	kind limitKind
	link linkKind // for limitBytes and limitBytesPerSecond
}

// New returns the guard for samples of metrics (full Perfworks names, in Batch.Metrics
// order) on a device of chip ("" or an unknown chip: bounds of the fastest chip known).
func New(chip string, metrics []string) *Guard {
	g := &Guard{limits: make([]limit, len(metrics)), rates: ratesOf(chip)}
	for i, m := range metrics {
		g.limits[i] = limitOf(m)
	}
	return g
}

// limitOf classifies a metric by its name: the submetric tells percentages and rates, the
// unit and quantity tell bytes of a memory or a link.
func limitOf(metric string) limit {
	n, err := mapping.ParseName(metric)
	if err != nil {
		return limit{kind: limitNonNegative}
	}
	if strings.HasPrefix(n.Submetric, "pct_of_peak") {
		return limit{kind: limitPercent}
	}
	link, ok := linkOf(n.Unit)
	if !ok || !strings.Contains(n.Quantity, "bytes") || n.Rollup != "sum" {
		return limit{kind: limitNonNegative}
	}
	switch n.Submetric {
	case "":
		return limit{kind: limitBytes, link: link}
	case "per_second":
		return limit{kind: limitBytesPerSecond, link: link}
	}
	return limit{kind: limitNonNegative}
}

// Check tests one sample of interval (0: unknown, the span is only checked positive). It
// clamps percentages within the rounding tolerance in place and returns -1 when the sample
// may be delivered, otherwise the index of the first metric that failed, or len(vals) for
// the span.
func (g *Guard) Check(start, end uint64, interval time.Duration, vals []float64) int {
	if end <= start {
		return len(vals)
	}
	span := float64(end - start)
	if iv := float64(interval.Nanoseconds()); iv > 0 && (span > iv*spanSlack || span*spanSlack < iv) {
		return len(vals)
	}
	for i, v := range vals {
		if i >= len(g.limits) {
			break
		}
		l := g.limits[i]
		switch l.kind {
		case limitPercent:
			switch {
			case v >= 0 && v <= 100:
			case v < 0 && v >= -pctTolerance:
				vals[i] = 0
			case v > 100 && v <= 100+pctTolerance:
				vals[i] = 100
			default:
				return i
			}
		case limitBytes:
			if v < 0 || v > g.rates.of(l.link)*rateSlack*span/1e9 {
				return i
			}
		case limitBytesPerSecond:
			if v < 0 || v > g.rates.of(l.link)*rateSlack {
				return i
			}
		default:
			if v < 0 {
				return i
			}
		}
	}
	return -1
}

// Failed names what Check's result bad refers to: a metric of metrics, or SpanCheck.
func Failed(metrics []string, bad int) string {
	if bad >= 0 && bad < len(metrics) {
		return metrics[bad]
	}
	return SpanCheck
}

// Screen applies g to every sample of b (a replayed recording, which may come from an
// exporter without the guard, or from anywhere): rejected samples leave b.Samples, are
// counted in b.Rejected and their time is lost as out_of_range. b.Samples is replaced, not
// edited: a replayed batch shares it with the reader.
func (g *Guard) Screen(b *pmdata.Batch) {
	var kept []pmdata.Sample
	for i, s := range b.Samples {
		bad := -1
		if len(s.Values) == len(b.Metrics) { // others are the aggregator's invalid samples
			bad = g.Check(s.Start, s.End, b.Interval, s.Values)
		}
		if bad < 0 {
			if kept != nil {
				kept = append(kept, s)
			}
			continue
		}
		if kept == nil {
			kept = append(make([]pmdata.Sample, 0, len(b.Samples)), b.Samples[:i]...)
		}
		b.Reject(Failed(b.Metrics, bad))
		if s.End > s.Start {
			iv := max(uint64(b.Interval.Nanoseconds()), 1)
			b.Lost = append(b.Lost, pmdata.Loss{Reason: LostOutOfRange, Start: s.Start, End: s.End, Samples: float64(s.End-s.Start) / float64(iv)})
		}
	}
	if kept != nil {
		b.Samples = kept
	}
}
