package exporter

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// linkDesc is a byte counter named hw.gpu.io, told apart by cupti.link, as the curated
// PCIe and NVLink families are.
func linkDesc(name, link string) *snapshot.Desc {
	return &snapshot.Desc{
		Name: name, Help: "Bytes over " + link + ".", Kind: snapshot.KindCounter, Unit: "bytes",
		OTelName: "hw.gpu.io", OTelUnit: "By", LabelNames: append(append([]string{}, devLabels...), "direction"),
		OTelAttributes: []snapshot.Label{{Name: "cupti.link", Value: link}},
	}
}

func produce(t *testing.T, p *metricProducer) map[string]metricdata.Metrics {
	t.Helper()
	sm, err := p.Produce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Metrics{}
	for _, s := range sm {
		for _, m := range s.Metrics {
			if _, dup := out[m.Name]; dup {
				t.Errorf("metric %s exported twice", m.Name)
			}
			out[m.Name] = m
		}
	}
	return out
}

func TestMetricProducerSharedNameEmptyValuesAndFamilies(t *testing.T) {
	pcie, nvl := linkDesc("cupti_pcie_bytes_total", "pcie"), linkDesc("cupti_nvlink_bytes_total", "nvlink")
	kernelTime := &snapshot.Desc{Name: "cupti_kernel_gpu_seconds_total", Kind: snapshot.KindCounter, Unit: "seconds",
		OTelName: "cupti.kernel.time", OTelUnit: "s", LabelNames: []string{"uuid", "pod", "namespace"}}
	idle := &snapshot.Desc{Name: "cupti_idle_total", Kind: snapshot.KindCounter, OTelName: "cupti.idle"}
	snap := &snapshot.Snapshot{Time: testTime, Families: []snapshot.Family{
		{Desc: pcie, Samples: []snapshot.Sample{{LabelValues: dev("0", "GPU-aaaa", "rx"), Value: 1}, {LabelValues: dev("0", "GPU-aaaa", "tx"), Value: 2}}},
		{Desc: nvl, Samples: []snapshot.Sample{{LabelValues: dev("0", "GPU-aaaa", "rx"), Value: 3}}},
		{Desc: kernelTime, Samples: []snapshot.Sample{{LabelValues: []string{"GPU-aaaa", "", ""}, Value: 4}}},
		{Desc: idle}, // no series: no Sum without data points
	}}
	drops := &dropCounter{}
	got := produce(t, newMetricProducer([]Producer{newFakeProducer(snap)}, NamingOTel, nil, nil, drops))
	if _, ok := got["cupti.idle"]; ok {
		t.Error("a family without series was exported")
	}
	io, ok := got["hw.gpu.io"].Data.(metricdata.Sum[float64])
	if !ok || len(io.DataPoints) != 3 {
		t.Fatalf("hw.gpu.io = %+v, want one Sum with the 3 points of both families", got["hw.gpu.io"])
	}
	want := map[string]float64{"pcie/receive": 1, "pcie/transmit": 2, "nvlink/receive": 3}
	for _, p := range io.DataPoints {
		link, _ := p.Attributes.Value("cupti.link")
		dir, _ := p.Attributes.Value("network.io.direction")
		key := link.AsString() + "/" + dir.AsString()
		if want[key] != p.Value {
			t.Errorf("hw.gpu.io point %s = %g, want %g", key, p.Value, want[key])
		}
		delete(want, key)
	}
	kt := got["cupti.kernel.time"].Data.(metricdata.Sum[float64]).DataPoints[0].Attributes
	wantKT := attribute.NewSet(attribute.String("hw.id", "GPU-aaaa"), attribute.String("hw.type", "gpu"), attribute.String("hw.vendor", "NVIDIA"))
	if !kt.Equals(&wantKT) {
		t.Errorf("attributes %v, want %v (empty pod and namespace left out)", kt.ToSlice(), wantKT.ToSlice())
	}
	for r := range numDropReasons {
		if n := drops.n[r].Load(); n != 0 {
			t.Errorf("%d series dropped as %s", n, r)
		}
	}

	// Two families of one OTel name with the same attribute sets: the second is a conflict.
	clash := linkDesc("cupti_zz_bytes_total", "pcie") // sorts after the PCIe family
	snap.Families = append(snap.Families, snapshot.Family{Desc: clash, Samples: []snapshot.Sample{{LabelValues: dev("0", "GPU-aaaa", "rx"), Value: 9}}})
	got = produce(t, newMetricProducer([]Producer{newFakeProducer(snap)}, NamingOTel, nil, nil, drops))
	if n := len(got["hw.gpu.io"].Data.(metricdata.Sum[float64]).DataPoints); n != 3 {
		t.Errorf("hw.gpu.io has %d points after a clashing family, want 3", n)
	}
	if n := drops.n[dropConflict].Load(); n != 1 {
		t.Errorf("%d series dropped as conflict, want 1", n)
	}
}

func TestMetricProducerPushesSelfMetrics(t *testing.T) {
	e := New(nil)
	e.RegisterStatus("pmsample", fakeStatus{{Source: "pmsample", Device: "0", Reason: "PM sampling is off: load libcupti.so: not found"}})
	got := produce(t, newMetricProducer(nil, NamingOTel, e.SelfMetrics(), nil, nil))
	up, ok := got["cupti.exporter.source.up"]
	if !ok || up.Unit != "1" {
		t.Fatalf("no cupti.exporter.source.up with unit 1 in %v", keys(got))
	}
	attrs := up.Data.(metricdata.Gauge[float64]).DataPoints[0].Attributes
	want := attribute.NewSet(attribute.String("cupti.source", "pmsample"), attribute.String("cupti.gpu", "0"), attribute.String("cupti.reason", ReasonNoCUPTI))
	if !attrs.Equals(&want) {
		t.Errorf("source_up attributes %v, want %v", attrs.ToSlice(), want.ToSlice())
	}
	for name, unit := range map[string]string{
		"cupti.exporter.build_info": "1", "cupti.exporter.series.dropped": "{series}", "go_goroutines": "",
		"process_cpu_seconds_total": "s", "go_memstats_alloc_bytes": "By", "go_memstats_alloc_bytes_total": "By",
	} {
		if m, ok := got[name]; !ok || m.Unit != unit {
			t.Errorf("self-metric %s: present %v, unit %q, want unit %q", name, ok, m.Unit, unit)
		}
	}
	if _, ok := got["go_gc_duration_seconds"]; ok {
		t.Error("the go_gc_duration_seconds summary was pushed")
	}
}

func keys(m map[string]metricdata.Metrics) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestReasonCode(t *testing.T) {
	for _, tc := range []struct {
		s    Status
		want string
	}{
		{Status{Ready: true, Reason: "whatever"}, ""},
		{Status{Code: ReasonPaused, Reason: "paused through the API until 12:00"}, ReasonPaused},
		{Status{Code: "error", Reason: "cuptiPmSamplingEnable: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"}, ReasonPrivileges},
		{Status{Reason: "PM sampling is off: open CUPTI: load libcupti.so: libcupti.so: cannot open shared object file: No such file or directory (set --cupti.library to the file or folder of libcupti.so, e.g. /usr/local/cuda/extras/CUPTI/lib64, or --no-pmsample.enabled)"}, ReasonNoCUPTI},
		{Status{Reason: "PM sampling disabled by configuration (pmsample.enabled=false)"}, ReasonDisabled},
		{Status{Reason: "waiting for the first batch"}, ReasonStarting},
		{Status{Reason: "hardware busy: paused for ncu"}, ReasonBusy},
		{Status{Reason: "something new"}, ReasonError},
	} {
		if got := ReasonCode(tc.s); got != tc.want {
			t.Errorf("ReasonCode(%+v) = %q, want %q", tc.s, got, tc.want)
		}
	}
}

func TestOTLPFromEnv(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want bool
	}{
		{nil, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://collector:4318/v1/metrics"}, true},
		{map[string]string{"OTEL_METRICS_EXPORTER": "otlp"}, true},
		{map[string]string{"OTEL_METRICS_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, false},
		{map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, false},
	} {
		for _, v := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "OTEL_METRICS_EXPORTER", "OTEL_SDK_DISABLED"} {
			t.Setenv(v, tc.env[v])
		}
		if got, _ := OTLPFromEnv(); got != tc.want {
			t.Errorf("OTLPFromEnv with %v = %v, want %v", tc.env, got, tc.want)
		}
	}
}

// TestOTLPEnvBaseURL configures the push from the environment alone: protocol, a base URL
// (to which /v1/metrics must be appended), headers and the resource.
func TestOTLPEnvBaseURL(t *testing.T) {
	var paths atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths.Store(r.URL.Path + " " + r.Header.Get("X-Token"))
		if r.URL.Path != "/v1/metrics" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer srv.Close()
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		env  map[string]string
		cfg  OTLPConfig
	}{
		{"env base URL", map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL,
			"OTEL_EXPORTER_OTLP_HEADERS": "x-token=env"}, OTLPConfig{}},
		{"env metrics URL", map[string]string{"OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "http/protobuf",
			"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": srv.URL + "/v1/metrics", "OTEL_EXPORTER_OTLP_HEADERS": "x-token=env"}, OTLPConfig{}},
		{"configured base URL wins", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_HEADERS": "x-token=env"},
			OTLPConfig{Protocol: "http", Endpoint: srv.URL, Headers: map[string]string{"x-token": "flag"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			paths.Store("")
			o, err := NewOTLP(ctx, tc.cfg, newFakeProducer(pmSnapshot()))
			if err != nil {
				t.Fatal(err)
			}
			defer o.Shutdown(ctx)
			if err := o.ForceFlush(ctx); err != nil {
				t.Fatalf("flush: %v (request %q)", err, paths.Load())
			}
			want := "/v1/metrics env"
			if tc.cfg.Headers != nil {
				want = "/v1/metrics flag"
			}
			if got := paths.Load(); got != want {
				t.Errorf("request path and x-token %q, want %q", got, want)
			}
		})
	}
}

func TestOTLPResourceFromEnv(t *testing.T) {
	t.Setenv("NODE_NAME", "gpu-node-7")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=prod,k8s.cluster.name=c1")
	t.Setenv("OTEL_SERVICE_NAME", "")
	res, err := newResource(context.Background(), map[string]string{"k8s.cluster.name": "c2", "empty": ""})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, kv := range res.Attributes() {
		got[string(kv.Key)] = kv.Value.String()
	}
	for k, v := range map[string]string{"k8s.node.name": "gpu-node-7", "deployment.environment.name": "prod",
		"k8s.cluster.name": "c2", "service.name": ServiceName, "service.version": ServiceVersion()} {
		if got[k] != v {
			t.Errorf("resource %s = %q, want %q", k, got[k], v)
		}
	}
	if _, ok := got["empty"]; ok {
		t.Error("an empty configured attribute made it into the resource")
	}
}

// TestOTLPErrorsLoggedOnce: the handler NewOTLP installs logs SDK errors through the
// logger, structured, but not the export failures countingExporter already logged.
func TestOTLPErrorsLoggedOnce(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "rejected", http.StatusBadRequest)
	}))
	defer srv.Close()
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx := context.Background()
	o, err := NewOTLP(ctx, OTLPConfig{Protocol: "http", Endpoint: srv.URL, Interval: 50 * time.Millisecond, Logger: logger},
		newFakeProducer(pmSnapshot()))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(400 * time.Millisecond) // several periodic exports, each failing
	o.Shutdown(ctx)
	out := buf.String()
	if n := strings.Count(out, "OTLP export failed"); n != 1 {
		t.Errorf("%d warnings for a run of identical failures, want 1:\n%s", n, out)
	}
	if strings.Contains(out, "OpenTelemetry SDK error") {
		t.Errorf("the error handler logged an export failure a second time:\n%s", out)
	}
	buf.Reset()
	otel.Handle(errors.New("some other SDK trouble"))
	if !strings.Contains(buf.String(), `msg="OpenTelemetry SDK error" err="some other SDK trouble"`) {
		t.Errorf("SDK error not logged structured: %q", buf.String())
	}
}

// TestResolveOTLPTarget: the endpoint, protocol and TLS the exporter dials, for the
// configuration and the environment; a variable without a scheme (which the Go exporters
// would misread: 127.0.0.1:4317 fails to parse and they dial localhost:4317) is refused.
func TestResolveOTLPTarget(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     OTLPConfig
		env     map[string]string
		want    OTLPTarget
		wantErr string
	}{
		{"default grpc", OTLPConfig{}, nil, OTLPTarget{"grpc", "localhost:4317", true, "default"}, ""},
		{"default http insecure", OTLPConfig{Protocol: "http"}, map[string]string{"OTEL_EXPORTER_OTLP_INSECURE": "true"},
			OTLPTarget{"http", "http://localhost:4318/v1/metrics", false, "default"}, ""},
		{"flag host:port", OTLPConfig{Endpoint: "127.0.0.1:4317", Insecure: true}, nil,
			OTLPTarget{"grpc", "127.0.0.1:4317", false, "configuration"}, ""},
		{"flag host:port TLS", OTLPConfig{Endpoint: "collector:4317"}, nil, OTLPTarget{"grpc", "collector:4317", true, "configuration"}, ""},
		{"flag host:port, insecure from env", OTLPConfig{Endpoint: "collector:4317"}, map[string]string{"OTEL_EXPORTER_OTLP_METRICS_INSECURE": "TRUE"},
			OTLPTarget{"grpc", "collector:4317", false, "configuration"}, ""},
		{"flag URL grpc", OTLPConfig{Endpoint: "https://gw.example:443"}, nil, OTLPTarget{"grpc", "gw.example:443", true, "configuration"}, ""},
		{"flag base URL http", OTLPConfig{Endpoint: "http://collector:4318", Protocol: "http"}, nil,
			OTLPTarget{"http", "http://collector:4318/v1/metrics", false, "configuration"}, ""},
		{"flag full URL http", OTLPConfig{Endpoint: "https://gw.example/otlp/v1/metrics", Protocol: "http"}, nil,
			OTLPTarget{"http", "https://gw.example/otlp/v1/metrics", true, "configuration"}, ""},
		{"flag wins over env", OTLPConfig{Endpoint: "a:1", Insecure: true}, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "127.0.0.1:4317"},
			OTLPTarget{"grpc", "a:1", false, "configuration"}, ""},
		{"env base URL grpc", OTLPConfig{}, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317"},
			OTLPTarget{"grpc", "127.0.0.1:4317", false, "OTEL_EXPORTER_OTLP_ENDPOINT"}, ""},
		{"env base URL http", OTLPConfig{}, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://gw.example/otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"},
			OTLPTarget{"http", "https://gw.example/otlp/v1/metrics", true, "OTEL_EXPORTER_OTLP_ENDPOINT"}, ""},
		{"env metrics URL wins, as is", OTLPConfig{Protocol: "http"}, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:1",
			"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://b:2/custom"}, OTLPTarget{"http", "http://b:2/custom", false, "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"}, ""},
		{"env without scheme (IP)", OTLPConfig{}, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "127.0.0.1:4317"}, OTLPTarget{},
			`OTEL_EXPORTER_OTLP_ENDPOINT="127.0.0.1:4317" is not a URL: the OpenTelemetry exporters need a scheme there; write http://127.0.0.1:4317 (no TLS) or https://127.0.0.1:4317 (TLS), or pass it as --otlp.endpoint=127.0.0.1:4317`},
		{"env without scheme (name)", OTLPConfig{}, map[string]string{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "collector:4317"}, OTLPTarget{},
			`OTEL_EXPORTER_OTLP_METRICS_ENDPOINT="collector:4317" is not a URL`},
		{"env other scheme", OTLPConfig{}, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "grpc://collector:4317"}, OTLPTarget{},
			`OTLP endpoint "grpc://collector:4317" (from OTEL_EXPORTER_OTLP_ENDPOINT): want an http:// or https:// URL with a host`},
		{"flag no port", OTLPConfig{Endpoint: "collector"}, nil, OTLPTarget{}, `OTLP endpoint "collector" is neither host:port nor a URL`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, v := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "OTEL_EXPORTER_OTLP_INSECURE",
				"OTEL_EXPORTER_OTLP_METRICS_INSECURE", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL"} {
				t.Setenv(v, tc.env[v])
				if tc.env[v] == "" {
					os.Unsetenv(v)
				}
			}
			got, err := ResolveOTLPTarget(tc.cfg)
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
					t.Errorf("error %v, want one starting %q", err, tc.wantErr)
				}
				// NewOTLP refuses it too, before the SDK sees it.
				if _, err := NewOTLP(context.Background(), tc.cfg); err == nil {
					t.Error("NewOTLP accepted it")
				}
			case err != nil:
				t.Errorf("error %v", err)
			case got != tc.want:
				t.Errorf("target %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestMetricProducerPrometheusNaming: with NamingPrometheus a family is pushed under its
// Prometheus name, without a unit, with its labels as they are (no hw.type, no constant
// OTel attributes, empty values left out), and a histogram with native buckets as its
// classic buckets.
func TestMetricProducerPrometheusNaming(t *testing.T) {
	pcie := linkDesc("cupti_pcie_bytes_total", "pcie")
	snap := &snapshot.Snapshot{Time: testTime, Families: []snapshot.Family{
		{Desc: pcie, Samples: []snapshot.Sample{{LabelValues: dev("0", "GPU-aaaa", "rx"), Value: 1}}},
		{Desc: kernelDuration, Samples: []snapshot.Sample{{LabelValues: []string{"GPU-aaaa", ""}, Histogram: nativeHist(), Start: testStart}}},
	}}
	drops := &dropCounter{}
	got := produce(t, newMetricProducer([]Producer{newFakeProducer(snap)}, NamingPrometheus, nil, nil, drops))
	if len(got) != 2 {
		t.Fatalf("pushed %v, want cupti_pcie_bytes_total and cupti_kernel_duration_seconds", keys(got))
	}
	io, ok := got["cupti_pcie_bytes_total"].Data.(metricdata.Sum[float64])
	if !ok || got["cupti_pcie_bytes_total"].Unit != "" || len(io.DataPoints) != 1 {
		t.Fatalf("cupti_pcie_bytes_total = %+v, want one Sum point without a unit", got["cupti_pcie_bytes_total"])
	}
	want := attribute.NewSet(attribute.String("gpu", "0"), attribute.String("uuid", "GPU-aaaa"), attribute.String("model", "NVIDIA H200"),
		attribute.String("chip", "GH100"), attribute.String("pci_bus_id", "00000000:19:00.0"), attribute.String("direction", "rx"))
	if a := io.DataPoints[0].Attributes; !a.Equals(&want) {
		t.Errorf("attributes %v, want the labels %v", a.ToSlice(), want.ToSlice())
	}
	h, ok := got["cupti_kernel_duration_seconds"].Data.(metricdata.Histogram[float64])
	if !ok || len(h.DataPoints) != 1 {
		t.Fatalf("cupti_kernel_duration_seconds = %+v, want one explicit-bucket point", got["cupti_kernel_duration_seconds"])
	}
	p := h.DataPoints[0]
	wantKD := attribute.NewSet(attribute.String("uuid", "GPU-aaaa"))
	if !slices.Equal(p.Bounds, []float64{1, 10, 100}) || !slices.Equal(p.BucketCounts, []uint64{1, 2, 1, 0}) || p.Count != 4 || !p.Attributes.Equals(&wantKD) {
		t.Errorf("histogram point %+v, want the classic buckets 1/2/1/0 of 4 and only uuid", p)
	}
	for r := range numDropReasons {
		if n := drops.n[r].Load(); n != 0 {
			t.Errorf("%d series dropped as %s", n, r)
		}
	}
}
