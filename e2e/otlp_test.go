package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// receiver collects OTLP export requests.
type receiver struct {
	colmetrics.UnimplementedMetricsServiceServer
	got chan *colmetrics.ExportMetricsServiceRequest
}

func newReceiver() *receiver {
	return &receiver{got: make(chan *colmetrics.ExportMetricsServiceRequest, 64)}
}

// serveOTLPgRPC serves an OTLP gRPC receiver on a free port until the test ends (its cleanup
// runs after the exporter's, which starts later) and returns it with its address.
func serveOTLPgRPC(t *testing.T) (*receiver, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := newReceiver()
	srv := grpc.NewServer()
	colmetrics.RegisterMetricsServiceServer(srv, r)
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	return r, l.Addr().String()
}

// pushAfterScrape returns an export made after a scrape that has just returned: the second
// one from now (the first may have been collected before the scrape), older ones drained.
func (r *receiver) pushAfterScrape(t *testing.T) *colmetrics.ExportMetricsServiceRequest {
	t.Helper()
	for drained := false; !drained; {
		select {
		case <-r.got:
		default:
			drained = true
		}
	}
	r.next(t)
	return r.next(t)
}

func (r *receiver) Export(_ context.Context, req *colmetrics.ExportMetricsServiceRequest) (*colmetrics.ExportMetricsServiceResponse, error) {
	select {
	case r.got <- req:
	default: // the test reads only a few
	}
	return &colmetrics.ExportMetricsServiceResponse{}, nil
}

// ServeHTTP is the OTLP/HTTP receiver: a protobuf body on POST /v1/metrics.
func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil || req.URL.Path != "/v1/metrics" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	var m colmetrics.ExportMetricsServiceRequest
	if err := proto.Unmarshal(body, &m); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Export(req.Context(), &m)
	out, _ := proto.Marshal(&colmetrics.ExportMetricsServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

// next waits for the next export.
func (r *receiver) next(t *testing.T) *colmetrics.ExportMetricsServiceRequest {
	t.Helper()
	select {
	case req := <-r.got:
		return req
	case <-time.After(30 * time.Second):
		t.Fatal("no OTLP export within 30 s")
		return nil
	}
}

func attrs(kv []*commonpb.KeyValue) map[string]string {
	out := map[string]string{}
	for _, a := range kv {
		out[a.GetKey()] = a.GetValue().GetStringValue()
	}
	return out
}

// pcieRx finds the PCIe receive byte counter of device uuid in an export: hw.gpu.io with
// cupti.link="pcie", hw.id=uuid and network.io.direction="receive".
func pcieRx(req *colmetrics.ExportMetricsServiceRequest, uuid string) (float64, bool) {
	for _, rm := range req.GetResourceMetrics() {
		for _, sm := range rm.GetScopeMetrics() {
			for _, m := range sm.GetMetrics() {
				if m.GetName() != "hw.gpu.io" || m.GetSum() == nil {
					continue
				}
				for _, dp := range m.GetSum().GetDataPoints() {
					a := attrs(dp.GetAttributes())
					if a["hw.id"] == uuid && a["cupti.link"] == "pcie" && a["network.io.direction"] == "receive" {
						return dpValue(dp), true
					}
				}
			}
		}
	}
	return 0, false
}

func dpValue(dp *metricspb.NumberDataPoint) float64 {
	if v, ok := dp.GetValue().(*metricspb.NumberDataPoint_AsInt); ok {
		return float64(v.AsInt)
	}
	return dp.GetAsDouble()
}

// checkOTLP checks that the pushed PCIe counter agrees with the scraped one: a push taken
// between two scrapes lies between their values.
func checkOTLP(t *testing.T, p *exporterProc, r *receiver) {
	rec := readDemo(t)
	uuid := rec.devices[0].UUID
	for drained := false; !drained; { // forget exports made before this point
		select {
		case <-r.got:
		default:
			drained = true
		}
	}
	// /readyz turns ready with the first frame of any source (the demo's health frames can come
	// before its first PM batch): wait for the counter.
	var before map[string]*dto.MetricFamily
	var m *dto.Metric
	ok := false
	for deadline := time.Now().Add(15 * time.Second); !ok && time.Now().Before(deadline); {
		_, before = p.scrape(t)
		if m, ok = find(before, "cupti_pcie_bytes_total", map[string]string{"uuid": uuid, "direction": "rx"}); !ok {
			time.Sleep(100 * time.Millisecond)
		}
	}
	if !ok {
		t.Fatal("scrape lacks cupti_pcie_bytes_total{direction=rx} after 15 s")
	}
	v1 := value(m)
	r.next(t) // may have been collected before the scrape
	req := r.next(t)
	_, after := p.scrape(t)
	m, _ = find(after, "cupti_pcie_bytes_total", map[string]string{"uuid": uuid, "direction": "rx"})
	v2 := value(m)
	v, ok := pcieRx(req, uuid)
	if !ok {
		for _, rm := range req.GetResourceMetrics() {
			for _, sm := range rm.GetScopeMetrics() {
				for _, m := range sm.GetMetrics() {
					t.Logf("exported: %s", m.GetName())
					if m.GetSum() != nil && len(m.GetSum().GetDataPoints()) > 0 {
						t.Logf("  first point: %v", attrs(m.GetSum().GetDataPoints()[0].GetAttributes()))
					}
				}
			}
		}
		t.Fatalf("OTLP export lacks the PCIe rx counter of %s", uuid)
	}
	if v < v1 || v > v2 {
		t.Errorf("OTLP pcie rx %g not between scrapes %g and %g", v, v1, v2)
	}
}

func TestOTLPgRPC(t *testing.T) {
	r, addr := serveOTLPgRPC(t)
	p := start(t, "--demo", "--otlp.endpoint="+addr, "--otlp.protocol=grpc", "--otlp.insecure", "--otlp.interval=500ms")
	checkOTLP(t, p, r)
}

// TestOTLPHTTP gives a base URL (the receiver answers only /v1/metrics).
func TestOTLPHTTP(t *testing.T) {
	r := newReceiver()
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	p := start(t, "--demo", "--otlp.endpoint="+srv.URL, "--otlp.protocol=http", "--otlp.interval=500ms")
	checkOTLP(t, p, r)
}

// TestOTLPHTTPFromEnv configures the push with the standard environment variables alone.
func TestOTLPHTTPFromEnv(t *testing.T) {
	r := newReceiver()
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	p := startEnv(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + srv.URL, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_METRIC_EXPORT_INTERVAL=500"}, "--demo")
	checkOTLP(t, p, r)
}

// TestOTLPEndpointFromEnvNeedsScheme: OTEL_EXPORTER_OTLP_ENDPOINT without a scheme, which the
// Go exporters would misread (127.0.0.1:4317 fails to parse, they log it unstructured and
// dial localhost:4317), is refused at start with the fix; with a scheme, the start-up log
// names the endpoint the push reaches, and the push reaches it.
func TestOTLPEndpointFromEnvNeedsScheme(t *testing.T) {
	r, addr := serveOTLPgRPC(t)
	code, out := runExitEnv(t, 30*time.Second, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + addr},
		"--demo", "--web.listen-address=127.0.0.1:0", "--web.health-listen-address=")
	if code == 0 || !contains(out, `OTEL_EXPORTER_OTLP_ENDPOINT="`+addr+`" is not a URL`, "write http://"+addr) {
		t.Errorf("exit %d, want non-zero naming the variable and the fix:\n%s", code, out)
	}
	if strings.Contains(out, "parse url") {
		t.Errorf("the SDK's own parse error was printed:\n%s", out)
	}

	p := startEnv(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + addr, "OTEL_METRIC_EXPORT_INTERVAL=500"}, "--demo")
	r.next(t)
	if !contains(p.out.String(), `msg="pushing OTLP" endpoint=`+addr+` endpoint_from=OTEL_EXPORTER_OTLP_ENDPOINT protocol=grpc tls=false`) {
		t.Errorf("start-up log does not name the endpoint dialled:\n%s", p.out.String())
	}
}

// pushedMetric is one metric of an OTLP export: what a receiver got, with the attribute
// sets of its data points.
type pushedMetric struct {
	name, unit, description, kind string
	points                        []map[string]string
}

// pointAttrs are the attribute sets of a metric's data points, whatever their kind.
func pointAttrs[P interface{ GetAttributes() []*commonpb.KeyValue }](points []P) []map[string]string {
	out := make([]map[string]string, 0, len(points))
	for _, p := range points {
		out = append(out, attrs(p.GetAttributes()))
	}
	return out
}

// pushedMetrics reads an export. A name that comes twice (two scopes or resources) is
// reported as a second metric under name + "#2", so that checks see it.
func pushedMetrics(req *colmetrics.ExportMetricsServiceRequest) map[string]*pushedMetric {
	out := map[string]*pushedMetric{}
	for _, rm := range req.GetResourceMetrics() {
		for _, sm := range rm.GetScopeMetrics() {
			for _, m := range sm.GetMetrics() {
				pm := &pushedMetric{name: m.GetName(), unit: m.GetUnit(), description: m.GetDescription()}
				switch d := m.GetData().(type) {
				case *metricspb.Metric_Gauge:
					pm.kind, pm.points = "Gauge", pointAttrs(d.Gauge.GetDataPoints())
				case *metricspb.Metric_Sum:
					pm.kind, pm.points = "Sum", pointAttrs(d.Sum.GetDataPoints())
				case *metricspb.Metric_Histogram:
					pm.kind, pm.points = "Histogram", pointAttrs(d.Histogram.GetDataPoints())
				case *metricspb.Metric_ExponentialHistogram:
					pm.kind, pm.points = "ExponentialHistogram", pointAttrs(d.ExponentialHistogram.GetDataPoints())
				}
				key := pm.name
				for i := 2; out[key] != nil; i++ {
					key = fmt.Sprintf("%s#%d", pm.name, i)
				}
				out[key] = pm
			}
		}
	}
	return out
}

// repeatedAttributeSets lists, for every metric, the attribute sets that more than one of its
// data points carries: one instrument must have one point per attribute set, or a backend
// keeps one of them at random (two writers of one series).
func repeatedAttributeSets(metrics map[string][]map[string]string) []string {
	var out []string
	for name, points := range metrics {
		seen := map[string]int{}
		for _, p := range points {
			keys := make([]string, 0, len(p))
			for k, v := range p {
				keys = append(keys, k+"="+v)
			}
			slices.Sort(keys)
			seen[strings.Join(keys, ",")]++
		}
		for set, n := range seen {
			if n > 1 {
				out = append(out, fmt.Sprintf("%s: %d points with {%s}", name, n, set))
			}
		}
	}
	slices.Sort(out)
	return out
}
