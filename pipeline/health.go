package pipeline

import (
	"context"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/cupti-exporter/cupti-exporter/exporter"
	"github.com/cupti-exporter/cupti-exporter/health"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
)

// startHealth reads the host's GPU health from NVML on its own goroutine and registers it
// as source "health". Its gpu label follows the PM series (CUDA order, by UUID).
func startHealth(ctx context.Context, logger *slog.Logger, cfg *Config, exp *exporter.Exporter, devices func() []pmdata.Device, opts ...health.Option) *health.Source {
	src := newHealthSource(logger, cfg, devices, opts...)
	view := healthView(cfg, src)
	src.ObserveWith(view)
	exp.Register("health", view)
	exp.RegisterStatus("health", statusFunc(func() []exporter.Status {
		var out []exporter.Status
		for _, st := range src.Status() {
			reason := st.Detail
			if reason == "" {
				reason = st.Reason
			}
			out = append(out, exporter.Status{Source: "health", Device: st.Device, Ready: st.Ready, Reason: reason, Code: st.Reason})
		}
		return out
	}))
	go src.Run(ctx)
	return src
}

// nvmlGPUs lists the GPUs NVML found (once the health source has read them), for the
// activity device filter when PM sampling is off.
type nvmlGPUs struct{ src atomic.Pointer[health.Source] }

func (g *nvmlGPUs) devices() []pmdata.Device {
	src := g.src.Load()
	if src == nil {
		return nil
	}
	var out []pmdata.Device
	for _, st := range src.Status() {
		if st.UUID == "" {
			continue
		}
		i, _ := strconv.Atoi(st.Device)
		out = append(out, pmdata.Device{Index: i, UUID: st.UUID})
	}
	return out
}

// newHealthSource is the NVML health source of cfg, whose gpu label follows the PM series
// of devices (CUDA order, by UUID), with opts after the configured ones. Nothing is read
// until its Run.
func newHealthSource(logger *slog.Logger, cfg *Config, devices func() []pmdata.Device, opts ...health.Option) *health.Source {
	var libOpts []nvml.LibraryOption
	if cfg.Health.Library != "" {
		libOpts = append(libOpts, nvml.WithLibraryPath(cfg.Health.Library))
	}
	return health.New(nvml.New(libOpts...), logger, append([]health.Option{
		health.WithInterval(time.Duration(cfg.Health.Interval)),
		health.WithGPM(cfg.Health.GPM),
		health.WithGPUResolver(gpuLabelOf(devices))}, opts...)...)
}
