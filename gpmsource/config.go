package gpmsource

import (
	"fmt"
	"time"

	"github.com/cupti-exporter/cupti-exporter/internal/settings"
)

// Config is the exporter's GPM section (gpm.*): its YAML keys and flags, with help.
type Config struct {
	Mode     string            `yaml:"mode" help:"When NVML GPM (Hopper and newer, a unit apart from the PM counters) serves the curated metrics (cupti_sm_active_ratio, ...) under their own names, labelled source=\"gpm\": fill (on each GPU while PM sampling cannot read it: a profiler holds the counters, paused, no privilege, idle-released), only (always, with no PM session: the low-cost mode, no kHz maxima and no attribution to kernels; docs/performance.md), off."`
	Interval settings.Duration `yaml:"interval" help:"Time between two GPM samples of a GPU, 100ms to 10s (GPM refreshes every 100 ms: shorter pairs read 0 for work that ran)."`
	Families []string          `yaml:"families" help:"Curated families GPM serves (comma separated; empty: every one it can). Leaving out cupti_graphics_engine_active_ratio, whose GPM metric is most of NVML's cost of a read, is what brings gpm.mode=only under 1 % of a core per GPU at 10 Hz on an H100 (docs/performance.md \"GPM mode\")."`
}

// MaxInterval is the longest gpm.interval accepted (MinInterval the shortest).
const MaxInterval = 10 * time.Second

// DefaultConfig is the GPM section's default.
func DefaultConfig() Config {
	return Config{Mode: string(ModeFill), Interval: settings.Duration(DefaultInterval)}
}

// Validate checks the section's values.
func (c Config) Validate() []error {
	var errs []error
	switch Mode(c.Mode) {
	case ModeFill, ModeOnly, ModeOff:
	default:
		errs = append(errs, fmt.Errorf("gpm.mode must be fill, only or off, got %q", c.Mode))
	}
	if d := time.Duration(c.Interval); d < MinInterval || d > MaxInterval {
		errs = append(errs, fmt.Errorf("gpm.interval must be between %s and %s, got %s", MinInterval, MaxInterval, c.Interval))
	}
	for _, f := range c.Families {
		if err := unknownFamily(f); err != nil {
			errs = append(errs, fmt.Errorf("gpm.families: %w", err))
		}
	}
	return errs
}
