package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fakeNamespaces answers labels from a map; a missing namespace is an error.
type fakeNamespaces map[string]map[string]string

func (f fakeNamespaces) Labels(_ context.Context, name string) (map[string]string, error) {
	l, ok := f[name]
	if !ok {
		return nil, errors.New("no such namespace")
	}
	return l, nil
}

var testNamespaces = fakeNamespaces{
	"ml":          {InjectKey: "enabled", PodSecurityEnforceKey: "privileged"},
	"ml-default":  {InjectKey: "enabled"},
	"restricted":  {InjectKey: "enabled", PodSecurityEnforceKey: "restricted"},
	"baseline":    {InjectKey: "enabled", PodSecurityEnforceKey: "baseline"},
	"plain":       {},
	"off":         {InjectKey: "disabled"},
	"kube-system": {InjectKey: "enabled"},
}

// testMutator uses the chart's wiring at default values (testdata/wiring.yaml, kept equal
// to the chart by helm's TestWebhookWiringFile).
func testMutator(t testing.TB, opts ...Option) *Mutator {
	t.Helper()
	cfg, err := LoadConfig("testdata/wiring.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMutator(cfg, testNamespaces, append([]Option{WithOwnLabels(map[string]string{"app.kubernetes.io/name": "cupti-exporter"})}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func gpuPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "trainer", Image: "pytorch", Resources: corev1.ResourceRequirements{
				Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}},
			{Name: "logger", Image: "fluentbit"},
		}},
	}
}

// mutate runs the mutator and applies its patch with an RFC 6902 implementation.
func mutate(t *testing.T, m *Mutator, pod *corev1.Pod, ns string) (*corev1.Pod, string) {
	t.Helper()
	p, result, err := m.Mutate(context.Background(), pod, ns)
	if err != nil {
		t.Fatalf("%s: %v", result, err)
	}
	if p == nil {
		return pod, result
	}
	return applyPatch(t, pod, p), result
}

func applyPatch(t testing.TB, pod *corev1.Pod, p []byte) *corev1.Pod {
	t.Helper()
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	decoded, err := jsonpatch.DecodePatch(p)
	if err != nil {
		t.Fatalf("invalid JSON patch %s: %v", p, err)
	}
	out, err := decoded.Apply(raw)
	if err != nil {
		t.Fatalf("patch %s does not apply: %v", p, err)
	}
	var got corev1.Pod
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	return &got
}

func env(c corev1.Container) map[string]corev1.EnvVar {
	out := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		if _, dup := out[e.Name]; dup {
			panic("duplicate env " + e.Name)
		}
		out[e.Name] = e
	}
	return out
}

// checkWired checks a container carries every variable the library needs.
func checkWired(t *testing.T, c corev1.Container, socket string) {
	t.Helper()
	e := env(c)
	if e["CUDA_INJECTION64_PATH"].Value != "/run/cupti-exporter/libcupti_exporter_inject.so" || e["CUPTI_EXPORTER_SOCKET"].Value != socket {
		t.Errorf("%s: env %+v", c.Name, c.Env)
	}
	if f := e["POD_NAME"].ValueFrom; f == nil || f.FieldRef.FieldPath != "metadata.name" {
		t.Errorf("%s: POD_NAME %+v", c.Name, e["POD_NAME"])
	}
	if f := e["POD_NAMESPACE"].ValueFrom; f == nil || f.FieldRef.FieldPath != "metadata.namespace" {
		t.Errorf("%s: POD_NAMESPACE %+v", c.Name, e["POD_NAMESPACE"])
	}
	if e["CONTAINER_NAME"].Value != c.Name {
		t.Errorf("%s: CONTAINER_NAME %q", c.Name, e["CONTAINER_NAME"].Value)
	}
}

func TestNodeWiring(t *testing.T) {
	m := testMutator(t)
	got, result := mutate(t, m, gpuPod("a"), "ml")
	if result != ResultWiredNode {
		t.Fatalf("result %s", result)
	}
	trainer, logger := got.Spec.Containers[0], got.Spec.Containers[1]
	checkWired(t, trainer, "/run/cupti-exporter/activity.sock")
	if len(trainer.VolumeMounts) != 1 || trainer.VolumeMounts[0].MountPath != "/run/cupti-exporter" || !trainer.VolumeMounts[0].ReadOnly {
		t.Errorf("mounts %+v", trainer.VolumeMounts)
	}
	if len(logger.Env) != 0 || len(logger.VolumeMounts) != 0 {
		t.Errorf("a container without a GPU was changed: %+v", logger)
	}
	if len(got.Spec.Volumes) != 1 || got.Spec.Volumes[0].HostPath == nil || *got.Spec.Volumes[0].HostPath.Type != corev1.HostPathDirectoryOrCreate {
		t.Errorf("volumes %+v", got.Spec.Volumes)
	}
	if len(got.Spec.InitContainers) != 0 {
		t.Errorf("node wiring added init containers %+v", got.Spec.InitContainers)
	}
	if got.Annotations[WiringKey] != "node" || !strings.Contains(got.Annotations[WiringReasonKey], `"privileged"`) {
		t.Errorf("annotations %v", got.Annotations)
	}
	// Unlabelled for Pod Security: the default level (privileged) allows hostPath.
	if _, result := mutate(t, m, gpuPod("b"), "ml-default"); result != ResultWiredNode {
		t.Errorf("unlabelled Pod Security: %s", result)
	}
}

func TestSidecarWiring(t *testing.T) {
	for _, ns := range []string{"restricted", "baseline"} {
		got, result := mutate(t, testMutator(t), gpuPod("a"), ns)
		if result != ResultWiredSidecar {
			t.Fatalf("%s: result %s", ns, result)
		}
		checkWired(t, got.Spec.Containers[0], "/run/cupti-exporter/activity.sock")
		if env(got.Spec.Containers[0])["CUPTI_EXPORTER_KINDS"].Value == "" {
			t.Error("sidecar env lacks CUPTI_EXPORTER_KINDS")
		}
		ics := got.Spec.InitContainers
		if len(ics) != 2 || ics[0].Name != "copy-injection-library" || ics[1].Name != "cupti-exporter" || *ics[1].RestartPolicy != corev1.ContainerRestartPolicyAlways {
			t.Fatalf("init containers %+v", ics)
		}
		for _, c := range ics {
			sc := c.SecurityContext
			if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser != 65532 {
				t.Errorf("%s: injected container %s must run as non-root: %+v", ns, c.Name, sc)
			}
		}
		if v := got.Spec.Volumes; len(v) != 1 || v[0].EmptyDir == nil {
			t.Errorf("volumes %+v", v)
		}
		if got.Labels["cupti-exporter.io/sidecar"] != "true" || got.Annotations[WiringKey] != "sidecar" {
			t.Errorf("labels %v annotations %v", got.Labels, got.Annotations)
		}
	}
	// Where the default level refuses hostPath, unlabelled namespaces get the sidecar too;
	// without the DaemonSet every pod does.
	if _, result := mutate(t, testMutator(t, WithDefaultPodSecurity("baseline")), gpuPod("a"), "ml-default"); result != ResultWiredSidecar {
		t.Errorf("default baseline: %s", result)
	}
	if _, result := mutate(t, testMutator(t, WithSidecarOnly(true)), gpuPod("a"), "ml"); result != ResultWiredSidecar {
		t.Errorf("sidecar only: %s", result)
	}
}

// TestMutateTwiceUnchanged: a second admission (reinvocation, or a pod re-created from a
// wired spec) changes nothing.
func TestMutateTwiceUnchanged(t *testing.T) {
	m := testMutator(t)
	for _, ns := range []string{"ml", "restricted"} {
		once, _ := mutate(t, m, gpuPod("a"), ns)
		p, result, err := m.Mutate(context.Background(), once, ns)
		if p != nil || err != nil || result != ResultAlreadyWired {
			t.Errorf("%s: second admission: patch %s, result %s, err %v", ns, p, result, err)
		}
		// Without the annotation (stripped by some tool) the wiring itself is recognised.
		delete(once.Annotations, WiringKey)
		if p, result, _ := m.Mutate(context.Background(), once, ns); p != nil || result != ResultWiredByHand {
			t.Errorf("%s: wired pod without annotation: patch %s, result %s", ns, p, result)
		}
	}
}

func TestSelection(t *testing.T) {
	m := testMutator(t)
	mig := gpuPod("mig")
	mig.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/mig-1g.10gb": resource.MustParse("1")}
	shared := gpuPod("shared")
	shared.Spec.Containers[0].Resources.Limits = nil
	shared.Spec.Containers[0].Resources.Requests = corev1.ResourceList{"nvidia.com/gpu.shared": resource.MustParse("1")}
	cpu := gpuPod("cpu")
	cpu.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"cpu": resource.MustParse("1")}
	annotated := func(v string) *corev1.Pod {
		p := gpuPod("annotated")
		p.Annotations = map[string]string{InjectKey: v}
		return p
	}
	own := gpuPod("own")
	own.Labels = map[string]string{"app.kubernetes.io/name": "cupti-exporter"}
	for _, c := range []struct {
		name string
		pod  *corev1.Pod
		ns   string
		want string
	}{
		{"labelled namespace", gpuPod("a"), "ml", ResultWiredNode},
		{"MIG instance", mig, "ml", ResultWiredNode},
		{"time-sliced GPU (request only)", shared, "ml", ResultWiredNode},
		{"no GPU", cpu, "ml", ResultNotGPU},
		{"unlabelled namespace", gpuPod("a"), "plain", ResultNotOptedIn},
		{"namespace opted out", gpuPod("a"), "off", ResultOptedOut},
		{"pod opted out", annotated("disabled"), "ml", ResultOptedOut},
		{"pod opted in, unlabelled namespace", annotated("enabled"), "plain", ResultWiredNode},
		{"pod opted in, namespace opted out", annotated("enabled"), "off", ResultWiredNode},
		{"unknown annotation value", annotated("yes"), "plain", ResultNotOptedIn},
		{"kube-system", gpuPod("a"), "kube-system", ResultExcludedNamespace},
		{"own pod", own, "ml", ResultOwnPod},
		{"namespace unreadable", gpuPod("a"), "gone", ResultNamespaceUnknown},
	} {
		p, result, _ := m.Mutate(context.Background(), c.pod, c.ns)
		if result != c.want {
			t.Errorf("%s: result %s; want %s", c.name, result, c.want)
		}
		if (p != nil) != (c.want == ResultWiredNode) {
			t.Errorf("%s: patch %s", c.name, p)
		}
	}
	// A configured list replaces the default.
	custom := testMutator(t, WithGPUResources([]string{"amd.com/gpu"}), WithExcludedNamespaces([]string{"ml"}))
	if _, result, _ := custom.Mutate(context.Background(), gpuPod("a"), "ml-default"); result != ResultNotGPU {
		t.Errorf("custom resources: %s", result)
	}
	if _, result, _ := custom.Mutate(context.Background(), gpuPod("a"), "ml"); result != ResultExcludedNamespace {
		t.Errorf("excluded namespace: %s", result)
	}
}

// TestWiredByHandUnchanged: a pod with the documented hand edits is left as it is.
func TestWiredByHandUnchanged(t *testing.T) {
	m := testMutator(t)
	pod := gpuPod("manual")
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "CUDA_INJECTION64_PATH", Value: "/run/cupti-exporter/libcupti_exporter_inject.so"}}
	if p, result, _ := m.Mutate(context.Background(), pod, "ml"); p != nil || result != ResultWiredByHand {
		t.Errorf("hand-wired pod: patch %s, result %s", p, result)
	}
	// The chart's sidecar templates (volume cupti-exporter-run) count as hand wiring too.
	pod = gpuPod("sidecar")
	pod.Spec.Volumes = []corev1.Volume{{Name: "cupti-exporter-run"}}
	if p, result, _ := m.Mutate(context.Background(), pod, "restricted"); p != nil || result != ResultWiredByHand {
		t.Errorf("sidecar by hand: patch %s, result %s", p, result)
	}
}

// TestKeepsOwnInjectionPath: another tool's library is kept, the container left alone and
// named in an annotation; other GPU containers are still wired.
func TestKeepsOwnInjectionPath(t *testing.T) {
	m := testMutator(t)
	pod := gpuPod("nsight")
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "CUDA_INJECTION64_PATH", Value: "/opt/nsight/libToolsInjection64.so"}}
	got, result := mutate(t, m, pod, "ml")
	if result != ResultNothingToWire || got.Annotations[KeptInjectionKey] != "trainer" || got.Annotations[WiringKey] != "" {
		t.Errorf("result %s, annotations %v", result, got.Annotations)
	}
	if len(got.Spec.Containers[0].Env) != 1 || len(got.Spec.Volumes) != 0 {
		t.Errorf("the container with its own library was changed: %+v", got.Spec)
	}
	if p, _, _ := m.Mutate(context.Background(), got, "ml"); p != nil {
		t.Errorf("second admission patched %s", p)
	}
	pod = gpuPod("two")
	pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "CUDA_INJECTION64_PATH", Value: "/opt/other.so"}}
	pod.Spec.Containers[1].Resources = pod.Spec.Containers[0].Resources
	got, result = mutate(t, m, pod, "ml")
	if result != ResultWiredNode || got.Annotations[KeptInjectionKey] != "trainer" {
		t.Fatalf("result %s annotations %v", result, got.Annotations)
	}
	checkWired(t, got.Spec.Containers[1], "/run/cupti-exporter/activity.sock")
	if env(got.Spec.Containers[0])["CUDA_INJECTION64_PATH"].Value != "/opt/other.so" {
		t.Error("the user's own CUDA_INJECTION64_PATH was replaced")
	}
}

// TestMountConflictSkipsContainer: a container already mounting something at the wiring's
// path would make the pod invalid (duplicate mount path): it is skipped and named.
func TestMountConflictSkipsContainer(t *testing.T) {
	pod := gpuPod("conflict")
	pod.Spec.Volumes = []corev1.Volume{{Name: "run", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "run", MountPath: "/run/cupti-exporter"}}
	got, result := mutate(t, testMutator(t), pod, "ml")
	if result != ResultNothingToWire || !strings.Contains(got.Annotations[SkippedKey], "trainer: /run/cupti-exporter") {
		t.Errorf("result %s annotations %v", result, got.Annotations)
	}
	if len(got.Spec.Containers[0].VolumeMounts) != 1 || len(got.Spec.Volumes) != 1 {
		t.Errorf("pod changed: %+v", got.Spec)
	}
}

// TestAnnotatedPodWithoutGPUResource: an explicitly opted-in pod that names no GPU resource
// (a DRA claim) is wired in every container.
func TestAnnotatedPodWithoutGPUResource(t *testing.T) {
	pod := gpuPod("dra")
	pod.Annotations = map[string]string{InjectKey: "enabled", "other.io/x": "y"}
	pod.Spec.Containers[0].Resources = corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}
	got, result := mutate(t, testMutator(t), pod, "plain")
	if result != ResultWiredNode {
		t.Fatalf("result %s", result)
	}
	for _, c := range got.Spec.Containers {
		checkWired(t, c, "/run/cupti-exporter/activity.sock")
	}
	if got.Annotations["other.io/x"] != "y" || got.Annotations[InjectKey] != "enabled" {
		t.Errorf("existing annotations lost: %v", got.Annotations)
	}
	// Without the pod's own annotation, the namespace label alone needs a GPU resource.
	pod.Annotations = nil
	if _, result, _ := testMutator(t).Mutate(context.Background(), pod, "ml"); result != ResultNotGPU {
		t.Errorf("namespace opt-in without GPU: %s", result)
	}
}

// TestGPUInitContainerAfterSidecar: a GPU init container is wired and runs after the
// injected sidecar (its index shifts); the pod's own env and mounts are kept.
func TestGPUInitContainerAfterSidecar(t *testing.T) {
	pod := gpuPod("init")
	pod.Spec.InitContainers = []corev1.Container{
		{Name: "setup"},
		{Name: "warmup", Env: []corev1.EnvVar{{Name: "X", Value: "1"}, {Name: "POD_NAME", Value: "mine"}},
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}},
	}
	got, result := mutate(t, testMutator(t), pod, "restricted")
	if result != ResultWiredSidecar {
		t.Fatalf("result %s", result)
	}
	var names []string
	for _, c := range got.Spec.InitContainers {
		names = append(names, c.Name)
	}
	if strings.Join(names, ",") != "copy-injection-library,cupti-exporter,setup,warmup" {
		t.Fatalf("init containers %v", names)
	}
	warmup := got.Spec.InitContainers[3]
	e := env(warmup)
	if e["X"].Value != "1" || e["POD_NAME"].Value != "mine" || e["CONTAINER_NAME"].Value != "warmup" || e["CUDA_INJECTION64_PATH"].Value == "" {
		t.Errorf("warmup env %+v", warmup.Env)
	}
	if len(got.Spec.InitContainers[2].Env) != 0 {
		t.Error("a non-GPU init container was wired")
	}
}
