// Command gpmprobe reads NVML GPM metrics of GPU 0 between consecutive samples taken every
// -period, and prints one line per metric and pair: the pair's end (Unix ns), its span (ms),
// the metric id, NVML's return and the value. At the end it prints its own CPU time and the
// number of pairs, so the cost of reading GPM at a rate is known. Used by the gpmfacts and
// gpmcompare stages (stages_gpm.sh) to see which GPM metrics a GPU serves, what they read
// beside PM sampling and under ncu, and how fast they refresh.
//
// usage: gpmprobe -for 60s -period 100ms [-ids 1,2,3]   (SIGTERM ends it early)
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/cupti-exporter/cupti-exporter/internal/gpm"
)

// defaultIDs are the GPM metrics the curated families could be served from, the tensor
// variants, and the since-reboot counters of newer drivers (248-260).
const defaultIDs = "1,2,3,4,5,6,7,8,9,10,11,12,13,20,21,60,61,248,249,250,255,256,258,259,260"

func main() {
	dur := flag.Duration("for", 20*time.Second, "how long to read")
	period := flag.Duration("period", 100*time.Millisecond, "time between samples")
	idList := flag.String("ids", defaultIDs, "GPM metric ids")
	flag.Parse()
	if err := run(*dur, *period, *idList); err != nil {
		fmt.Fprintln(os.Stderr, "gpmprobe:", err)
		os.Exit(1)
	}
}

func run(dur, period time.Duration, idList string) error {
	var ids []nvml.GpmMetricId
	for _, s := range strings.Split(idList, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("metric id %q: %v", s, err)
		}
		ids = append(ids, nvml.GpmMetricId(n))
	}
	lib := nvml.New()
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return fmt.Errorf("nvml init: %v", nvml.ErrorString(ret))
	}
	defer lib.Shutdown()
	dev, ret := lib.DeviceGetHandleByIndex(0)
	if ret != nvml.SUCCESS {
		return fmt.Errorf("gpu 0: %v", nvml.ErrorString(ret))
	}
	sup, ret := dev.GpmQueryDeviceSupport()
	stream, sret := dev.GpmQueryIfStreamingEnabled()
	mig, _, mret := dev.GetMigMode()
	fmt.Printf("# support %d (%s) streaming %d (%s) mig %d (%s) period %v\n", sup.IsSupportedDevice, nvml.ErrorString(ret),
		stream, nvml.ErrorString(sret), mig, nvml.ErrorString(mret), period)
	pair, ret := gpm.Alloc(lib)
	if ret != nvml.SUCCESS {
		return fmt.Errorf("gpm sample: %v", nvml.ErrorString(ret))
	}
	defer pair.Free()
	cpu0 := cpuTime()
	pairs, last := 0, time.Time{}
	stop := make(chan os.Signal, 1) // SIGTERM ends the reading early, with the summary line
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	t := time.NewTicker(period)
	for end := time.Now().Add(dur); time.Now().Before(end); {
		select {
		case <-stop:
			end = time.Time{}
			continue
		case <-t.C:
		}
		mg, sampled, asked := pair.Take(lib, dev, ids...)
		now := time.Now()
		switch {
		case sampled != nvml.SUCCESS:
			fmt.Printf("%d 0 sample %s\n", now.UnixNano(), nvml.ErrorString(sampled))
		case mg == nil:
		case asked != nvml.SUCCESS:
			fmt.Printf("%d 0 metrics %s\n", now.UnixNano(), nvml.ErrorString(asked))
		default:
			pairs++
			span := now.Sub(last).Seconds() * 1e3
			for i := range ids {
				m := mg.Metrics[i]
				fmt.Printf("%d %.2f %d %d %.6g\n", now.UnixNano(), span, m.MetricId, m.NvmlReturn, m.Value)
			}
		}
		last = now
	}
	fmt.Printf("# cpu_s %.4f pairs %d metrics %d period %v\n", cpuTime()-cpu0, pairs, len(ids), period)
	return nil
}

// cpuTime is the process's user + system CPU seconds.
func cpuTime() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
