package profilers

import (
	"fmt"
	"time"

	"github.com/cupti-exporter/cupti-exporter/internal/settings"
)

// Config is the give-way's part of the configuration's pmsample section (docs/pm-sampling.md
// "Sharing the counters"); pipeline.Config composes it into that section.
type Config struct {
	GiveWay bool              `yaml:"give_way" help:"Give a GPU's counters to a profiler found among the host's processes (Nsight Compute, Nsight Systems with --gpu-metrics-devices, DCGM's profiling module, pmsample.give_way_to) while it runs, and take them back when it exits (state yielded, cupti_pm_give_ways_total). Needs the host's PID namespace (the chart's hostPID)."`
	To      []string          `yaml:"give_way_to" help:"More process names (comm, comma separated; a trailing * matches a prefix) to give the counters to, counted as tool named."`
	Poll    settings.Duration `yaml:"give_way_poll" help:"How often the host's processes are looked at for profilers (10ms to 1s) where the kernel's exec records cannot be read (perf events need CAP_PERFMON or CAP_SYS_ADMIN), and while a profiler runs, to see it end; with them a process is looked at when it execs, and the rest once a second. Polling, Nsight Systems with GPU metrics was refused 4 times in 10 at 250ms, never in 25 at 100ms (an H200: it checks the counters 0.25-0.37 s after it starts, and the exporter frees them 0.09-0.14 s after seeing it; docs/pm-sampling.md)."`
}

// DefaultConfig is the give-way's part of the built-in configuration.
func DefaultConfig() Config {
	return Config{GiveWay: true, To: []string{}, Poll: settings.Duration(DefaultPoll)}
}

// Validate checks the values the flags and YAML accept but a Watcher cannot use.
func (c Config) Validate() []error {
	if time.Duration(c.Poll) < MinPoll || time.Duration(c.Poll) > MaxPoll {
		return []error{fmt.Errorf("pmsample.give_way_poll must be between %s and %s, got %s", MinPoll, MaxPoll, c.Poll)}
	}
	return nil
}
