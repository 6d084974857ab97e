package dashboards

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/cupti-exporter/cupti-exporter/internal/testutil"
	"github.com/cupti-exporter/cupti-exporter/recording/demo"
)

// This file is the fleet end-to-end check (scripts/ci/prometheus-e2e.sh runs it after
// prometheus_e2e_test.go, whose build of the exporter it reuses; docs/fleet.md
// describes both paths). Two exporters, the demo and the synthetic two-GPU recording
// replayed as two nodes, are read three ways at once:
//
//   - direct: a Prometheus scrapes them as in prometheus_e2e_test.go; the reference;
//   - agent: a Prometheus in agent mode scrapes them with the same job (honor_labels, a node
//     label per exporter) and remote-writes to a central Prometheus
//     (--web.enable-remote-write-receiver), adding the external label cluster;
//   - gateway: both push OTLP under the Prometheus names (--otlp.naming=prometheus) to one
//     OpenTelemetry Collector (OTELCOL_BINARY, built by scripts/ci/otelcol.sh), whose
//     prometheusremotewrite exporter writes to a second central Prometheus, adding the same
//     cluster label.
//
// Each central Prometheus loads the chart's rules (the gateway's with CuptiExporterDown
// for pushes, gatewayRuleValues). For each exporter ($instance), every dashboard expression
// (panels and variables) and every alert operand that returns data on the direct server
// must return data on each central one. Both central servers must also carry both
// exporters' instance labels and the cluster label, and no alert may be pending. Last, one
// exporter is killed and the gateway's CuptiExporterDown must go pending for it alone.

const (
	fleetEnv       = "CUPTI_FLEET_E2E"
	fleetCluster   = "gpu-east"
	fleetJob       = "gpu-cupti-exporter"
	fleetDeadline  = 90 * time.Second
	fleetOTLPEvery = "1s"
)

// fleetPath is one way from the exporters to a central Prometheus.
type fleetPath struct {
	name    string // "agent" or "gateway"
	central server
	rules   []promQuery // the operands of the alerts its central server evaluates
}

// gatewayRuleValues are the chart's prometheusRule values for a central server fed by a
// Collector: CuptiExporterDown by pushes that stopped (no up series there), after 10 s
// here so that the check sees it.
var gatewayRuleValues = map[string]any{"exporterDown": map[string]any{"via": "otlp", "silentFor": "10s"}}

func TestFleetEndToEnd(t *testing.T) {
	if os.Getenv(fleetEnv) == "" {
		t.Skipf("set %s=1 and OTELCOL_BINARY to run (scripts/ci/prometheus-e2e.sh does): it needs the prometheus binary and a Collector with the prometheusremotewrite exporter", fleetEnv)
	}
	promBin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatalf("prometheus server not found: install it (apt-get install -y prometheus): %v", err)
	}
	otelcol := os.Getenv("OTELCOL_BINARY")
	if otelcol == "" {
		t.Fatal("OTELCOL_BINARY is not set: build the collector with scripts/ci/otelcol.sh")
	}
	start := time.Now()
	dir := t.TempDir()

	bin, synth := e2eExporter(t)
	demoRec := filepath.Join(dir, "demo.cuptirec")
	if err := os.WriteFile(demoRec, demo.Recording(), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("exporter built and recordings written after %s", time.Since(start).Round(time.Millisecond))
	replays := []replay{{name: "demo", addr: testutil.FreeAddr(t), gpus: 1}, {name: "synthetic", addr: testutil.FreeAddr(t), gpus: 2}}
	recs := map[string]string{"demo": demoRec, "synthetic": synth}
	rulesFile, gatewayRulesFile := filepath.Join(dir, "rules.yaml"), filepath.Join(dir, "rules-gateway.yaml")
	if err := os.WriteFile(rulesFile, renderRulesFile(t), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gatewayRulesFile, renderRulesFile(t, gatewayRuleValues), 0o644); err != nil {
		t.Fatal(err)
	}

	// Three servers for the two paths' ends and the reference; the Collector; the agent.
	direct := server{name: "direct", url: "http://" + testutil.FreeAddr(t)}
	agentCentral := server{name: "agent central", url: "http://" + testutil.FreeAddr(t)}
	gatewayCentral := server{name: "gateway central", url: "http://" + testutil.FreeAddr(t)}
	startPrometheus(t, dir, promBin, direct, fleetServerConfig(replays, rulesFile, nil))
	startPrometheus(t, dir, promBin, agentCentral, fleetServerConfig(nil, rulesFile, nil), "--web.enable-remote-write-receiver")
	// Native histograms off, as on the direct server: with --otlp.naming=prometheus the
	// exporter pushes classic (explicit-bucket) histograms.
	startPrometheus(t, dir, promBin, gatewayCentral, fleetServerConfig(nil, gatewayRulesFile, nil), "--web.enable-remote-write-receiver")
	agent := server{name: "agent", url: "http://" + testutil.FreeAddr(t)}
	startPrometheus(t, dir, promBin, agent, fleetServerConfig(replays, "", &agentCentral), "--enable-feature=agent")
	otlpAddr := startGateway(t, dir, otelcol, gatewayCentral.url)

	// Each exporter serves /metrics and pushes OTLP under the Prometheus names (as
	// docs/fleet.md says to for this path); its OTLP service.instance.id is its scrape
	// address, so that $instance names the same exporter on both paths.
	exporters := map[string]*exec.Cmd{}
	for _, r := range replays {
		exporters[r.name] = startProc(t, dir, r.name, bin, "replay", recs[r.name], "--replay.loop", "--replay.speed=4",
			"--web.listen-address="+r.addr, "--web.health-listen-address=127.0.0.1:0",
			"--otlp.endpoint="+otlpAddr, "--otlp.insecure", "--otlp.interval="+fleetOTLPEvery, "--otlp.naming=prometheus",
			"--otlp.resource-attribute=service.instance.id="+r.addr,
			"--otlp.resource-attribute=k8s.node.name=gpu-node-"+r.name)
	}
	for _, s := range []server{direct, agentCentral, gatewayCentral, agent} {
		waitReady(t, s.url+"/-/ready")
	}
	t.Logf("exporters, collector and Prometheus servers up after %s", time.Since(start).Round(time.Millisecond))

	paths := []fleetPath{{name: "agent", central: agentCentral, rules: ruleOperands(t)},
		{name: "gateway", central: gatewayCentral, rules: ruleOperands(t, gatewayRuleValues)}}
	dashQs := loadDashboardQueries(t)
	expected := loadExpected(t)

	// Each round first evaluates everything on the direct server, which must answer all that
	// the Prometheus end-to-end check requires of these replays (expected-empty.yaml), so
	// that the comparison is never made on a reference that has not seen everything yet.
	var problems []string
	var summary []string
	deadline := time.Now().Add(fleetDeadline)
	for {
		problems, summary = nil, nil
		want := evalDirect(t, direct, replays, dashQs, paths)
		problems = append(problems, directIncomplete(want, replays, expected)...)
		for _, p := range paths {
			pr, sum := compareFleetPath(t, want, p, replays, dashQs)
			problems = append(problems, pr...)
			summary = append(summary, sum)
			problems = append(problems, checkFleetIdentity(p, replays)...)
			problems = append(problems, checkRulesAndAlerts(t, p.central, replays)...)
		}
		problems = append(problems, checkValues(agentCentral, replays)...)
		if len(problems) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(2 * time.Second)
	}
	if len(problems) == 0 {
		var stopped string
		problems, stopped = checkPushStopped(gatewayCentral, replays[0], exporters[replays[0].name])
		summary = append(summary, stopped)
	}
	for _, p := range problems {
		t.Error(p)
	}
	for _, s := range summary {
		t.Log(s)
	}
	if t.Failed() {
		var names []string
		for n := range centralNames(gatewayCentral) {
			names = append(names, n)
		}
		sort.Strings(names)
		t.Logf("metric names on the gateway path's central server: %s", strings.Join(names, " "))
	}
	t.Logf("fleet check done in %s", time.Since(start).Round(time.Millisecond))
}

// ---- processes and configuration ----

// startPrometheus runs a Prometheus server (or agent) for s with the given configuration.
func startPrometheus(t *testing.T, dir, bin string, s server, cfg []byte, flags ...string) {
	t.Helper()
	name := strings.ReplaceAll(s.name, " ", "-")
	sdir := filepath.Join(dir, "prom-"+name)
	if err := os.MkdirAll(sdir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(sdir, "prometheus.yml")
	if err := os.WriteFile(file, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	storage := "--storage.tsdb.path="
	if slices.Contains(flags, "--enable-feature=agent") {
		storage = "--storage.agent.path="
	}
	args := append([]string{"--config.file=" + file, storage + filepath.Join(sdir, "data"),
		"--web.listen-address=" + strings.TrimPrefix(s.url, "http://"), "--log.level=warn"}, flags...)
	startProc(t, dir, "prometheus-"+name, bin, args...)
}

// fleetServerConfig is a Prometheus configuration: scraping the replays (if any) as the
// chart's ServiceMonitor does (honor_labels, the target labels prometheus-operator sets, a
// node label per exporter), evaluating rulesFile (if set), and, for an agent,
// remote-writing to central with the cluster as an external label.
func fleetServerConfig(replays []replay, rulesFile string, central *server) []byte {
	type staticConfig struct {
		Targets []string          `json:"targets"`
		Labels  map[string]string `json:"labels"`
	}
	var sc []staticConfig
	for _, r := range replays {
		labels := operatorLabels("gpu-cupti-exporter-" + r.name)
		labels["node"] = "gpu-node-" + r.name
		sc = append(sc, staticConfig{Targets: []string{r.addr}, Labels: labels})
	}
	global := map[string]any{"scrape_interval": "1s", "scrape_timeout": "1s"}
	cfg := map[string]any{"global": global}
	if rulesFile != "" {
		global["evaluation_interval"] = "1s"
		cfg["rule_files"] = []string{rulesFile}
	}
	if len(sc) > 0 {
		cfg["scrape_configs"] = []any{map[string]any{"job_name": fleetJob, "honor_labels": true, "static_configs": sc}}
	}
	if central != nil {
		global["external_labels"] = map[string]string{"cluster": fleetCluster}
		cfg["remote_write"] = []any{map[string]any{
			"url":          central.url + "/api/v1/write",
			"queue_config": map[string]any{"batch_send_deadline": "1s"},
		}}
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		panic(err)
	}
	return b
}

// startGateway runs the Collector with the configuration docs/fleet.md shows (OTLP gRPC
// in, prometheusremotewrite out), its addresses replaced by a free port and the central
// server at centralURL, and its own telemetry off; it returns its OTLP address.
func startGateway(t *testing.T, dir, bin, centralURL string) string {
	t.Helper()
	raw, err := os.ReadFile("../docs/fleet.md")
	if err != nil {
		t.Fatal(err)
	}
	var cfg string
	for _, m := range regexp.MustCompile("(?s)```yaml\n(receivers:.*?)```").FindAllStringSubmatch(string(raw), -1) {
		cfg = m[1]
	}
	addr := testutil.FreeAddr(t)
	for _, r := range [][2]string{
		{"0.0.0.0:4317", addr},
		{"https://central.example/api/v1/write", centralURL + "/api/v1/write"},
		{"cluster: " + fleetCluster, "cluster: " + fleetCluster},
		{"service:\n", "service:\n  telemetry:\n    metrics: {level: none}\n"}, // no :8888 listener
	} {
		if !strings.Contains(cfg, r[0]) {
			t.Fatalf("docs/fleet.md: the Collector configuration (a yaml block starting with receivers:) has no %q", r[0])
		}
		cfg = strings.Replace(cfg, r[0], r[1], 1)
	}
	file := filepath.Join(dir, "otelcol.yaml")
	if err := os.WriteFile(file, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	startProc(t, dir, "otelcol", bin, "--config", file)
	return addr
}

// ---- comparison ----

// evalDirect evaluates every dashboard expression for each replay (keyed by its name) and
// the alert operands of each path (keyed by rulesKey) on s.
func evalDirect(t *testing.T, s server, replays []replay, dashQs []dashQueries, paths []fleetPath) map[string][]evaluation {
	out := map[string][]evaluation{}
	for _, r := range replays {
		out[r.name] = evalDashboards(t, s, r, dashQs)
	}
	for _, p := range paths {
		out[rulesKey(p)] = evalRules(s, p.rules)
	}
	return out
}

// rulesKey keys the evaluations of p's alert operands.
func rulesKey(p fleetPath) string { return "alerts of the " + p.name + " path" }

func evalRules(s server, ruleQs []promQuery) []evaluation {
	var out []evaluation
	for _, q := range ruleQs {
		res, err := instantQuery(s.url, q.expr)
		out = append(out, evaluation{where: q.where, expr: q.expr, n: len(res), err: err})
	}
	return out
}

// directIncomplete lists the dashboard expressions that the Prometheus end-to-end check
// requires to answer for these replays (not in expected-empty.yaml for classic
// histograms) and that do not answer on the direct server yet.
func directIncomplete(want map[string][]evaluation, replays []replay, expected []expectedEmpty) []string {
	var problems []string
	used := map[*expectedEmpty]bool{}
	for _, r := range replays {
		for _, e := range want[r.name] {
			if e.n == 0 || e.err != nil {
				for _, p := range judge(e, "classic", r.name, expected, used) {
					problems = append(problems, "direct (reference) server: "+p)
				}
			}
		}
	}
	return problems
}

// compareFleetPath evaluates every dashboard expression for each replay and every alert
// operand on p's central server, and returns what answers in want (the direct server's
// answers) and not there, and a one-line summary.
func compareFleetPath(t *testing.T, want map[string][]evaluation, p fleetPath, replays []replay, dashQs []dashQueries) ([]string, string) {
	var problems []string
	answered, checked := 0, 0
	held := centralNames(p.central)
	judgeOne := func(rep string, want, got evaluation) {
		switch {
		case want.err != nil:
			problems = append(problems, fmt.Sprintf("%s (direct, %s): %q: %v", want.where, rep, want.expr, want.err))
		case want.n == 0: // nothing to carry
		case got.err == nil && got.n > 0:
			checked++
			answered++
		default:
			checked++
			problems = append(problems, fmt.Sprintf("%s path: %s (%s): %d series on a direct scrape, none on the central server (%v; %s): %s",
				p.name, want.where, rep, want.n, got.err, missingNames(got.expr, held), got.expr))
		}
	}
	got := map[string][]evaluation{rulesKey(p): evalRules(p.central, p.rules)}
	for _, r := range replays {
		got[r.name] = evalDashboards(t, p.central, r, dashQs)
	}
	reps := []string{rulesKey(p)}
	for _, r := range replays {
		reps = append(reps, r.name)
	}
	for _, rep := range reps {
		byWhere := map[string]evaluation{}
		for _, g := range got[rep] {
			byWhere[g.where] = g
		}
		for _, w := range want[rep] {
			judgeOne(rep, w, byWhere[w.where])
		}
	}
	return problems, fmt.Sprintf("%s path: %d of %d (replay, expression) pairs that answer on a direct scrape answer on the central server",
		p.name, answered, checked)
}

// centralNames are the metric names s holds (none if it cannot say).
func centralNames(s server) map[string]bool {
	var names []string
	if data, err := apiGet(s.url + "/api/v1/label/__name__/values"); err == nil {
		_ = json.Unmarshal(data, &names)
	}
	held := map[string]bool{}
	for _, n := range names {
		held[n] = true
	}
	return held
}

// missingNames says which metric names expr selects that the central server does not hold
// (the reason most gateway-path expressions stay empty: the OTLP names differ).
func missingNames(expr string, held map[string]bool) string {
	names, err := parse(promQuery{expr: expr})
	if err != nil {
		return err.Error()
	}
	var missing []string
	for _, n := range names {
		if !held[n] {
			missing = append(missing, n)
		}
	}
	if len(missing) == 0 {
		return "every metric name it selects is held: its labels differ"
	}
	slices.Sort(missing)
	return "not held: " + strings.Join(slices.Compact(missing), ", ")
}

// checkFleetIdentity checks what tells the exporters apart on p's central server: each
// exporter's instance, on the build-info series the dashboards' $instance reads (on the
// gateway path, target_info: the OTLP resource), and the cluster label on every series.
func checkFleetIdentity(p fleetPath, replays []replay) []string {
	var problems []string
	s := p.central
	info := "cupti_exporter_build_info"
	if p.name == "gateway" {
		info = "target_info"
	}
	res, err := instantQuery(s.url, `count by (instance, cluster) (`+info+`)`)
	have := map[string]string{}
	for _, x := range res {
		have[x.Metric["instance"]] = x.Metric["cluster"]
	}
	for _, r := range replays {
		if have[r.addr] != fleetCluster {
			problems = append(problems, fmt.Sprintf("%s path: no %s{instance=%q, cluster=%q} on the central server (have %v, %v)", p.name, info, r.addr, fleetCluster, have, err))
		}
	}
	// Recording rules and alerts, which the central server evaluates itself, aside.
	own := `{__name__=~"[^:]+", __name__!~"ALERTS|ALERTS_FOR_STATE", cluster!="` + fleetCluster + `"}`
	if res, err := instantQuery(s.url, `count by (__name__) (`+own+`)`); err != nil || len(res) > 0 {
		var names []string
		for _, x := range res {
			names = append(names, x.Metric["__name__"])
		}
		problems = append(problems, fmt.Sprintf("%s path: series without cluster=%q on the central server: %v %v", p.name, fleetCluster, names, err))
	}
	if p.name == "agent" {
		// node comes from the agent's target labels, as the chart's relabeling sets it.
		res, err := instantQuery(s.url, `count by (instance, node) (cupti_exporter_build_info)`)
		for _, r := range replays {
			if !slices.ContainsFunc(res, func(x vectorSample) bool {
				return x.Metric["instance"] == r.addr && x.Metric["node"] == "gpu-node-"+r.name
			}) {
				problems = append(problems, fmt.Sprintf("agent path: no build info with node gpu-node-%s for %s: %v %v", r.name, r.addr, res, err))
			}
		}
	}
	return problems
}

// checkPushStopped kills the exporter of replay r and waits for the gateway path's
// CuptiExporterDown (the chart's rule with gatewayRuleValues) to go pending for it, and for
// it alone: on that path there is no up series, and an exporter that stops pushing is down.
func checkPushStopped(central server, r replay, exporter *exec.Cmd) ([]string, string) {
	if err := exporter.Process.Kill(); err != nil {
		return []string{fmt.Sprintf("stopping the %s exporter: %v", r.name, err)}, ""
	}
	killed := time.Now()
	var got []string
	deadline := time.Now().Add(45 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(2 * time.Second)
		data, err := apiGet(central.url + "/api/v1/alerts")
		if err != nil {
			continue
		}
		var alerts struct {
			Alerts []struct {
				Labels map[string]string `json:"labels"`
				State  string            `json:"state"`
			} `json:"alerts"`
		}
		if json.Unmarshal(data, &alerts) != nil {
			continue
		}
		got = nil
		for _, a := range alerts.Alerts {
			if a.Labels["alertname"] == "CuptiExporterDown" {
				got = append(got, a.Labels["instance"]+" "+a.State)
			}
		}
		if len(got) > 0 {
			break
		}
	}
	if want := []string{r.addr + " pending"}; !slices.Equal(got, want) {
		return []string{fmt.Sprintf("gateway path: after the %s exporter stopped pushing, CuptiExporterDown is %v, want %v", r.name, got, want)}, ""
	}
	return nil, fmt.Sprintf("gateway path: CuptiExporterDown pending for the killed %s exporter, alone, %s after the kill (silentFor 10s)",
		r.name, time.Since(killed).Round(time.Second))
}
