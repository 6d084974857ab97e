package e2e

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/otlptranslator"

	"github.com/cupti-exporter/cupti-exporter/recording/demo"
)

// TestOTLPPrometheusNaming: with --otlp.naming=prometheus every family /metrics serves
// (summaries aside, which OTLP has no place for) is pushed under its Prometheus name,
// without a unit, its series' labels as the attributes, histograms as explicit buckets; and
// the name translator the Collector's prometheusremotewrite exporter uses
// (otlptranslator, its default UnderscoreEscapingWithSuffixes) turns each back into the
// scraped name, so that the dashboards read the same series through a Collector
// (docs/fleet.md; dashboards/prometheus_fleet_e2e_test.go checks that with a real one).
func TestOTLPPrometheusNaming(t *testing.T) {
	file := filepath.Join(t.TempDir(), "demo.cuptirec")
	if err := os.WriteFile(file, demo.Recording(), 0o644); err != nil {
		t.Fatal(err)
	}
	r, addr := serveOTLPgRPC(t)
	p := replayedProc(t, file, "--attribution.kernel-families=all", "--attribution.pod-families=all", "--activity.pod-histograms",
		"--series.extra=all", "--otlp.naming=prometheus", "--otlp.endpoint="+addr, "--otlp.insecure", "--otlp.interval=300ms")
	_, fams := p.scrape(t)
	pushed := pushedMetrics(r.pushAfterScrape(t))
	for _, pb := range prometheusNamingProblems(fams, pushed) {
		t.Error(pb)
	}
}

// prometheusNamingProblems compares a scrape with a push made under --otlp.naming=prometheus.
func prometheusNamingProblems(fams map[string]*dto.MetricFamily, pushed map[string]*pushedMetric) []string {
	var problems []string
	namer := otlptranslator.NewMetricNamer("", otlptranslator.UnderscoreEscapingWithSuffixes)
	labelNamer := otlptranslator.LabelNamer{}
	kinds := map[dto.MetricType]struct {
		pushed string
		otel   otlptranslator.MetricType
	}{
		dto.MetricType_COUNTER:   {"Sum", otlptranslator.MetricTypeMonotonicCounter},
		dto.MetricType_GAUGE:     {"Gauge", otlptranslator.MetricTypeGauge},
		dto.MetricType_UNTYPED:   {"Gauge", otlptranslator.MetricTypeGauge},
		dto.MetricType_HISTOGRAM: {"Histogram", otlptranslator.MetricTypeHistogram},
	}
	served := map[string]bool{}
	for _, name := range slices.Sorted(maps.Keys(fams)) {
		f := fams[name]
		kind, ok := kinds[f.GetType()]
		if !ok || len(f.GetMetric()) == 0 || scrapeOnly(name) {
			continue // summaries: OTLP has no place for them
		}
		served[name] = true
		m := pushed[name]
		if m == nil {
			problems = append(problems, fmt.Sprintf("%s: served, not pushed", name))
			continue
		}
		if m.kind != kind.pushed || m.unit != "" {
			problems = append(problems, fmt.Sprintf("%s: pushed as a %s with unit %q, want a %s without one", name, m.kind, m.unit, kind.pushed))
		}
		if got, err := namer.Build(otlptranslator.Metric{Name: m.name, Unit: m.unit, Type: kind.otel}); got != name || err != nil {
			problems = append(problems, fmt.Sprintf("%s: a Collector names it %q (%v)", name, got, err))
		}
		points := map[string]bool{}
		for _, pt := range m.points {
			points[labelString(pt)] = true
			for k := range pt {
				if got, err := labelNamer.Build(k); got != k || err != nil {
					problems = append(problems, fmt.Sprintf("%s: a Collector names attribute %s %q (%v)", name, k, got, err))
				}
			}
		}
		for _, s := range f.GetMetric() {
			want := map[string]string{}
			for _, l := range s.GetLabel() {
				if l.GetValue() != "" {
					want[l.GetName()] = l.GetValue()
				}
			}
			if !points[labelString(want)] {
				problems = append(problems, fmt.Sprintf("%s: no point has exactly the labels {%s}", name, labelString(want)))
			}
		}
		if len(m.points) != len(f.GetMetric()) {
			problems = append(problems, fmt.Sprintf("%s: %d points pushed, %d series served", name, len(m.points), len(f.GetMetric())))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(pushed)) {
		if !served[name] {
			problems = append(problems, fmt.Sprintf("%s: pushed, not served", name))
		}
	}
	return problems
}

// scrapeOnly says whether a family describes the scrape itself: the time its collection took
// and the /metrics handler's own counters.
func scrapeOnly(name string) bool {
	return name == "cupti_exporter_collect_duration_seconds" || strings.HasPrefix(name, "promhttp_metric_handler_")
}

// labelString is a label or attribute set in one sorted string.
func labelString(m map[string]string) string {
	kv := make([]string, 0, len(m))
	for k, v := range m {
		kv = append(kv, k+"="+v)
	}
	slices.Sort(kv)
	return strings.Join(kv, ",")
}
