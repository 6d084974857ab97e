package pmsample

import (
	"fmt"
	"time"

	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
)

// Admission: a device's decode loop decodes, evaluates and resets one sample after another on
// one thread (with the double pipeline, decode on one and the rest on another: the slower
// sets the pace), so it sustains at most 1 / (its cost per sample) samples a second; above that
// the counter data image fills and samples are lost (issue 14: 100 us with the 9-metric set
// on an H200 delivered 4.85 kHz). The runner measures the cost of its first decodes (wall
// time of decode + evaluation + reset over the samples they delivered) and compares the
// configured rate with what it sustains; it decides again whenever the metric set changes.
const (
	admissionMinBatches = 3
	admissionSamples    = 1000        // decide once this many samples were measured...
	admissionWall       = time.Second // ...or this much wall time passed since the first
	// admissionLoad is the share of the decode thread the configured rate may take; above it
	// a late decode fills the image.
	admissionLoad = 0.9
	// backoffLoad is the share a backed-off interval aims at: the image holds 1.25 decode
	// periods, so a decode that runs late by more than the headroom fills it.
	backoffLoad = 0.6
)

type admission struct {
	batches int
	samples int
	cost    time.Duration
	first   time.Time
	decided bool
}

// reset starts measuring again (a new metric set).
func (a *admission) reset() { *a = admission{} }

// verdict is the outcome of admission for one device.
type verdict struct {
	perSample   time.Duration // measured decode + evaluate + reset time per sample
	sustainable float64       // samples a second the decode thread sustains at admissionLoad
	overloaded  bool
	suggested   time.Duration // an interval the thread sustains at backoffLoad, rounded up to 10 us
	what        string        // what perSample covers
}

// observe adds one batch's decode time and sample count; it returns a verdict once enough was
// measured, and only once.
func (a *admission) observe(now time.Time, cost time.Duration, samples int, interval time.Duration) (verdict, bool) {
	if a.decided || samples == 0 || cost <= 0 {
		return verdict{}, false
	}
	if a.first.IsZero() {
		a.first = now
	}
	a.batches++
	a.samples += samples
	a.cost += cost
	if a.batches < admissionMinBatches || (a.samples < admissionSamples && now.Sub(a.first) < admissionWall) {
		return verdict{}, false
	}
	a.decided = true
	per := a.cost / time.Duration(a.samples)
	v := verdict{perSample: per, sustainable: admissionLoad / per.Seconds()}
	rate := 1 / interval.Seconds()
	v.overloaded = rate > v.sustainable
	step := 10 * time.Microsecond
	v.suggested = (time.Duration(float64(per)/backoffLoad) + step - 1) / step * step
	v.suggested = max(v.suggested, interval)
	return v, true
}

func (v verdict) String() string {
	what := v.what
	if what == "" {
		what = "decode, evaluation and reset on one thread"
	}
	return fmt.Sprintf("%s per sample (%s) sustains about %.0f samples/s", v.perSample.Round(100*time.Nanosecond), what, v.sustainable)
}

// admitBatch feeds admission with one decode; once it decides, it logs the verdict, and an
// overloaded device either says so in its status (the /readyz reason) or, with
// WithRateBackoff, backs off to a sustainable interval at the next decode.
func (r *runner) admitBatch(cost time.Duration, samples int) {
	v, ok := r.adm.observe(time.Now(), cost, samples, r.interval)
	if !ok {
		return
	}
	if r.pipe != nil {
		v.what = "the slower of decode and evaluation+reset, on two threads"
	}
	rate := 1 / r.interval.Seconds()
	if !v.overloaded {
		r.log.Info("pm sampling rate sustainable", "interval", r.interval, "rate_hz", rate,
			"decode_period", r.s.cfg.decodePeriod, "per_sample", v.perSample, "sustainable_hz", int(v.sustainable))
		if r.interval == r.s.cfg.interval && r.admit != "" { // a backed-off device keeps saying so
			r.admit = ""
			r.setState(pmdata.StateSampling, "")
		}
		return
	}
	if r.s.cfg.rateBackoff {
		r.verdict = v
		r.backoffTo.Store(int64(v.suggested))
		return
	}
	r.admit = fmt.Sprintf("sampling every %s (%.0f samples/s) is more than this host sustains: %s; samples are being lost "+
		"(cupti_pm_samples_lost_total); set --pmsample.interval=%s or --pmsample.backoff",
		r.interval, rate, v, v.suggested)
	r.log.Warn("pm sampling rate not sustainable", "interval", r.interval, "rate_hz", rate, "per_sample", v.perSample,
		"sustainable_hz", int(v.sustainable), "suggested_interval", v.suggested)
	r.setState(pmdata.StateSampling, r.admit)
}

// backOff drains the session, restarts it at the interval admission chose and measures again.
func (r *runner) backOff(sink func(pmdata.Batch)) error {
	r.drain(sink) // waits for the evaluator: r.verdict is settled
	to, from := time.Duration(r.backoffTo.Swap(0)), r.interval
	r.release()
	r.interval = to
	if is, ok := r.pm.(intervalSetter); ok {
		is.setInterval(to)
	}
	r.loss.iv = uint64(to.Nanoseconds())
	r.loss.open("backoff", r.now())
	r.admit = fmt.Sprintf("backed off from every %s to every %s (%.0f samples/s): %s", from, to, 1/to.Seconds(), r.verdict)
	r.log.Warn("pm sampling backed off to a sustainable interval", "from", from, "to", to,
		"per_sample", r.verdict.perSample, "sustainable_hz", int(r.verdict.sustainable))
	r.setState(pmdata.StateSampling, r.admit)
	r.adm.reset()
	return r.acquireKeepGroup()
}
