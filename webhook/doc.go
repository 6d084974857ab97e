// Package webhook is a Kubernetes mutating admission webhook that loads the injection
// library into GPU pods, so that kernel and copy metrics need no change to the workload
// (docs/kubernetes.md, "The admission webhook").
//
// One admission, in order (select.go, mutate.go):
//
//   - pods of excluded namespaces (kube-system and the configured ones) and the exporter's
//     own pods are left alone;
//   - the pod's annotation cupti-exporter.io/inject ("enabled" or "disabled") decides, else
//     its namespace's label of the same key; anything else is not opted in;
//   - a pod that carries the webhook's cupti-exporter.io/wiring annotation (mutated before),
//     or that was wired by hand (a container's CUDA_INJECTION64_PATH names the injection
//     library, or the pod has a volume of the wiring's name), is left unchanged: mutating
//     twice changes nothing, so reinvocationPolicy IfNeeded is safe;
//   - the GPU containers are those (init containers too) requesting a configured resource
//     (nvidia.com/gpu, nvidia.com/gpu.shared, nvidia.com/mig-*); an opted-in pod without any
//     wires all its containers (GPUs through DRA claims);
//   - the wiring is "node" (hostPath to the DaemonSet's folder) unless the namespace's
//     pod-security.kubernetes.io/enforce label (or the assumed default for unlabelled
//     namespaces) is baseline or restricted, which refuse hostPath: then "sidecar" (the
//     exporter as a native sidecar, its containers made non-root so "restricted" admits
//     them);
//   - every GPU container gets the wiring's env and mounts, plus POD_NAME and POD_NAMESPACE
//     (downward API) and CONTAINER_NAME (its own name), each only where absent; a container
//     whose own CUDA_INJECTION64_PATH names another library keeps it and gets nothing (the
//     cupti-exporter.io/kept-injection annotation names it), as does one with another mount
//     at the wiring's path (a duplicate path would make the pod invalid).
//
// The wiring itself (Config, wiring.go) is a file the chart renders from the templates that
// document the hand edits, so webhook and docs cannot drift. The answer is always
// "allowed": a pod the webhook cannot wire is admitted unwired, and the chart registers it
// with failurePolicy Ignore and a short timeout, so an outage never blocks a workload. The
// JSON patch only adds (patch.go): fields this build does not know are never touched.
//
// TLS (certs.go, rotate.go): either files (cert-manager, reloaded when they change) or a
// CertRotator that keeps a self-signed CA and a serving certificate in a Secret, renews
// each when a third of its validity is left, keeps the previous CA in the bundle until it
// expires, and patches the bundle into the MutatingWebhookConfiguration before serving a
// certificate it signs. Several replicas share the Secret through optimistic concurrency.
//
// Self-metrics: cupti_webhook_admissions_total{result}, cupti_webhook_admission_duration_seconds,
// cupti_webhook_namespace_lookups_total{result}, cupti_webhook_certificate_expiry_timestamp_seconds,
// cupti_webhook_certificate_rotations_total, cupti_webhook_certificate_errors_total.
//
// RBAC: get, list, watch on namespaces (the Pod Security label; an informer); get, create,
// update on its Secret; get, update on its MutatingWebhookConfiguration.
package webhook
