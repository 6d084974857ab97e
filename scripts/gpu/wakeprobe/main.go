// Command wakeprobe measures how soon NVML's cheap signals show a kernel on an idle GPU, with
// no PM session open: it polls GPU 0 every -poll and prints a line whenever a signal changes
// (GPM SM utilisation between consecutive polls, instant power, SM clock, clock-event reasons,
// utilisation). scripts/gpu/wake_compare.py lines the changes up with the first kernel that
// idle_kernels.py prints. Run on the GPU machine by stage wakeprobe (stages_idle.sh).
//
// usage: wakeprobe -for 20s -poll 5ms
package main

import (
	"flag"
	"fmt"
	"math"
	"os"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/cupti-exporter/cupti-exporter/internal/gpm"
	"github.com/cupti-exporter/cupti-exporter/internal/nvmlfield"
)

func main() {
	dur := flag.Duration("for", 20*time.Second, "how long to poll")
	poll := flag.Duration("poll", 5*time.Millisecond, "poll interval")
	flag.Parse()
	if err := run(*dur, *poll); err != nil {
		fmt.Fprintln(os.Stderr, "wakeprobe:", err)
		os.Exit(1)
	}
}

func run(dur, poll time.Duration) error {
	lib := nvml.New()
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return fmt.Errorf("nvml init: %v", nvml.ErrorString(ret))
	}
	defer lib.Shutdown()
	dev, ret := lib.DeviceGetHandleByIndex(0)
	if ret != nvml.SUCCESS {
		return fmt.Errorf("gpu 0: %v", nvml.ErrorString(ret))
	}
	pair, ret := gpm.Alloc(lib)
	if ret != nvml.SUCCESS {
		return fmt.Errorf("gpm sample: %v", nvml.ErrorString(ret))
	}
	defer pair.Free()
	last := map[string]string{}
	emit := func(now time.Time, name, value string) {
		if last[name] != value {
			last[name] = value
			fmt.Printf("%d %s %s\n", now.UnixNano(), name, value)
		}
	}
	end := time.Now().Add(dur)
	for t := time.NewTicker(poll); time.Now().Before(end); <-t.C {
		now := time.Now()
		mg, sampled, asked := pair.Take(lib, dev, nvml.GPM_METRIC_SM_UTIL)
		switch {
		case sampled != nvml.SUCCESS:
			emit(now, "gpm", "sample_error_"+nvml.ErrorString(sampled))
		case mg != nil && asked == nvml.SUCCESS && nvml.Return(mg.Metrics[0].NvmlReturn) == nvml.SUCCESS:
			v := mg.Metrics[0].Value
			if math.IsNaN(v) {
				emit(now, "gpm", "nan")
			} else {
				emit(now, "gpm", fmt.Sprintf("%.1f", v))
			}
		case mg != nil:
			emit(now, "gpm", "metric_error")
		}
		if mw, r := nvmlfield.Read(dev, nvml.FI_DEV_POWER_INSTANT); r == nvml.SUCCESS {
			emit(now, "power_instant_w", fmt.Sprintf("%.0f", mw/1000)) // whole watts: the idle noise is measured from these
		}
		if c, r := dev.GetClockInfo(nvml.CLOCK_SM); r == nvml.SUCCESS {
			emit(now, "sm_clock_mhz", fmt.Sprint(c))
		}
		if e, r := dev.GetCurrentClocksEventReasons(); r == nvml.SUCCESS {
			emit(now, "clock_events", fmt.Sprintf("%#x", e))
		}
		if u, r := dev.GetUtilizationRates(); r == nvml.SUCCESS {
			emit(now, "utilization", fmt.Sprint(u.Gpu))
		}
	}
	return nil
}
