package idle

import "time"

// Defaults of a Controller.
const (
	DefaultAfter       = 60 * time.Second
	DefaultPoll        = 20 * time.Millisecond
	DefaultCheck       = 500 * time.Millisecond // a multiple of every decode period (100 and 250 ms), on their timetable (internal/tick)
	DefaultSMThreshold = 0.1                    // percent of peak
	DefaultPowerRise   = 20                     // watts over the lowest instant power since the release
)

// Bounds the exporter accepts for the poll of a released GPU (pmsample.idle_poll) and the
// power rise that takes its session back (pmsample.idle_power_rise; 0 turns it off).
const (
	MinPoll      = time.Millisecond
	MaxPoll      = time.Second
	MinPowerRise = 5   // watts
	MaxPowerRise = 500 // watts
)

// Option configures a Controller.
type Option func(*config)

type config struct {
	after       time.Duration
	poll        time.Duration
	check       time.Duration
	smThreshold float64
	gpm         bool    // read GPM while released (gpm.go)
	powerRise   float64 // watts; 0: the instant power is not read (power.go)
	now         func() time.Time
}

func newConfig(opts []Option) config {
	c := config{after: DefaultAfter, poll: DefaultPoll, check: DefaultCheck, smThreshold: DefaultSMThreshold, gpm: true, powerRise: DefaultPowerRise, now: time.Now}
	for _, o := range opts {
		o(&c)
	}
	c.check = max(c.check, c.poll)
	return c
}

// WithAfter sets how long a GPU must stay idle before its session is released (default
// 60 s); a non-positive value keeps the default (to turn release off, build no Controller).
func WithAfter(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.after = d
		}
	}
}

// WithPoll sets how often a released GPU is polled for activity (default 20 ms); a
// non-positive value keeps the default.
func WithPoll(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.poll = d
		}
	}
}

// WithCheck sets how often a sampled GPU is checked for idleness (default 500 ms, never
// below the poll interval); a non-positive value keeps the default.
func WithCheck(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.check = d
		}
	}
}

// WithSMThreshold sets the SM active ratio, in percent of peak, below which a PM batch
// counts as idle (default 0.1); a negative value keeps the default.
func WithSMThreshold(pct float64) Option {
	return func(c *config) {
		if pct >= 0 {
			c.smThreshold = pct
		}
	}
}

// WithGPM sets whether a released GPU's GPM SM utilisation is read at every poll (default on,
// where the GPU has GPM: Hopper and newer): work shows within one poll, where NVML's
// utilisation and clock-event signals took about 300 ms on an H200.
func WithGPM(on bool) Option {
	return func(c *config) { c.gpm = on }
}

// WithPowerRise sets the rise of a released GPU's instant power draw, in watts over the lowest
// reading since the release, that takes the session back (default 20; 0 turns the power signal
// off, a negative value keeps the default). On an H200 the power rose 20 W 45-90 ms after a
// launch, sooner than GPM, and stayed within 1 W of its level while idle.
func WithPowerRise(watts float64) Option {
	return func(c *config) {
		if watts >= 0 {
			c.powerRise = watts
		}
	}
}
