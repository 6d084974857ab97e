package idle

import (
	"math"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// gpmWatch is a released GPU's GPM (GPU Performance Monitoring, Hopper and newer) samples:
// the SM utilisation between two polls is the work done in between, measured by hardware
// counters that need no PM session. NVML's utilisation and clock-event reasons changed about
// 300 ms after a kernel on an H200 (run N); GPM sees it at the next poll.
type gpmWatch struct {
	prev, cur nvml.GpmSample
	have      bool // prev holds a sample of this GPU
}

// gpmStart prepares g's GPM samples (once) and takes the first one after a release. A GPU
// without GPM, or whose samples cannot be had, is watched without it from then on.
func (c *Controller) gpmStart(g *gpu) {
	if !c.cfg.gpm || g.gpmOff {
		return
	}
	if g.gpm == nil {
		sup, ret := g.h.GpmQueryDeviceSupport()
		if ret != nvml.SUCCESS || sup.IsSupportedDevice == 0 {
			c.gpmGiveUp(g, "GPM not supported on this GPU", ret)
			return
		}
		w := &gpmWatch{}
		if w.prev, ret = c.lib.GpmSampleAlloc(); ret != nvml.SUCCESS {
			c.gpmGiveUp(g, "allocating a GPM sample", ret)
			return
		}
		if w.cur, ret = c.lib.GpmSampleAlloc(); ret != nvml.SUCCESS {
			w.prev.Free()
			c.gpmGiveUp(g, "allocating a GPM sample", ret)
			return
		}
		g.gpm = w
	}
	g.gpm.have = g.h.GpmSampleGet(g.gpm.prev) == nvml.SUCCESS
}

// gpmBusy takes a GPM sample of released GPU g and reports whether its SMs were active
// since the previous one (above the SM threshold), and whether GPM could be read.
func (c *Controller) gpmBusy(g *gpu) (busy, ok bool) {
	w := g.gpm
	if w == nil {
		return false, false
	}
	if g.h.GpmSampleGet(w.cur) != nvml.SUCCESS {
		w.have = false
		return false, false
	}
	defer func() { w.prev, w.cur, w.have = w.cur, w.prev, true }()
	if !w.have {
		return false, true
	}
	mg := &nvml.GpmMetricsGetType{NumMetrics: 1, Sample1: w.prev, Sample2: w.cur}
	mg.Metrics[0].MetricId = uint32(nvml.GPM_METRIC_SM_UTIL)
	if c.lib.GpmMetricsGet(mg) != nvml.SUCCESS || nvml.Return(mg.Metrics[0].NvmlReturn) != nvml.SUCCESS {
		return false, false
	}
	v := mg.Metrics[0].Value // percent
	return !math.IsNaN(v) && v >= c.cfg.smThreshold, true
}

func (c *Controller) gpmGiveUp(g *gpu, what string, ret nvml.Return) {
	g.gpmOff = true
	c.log.Info("idle wake watches NVML's utilisation and clock events only (slower)", "gpu", g.index, "reason", what, "err", nvml.ErrorString(ret))
}

// gpmFree releases g's GPM samples.
func (g *gpu) gpmFree() {
	if g.gpm != nil {
		g.gpm.prev.Free()
		g.gpm.cur.Free()
		g.gpm = nil
	}
}
