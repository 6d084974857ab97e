package helm

import (
	"bytes"
	"flag"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

var updateDashboards = flag.Bool("update-dashboards", false, "copy dashboards/*.json into the chart")

const (
	repoDashboards  = "../dashboards"
	chartDashboards = chartDir + "/dashboards"
	// maxConfigMap is the size of data a ConfigMap may hold (1 MiB), less room for its metadata.
	maxConfigMap = 1<<20 - 16<<10
)

// dashboardFiles returns the base names of the *.json files in dir, sorted.
func dashboardFiles(t *testing.T, dir string) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range paths {
		out = append(out, filepath.Base(p))
	}
	slices.Sort(out)
	return out
}

// TestChartDashboards keeps the chart's dashboards/ (what .Files.Get can read: Helm packages
// only files inside the chart) equal to the repository's dashboards/*.json.
// go test ./helm -run TestChartDashboards -update-dashboards copies them.
func TestChartDashboards(t *testing.T) {
	want := dashboardFiles(t, repoDashboards)
	if len(want) == 0 {
		t.Fatalf("no dashboards in %s", repoDashboards)
	}
	if *updateDashboards {
		if err := os.RemoveAll(chartDashboards); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(chartDashboards, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range want {
			b, err := os.ReadFile(filepath.Join(repoDashboards, f))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(chartDashboards, f), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := dashboardFiles(t, chartDashboards); !slices.Equal(got, want) {
		t.Fatalf("%s holds %v; want %v (go test ./helm -run TestChartDashboards -update-dashboards)", chartDashboards, got, want)
	}
	for _, f := range want {
		repo, err1 := os.ReadFile(filepath.Join(repoDashboards, f))
		chart, err2 := os.ReadFile(filepath.Join(chartDashboards, f))
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if !bytes.Equal(repo, chart) {
			t.Errorf("%s/%s differs from %s/%s: go test ./helm -run TestChartDashboards -update-dashboards", chartDashboards, f, repoDashboards, f)
		}
	}
}

// dashboardConfigMaps returns the rendered ConfigMaps that carry a dashboard, by name. Those
// in the release's namespace also go through the checks of every manifest (decodeStrict).
func dashboardConfigMaps(t *testing.T, values string) map[string]*corev1.ConfigMap {
	t.Helper()
	ms, _ := render(t, values)
	out := map[string]*corev1.ConfigMap{}
	for _, m := range ms {
		if !strings.HasSuffix(m.Source, "templates/dashboards.yaml") {
			continue
		}
		cm := &corev1.ConfigMap{}
		if err := yaml.UnmarshalStrict(m.Body, cm); err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		if cm.Namespace == namespace {
			decodeStrict(t, m)
		}
		out[m.Name] = cm
	}
	return out
}

// TestGrafanaDashboardConfigMaps renders the dashboards as ConfigMaps for Grafana's
// sidecar: none by default; with grafanaDashboards.enabled, one per dashboard carrying the
// sidecar's label, the dashboard's JSON unchanged under its file name, and the folder
// annotation when a folder is set.
func TestGrafanaDashboardConfigMaps(t *testing.T) {
	if cms := dashboardConfigMaps(t, ""); len(cms) > 0 {
		t.Fatalf("grafanaDashboards.enabled is false (the default), but %d dashboard ConfigMaps rendered", len(cms))
	}
	files := dashboardFiles(t, repoDashboards)
	for _, tc := range []struct {
		name, values                         string
		label, value, namespace, folderAnnot string
		folder                               string
	}{
		{name: "defaults", values: "grafanaDashboards: {enabled: true}", label: "grafana_dashboard", value: "1", namespace: namespace},
		{name: "custom", values: "grafanaDashboards: {enabled: true, label: example.com/dashboard, labelValue: gpu, namespace: grafana, folder: GPUs, folderAnnotation: k8s-sidecar-target-directory, labels: {team: ml}}",
			label: "example.com/dashboard", value: "gpu", namespace: "grafana", folderAnnot: "k8s-sidecar-target-directory", folder: "GPUs"},
	} {
		cms := dashboardConfigMaps(t, tc.values)
		if len(cms) != len(files) {
			t.Fatalf("%s: %d dashboard ConfigMaps; want %d (one per dashboard)", tc.name, len(cms), len(files))
		}
		for _, f := range files {
			name := fullname + "-dashboard-" + strings.TrimSuffix(f, ".json")
			cm := cms[name]
			if cm == nil {
				t.Errorf("%s: no ConfigMap %s for %s", tc.name, name, f)
				continue
			}
			if cm.Labels[tc.label] != tc.value || cm.Namespace != tc.namespace {
				t.Errorf("%s: %s in namespace %q with labels %v; want %s=%q in %q", tc.name, name, cm.Namespace, cm.Labels, tc.label, tc.value, tc.namespace)
			}
			if cm.Labels["app.kubernetes.io/instance"] != releaseName || (strings.Contains(tc.values, "team: ml") && cm.Labels["team"] != "ml") {
				t.Errorf("%s: %s lacks the chart's or the extra labels: %v", tc.name, name, cm.Labels)
			}
			if tc.folder != "" && cm.Annotations[tc.folderAnnot] != tc.folder || tc.folder == "" && len(cm.Annotations) > 0 {
				t.Errorf("%s: %s annotations %v; want %s=%q", tc.name, name, cm.Annotations, tc.folderAnnot, tc.folder)
			}
			want, err := os.ReadFile(filepath.Join(repoDashboards, f))
			if err != nil {
				t.Fatal(err)
			}
			if got := cm.Data[f]; got != strings.TrimRight(string(want), "\n") || len(cm.Data) != 1 {
				t.Errorf("%s: %s data keys %v; want only %s holding dashboards/%s unchanged", tc.name, name, slices.Sorted(maps.Keys(cm.Data)), f, f)
			}
			if n := len(cm.Data[f]); n > maxConfigMap {
				t.Errorf("%s: %s holds %d bytes, over what a ConfigMap may hold", tc.name, f, n)
			}
		}
	}
}
