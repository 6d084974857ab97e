package idle

import (
	"fmt"
	"time"

	"github.com/cupti-exporter/cupti-exporter/internal/settings"
)

// Config is idle release's part of the configuration's pmsample section (docs/pm-sampling.md
// "Idle release"); pipeline.Config composes it into that section.
type Config struct {
	ReleaseAfter settings.Duration `yaml:"idle_release_after" help:"Release a GPU's PM session after it has been idle this long (NVML utilisation 0, no kernels, SM active < 0.1 %) and take it back on the first sign of work; 0: never release. Needs NVML (health.library)."`
	Poll         settings.Duration `yaml:"idle_poll" help:"How often a released GPU is polled through NVML for activity (1ms to 1s)."`
	GPM          bool              `yaml:"idle_gpm" help:"While a GPU is released, also read its GPM SM utilisation (Hopper and newer) at every poll: work shows within one poll, where NVML's utilisation and clock-event reasons lag by about 300 ms."`
	PowerRise    float64           `yaml:"idle_power_rise" help:"While a GPU is released, take its session back when its instant power draw rises this many watts above the lowest reading since the release (5 to 500; 0: power not read). The power rises before GPM sees the work."`
}

// DefaultConfig is idle release's part of the built-in configuration.
func DefaultConfig() Config {
	return Config{ReleaseAfter: settings.Duration(DefaultAfter), Poll: settings.Duration(DefaultPoll), GPM: true, PowerRise: DefaultPowerRise}
}

// Validate checks the values the flags and YAML accept but a Controller cannot use.
func (c Config) Validate() []error {
	var errs []error
	if c.ReleaseAfter < 0 {
		errs = append(errs, fmt.Errorf("pmsample.idle_release_after must not be negative (0 turns idle release off), got %s", c.ReleaseAfter))
	}
	if time.Duration(c.Poll) < MinPoll || time.Duration(c.Poll) > MaxPoll {
		errs = append(errs, fmt.Errorf("pmsample.idle_poll must be between %s and %s, got %s", MinPoll, MaxPoll, c.Poll))
	}
	if w := c.PowerRise; w != 0 && !(w >= MinPowerRise && w <= MaxPowerRise) { // !(…) also refuses NaN
		errs = append(errs, fmt.Errorf("pmsample.idle_power_rise must be 0 (off) or between %d and %d watts, got %g", MinPowerRise, MaxPowerRise, w))
	}
	return errs
}

// Options are the Controller's options of c.
func (c Config) Options() []Option {
	return []Option{WithAfter(time.Duration(c.ReleaseAfter)), WithPoll(time.Duration(c.Poll)), WithGPM(c.GPM), WithPowerRise(c.PowerRise)}
}
