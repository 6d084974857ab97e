package helm

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// parentDir is a workload chart that depends on this one through a file:// repository
// and includes the sidecar templates with its own context, as docs/kubernetes.md shows.
const parentDir = "testdata/parent"

// loadParent loads the parent chart and resolves its file:// dependency as
// `helm dependency update` does: the repository path, relative to the parent chart,
// must hold this chart at the version the parent asks for.
func loadParent(t *testing.T) *chart.Chart {
	t.Helper()
	c, err := loader.Load(parentDir)
	if err != nil {
		t.Fatalf("loading %s: %v", parentDir, err)
	}
	if len(c.Metadata.Dependencies) != 1 {
		t.Fatalf("parent chart dependencies %v; want cupti-exporter", c.Metadata.Dependencies)
	}
	dep := c.Metadata.Dependencies[0]
	rel, ok := strings.CutPrefix(dep.Repository, "file://")
	if !ok {
		t.Fatalf("dependency repository %q; want a file:// path", dep.Repository)
	}
	sub, err := loader.Load(filepath.Join(parentDir, rel))
	if err != nil {
		t.Fatalf("loading the dependency at %s: %v", dep.Repository, err)
	}
	if sub.Name() != dep.Name || sub.Metadata.Version != dep.Version {
		t.Fatalf("dependency %s %s found %s %s at %s", dep.Name, dep.Version, sub.Name(), sub.Metadata.Version, dep.Repository)
	}
	c.SetDependencies(sub)
	return c
}

// installDryRun renders c as `helm template` does: dependency conditions and aliases
// applied (ProcessDependenciesWithMerge), values coalesced with every chart's defaults
// and checked against each chart's schema (ToRenderValues), then rendered.
func installDryRun(t *testing.T, c *chart.Chart, valuesYAML string) ([]manifest, error) {
	t.Helper()
	vals := map[string]any{}
	if err := yaml.Unmarshal([]byte(valuesYAML), &vals); err != nil {
		t.Fatalf("test values: %v", err)
	}
	if err := chartutil.ProcessDependenciesWithMerge(c, vals); err != nil {
		return nil, err
	}
	rv, err := chartutil.ToRenderValues(c, vals,
		chartutil.ReleaseOptions{Name: releaseName, Namespace: namespace, IsInstall: true, Revision: 1},
		chartutil.DefaultCapabilities)
	if err != nil {
		return nil, err
	}
	out, err := engine.Render(c, rv)
	if err != nil {
		return nil, err
	}
	return manifestsOf(t, out), nil
}

// exampleInitContainers returns the init containers of examples/sidecar.yaml: what the
// sidecar templates render with this chart's defaults.
func exampleInitContainers(t *testing.T) []corev1.Container {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(chartDir, "examples", "sidecar.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var job batchv1.Job
	if err := yaml.UnmarshalStrict(raw, &job); err != nil {
		t.Fatal(err)
	}
	return job.Spec.Template.Spec.InitContainers
}

func TestParentChartSidecar(t *testing.T) {
	c := loadParent(t)
	for _, tc := range []struct {
		name, values string
		wantKinds    []string
		hostDir      string
		image        string
		port         int32
	}{
		{"parent defaults (mode sidecar)", "",
			[]string{"Job/gpu-trainer", "PodMonitor/" + fullname}, "/run/cupti-exporter", "ghcr.io/cupti-exporter/cupti-exporter:0.1.0", 9477},
		{"parent overrides", "cupti-exporter: {injection: {hostDir: /cupti}, web: {port: 9500}, image: {tag: v2.0.0}, podMonitor: {enabled: false}}",
			[]string{"Job/gpu-trainer"}, "/cupti", "ghcr.io/cupti-exporter/cupti-exporter:v2.0.0", 9500},
		// The documented trap: the dependency in its default mode installs the node DaemonSet
		// too (docs/kubernetes.md, "A chart that depends on this one").
		{"dependency in node mode", "cupti-exporter: {mode: node, podMonitor: {enabled: false}}",
			[]string{"ClusterRole/" + clusterName, "ClusterRoleBinding/" + clusterName, "DaemonSet/" + fullname, "Job/gpu-trainer", "Service/" + fullname, "ServiceAccount/" + fullname},
			"/run/cupti-exporter", "ghcr.io/cupti-exporter/cupti-exporter:0.1.0", 9477},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms, err := installDryRun(t, c, tc.values)
			if err != nil {
				t.Fatalf("helm template of the parent chart: %v", err)
			}
			if got := kinds(ms); !slices.Equal(got, tc.wantKinds) {
				t.Fatalf("rendered %v; want %v", got, tc.wantKinds)
			}
			objs := decodeAll(t, ms)
			spec := objs["Job/gpu-trainer"].(*batchv1.Job).Spec.Template.Spec
			exp := container(t, spec, "cupti-exporter", true)
			if exp.Image != tc.image {
				t.Errorf("sidecar image %s; want %s (the dependency's appVersion or image values, not the parent's)", exp.Image, tc.image)
			}
			wantArgs(t, exp, "--no-pmsample.enabled", "--activity.socket="+tc.hostDir+"/activity.sock", "--web.health-listen-address=")
			if len(exp.Ports) != 1 || exp.Ports[0].ContainerPort != tc.port {
				t.Errorf("sidecar ports %+v; want %d", exp.Ports, tc.port)
			}
			app := container(t, spec, "trainer", false)
			if v, _ := envValue(app, "CUDA_INJECTION64_PATH"); v != tc.hostDir+"/libcupti_exporter_inject.so" {
				t.Errorf("CUDA_INJECTION64_PATH = %q", v)
			}
			checkWorkloadNamesPod(t, app)
			wantArgs(t, exp, "--kubernetes.pod-informer=off", "--activity.memory-budget=64MiB")
			if tc.name == "parent defaults (mode sidecar)" {
				if want := exampleInitContainers(t); !reflect.DeepEqual(spec.InitContainers, want) {
					a, _ := yaml.Marshal(spec.InitContainers)
					b, _ := yaml.Marshal(want)
					t.Errorf("init containers from the parent chart differ from examples/sidecar.yaml:\nparent:\n%s\nexample:\n%s", a, b)
				}
			}
		})
	}
}

// TestParentChartAlias: a dependency under an alias is still found (its values live
// under the alias).
func TestParentChartAlias(t *testing.T) {
	c := loadParent(t)
	c.Metadata.Dependencies[0].Alias = "profiler"
	ms, err := installDryRun(t, c, "profiler: {mode: sidecar, injection: {hostDir: /prof}}")
	if err != nil {
		t.Fatalf("helm template with an aliased dependency: %v", err)
	}
	objs := decodeAll(t, ms)
	spec := objs["Job/gpu-trainer"].(*batchv1.Job).Spec.Template.Spec
	wantArgs(t, container(t, spec, "cupti-exporter", true), "--activity.socket=/prof/activity.sock")
}

// TestSidecarTemplatesCopiedWithoutValues: a chart that copies the helper files into its
// own templates (no dependency, no cupti-exporter values) renders the documented
// defaults instead of failing on a nil .Values.injection.
func TestSidecarTemplatesCopiedWithoutValues(t *testing.T) {
	own := loadChart(t)
	parent := &chart.Chart{
		Metadata: &chart.Metadata{APIVersion: "v2", Name: "trainer", Version: "1.0.0", AppVersion: "7.0.0"},
		Values:   map[string]any{"image": "pytorch/pytorch:latest"},
	}
	for _, f := range own.Templates {
		if strings.HasPrefix(filepath.Base(f.Name), "_") {
			parent.Templates = append(parent.Templates, f)
		}
	}
	job, err := os.ReadFile(filepath.Join(parentDir, "templates", "job.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	parent.Templates = append(parent.Templates, &chart.File{Name: "templates/job.yaml", Data: job})
	ms, err := installDryRun(t, parent, "")
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	objs := decodeAll(t, ms)
	spec := objs["Job/gpu-trainer"].(*batchv1.Job).Spec.Template.Spec
	if want := exampleInitContainers(t); !reflect.DeepEqual(spec.InitContainers, want) {
		a, _ := yaml.Marshal(spec.InitContainers)
		t.Errorf("init containers with built-in defaults differ from examples/sidecar.yaml:\n%s", a)
	}
}

// TestSidecarDefaultValuesMatchValuesFile keeps "cupti-exporter.defaultValues" (the
// fallback of the sidecar templates) equal to values.yaml and Chart.yaml.
func TestSidecarDefaultValuesMatchValuesFile(t *testing.T) {
	c := loadChart(t)
	c.Templates = append(c.Templates, &chart.File{Name: "templates/zz-defaults.yaml", Data: []byte(`{{ include "cupti-exporter.defaultValues" . }}`)})
	out, err := renderValues(t, c, nil)
	if err != nil {
		t.Fatal(err)
	}
	var defaults map[string]any
	if err := yaml.UnmarshalStrict([]byte(out["cupti-exporter/templates/zz-defaults.yaml"]), &defaults); err != nil {
		t.Fatal(err)
	}
	if defaults["appVersion"] != c.Metadata.AppVersion {
		t.Errorf("defaultValues appVersion %v; Chart.yaml says %s", defaults["appVersion"], c.Metadata.AppVersion)
	}
	delete(defaults, "appVersion")
	var compare func(path string, d, v any)
	compare = func(path string, d, v any) {
		if dm, ok := d.(map[string]any); ok {
			vm, ok := v.(map[string]any)
			if !ok {
				t.Errorf("%s: defaultValues has a map, values.yaml %v", path, v)
				return
			}
			for k := range dm {
				compare(path+"."+k, dm[k], vm[k])
			}
			return
		}
		if !reflect.DeepEqual(d, v) {
			t.Errorf("%s: defaultValues %#v, values.yaml %#v", path, d, v)
		}
	}
	compare("", defaults, map[string]any(c.Values))
}
