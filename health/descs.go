package health

import "github.com/cupti-exporter/cupti-exporter/snapshot"

// deviceLabels are the labels of every device series, the same names and values as the
// PM-sampling series (gpu, uuid, model, pci_bus_id).
var deviceLabels = []string{"gpu", "uuid", "model", "pci_bus_id"}

func labels(extra ...string) []string { return append(append([]string{}, deviceLabels...), extra...) }

// descs are every family the health source can emit, in the order of its snapshots.
var descs = snapshot.NewTable()

func gauge(name, unit, otel, otelUnit, help string, extra ...string) *snapshot.Desc {
	return descs.Gauge(name, unit, otel, otelUnit, help, labels(extra...)...)
}

func counter(name, unit, otel, otelUnit, help string, extra ...string) *snapshot.Desc {
	return descs.Counter(name, unit, otel, otelUnit, help, labels(extra...)...)
}

// gpuTask makes d a point of hw.gpu.utilization: the hardware semantic conventions' one
// instrument for the fraction of time a GPU spends in a task, told apart by hw.gpu.task
// (general, encoder, decoder). NVML gives all three from one sampling, so the instrument is
// NVML's; PM sampling's engine-active ratio is cupti.graphics_engine.active (mapping).
func gpuTask(d *snapshot.Desc, task string) *snapshot.Desc {
	d.OTelAttributes = []snapshot.Label{{Name: "hw.gpu.task", Value: task}}
	return d
}

// The families of the health source. Names follow Prometheus conventions with base units;
// OTel names follow the hardware semantic conventions (hw.gpu.*) where one exists.
var (
	infoDesc           = descs.Gauge("cupti_nvml_info", "", "cupti.nvml.info", "1", "NVML and driver versions of the host (value 1; DCGM DRIVER_VERSION label).", "driver_version", "nvml_version", "cuda_driver_version")
	memoryUsedDesc     = gauge("cupti_gpu_memory_used_bytes", "bytes", "hw.gpu.memory.usage", "By", "Frame-buffer memory in use (NVML; DCGM FB_USED).")
	memoryFreeDesc     = gauge("cupti_gpu_memory_free_bytes", "bytes", "cupti.gpu.memory.free", "By", "Frame-buffer memory free (NVML; DCGM FB_FREE).")
	memoryTotalDesc    = gauge("cupti_gpu_memory_total_bytes", "bytes", "hw.gpu.memory.limit", "By", "Frame-buffer memory size (NVML).")
	memoryReservedDesc = gauge("cupti_gpu_memory_reserved_bytes", "bytes", "cupti.gpu.memory.reserved", "By", "Frame-buffer memory reserved by the driver (NVML v2; DCGM FB_RESERVED).")
	bar1UsedDesc       = gauge("cupti_gpu_bar1_memory_used_bytes", "bytes", "cupti.gpu.bar1.usage", "By", "BAR1 memory in use (NVML).")
	bar1TotalDesc      = gauge("cupti_gpu_bar1_memory_total_bytes", "bytes", "cupti.gpu.bar1.limit", "By", "BAR1 memory size (NVML).")
	nvmlUtilDesc       = gpuTask(gauge("cupti_nvml_gpu_utilization_ratio", "ratio", "hw.gpu.utilization", "1",
		"Fraction of NVML's sample period during which one or more kernels ran (nvmlDeviceGetUtilizationRates; DCGM GPU_UTIL). Coarse: a single tiny kernel counts as busy; see cupti_sm_active_ratio for how much of the GPU worked."), "general")
	nvmlCopyUtilDesc = gauge("cupti_nvml_memory_copy_utilization_ratio", "ratio", "cupti.nvml.memory_copy.utilization", "1",
		"Fraction of NVML's sample period during which device memory was being read or written (nvmlDeviceGetUtilizationRates; DCGM MEM_COPY_UTIL).")
	encUtilDesc    = gpuTask(gauge("cupti_nvml_encoder_utilization_ratio", "ratio", "hw.gpu.utilization", "1", "Video encoder utilisation (NVML; DCGM ENC_UTIL)."), "encoder")
	decUtilDesc    = gpuTask(gauge("cupti_nvml_decoder_utilization_ratio", "ratio", "hw.gpu.utilization", "1", "Video decoder utilisation (NVML; DCGM DEC_UTIL)."), "decoder")
	powerDesc      = gauge("cupti_gpu_power_watts", "watts", "hw.power", "W", "Power draw (NVML; DCGM POWER_USAGE).")
	powerLimitDesc = gauge("cupti_gpu_power_limit_watts", "watts", "cupti.gpu.power.limit", "W", "Enforced power limit (NVML).")
	energyDesc     = counter("cupti_gpu_energy_joules_total", "joules", "hw.energy", "J", "Energy consumed since the driver loaded (NVML; DCGM TOTAL_ENERGY_CONSUMPTION).")
	tempDesc       = gauge("cupti_gpu_temperature_celsius", "celsius", "hw.temperature", "Cel", "GPU die temperature (NVML; DCGM GPU_TEMP).")
	memTempDesc    = gauge("cupti_gpu_memory_temperature_celsius", "celsius", "cupti.gpu.memory.temperature", "Cel", "Memory (HBM) temperature (NVML field MEMORY_TEMP; DCGM MEMORY_TEMP).")
	clockDesc      = gauge("cupti_gpu_clock_hertz", "hertz", "cupti.gpu.clock.frequency", "Hz", "Current clock frequency by clock domain (sm, memory, graphics; DCGM SM_CLOCK, MEM_CLOCK).", "clock")
	maxClockDesc   = gauge("cupti_gpu_max_clock_hertz", "hertz", "cupti.gpu.clock.max_frequency", "Hz", "Maximum clock frequency by clock domain.", "clock")
	clockEventDesc = gauge("cupti_gpu_clock_event_reasons", "", "cupti.gpu.clock.event", "1",
		"1 while a clock-event (throttle) reason holds the clocks down, by reason (nvmlDeviceGetCurrentClocksEventReasons; DCGM CLOCKS_EVENT_REASONS as a state set).", "reason")
	violationDesc = counter("cupti_gpu_clock_event_seconds_total", "seconds", "cupti.gpu.clock.event.time", "s",
		"Time the clocks were held below the requested level, by reason (NVML clock-event field values, which replace nvmlDeviceGetViolationStatus; DCGM POWER_VIOLATION, THERMAL_VIOLATION, ...).", "reason")
	xidDesc     = counter("cupti_gpu_xid_errors_total", "", "hw.errors", "{error}", "XID errors by code, from NVML events (DCGM XID_ERRORS keeps only the last one).", "xid")
	xidLastDesc = gauge("cupti_gpu_xid_last_timestamp_seconds", "seconds", "cupti.gpu.xid.last_time", "s", "Unix time of the last XID error of each code.", "xid")
	eccDesc     = counter("cupti_gpu_ecc_errors_total", "", "cupti.gpu.ecc.errors", "{error}",
		"ECC errors by type (corrected, uncorrected) and counter (volatile: since the driver loaded; aggregate: lifetime) (DCGM ECC_SBE/DBE_VOL/AGG_TOTAL).", "type", "counter")
	retiredDesc        = gauge("cupti_gpu_retired_pages", "", "cupti.gpu.retired_pages", "{page}", "Pages retired by cause (single_bit: multiple single-bit errors, double_bit) (DCGM RETIRED_SBE/DBE).", "cause")
	retiredPendingDesc = gauge("cupti_gpu_retired_pages_pending", "", "cupti.gpu.retired_pages.pending", "1", "1 when a page retirement waits for a reboot (DCGM RETIRED_PENDING).")
	remappedDesc       = gauge("cupti_gpu_remapped_rows", "", "cupti.gpu.remapped_rows", "{row}", "Memory rows remapped, by cause (correctable, uncorrectable) (DCGM CORRECTABLE/UNCORRECTABLE_REMAPPED_ROWS).", "cause")
	remapPendingDesc   = gauge("cupti_gpu_remapped_rows_pending", "", "cupti.gpu.remapped_rows.pending", "1", "1 when a row remapping waits for a GPU reset (DCGM ROW_REMAP_PENDING).")
	remapFailedDesc    = gauge("cupti_gpu_remapped_rows_failed", "", "cupti.gpu.remapped_rows.failed", "1", "1 when a row remapping failed (DCGM ROW_REMAP_FAILURE).")
	pcieReplayDesc     = counter("cupti_gpu_pcie_replays_total", "", "cupti.gpu.pcie.replays", "{replay}", "PCIe replays (NVML; DCGM PCIE_REPLAY_COUNTER).")
	nvlinkUpDesc       = gauge("cupti_gpu_nvlink_up", "", "cupti.gpu.nvlink.up", "1", "1 when an NVLink link is active, by link.", "link")
	nvlinkErrDesc      = counter("cupti_gpu_nvlink_errors_total", "", "cupti.gpu.nvlink.errors", "{error}",
		"NVLink data-link errors by link and type (replay, recovery, crc_flit, crc_data, ecc_data) (DCGM NVLINK_*_ERROR_COUNT_TOTAL).", "link", "type")
	procMemDesc = gauge("cupti_gpu_process_memory_bytes", "bytes", "cupti.gpu.process.memory.usage", "By",
		"GPU memory used by a compute process (nvmlDeviceGetComputeRunningProcesses), with its pod when known.", "pid", "namespace", "pod", "container")
	migModeDesc = gauge("cupti_gpu_mig_enabled", "", "cupti.gpu.mig.enabled", "1", "1 when MIG mode is on.")
	migMemDesc  = gauge("cupti_gpu_mig_memory_used_bytes", "bytes", "cupti.gpu.mig.memory.usage", "By",
		"Memory in use in a MIG instance, by GPU instance, compute instance and profile.", "gpu_instance_id", "compute_instance_id", "profile")
	migMemTotalDesc = gauge("cupti_gpu_mig_memory_total_bytes", "bytes", "cupti.gpu.mig.memory.limit", "By",
		"Memory size of a MIG instance.", "gpu_instance_id", "compute_instance_id", "profile")
	gpmSMDesc = gauge("cupti_gpm_sm_active_ratio", "ratio", "cupti.gpm.sm.active", "1",
		"Fraction of SM cycles with a warp resident over the last health interval, from NVML GPM (GPM_METRIC_SM_UTIL; DCGM PROF_SM_ACTIVE); Hopper and newer, --health.gpm. Coarser than PM Sampling's cupti_sm_active_ratio; GPM is a separate unit, so it may keep reporting while a profiler holds the PM counters.", "source")
	gpmTensorDesc = gauge("cupti_gpm_tensor_active_ratio", "ratio", "cupti.gpm.tensor.active", "1",
		"Fraction of cycles any tensor pipe was active over the last health interval, from NVML GPM (GPM_METRIC_ANY_TENSOR_UTIL; DCGM PROF_PIPE_TENSOR_ACTIVE); --health.gpm.", "source")
	gpmDRAMDesc = gauge("cupti_gpm_dram_bandwidth_ratio", "ratio", "cupti.gpm.dram.bandwidth", "1",
		"DRAM bandwidth used as a fraction of peak over the last health interval, from NVML GPM (GPM_METRIC_DRAM_BW_UTIL; DCGM PROF_DRAM_ACTIVE); --health.gpm.", "source")
	collectDesc = descs.Gauge("cupti_health_collection_seconds", "seconds", "cupti.health.collection.duration", "s", "Time the last NVML collection of every device took.")
	errorsDesc  = descs.Counter("cupti_health_read_errors_total", "", "cupti.health.read.errors", "{error}", "NVML reads that failed with an error other than not-supported, by GPU and field.", "gpu", "field")
)

// Descs lists every family the health source can emit, for docs and dashboard checks.
func Descs() []*snapshot.Desc { return descs.Descs() }
