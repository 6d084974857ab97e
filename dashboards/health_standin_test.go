package dashboards

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	nvmlserver "github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/cupti-exporter/cupti-exporter/exporter"
	"github.com/cupti-exporter/cupti-exporter/health"
)

// serveHealth runs the health source (package health) on go-nvml's mock of a DGX H100
// (8 GPUs) behind a real exporter (package exporter: the same registry, the same pod
// labels). The recordings carry health frames, but their GPUs raised no XID: the stand-in
// is what gives the XID panels data (prometheus_e2e_test.go, xidPanels). GPUs 0 to 6 are healthy: power well
// under its limit, no thermal or power throttling, no ECC error, no row remap pending; one
// XID 13 (an application's own fault, which CuptiGPUXidError ignores) on GPU 1 gives the
// XID panel data without an alert. Then GPU 7 falls off the bus: XID 79, after which NVML
// answers GPU_IS_LOST, which CuptiGPUXidResetRequired and CuptiGPULost must report
// (expectedAlerts) and CuptiExporterSourceDown leave alone.
func serveHealth(t *testing.T) string {
	t.Helper()
	start := time.Now()
	srv := dgxh100.New()
	for i, d := range srv.Devices {
		healthyGPU(d.(*nvmlserver.Device), i, start)
	}
	// GPU 7 answers until its XID 79 is delivered (it was registered for XID events), then
	// its memory reads answer GPU_IS_LOST: the health source marks it lost.
	var offTheBus atomic.Bool
	lost := srv.Devices[7].(*nvmlserver.Device)
	memInfo := lost.GetMemoryInfo_v2Func
	lost.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
		if offTheBus.Load() {
			return nvml.Memory_v2{}, nvml.ERROR_GPU_IS_LOST
		}
		return memInfo()
	}
	var sent atomic.Int32
	xidDev := srv.Devices[1]
	srv.EventSetCreateFunc = func() (nvml.EventSet, nvml.Return) {
		return &mock.EventSet{
			FreeFunc: func() nvml.Return { return nvml.SUCCESS },
			WaitFunc: func(ms uint32) (nvml.EventData, nvml.Return) {
				switch sent.Add(1) {
				case 1:
					return nvml.EventData{Device: xidDev, EventType: nvml.EventTypeXidCriticalError, EventData: 13}, nvml.SUCCESS
				case 2:
					offTheBus.Store(true)
					return nvml.EventData{Device: lost, EventType: nvml.EventTypeXidCriticalError, EventData: 79}, nvml.SUCCESS
				}
				time.Sleep(time.Duration(ms) * time.Millisecond)
				return nvml.EventData{}, nvml.ERROR_TIMEOUT
			},
		}, nvml.SUCCESS
	}
	src := health.New(srv, nil, health.WithInterval(time.Second))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { src.Run(ctx); close(done) }()

	exp := exporter.New(slog.New(slog.DiscardHandler), exporter.WithoutRuntimeMetrics())
	exp.Register("health", src)
	// As pipeline/health.go reports the source's state (cupti_exporter_source_up).
	exp.RegisterStatus("health", healthStatus{src})
	return serveExporter(t, exp, func() { cancel(); <-done })
}

// healthStatus reports a health source's devices as the exporter's statuses, with the
// source's reason codes (gpu_lost, ...).
type healthStatus struct{ src *health.Source }

func (h healthStatus) Status() []exporter.Status {
	var out []exporter.Status
	for _, st := range h.src.Status() {
		out = append(out, exporter.Status{Source: "health", Device: st.Device, Ready: st.Ready, Reason: st.Detail, Code: st.Reason})
	}
	return out
}

// serveExporter serves exp's registry on a free local port until the test ends, then calls
// stop; it returns the address.
func serveExporter(t *testing.T, exp *exporter.Exporter, stop func()) string {
	t.Helper()
	return serveHandler(t, promhttp.HandlerFor(exp.Registry(), promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}), stop)
}

// serveHandler serves h on a free local port until the test ends, then calls stop (if any);
// it returns the address.
func serveHandler(t *testing.T, h http.Handler, stop func()) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: h}
	go hs.Serve(l)
	t.Cleanup(func() {
		hs.Close()
		if stop != nil {
			stop()
		}
	})
	return l.Addr().String()
}

// healthyGPU makes device i of the mock answer every NVML call the health source makes,
// with the readings of a healthy, moderately loaded H100.
func healthyGPU(d *nvmlserver.Device, i int, start time.Time) {
	ok := nvml.SUCCESS
	elapsed := func() float64 { return time.Since(start).Seconds() }
	d.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
		var p nvml.PciInfo
		for j, c := range fmt.Sprintf("00000000:%02X:00.0", 0x1b+i*0x10) {
			p.BusId[j] = int8(c)
		}
		return p, ok
	}
	d.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		return nvml.Memory{Total: 80 << 30, Used: uint64(3+i) << 30, Free: uint64(77-i) << 30}, ok
	}
	d.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) { return nvml.Memory_v2{Reserved: 600 << 20}, ok }
	d.GetEncoderUtilizationFunc = func() (uint32, uint32, nvml.Return) { return 0, 167000, ok }
	d.GetDecoderUtilizationFunc = func() (uint32, uint32, nvml.Return) { return 0, 167000, ok }
	d.GetBAR1MemoryInfoFunc = func() (nvml.BAR1Memory, nvml.Return) {
		return nvml.BAR1Memory{Bar1Total: 128 << 30, Bar1Used: 5 << 20}, ok
	}
	d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
		return nvml.Utilization{Gpu: uint32(40 + i), Memory: 7}, ok
	}
	d.GetPowerUsageFunc = func() (uint32, nvml.Return) { return 312500, ok }
	d.GetEnforcedPowerLimitFunc = func() (uint32, nvml.Return) { return 700000, ok }
	d.GetTotalEnergyConsumptionFunc = func() (uint64, nvml.Return) { return uint64(1e9 + 312500*elapsed()), ok }
	d.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return uint32(44 + i), ok }
	// the memory temperature and the clock-event counters (one call for all of these, as driver
	// 580 answers it): sync boost 10 % of the time, every other reason throttled long ago
	d.GetFieldValuesFunc = func(v []nvml.FieldValue) nvml.Return {
		for k := range v {
			f := &v[k]
			switch f.FieldId {
			case nvml.FI_DEV_MEMORY_TEMP:
				f.ValueType = uint32(nvml.VALUE_TYPE_UNSIGNED_INT)
				binary.LittleEndian.PutUint32(f.Value[:], 51)
			case nvml.FI_DEV_CLOCKS_EVENT_REASON_SYNC_BOOST:
				f.ValueType = uint32(nvml.VALUE_TYPE_UNSIGNED_LONG_LONG)
				binary.LittleEndian.PutUint64(f.Value[:], uint64(elapsed()*1e8))
			default:
				f.ValueType = uint32(nvml.VALUE_TYPE_UNSIGNED_LONG_LONG)
				binary.LittleEndian.PutUint64(f.Value[:], 5e9)
			}
		}
		return ok
	}
	d.GetClockInfoFunc = func(t nvml.ClockType) (uint32, nvml.Return) {
		if t == nvml.CLOCK_MEM {
			return 2619, ok
		}
		return 1755, ok
	}
	d.GetMaxClockInfoFunc = func(t nvml.ClockType) (uint32, nvml.Return) {
		if t == nvml.CLOCK_MEM {
			return 2619, ok
		}
		return 1980, ok
	}
	d.GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) { return 0x1, ok } // gpu_idle
	d.GetTotalEccErrorsFunc = func(t nvml.MemoryErrorType, _ nvml.EccCounterType) (uint64, nvml.Return) {
		if t == nvml.MEMORY_ERROR_TYPE_CORRECTED {
			return 3, ok
		}
		return 0, ok
	}
	d.GetRetiredPagesFunc = func(nvml.PageRetirementCause) ([]uint64, nvml.Return) { return nil, nvml.ERROR_NOT_SUPPORTED }
	d.GetRetiredPagesPendingStatusFunc = func() (nvml.EnableState, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	d.GetRemappedRowsFunc = func() (int, int, bool, bool, nvml.Return) { return 1, 0, false, false, ok }
	d.GetPcieReplayCounterFunc = func() (int, nvml.Return) { return 0, ok }
	d.GetNvLinkStateFunc = func(link int) (nvml.EnableState, nvml.Return) {
		if link >= 18 {
			return 0, nvml.ERROR_INVALID_ARGUMENT
		}
		return nvml.FEATURE_ENABLED, ok
	}
	d.GetNvLinkErrorCounterFunc = func(int, nvml.NvLinkErrorCounter) (uint64, nvml.Return) { return 0, ok }
	d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, ok }
	d.GetMPSComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, ok }
	d.GetSupportedEventTypesFunc = func() (uint64, nvml.Return) { return nvml.EventTypeXidCriticalError, ok }
	d.RegisterEventsFunc = func(uint64, nvml.EventSet) nvml.Return { return ok }
}
