package webhook

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Keys the webhook reads and writes.
const (
	// InjectKey opts a pod (annotation) or a namespace (label) in ("enabled") or out
	// ("disabled"); the pod's annotation wins over its namespace's label.
	InjectKey = "cupti-exporter.io/inject"
	// WiringKey is set on every pod the webhook wired: "node" or "sidecar".
	WiringKey = "cupti-exporter.io/wiring"
	// WiringReasonKey says why that wiring was chosen.
	WiringReasonKey = "cupti-exporter.io/wiring-reason"
	// KeptInjectionKey names the containers (comma-separated) whose own
	// CUDA_INJECTION64_PATH was kept, so they load another tool and not the library.
	KeptInjectionKey = "cupti-exporter.io/kept-injection"
	// SkippedKey names containers left unwired for another reason (a mount at the
	// wiring's path), with the reason.
	SkippedKey = "cupti-exporter.io/skipped"
	// PodSecurityEnforceKey is the namespace label of the Pod Security admission.
	PodSecurityEnforceKey = "pod-security.kubernetes.io/enforce"

	injectEnabled  = "enabled"
	injectDisabled = "disabled"
)

// DefaultGPUResources are the extended resources that mark a GPU container: whole GPUs,
// time-sliced ones (renameByDefault) and MIG instances (shared ones included).
var DefaultGPUResources = []string{"nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/mig-*"}

// Results of an admission, the result label of cupti_webhook_admissions_total.
const (
	ResultWiredNode         = "wired_node"
	ResultWiredSidecar      = "wired_sidecar"
	ResultExcludedNamespace = "excluded_namespace"
	ResultOwnPod            = "own_pod"
	ResultOptedOut          = "opted_out"
	ResultNotOptedIn        = "not_opted_in"
	ResultNotGPU            = "not_gpu"
	ResultAlreadyWired      = "already_wired"
	ResultWiredByHand       = "wired_by_hand"
	ResultNothingToWire     = "nothing_to_wire"
	ResultNamespaceUnknown  = "namespace_unknown"
	ResultNotAPod           = "not_a_pod"
	ResultBadRequest        = "bad_request"
)

// Results lists every result, so each series exists from the start.
var Results = []string{
	ResultWiredNode, ResultWiredSidecar, ResultExcludedNamespace, ResultOwnPod, ResultOptedOut,
	ResultNotOptedIn, ResultNotGPU, ResultAlreadyWired, ResultWiredByHand, ResultNothingToWire,
	ResultNamespaceUnknown, ResultNotAPod, ResultBadRequest,
}

// resourceMatcher matches extended resource names: exact, or a prefix when the pattern ends
// in "*".
type resourceMatcher []string

func (m resourceMatcher) matches(name corev1.ResourceName) bool {
	for _, p := range m {
		if prefix, ok := strings.CutSuffix(p, "*"); ok {
			if strings.HasPrefix(string(name), prefix) {
				return true
			}
		} else if string(name) == p {
			return true
		}
	}
	return false
}

// requestsGPU reports whether c requests or limits a matching resource.
func (m resourceMatcher) requestsGPU(c *corev1.Container) bool {
	for name := range c.Resources.Limits {
		if m.matches(name) {
			return true
		}
	}
	for name := range c.Resources.Requests {
		if m.matches(name) {
			return true
		}
	}
	return false
}

// containerRef is one container of a pod spec: an init container or a regular one.
type containerRef struct {
	init  bool
	index int
}

// gpuContainers returns the containers requesting a GPU resource, init containers first.
func (m resourceMatcher) gpuContainers(spec *corev1.PodSpec) []containerRef {
	var out []containerRef
	for i := range spec.InitContainers {
		if m.requestsGPU(&spec.InitContainers[i]) {
			out = append(out, containerRef{init: true, index: i})
		}
	}
	for i := range spec.Containers {
		if m.requestsGPU(&spec.Containers[i]) {
			out = append(out, containerRef{index: i})
		}
	}
	return out
}

// allContainers returns every regular container: an opted-in pod that requests no GPU
// resource by name (a DRA claim, for example) is wired in all of them.
func allContainers(spec *corev1.PodSpec) []containerRef {
	out := make([]containerRef, len(spec.Containers))
	for i := range spec.Containers {
		out[i] = containerRef{index: i}
	}
	return out
}

// optIn decides from the pod's annotation, else the namespace's label: the result is
// ResultOptedOut, ResultNotOptedIn or "" (opted in); explicit tells whether the pod's own
// annotation opted it in.
func optIn(pod *corev1.Pod, nsLabels map[string]string) (result string, explicit bool) {
	switch pod.Annotations[InjectKey] {
	case injectEnabled:
		return "", true
	case injectDisabled:
		return ResultOptedOut, false
	}
	switch nsLabels[InjectKey] {
	case injectEnabled:
		return "", false
	case injectDisabled:
		return ResultOptedOut, false
	}
	return ResultNotOptedIn, false
}

// isOwnPod reports whether pod carries every one of the exporter's own labels.
func isOwnPod(pod *corev1.Pod, own map[string]string) bool {
	if len(own) == 0 {
		return false
	}
	for k, v := range own {
		if pod.Labels[k] != v {
			return false
		}
	}
	return true
}

// hostPathRefused reports whether a Pod Security level refuses hostPath volumes.
func hostPathRefused(level string) bool {
	return level == "baseline" || level == "restricted"
}
