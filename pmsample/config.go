package pmsample

import (
	"fmt"
	"time"
)

// Defaults of the sampler. docs/pm-sampling.md "Settings" explains each figure, and "First
// measurements" the costs and image sizes the interval and decode period rest on.
const (
	DefaultInterval = time.Millisecond
	// DefaultDecodePeriod is the decode period at intervals of 1 ms and longer, and
	// ShortIntervalDecodePeriod at shorter ones, where none is given (DecodePeriodFor). After
	// each decode the counter data image is re-initialised slot by slot, and it holds a
	// period's samples plus 100 ms of room (imageCapacity): 250 ms pays 1.46 slots a sample
	// against 100 ms's 2.16, 8-10 % less process CPU at 1 ms for 11 MB more; at 100 µs the
	// room is already small beside the period's samples, and 250 ms held 285 MB more for no
	// saving (docs/performance.md "The decode period").
	DefaultDecodePeriod       = 250 * time.Millisecond
	ShortIntervalDecodePeriod = 100 * time.Millisecond
	DefaultHardwareBuffer     = 64 << 20 // bytes; also the minimum
	DefaultBackoffMin         = time.Second
	DefaultBackoffMax         = time.Minute
	// DefaultBusyPoll is how often a device whose counters another client holds tries to take
	// them (for the first minute; then every 5 s): the session is back within about this, plus
	// a session's start, once the client lets them go.
	DefaultBusyPoll = 500 * time.Millisecond
	// PrivilegeRetry is how often a device retries after INSUFFICIENT_PRIVILEGES.
	PrivilegeRetry = 5 * time.Minute
)

// Bounds of the interval and decode period the exporter accepts (CheckTiming).
const (
	MinInterval         = 100 * time.Microsecond // CUPTI decode + evaluation take about 45 % of a core at 10 kHz (docs/pm-sampling.md "First measurements")
	MaxInterval         = time.Second
	MinDecodePeriod     = 10 * time.Millisecond
	MaxDecodePeriod     = 10 * time.Second
	MaxSamplesPerDecode = 20000 // the largest counter data image measured on an H200 (28-33 KB a slot)
)

// DecodePeriodFor is the decode period for a sampling interval: decodePeriod where it is given
// (above 0), else DefaultDecodePeriod at intervals of 1 ms and longer (at least the interval)
// and ShortIntervalDecodePeriod at shorter ones.
func DecodePeriodFor(interval, decodePeriod time.Duration) time.Duration {
	switch {
	case decodePeriod > 0:
		return decodePeriod
	case interval < time.Millisecond:
		return ShortIntervalDecodePeriod
	default:
		return max(DefaultDecodePeriod, interval)
	}
}

// CheckTiming checks a sampling interval and decode period (0: DecodePeriodFor's) against the
// bounds the exporter accepts (pmsample.interval, pmsample.decode_period): each in its range
// and, both in range, at most MaxSamplesPerDecode samples a decode.
func CheckTiming(interval, decodePeriod time.Duration) []error {
	if decodePeriod == 0 {
		decodePeriod = DecodePeriodFor(interval, 0)
	}
	var errs []error
	between := func(name string, d, lo, hi time.Duration) {
		if d < lo || d > hi {
			errs = append(errs, fmt.Errorf("%s must be between %s and %s, got %s", name, lo, hi, d))
		}
	}
	between("pmsample.interval", interval, MinInterval, MaxInterval)
	between("pmsample.decode_period", decodePeriod, MinDecodePeriod, MaxDecodePeriod)
	if len(errs) == 0 { // both in range: do they fit together?
		if n := int64(decodePeriod) / int64(interval); n > MaxSamplesPerDecode {
			errs = append(errs, fmt.Errorf("pmsample.decode_period %s holds %d samples of pmsample.interval %s; at most %d fit the hardware buffer: shorten the decode period to %s or less",
				decodePeriod, n, interval, MaxSamplesPerDecode, interval*MaxSamplesPerDecode))
		}
	}
	return errs
}

// config is the validated configuration of a Sampler; only Options change it.
type config struct {
	interval       time.Duration
	decodePeriod   time.Duration
	hardwareBuffer uint64
	metrics        []string // requested full names; empty: the curated default set
	metricSet      string   // named single-pass set (CUPTI 13.2+)
	multiplex      time.Duration
	dutyOn         time.Duration // sampling time of each duty cycle; 0: sample all the time
	dutyOff        time.Duration // released time of each duty cycle
	devices        []int         // CUDA ordinals; nil: every visible device
	backoffMin     time.Duration
	backoffMax     time.Duration
	busyPoll       time.Duration
	privilegeRetry time.Duration
	rateBackoff    bool          // lengthen the interval when the host cannot sustain the rate
	pipeline       string        // PipelineSerial or PipelineDouble
	stallFloor     time.Duration // least silence taken for a stalled session (tests lower it)
	countersInUse  bool          // New must not read the counter availability (WithCountersInUse)
}

// Option configures a Sampler.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithInterval sets the hardware sampling interval (default 1 ms). A non-positive value keeps the default.
func WithInterval(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.interval = d
		}
	})
}

// WithDecodePeriod sets how often the hardware buffer is decoded. A non-positive value keeps
// the default, which follows the interval (DecodePeriodFor).
func WithDecodePeriod(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.decodePeriod = d
		}
	})
}

// WithHardwareBuffer sets the GPU-side buffer in bytes (default and minimum 64 MiB; smaller
// values are raised to 64 MiB).
func WithHardwareBuffer(bytes uint64) Option {
	return optionFunc(func(c *config) { c.hardwareBuffer = max(bytes, DefaultHardwareBuffer) })
}

// WithMetrics sets the full Perfworks names to sample, in priority order. Empty keeps the
// curated default set.
func WithMetrics(names ...string) Option {
	return optionFunc(func(c *config) { c.metrics = append([]string(nil), names...) })
}

// WithMetricSet samples a named single-pass set; it needs CUPTI 13.2 or later.
func WithMetricSet(name string) Option {
	return optionFunc(func(c *config) { c.metricSet = name })
}

// WithMultiplex lets several single-pass groups take turns on the counters, each for period.
// Zero (the default) samples only the first group.
func WithMultiplex(period time.Duration) Option {
	return optionFunc(func(c *config) { c.multiplex = max(period, 0) })
}

// Bounds of a duty cycle's two phases (WithDutyCycle): a phase shorter than half a second is
// mostly the 150-170 ms a new session takes (Enable, SetConfig) on an H200.
const minDutyPhase = 500 * time.Millisecond

// WithDutyCycle samples only fraction of the time, in cycles of period: each cycle the session
// is held for fraction x period and released (Stop, Disable) for the rest, which is counted as
// lost with reason duty_cycle. A held PM session costs a power-capped workload 0.6-0.95 % of
// its throughput on an H200 (the counters' own draw comes out of the power budget), a released
// one nothing: half the time in 8 s cycles cost 0.49 %. A fraction of 1 or more (the default) samples all the time.
func WithDutyCycle(fraction float64, period time.Duration) Option {
	return optionFunc(func(c *config) {
		c.dutyOn, c.dutyOff = 0, 0
		if fraction < 1 && period > 0 {
			c.dutyOn = time.Duration(fraction * float64(period)).Round(time.Millisecond)
			c.dutyOff = period - c.dutyOn
		}
	})
}

// WithDevices restricts sampling to these CUDA ordinals (default: every visible device).
func WithDevices(ordinals ...int) Option {
	return optionFunc(func(c *config) { c.devices = append([]int(nil), ordinals...) })
}

// WithBackoff sets the first and the largest retry delay after acquisition failures other
// than HARDWARE_BUSY (default 1 s doubling up to 1 min; busy counters: WithBusyPoll).
// Non-positive values keep the defaults.
func WithBackoff(first, maximum time.Duration) Option {
	return optionFunc(func(c *config) {
		if first > 0 {
			c.backoffMin = first
		}
		if maximum > 0 {
			c.backoffMax = maximum
		}
	})
}

// WithBusyPoll sets how often a device whose counters another client holds tries to take them
// during the first minute (default 500 ms; then every 5 s, or this if longer); a non-positive
// value keeps the default.
func WithBusyPoll(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.busyPoll = d
		}
	})
}

// WithCountersInUse tells New that a profiler was found on the host before it started
// (package profilers): New then plans from the chip name without reading the counter
// availability, which each device reads before its first session. On an H100, reading it
// while ncu profiled made ncu fail (docs/gpu-validation.md run BK).
func WithCountersInUse(inUse bool) Option {
	return optionFunc(func(c *config) { c.countersInUse = inUse })
}

// WithRateBackoff makes a device whose decode loop cannot sustain the configured rate (as
// measured during its first second or so of sampling) lengthen its interval to one it
// sustains, instead of losing samples; the effective interval is reported in
// cupti_pm_sampling_interval_seconds. Off by default: the device then keeps the configured
// interval and says in its status (the /readyz reason) what it sustains.
func WithRateBackoff(on bool) Option {
	return optionFunc(func(c *config) { c.rateBackoff = on })
}

// WithPipeline sets how a device's decode loop runs: PipelineSerial (default: decode,
// evaluate and reset on one thread) or PipelineDouble (two counter data images; the device
// thread decodes into one while a second thread evaluates and resets the other). Empty keeps
// the default.
func WithPipeline(mode string) Option {
	return optionFunc(func(c *config) {
		if mode != "" {
			c.pipeline = mode
		}
	})
}

// WithPrivilegeRetry sets how often a device retries after INSUFFICIENT_PRIVILEGES (default 5 min).
func WithPrivilegeRetry(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.privilegeRetry = d
		}
	})
}

// CheckOptions reports whether opts make a valid configuration, with the error New would
// return, so that a command can refuse a configuration before it opens CUPTI.
func CheckOptions(opts ...Option) error {
	_, err := newConfig(opts)
	return err
}

func newConfig(opts []Option) (config, error) {
	c := config{
		interval:       DefaultInterval,
		hardwareBuffer: DefaultHardwareBuffer,
		backoffMin:     DefaultBackoffMin,
		backoffMax:     DefaultBackoffMax,
		busyPoll:       DefaultBusyPoll,
		privilegeRetry: PrivilegeRetry,
		pipeline:       PipelineSerial,
		stallFloor:     time.Second,
	}
	for _, o := range opts {
		o.apply(&c)
	}
	c.decodePeriod = DecodePeriodFor(c.interval, c.decodePeriod)
	if c.backoffMax < c.backoffMin {
		c.backoffMax = c.backoffMin
	}
	if c.decodePeriod < c.interval {
		return c, fmt.Errorf("pm sampling config: decode period %v is shorter than the sampling interval %v", c.decodePeriod, c.interval)
	}
	if c.pipeline != PipelineSerial && c.pipeline != PipelineDouble {
		return c, fmt.Errorf("pm sampling config: pipeline %q: want %s or %s", c.pipeline, PipelineSerial, PipelineDouble)
	}
	if c.metricSet != "" && len(c.metrics) > 0 {
		return c, fmt.Errorf("pm sampling config: give either metrics or a metric set, not both")
	}
	if c.multiplex > 0 && c.multiplex < c.decodePeriod {
		return c, fmt.Errorf("pm sampling config: multiplex period %v is shorter than the decode period %v", c.multiplex, c.decodePeriod)
	}
	if c.dutyOff > 0 {
		switch {
		case c.multiplex > 0:
			return c, fmt.Errorf("pm sampling config: a duty cycle and multiplexing cannot be combined: the released time would skip the groups' turns unevenly")
		case c.dutyOn < minDutyPhase || c.dutyOff < minDutyPhase:
			return c, fmt.Errorf("pm sampling config: duty cycle of %v sampled and %v released: each phase must last at least %v (a new session takes about 150 ms); lengthen the period or move the fraction towards 0.5", c.dutyOn, c.dutyOff, minDutyPhase)
		case c.dutyOn < 2*c.decodePeriod:
			return c, fmt.Errorf("pm sampling config: a duty cycle samples for %v, shorter than two decode periods (%v): lengthen the period", c.dutyOn, 2*c.decodePeriod)
		}
	}
	return c, nil
}

// maxSamples is the capacity of the counter data image: a decode period's samples, room for a
// late decode and 16 more. The room is lateRoom (100 ms) of samples, at most lateRoomSlots,
// and at least imageSlack of a period. Re-initialising the image after each decode costs time
// per slot, not per sample (2.1 us a slot for 4 metrics, about 12 for the default set on an
// H200, whatever the fill), so the room is capped in slots: at 1 kHz it holds 100 ms, at 10 kHz
// a quarter of the period. Under 200 scrapers on an H200 a few decodes came 110-150 ms apart
// (run Y), past the quarter period the image held before. A host that showed it needs more
// gets more: after a decode found more samples than an image holds, the images allocated from
// then on get growSlack of a period more, up to maxGrowth (cuptiDevice.growAfterFull).
func (c config) maxSamples() int { return imageCapacity(c.decodePeriod, c.interval, 0) }

const (
	imageSlack    = 0.25
	lateRoom      = 100 * time.Millisecond
	lateRoomSlots = 250
	growSlack     = 0.625
	maxGrowth     = 1.25
)

// imageCapacity is the image size for a decode period and interval, after growth (periods of
// samples added by full images).
func imageCapacity(decodePeriod, interval time.Duration, growth float64) int {
	perDecode := float64(decodePeriod) / float64(interval)
	room := max(perDecode*imageSlack, min(float64(lateRoom)/float64(interval), lateRoomSlots))
	return int(perDecode+room+perDecode*growth) + 16
}
