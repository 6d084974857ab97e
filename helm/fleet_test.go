package helm

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/promslog"
	"github.com/prometheus/prometheus/config"
	_ "github.com/prometheus/prometheus/discovery/kubernetes" // kubernetes_sd_configs
	appsv1 "k8s.io/api/apps/v1"
)

// fleetValues returns the yaml block of docs/fleet.md that starts with first (the chart
// values, by their top-level key; a configuration, by its first line).
func fleetValues(t *testing.T, first string) string {
	t.Helper()
	raw, err := os.ReadFile("../docs/fleet.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(raw), -1) {
		if strings.HasPrefix(m[1], first) {
			return m[1]
		}
	}
	t.Fatalf("docs/fleet.md has no yaml block starting with %q", first)
	return ""
}

// TestFleetGatewayValues: the values docs/fleet.md gives for the Collector gateway render,
// with the Prometheus naming and CuptiExporterDown for pushes, and the variables they refer
// to with $(NAME) come earlier in the container's env, which Kubernetes needs to expand them.
func TestFleetGatewayValues(t *testing.T) {
	ms, _ := render(t, fleetValues(t, "extraArgs:"))
	objs := decodeAll(t, ms)
	for _, g := range decodeStrict(t, find(t, ms, "PrometheusRule")).(*prometheusRule).Spec.Groups {
		for _, r := range g.Rules {
			if r.Alert == "CuptiExporterDown" && !strings.Contains(r.Expr, "present_over_time(cupti_exporter_build_info") {
				t.Errorf("CuptiExporterDown is %q; want it on pushes (exporterDown.via otlp)", r.Expr)
			}
		}
	}
	if _, ok := objs["ServiceMonitor/"+fullname]; ok {
		t.Error("the gateway values render a ServiceMonitor; nothing scrapes on that path")
	}
	exp := container(t, objs["DaemonSet/"+fullname].(*appsv1.DaemonSet).Spec.Template.Spec, "exporter", false)
	wantArgs(t, exp, "--otlp.naming=prometheus")
	var defined []string
	refRE := regexp.MustCompile(`\$\(([A-Z_]+)\)`)
	for _, e := range exp.Env {
		for _, ref := range refRE.FindAllStringSubmatch(e.Value, -1) {
			if !slices.Contains(defined, ref[1]) {
				t.Errorf("env %s refers to $(%s), which is not defined before it (%v)", e.Name, ref[1], defined)
			}
		}
		defined = append(defined, e.Name)
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_RESOURCE_ATTRIBUTES"} {
		if _, ok := envValue(exp, name); !ok {
			t.Errorf("no %s in the exporter's env", name)
		}
	}
	if v, _ := envValue(exp, "OTEL_RESOURCE_ATTRIBUTES"); !strings.Contains(v, "service.instance.id=$(NODE_NAME)") {
		t.Errorf("OTEL_RESOURCE_ATTRIBUTES = %q, want service.instance.id from the node", v)
	}
}

// TestFleetAgentValues: the values docs/fleet.md gives for the agent path render a
// ServiceMonitor with honorLabels and the node relabeling the agent's central server relies on.
func TestFleetAgentValues(t *testing.T) {
	ms, _ := render(t, fleetValues(t, "serviceMonitor:"))
	sm, ok := decodeAll(t, ms)["ServiceMonitor/"+fullname].(*serviceMonitor)
	if !ok {
		t.Fatal("the agent values render no ServiceMonitor")
	}
	ep := sm.Spec.Endpoints[0]
	if !ep.HonorLabels {
		t.Error("honorLabels is off")
	}
	if !slices.ContainsFunc(ep.Relabelings, func(r relabelConfig) bool { return r.TargetLabel == "node" }) {
		t.Errorf("no relabeling to node: %+v", ep.Relabelings)
	}
}

// TestFleetAgentConfig: the plain agent configuration of docs/fleet.md loads with
// Prometheus' own configuration code, Kubernetes discovery included (Debian's promtool is
// built without it, so it cannot check this file).
func TestFleetAgentConfig(t *testing.T) {
	cfg, err := config.Load(fleetValues(t, "# prometheus --enable-feature=agent"), promslog.NewNopLogger())
	if err != nil {
		t.Fatalf("docs/fleet.md agent configuration: %v", err)
	}
	if got := cfg.GlobalConfig.ExternalLabels.Get("cluster"); got == "" {
		t.Error("no cluster external label")
	}
	if len(cfg.ScrapeConfigs) != 1 || !cfg.ScrapeConfigs[0].HonorLabels || len(cfg.RemoteWriteConfigs) != 1 {
		t.Errorf("want one scrape job with honor_labels and one remote write: %+v", cfg)
	}
}
