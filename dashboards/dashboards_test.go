package dashboards

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
)

var update = flag.Bool("update", false, "rewrite the dashboards' JSON and metric-names.txt")

func init() {
	// Panel options and Prometheus queries decode into their typed forms (and strictly).
	plugins.RegisterDefaultPlugins()
}

func marshal(t *testing.T, d dashboard.Dashboard) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(d); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestGenerated keeps the checked-in JSON equal to what generate_test.go builds.
func TestGenerated(t *testing.T) {
	for _, db := range all {
		d, err := build(db.build())
		if err != nil {
			t.Fatalf("%s: %v", db.file, err)
		}
		want := marshal(t, d)
		if *update {
			if err := os.WriteFile(db.file, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(db.file)
		if err != nil {
			t.Fatalf("%v (generate it: go test ./dashboards/ -update)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what generate_test.go builds: edit generate_test.go, then run go test ./dashboards/ -update", db.file)
		}
	}
}

func dashboardFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards found (%v)", err)
	}
	sort.Strings(files)
	return files
}

// loadDashboard decodes a dashboard with the SDK's strict decoder and validates it.
func loadDashboard(t *testing.T, file string) dashboard.Dashboard {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard.Dashboard
	if err := d.UnmarshalJSONStrict(raw); err != nil {
		t.Fatalf("%s: strict decode: %v", file, err)
	}
	if err := d.Validate(); err != nil {
		t.Fatalf("%s: validate: %v", file, err)
	}
	return d
}

func TestDashboardsStrictAndValid(t *testing.T) {
	uids := map[string]string{}
	for _, f := range dashboardFiles(t) {
		d := loadDashboard(t, f)
		if d.Uid == nil || *d.Uid == "" || d.Title == nil {
			t.Errorf("%s: no uid or title", f)
			continue
		}
		if other, dup := uids[*d.Uid]; dup {
			t.Errorf("%s and %s share uid %s", f, other, *d.Uid)
		}
		uids[*d.Uid] = f

		vars := map[string]bool{}
		for _, v := range d.Templating.List {
			vars[v.Name] = true
		}
		for _, want := range []string{"datasource", "cluster", "instance", "gpu"} {
			if f == "workloads.json" && want == "gpu" {
				want = "pod"
			}
			if !vars[want] {
				t.Errorf("%s: no variable %q", f, want)
			}
		}
		for _, p := range panels(d) {
			if p.Title == nil || *p.Title == "" {
				t.Errorf("%s: panel %s has no title", f, p.Type)
			}
			if p.Datasource == nil || p.Datasource.Uid == nil || *p.Datasource.Uid != "${datasource}" {
				t.Errorf("%s: panel %q does not use the datasource variable", f, deref(p.Title))
			}
			if len(p.Targets) == 0 {
				t.Errorf("%s: panel %q has no query", f, deref(p.Title))
			}
		}
	}
}

// panels returns every panel, including those inside collapsed rows.
func panels(d dashboard.Dashboard) []dashboard.Panel {
	var out []dashboard.Panel
	for _, p := range d.Panels {
		if p.Panel != nil {
			out = append(out, *p.Panel)
		}
		if p.RowPanel != nil {
			out = append(out, p.RowPanel.Panels...)
		}
	}
	return out
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// TestTargetsStrict decodes every panel target strictly as a Prometheus query: the
// dashboard's strict decoder keeps unknown query fields.
func TestTargetsStrict(t *testing.T) {
	for _, f := range dashboardFiles(t) {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			Panels []rawPanel `json:"panels"`
		}
		if err := json.Unmarshal(raw, &d); err != nil {
			t.Fatal(err)
		}
		n := 0
		var walk func([]rawPanel)
		walk = func(ps []rawPanel) {
			for _, p := range ps {
				for i, tg := range p.Targets {
					n++
					var q prometheus.Dataquery
					if err := q.UnmarshalJSONStrict(tg); err != nil {
						t.Errorf("%s: panel %q target %d: %v", f, p.Title, i, err)
						continue
					}
					if err := q.Validate(); err != nil {
						t.Errorf("%s: panel %q target %d: %v", f, p.Title, i, err)
					}
					if q.RefId == nil || *q.RefId == "" {
						t.Errorf("%s: panel %q target %d has no refId", f, p.Title, i)
					}
				}
				walk(p.Panels)
			}
		}
		walk(d.Panels)
		if n == 0 {
			t.Errorf("%s: no targets found", f)
		}
	}
}

type rawPanel struct {
	Title   string            `json:"title"`
	Targets []json.RawMessage `json:"targets"`
	Panels  []rawPanel        `json:"panels"`
}
