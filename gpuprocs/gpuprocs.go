// Package gpuprocs is what the exporter saw of the compute processes on a GPU over a period:
// NVML's running list and, where the driver has them, each process's share of SM time
// (nvmlDeviceGetProcessUtilization). The health source produces it, the attribution join
// consumes it (to give the time and the counters of processes that load no injection
// library classes of their own, docs/attribution.md, "Untraced processes") and recordings
// keep it. It imports nothing of the project.
package gpuprocs

import "time"

// Observation is what one collection saw of the compute processes on one GPU.
type Observation struct {
	GPU, UUID  string    // the device, by UUID or else by gpu label
	Start, End time.Time // the previous collection of this GPU, this one
	// Shares reports whether SMShare was read for this period (the driver supports
	// per-process utilisation and answered); without it every SMShare is NaN and the
	// processes' activity is unknown.
	Shares bool
	// MIG: the GPU is split into MIG instances; its processes run side by side in them, each
	// in its own instance, not in turns on the whole GPU (the join then splits nothing by
	// process, docs/attribution.md, "MIG").
	MIG       bool
	Processes []Process
}

// Process is one compute process on a GPU.
type Process struct {
	PID uint32 // in the PID namespace NVML answers in (the host's with hostPID)
	// SMShare is the share of the period's time a kernel of the process ran (0..1): the mean
	// of NVML's per-process SM utilisation samples since the last collection, 0 when NVML
	// has no sample of it (it reports only processes that ran); NaN when unknown.
	SMShare float64
	// The process's pod, resolved from its cgroup ("" when not in a pod or unresolved).
	Namespace, Pod, Container string
	// MPS is the process's part in NVIDIA's Multi-Process Service: MPSServer, MPSClient, or
	// "" (not under MPS, or not known).
	MPS string
}

// MPS roles (Process.MPS). Under MPS the clients' kernels run in the server's context, so
// NVML lists the server beside its clients; it has no work of its own.
const (
	MPSServer = "server" // nvidia-cuda-mps-server, known by its command line
	MPSClient = "client" // listed by nvmlDeviceGetMPSComputeRunningProcesses
)
