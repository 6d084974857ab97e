package idle

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/cupti-exporter/cupti-exporter/internal/nvmlfield"
)

// A woken GPU's instant power draw rises before its GPM counters do: 20 W at 45-90 ms after a
// launch on an idle H200, against 90-157 ms for GPM SM utilisation (run AG, wakeprobe); NVML
// updates the reading about every 100 ms.
// The rise is measured from the lowest reading since the release, so the level of each GPU
// and its slow drift need no setting; only the rise that means work does (WithPowerRise).

// powerRose reads released GPU g's instant power and reports whether it stands the power
// rise above the lowest reading since the release, and whether the power could be read. A GPU
// without the field is watched without it from then on.
func (c *Controller) powerRose(g *gpu) (rose, ok bool) {
	if c.cfg.powerRise <= 0 || g.powerOff {
		return false, false
	}
	mw, ret := nvmlfield.Read(g.h, nvml.FI_DEV_POWER_INSTANT)
	switch ret {
	case nvml.SUCCESS:
	case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_FUNCTION_NOT_FOUND, nvml.ERROR_INVALID_ARGUMENT:
		g.powerOff = true
		c.log.Info("idle wake does without the instant power draw (not supported on this GPU)", "gpu", g.index, "err", nvml.ErrorString(ret))
		return false, false
	default:
		return false, false
	}
	w := mw / 1000
	if g.powerLow == 0 || w < g.powerLow {
		g.powerLow = w
		return false, true
	}
	return w >= g.powerLow+c.cfg.powerRise, true
}
