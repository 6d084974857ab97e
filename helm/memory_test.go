package helm

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// renderExporter renders the chart with these values and returns the exporter container:
// the DaemonSet's in node mode, the sidecar of a workload pod in sidecar mode.
func renderExporter(t *testing.T, values string) corev1.Container {
	t.Helper()
	out, err := renderWithPod(t, values)
	if err != nil {
		t.Fatalf("values %q: %v", values, err)
	}
	if body, ok := out["cupti-exporter/templates/daemonset.yaml"]; ok && strings.TrimSpace(body) != "" {
		ds := decodeStrict(t, manifest{Source: "daemonset.yaml", Kind: "DaemonSet", Name: fullname, Body: []byte(body)}).(*appsv1.DaemonSet)
		return container(t, ds.Spec.Template.Spec, "exporter", false)
	}
	pod := decodeStrict(t, manifest{Source: "zz-test-pod.yaml", Kind: "Pod", Name: "trainer", Body: []byte(out["cupti-exporter/templates/zz-test-pod.yaml"])}).(*corev1.Pod)
	return container(t, pod.Spec, "cupti-exporter", true)
}

// renderErr renders with the sidecar pod template too and returns the error.
func renderErr(t *testing.T, values string) error {
	t.Helper()
	_, err := renderWithPod(t, values)
	return err
}

// renderWithPod renders the chart with these values (YAML) and a workload pod that asks for the
// sidecar (templates/zz-test-pod.yaml).
func renderWithPod(t *testing.T, values string) (map[string]string, error) {
	t.Helper()
	c := loadChart(t)
	c.Templates = append(c.Templates, &chart.File{Name: "templates/zz-test-pod.yaml", Data: []byte(sidecarPod)})
	return renderYAML(t, c, values)
}

func budgetArgs(c corev1.Container) []string {
	var out []string
	for _, a := range c.Args {
		if strings.HasPrefix(a, "--activity.memory-budget") {
			out = append(out, a)
		}
	}
	return out
}

// TestActivityMemoryBudget: node mode keeps the binary's default (128MiB) unless
// activity.memoryBudget is set; the sidecar passes 64MiB (its limit is 256Mi).
func TestActivityMemoryBudget(t *testing.T) {
	for _, tc := range []struct {
		values string
		want   []string
	}{
		{"", nil},
		{"activity: {memoryBudget: 256MiB}", []string{"--activity.memory-budget=256MiB"}},
		{"activity: {memoryBudget: 512MiB, enabled: false}", nil},
		{"mode: sidecar", []string{"--activity.memory-budget=64MiB"}},
		{"mode: sidecar\nactivity: {memoryBudget: 32MiB}", []string{"--activity.memory-budget=32MiB"}},
		{"mode: sidecar\nactivity: {memoryBudget: \"16777216\"}", []string{"--activity.memory-budget=16777216"}},
	} {
		if got := budgetArgs(renderExporter(t, tc.values)); fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("values %q: memory budget flags %q; want %q", tc.values, got, tc.want)
		}
	}

	// What the exporter would refuse at start fails the install instead.
	for _, tc := range []struct{ values, want string }{
		{"activity: {memoryBudget: 8MiB}", "less than 16MiB"},
		{"mode: sidecar\nactivity: {memoryBudget: 1000KB}", "less than 16MiB"},
		{"activity: {memoryBudget: 128Mi}", "/activity/memoryBudget"},     // a Kubernetes quantity, not a flag size
		{"activity: {memoryBudget: 1.5GiB}", "/activity/memoryBudget"},    // whole numbers only
		{"activity: {memoryBudget: lots}", "/activity/memoryBudget"},      // no number
		{"activity: {memoryBudget: 134217728}", "/activity/memoryBudget"}, // a YAML number, not a string
	} {
		err := renderErr(t, tc.values)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("values %q: err = %v; want one naming %q", tc.values, err, tc.want)
		}
	}
}

// wantGoMemLimit is GOMEMLIMIT for a memory limit as the chart should set it: 90 % of the
// limit (parsed as the API server parses it), in whole MiB, or in bytes under 1 MiB.
func wantGoMemLimit(t *testing.T, limit string) string {
	t.Helper()
	q, err := resource.ParseQuantity(limit)
	if err != nil {
		t.Fatalf("test quantity %q: %v", limit, err)
	}
	b := float64(q.Value()) * 0.9
	if b >= 1<<20 {
		return fmt.Sprintf("%dMiB", int64(math.Floor(b/(1<<20))))
	}
	return fmt.Sprintf("%d", int64(math.Floor(b)))
}

func goMemLimits(c corev1.Container) []string {
	var out []string
	for _, e := range c.Env {
		if e.Name == "GOMEMLIMIT" {
			out = append(out, e.Value)
		}
	}
	return out
}

// TestGoMemLimit: with a memory limit the exporter's GOMEMLIMIT is 90 % of it, in both
// modes and for every way of writing a quantity; without a limit, or when extraEnv sets
// GOMEMLIMIT, the chart sets none.
func TestGoMemLimit(t *testing.T) {
	if got := wantGoMemLimit(t, "1Gi"); got != "921MiB" {
		t.Fatalf("the test's own arithmetic: 90 %% of 1Gi = %s; want 921MiB", got)
	}
	for _, tc := range []struct {
		values, limit string
	}{
		{"", "1Gi"},
		{"mode: sidecar", "256Mi"},
		{"resources: {limits: {memory: 2G}}", "2G"},
		{"resources: {limits: {memory: 1500M}}", "1500M"},
		{"resources: {limits: {memory: 1.5Gi}}", "1.5Gi"},
		{"resources: {limits: {memory: \"3000000000\"}}", "3000000000"},
		{"resources: {limits: {memory: 1073741824}}", "1073741824"}, // a YAML number
		{"resources: {limits: {memory: 8Ti}}", "8Ti"},
		{"resources: {limits: {memory: 1000k}}", "1000k"}, // under 1 MiB once scaled: bytes
		{"mode: sidecar\nsidecarResources: {limits: {memory: 512Mi}}", "512Mi"},
	} {
		got := goMemLimits(renderExporter(t, tc.values))
		if want := wantGoMemLimit(t, tc.limit); len(got) != 1 || got[0] != want {
			t.Errorf("values %q: GOMEMLIMIT %q; want [%s] (90 %% of %s)", tc.values, got, want, tc.limit)
		}
	}

	for _, values := range []string{
		"resources: {limits: {memory: null}}",
		"mode: sidecar\nsidecarResources: {limits: null}",
	} {
		if got := goMemLimits(renderExporter(t, values)); len(got) != 0 {
			t.Errorf("values %q: GOMEMLIMIT %q without a memory limit; want none", values, got)
		}
	}
	for _, values := range []string{
		"extraEnv: [{name: GOMEMLIMIT, value: 500MiB}]",
		"mode: sidecar\nextraEnv: [{name: GOMEMLIMIT, value: 500MiB}]",
	} {
		if got := goMemLimits(renderExporter(t, values)); len(got) != 1 || got[0] != "500MiB" {
			t.Errorf("values %q: GOMEMLIMIT %q; want only extraEnv's [500MiB]", values, got)
		}
	}
	err := renderErr(t, "resources: {limits: {memory: 1gigabyte}}")
	if err == nil || !strings.Contains(err.Error(), "GOMEMLIMIT") || !strings.Contains(err.Error(), "1gigabyte") {
		t.Errorf("unreadable memory limit: err = %v; want one naming the limit and GOMEMLIMIT", err)
	}
}
