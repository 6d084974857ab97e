package dashboards

import (
	"context"
	"encoding/binary"
	"log/slog"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/cupti-exporter/cupti-exporter/exporter"
	"github.com/cupti-exporter/cupti-exporter/idle"
	"github.com/cupti-exporter/cupti-exporter/internal/cupti"
	"github.com/cupti-exporter/cupti-exporter/internal/cupti/cuptitest"
	"github.com/cupti-exporter/cupti-exporter/mapping"
	"github.com/cupti-exporter/cupti-exporter/pmsample"
	"github.com/cupti-exporter/cupti-exporter/pmsample/aggregate"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
)

// serveLive runs what a replay cannot: the live PM sampler (package pmsample over the fake
// libcupti of internal/cupti/fake, two GPUs) with the idle-release controller (package idle
// on a mocked NVML) behind a real exporter, wired as the serve command wires them. GPU 0
// is idle, so the controller releases its session after a second and it stays released;
// GPU 1 is busy and keeps sampling. The sampler-state panels and the idle-release panels
// are judged on it (livePanels), and checkLive checks the fleet's counts.
func serveLive(t *testing.T) string {
	t.Helper()
	lib, err := cupti.Open(cuptitest.Build(t))
	if err != nil {
		t.Fatalf("opening the fake libcupti: %v", err)
	}
	m, err := mapping.New()
	if err != nil {
		t.Fatal(err)
	}
	// No SM active ratio among the metrics: the fake's values would keep GPU 0 awake.
	s, err := pmsample.New(lib, m, nil, pmsample.WithMetrics("sm__cycles_active.sum", "dram__bytes_read.sum"),
		pmsample.WithDecodePeriod(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	c := idle.New(s, idleNVML(s.Devices()), nil, idle.WithAfter(time.Second), idle.WithPoll(20*time.Millisecond))
	agg := aggregate.New(m, s.Devices(), s.Catalog(), nil, aggregate.WithStatus(s.Status))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { _ = s.Run(ctx, func(b pmdata.Batch) { agg.Add(b); c.Add(b) }); done <- struct{}{} }()
	go func() { _ = c.Run(ctx); done <- struct{}{} }()

	exp := exporter.New(slog.New(slog.DiscardHandler), exporter.WithoutRuntimeMetrics())
	exp.Register("pmsample", agg)
	exp.Register("pmsample_idle", pmsample.NewIdleProducer(s))
	return serveExporter(t, exp, func() {
		cancel()
		<-done
		<-done
		s.Close()
		_ = lib.Close()
	})
}

// idleNVML answers the idle controller's NVML calls: the first device is idle (utilisation
// 0, the gpu_idle clock-event bit set, no process, GPM SM utilisation 0, a steady 80 W of
// instant power), every other one busy
// (and never released, so never asked for GPM).
func idleNVML(devs []pmdata.Device) nvml.Interface {
	handles := map[string]*mock.Device{}
	for i, d := range devs {
		util, events := uint32(60), uint64(0)
		if i == 0 {
			util, events = 0, 0x1 // nvmlClocksEventReasonGpuIdle
		}
		handles[d.UUID] = &mock.Device{
			GetUtilizationRatesFunc: func() (nvml.Utilization, nvml.Return) {
				return nvml.Utilization{Gpu: util}, nvml.SUCCESS
			},
			GetCurrentClocksEventReasonsFunc: func() (uint64, nvml.Return) { return events, nvml.SUCCESS },
			GetComputeRunningProcessesFunc:   func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.SUCCESS },
			GpmQueryDeviceSupportFunc: func() (nvml.GpmSupport, nvml.Return) {
				return nvml.GpmSupport{IsSupportedDevice: 1}, nvml.SUCCESS
			},
			GpmSampleGetFunc: func(nvml.GpmSample) nvml.Return { return nvml.SUCCESS },
			GetFieldValuesFunc: func(v []nvml.FieldValue) nvml.Return {
				for i := range v {
					v[i].NvmlReturn, v[i].ValueType = uint32(nvml.SUCCESS), uint32(nvml.VALUE_TYPE_UNSIGNED_INT)
					binary.LittleEndian.PutUint32(v[i].Value[:], 80_000) // mW
				}
				return nvml.SUCCESS
			},
		}
	}
	return &mock.Interface{
		InitFunc:     func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc: func() nvml.Return { return nvml.SUCCESS },
		GpmSampleAllocFunc: func() (nvml.GpmSample, nvml.Return) {
			return &mock.GpmSample{FreeFunc: func() nvml.Return { return nvml.SUCCESS }}, nvml.SUCCESS
		},
		GpmMetricsGetFunc: func(m *nvml.GpmMetricsGetType) nvml.Return {
			for i := range m.NumMetrics {
				m.Metrics[i].NvmlReturn, m.Metrics[i].Value = uint32(nvml.SUCCESS), 0
			}
			return nvml.SUCCESS
		},
		DeviceGetHandleByUUIDFunc: func(uuid string) (nvml.Device, nvml.Return) {
			if d, ok := handles[uuid]; ok {
				return d, nvml.SUCCESS
			}
			return nil, nvml.ERROR_NOT_FOUND
		},
	}
}
