package helm

import (
	"bytes"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"sigs.k8s.io/yaml"
)

const (
	chartDir    = "cupti-exporter"
	releaseName = "gpu"
	namespace   = "monitoring"
	fullname    = "gpu-cupti-exporter"
)

// manifest is one rendered YAML document.
type manifest struct {
	Source string // template file
	Kind   string
	Name   string
	Body   []byte
}

func (m manifest) String() string { return fmt.Sprintf("%s %s (%s)", m.Kind, m.Name, m.Source) }

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	c, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("loading chart %s: %v", chartDir, err)
	}
	return c
}

// renderValues renders the chart with these values (merged over values.yaml) after
// checking them against values.schema.json, as helm install does.
// renderYAML renders chart c with values given as YAML.
func renderYAML(t *testing.T, c *chart.Chart, values string) (map[string]string, error) {
	t.Helper()
	vals := map[string]any{}
	if err := yaml.Unmarshal([]byte(values), &vals); err != nil {
		t.Fatalf("test values %q: %v", values, err)
	}
	return renderValues(t, c, vals)
}

func renderValues(t *testing.T, c *chart.Chart, vals map[string]any) (map[string]string, error) {
	t.Helper()
	rv, err := chartutil.ToRenderValues(c, vals,
		chartutil.ReleaseOptions{Name: releaseName, Namespace: namespace, IsInstall: true, Revision: 1},
		chartutil.DefaultCapabilities)
	if err != nil {
		return nil, err
	}
	return engine.Render(c, rv)
}

// render renders and splits the output into manifests, failing on any error.
func render(t *testing.T, valuesYAML string) ([]manifest, string) {
	t.Helper()
	out, err := renderYAML(t, loadChart(t), valuesYAML)
	if err != nil {
		t.Fatalf("rendering with values %s: %v", valuesYAML, err)
	}
	var notes string
	for f, body := range out {
		if filepath.Base(f) == "NOTES.txt" {
			notes = body
		}
	}
	return manifestsOf(t, out), notes
}

// manifestsOf splits rendered templates (file -> text) into their documents, files in name
// order, leaving out NOTES.txt and documents that hold only comments.
func manifestsOf(t *testing.T, out map[string]string) []manifest {
	t.Helper()
	var files []string
	for f := range out {
		if filepath.Base(f) != "NOTES.txt" {
			files = append(files, f)
		}
	}
	sort.Strings(files)
	var ms []manifest
	for _, f := range files {
		for _, doc := range strings.Split(out[f], "\n---") {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			var head struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
				t.Fatalf("%s: invalid YAML: %v\n%s", f, err, numbered(doc))
			}
			ms = append(ms, manifest{Source: f, Kind: head.Kind, Name: head.Metadata.Name, Body: []byte(doc)})
		}
	}
	return ms
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

func numbered(doc string) string {
	var b bytes.Buffer
	for i, l := range strings.Split(doc, "\n") {
		fmt.Fprintf(&b, "%4d  %s\n", i+1, l)
	}
	return b.String()
}

// kinds returns "Kind/name" of each manifest, sorted.
func kinds(ms []manifest) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Kind+"/"+m.Name)
	}
	sort.Strings(out)
	return out
}

func find(t *testing.T, ms []manifest, kind string) manifest {
	t.Helper()
	for _, m := range ms {
		if m.Kind == kind {
			return m
		}
	}
	t.Fatalf("no %s rendered; got %v", kind, kinds(ms))
	return manifest{}
}
