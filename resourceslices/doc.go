// Package resourceslices maps the GPUs and MIG devices that NVIDIA's DRA driver
// (gpu.nvidia.com, k8s-dra-driver-gpu) allocates through ResourceClaims to their UUIDs.
//
// The kubelet's PodResources API names a device that DRA gave a container by driver, pool
// and device name ("gpu-0", "gpu-1-mig-1g10gb-19-0"); the UUID that device series carry is
// in the driver's ResourceSlices (resource.k8s.io/v1, Kubernetes 1.34 or later). An
// Informer lists and watches the slices of one driver on one node only (field selector
// spec.driver=<driver>,spec.nodeName=<node>), keeps each trimmed to its pool, generation and
// the device attributes it reads (uuid, type, parentUUID), and Resolve answers from that
// cache: the device's uuid attribute (a GPU-... or, for a MIG device that exists, MIG-...),
// or for a MIG partition the driver creates on demand (listed with type "mig" and
// parentUUID but no uuid, and named gpu-<minor>-mig-<profile>-<profile ID>-<placement
// start>) the MIG UUID that NVML reports for that GPU instance profile and placement on
// the parent GPU (WithMIGLookup; package health reads it). Only a pool's newest
// generation counts.
//
// A list or watch that fails (RBAC missing: forbidden) is counted in
// cupti_resourceslices_watch_errors_total{reason} and logged, and the cache keeps what it
// had; devices it cannot map stay unattributed and are counted by podresources. A cluster
// that does not serve resource.k8s.io/v1 ResourceSlices (before Kubernetes 1.34) is not
// listed at all: Run asks discovery again every 5 minutes and counts each answer as
// not_served. Nothing here removes a device series.
//
// Self-metrics (Snapshot): cupti_resourceslices_synced, cupti_resourceslices_devices{type},
// cupti_resourceslices_watch_errors_total{reason}.
//
// RBAC: get, list and watch on resourceslices in group resource.k8s.io, cluster-wide (a
// ClusterRole: the field selector narrows what is sent, not what is allowed).
package resourceslices
