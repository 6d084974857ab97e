package health

import (
	"math"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
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

// gpmSource is the value of the source label of the GPM families.
const gpmSource = "gpm"

// gpmState is a GPU's two GPM samples: the previous collection's and the current one.
type gpmState struct {
	prev, cur nvml.GpmSample
	have      bool // prev holds a sample of this device
}

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
		st := &gpmState{}
		if st.prev, ret = lib.GpmSampleAlloc(); !g.ok("gpm_alloc", ret) {
			return
		}
		if st.cur, ret = lib.GpmSampleAlloc(); !g.ok("gpm_alloc", ret) {
			st.prev.Free()
			return
		}
		g.gpm = st
	}
	st := g.gpm
	if ret := g.dev.GpmSampleGet(st.cur); !g.ok("gpm", ret) {
		st.have = false
		return
	}
	if st.have {
		mg := &nvml.GpmMetricsGetType{NumMetrics: uint32(len(gpmMetrics)), Sample1: st.prev, Sample2: st.cur}
		for i, m := range gpmMetrics {
			mg.Metrics[i].MetricId = uint32(m.id)
		}
		if ret := lib.GpmMetricsGet(mg); g.ok("gpm_metrics", ret) {
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
	}
	st.prev, st.cur, st.have = st.cur, st.prev, true
}

// freeGPM releases the GPU's GPM samples.
func (g *gpuState) freeGPM() {
	if g.gpm != nil {
		g.gpm.prev.Free()
		g.gpm.cur.Free()
		g.gpm = nil
	}
}
