package dashboards

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"

	"github.com/cupti-exporter/cupti-exporter/exporter"
	"github.com/cupti-exporter/cupti-exporter/internal/testutil"
	"github.com/cupti-exporter/cupti-exporter/pmsample/pmdata"
)

// This file is the Prometheus end-to-end check (scripts/ci/prometheus-e2e.sh runs it): a
// real Prometheus server scrapes the exporter's --demo and the synthetic two-GPU replay,
// once with native histograms and once without, with the target labels
// prometheus-operator gives a ServiceMonitor target (honorLabels on), and loads the
// chart's alert rules. Then, through the HTTP API:
//
//   - every dashboard expression (all panels, all variables; Grafana's variables
//     substituted as Grafana would for that exporter) returns data for each replay, or is
//     listed in expected-empty.yaml with its reason (an entry that returns data fails too,
//     so the list stays true);
//   - every alert rule is healthy, its operand (the expression before the comparison)
//     returns data or is listed, and no alert is pending or firing on the healthy replays
//     (but those expectedAlerts lists, which must be);
//   - every recording rule is healthy, and its expression and the series Prometheus
//     recorded from it return data, or are listed;
//   - every input series of the rules' unit tests (helm/cupti-exporter/tests/
//     rules_test.yaml) has a label set Prometheus really stores for that metric.

const (
	e2eEnv       = "CUPTI_PROMETHEUS_E2E"
	expectedFile = "expected-empty.yaml"
	rulesTest    = "../helm/cupti-exporter/tests/rules_test.yaml"
	e2eDeadline  = 120 * time.Second
)

// rulesTrainingTest's input series are checked as rulesTest's (kube_pod_labels against the
// kube-state-metrics stand-in of training_e2e_test.go).
const rulesTrainingTest = "../helm/cupti-exporter/tests/rules_training_test.yaml"

// What Grafana's built-in variables become: Grafana's $__rate_interval with a 1 s scrape
// interval is 4 s; a little more keeps rates from flickering empty between scrapes.
var grafanaBuiltins = map[string]string{"__rate_interval": "10s", "__interval": "1s", "__range": "1m"}

// xidPanels are the panels judged on the health stand-in (serveHealth): the recordings carry
// the health families, but their GPUs raised no XID, so cupti_gpu_xid_errors_total has no
// series in any replay. Everything else about the dashboards is judged on the replays.
var xidPanels = map[string]bool{"XID errors": true}

// livePanels are the panels judged on the live stand-in (serveLive): those of the live
// sampler's state, interval and idle release, which no replay has. checkLive checks the
// fleet's counts on it: GPU 0 idle-released, GPU 1 sampling.
var livePanels = map[string]bool{"Sampling state": true, "Sampling interval in effect": true, "Idle release": true,
	"GPUs not sampled": true, "GPUs idle-released": true}

// operatorLabels are the target labels prometheus-operator sets for the chart's
// ServiceMonitor (release "gpu", namespace "monitoring"), plus the chart's node relabeling.
func operatorLabels(pod string) map[string]string {
	return map[string]string{
		"job": "gpu-cupti-exporter", "namespace": "monitoring", "pod": pod, "container": "exporter",
		"service": "gpu-cupti-exporter", "endpoint": "metrics", "node": "gpu-node-1",
	}
}

// replay is one exporter process (or stand-in) that Prometheus scrapes.
type replay struct {
	name   string // "demo", "synthetic", "health", "live" or "gpm"
	addr   string
	gpus   int
	only   []string        // if set, only these dashboards are evaluated against it
	panels map[string]bool // if set, only the panels of these titles (and no variable) are judged

	target map[string]string // if set, its target labels instead of operatorLabels (not an exporter)
}

// server is one Prometheus.
type server struct {
	name string // "native" or "classic"
	url  string
}

func TestPrometheusEndToEnd(t *testing.T) {
	if os.Getenv(e2eEnv) == "" {
		t.Skipf("set %s=1 to run (scripts/ci/prometheus-e2e.sh does): it needs the prometheus binary and takes about a minute", e2eEnv)
	}
	promBin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatalf("prometheus server not found: install it (apt-get install -y prometheus): %v", err)
	}
	start := time.Now()
	dir := t.TempDir()

	// The exporter and the synthetic two-GPU recording.
	bin, synth := e2eExporter(t)
	// The exporters listen on ports of the kernel's choice and the test reads them from their
	// logs (boundAddr): a port found free and let go could be taken before the exporter binds it
	// (it happened: the synthetic replay found its port taken by the health stand-in).
	standins := []replay{{name: "health", addr: serveHealth(t), only: []string{"fleet-overview.json", "gpu-detail.json"}, panels: xidPanels},
		{name: "live", addr: serveLive(t), only: []string{"fleet-overview.json", "gpu-detail.json"}, panels: livePanels},
		{name: "gpm", addr: serveGPM(t), only: []string{"fleet-overview.json", "gpu-detail.json"}, panels: gpmPanels}}
	standins = append(standins, trainingReplays(t, dir, bin)...) // training_e2e_test.go
	// The synthetic recording lasts 60 s (idle, matmul, copies, tiny kernels, idle): at 4x
	// every phase, copies included, is seen within 15 s.
	// Each exporter's plain health listener gets a port of its own too (the default, :9478,
	// would be shared by both and by anything else on the machine).
	startProc(t, dir, "demo", bin, "--demo", "--web.listen-address=127.0.0.1:0", "--web.health-listen-address=127.0.0.1:0")
	startProc(t, dir, "synthetic", bin, "replay", synth, "--replay.loop", "--replay.speed=4", "--web.listen-address=127.0.0.1:0",
		"--web.health-listen-address=127.0.0.1:0")
	replays := append([]replay{{name: "demo", addr: boundAddr(t, dir, "demo"), gpus: 1},
		{name: "synthetic", addr: boundAddr(t, dir, "synthetic"), gpus: 2}}, standins...)

	// The chart's rules as a plain rules file.
	rulesFile := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(rulesFile, renderRulesFile(t), 0o644); err != nil {
		t.Fatal(err)
	}

	// Two servers: Debian's Prometheus 2.x keeps native or classic histograms, never both.
	servers := []server{{name: "native"}, {name: "classic"}}
	for i := range servers {
		s := &servers[i]
		addr := testutil.FreeAddr(t)
		s.url = "http://" + addr
		sdir := filepath.Join(dir, "prom-"+s.name)
		cfg := filepath.Join(sdir, "prometheus.yml")
		if err := os.MkdirAll(sdir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(cfg, promConfig(replays, rulesFile), 0o644); err != nil {
			t.Fatal(err)
		}
		args := []string{"--config.file=" + cfg, "--storage.tsdb.path=" + filepath.Join(sdir, "data"),
			"--web.listen-address=" + addr, "--log.level=warn"}
		if s.name == "native" {
			args = append(args, "--enable-feature=native-histograms")
		}
		startProc(t, dir, "prometheus-"+s.name, promBin, args...)
	}
	for _, s := range servers {
		waitReady(t, s.url+"/-/ready")
	}
	t.Logf("exporters and Prometheus servers up after %s", time.Since(start).Round(time.Millisecond))

	expected := loadExpected(t)
	dashQs := loadDashboardQueries(t)
	ruleQs := append(ruleOperands(t), recordedSeries(t)...)

	// Evaluate until every expression that must have data has it (exporters need a few
	// scrapes, the demo's first kernel records come after about 15 s), then once more for
	// the final verdict.
	var problems []string
	deadline := time.Now().Add(e2eDeadline)
	for {
		problems = nil
		used := map[*expectedEmpty]bool{}
		for _, s := range servers {
			for _, r := range replays {
				for _, e := range evalDashboards(t, s, r, dashQs) {
					problems = append(problems, judge(e, s.name, r.name, expected, used)...)
				}
			}
			for _, q := range ruleQs {
				res, err := instantQuery(s.url, q.expr)
				e := evaluation{where: q.where, expr: q.expr, n: len(res), err: err}
				problems = append(problems, judge(e, s.name, "", expected, used)...)
			}
			problems = append(problems, checkRulesAndAlerts(t, s, replays)...)
			problems = append(problems, checkValues(s, replays)...)
			problems = append(problems, checkLive(s, replays, dashQs)...)
			problems = append(problems, checkGPM(s, replays)...)
			problems = append(problems, checkTraining(s, replays)...)
		}
		for i := range expected {
			if !used[&expected[i]] {
				problems = append(problems, fmt.Sprintf("%s: entry %q matched no expression: remove it", expectedFile, expected[i].Where))
			}
		}
		if len(problems) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(2 * time.Second)
	}
	for _, p := range problems {
		t.Error(p)
	}

	// The rules' unit tests must feed label sets Prometheus really stores.
	for _, p := range checkRuleTestLabels(t, servers) {
		t.Error(p)
	}
	nd := 0
	for _, dq := range dashQs {
		nd += len(dq.vars) + len(dq.targets)
	}
	t.Logf("%d dashboard expressions (panels and variables) and %d rule expressions and recorded series, on %d servers x %d replays, checked in %s",
		nd, len(ruleQs), len(servers), len(replays), time.Since(start).Round(time.Millisecond))
}

// ---- processes ----

// startProc runs a process for the test's lifetime, its output in dir/name.log (shown on failure).
func startProc(t *testing.T, dir, name, bin string, args ...string) *exec.Cmd {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	testutil.Start(t, cmd, func() {
		logf.Close()
		if t.Failed() {
			out, _ := os.ReadFile(logPath)
			if len(out) > 4000 {
				out = out[len(out)-4000:]
			}
			t.Logf("%s output (tail):\n%s", name, out)
		}
	})
	return cmd
}

// boundAddr waits for the exporter started by startProc as name to open its main listener and
// returns the address the kernel gave it, from its log.
func boundAddr(t *testing.T, dir, name string) string {
	t.Helper()
	path := filepath.Join(dir, name+".log")
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(path)
		if addr := testutil.WebAddr(b); addr != "" {
			return addr
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: no web listener in its log after 60 s", name)
	return ""
}

func waitReady(t *testing.T, u string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(u)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s not ready after 30 s", u)
}

// promConfig scrapes every replay each second, as the chart's ServiceMonitor does with
// honorLabels: true, and evaluates the chart's rules each second.
func promConfig(replays []replay, rulesFile string) []byte {
	type staticConfig struct {
		Targets []string          `json:"targets"`
		Labels  map[string]string `json:"labels"`
	}
	var sc []staticConfig
	for _, r := range replays {
		ls := operatorLabels("gpu-cupti-exporter-" + r.name)
		if r.target != nil {
			ls = r.target
		}
		sc = append(sc, staticConfig{Targets: []string{r.addr}, Labels: ls})
	}
	cfg := map[string]any{
		"global":     map[string]any{"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
		"rule_files": []string{rulesFile},
		"scrape_configs": []any{map[string]any{
			"job_name": "cupti", "honor_labels": true, "static_configs": sc,
		}},
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		panic(err)
	}
	return b
}

// renderRulesFile renders the chart's PrometheusRule and returns its groups as a rules file.
func renderRulesFile(t *testing.T, ruleValues ...map[string]any) []byte {
	t.Helper()
	var pr struct {
		Spec struct {
			Groups []any `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal([]byte(renderedPrometheusRule(t, ruleValues...)), &pr); err != nil {
		t.Fatal(err)
	}
	b, err := yaml.Marshal(map[string]any{"groups": pr.Spec.Groups})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ---- queries ----

type apiResponse struct {
	Status    string          `json:"status"`
	Error     string          `json:"error"`
	ErrorType string          `json:"errorType"`
	Data      json.RawMessage `json:"data"`
}

type vectorSample struct {
	Metric    map[string]string `json:"metric"`
	Value     []any             `json:"value"`
	Histogram []any             `json:"histogram"`
}

func apiGet(u string) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r apiResponse
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", u, err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("%s: %s", r.ErrorType, r.Error)
	}
	return r.Data, nil
}

// instantQuery evaluates expr now and returns the samples of an instant vector (a scalar counts
// as one sample).
func instantQuery(base, expr string) ([]vectorSample, error) {
	data, err := apiGet(base + "/api/v1/query?query=" + url.QueryEscape(expr))
	if err != nil {
		return nil, err
	}
	var d struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, err
	}
	switch d.ResultType {
	case "vector":
		var v []vectorSample
		err := json.Unmarshal(d.Result, &v)
		return v, err
	case "scalar":
		return []vectorSample{{}}, nil
	default:
		return nil, fmt.Errorf("result type %s, want an instant vector", d.ResultType)
	}
}

// ---- dashboards ----

type dashVar struct {
	name, query string
	all         bool // includeAll: Grafana's All (".*") is what the check uses
}

type dashTarget struct{ where, title, expr string }

type dashQueries struct {
	file    string
	vars    []dashVar
	targets []dashTarget
}

func loadDashboardQueries(t *testing.T) []dashQueries {
	t.Helper()
	var out []dashQueries
	for _, f := range dashboardFiles(t) {
		d := readDashboard(t, f)
		dq := dashQueries{file: f}
		for _, v := range d.Templating.List {
			if v.Type != "query" {
				continue
			}
			q, _ := v.Query.(string)
			dq.vars = append(dq.vars, dashVar{name: v.Name, query: q, all: v.IncludeAll})
		}
		d.eachTarget(func(p panelJSON, refID, expr string) {
			dq.targets = append(dq.targets, dashTarget{fmt.Sprintf("%s: panel %q target %s", f, p.Title, refID), p.Title, expr})
		})
		out = append(out, dq)
	}
	return out
}

var varRefRE = regexp.MustCompile(`\$\{([a-zA-Z0-9_]+)(?::[a-z]+)?\}|\$([a-zA-Z0-9_]+)|\[\[([a-zA-Z0-9_]+)\]\]`)

// substitute replaces Grafana variables by their values.
func substitute(expr string, vals map[string]string) (string, error) {
	var missing []string
	out := varRefRE.ReplaceAllStringFunc(expr, func(m string) string {
		sm := varRefRE.FindStringSubmatch(m)
		name := sm[1] + sm[2] + sm[3]
		if v, ok := grafanaBuiltins[name]; ok {
			return v
		}
		if v, ok := vals[name]; ok {
			return v
		}
		if strings.Trim(name, "0123456789") == "" {
			return m // $1 of label_replace: Grafana leaves unknown variables alone
		}
		missing = append(missing, name)
		return m
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("no value for variables %v", missing)
	}
	return out, nil
}

// regexValue is v as Grafana puts a value into a regex matcher: regex-escaped, and the
// escapes doubled for the PromQL string.
func regexValue(v string) string {
	return strings.ReplaceAll(regexp.QuoteMeta(v), `\`, `\\`)
}

type evaluation struct {
	where, expr string
	n           int
	err         error
}

// evalDashboards evaluates every variable and panel of every dashboard as Grafana would for
// replay r: $instance is r's exporter, $cluster and other multi-value variables are All,
// a single-value variable takes the first value its query returns.
func evalDashboards(t *testing.T, s server, r replay, dqs []dashQueries) []evaluation {
	var out []evaluation
	for _, dq := range dqs {
		if r.only != nil && !slices.Contains(r.only, dq.file) {
			continue
		}
		vals := map[string]string{"cluster": ".*"}
		for _, v := range dq.vars {
			where := fmt.Sprintf("%s: variable %s", dq.file, v.name)
			sel, err := variableExpr(v.query)
			if err == nil {
				sel, err = substitute(sel, vals)
			}
			label := ""
			if m := labelValuesRE.FindStringSubmatch(strings.TrimSpace(v.query)); m != nil {
				label = m[2]
			}
			var values []string
			if err == nil {
				var res []vectorSample
				res, err = instantQuery(s.url, "count by ("+label+") ("+sel+")")
				for _, x := range res {
					if x.Metric[label] != "" {
						values = append(values, x.Metric[label])
					}
				}
				sort.Strings(values)
			}
			if r.panels == nil {
				out = append(out, evaluation{where: where, expr: sel, n: len(values), err: err})
			}
			switch {
			case v.name == "instance":
				vals[v.name] = regexValue(r.addr)
			case v.all || len(values) == 0:
				vals[v.name] = ".*"
			default:
				vals[v.name] = regexValue(values[0])
			}
		}
		for _, tg := range dq.targets {
			if r.panels != nil && !r.panels[tg.title] {
				continue
			}
			expr, err := substitute(tg.expr, vals)
			var n int
			if err == nil {
				var res []vectorSample
				res, err = instantQuery(s.url, expr)
				n = len(res)
			}
			out = append(out, evaluation{where: tg.where, expr: expr, n: n, err: err})
		}
	}
	return out
}

// ---- expected-empty ----

type expectedEmpty struct {
	Where      string   `json:"where"`
	Replays    []string `json:"replays,omitempty"`
	Histograms []string `json:"histograms,omitempty"`
	Reason     string   `json:"reason"`
	// MayAnswer: the expression has data only after an event this machine's load decides
	// (an entry that answers then is no error; one that never can is still caught by review).
	MayAnswer bool `json:"may_answer,omitempty"`
}

func loadExpected(t *testing.T) []expectedEmpty {
	return loadListed(t, expectedFile, func(e expectedEmpty) (string, string) { return e.Where, e.Reason })
}

// loadListed reads a YAML list of entries (expected-empty.yaml),
// each of which must say where and why.
func loadListed[T any](t *testing.T, file string, whereWhy func(T) (string, string)) []T {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var es []T
	if err := yaml.UnmarshalStrict(raw, &es); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	for _, e := range es {
		if where, why := whereWhy(e); where == "" || strings.TrimSpace(why) == "" {
			t.Fatalf("%s: every entry needs where and reason: %+v", file, e)
		}
	}
	return es
}

// matchWhere matches an entry's where: exact, or a prefix ending in "*".
func matchWhere(pattern, where string) bool {
	if p, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(where, p)
	}
	return pattern == where
}

func contains(list []string, s string) bool {
	if len(list) == 0 || s == "" {
		return true
	}
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// judge says what is wrong with one evaluation: an error, no data where data is due, or
// data where expected-empty.yaml says there is none.
func judge(e evaluation, srv, rep string, expected []expectedEmpty, used map[*expectedEmpty]bool) []string {
	ctx := srv + " histograms"
	if rep != "" {
		ctx += ", " + rep
	}
	if e.err != nil {
		return []string{fmt.Sprintf("%s (%s): %q: %v", e.where, ctx, e.expr, e.err)}
	}
	var entry *expectedEmpty
	for i := range expected {
		x := &expected[i]
		if matchWhere(x.Where, e.where) && contains(x.Histograms, srv) && contains(x.Replays, rep) {
			entry = x
			used[x] = true
		}
	}
	switch {
	case e.n == 0 && entry == nil:
		return []string{fmt.Sprintf("%s (%s): no data: %s\n\tfix the expression, or list it in %s with the reason", e.where, ctx, e.expr, expectedFile)}
	case e.n > 0 && entry != nil && !entry.MayAnswer:
		return []string{fmt.Sprintf("%s (%s): returns data, but %s lists it as empty (%s): remove or narrow the entry", e.where, ctx, expectedFile, entry.Reason)}
	}
	return nil
}

// ---- rules ----

// ruleOperands returns, for each alert, the expression before its top-level comparison
// (what the alert measures), which must have data: an alert whose operand is empty can
// never fire.
func ruleOperands(t *testing.T, ruleValues ...map[string]any) []promQuery {
	t.Helper()
	var out []promQuery
	for _, q := range ruleQueries(t, ruleValues...) {
		expr, err := parser.NewParser(parser.Options{}).ParseExpr(q.expr)
		if err != nil {
			t.Fatalf("%s: %v", q.where, err)
		}
		if b, ok := expr.(*parser.BinaryExpr); ok && b.Op.IsComparisonOperator() {
			expr = b.LHS
		}
		out = append(out, promQuery{q.where, expr.String()})
	}
	return out
}

// recordedSeries returns, for each recording rule, a selector of the series Prometheus
// recorded from it: data there shows that the server evaluated the rule and stored its result.
func recordedSeries(t *testing.T) []promQuery {
	t.Helper()
	var out []promQuery
	for _, r := range chartRules(t) {
		if r.Record != "" {
			sel := r.Record + r.labelSelector()
			out = append(out, promQuery{"recorded " + sel, sel})
		}
	}
	if len(out) == 0 {
		t.Fatal("the chart rendered no recording rules")
	}
	return out
}

// expectedAlerts are the alerts the stand-ins raise by design, by the replay whose instance
// they name: the health stand-in's GPU 7 raises XID 79 and falls off the bus (serveHealth).
// The training replay's slowed rank raises CuptiTrainingStraggler (pending: its for is longer
// than the check; checkTraining checks whom it names).
var expectedAlerts = map[string]string{"CuptiGPUXidResetRequired": "health", "CuptiGPULost": "health", "CuptiTrainingStraggler": "training"}

// loadAlerts are alerts a replay may raise when this machine is loaded, by alert: the replay
// and the reason label. The live stand-in's fake decodes run on the CI machine's CPUs, and a
// decode late by more than the image's room loses samples (image_full), as a starved host's
// would.
var loadAlerts = map[string]struct{ replay, reason string }{"CuptiPMSamplesLost": {"live", "image_full"}}

// checkRulesAndAlerts checks that every rule evaluates without error and that no alert is
// pending or firing but expectedAlerts, which must be: the replays are healthy exporters.
func checkRulesAndAlerts(t *testing.T, s server, replays []replay) []string {
	var problems []string
	data, err := apiGet(s.url + "/api/v1/rules")
	if err != nil {
		return []string{fmt.Sprintf("%s: /api/v1/rules: %v", s.name, err)}
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Name           string `json:"name"`
				Health         string `json:"health"`
				LastError      string `json:"lastError"`
				LastEvaluation string `json:"lastEvaluation"`
				Alerts         []struct {
					State  string            `json:"state"`
					Labels map[string]string `json:"labels"`
				} `json:"alerts"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := json.Unmarshal(data, &rules); err != nil {
		return []string{fmt.Sprintf("%s: /api/v1/rules: %v", s.name, err)}
	}
	addr := map[string]string{}
	for _, r := range replays {
		addr[r.name] = r.addr
	}
	n := 0
	seen := map[string]bool{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			n++
			if r.Health != "ok" {
				problems = append(problems, fmt.Sprintf("rule %s (%s histograms): health %q %s", r.Name, s.name, r.Health, r.LastError))
			}
			for _, a := range r.Alerts {
				if rep, ok := expectedAlerts[r.Name]; ok && a.Labels["instance"] == addr[rep] {
					seen[r.Name] = true
					continue
				}
				if l, ok := loadAlerts[r.Name]; ok && addr[l.replay] != "" && a.Labels["instance"] == addr[l.replay] && a.Labels["reason"] == l.reason {
					t.Logf("alert %s (%s histograms) is %s on the %s stand-in, reason %s: it ran late on a loaded machine", r.Name, s.name, a.State, l.replay, l.reason)
					continue
				}
				problems = append(problems, fmt.Sprintf("alert %s (%s histograms) is %s on a healthy exporter: %v", r.Name, s.name, a.State, a.Labels))
			}
		}
	}
	for name, rep := range expectedAlerts {
		if !seen[name] && addr[rep] != "" { // the stand-in that raises it is among the replays
			problems = append(problems, fmt.Sprintf("alert %s (%s histograms) is neither pending nor firing on the %s stand-in, which raises it by design", name, s.name, rep))
		}
	}
	if n == 0 {
		problems = append(problems, fmt.Sprintf("%s: Prometheus loaded no rules", s.name))
	}
	return problems
}

// checkValues checks figures the front page shows, and that no device series is credited
// to the exporter's own pod (the target label that honor_labels would fill in where the
// exporter set no pod label; exporter/labels.go sets them, empty when unknown).
func checkValues(s server, replays []replay) []string {
	var problems []string
	if res, err := instantQuery(s.url, `count by (__name__, pod) ({uuid!="", pod=~"gpu-cupti-exporter-.*"})`); err != nil || len(res) > 0 {
		problems = append(problems, fmt.Sprintf("%s: device series carry the exporter pod's own pod label: %v %v", s.name, res, err))
	}
	for _, r := range replays {
		if r.gpus == 0 {
			continue
		}
		inst := regexValue(r.addr)
		expr := `count(rate(cupti_pm_samples_total{instance=~"` + inst + `"}[10s]) > 0) or vector(0)`
		res, err := instantQuery(s.url, expr)
		if err != nil || len(res) != 1 || len(res[0].Value) != 2 || res[0].Value[1] != fmt.Sprint(r.gpus) {
			problems = append(problems, fmt.Sprintf("fleet-overview.json: GPUs sampled (%s, %s): %v %v, want %d", s.name, r.name, res, err, r.gpus))
		}
	}
	return problems
}

// checkLive checks the fleet's counts on the live stand-in, where GPU 0 is idle-released and
// GPU 1 samples: an idle-released GPU is counted as such and not as "not sampled" (it
// delivers no samples by design).
func checkLive(s server, replays []replay, dashQs []dashQueries) []string {
	var problems []string
	for _, r := range replays {
		if r.name != "live" {
			continue
		}
		want := map[string]string{"GPUs not sampled": "0", "GPUs idle-released": "1"}
		for _, dq := range dashQs {
			if dq.file != "fleet-overview.json" {
				continue
			}
			for _, tg := range dq.targets {
				w, ok := want[tg.title]
				if !ok {
					continue
				}
				delete(want, tg.title)
				expr, err := substitute(tg.expr, map[string]string{"cluster": ".*", "instance": regexValue(r.addr), "gpu": ".*"})
				var res []vectorSample
				if err == nil {
					res, err = instantQuery(s.url, expr)
				}
				if err != nil || len(res) != 1 || len(res[0].Value) != 2 || res[0].Value[1] != w {
					problems = append(problems, fmt.Sprintf("fleet-overview.json: %s (%s, live: GPU 0 idle-released, GPU 1 sampling): %v %v, want %s", tg.title, s.name, res, err, w))
				}
			}
		}
		for title := range want {
			problems = append(problems, fmt.Sprintf("fleet-overview.json has no panel %q to check on the live stand-in", title))
		}
	}
	return problems
}

// ---- rules_test.yaml label sets ----

// podLabels may be set by the exporter (pod-resources, the workload's hello) or, when it
// sets none, by the target: which one a replay shows says nothing about a test's series.
var podLabels = map[string]bool{"namespace": true, "pod": true, "container": true}

// freeLabels take any value; the values of every other label must be ones the exporter emits.
var freeLabels = map[string]bool{
	"job": true, "instance": true, "namespace": true, "pod": true, "container": true, "service": true,
	"endpoint": true, "node": true, "gpu": true, "uuid": true, "model": true, "chip": true,
	"pci_bus_id": true, "kernel": true, "src_gpu": true, "xid": true, "cluster": true,
}

// liveOnlyFamilies are families no replay emits, with the labels and label values their
// descriptors declare (pmsample/aggregate/selfmetrics.go, podresources/metrics.go).
var liveOnlyFamilies = map[string]struct {
	labels []string
	values map[string][]string
}{
	"cupti_pm_sampling_state": {
		labels: []string{"gpu", "uuid", "model", "chip", "pci_bus_id", "state"},
		values: map[string][]string{"state": {"sampling", "paused", "busy", "error", "idle-released"}},
	},
	"cupti_podresources_up": {},
}

// checkRuleTestLabels compares each input series of rules_test.yaml with the series
// Prometheus stored from the replays.
func checkRuleTestLabels(t *testing.T, servers []server) []string {
	t.Helper()
	var problems []string
	for _, f := range []string{rulesTest, rulesTrainingTest} {
		problems = append(problems, checkRuleTestFileLabels(t, servers, f)...)
	}
	return problems
}

// checkRuleTestFileLabels checks the input series of one promtool test file.
func checkRuleTestFileLabels(t *testing.T, servers []server, rulesTest string) []string {
	t.Helper()
	raw, err := os.ReadFile(rulesTest)
	if err != nil {
		t.Fatal(err)
	}
	var rt struct {
		Tests []struct {
			Name        string `json:"name"`
			InputSeries []struct {
				Series string `json:"series"`
			} `json:"input_series"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(raw, &rt); err != nil {
		t.Fatal(err)
	}
	target := operatorLabels("x")
	var problems []string
	n := 0
	for _, tc := range rt.Tests {
		for _, in := range tc.InputSeries {
			n++
			ls, err := parser.NewParser(parser.Options{}).ParseMetric(in.Series)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: test %q: %q: %v", rulesTest, tc.Name, in.Series, err))
				continue
			}
			name := ls.Get("__name__")
			got := map[string]string{}
			ls.Range(func(l labels.Label) {
				if l.Name != "__name__" {
					got[l.Name] = l.Value
				}
			})
			if got["uuid"] != "" && got["job"] != "" && strings.HasPrefix(got["pod"], got["job"]+"-") {
				problems = append(problems, fmt.Sprintf("%s: test %q: %s credits a device series to the exporter's own pod: the exporter sets pod labels on every family with a uuid (empty when no pod holds the GPU, and then Prometheus stores none)", rulesTest, tc.Name, in.Series))
			}
			// The label-name sets (pod labels aside) and label values Prometheus stores.
			realSets := map[string]bool{}
			realValues := map[string]map[string]bool{}
			if lo, ok := liveOnlyFamilies[name]; ok {
				names := append([]string{}, lo.labels...)
				for k := range target {
					names = append(names, k)
				}
				names = append(names, "instance")
				realSets[labelSetKey(names)] = true
				for k, vs := range lo.values {
					realValues[k] = map[string]bool{}
					for _, v := range vs {
						realValues[k][v] = true
					}
				}
			} else {
				for _, s := range servers {
					data, err := apiGet(s.url + "/api/v1/series?match[]=" + url.QueryEscape(`{__name__="`+name+`"}`))
					if err != nil {
						problems = append(problems, fmt.Sprintf("%s: series %s: %v", s.name, name, err))
						continue
					}
					var series []map[string]string
					if err := json.Unmarshal(data, &series); err != nil {
						t.Fatal(err)
					}
					for _, sr := range series {
						var names []string
						for k, v := range sr {
							if k == "__name__" {
								continue
							}
							names = append(names, k)
							if realValues[k] == nil {
								realValues[k] = map[string]bool{}
							}
							realValues[k][v] = true
						}
						realSets[labelSetKey(names)] = true
					}
				}
			}
			for k, vs := range seriesFromFirstEvent[name] { // values the replays need not show
				if realValues[k] != nil {
					for _, v := range vs {
						realValues[k][v] = true
					}
				}
			}
			if len(realSets) == 0 {
				problems = append(problems, fmt.Sprintf("%s: test %q: %s is not in the scrape of --demo or the synthetic replay, nor a declared live-only family", rulesTest, tc.Name, name))
				continue
			}
			var names []string
			for k := range got {
				names = append(names, k)
			}
			if key := labelSetKey(names); !realSets[key] {
				var have []string
				for k := range realSets {
					have = append(have, "{"+k+"}")
				}
				sort.Strings(have)
				problems = append(problems, fmt.Sprintf("%s: test %q: %s has labels {%s} (pod labels aside); Prometheus stores it with %s", rulesTest, tc.Name, in.Series, key, strings.Join(have, " or ")))
			}
			for k, v := range got {
				if freeLabels[k] || realValues[k] == nil {
					continue
				}
				if !realValues[k][v] {
					problems = append(problems, fmt.Sprintf("%s: test %q: %s: %s=%q is not a value the exporter emits (%v)", rulesTest, tc.Name, in.Series, k, v, keys(realValues[k])))
				}
			}
		}
	}
	if n == 0 {
		problems = append(problems, rulesTest+": no input series found")
	}
	return problems
}

// labelSetKey is a label-name set without the pod labels and cluster (which a fleet adds as
// an external label or by relabeling), sorted and joined.
func labelSetKey(names []string) string {
	var out []string
	for _, n := range names {
		if !podLabels[n] && n != "cluster" {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// seriesFromFirstEvent are label values whose series appear only once they count
// something (the series budget, docs/sizing.md), so a healthy replay may not show them:
// the PM loss reasons that are no fault, and why a source is down (exporter/status.go, and
// the health source's codes, health/source.go).
var seriesFromFirstEvent = map[string]map[string][]string{
	"cupti_pm_samples_lost_total": {"reason": pmdata.LostReasons[:]},
	"cupti_pm_lost_seconds_total": {"reason": pmdata.LostReasons[:]},
	"cupti_exporter_source_up": {"reason": {exporter.ReasonNoCUPTI, exporter.ReasonNoGPU, exporter.ReasonPrivileges, exporter.ReasonBusy,
		exporter.ReasonPaused, exporter.ReasonDisabled, exporter.ReasonStarting, exporter.ReasonError, "no_nvml", "gpu_lost", "nvml_error"}},
}
