package pipeline

import (
	"log/slog"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/cupti-exporter/cupti-exporter/exporter"
	"github.com/cupti-exporter/cupti-exporter/idle"
	"github.com/cupti-exporter/cupti-exporter/pmsample"
	"github.com/cupti-exporter/cupti-exporter/profilers"
)

// idleSetup builds the idle-release controller of a live sampler and the producer of its
// counters; both nil when pmsample.idle_release_after is 0.
func idleSetup(logger *slog.Logger, cfg *Config, s *pmsample.Sampler) (*idle.Controller, exporter.Producer) {
	if cfg.PMSample.Idle.ReleaseAfter <= 0 {
		return nil, nil
	}
	var libOpts []nvml.LibraryOption
	if cfg.Health.Library != "" {
		libOpts = append(libOpts, nvml.WithLibraryPath(cfg.Health.Library))
	}
	c := idle.New(s, nvml.New(libOpts...), logger, cfg.PMSample.Idle.Options()...)
	return c, pmsample.NewIdleProducer(s)
}

// profilersSetup looks at the host's processes for profilers and returns the watcher that gives
// them the counters (package profilers); nil when pmsample.give_way is off.
func profilersSetup(logger *slog.Logger, cfg *Config) *profilers.Watcher {
	if !cfg.PMSample.Profilers.GiveWay {
		return nil
	}
	return profilers.New(logger, profilers.WithProcRoot(cfg.Activity.ProcRoot),
		profilers.WithPoll(time.Duration(cfg.PMSample.Profilers.Poll)), profilers.WithNames(cfg.PMSample.Profilers.To...))
}
