package helm

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

func container(t *testing.T, spec corev1.PodSpec, name string, init bool) corev1.Container {
	t.Helper()
	list := spec.Containers
	if init {
		list = spec.InitContainers
	}
	for _, c := range list {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %q (init %v) in pod spec", name, init)
	return corev1.Container{}
}

func volume(spec corev1.PodSpec, name string) *corev1.Volume {
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == name {
			return &spec.Volumes[i]
		}
	}
	return nil
}

func mount(c corev1.Container, name string) *corev1.VolumeMount {
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].Name == name {
			return &c.VolumeMounts[i]
		}
	}
	return nil
}

func envValue(c corev1.Container, name string) (string, bool) {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value, true
		}
	}
	return "", false
}

func wantArgs(t *testing.T, c corev1.Container, want ...string) {
	t.Helper()
	for _, w := range want {
		if !slices.Contains(c.Args, w) {
			t.Errorf("container %s: no arg %q in %q", c.Name, w, c.Args)
		}
	}
}

func noArgPrefix(t *testing.T, c corev1.Container, prefix string) {
	t.Helper()
	for _, a := range c.Args {
		if strings.HasPrefix(a, prefix) {
			t.Errorf("container %s: unexpected arg %q", c.Name, a)
		}
	}
}

func TestNodeModeDefaults(t *testing.T) {
	ms, notes := render(t, "")
	if got, want := kinds(ms), []string{"ClusterRole/" + clusterName, "ClusterRoleBinding/" + clusterName, "DaemonSet/" + fullname, "Service/" + fullname, "ServiceAccount/" + fullname}; !slices.Equal(got, want) {
		t.Fatalf("rendered %v; want %v", got, want)
	}
	objs := decodeAll(t, ms)
	ds := objs["DaemonSet/"+fullname].(*appsv1.DaemonSet)
	spec := ds.Spec.Template.Spec

	if spec.NodeSelector["nvidia.com/gpu.present"] != "true" {
		t.Errorf("nodeSelector = %v; want nvidia.com/gpu.present=true", spec.NodeSelector)
	}
	if len(spec.Tolerations) != 1 || spec.Tolerations[0].Key != "nvidia.com/gpu" {
		t.Errorf("tolerations = %v; want the nvidia.com/gpu taint tolerated", spec.Tolerations)
	}
	if spec.RuntimeClassName != nil {
		t.Errorf("runtimeClassName = %q; want none by default", *spec.RuntimeClassName)
	}
	if spec.AutomountServiceAccountToken == nil || !*spec.AutomountServiceAccountToken {
		t.Error("the service account token is not mounted; the pod informer (kubernetes.podInformer.enabled) needs it")
	}
	checkPodInformerRBAC(t, objs, spec)
	for k, v := range ds.Spec.Selector.MatchLabels {
		if ds.Spec.Template.Labels[k] != v {
			t.Errorf("selector label %s=%s missing from the pod template", k, v)
		}
	}

	exp := container(t, spec, "exporter", false)
	if exp.Args[0] != "serve" {
		t.Errorf("args start with %q; want serve", exp.Args[0])
	}
	wantArgs(t, exp, "--web.listen-address=:9477", "--web.health-listen-address=:9478", "--pmsample.enabled", "--pmsample.interval=1ms",
		"--activity.socket=/run/cupti-exporter/activity.sock",
		"--kubelet.pod-resources-socket=/var/lib/kubelet/pod-resources/kubelet.sock")
	noArgPrefix(t, exp, "--config.file")
	noArgPrefix(t, exp, "--web.config.file")
	noArgPrefix(t, exp, "--pmsample.metrics")
	noArgPrefix(t, exp, "--pmsample.decode-period") // the exporter's default follows the interval
	noArgPrefix(t, exp, "--web.enable-pm-sampling-api")
	checkHealthProbes(t, exp, 9478)
	if v, _ := envValue(exp, "NVIDIA_VISIBLE_DEVICES"); v != "all" {
		t.Errorf("NVIDIA_VISIBLE_DEVICES = %q; want all", v)
	}
	if _, ok := exp.Resources.Limits[corev1.ResourceName("nvidia.com/gpu")]; ok {
		t.Error("the exporter requests a GPU; it must not take one from workloads")
	}
	sc := exp.SecurityContext
	if sc == nil || sc.Privileged == nil || *sc.Privileged {
		t.Fatal("exporter is privileged or has no securityContext")
	}
	if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Add, []corev1.Capability{"SYS_ADMIN", "SYS_NICE"}) || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("capabilities = %+v; want drop ALL, add SYS_ADMIN and SYS_NICE (profiling.requireCapSysAdmin defaults to true; SYS_NICE for the decode threads' priority)", sc.Capabilities)
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("root filesystem is writable")
	}

	run := volume(spec, "cupti-exporter-run")
	if run == nil || run.HostPath == nil || run.HostPath.Path != "/run/cupti-exporter" || *run.HostPath.Type != corev1.HostPathDirectoryOrCreate {
		t.Errorf("cupti-exporter-run volume = %+v; want hostPath /run/cupti-exporter (DirectoryOrCreate)", run)
	}
	pr := volume(spec, "pod-resources")
	if pr == nil || pr.HostPath == nil || pr.HostPath.Path != "/var/lib/kubelet/pod-resources" {
		t.Errorf("pod-resources volume = %+v", pr)
	}
	for _, vm := range exp.VolumeMounts {
		if vm.Name == "pod-resources" && !vm.ReadOnly {
			t.Error("the kubelet pod-resources folder is mounted read-write")
		}
	}

	cp := container(t, spec, "copy-injection-library", true)
	if cp.SecurityContext.RunAsUser == nil || *cp.SecurityContext.RunAsUser != 0 {
		t.Error("the library copy does not run as root; the host folder belongs to root")
	}
	script := strings.Join(cp.Command, " ")
	for _, want := range []string{"/usr/lib/cupti-exporter/libcupti_exporter_inject.so", "mv -f /run/cupti-exporter/libcupti_exporter_inject.so.tmp /run/cupti-exporter/libcupti_exporter_inject.so"} {
		if !strings.Contains(script, want) {
			t.Errorf("init container command %q lacks %q", script, want)
		}
	}

	svc := objs["Service/"+fullname].(*corev1.Service)
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 9477 || svc.Spec.Ports[0].TargetPort.StrVal != "metrics" {
		t.Errorf("service ports = %+v", svc.Spec.Ports)
	}
	if !strings.Contains(notes, "CUDA_INJECTION64_PATH") || !strings.Contains(notes, "/run/cupti-exporter/libcupti_exporter_inject.so") {
		t.Errorf("NOTES.txt does not tell how to load the injection library:\n%s", notes)
	}
}

const nodeCustom = `
image: {repository: registry.example.com/gpu/cupti-exporter, tag: v9.9.9, pullPolicy: Always}
imagePullSecrets: [{name: regcred}]
runtimeClassName: nvidia
priorityClassName: system-node-critical
updateStrategy: {type: OnDelete}
profiling: {requireCapSysAdmin: false}
injection: {hostDir: /var/run/cupti}
web: {port: 9400, configSecret: cupti-web}
pmsample: {interval: 2ms, decodePeriod: 500ms, window: 30s, metrics: [sm__cycles_active.avg, dram__throughput.avg.pct_of_peak_sustained_elapsed], cupti: {hostDir: /usr/local/cuda/extras/CUPTI/lib64}}
kubelet: {podResources: {enabled: false}}
config: {otlp: {endpoint: "otel-collector:4317", insecure: true}}
extraArgs: [--log.level=debug]
extraEnv: [{name: CUPTI_EXPORTER_EXTRA, value: "1"}]
nodeSelector: {gpu: h100}
tolerations: []
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms: [{matchExpressions: [{key: kubernetes.io/arch, operator: In, values: [amd64]}]}]
podLabels: {team: ml}
podAnnotations: {example.com/scrape: "false"}
service: {port: 9400, annotations: {example.com/a: b}}
serviceMonitor:
  enabled: true
  labels: {release: kube-prometheus-stack}
  interval: 30s
  relabelings: [{sourceLabels: [__meta_kubernetes_pod_node_name], targetLabel: host}]
  metricRelabelings: [{sourceLabels: [__name__], regex: go_.*, action: drop}]
prometheusRule: {enabled: true, labels: {release: kube-prometheus-stack}, alertLabels: {severity: critical, team: ml}}
`

func TestNodeModeCustomValues(t *testing.T) {
	ms, _ := render(t, nodeCustom)
	want := []string{"ClusterRole/" + clusterName, "ClusterRoleBinding/" + clusterName, "ConfigMap/" + fullname, "DaemonSet/" + fullname, "PrometheusRule/" + fullname,
		"Service/" + fullname, "ServiceAccount/" + fullname, "ServiceMonitor/" + fullname}
	if got := kinds(ms); !slices.Equal(got, want) {
		t.Fatalf("rendered %v; want %v", got, want)
	}
	objs := decodeAll(t, ms)
	spec := objs["DaemonSet/"+fullname].(*appsv1.DaemonSet).Spec.Template.Spec
	if ds := objs["DaemonSet/"+fullname].(*appsv1.DaemonSet); ds.Spec.UpdateStrategy.Type != appsv1.OnDeleteDaemonSetStrategyType || ds.Spec.UpdateStrategy.RollingUpdate != nil {
		t.Errorf("updateStrategy = %+v; want OnDelete without rollingUpdate (the API rejects both)", ds.Spec.UpdateStrategy)
	}
	if spec.RuntimeClassName == nil || *spec.RuntimeClassName != "nvidia" {
		t.Error("runtimeClassName nvidia not set")
	}
	if len(spec.Tolerations) != 0 || spec.NodeSelector["gpu"] != "h100" || spec.Affinity == nil {
		t.Errorf("placement not taken from values: %v %v %v", spec.Tolerations, spec.NodeSelector, spec.Affinity)
	}
	exp := container(t, spec, "exporter", false)
	if exp.Image != "registry.example.com/gpu/cupti-exporter:v9.9.9" || exp.ImagePullPolicy != corev1.PullAlways {
		t.Errorf("image %s (%s)", exp.Image, exp.ImagePullPolicy)
	}
	wantArgs(t, exp, "--web.listen-address=:9400", "--pmsample.interval=2ms", "--pmsample.decode-period=500ms",
		"--pmsample.window=30s", "--pmsample.metrics=sm__cycles_active.avg,dram__throughput.avg.pct_of_peak_sustained_elapsed",
		"--activity.socket=/var/run/cupti/activity.sock", "--config.file=/etc/cupti-exporter/config/config.yml",
		"--web.config.file=/etc/cupti-exporter/web/web-config.yml", "--log.level=debug",
		"--cupti.library=/usr/local/cuda/extras/CUPTI/lib64")
	noArgPrefix(t, exp, "--kubelet.pod-resources-socket")
	if v := volume(spec, "cupti"); v == nil || v.HostPath == nil || v.HostPath.Path != "/usr/local/cuda/extras/CUPTI/lib64" {
		t.Errorf("cupti host folder volume = %+v", v)
	}
	if m := mount(exp, "cupti"); m == nil || !m.ReadOnly || m.MountPath != "/usr/local/cuda/extras/CUPTI/lib64" {
		t.Errorf("cupti host folder mount = %+v; want read-only at the same path", m)
	}
	if volume(spec, "pod-resources") != nil {
		t.Error("pod-resources mounted although kubelet.podResources.enabled is false")
	}
	if v, ok := envValue(exp, "CUPTI_EXPORTER_EXTRA"); !ok || v != "1" {
		t.Error("extraEnv not passed")
	}
	sc := exp.SecurityContext
	if !slices.Equal(sc.Capabilities.Add, []corev1.Capability{"SYS_NICE"}) || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("capabilities %+v / allowPrivilegeEscalation %v with requireCapSysAdmin false; want only SYS_NICE added (decode threads' priority) and no escalation", sc.Capabilities, sc.AllowPrivilegeEscalation)
	}
	// The probes stay on the plain health port while web.configSecret turns TLS/auth on.
	checkHealthProbes(t, exp, 9478)

	cm := objs["ConfigMap/"+fullname].(*corev1.ConfigMap)
	var cfg map[string]map[string]any
	if err := yaml.UnmarshalStrict([]byte(cm.Data["config.yml"]), &cfg); err != nil || cfg["otlp"]["endpoint"] != "otel-collector:4317" {
		t.Errorf("config.yml = %q (%v)", cm.Data["config.yml"], err)
	}

	sm := objs["ServiceMonitor/"+fullname].(*serviceMonitor)
	if sm.Labels["release"] != "kube-prometheus-stack" || len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("servicemonitor = %+v", sm)
	}
	ep := sm.Spec.Endpoints[0]
	if ep.Port != "metrics" || ep.Interval != "30s" || ep.Scheme != "https" || !ep.HonorLabels || len(ep.Relabelings) != 2 || len(ep.MetricRelabelings) != 1 {
		t.Errorf("servicemonitor endpoint = %+v", ep)
	}
	svc := objs["Service/"+fullname].(*corev1.Service)
	for k, v := range sm.Spec.Selector.MatchLabels {
		if svc.Labels[k] != v {
			t.Errorf("ServiceMonitor selects %s=%s, which the Service lacks", k, v)
		}
	}

	pr := objs["PrometheusRule/"+fullname].(*prometheusRule)
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				continue // the training group's records (TestTrainingRules)
			}
			if r.Labels["severity"] != "critical" || r.Labels["team"] != "ml" {
				t.Errorf("alert %s labels = %v", r.Alert, r.Labels)
			}
			if r.Alert == "CuptiExporterDown" && r.Expr != `up{job="`+fullname+`"} == 0` {
				t.Errorf("CuptiExporterDown expr %q does not select the ServiceMonitor's job", r.Expr)
			}
			if r.Alert == "CuptiPodResourcesDown" {
				t.Error("CuptiPodResourcesDown rendered although pod resources are off")
			}
		}
	}
}

func TestNodeModePodMonitor(t *testing.T) {
	ms, _ := render(t, "podMonitor: {enabled: true}\nprometheusRule: {enabled: true}\n")
	objs := decodeAll(t, ms)
	pm := objs["PodMonitor/"+fullname].(*podMonitor)
	ds := objs["DaemonSet/"+fullname].(*appsv1.DaemonSet)
	for k, v := range pm.Spec.Selector.MatchLabels {
		if ds.Spec.Template.Labels[k] != v {
			t.Errorf("PodMonitor selects %s=%s, which the DaemonSet pods lack", k, v)
		}
	}
	if pm.Spec.PodMetricsEndpoints[0].Port != "metrics" {
		t.Errorf("PodMonitor port %q; want metrics", pm.Spec.PodMetricsEndpoints[0].Port)
	}
	pr := objs["PrometheusRule/"+fullname].(*prometheusRule)
	want := `up{job="` + namespace + "/" + fullname + `"} == 0`
	if got := pr.Spec.Groups[0].Rules[0].Expr; got != want {
		t.Errorf("CuptiExporterDown expr = %q; want %q (PodMonitor job name)", got, want)
	}
}

func TestSidecarModeRendersOnlyMonitoring(t *testing.T) {
	ms, notes := render(t, "mode: sidecar\n")
	if len(ms) != 0 {
		t.Errorf("sidecar mode with defaults rendered %v; want nothing", kinds(ms))
	}
	if !strings.Contains(notes, "cupti-exporter.sidecar") {
		t.Errorf("NOTES.txt of sidecar mode does not name the helper templates:\n%s", notes)
	}

	ms, _ = render(t, "mode: sidecar\npodMonitor: {enabled: true, selector: {matchLabels: {app: trainer}}, namespaceSelector: {matchNames: [ml]}}\nprometheusRule: {enabled: true}\n")
	if got, want := kinds(ms), []string{"PodMonitor/" + fullname, "PrometheusRule/" + fullname}; !slices.Equal(got, want) {
		t.Fatalf("rendered %v; want %v", got, want)
	}
	objs := decodeAll(t, ms)
	pm := objs["PodMonitor/"+fullname].(*podMonitor)
	if pm.Spec.Selector.MatchLabels["app"] != "trainer" || pm.Spec.PodMetricsEndpoints[0].Port != "cupti-metrics" || !slices.Equal(pm.Spec.NamespaceSelector.MatchNames, []string{"ml"}) {
		t.Errorf("sidecar PodMonitor = %+v", pm.Spec)
	}
	for _, r := range objs["PrometheusRule/"+fullname].(*prometheusRule).Spec.Groups[0].Rules {
		if r.Alert == "CuptiPodResourcesDown" {
			t.Error("CuptiPodResourcesDown rendered in sidecar mode, which never asks the kubelet")
		}
	}
}

// sidecarPod uses the chart's sidecar helpers the way a workload chart would.
const sidecarPod = `apiVersion: v1
kind: Pod
metadata:
  name: trainer
  labels:
    cupti-exporter.io/sidecar: "true"
spec:
  restartPolicy: Never
  initContainers:
    {{- include "cupti-exporter.sidecar" . | nindent 4 }}
  containers:
    - name: app
      image: pytorch/pytorch:latest
      command: [python3, train.py]
      env:
        {{- include "cupti-exporter.sidecar.workloadEnv" . | nindent 8 }}
      volumeMounts:
        {{- include "cupti-exporter.sidecar.workloadVolumeMounts" . | nindent 8 }}
      resources:
        limits:
          nvidia.com/gpu: 1
  volumes:
    {{- include "cupti-exporter.sidecar.volumes" . | nindent 4 }}
`

func TestSidecarHelpers(t *testing.T) {
	for _, tc := range []struct{ name, values string }{
		{"defaults", "mode: sidecar\n"},
		{"custom", "mode: sidecar\nweb: {port: 9500, configSecret: ignored}\ninjection: {hostDir: /cupti, kinds: kernel}\nconfig: {a: 1}\nextraEnv: [{name: X, value: y}]\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := renderWithPod(t, tc.values)
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			m := manifest{Source: "zz-test-pod.yaml", Kind: "Pod", Name: "trainer", Body: []byte(out["cupti-exporter/templates/zz-test-pod.yaml"])}
			pod := decodeStrict(t, m).(*corev1.Pod)
			spec := pod.Spec
			var hostDir, port = "/run/cupti-exporter", int32(9477)
			if tc.name == "custom" {
				hostDir, port = "/cupti", 9500
			}

			if len(spec.InitContainers) != 2 || spec.InitContainers[0].Name != "copy-injection-library" {
				t.Fatalf("init containers %v; want the library copy first, then the exporter", spec.InitContainers)
			}
			exp := container(t, spec, "cupti-exporter", true)
			if exp.RestartPolicy == nil || *exp.RestartPolicy != corev1.ContainerRestartPolicyAlways {
				t.Error("the exporter is not a native sidecar (restartPolicy: Always)")
			}
			if exp.StartupProbe == nil {
				t.Error("no startup probe: the workload could start before the socket listens")
			}
			wantArgs(t, exp, "--no-pmsample.enabled", "--activity.socket="+hostDir+"/activity.sock")
			noArgPrefix(t, exp, "--kubelet.")
			noArgPrefix(t, exp, "--config.file")
			noArgPrefix(t, exp, "--web.config.file")
			noArgPrefix(t, exp, "--pmsample.interval")
			if len(exp.Ports) != 1 || exp.Ports[0].Name != "cupti-metrics" || exp.Ports[0].ContainerPort != port {
				t.Errorf("ports = %+v", exp.Ports)
			}
			for _, name := range []string{"POD_NAME", "POD_NAMESPACE"} {
				found := false
				for _, e := range exp.Env {
					found = found || (e.Name == name && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil)
				}
				if !found {
					t.Errorf("no downward-API %s in the sidecar", name)
				}
			}
			if sc := exp.SecurityContext; sc == nil || sc.Capabilities == nil || len(sc.Capabilities.Add) != 0 {
				t.Error("the sidecar adds capabilities; it needs none")
			}

			app := container(t, spec, "app", false)
			if v, _ := envValue(app, "CUDA_INJECTION64_PATH"); v != hostDir+"/libcupti_exporter_inject.so" {
				t.Errorf("CUDA_INJECTION64_PATH = %q", v)
			}
			if v, _ := envValue(app, "CUPTI_EXPORTER_SOCKET"); v != hostDir+"/activity.sock" {
				t.Errorf("CUPTI_EXPORTER_SOCKET = %q", v)
			}
			checkWorkloadNamesPod(t, app)
			if v := volume(spec, "cupti-exporter-run"); v == nil || v.EmptyDir == nil {
				t.Errorf("shared volume = %+v; want an emptyDir", v)
			}
			for _, ctr := range []corev1.Container{spec.InitContainers[0], exp, app} {
				mounted := false
				for _, vm := range ctr.VolumeMounts {
					mounted = mounted || (vm.Name == "cupti-exporter-run" && vm.MountPath == hostDir)
				}
				if !mounted {
					t.Errorf("container %s does not mount the shared folder at %s", ctr.Name, hostDir)
				}
			}
		})
	}
}

func TestServiceMonitorAndPodMonitorTogetherFail(t *testing.T) {
	c := loadChart(t)
	_, err := renderValues(t, c, map[string]any{"serviceMonitor": map[string]any{"enabled": true}, "podMonitor": map[string]any{"enabled": true}})
	if err == nil || !strings.Contains(err.Error(), "not both") {
		t.Errorf("err = %v; want a refusal to scrape the exporters twice", err)
	}
}

// TestSidecarExampleMatchesHelpers keeps examples/sidecar.yaml equal to what the
// sidecar templates render with default values, and checks it decodes strictly.
func TestSidecarExampleMatchesHelpers(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(chartDir, "examples", "sidecar.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var job batchv1.Job
	if err := yaml.UnmarshalStrict(raw, &job); err != nil {
		t.Fatalf("examples/sidecar.yaml: strict decode: %v", err)
	}
	example := job.Spec.Template.Spec

	c := loadChart(t)
	c.Templates = append(c.Templates, &chart.File{Name: "templates/zz-test-pod.yaml", Data: []byte(sidecarPod)})
	out, err := renderValues(t, c, map[string]any{"mode": "sidecar"})
	if err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	if err := yaml.UnmarshalStrict([]byte(out["cupti-exporter/templates/zz-test-pod.yaml"]), &pod); err != nil {
		t.Fatal(err)
	}
	rendered := pod.Spec

	if !reflect.DeepEqual(example.InitContainers, rendered.InitContainers) {
		a, _ := yaml.Marshal(example.InitContainers)
		b, _ := yaml.Marshal(rendered.InitContainers)
		t.Errorf("init containers of examples/sidecar.yaml differ from the sidecar template:\nexample:\n%s\ntemplate:\n%s", a, b)
	}
	if !reflect.DeepEqual(example.Volumes, rendered.Volumes) {
		t.Errorf("volumes differ: example %+v, template %+v", example.Volumes, rendered.Volumes)
	}
	app := container(t, rendered, "app", false)
	trainer := container(t, example, "trainer", false)
	// The example adds CONTAINER_NAME by hand, last (the template cannot know the name).
	env := trainer.Env
	if n := len(env); n == 0 || env[n-1].Name != "CONTAINER_NAME" || env[n-1].Value != trainer.Name {
		t.Errorf("the example's workload env does not end with CONTAINER_NAME=%s: %+v", trainer.Name, env)
	} else {
		env = env[:n-1]
	}
	if !reflect.DeepEqual(env, app.Env) || !reflect.DeepEqual(trainer.VolumeMounts, app.VolumeMounts) {
		t.Errorf("workload env/mounts differ: example %+v %+v, template %+v %+v", env, trainer.VolumeMounts, app.Env, app.VolumeMounts)
	}
	if job.Spec.Template.Labels["cupti-exporter.io/sidecar"] != "true" {
		t.Error("the example pod lacks the label the default PodMonitor selects")
	}
}

// clusterName is the name of the chart's cluster-scoped objects.
const clusterName = fullname + "-" + namespace

// checkHealthProbes checks that liveness and readiness probes ask /healthz over plain
// HTTP on the container's port "health", declared with the health listener's port.
func checkHealthProbes(t *testing.T, c corev1.Container, port int32) {
	t.Helper()
	wantArgs(t, c, fmt.Sprintf("--web.health-listen-address=:%d", port))
	declared := false
	for _, p := range c.Ports {
		declared = declared || (p.Name == "health" && p.ContainerPort == port)
	}
	if !declared {
		t.Errorf("container %s: no port health=%d in %+v", c.Name, port, c.Ports)
	}
	for name, pr := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		if pr == nil || pr.HTTPGet == nil {
			t.Errorf("container %s: no %s probe", c.Name, name)
			continue
		}
		g := pr.HTTPGet
		if g.Path != "/healthz" || g.Port.StrVal != "health" || (g.Scheme != "" && g.Scheme != corev1.URISchemeHTTP) {
			t.Errorf("container %s: %s probe %+v; want GET /healthz on port health over HTTP", c.Name, name, g)
		}
	}
}

// RBAC rules of the node exporter's informers: nothing beyond get, list and watch.
var (
	podRule   = rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}}
	sliceRule = rbacv1.PolicyRule{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceslices"}, Verbs: []string{"get", "list", "watch"}}
)

// checkPodInformerRBAC checks the informers' permissions with the default values: a
// ClusterRole reading pods and resourceslices and nothing else, bound to the DaemonSet's
// ServiceAccount, and NODE_NAME from the downward API.
func checkPodInformerRBAC(t *testing.T, objs map[string]any, spec corev1.PodSpec) {
	t.Helper()
	checkInformerRBAC(t, objs, spec, podRule, sliceRule)
}

// checkInformerRBAC checks that the ClusterRole holds exactly the rules want, bound to the
// DaemonSet's ServiceAccount, with NODE_NAME from the downward API (each watch is narrowed
// to this node with it).
func checkInformerRBAC(t *testing.T, objs map[string]any, spec corev1.PodSpec, want ...rbacv1.PolicyRule) {
	t.Helper()
	role, ok := objs["ClusterRole/"+clusterName].(*rbacv1.ClusterRole)
	if !ok {
		t.Fatalf("no ClusterRole %s", clusterName)
	}
	if !reflect.DeepEqual(role.Rules, want) {
		t.Errorf("ClusterRole rules %+v; want exactly %+v", role.Rules, want)
	}
	b := objs["ClusterRoleBinding/"+clusterName].(*rbacv1.ClusterRoleBinding)
	if b.RoleRef.Kind != "ClusterRole" || b.RoleRef.Name != clusterName {
		t.Errorf("binding roleRef %+v", b.RoleRef)
	}
	if len(b.Subjects) != 1 || b.Subjects[0].Kind != "ServiceAccount" || b.Subjects[0].Name != spec.ServiceAccountName || b.Subjects[0].Namespace != namespace {
		t.Errorf("binding subjects %+v; want the DaemonSet's ServiceAccount %s/%s", b.Subjects, namespace, spec.ServiceAccountName)
	}
	exp := container(t, spec, "exporter", false)
	found := false
	for _, e := range exp.Env {
		found = found || (e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName")
	}
	if !found {
		t.Error("NODE_NAME is not set from spec.nodeName: the informers would watch every node's pods and slices")
	}
}

// TestResourceSlicesRBAC: the ResourceSlice informer (DRA-allocated GPUs) gets get, list
// and watch on resourceslices and nothing more, and the node exporter's flag is "on"
// exactly where that RBAC and the token are rendered ("off" elsewhere: never auto, which
// would log forbidden watches).
func TestResourceSlicesRBAC(t *testing.T) {
	for _, tc := range []struct {
		name, values string
		rules        []rbacv1.PolicyRule // nil: no ClusterRole
		slicesFlag   string
	}{
		{"defaults", "", []rbacv1.PolicyRule{podRule, sliceRule}, "on"},
		{"slices off", "kubernetes: {resourceSlices: {enabled: false}}", []rbacv1.PolicyRule{podRule}, "off"},
		{"pod informer off", "kubernetes: {podInformer: {enabled: false}}", []rbacv1.PolicyRule{sliceRule}, "on"},
		{"both off", "kubernetes: {podInformer: {enabled: false}, resourceSlices: {enabled: false}}", nil, "off"},
		{"no PodResources API", "kubelet: {podResources: {enabled: false}}", []rbacv1.PolicyRule{podRule}, "off"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms, _ := render(t, tc.values)
			objs := decodeAll(t, ms)
			spec := objs["DaemonSet/"+fullname].(*appsv1.DaemonSet).Spec.Template.Spec
			exp := container(t, spec, "exporter", false)
			var flags []string
			for _, a := range exp.Args {
				if strings.HasPrefix(a, "--kubernetes.resource-slices") {
					flags = append(flags, a)
				}
			}
			if want := "--kubernetes.resource-slices=" + tc.slicesFlag; len(flags) != 1 || flags[0] != want {
				t.Errorf("resource-slices flags %q; want exactly [%s]", flags, want)
			}
			token := spec.AutomountServiceAccountToken != nil && *spec.AutomountServiceAccountToken
			if tc.rules == nil {
				if _, ok := objs["ClusterRole/"+clusterName]; ok || token {
					t.Errorf("no informer, yet ClusterRole rendered %v, token mounted %v", ok, token)
				}
				return
			}
			checkInformerRBAC(t, objs, spec, tc.rules...)
			if !token {
				t.Error("an informer on without the service account token")
			}
		})
	}

	t.Run("sidecar", func(t *testing.T) {
		out, err := renderWithPod(t, "mode: sidecar\nkubernetes: {resourceSlices: {enabled: true}}")
		if err != nil {
			t.Fatal(err)
		}
		pod := decodeStrict(t, manifest{Source: "zz-test-pod.yaml", Kind: "Pod", Name: "trainer", Body: []byte(out["cupti-exporter/templates/zz-test-pod.yaml"])}).(*corev1.Pod)
		// No PodResources socket there, so auto is off; the flag is left out, so that a
		// workload's sidecar does not depend on this exporter version.
		c := container(t, pod.Spec, "cupti-exporter", true)
		noArgPrefix(t, c, "--kubernetes.resource-slices")
		noArgPrefix(t, c, "--kubelet.pod-resources-socket")
	})
}
