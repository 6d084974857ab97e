package health

import (
	"fmt"
	"time"

	"github.com/cupti-exporter/cupti-exporter/internal/settings"
)

// Config is the exporter's health section (health.*): its YAML keys and flags, with help.
type Config struct {
	Enabled  bool              `yaml:"enabled" help:"Read GPU health from NVML: memory, utilisation, power, energy, temperatures, clocks, throttling, XID errors, ECC, row remapping, PCIe replays, NVLink state, per-process memory, MIG."`
	Interval settings.Duration `yaml:"interval" help:"How often NVML is read (100ms to 1h)."`
	Library  string            `yaml:"library" help:"Path to libnvidia-ml.so.1; empty: the dynamic loader's search path."`
	GPM      bool              `yaml:"gpm" help:"Also read NVML GPM (Hopper and newer): SM, tensor and DRAM bandwidth utilisation per health interval, as cupti_gpm_* labelled source=gpm; a separate unit from the PM counters."`
}

// Bounds of health.interval.
const (
	MinInterval = 100 * time.Millisecond
	MaxInterval = time.Hour
)

// DefaultConfig is the health section's default.
func DefaultConfig() Config {
	return Config{Enabled: true, Interval: settings.Duration(DefaultInterval)}
}

// Validate checks the section's values.
func (c Config) Validate() []error {
	if d := time.Duration(c.Interval); d < MinInterval || d > MaxInterval {
		return []error{fmt.Errorf("health.interval must be between 100ms and 1h, got %s", c.Interval)}
	}
	return nil
}
