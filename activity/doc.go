// Package activity aggregates CUPTI Activity API records (kernels, memcpys, memsets) that
// traced processes stream to the exporter, into the snapshot model of package mapping.
//
// The records come from the injection library (activity/inject) over the Unix socket
// served by activity/receiver, which decodes them with activity/wire; a recording replay
// feeds the same Aggregator methods (Connect, Add, Disconnect), so live and replayed data
// take one path.
//
// An Aggregator keeps, under one mutex:
//
//   - kernel-duration histograms by GPU, pod and shortened kernel name (ShortKernelName),
//     for the top K names by recent GPU time, the rest merged as kernel="other";
//   - GPU time and a kernel-duration histogram per pod and GPU;
//   - memcpy and memset byte counters and duration histograms by GPU, pod, copy and memory
//     kind;
//   - accounting: records by kind, drops by reason, connected processes, connections.
//
// Histograms have the classic buckets of DefaultBuckets (WithHistogramBuckets) and native (exponential) buckets
// of schema 3 (growth factor 1.09, what client_golang picks for a bucket factor of 1.1),
// whose resolution halves when their span passes the bucket cap. Observing is a few plain
// increments under the lock; Snapshot copies them into snapshot.HistogramValue.
//
// Every workload family carries the pod labels namespace, pod and container of the
// process (pods.go): a PodResolver's answer (WithPodResolver, package kubepods in node
// mode) on the cgroup the kernel gave for a verified process (identity.go), else the
// hello's POD_NAME/POD_NAMESPACE/CONTAINER_NAME when both POD_NAME and POD_NAMESPACE are
// set and hellos are trusted (WithTrustHelloPods, or a recording's process), else empty. A
// pending answer is asked again on later records (WithPodRetry). Series of pods with no
// connected process expire after the series TTL. Kernel names are shortened before the lock
// is taken (names.go), so no connection holds it while it parses untrusted text.
//
// docs/activity.md lists every family, its labels and its cardinality bound.
package activity
