package health

import (
	"math"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/cupti-exporter/cupti-exporter/internal/gpm"
)

// gpmMetrics are the GPU Performance Monitoring metrics read when GPM is on (WithGPM):
// NVML computes them from two samples, here those of consecutive collections, so each
// value covers the last health interval. GPM is a separate unit from the PM counters CUPTI
// samples (Hopper and newer), so it may keep reporting while a profiler holds those.
var gpmMetrics = []struct {
	name string
	id   nvml.GpmMetricId
	desc *descT
}{
	{"sm_util", nvml.GPM_METRIC_SM_UTIL, gpmSMDesc},
	{"any_tensor_util", nvml.GPM_METRIC_ANY_TENSOR_UTIL, gpmTensorDesc},
	{"dram_bw_util", nvml.GPM_METRIC_DRAM_BW_UTIL, gpmDRAMDesc},
}

// gpmIDs are the ids of gpmMetrics, in their order.
var gpmIDs = func() []nvml.GpmMetricId {
	ids := make([]nvml.GpmMetricId, len(gpmMetrics))
	for i, m := range gpmMetrics {
		ids[i] = m.id
	}
	return ids
}()

// gpmSource is the value of the source label of the GPM families.
const gpmSource = "gpm"

// collectGPM takes a GPM sample of the GPU and, with the previous one, adds the GPM
// metrics to b. A GPU without GPM support (before Hopper) is skipped from then on.
func (g *gpuState) collectGPM(lib nvml.Interface, b *builder) {
	if g.skip("gpm") {
		return
	}
	if g.gpm == nil {
		sup, ret := g.dev.GpmQueryDeviceSupport()
		if !g.ok("gpm", ret) {
			return
		}
		if sup.IsSupportedDevice == 0 {
			g.ok("gpm", nvml.ERROR_NOT_SUPPORTED) // remembered and logged once
			return
		}
		p, ret := gpm.Alloc(lib)
		if !g.ok("gpm_alloc", ret) {
			return
		}
		g.gpm = p
	}
	mg, sampled, asked := g.gpm.Take(lib, g.dev, gpmIDs...)
	if !g.ok("gpm", sampled) || mg == nil || !g.ok("gpm_metrics", asked) {
		return
	}
	for i, m := range gpmMetrics {
		f := "gpm_" + m.name
		if g.skip(f) || !g.ok(f, nvml.Return(mg.Metrics[i].NvmlReturn)) {
			continue
		}
		v := mg.Metrics[i].Value / 100 // NVML gives percentages
		if math.IsNaN(v) {
			continue
		}
		b.add(m.desc, math.Min(math.Max(v, 0), 1), append(g.labels[:len(g.labels):len(g.labels)], gpmSource)...)
	}
}

// freeGPM releases the GPU's GPM samples.
func (g *gpuState) freeGPM() {
	if g.gpm != nil {
		g.gpm.Free()
		g.gpm = nil
	}
}
