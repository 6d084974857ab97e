// Package health reads each GPU's health from NVML (through github.com/NVIDIA/go-nvml):
// memory, utilisation, power and energy, temperatures, clocks and clock-event (throttle)
// reasons, ECC and page retirement / row remapping, PCIe replays, NVLink link state and
// errors, per-process memory, MIG instances, and XID errors as events. With it one
// exporter replaces dcgm-exporter's basics (docs/health.md maps every dcgm-exporter
// default counter to ours).
//
// A Source polls every device on its own cadence (default 1 s) from one goroutine and
// publishes an immutable snapshot.Snapshot: a scrape never calls NVML. XID errors arrive on
// a second goroutine that waits on an NVML event set. NVML loads at run time; without the
// library, without GPUs, or with a GPU that fell off the bus (ERROR_GPU_IS_LOST), the
// Source reports it per device in Status (cupti_exporter_source_up and /readyz), keeps
// serving every other device, and retries.
//
// A field a device does not support (ERROR_NOT_SUPPORTED) is left out of the snapshot,
// never reported as 0, and logged once.
//
// A View (view.go) is what the exporter serves of a Source, or of a recording's health
// frames: without the detail no dashboard or alert reads, and with the series of reasons that
// never held only from their first non-zero value (docs/sizing.md "An idle GPU"). The Source
// itself, and so a recording, keeps everything.
package health
