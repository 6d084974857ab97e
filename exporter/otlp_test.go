package exporter

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	collectorpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
)

// grpcReceiver is an in-process OTLP gRPC metrics receiver.
type grpcReceiver struct {
	collectorpb.UnimplementedMetricsServiceServer
	got chan received
}

type received struct {
	req     *collectorpb.ExportMetricsServiceRequest
	headers map[string]string
}

func (r *grpcReceiver) Export(ctx context.Context, req *collectorpb.ExportMetricsServiceRequest) (*collectorpb.ExportMetricsServiceResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	h := map[string]string{}
	for k, v := range md {
		h[k] = strings.Join(v, ",")
	}
	r.got <- received{req, h}
	return &collectorpb.ExportMetricsServiceResponse{}, nil
}

func startGRPCReceiver(t *testing.T) (string, chan received) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	r := &grpcReceiver{got: make(chan received, 16)}
	collectorpb.RegisterMetricsServiceServer(srv, r)
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	return l.Addr().String(), r.got
}

// startHTTPReceiver is an OTLP/HTTP receiver decoding the protobuf body.
func startHTTPReceiver(t *testing.T) (string, chan received) {
	got := make(chan received, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/metrics" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "want protobuf on /v1/metrics", http.StatusBadRequest)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req := &collectorpb.ExportMetricsServiceRequest{}
		if err := proto.Unmarshal(body, req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		got <- received{req, map[string]string{"x-token": r.Header.Get("X-Token")}}
		resp, _ := proto.Marshal(&collectorpb.ExportMetricsServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(resp)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), got
}

func TestOTLP(t *testing.T) {
	for _, protocol := range []string{"grpc", "http"} {
		t.Run(protocol, func(t *testing.T) {
			t.Setenv("POD_NAME", "cupti-exporter-x1")
			t.Setenv("POD_NAMESPACE", "monitoring")
			start := startGRPCReceiver
			if protocol == "http" {
				start = startHTTPReceiver
			}
			endpoint, got := start(t)
			// The OTLP self-metrics join the exporter's registry.
			reg := New(nil, WithoutRuntimeMetrics()).Registry()
			ctx := context.Background()
			o, err := NewOTLP(ctx, OTLPConfig{
				Protocol: protocol, Endpoint: endpoint, Insecure: true,
				Headers:  map[string]string{"x-token": "t0k"},
				Interval: time.Hour, Timeout: 10 * time.Second,
				ResourceAttributes: map[string]string{"deployment.environment.name": "test"},
				Registerer:         reg,
			}, newFakeProducer(pmSnapshot()), newFakeProducer(activitySnapshot()))
			if err != nil {
				t.Fatal(err)
			}
			if err := o.ForceFlush(ctx); err != nil {
				t.Fatal(err)
			}
			var r received
			select {
			case r = <-got:
			case <-time.After(10 * time.Second):
				t.Fatal("receiver got nothing")
			}
			if r.headers["x-token"] != "t0k" {
				t.Errorf("header x-token = %q, want t0k", r.headers["x-token"])
			}
			checkRequest(t, r.req)

			const want = `# HELP cupti_exporter_otlp_exports_total OTLP exports attempted, by result (success or failure).
# TYPE cupti_exporter_otlp_exports_total counter
cupti_exporter_otlp_exports_total{result="failure"} 0
cupti_exporter_otlp_exports_total{result="success"} 1
# HELP cupti_exporter_series_dropped_total Series not exported because their family conflicts with another of the same name, their label set repeats, their values are invalid, or their family passed the series limit (cardinality).
# TYPE cupti_exporter_series_dropped_total counter
cupti_exporter_series_dropped_total{outlet="otlp",reason="cardinality"} 0
cupti_exporter_series_dropped_total{outlet="otlp",reason="conflict"} 0
cupti_exporter_series_dropped_total{outlet="otlp",reason="duplicate"} 0
cupti_exporter_series_dropped_total{outlet="otlp",reason="invalid"} 0
cupti_exporter_series_dropped_total{outlet="prometheus",reason="cardinality"} 0
cupti_exporter_series_dropped_total{outlet="prometheus",reason="conflict"} 0
cupti_exporter_series_dropped_total{outlet="prometheus",reason="duplicate"} 0
cupti_exporter_series_dropped_total{outlet="prometheus",reason="invalid"} 0
`
			if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
				"cupti_exporter_otlp_exports_total", "cupti_exporter_series_dropped_total"); err != nil {
				t.Error(err)
			}
			if err := o.Shutdown(ctx); err != nil {
				t.Errorf("shutdown: %v", err)
			}
			if err := o.Shutdown(ctx); err != nil {
				t.Errorf("second shutdown: %v, want the first result (nil)", err)
			}
		})
	}
}

func TestNewOTLPUnknownProtocol(t *testing.T) {
	_, err := NewOTLP(context.Background(), OTLPConfig{Protocol: "udp"})
	if err == nil || err.Error() != `create OTLP exporter: OTLP protocol "udp" (from configuration): use grpc or http/protobuf` {
		t.Errorf("NewOTLP = %v, want an unknown protocol error", err)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
	_, err = NewOTLP(context.Background(), OTLPConfig{})
	if err == nil || !strings.Contains(err.Error(), `"http/json" (from OTEL_EXPORTER_OTLP_PROTOCOL)`) {
		t.Errorf("NewOTLP with OTEL_EXPORTER_OTLP_PROTOCOL=http/json = %v, want an error naming the variable", err)
	}
}

func attrMap(kvs []*commonpb.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		m[kv.Key] = kv.Value.GetStringValue()
	}
	return m
}

// checkRequest compares what a receiver got with pmSnapshot and activitySnapshot.
func checkRequest(t *testing.T, req *collectorpb.ExportMetricsServiceRequest) {
	t.Helper()
	if len(req.ResourceMetrics) != 1 {
		t.Fatalf("%d resource metrics, want 1", len(req.ResourceMetrics))
	}
	rm := req.ResourceMetrics[0]
	host, _ := os.Hostname()
	res := attrMap(rm.Resource.Attributes)
	for k, v := range map[string]string{
		"service.name": "cupti-exporter", "host.name": host, "k8s.pod.name": "cupti-exporter-x1",
		"k8s.namespace.name": "monitoring", "deployment.environment.name": "test",
	} {
		if res[k] != v {
			t.Errorf("resource %s = %q, want %q", k, res[k], v)
		}
	}
	if _, ok := res["service.version"]; !ok {
		t.Error("resource has no service.version")
	}
	metrics := map[string]*metricspb.Metric{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			metrics[m.Name] = m
		}
	}
	wantUnits := map[string]string{"gpu.sm.active": "1", "gpu.pcie.io": "By", "gpu.kernel.duration": "s", "gpu.memcpy.size": "By"}
	for name, unit := range wantUnits {
		if m := metrics[name]; m == nil || m.Unit != unit {
			t.Errorf("metric %s = %v, want unit %q", name, m, unit)
		}
	}
	if t.Failed() {
		return
	}
	startNs, timeNs := uint64(testStart.UnixNano()), uint64(testTime.UnixNano())

	var gauge []float64
	for _, p := range metrics["gpu.sm.active"].GetGauge().GetDataPoints() {
		gauge = append(gauge, p.GetAsDouble())
		if p.TimeUnixNano != timeNs {
			t.Errorf("gauge time %d, want %d", p.TimeUnixNano, timeNs)
		}
	}
	slices.Sort(gauge)
	if !slices.Equal(gauge, []float64{0.25, 0.5, 0.75}) {
		t.Errorf("gpu.sm.active values %v, want [0.25 0.5 0.75]", gauge)
	}

	sum := metrics["gpu.pcie.io"].GetSum()
	if !sum.GetIsMonotonic() || sum.GetAggregationTemporality() != metricspb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE {
		t.Errorf("gpu.pcie.io is not a cumulative monotonic sum: %v", sum)
	}
	byDir := map[string]float64{}
	for _, p := range sum.GetDataPoints() {
		a := attrMap(p.Attributes)
		byDir[a["network.io.direction"]] = p.GetAsDouble()
		if a["hw.id"] != "GPU-aaaa" || a["hw.type"] != "gpu" || a["hw.vendor"] != "NVIDIA" || p.StartTimeUnixNano != startNs {
			t.Errorf("gpu.pcie.io point %v, want hw.id GPU-aaaa, hw.type gpu, hw.vendor NVIDIA and start %d", p, startNs)
		}
	}
	if byDir["receive"] != 1024 || byDir["transmit"] != 2048 {
		t.Errorf("gpu.pcie.io by network.io.direction %v, want receive 1024 transmit 2048", byDir)
	}

	eh := metrics["gpu.kernel.duration"].GetExponentialHistogram().GetDataPoints()
	if len(eh) != 1 {
		t.Fatalf("gpu.kernel.duration has %d exponential points, want 1", len(eh))
	}
	p := eh[0]
	if p.Count != 4 || p.GetSum() != 107.5 || p.Scale != 0 || p.ZeroCount != 0 ||
		p.Positive.GetOffset() != -2 || !slices.Equal(p.Positive.GetBucketCounts(), []uint64{1, 0, 0, 2, 0, 0, 0, 0, 1}) {
		t.Errorf("gpu.kernel.duration point %v, want count 4 sum 107.5 scale 0 offset -2 counts [1 0 0 2 0 0 0 0 1]", p)
	}

	hp := metrics["gpu.memcpy.size"].GetHistogram().GetDataPoints()
	if len(hp) != 1 || hp[0].Count != 3 || hp[0].GetSum() != 5000 ||
		!slices.Equal(hp[0].ExplicitBounds, []float64{1024, 4096}) || !slices.Equal(hp[0].BucketCounts, []uint64{1, 1, 1}) {
		t.Errorf("gpu.memcpy.size points %v, want count 3 sum 5000 bounds [1024 4096] counts [1 1 1]", hp)
	}
}

func TestOTLPExportFailureCounted(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "rejected", http.StatusBadRequest) // not retryable
	}))
	defer srv.Close()
	reg := New(nil, WithoutRuntimeMetrics()).Registry()
	ctx := context.Background()
	o, err := NewOTLP(ctx, OTLPConfig{Protocol: "http", Endpoint: srv.URL + "/v1/metrics", Interval: time.Hour, Registerer: reg},
		newFakeProducer(pmSnapshot()))
	if err != nil {
		t.Fatal(err)
	}
	defer o.Shutdown(ctx)
	if err := o.ForceFlush(ctx); err == nil {
		t.Error("flush to a receiver answering 400 succeeded")
	}
	const want = `# HELP cupti_exporter_otlp_exports_total OTLP exports attempted, by result (success or failure).
# TYPE cupti_exporter_otlp_exports_total counter
cupti_exporter_otlp_exports_total{result="failure"} 1
cupti_exporter_otlp_exports_total{result="success"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "cupti_exporter_otlp_exports_total"); err != nil {
		t.Error(err)
	}
}
