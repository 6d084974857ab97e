package dashboards

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	nvmlserver "github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/cupti-exporter/cupti-exporter/exporter"
	"github.com/cupti-exporter/cupti-exporter/gpmsource"
	"github.com/cupti-exporter/cupti-exporter/mapping"
	"github.com/cupti-exporter/cupti-exporter/pmsample/aggregate"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
)

// gpmPanels are the panels judged on the GPM stand-in (serveGPM): those of the curated
// families GPM serves while PM sampling cannot read a GPU. The SM occupancy panel stays
// empty for such a GPU (GPM's occupancy is another quantity: docs/pm-sampling.md "GPM").
var gpmPanels = map[string]bool{"Mean SM active": true, "Graphics engine active": true, "SM active": true,
	"Tensor pipe active": true, "DRAM active": true, "PCIe throughput": true, "FP64 pipe active": true, "FP32 pipe active": true}

// gpmUUIDs are the stand-in's GPUs: the first (the dashboards' first value of their gpu
// variable) is busy for PM sampling and served by GPM, the second samples.
var gpmUUIDs = []string{"GPU-00000000-0000-4000-8000-00000000a000", "GPU-00000000-0000-4000-8000-00000000b000"}

// serveGPM runs, behind a real exporter, what serve runs when a profiler holds a GPU's
// counters: PM sampling's aggregator of the curated metrics (fed here every 100 ms, as the
// decode loop does, for the GPU that samples) joined by gpmsource.Fill with the GPM source on
// go-nvml's mock of an H100, which reads the busy GPU. Its curated families then carry
// series of both sources (source="gpm" on the busy GPU's): checkGPM checks that the
// dashboards' sums and averages still see one series per GPU.
func serveGPM(t *testing.T) string {
	t.Helper()
	srv := dgxh100.New()
	srv.Devices = srv.Devices[:2]
	srv.DeviceGetCountFunc = func() (int, nvml.Return) { return 2, nvml.SUCCESS }
	srv.GpmSampleAllocFunc = func() (nvml.GpmSample, nvml.Return) {
		return &mock.GpmSample{FreeFunc: func() nvml.Return { return nvml.SUCCESS }}, nvml.SUCCESS
	}
	srv.GpmMetricsGetFunc = func(m *nvml.GpmMetricsGetType) nvml.Return {
		for i := range m.NumMetrics { // a steady matmul as an H100 reads it (run BR)
			x := &m.Metrics[i]
			x.NvmlReturn = uint32(nvml.SUCCESS)
			x.Value = map[nvml.GpmMetricId]float64{nvml.GPM_METRIC_GRAPHICS_UTIL: 99.4, nvml.GPM_METRIC_SM_UTIL: 96,
				nvml.GPM_METRIC_ANY_TENSOR_UTIL: 93.2, nvml.GPM_METRIC_DRAM_BW_UTIL: 25.1, nvml.GPM_METRIC_PCIE_RX_PER_SEC: 17,
				nvml.GPM_METRIC_PCIE_TX_PER_SEC: 17}[nvml.GpmMetricId(x.MetricId)]
		}
		return nvml.SUCCESS
	}
	var devs []pmdata.Device
	for i, d := range srv.Devices {
		dev := d.(*nvmlserver.Device)
		dev.UUID = gpmUUIDs[i]
		dev.GpmQueryDeviceSupportFunc = func() (nvml.GpmSupport, nvml.Return) { return nvml.GpmSupport{IsSupportedDevice: 1}, nvml.SUCCESS }
		dev.GpmSampleGetFunc = func(nvml.GpmSample) nvml.Return { return nvml.SUCCESS }
		dev.GetNvLinkStateFunc = func(int) (nvml.EnableState, nvml.Return) { return nvml.FEATURE_DISABLED, nvml.SUCCESS }
		dev.GetMigModeFunc = func() (int, int, nvml.Return) { return nvml.DEVICE_MIG_DISABLE, nvml.DEVICE_MIG_DISABLE, nvml.SUCCESS }
		dev.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.SUCCESS }
		devs = append(devs, pmdata.Device{Index: i, UUID: gpmUUIDs[i], Model: "NVIDIA H100 80GB HBM3", Chip: "GH100", PCIBusID: fmt.Sprintf("0000:%02x:00.0", 0x1b+i*0x10)})
	}
	states := func() []pmdata.DeviceStatus {
		return []pmdata.DeviceStatus{{Device: 0, UUID: gpmUUIDs[0], State: pmdata.StateBusy}, {Device: 1, UUID: gpmUUIDs[1], State: pmdata.StateSampling}}
	}
	m, err := mapping.New()
	if err != nil {
		t.Fatal(err)
	}
	var cat []pmdata.CatalogEntry
	var names []string
	for _, c := range m.Curated() {
		if c.Name == "cupti_gpu_context_switch_cycles_total" || c.Name == "cupti_fp16_pipe_active_ratio" || c.Name == "cupti_nvlink_bytes_total" {
			continue // the GH100 default set without NVLink peers
		}
		p := pmdata.Properties{Type: pmdata.TypeCounter, DimUnit: "cycle"}
		if c.Name == "cupti_pcie_bytes_total" || c.Name == "cupti_dram_read_bytes_total" || c.Name == "cupti_dram_write_bytes_total" {
			p.DimUnit = "byte"
		}
		cat = append(cat, pmdata.CatalogEntry{Name: c.Perfworks, Properties: p})
		names = append(names, c.Perfworks)
	}
	agg := aggregate.New(m, devs, cat, nil, aggregate.WithWindow(15*time.Second))
	src, err := gpmsource.New(srv, m, nil, gpmsource.WithPMDevices(func() []pmdata.Device { return devs }),
		gpmsource.WithPMStatus(states), gpmsource.WithWindow(15*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { _ = src.Run(ctx); done <- struct{}{} }()
	go func() { // GPU 1's PM samples, a decode every 100 ms
		defer func() { done <- struct{}{} }()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		last := time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				vals := make([]float64, len(names))
				for i, n := range names {
					vals[i] = 40 // percent of a ratio, bytes of a counter
					if n == "PCI.TriageCompute.pcie__read_bytes.sum" || n == "PCI.TriageCompute.pcie__write_bytes.sum" {
						vals[i] = 1.8e6
					}
				}
				agg.Add(pmdata.Batch{Device: 1, Metrics: names, Interval: 100 * time.Millisecond,
					Samples: []pmdata.Sample{{Start: uint64(last.UnixNano()), End: uint64(now.UnixNano()), Values: vals}}})
				last = now
			}
		}
	}()
	exp := exporter.New(slog.New(slog.DiscardHandler), exporter.WithoutRuntimeMetrics())
	exp.Register("pmsample", src.Fill(agg))
	return serveExporter(t, exp, func() { cancel(); <-done; <-done })
}

// checkGPM checks, on the GPM stand-in, that a curated family served by both sources has one
// series per GPU, so the dashboards' sums and averages over GPUs count each GPU once: GPU 0's
// from GPM (source="gpm", SM active 0.96), GPU 1's from PM sampling (no source label, 0.40).
func checkGPM(s server, replays []replay) []string {
	var problems []string
	for _, r := range replays {
		if r.name != "gpm" {
			continue
		}
		inst := regexValue(r.addr)
		for _, c := range []struct{ expr, want string }{
			{`count(count by (instance, gpu) (cupti_sm_active_ratio{instance=~"` + inst + `"}) == 1)`, "2"},
			{`sum by (instance, gpu) (cupti_sm_active_ratio{instance=~"` + inst + `", gpu="0"})`, "0.96"},
			{`sum by (instance, gpu) (cupti_sm_active_ratio{instance=~"` + inst + `", gpu="1"})`, "0.4"},
			{`count(cupti_sm_active_ratio{instance=~"` + inst + `", source="gpm"})`, "1"},
			{`count(sum by (instance, gpu, direction) (rate(cupti_pcie_bytes_total{instance=~"` + inst + `"}[10s])))`, "4"},
			{`count(count by (instance, gpu, direction) (cupti_pcie_bytes_total{instance=~"` + inst + `"}) == 1)`, "4"},
		} {
			res, err := instantQuery(s.url, c.expr)
			if err != nil || len(res) != 1 || len(res[0].Value) != 2 || !sameNumber(fmt.Sprint(res[0].Value[1]), c.want) {
				problems = append(problems, fmt.Sprintf("gpm stand-in (%s): %s = %v %v, want %s", s.name, c.expr, res, err, c.want))
			}
		}
	}
	return problems
}

// sameNumber compares two numbers as text, to 4 decimals.
func sameNumber(a, b string) bool {
	x, err1 := strconv.ParseFloat(a, 64)
	y, err2 := strconv.ParseFloat(b, 64)
	return err1 == nil && err2 == nil && fmt.Sprintf("%.4f", x) == fmt.Sprintf("%.4f", y)
}
