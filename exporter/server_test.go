package exporter

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/internal/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"golang.org/x/crypto/bcrypt"
)

// startServer runs s until the test ends and returns its base URL.
func startServer(t *testing.T, s *Server) string {
	t.Helper()
	r := testutil.RunUntilCleanup(t, s.Run)
	select {
	case <-s.started:
	case <-r.Exited():
		t.Fatal("the server stopped before it listened") // the cleanup reports its error
	}
	return "http://" + s.Addrs()[0].String()
}

func newTestServer(t *testing.T, cfg ServerConfig) (*Server, string) {
	e := newTestExporter()
	cfg.ListenAddresses = []string{"127.0.0.1:0"}
	cfg.Registry = e.Registry()
	cfg.Status = e
	s := NewServer(nil, cfg)
	return s, startServer(t, s)
}

func get(t *testing.T, req *http.Request) (int, string, http.Header) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b), resp.Header
}

func mustRequest(t *testing.T, url string) *http.Request {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func TestServerHealthAndReadiness(t *testing.T) {
	_, url := newTestServer(t, ServerConfig{})
	code, body, _ := get(t, mustRequest(t, url+"/healthz"))
	if code != 200 || body != "ok\n" {
		t.Errorf("/healthz = %d %q, want 200 \"ok\\n\"", code, body)
	}
	code, body, _ = get(t, mustRequest(t, url+"/readyz"))
	want := "source=pmsample device=0 ready\n" +
		"source=pmsample device=1 not ready: hardware busy: paused for ncu\n" +
		"source=activity device=- ready\n"
	if code != 200 || body != want {
		t.Errorf("/readyz = %d %q, want 200 %q", code, body, want)
	}
	code, body, _ = get(t, mustRequest(t, url+"/"))
	if code != 200 || !strings.Contains(body, `href="/metrics"`) {
		t.Errorf("landing page = %d, want 200 with a link to metrics:\n%s", code, body)
	}
	if code, _, _ = get(t, mustRequest(t, url+"/nope")); code != 404 {
		t.Errorf("/nope = %d, want 404", code)
	}
}

func TestServerNotReady(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status StatusReporter
		want   string
	}{
		{"none ready", fakeStatus{{Source: "pmsample", Device: "0", Reason: "no CUPTI: libcupti.so not found"}},
			"source=pmsample device=0 not ready: no CUPTI: libcupti.so not found\n"},
		{"no sources", fakeStatus{}, "no sources registered\n"},
		// A required part not ready makes /readyz 503 even with a source producing; ready, it
		// alone does not make it 200.
		{"required part down", fakeStatus{{Source: "pmsample", Device: "0", Ready: true},
			{Source: "activity", Reason: "activity socket /run/x.sock was removed and cannot be re-created", Required: true}},
			"source=pmsample device=0 ready\nsource=activity device=- not ready: activity socket /run/x.sock was removed and cannot be re-created\n"},
		{"only a required part", fakeStatus{{Source: "activity", Ready: true, Required: true}}, "source=activity device=- ready\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewServer(nil, ServerConfig{ListenAddresses: []string{"127.0.0.1:0"}, Status: tc.status})
			url := startServer(t, s)
			code, body, _ := get(t, mustRequest(t, url+"/readyz"))
			if code != http.StatusServiceUnavailable || body != tc.want {
				t.Errorf("/readyz = %d %q, want 503 %q", code, body, tc.want)
			}
		})
	}
}

func TestServerExtraHandler(t *testing.T) {
	s := NewServer(nil, ServerConfig{ListenAddresses: []string{"127.0.0.1:0"}})
	s.Handle("POST /pmsample/pause", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "paused\n")
	}))
	url := startServer(t, s)
	resp, err := http.Post(url+"/pmsample/pause", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "paused\n" {
		t.Errorf("POST /pmsample/pause = %d %q", resp.StatusCode, b)
	}
}

func TestServerAddressInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	addr := l.Addr().String()
	s := NewServer(nil, ServerConfig{ListenAddresses: []string{addr}})
	err = s.Run(context.Background())
	want := "listen on " + addr + ": address already in use: another process holds the port; choose another with --web.listen-address"
	if err == nil || err.Error() != want {
		t.Errorf("Run = %v, want %q", err, want)
	}
}

// basicAuthWebConfig writes a web config file (exporter-toolkit) that requires basic auth for
// user prom with password secret, and returns its path.
func basicAuthWebConfig(t *testing.T) string {
	t.Helper()
	hash, err := bcrypt.GenerateFromPassword([]byte("secret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(t.TempDir(), "web.yml")
	if err := os.WriteFile(cfgFile, []byte("basic_auth_users:\n  prom: "+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfgFile
}

func TestServerBasicAuth(t *testing.T) {
	cfgFile := basicAuthWebConfig(t)
	s, url := newTestServer(t, ServerConfig{WebConfigFile: cfgFile})
	s.Handle("/extra", http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for _, path := range []string{"/metrics", "/healthz", "/readyz", "/extra"} {
		if code, _, _ := get(t, mustRequest(t, url+path)); code != http.StatusUnauthorized {
			t.Errorf("%s without credentials = %d, want 401", path, code)
		}
		req := mustRequest(t, url+path)
		req.SetBasicAuth("prom", "wrong")
		if code, _, _ := get(t, req); code != http.StatusUnauthorized {
			t.Errorf("%s with a wrong password = %d, want 401", path, code)
		}
	}
	req := mustRequest(t, url+"/metrics")
	req.SetBasicAuth("prom", "secret")
	if code, body, _ := get(t, req); code != 200 || !strings.Contains(body, "cupti_sm_active_ratio") {
		t.Errorf("/metrics with credentials = %d, want 200 with metrics", code)
	}
}

// TestServerHealthListener checks that with a web config requiring basic auth the
// main listener refuses /healthz and /readyz without credentials while the plain
// health listener answers them (what kubelet probes need), and serves nothing else.
func TestServerHealthListener(t *testing.T) {
	cfgFile := basicAuthWebConfig(t)
	s, url := newTestServer(t, ServerConfig{WebConfigFile: cfgFile, HealthListenAddress: "127.0.0.1:0"})
	health := "http://" + s.HealthAddr().String()
	if health == url {
		t.Fatalf("health listener and main listener share %s", url)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, _, _ := get(t, mustRequest(t, url+path)); code != http.StatusUnauthorized {
			t.Errorf("main %s without credentials = %d, want 401", path, code)
		}
	}
	if code, body, _ := get(t, mustRequest(t, health+"/healthz")); code != 200 || body != "ok\n" {
		t.Errorf("health listener /healthz = %d %q, want 200 \"ok\\n\"", code, body)
	}
	code, body, _ := get(t, mustRequest(t, health+"/readyz"))
	if code != 200 || !strings.Contains(body, "source=pmsample device=0 ready\n") {
		t.Errorf("health listener /readyz = %d %q, want 200 with the sources' states", code, body)
	}
	for _, path := range []string{"/metrics", "/", "/api/v1/pm-sampling/pause"} {
		if code, _, _ := get(t, mustRequest(t, health+path)); code != http.StatusNotFound {
			t.Errorf("health listener %s = %d, want 404: it serves only /healthz and /readyz", path, code)
		}
	}
}

func TestServerHealthAddressInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	addr := l.Addr().String()
	s := NewServer(nil, ServerConfig{ListenAddresses: []string{"127.0.0.1:0"}, HealthListenAddress: addr})
	err = s.Run(context.Background())
	want := "listen on " + addr + ": address already in use: another process holds the port; choose another with --web.health-listen-address"
	if err == nil || err.Error() != want {
		t.Errorf("Run = %v, want %q", err, want)
	}
}

// When the two listeners ask for one port, the error blames the health listener, not
// another process.
func TestServerListenersShareAPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	s := NewServer(nil, ServerConfig{ListenAddresses: []string{addr}, HealthListenAddress: addr})
	err = s.Run(context.Background())
	want := "listen on " + addr + ": address already in use by this exporter's own health listener (--web.health-listen-address " + addr + "): give one of them another port"
	if err == nil || err.Error() != want {
		t.Errorf("Run = %v, want %q", err, want)
	}
}

func TestServerBadWebConfig(t *testing.T) {
	cfgFile := filepath.Join(t.TempDir(), "web.yml")
	if err := os.WriteFile(cfgFile, []byte("basic_auth_users: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := NewServer(nil, ServerConfig{ListenAddresses: []string{"127.0.0.1:0"}, WebConfigFile: cfgFile})
	err := s.Run(context.Background())
	if err == nil || !strings.HasPrefix(err.Error(), "load web config "+cfgFile+": ") {
		t.Errorf("Run = %v, want a web config error", err)
	}
}

func TestServerStopsOnCancel(t *testing.T) {
	s := NewServer(nil, ServerConfig{ListenAddresses: []string{"127.0.0.1:0", "127.0.0.1:0"}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	<-s.started
	if n := len(s.Addrs()); n != 2 {
		t.Fatalf("listening on %d addresses, want 2", n)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run = %v, want nil after cancel", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	if _, err := net.Dial("tcp", s.Addrs()[0].String()); err == nil {
		t.Error("still listening after Run returned")
	}
}

// TestScrapeNativeHistogram scrapes with the protobuf Accept header Prometheus
// sends for native histograms and checks both bucket kinds arrive.
func TestScrapeNativeHistogram(t *testing.T) {
	_, url := newTestServer(t, ServerConfig{})
	req := mustRequest(t, url+"/metrics")
	req.Header.Set("Accept", "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	dec := expfmt.NewDecoder(resp.Body, expfmt.ResponseFormat(resp.Header))
	var h *dto.Histogram
	var counter *dto.Counter
	for {
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatal(err)
		}
		switch mf.GetName() {
		case "cupti_kernel_duration_seconds":
			h = mf.Metric[0].GetHistogram()
		case "cupti_pcie_bytes_total":
			counter = mf.Metric[0].GetCounter()
		}
	}
	if h == nil {
		t.Fatal("no cupti_kernel_duration_seconds in the protobuf scrape")
	}
	if h.GetSampleCount() != 4 || h.GetSampleSum() != 107.5 {
		t.Errorf("count, sum = %d, %g; want 4, 107.5", h.GetSampleCount(), h.GetSampleSum())
	}
	var classic []string
	for _, b := range h.Bucket {
		classic = append(classic, expfmtFloat(b.GetUpperBound())+":"+itoa(b.GetCumulativeCount()))
	}
	if got := strings.Join(classic, " "); got != "1:1 10:3 100:4" {
		t.Errorf("classic buckets %s, want 1:1 10:3 100:4", got)
	}
	if h.GetSchema() != 0 || h.GetZeroCount() != 0 {
		t.Errorf("schema %d zero count %d, want 0 0", h.GetSchema(), h.GetZeroCount())
	}
	var spans []string
	for _, s := range h.PositiveSpan {
		spans = append(spans, itoa(int64(s.GetOffset()))+"+"+itoa(s.GetLength()))
	}
	if got := strings.Join(spans, " "); got != "-1+1 2+1 4+1" {
		t.Errorf("spans %s, want -1+1 2+1 4+1 (indexes -1, 2, 7)", got)
	}
	if got := h.PositiveDelta; len(got) != 3 || got[0] != 1 || got[1] != 1 || got[2] != -1 {
		t.Errorf("deltas %v, want [1 1 -1] (counts 1, 2, 1)", got)
	}
	if !h.GetCreatedTimestamp().AsTime().Equal(testStart) {
		t.Errorf("histogram created %v, want %v", h.GetCreatedTimestamp().AsTime(), testStart)
	}
	if counter == nil || !counter.GetCreatedTimestamp().AsTime().Equal(testStart) {
		t.Errorf("counter %v, want created timestamp %v", counter, testStart)
	}
}

// A source that is ready but degraded (a PM rate the host cannot sustain) says why in /readyz
// and stays ready.
func TestServerReadyWithReason(t *testing.T) {
	e := New(nil, WithoutRuntimeMetrics())
	e.RegisterStatus("pmsample", fakeStatus{{Source: "pmsample", Device: "0", Ready: true,
		Reason: "sampling every 100µs (10000 samples/s) is more than this host sustains"}})
	s := NewServer(nil, ServerConfig{ListenAddresses: []string{"127.0.0.1:0"}, Registry: e.Registry(), Status: e})
	url := startServer(t, s)
	code, body, _ := get(t, mustRequest(t, url+"/readyz"))
	want := "source=pmsample device=0 ready: sampling every 100µs (10000 samples/s) is more than this host sustains\n"
	if code != 200 || body != want {
		t.Errorf("/readyz = %d %q, want 200 %q", code, body, want)
	}
}
