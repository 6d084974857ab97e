package e2e

// A real OpenTelemetry Collector (otlpreceiver + debugexporter, built by
// scripts/ci/otelcol.sh) receives the demo over gRPC (flags), over HTTP with a base URL
// (flags) and over HTTP configured by the OTEL_* environment alone; the test reads what the
// collector decoded from its debug output and checks names, units, kinds, attributes and
// the resource. It runs when OTELCOL_BINARY names the collector (.ci/run sets it).

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/internal/testutil"
	"github.com/cupti-exporter/cupti-exporter/recording/demo"
)

// otelMetric is one metric as the debug exporter printed it, with the attribute sets of its
// data points.
type otelMetric struct {
	name, unit, kind string
	points           []map[string]string
}

// otelResource is one ResourceMetrics block of the debug output.
type otelResource struct {
	attrs   map[string]string
	metrics map[string]*otelMetric
}

var debugAttrRE = regexp.MustCompile(`^\s+-> ([^:]+): (\w+)\((.*)\)$`)
var debugFieldRE = regexp.MustCompile(`^\s+-> (Name|Unit|DataType): (.*)$`)

// parseDebug reads the debug exporter's detailed output (one block per export).
func parseDebug(out string) []*otelResource {
	var (
		res     []*otelResource
		cur     *otelResource
		metric  *otelMetric
		section string // "resource", "point", ""
	)
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.Contains(line, "ResourceMetrics #"): // the first line of a block carries the log prefix
			cur = &otelResource{attrs: map[string]string{}, metrics: map[string]*otelMetric{}}
			res = append(res, cur)
			section, metric = "", nil
		case cur == nil:
		case strings.HasPrefix(line, "Resource attributes:"):
			section = "resource"
		case strings.HasPrefix(line, "Metric #"):
			section, metric = "", &otelMetric{}
		case strings.HasPrefix(line, "Data point attributes:"):
			section = "point"
			if metric != nil {
				metric.points = append(metric.points, map[string]string{})
			}
		case debugFieldRE.MatchString(line) && metric != nil && section != "point" && section != "resource":
			m := debugFieldRE.FindStringSubmatch(line)
			switch m[1] {
			case "Name":
				metric.name = m[2]
				cur.metrics[m[2]] = metric
			case "Unit":
				metric.unit = m[2]
			case "DataType":
				metric.kind = m[2]
			}
		case debugAttrRE.MatchString(line) && section == "resource":
			m := debugAttrRE.FindStringSubmatch(line)
			cur.attrs[m[1]] = m[3]
		case debugAttrRE.MatchString(line) && section == "point" && metric != nil:
			m := debugAttrRE.FindStringSubmatch(line)
			metric.points[len(metric.points)-1][m[1]] = m[3]
		default:
			if !strings.HasPrefix(line, " ") {
				section = ""
				if strings.HasPrefix(line, "Descriptor:") {
					section = "descriptor"
				}
			}
		}
	}
	return res
}

// startCollector runs the collector with OTLP receivers on two free loopback ports.
func startCollector(t *testing.T, bin string) (grpcAddr, httpAddr string, out *testutil.SyncBuffer) {
	t.Helper()
	// A free port found here can be taken by another test's process before the collector
	// binds it; start over on fresh ports then.
	for attempt := 1; ; attempt++ {
		grpcAddr, httpAddr = testutil.FreeAddr(t), testutil.FreeAddr(t)
		out = &testutil.SyncBuffer{}
		if tryCollector(t, bin, grpcAddr, httpAddr, out) {
			return grpcAddr, httpAddr, out
		}
		if attempt == 3 {
			t.Fatalf("collector could not bind free ports in %d attempts:\n%s", attempt, out.String())
		}
		t.Logf("collector lost a port to another process, retrying:\n%s", tail(out.String(), 500))
	}
}

// tryCollector starts the collector on the given addresses and waits until it is ready; it
// reports false when the collector exited because an address was in use.
func tryCollector(t *testing.T, bin, grpcAddr, httpAddr string, out *testutil.SyncBuffer) bool {
	t.Helper()
	cfg := fmt.Sprintf(`receivers:
  otlp:
    protocols:
      grpc: {endpoint: %q}
      http: {endpoint: %q}
exporters:
  debug: {verbosity: detailed}
service:
  telemetry:
    metrics: {level: none}
  pipelines:
    metrics: {receivers: [otlp], exporters: [debug]}
`, grpcAddr, httpAddr)
	file := filepath.Join(t.TempDir(), "otelcol.yaml")
	if err := os.WriteFile(file, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", file)
	cmd.Stdout, cmd.Stderr = out, out
	proc := testutil.Start(t, cmd, nil)
	ready := false
	waitFor(t, "the collector to start", func() bool {
		select {
		case <-proc.Done():
			if strings.Contains(out.String(), "address already in use") {
				return true
			}
			t.Fatalf("collector exited (%v):\n%s", proc.Err(), out.String())
		default:
		}
		ready = strings.Contains(out.String(), "Everything is ready")
		return ready
	})
	return ready
}

func TestOTLPCollector(t *testing.T) {
	bin := os.Getenv("OTELCOL_BINARY")
	if bin == "" {
		t.Skip("OTELCOL_BINARY is not set: build the collector with scripts/ci/otelcol.sh (.ci/run does)")
	}
	grpcAddr, httpAddr, out := startCollector(t, bin)

	// The demo recording, replayed 10x so that its workload (after ~15 s idle) comes quickly.
	rec := filepath.Join(t.TempDir(), "demo.cuptirec")
	if err := os.WriteFile(rec, demo.Recording(), 0o644); err != nil {
		t.Fatal(err)
	}
	replay := []string{"replay", rec, "--replay.speed=10", "--replay.loop"}
	runs := map[string][]string{
		"grpc":      {"--otlp.endpoint=" + grpcAddr, "--otlp.insecure", "--otlp.interval=500ms"},
		"http-flag": {"--otlp.endpoint=http://" + httpAddr, "--otlp.protocol=http", "--otlp.interval=500ms"},
		"http-env":  nil, // the environment alone
	}
	for run, flags := range runs {
		env := []string{"OTEL_RESOURCE_ATTRIBUTES=test.run=" + run, "NODE_NAME=gpu-node-" + run}
		if run == "http-env" {
			env = append(env, "OTEL_EXPORTER_OTLP_ENDPOINT=http://"+httpAddr, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
				"OTEL_METRIC_EXPORT_INTERVAL=500")
		}
		startEnv(t, env, append(slices.Clone(replay), flags...)...)
	}

	// Wait until every run has pushed a block with kernel and memcpy records.
	latest := map[string]*otelResource{}
	deadline := time.Now().Add(60 * time.Second)
	for len(latest) < len(runs) {
		if time.Now().After(deadline) {
			t.Fatalf("runs with kernel histograms: %v of %d after 60 s; collector output tail:\n%s",
				keysOf(latest), len(runs), tail(out.String(), 4000))
		}
		time.Sleep(500 * time.Millisecond)
		for _, r := range parseDebug(out.String()) {
			if run := r.attrs["test.run"]; run != "" && r.metrics["cupti.kernel.duration"] != nil && r.metrics["cupti.memcpy.io"] != nil {
				latest[run] = r
			}
		}
	}
	for run, r := range latest {
		t.Run(run, func(t *testing.T) { checkCollected(t, run, r) })
	}
}

// checkCollected checks one export of the demo as the collector decoded it.
func checkCollected(t *testing.T, run string, r *otelResource) {
	for k, want := range map[string]string{
		"service.name": "cupti-exporter", "k8s.node.name": "gpu-node-" + run, "telemetry.sdk.language": "go",
	} {
		if got := r.attrs[k]; got != want {
			t.Errorf("resource %s = %q, want %q", k, got, want)
		}
	}
	for _, k := range []string{"service.version", "host.name"} {
		if v := r.attrs[k]; v == "" || v == "unknown" {
			t.Errorf("resource %s = %q, want a value", k, v)
		}
	}
	want := []struct {
		name, unit, kind string
		attrs            map[string]string // on some point
	}{
		{"hw.gpu.io", "By", "Sum", map[string]string{"cupti.link": "pcie", "network.io.direction": "receive",
			"hw.type": "gpu", "hw.vendor": "NVIDIA", "hw.model": "", "hw.id": "", "cupti.gpu": "0"}},
		{"hw.gpu.io", "By", "Sum", map[string]string{"cupti.link": "pcie", "network.io.direction": "transmit"}},
		{"hw.gpu.utilization", "1", "Gauge", map[string]string{"hw.gpu.task": "general", "hw.type": "gpu", "hw.id": ""}}, // NVML's
		{"cupti.graphics_engine.active", "1", "Gauge", map[string]string{"hw.id": ""}},                                   // PM sampling's
		{"cupti.graphics_engine.active.max", "1", "Gauge", map[string]string{"hw.id": ""}},
		{"cupti.sm.active", "1", "Gauge", map[string]string{"hw.vendor": "NVIDIA"}},
		{"cupti.kernel.duration", "s", "ExponentialHistogram", map[string]string{"cupti.kernel": ""}}, // node-wide by default: no hw.id
		{"cupti.kernel.time", "s", "Sum", map[string]string{"hw.id": ""}},
		{"cupti.memcpy.io", "By", "Sum", map[string]string{"cupti.copy_kind": ""}},
		{"cupti.pm.samples", "{sample}", "Sum", map[string]string{"hw.id": ""}},
		{"cupti.exporter.source.up", "1", "Gauge", map[string]string{"cupti.source": "pmsample"}},
		{"cupti.exporter.build_info", "1", "Gauge", map[string]string{"cupti.version": ""}},
		{"cupti.exporter.series.dropped", "{series}", "Sum", map[string]string{"cupti.outlet": "otlp"}},
		{"cupti.exporter.otlp.exports", "{export}", "Sum", map[string]string{"cupti.result": "success"}},
	}
	for _, w := range want {
		m := r.metrics[w.name]
		if m == nil {
			t.Errorf("no metric %s", w.name)
			continue
		}
		if m.unit != w.unit || m.kind != w.kind {
			t.Errorf("%s: unit %q kind %s, want %q %s", w.name, m.unit, m.kind, w.unit, w.kind)
		}
		if !slices.ContainsFunc(m.points, func(p map[string]string) bool { return hasAttrs(p, w.attrs) }) {
			t.Errorf("%s: no data point with attributes %v (first: %v)", w.name, w.attrs, first(m.points))
		}
	}
	// What the collector decoded is what docs/metrics.md says is pushed (name and unit), with
	// one point per attribute set, and no data point under the resource's k8s.* keys.
	documented := documentedOTLP(t)
	points := map[string][]map[string]string{}
	for name, m := range r.metrics {
		points[name] = m.points
		if units, ok := documented[name]; !ok && !strings.HasPrefix(name, "go_") && !strings.HasPrefix(name, "process_") {
			t.Errorf("metric %s is not in docs/metrics.md", name)
		} else if ok && !units[m.unit] {
			t.Errorf("metric %s: unit %q, docs/metrics.md says %v", name, m.unit, keysOf(units))
		}
		for _, p := range m.points {
			for k := range p {
				if strings.HasPrefix(k, "k8s.") {
					t.Errorf("metric %s: data point attribute %s is a resource key (the exporter's pod)", name, k)
				}
			}
		}
	}
	for _, rep := range repeatedAttributeSets(points) {
		t.Errorf("%s", rep)
	}
	for name, m := range r.metrics {
		if strings.HasPrefix(name, "gpu.") || strings.HasPrefix(name, "cupti_") {
			t.Errorf("metric %s: want a semantic-convention (hw.) or cupti. name", name)
		}
		for _, p := range m.points {
			for k, v := range p {
				if v == "" {
					t.Errorf("metric %s: attribute %s is empty", name, k)
				}
				if slices.Contains([]string{"uuid", "gpu", "pod", "namespace", "direction", "model"}, k) {
					t.Errorf("metric %s: raw Prometheus label %s as attribute", name, k)
				}
			}
		}
	}
}

// hasAttrs: p has every key of want, with the value where want gives one.
func hasAttrs(p, want map[string]string) bool {
	for k, v := range want {
		got, ok := p[k]
		if !ok || (v != "" && got != v) {
			return false
		}
	}
	return true
}

func first(ps []map[string]string) map[string]string {
	if len(ps) == 0 {
		return nil
	}
	return ps[0]
}

func keysOf[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// documentedOTLP reads the OTLP name and unit columns of docs/metrics.md.
func documentedOTLP(t *testing.T) map[string]map[string]bool {
	t.Helper()
	data, err := os.ReadFile(metricsDoc)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		cols := strings.Split(line, " | ")
		if !strings.HasPrefix(line, "| `") || len(cols) < 8 {
			continue
		}
		name, unit := strings.Trim(cols[4], "`"), strings.Trim(cols[5], "`")
		if out[name] == nil {
			out[name] = map[string]bool{}
		}
		out[name][unit] = true
	}
	return out
}
