package demo

import (
	"fmt"
	"math"
	"time"

	"github.com/cupti-exporter/cupti-exporter/health"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// Synthetic health: one snapshot a second of both devices, in the health source's own
// families (health.Descs), following the workload phases.
const (
	synthHealthInterval = 1_000_000_000
	h200Memory          = 143771 << 20 // bytes, as nvidia-smi reports an H200
	h200BAR1            = 262144 << 20
	driverLoaded        = synthStart - 3600e9 // energy and violation counters start here
)

// healthLevel is a device's synthetic state in a phase, at full load.
type healthLevel struct {
	memGiB, util, copyUtil, watts, temp float64
	smMHz                               float64
}

var healthLevels = map[string]healthLevel{
	"idle":         {0.5, 0, 0, 75, 32, 345},
	"matmul":       {60, 1, 0.2, 650, 68, 1980},
	"copies":       {20, 0.4, 0.7, 180, 45, 1980},
	"tiny kernels": {4, 0.95, 0.05, 250, 50, 1980},
}

// synthHealth generates the health snapshots of a synthetic recording.
type synthHealth struct {
	devices []pmdata.Device
	// load is a device's share of full load (1: the phase's level, 0: idle); procPID is
	// the PID whose memory a device shows while t is inside the workload (0: none).
	load     func(dev int) float64
	procPID  func(dev int) string
	duration uint64 // ns, of the recording
	descs    map[string]*snapshot.Desc
	energy   []float64 // J per device since the driver loaded
	temp     []float64 // °C per device, following the phase's level with a lag
	viol     []float64 // s per device held at the power cap since the driver loaded
}

func newSynthHealth(devices []pmdata.Device, duration uint64, load func(int) float64, procPID func(int) string) (*synthHealth, error) {
	h := &synthHealth{devices: devices, duration: duration, load: load, procPID: procPID, descs: map[string]*snapshot.Desc{}}
	for _, d := range health.Descs() {
		h.descs[d.Name] = d
	}
	for _, n := range []string{"cupti_gpu_memory_used_bytes", "cupti_gpu_power_watts", "cupti_gpu_energy_joules_total", "cupti_nvml_info"} {
		if h.descs[n] == nil {
			return nil, fmt.Errorf("synthetic health: the health source has no family %s", n)
		}
	}
	for range devices {
		h.energy = append(h.energy, 2.1e6)
		h.temp = append(h.temp, 32)
		h.viol = append(h.viol, 12.5)
	}
	return h, nil
}

// snapshot is the health of the devices at t ns since the start.
func (h *synthHealth) snapshot(t uint64) *snapshot.Snapshot {
	now := time.Unix(0, int64(synthStart+t))
	start := time.Unix(0, int64(driverLoaded))
	fams := map[string][]snapshot.Sample{}
	add := func(name string, v float64, labels ...string) {
		s := snapshot.Sample{LabelValues: labels, Value: v}
		if h.descs[name].Kind == snapshot.KindCounter {
			s.Start = start
		}
		fams[name] = append(fams[name], s)
	}
	add("cupti_nvml_info", 1, "580.95.05", "12.580.95.05", "13000")
	for _, d := range h.devices {
		l := []string{fmt.Sprint(d.Index), d.UUID, d.Model, d.PCIBusID}
		dev := func(name string, v float64, extra ...string) {
			add(name, v, append(append([]string{}, l...), extra...)...)
		}
		load := h.load(d.Index)
		ph := phaseAt(t)
		lv := healthLevels[ph]
		idle := healthLevels["idle"]
		mix := func(busy, base float64) float64 { return base + (busy-base)*load }
		used := math.Round(mix(lv.memGiB, idle.memGiB) * (1 << 30))
		dev("cupti_gpu_memory_used_bytes", used)
		dev("cupti_gpu_memory_free_bytes", h200Memory-used)
		dev("cupti_gpu_memory_total_bytes", h200Memory)
		dev("cupti_gpu_memory_reserved_bytes", 593<<20)
		dev("cupti_gpu_bar1_memory_used_bytes", 5<<20)
		dev("cupti_gpu_bar1_memory_total_bytes", h200BAR1)
		dev("cupti_nvml_gpu_utilization_ratio", math.Round(100*lv.util*math.Min(1, load*1.3))/100)
		dev("cupti_nvml_memory_copy_utilization_ratio", math.Round(100*lv.copyUtil*load)/100)
		dev("cupti_nvml_encoder_utilization_ratio", 0)
		dev("cupti_nvml_decoder_utilization_ratio", 0)
		w := math.Round(mix(lv.watts, idle.watts)*1000) / 1000
		dev("cupti_gpu_power_watts", w)
		dev("cupti_gpu_power_limit_watts", 700)
		h.energy[d.Index] += w * synthHealthInterval / 1e9
		dev("cupti_gpu_energy_joules_total", math.Round(h.energy[d.Index]*1000)/1000)
		h.temp[d.Index] += (mix(lv.temp, idle.temp) - h.temp[d.Index]) * 0.25
		dev("cupti_gpu_temperature_celsius", math.Round(h.temp[d.Index]))
		dev("cupti_gpu_memory_temperature_celsius", math.Round(h.temp[d.Index]+6))
		for _, c := range []struct {
			name     string
			mhz, max float64
		}{{"sm", lv.smMHz, 1980}, {"memory", 3201, 3201}, {"graphics", lv.smMHz, 1980}} {
			dev("cupti_gpu_clock_hertz", c.mhz*1e6, c.name)
			dev("cupti_gpu_max_clock_hertz", c.max*1e6, c.name)
		}
		for _, r := range []string{"gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown", "sync_boost",
			"sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "display_clock_setting"} {
			v := 0.0
			// A device without load is idle whatever the phase, and never power-capped.
			if r == "gpu_idle" && (ph == "idle" || load == 0) || r == "sw_power_cap" && ph == "matmul" && d.Index == 0 && load > 0 {
				v = 1
			}
			dev("cupti_gpu_clock_event_reasons", v, r)
		}
		if ph == "matmul" && d.Index == 0 && load > 0 { // held at the power cap now and then
			h.viol[d.Index] += 0.08
		}
		for _, p := range []string{"power", "thermal", "sync_boost", "board_limit", "low_utilization", "reliability", "app_clocks", "base_clocks",
			"hw_thermal_slowdown", "hw_power_brake_slowdown"} {
			v := 0.0
			if p == "power" {
				v = math.Round(h.viol[d.Index]*1000) / 1000
			}
			dev("cupti_gpu_clock_event_seconds_total", v, p)
		}
		for _, typ := range []string{"corrected", "uncorrected"} {
			for _, c := range []string{"volatile", "aggregate"} {
				dev("cupti_gpu_ecc_errors_total", 0, typ, c)
			}
		}
		dev("cupti_gpu_remapped_rows", 0, "correctable")
		dev("cupti_gpu_remapped_rows", 0, "uncorrectable")
		dev("cupti_gpu_remapped_rows_pending", 0)
		dev("cupti_gpu_remapped_rows_failed", 0)
		dev("cupti_gpu_pcie_replays_total", 0)
		if pid := h.procPID(d.Index); pid != "" && t >= 1e9 && t < h.duration-1e9 { // the process of the activity records, while connected
			dev("cupti_gpu_process_memory_bytes", used-idle.memGiB*(1<<30), pid, "", "", "")
		}
		dev("cupti_gpu_mig_enabled", 0)
	}
	add("cupti_health_collection_seconds", 0.0011)
	snap := &snapshot.Snapshot{Time: now}
	for _, d := range health.Descs() {
		if s := fams[d.Name]; len(s) > 0 {
			snap.Families = append(snap.Families, snapshot.Family{Desc: d, Samples: s})
		}
	}
	return snap
}
