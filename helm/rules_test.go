package helm

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"text/template"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"
)

// renderedRules renders the PrometheusRule in node mode with every optional alert and the
// recording rules on.
func renderedRules(t *testing.T) []ruleGroup {
	t.Helper()
	return renderRules(t, "")
}

// renderRules renders the PrometheusRule as renderedRules does, with extra prometheusRule values.
func renderRules(t *testing.T, prometheusRuleValues string) []ruleGroup {
	t.Helper()
	ms, _ := render(t, "prometheusRule: {enabled: true, recordingRules: {enabled: true}"+prometheusRuleValues+"}\nserviceMonitor: {enabled: true}\n")
	pr := decodeStrict(t, find(t, ms, "PrometheusRule")).(*prometheusRule)
	return pr.Spec.Groups
}

// alertSeverities are the alerts and their severities by impact (docs/runbook.md):
// critical when a GPU lost work or needs a reset or replacement now, info for a workload's
// inefficiency, warning for the rest.
var alertSeverities = []struct{ alert, severity string }{
	{"CuptiExporterDown", "warning"}, {"CuptiExporterSourceDown", "warning"}, {"CuptiCountersUnavailable", "warning"},
	{"CuptiActivityRecordsDropped", "warning"}, {"CuptiPMSamplesLost", "warning"}, {"CuptiGPUIdleHeldByPod", "info"},
	{"CuptiPageableCopies", "info"}, {"CuptiGPUXidResetRequired", "critical"}, {"CuptiGPUXidError", "warning"},
	{"CuptiGPUUncorrectableECC", "critical"}, {"CuptiGPURowRemapPending", "warning"}, {"CuptiGPURowRemapFailed", "critical"},
	{"CuptiGPULost", "critical"}, {"CuptiGPUThermalThrottling", "warning"}, {"CuptiGPUPowerThrottling", "info"},
	{"CuptiGPUHardwareSlowdown", "warning"},
	{"CuptiPodResourcesDown", "warning"}, {"CuptiTrainingStraggler", "warning"},
}

// alertTemplateFuncs stubs the functions Prometheus offers alert templates, so the
// templates' syntax can be checked with text/template.
var alertTemplateFuncs = template.FuncMap{
	"humanize": fmtAny, "humanize1024": fmtAny, "humanizePercentage": fmtAny, "humanizeDuration": fmtAny,
}

func fmtAny(v any) string { return "" }

// TestRulesParse parses every alert expression with the Prometheus PromQL parser, every
// duration with Prometheus' duration syntax and every annotation as a Go template.
func TestRulesParse(t *testing.T) {
	groups := renderedRules(t)
	var want []string
	for _, a := range alertSeverities {
		want = append(want, a.alert)
	}
	var got []string
	for _, g := range groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				continue // TestRecordingRules
			}
			got = append(got, r.Alert)
			expr, err := parser.NewParser(parser.Options{}).ParseExpr(r.Expr)
			if err != nil {
				t.Errorf("alert %s: expr %q: %v", r.Alert, r.Expr, err)
				continue
			}
			if expr.Type() != parser.ValueTypeVector {
				t.Errorf("alert %s: expr %q is a %s; alerts need an instant vector", r.Alert, r.Expr, expr.Type())
			}
			if _, err := model.ParseDuration(r.For); err != nil {
				t.Errorf("alert %s: for %q: %v", r.Alert, r.For, err)
			}
			if r.Labels["severity"] == "" {
				t.Errorf("alert %s has no severity label", r.Alert)
			}
			for _, k := range []string{"summary", "description"} {
				a := r.Annotations[k]
				if a == "" {
					t.Errorf("alert %s has no %s", r.Alert, k)
				}
				// Prometheus defines these variables before expanding an annotation.
				const defs = "{{$labels := .Labels}}{{$externalLabels := .ExternalLabels}}{{$value := .Value}}"
				tmpl, err := template.New(k).Funcs(alertTemplateFuncs).Option("missingkey=zero").Parse(defs + a)
				if err != nil {
					t.Errorf("alert %s: %s template: %v", r.Alert, k, err)
					continue
				}
				data := map[string]any{"Labels": map[string]string{}, "ExternalLabels": map[string]string{}, "Value": 1.0}
				if err := tmpl.Execute(io.Discard, data); err != nil {
					t.Errorf("alert %s: %s template: %v", r.Alert, k, err)
				}
			}
		}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("alerts %v; want %v", got, want)
	}
}

// TestWriteRulesFile writes the rendered rule groups as a Prometheus rules file to
// $CUPTI_RULES_OUT, and those rendered for exporters that push through a Collector
// (exporterDown.via otlp) to rules-otlp.yaml beside it, for scripts/ci/check-rules.sh
// (promtool check rules / test rules).
func TestWriteRulesFile(t *testing.T) {
	out := os.Getenv("CUPTI_RULES_OUT")
	if out == "" {
		t.Skip("CUPTI_RULES_OUT not set: scripts/ci/check-rules.sh sets it to extract the rules for promtool")
	}
	for file, groups := range map[string][]ruleGroup{
		out: renderedRules(t), filepath.Join(filepath.Dir(out), "rules-otlp.yaml"): renderRules(t, ", exporterDown: {via: otlp}"),
	} {
		b, err := yaml.Marshal(map[string]any{"groups": groups})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, b, 0o644); err != nil {
			t.Fatalf("writing rules file: %v", err)
		}
	}
}
