// Package podresources attributes GPUs to the Kubernetes pods that hold them.
//
// It asks the kubelet's PodResources v1 API (a gRPC service on the Unix socket
// /var/lib/kubelet/pod-resources/kubelet.sock) which container was given which device
// of the NVIDIA resources (nvidia.com/gpu, nvidia.com/gpu.shared, nvidia.com/mig-*),
// and keeps the answer as an immutable map from device ID (a GPU UUID such as
// GPU-5c1f..., or a MIG UUID for MIG resources) to its owner.
//
// A Client refreshes the map in the background (every 10 s by default) and publishes it
// atomically, so Lookup never blocks and never does I/O. Every kubelet call has its own
// timeout, so a slow or missing kubelet cannot stall the refresh loop either; failures
// are counted by reason and exposed with Snapshot as self-metrics
// (cupti_podresources_up, cupti_podresources_errors_total{reason},
// cupti_podresources_last_refresh_timestamp_seconds). A pod that is gone disappears at
// the next successful refresh. When the kubelet stays unreachable, the last good map is
// kept for a bounded time (WithMaxStaleness) and then dropped, so stale owners are not
// reported forever.
//
// This map labels device series (the whole GPU) by the container it was allocated to.
// Traced processes are attributed separately, from their cgroup (package kubepods) or
// their hello: on a shared GPU the device series stay unattributed while each pod's
// kernel and copy series carry that pod (docs/kubernetes.md, "How processes are
// attributed to pods").
//
// GPUs and MIG devices given through Dynamic Resource Allocation appear in the same answer
// as DynamicResources (claim, driver, pool, device name; kubelet feature gate
// KubeletPodResourcesDynamicResources, beta and on by default since Kubernetes 1.34). With
// WithDRA the devices of NVIDIA's driver (GPUDriver) are mapped to their GPU or MIG UUID by
// a DeviceResolver (package resourceslices reads the driver's ResourceSlices) and join the
// map with the claim as Owner.Claim; Rebuild maps the last answer again when the resolver
// learns more. Each device's mapping is counted by result
// (cupti_podresources_dra_devices{result}), and cupti_podresources_claim_info names the
// claim and holder of every mapped device.
//
// Device IDs of time-sliced GPUs ("GPU-...::2") are reduced to the GPU UUID. A GPU given
// to containers of several pods (time-slicing, or one ResourceClaim in several pods) is
// ambiguous: Lookup reports it as not owned (ok is false) rather than guessing, and Owners
// lists every holder. Several containers of one pod give the pod, container left empty.
package podresources
