package pmsample

import (
	"errors"
	"fmt"
	"time"

	"github.com/cupti-exporter/cupti-exporter/internal/settings"
)

// Config is the sampler's part of the configuration's pmsample section: what is sampled, how
// often and for how long (package idle and package profilers own the section's other keys;
// pipeline.Config composes them). Each field is a flag and a line of docs/configuration.md.
type Config struct {
	Enabled      bool              `yaml:"enabled" help:"Sample device counters with CUPTI PM Sampling."`
	Interval     settings.Duration `yaml:"interval" help:"Hardware sampling interval (GPU time), 100us to 1s."`
	DecodePeriod settings.Duration `yaml:"decode_period" help:"How often the hardware buffer is decoded, 10ms to 10s and at most 20000 sampling intervals; 0 (the default): 250ms at intervals of 1ms and longer (at least the interval), 100ms at shorter ones."`
	Metrics      []string          `yaml:"metrics" help:"Perfworks metrics to sample (comma separated); empty: the curated set."`
	MetricSet    string            `yaml:"metric_set" help:"Named single-pass metric set of CUPTI 13.2+ (listed by metrics plan) instead of pmsample.metrics."`
	Window       settings.Duration `yaml:"window" help:"Window over which gauge mean/max/min are computed."`
	Multiplex    settings.Duration `yaml:"multiplex" help:"Rotate between metric groups that do not fit one pass every this long; 0: drop what does not fit."`
	DutyCycle    float64           `yaml:"duty_cycle" help:"Share of the time the PM session is held, above 0 and at most 1; below 1 it is released for the rest of every pmsample.duty_period (counted as lost, reason duty_cycle). A held session costs a power-capped workload 0.6-0.95 % of its throughput on an H200; released, nothing (docs/performance.md)."`
	DutyPeriod   settings.Duration `yaml:"duty_period" help:"Length of one duty cycle (1s to 1h); each sampled and released phase must last at least 500ms."`
}

// LoopConfig is how each device's decode loop runs (the pmsample section's pipeline and
// backoff).
type LoopConfig struct {
	Pipeline string `yaml:"pipeline" help:"How each device's decode loop runs: serial (decode, evaluate and reset on one thread) or double (two counter data images; a second thread evaluates and resets one while the other is decoded into). double sustained 10 kHz with the default set on an H200 (docs/performance.md); use it below 200us."`
	Backoff  bool   `yaml:"backoff" help:"When the host cannot decode and evaluate samples as fast as the interval asks (measured in the first second), lengthen the interval to one it sustains instead of losing samples; the effective interval is cupti_pm_sampling_interval_seconds."`
}

// DefaultConfig is the sampler's part of the built-in configuration.
func DefaultConfig() Config {
	return Config{
		Enabled:      true,
		Interval:     settings.Duration(DefaultInterval),
		DecodePeriod: 0,                                   // follows the interval (DecodePeriodFor)
		Window:       settings.Duration(15 * time.Second), // the served window; aggregate.New's own default is aggregate.DefaultWindow
		DutyCycle:    1,
		DutyPeriod:   settings.Duration(10 * time.Second),
	}
}

// DefaultLoopConfig is the decode loop's part of the built-in configuration.
func DefaultLoopConfig() LoopConfig { return LoopConfig{Pipeline: PipelineSerial} }

// Validate checks the values the flags and YAML accept but the sampler cannot use; the phases
// of a duty cycle are judged as New would, once the rest is valid.
func (c Config) Validate() []error {
	errs := CheckTiming(time.Duration(c.Interval), time.Duration(c.DecodePeriod))
	if c.Window <= 0 {
		errs = append(errs, fmt.Errorf("pmsample.window must be positive, got %s", c.Window))
	}
	if c.MetricSet != "" && len(c.Metrics) > 0 {
		errs = append(errs, errors.New("pmsample.metric_set and pmsample.metrics exclude each other: give one"))
	}
	if c.Multiplex < 0 {
		errs = append(errs, fmt.Errorf("pmsample.multiplex must not be negative, got %s", c.Multiplex))
	}
	switch d := c.DutyCycle; {
	case !(d > 0 && d <= 1): // !(…) also refuses NaN
		errs = append(errs, fmt.Errorf("pmsample.duty_cycle must be above 0 and at most 1 (1 samples all the time), got %g", d))
	case c.DutyPeriod < settings.Duration(time.Second) || c.DutyPeriod > settings.Duration(time.Hour):
		errs = append(errs, fmt.Errorf("pmsample.duty_period must be between 1s and 1h, got %s", c.DutyPeriod))
	case d < 1 && len(errs) == 0: // the rest (phase lengths, multiplexing) is the sampler's to judge
		if err := CheckOptions(c.Options()...); err != nil {
			errs = append(errs, fmt.Errorf("pmsample.duty_cycle %g of pmsample.duty_period %s: %w", d, c.DutyPeriod, err))
		}
	}
	return errs
}

// Validate checks the decode loop's values.
func (c LoopConfig) Validate() []error {
	if c.Pipeline != PipelineSerial && c.Pipeline != PipelineDouble {
		return []error{fmt.Errorf("pmsample.pipeline must be serial or double, got %q", c.Pipeline)}
	}
	return nil
}

// Options are the sampler's options of c.
func (c Config) Options() []Option {
	opts := []Option{
		WithInterval(time.Duration(c.Interval)),
		WithDecodePeriod(time.Duration(c.DecodePeriod)),
		WithMultiplex(time.Duration(c.Multiplex)),
		WithDutyCycle(c.DutyCycle, time.Duration(c.DutyPeriod)),
	}
	if len(c.Metrics) > 0 {
		opts = append(opts, WithMetrics(c.Metrics...))
	}
	if c.MetricSet != "" {
		opts = append(opts, WithMetricSet(c.MetricSet))
	}
	return opts
}

// Options are the sampler's options of c.
func (c LoopConfig) Options() []Option {
	return []Option{WithRateBackoff(c.Backoff), WithPipeline(c.Pipeline)}
}
