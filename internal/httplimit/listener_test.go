package httplimit

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cupti-exporter/cupti-exporter/internal/testutil"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
)

var testSettings = Settings{ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 10 * time.Second,
	WriteTimeout: 10 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 16 << 10}

// serve runs h on a Listener of max connections with settings s until the test ends.
func serve(t *testing.T, max int, s Settings, h http.Handler) (*Listener, *Metrics, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := NewMetrics("test")
	l := NewListener(ln, "web", max, m)
	srv := &http.Server{Handler: h}
	s.Apply(srv, l)
	done := make(chan struct{})
	go func() { srv.Serve(l); close(done) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		<-done
	})
	return l, m, ln.Addr().String()
}

// request sends one GET on c and reads the response; the connection stays open.
func request(t *testing.T, c net.Conn, path string) string {
	t.Helper()
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedByServer reports whether the server closed c (reads end in EOF or a reset)
// within d; what it still sent is read and dropped.
func closedByServer(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	if err == nil { // EOF
		return true
	}
	return !os.IsTimeout(err)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.WaitFor(t, what, 10*time.Second, 5*time.Millisecond, cond)
}

var ok = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })

// A full listener makes room for a newcomer by closing the connection idle longest, then a
// silent one; the others keep being served.
func TestListenerEvictsTheLongestWaiting(t *testing.T) {
	l, m, addr := serve(t, 3, testSettings, ok)
	idle := []net.Conn{dial(t, addr), dial(t, addr)}
	for i, c := range idle {
		request(t, c, "/")
		waitFor(t, "idle", func() bool { return l.count(http.StateIdle) == i+1 })
	}
	silent := dial(t, addr) // connected, no request
	waitFor(t, "3 connections", func() bool { return l.Open() == 3 })
	newcomer := dial(t, addr)
	if got := request(t, newcomer, "/"); got != "ok" {
		t.Fatalf("newcomer: %q", got)
	}
	waitFor(t, "newcomer idle", func() bool { return l.count(http.StateIdle) == 2 })
	if !closedByServer(idle[0], 5*time.Second) {
		t.Error("the connection idle longest was not closed")
	}
	if closedByServer(idle[1], 100*time.Millisecond) || closedByServer(silent, 10*time.Millisecond) {
		t.Error("a connection closed that was not the longest waiting")
	}
	// idle[1] has waited since its request, silent since it connected, later.
	request(t, dial(t, addr), "/")
	if !closedByServer(idle[1], 5*time.Second) {
		t.Error("the next longest waiting was not closed")
	}
	if got := request(t, newcomer, "/"); got != "ok" {
		t.Errorf("newcomer's second request: %q", got)
	}
	if n := m.Closed("web", ReasonEvicted); n != 2 {
		t.Errorf("%d evictions counted, want 2", n)
	}
	if l.Open() > 3 {
		t.Errorf("%d connections open, limit 3", l.Open())
	}
}

// When every connection is in a request, a newcomer is closed at once and counted; the
// requests in progress finish.
func TestListenerRefusesWhenAllBusy(t *testing.T) {
	release := make(chan struct{})
	busy := make(chan struct{}, 2)
	_, m, addr := serve(t, 2, testSettings, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		busy <- struct{}{}
		<-release
		io.WriteString(w, "done")
	}))
	inRequest := []net.Conn{dial(t, addr), dial(t, addr)}
	results := make(chan string, 2)
	for _, c := range inRequest {
		go func() { results <- request(t, c, "/") }()
	}
	<-busy
	<-busy
	refused := dial(t, addr)
	if !closedByServer(refused, 5*time.Second) {
		t.Error("a newcomer past a full, busy listener was not closed")
	}
	if n := m.Closed("web", ReasonLimit); n != 1 {
		t.Errorf("%d refusals counted, want 1", n)
	}
	close(release)
	for range inRequest {
		if got := <-results; got != "done" {
			t.Errorf("request in progress: %q", got)
		}
	}
}

// Idle keep-alive connections are closed after the idle timeout and silent ones after the
// header timeout, both counted as timeouts; a client that closes is not.
func TestListenerTimeouts(t *testing.T) {
	s := testSettings
	s.IdleTimeout, s.ReadHeaderTimeout = 200*time.Millisecond, 300*time.Millisecond
	l, m, addr := serve(t, 10, s, ok)
	idle, silent, leaving := dial(t, addr), dial(t, addr), dial(t, addr)
	request(t, idle, "/")
	request(t, leaving, "/")
	leaving.Close()
	if !closedByServer(idle, 5*time.Second) || !closedByServer(silent, 5*time.Second) {
		t.Fatal("idle or silent connection not closed")
	}
	waitFor(t, "every connection closed", func() bool { return l.Open() == 0 })
	if n := m.Closed("web", ReasonTimeout); n != 2 {
		t.Errorf("%d timeouts counted, want 2 (idle and silent; not the client that left)", n)
	}
}

// A connection whose responses keep it busy in short requests is not a timeout: aborted
// background reads (a deadline in the past) do not count.
func TestListenerKeepAliveIsNotTimeout(t *testing.T) {
	l, m, addr := serve(t, 10, testSettings, ok)
	c := dial(t, addr)
	for range 20 {
		request(t, c, "/")
	}
	// Connection: close: the server closes after the response.
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	if !closedByServer(c, 5*time.Second) {
		t.Fatal("Connection: close not honoured")
	}
	waitFor(t, "closed", func() bool { return l.Open() == 0 })
	for _, r := range reasons {
		if n := m.Closed("web", r); n != 0 {
			t.Errorf("%s counted %d times, want 0", r, n)
		}
	}
}

// Under TLS and HTTP/2 the states come through the tls.Conn: an idle HTTP/2 connection is
// evicted for a newcomer, and the HTTP/2 idle timeout counts as a timeout.
func TestListenerTLSAndHTTP2(t *testing.T) {
	ts := httptest.NewUnstartedServer(ok)
	m := NewMetrics("test")
	l := NewListener(ts.Listener, "web", 1, m)
	ts.Listener = l
	s := testSettings
	s.IdleTimeout = 400 * time.Millisecond
	s.Apply(ts.Config, l)
	ts.EnableHTTP2 = true
	ts.StartTLS()
	defer ts.Close()
	newClient := func() *http.Client {
		tr := ts.Client().Transport.(*http.Transport).Clone()
		tr.ForceAttemptHTTP2 = true
		return &http.Client{Transport: tr}
	}
	get := func(c *http.Client) string {
		resp, err := c.Get(ts.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.ProtoMajor != 2 {
			t.Errorf("protocol %s, want HTTP/2", resp.Proto)
		}
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	first, second := newClient(), newClient()
	get(first)
	waitFor(t, "first connection idle", func() bool { return l.Open() == 1 })
	if got := get(second); got != "ok" { // evicts first's idle connection
		t.Errorf("second client: %q", got)
	}
	if n := m.Closed("web", ReasonEvicted); n != 1 {
		t.Errorf("%d evictions, want 1", n)
	}
	waitFor(t, "HTTP/2 idle timeout", func() bool { return m.Closed("web", ReasonTimeout) == 1 })
	first.CloseIdleConnections()
	second.CloseIdleConnections()
}

// Shutdown closes connections that never sent a request at once, instead of waiting 5 s.
func TestListenerShutdownClosesSilent(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := NewListener(ln, "web", 10, NewMetrics("test"))
	srv := &http.Server{Handler: ok}
	testSettings.Apply(srv, l)
	go srv.Serve(l)
	c := dial(t, ln.Addr().String())
	waitFor(t, "accepted", func() bool { return l.Open() == 1 })
	start := time.Now()
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("shutdown took %s with a silent connection", d)
	}
	if !closedByServer(c, time.Second) {
		t.Error("silent connection still open after shutdown")
	}
}

// The metrics: open connections, the limit, and each reason from the start.
func TestMetrics(t *testing.T) {
	l, m, addr := serve(t, 5, testSettings, ok)
	c := dial(t, addr)
	request(t, c, "/")
	waitFor(t, "open", func() bool { return l.Open() == 1 })
	want := `
# HELP test_http_connections HTTP connections open now, by listener.
# TYPE test_http_connections gauge
test_http_connections{listener="web"} 1
# HELP test_http_connections_limit Most HTTP connections a listener holds at once (docs/security.md, "HTTP listeners").
# TYPE test_http_connections_limit gauge
test_http_connections_limit{listener="web"} 5
`
	if err := promtest.CollectAndCompare(m, strings.NewReader(want), "test_http_connections", "test_http_connections_limit"); err != nil {
		t.Error(err)
	}
	if n := promtest.CollectAndCount(m, "test_http_connections_closed_total"); n != len(reasons) {
		t.Errorf("%d closed series, want one per reason (%d)", n, len(reasons))
	}
}

// Descriptors counts what is open.
func TestDescriptors(t *testing.T) {
	limit, before, err := Descriptors()
	if err != nil {
		t.Fatal(err)
	}
	var files []*os.File
	for range 10 {
		f, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	_, after, _ := Descriptors()
	for _, f := range files {
		f.Close()
	}
	if after-before != 10 || limit < after {
		t.Errorf("limit %d, open %d then %d after opening 10", limit, before, after)
	}
}

// count is the number of connections in state s.
func (l *Listener) count(s http.ConnState) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for c := range l.conns {
		if http.ConnState(c.state.Load()) == s {
			n++
		}
	}
	return n
}
