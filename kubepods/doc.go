// Package kubepods tells which Kubernetes pod and container a traced process runs in,
// from its cgroup, with no change to the workload.
//
// Its package cgroup reads the text of /proc/<pid>/cgroup (the injection library sends its own in
// its hello) and finds the pod UID and the container ID that the kubelet and the runtime
// write into the path: cgroup v1 and v2, the systemd and cgroupfs drivers, containerd,
// CRI-O and Docker (cri-dockerd). A Resolver then maps them to names through a client-go
// shared informer that lists and watches only this node's pods (field selector
// spec.nodeName=<node>) and keeps each pod trimmed to its name, namespace, UID, node and
// container IDs. Lookup reads that cache and never blocks or does I/O; it answers Found,
// NotInPod (the cgroup names no pod: final) or Pending (a pod cgroup the cache does not
// hold yet: before the first list, or a container whose ID the kubelet has not reported
// yet; the caller asks again later). Container IDs come from
// status.{,init,ephemeral}containerStatuses[].containerID with the "containerd://"-style
// prefix stripped; static pods are found by the UID in their mirror pod's
// kubernetes.io/config.mirror annotation.
//
// The limit: a container in a private cgroup namespace (the default of containerd and
// CRI-O on cgroup v2 hosts) sees "0::/" in its own /proc/self/cgroup, so its hello names
// no pod and Lookup answers NotInPod; the downward-API values of the hello remain the
// fallback there (docs/kubernetes.md, "How processes are attributed to pods").
//
// Self-metrics (Snapshot): cupti_kubepods_synced, cupti_kubepods_pods,
// cupti_kubepods_lookups_total{result}, cupti_kubepods_watch_errors_total.
//
// RBAC: get, list and watch on pods (core group), cluster-wide (a ClusterRole: the field
// selector narrows what is sent, not what is allowed).
package kubepods
