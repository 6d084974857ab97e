package helm

import (
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"sigs.k8s.io/yaml"
)

// TestLint runs helm lint (the SDK's rules: Chart.yaml, values against the schema,
// templates render and parse as Kubernetes YAML) in both modes. Info messages (such as
// "icon is recommended") pass; warnings and errors fail.
func TestLint(t *testing.T) {
	kube, err := chartutil.ParseKubeVersion("v1.33.0")
	if err != nil {
		t.Fatal(err)
	}
	for _, values := range []string{"", nodeCustom, "mode: sidecar\npodMonitor: {enabled: true}\nprometheusRule: {enabled: true}\n"} {
		vals := map[string]any{}
		if err := yaml.Unmarshal([]byte(values), &vals); err != nil {
			t.Fatal(err)
		}
		l := lint.AllWithKubeVersion(chartDir, vals, namespace, kube)
		for _, m := range l.Messages {
			if m.Severity > support.InfoSev {
				t.Errorf("helm lint with values %q: %v", values, m)
			}
		}
	}
}
