package pipeline

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/cupti-exporter/cupti-exporter/exporter"
	"github.com/cupti-exporter/cupti-exporter/gpmsource"
	"github.com/cupti-exporter/cupti-exporter/mapping"
	"github.com/cupti-exporter/cupti-exporter/pmsample"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// gpmOnly reports whether gpm.mode=only: the curated metrics from GPM alone, no PM session.
func (c *Config) gpmOnly() bool { return gpmsource.Mode(c.GPM.Mode) == gpmsource.ModeOnly }

// startGPM reads the host's GPUs' GPM for the curated metrics (gpmsource) on its own
// goroutine and returns the producer to register in place of pmAgg (the PM aggregator, nil
// without PM sampling): PM sampling's snapshots with GPM's curated series filled in on each
// GPU PM sampling cannot read (gpm.mode=fill), or GPM's alone (only). It registers GPM's
// readiness as source "gpm". nil, nil when gpm.mode=off or this is no live host.
func startGPM(ctx context.Context, logger *slog.Logger, cfg *Config, exp *exporter.Exporter, pm *pmSetup, pmAgg exporter.Producer) (exporter.Producer, *gpmsource.Source) {
	if !pm.live || gpmsource.Mode(cfg.GPM.Mode) == gpmsource.ModeOff {
		return pmAgg, nil
	}
	var libOpts []nvml.LibraryOption
	if cfg.Health.Library != "" {
		libOpts = append(libOpts, nvml.WithLibraryPath(cfg.Health.Library))
	}
	opts := []gpmsource.Option{
		gpmsource.WithMode(gpmsource.Mode(cfg.GPM.Mode)),
		gpmsource.WithInterval(time.Duration(cfg.GPM.Interval)),
		gpmsource.WithWindow(time.Duration(cfg.PMSample.Window)),
		gpmsource.WithWindowMin(cfg.extraSeries("window_min")),
		gpmsource.WithSelfMetrics(cfg.extraSeries("sampler_timing")),
		gpmsource.WithPMDevices(pm.devices),
		gpmsource.WithProcRoot(cfg.Activity.ProcRoot),
		gpmsource.WithFamilies(cfg.GPM.Families),
	}
	sampler, _ := pm.src.(*pmsample.Sampler)
	if sampler != nil {
		opts = append(opts, gpmsource.WithPMStatus(sampler.Status), gpmsource.WithPMFamilies(plannedFamilies(pm.mapper, sampler.Catalog())))
	}
	src, err := gpmsource.New(nvml.New(libOpts...), pm.mapper, logger, opts...)
	if err != nil { // the curated table lacks a family GPM serves: a build defect (gpm.families is validated)
		logger.Error("GPM source not started", "err", err)
		return pmAgg, nil
	}
	if sampler != nil {
		sampler.OnStateChange(src.Kick) // fill a gap as soon as PM sampling stops, without polling its state
	}
	var pmSnap interface{ Snapshot() *snapshot.Snapshot }
	if pmAgg != nil {
		pmSnap = pmAgg
	}
	fill := src.Fill(pmSnap)
	exp.RegisterStatus("gpm", statusFunc(func() []exporter.Status {
		var out []exporter.Status
		for _, st := range fill.Status() {
			out = append(out, exporter.Status{Source: "gpm", Device: st.Device, Ready: st.Ready, Reason: st.Reason})
		}
		return out
	}))
	go src.Run(ctx)
	return fill, src
}

// plannedFamilies tells the curated families PM sampling's plan serves: the names its
// catalog's metrics map to.
func plannedFamilies(m *mapping.Mapper, cat []pmdata.CatalogEntry) func(string) bool {
	names := map[string]bool{}
	for _, e := range cat {
		met, err := m.Map(e.Name, e.Properties)
		if err != nil {
			continue
		}
		for _, d := range met.Descs() {
			names[d.Name] = true
		}
	}
	return func(name string) bool { return names[name] }
}

// withHolders adds to the reason of each busy device which processes hold its counters, as
// far as src found them.
func withHolders(st []exporter.Status, ds []pmdata.DeviceStatus, src *gpmsource.Source) []exporter.Status {
	if src == nil {
		return st
	}
	for i, d := range ds {
		if d.State != pmdata.StateBusy || i >= len(st) {
			continue
		}
		var who []string
		for _, h := range src.Holders(d.UUID) {
			who = append(who, h.String())
		}
		if len(who) > 0 {
			st[i].Reason += "; the PM counters are held by " + strings.Join(who, ", ")
		}
	}
	return st
}
