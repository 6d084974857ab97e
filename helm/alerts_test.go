package helm

import (
	"bufio"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
)

const (
	runbookFile    = "../docs/runbook.md"
	defaultRunbook = "https://github.com/cupti-exporter/cupti-exporter/blob/main/docs/runbook.md"
)

// alertRules returns the alerting rules of groups, by name.
func alertRules(groups []ruleGroup) map[string]rule {
	out := map[string]rule{}
	for _, g := range groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				out[r.Alert] = r
			}
		}
	}
	return out
}

// TestAlertSeverities checks each alert's severity by impact, and how values change it:
// prometheusRule.severities per alert, alertLabels.severity for every alert (the chart's
// only way before severities by impact), the first winning over the second.
func TestAlertSeverities(t *testing.T) {
	for _, tc := range []struct {
		name, values string
		all          string            // every alert's severity, if set
		override     map[string]string // these alerts' severities
	}{
		{name: "defaults"},
		{name: "severities", values: ", severities: {CuptiGPUPowerThrottling: warning, CuptiExporterDown: page}",
			override: map[string]string{"CuptiGPUPowerThrottling": "warning", "CuptiExporterDown": "page"}},
		{name: "alertLabels.severity for all", values: ", alertLabels: {severity: critical, team: ml}", all: "critical"},
		{name: "severities over alertLabels", values: ", alertLabels: {severity: critical}, severities: {CuptiGPUIdleHeldByPod: info}",
			all: "critical", override: map[string]string{"CuptiGPUIdleHeldByPod": "info"}},
	} {
		rules := alertRules(renderRules(t, tc.values))
		if len(rules) != len(alertSeverities) {
			t.Fatalf("%s: %d alerts rendered; want %d", tc.name, len(rules), len(alertSeverities))
		}
		for _, a := range alertSeverities {
			want := a.severity
			if tc.all != "" {
				want = tc.all
			}
			if s, ok := tc.override[a.alert]; ok {
				want = s
			}
			r := rules[a.alert]
			if got := r.Labels["severity"]; got != want {
				t.Errorf("%s: %s has severity %q; want %q", tc.name, a.alert, got, want)
			}
			if strings.Contains(tc.values, "team: ml") && r.Labels["team"] != "ml" {
				t.Errorf("%s: %s lacks the alertLabels: %v", tc.name, a.alert, r.Labels)
			}
		}
	}
	// A typo in an alert's name is refused, not ignored.
	if _, err := renderYAML(t, loadChart(t), "prometheusRule: {severities: {CuptiGpuLost: critical}}"); err == nil || !strings.Contains(err.Error(), "CuptiGpuLost") {
		t.Errorf("severities for an unknown alert: %v; want a schema error naming the key", err)
	}
}

// runbookAnchors returns the GitHub anchors of docs/runbook.md's second-level headings.
func runbookAnchors(t *testing.T) map[string]bool {
	t.Helper()
	f, err := os.Open(runbookFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]bool{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		if h, ok := strings.CutPrefix(s.Text(), "## "); ok {
			out[githubAnchor(h)] = true
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

var anchorDrop = regexp.MustCompile(`[^a-z0-9 _-]`)

// githubAnchor is the anchor GitHub gives a heading: lower case, punctuation dropped,
// spaces turned into hyphens.
func githubAnchor(heading string) string {
	return strings.ReplaceAll(anchorDrop.ReplaceAllString(strings.ToLower(strings.TrimSpace(heading)), ""), " ", "-")
}

// TestRunbookURLs checks that every alert's runbook_url points at a section of
// docs/runbook.md under prometheusRule.runbookBaseURL, and that every alert section of the
// runbook is an alert the chart renders.
func TestRunbookURLs(t *testing.T) {
	anchors := runbookAnchors(t)
	for _, base := range []string{"", "https://wiki.example.com/gpu/runbook"} {
		values, want := "", defaultRunbook
		if base != "" {
			values, want = ", runbookBaseURL: "+base, base
		}
		rules := alertRules(renderRules(t, values))
		for name, r := range rules {
			u := r.Annotations["runbook_url"]
			page, anchor, ok := strings.Cut(u, "#")
			if !ok || page != want {
				t.Errorf("%s: runbook_url %q; want %s#<section>", name, u, want)
				continue
			}
			if !anchors[anchor] {
				t.Errorf("%s: runbook_url %q: %s has no section #%s (a heading \"## %s\")", name, u, runbookFile, anchor, name)
			}
		}
	}
	rendered := map[string]bool{}
	for name := range alertRules(renderedRules(t)) {
		rendered[strings.ToLower(name)] = true
	}
	for a := range anchors {
		if strings.HasPrefix(a, "cupti") && !rendered[a] {
			t.Errorf("%s has section #%s, but the chart has no such alert", runbookFile, a)
		}
	}
}

// recordName is Prometheus' naming convention for recording rules, level:metric:operations.
var recordName = regexp.MustCompile(`^[a-z][a-z0-9_]*:(cupti_[a-z0-9_]+):[a-z0-9_]+$`)

// TestRecordingRules checks the recording rules: off by default, named level:metric:operations
// after a family the expression reads (a counter's name without _total), each an instant
// vector aggregated by the labels its level names. The distributed-training group, whose
// alert and dashboard read its records, is TestTrainingRules'.
func TestRecordingRules(t *testing.T) {
	ms, _ := render(t, "prometheusRule: {enabled: true}\nserviceMonitor: {enabled: true}\n")
	for _, g := range decodeStrict(t, find(t, ms, "PrometheusRule")).(*prometheusRule).Spec.Groups {
		for _, r := range g.Rules {
			if r.Record != "" && g.Name != trainingGroup {
				t.Fatalf("recording rule %s rendered with recordingRules.enabled false (the default)", r.Record)
			}
		}
	}
	n := 0
	for _, g := range renderRules(t, ", recordingRules: {enabled: true, interval: 30s}") {
		if g.Rules[0].Record == "" || g.Name == trainingGroup {
			continue
		}
		if g.Interval != "30s" {
			t.Errorf("group %s: interval %q; want 30s", g.Name, g.Interval)
		}
		for _, r := range g.Rules {
			n++
			if r.Alert != "" || r.For != "" || len(r.Annotations) > 0 || r.Labels["severity"] != "" {
				t.Errorf("recording group %s holds %+v; want recording rules only", g.Name, r)
			}
			m := recordName.FindStringSubmatch(r.Record)
			if m == nil {
				t.Errorf("%s: not named level:metric:operations", r.Record)
				continue
			}
			expr, err := parser.NewParser(parser.Options{}).ParseExpr(r.Expr)
			if err != nil || expr.Type() != parser.ValueTypeVector {
				t.Errorf("%s: expr %q: %v (type %v); want an instant vector", r.Record, r.Expr, err, expr)
				continue
			}
			if !strings.Contains(r.Expr, m[1]) {
				t.Errorf("%s: the expression %q reads no family %s*", r.Record, r.Expr, m[1])
			}
			// The level names the labels kept; cluster, which every rule keeps where present, only
			// when it is the only one.
			level := strings.Split(r.Record, ":")[0]
			for _, by := range aggregationLabels(expr) {
				if !slices.Contains(by, "cluster") {
					t.Errorf("%s: aggregates by %v without cluster: a central Prometheus would merge clusters", r.Record, by)
				}
				kept := slices.DeleteFunc(slices.Clone(by), func(l string) bool { return l == "cluster" || l == "le" })
				if got := strings.Join(kept, "_"); got != level && !(level == "cluster" && got == "") {
					t.Errorf("%s: aggregates by %v; the level %q should name them", r.Record, by, level)
				}
			}
		}
	}
	if n < 8 {
		t.Errorf("%d recording rules; want those of docs/sizing.md", n)
	}
}

// aggregationLabels returns the by-labels of the outermost aggregations of expr.
func aggregationLabels(expr parser.Expr) [][]string {
	var out [][]string
	parser.Inspect(expr, func(n parser.Node, path []parser.Node) error {
		if a, ok := n.(*parser.AggregateExpr); ok {
			for _, p := range path {
				if _, inner := p.(*parser.AggregateExpr); inner {
					return nil
				}
			}
			out = append(out, a.Grouping)
		}
		return nil
	})
	return out
}
