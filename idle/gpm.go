package idle

import (
	"math"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/cupti-exporter/cupti-exporter/internal/gpm"
)

// The GPM (GPU Performance Monitoring, Hopper and newer) SM utilisation between two polls of a
// released GPU is the work done in between, measured by hardware counters that need no PM
// session. NVML's utilisation and clock-event reasons changed about 300 ms after a kernel on
// an H200 (run N); GPM sees it at the next poll.

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
		p, ret := gpm.Alloc(c.lib)
		if ret != nvml.SUCCESS {
			c.gpmGiveUp(g, "allocating a GPM sample", ret)
			return
		}
		g.gpm = p
	}
	g.gpm.Restart() // a sample from before the release does not pair with one after it
	g.gpm.Take(c.lib, g.h)
}

// gpmBusy takes a GPM sample of released GPU g and reports whether its SMs were active
// since the previous one (above the SM threshold), and whether GPM could be read.
func (c *Controller) gpmBusy(g *gpu) (busy, ok bool) {
	if g.gpm == nil {
		return false, false
	}
	mg, sampled, asked := g.gpm.Take(c.lib, g.h, nvml.GPM_METRIC_SM_UTIL)
	switch {
	case sampled != nvml.SUCCESS:
		return false, false
	case mg == nil: // the first sample since the release
		return false, true
	case asked != nvml.SUCCESS || nvml.Return(mg.Metrics[0].NvmlReturn) != nvml.SUCCESS:
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
		g.gpm.Free()
		g.gpm = nil
	}
}
