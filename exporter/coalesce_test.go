package exporter

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/proto"
)

// 200 concurrent scrapes share a handful of gathers, and each gets a complete result.
func TestCoalescingGathererConcurrentSafe(t *testing.T) {
	var gathers, inFlight, maxInFlight atomic.Int32
	slow := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		gathers.Add(1)
		n := inFlight.Add(1)
		for m := maxInFlight.Load(); n > m && !maxInFlight.CompareAndSwap(m, n); m = maxInFlight.Load() {
		}
		time.Sleep(20 * time.Millisecond)
		inFlight.Add(-1)
		return []*dto.MetricFamily{{Name: proto.String("x_total"), Type: dto.MetricType_COUNTER.Enum(),
			Metric: []*dto.Metric{{Counter: &dto.Counter{Value: proto.Float64(1)}}}}}, nil
	})
	g := coalesce(slow)
	var wg sync.WaitGroup
	for range 200 {
		wg.Go(func() {
			for range 5 {
				mfs, err := g.Gather()
				if err != nil || len(mfs) != 1 || mfs[0].GetName() != "x_total" {
					t.Errorf("Gather: %v, %v", mfs, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if maxInFlight.Load() != 1 {
		t.Errorf("%d gathers ran at once, want 1", maxInFlight.Load())
	}
	// 1000 scrapes; each gather serves every scrape that arrived while it ran.
	if n := gathers.Load(); n > 100 {
		t.Errorf("%d gathers for 1000 concurrent scrapes, want them coalesced", n)
	} else {
		t.Logf("%d gathers served 1000 scrapes from 200 concurrent scrapers", n)
	}
}

// Concurrent requests for the same format share one run of the handler; those for another
// format get their own; a burst of distinct name[] filters cannot grow the kept responses
// past maxCalls; the in-flight limit answers 503.
func TestCoalescingHandlerConcurrentSafe(t *testing.T) {
	var runs atomic.Int32
	h := coalesceRequests(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		if r.URL.RawQuery == "" { // the name[] burst below need not be slow
			time.Sleep(20 * time.Millisecond)
		}
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("X-Accept", r.Header.Get("Accept"))
		io.WriteString(w, "body for "+r.Header.Get("Accept"))
	}), 0, nil)
	accepts := []string{"text/plain", "application/openmetrics-text"}
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			accept := accepts[i%2]
			want := string(expfmt.NegotiateAccept(http.Header{"Accept": {accept}}, acceptedFormats...))
			req := httptest.NewRequest("GET", "/metrics", nil)
			req.Header.Set("Accept", accept)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != 200 || rec.Body.String() != "body for "+want || rec.Header().Get("X-Accept") != want {
				t.Errorf("Accept %s: %d %q %v", accept, rec.Code, rec.Body.String(), rec.Header())
			}
		})
	}
	wg.Wait()
	if n := runs.Load(); n > 10 {
		t.Errorf("%d runs for 200 concurrent requests of two kinds", n)
	}
	for i := range 1000 {
		req := httptest.NewRequest("GET", fmt.Sprintf("/metrics?name[]=x%d", i), nil)
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	if len(h.calls) > maxCalls {
		t.Errorf("%d responses kept, bound %d", len(h.calls), maxCalls)
	}

	block := make(chan struct{})
	limited := coalesceRequests(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-block }), 1, nil)
	go limited.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/metrics", nil))
	time.Sleep(20 * time.Millisecond)
	rec := httptest.NewRecorder()
	limited.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	close(block)
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("second request past a limit of 1: %d, want 503", rec.Code)
	}
}

// canonical's request asks for what its key names: each accepted format and name escaping,
// spelt as the format itself, negotiates to itself; every spelling of a request for the
// text format shares one key, whatever the method, query and other headers.
func TestCanonicalRequest(t *testing.T) {
	for _, f := range acceptedFormats {
		for _, esc := range []string{"", "underscores", "dots", "values", "allow-utf-8"} {
			accept := string(f)
			if esc != "" {
				accept += "; escaping=" + esc
			}
			r := httptest.NewRequest("GET", "/metrics", nil)
			r.Header.Set("Accept", accept)
			c := canonical(r).request(r)
			want := expfmt.NegotiateAccept(r.Header, acceptedFormats...)
			if got := expfmt.NegotiateAccept(c.Header, acceptedFormats...); got != want || c.Header.Get("Accept") != string(want) {
				t.Errorf("Accept %q: canonical Accept %q negotiates %q, want %q", accept, c.Header.Get("Accept"), got, want)
			}
		}
	}
	var keys []string
	for _, tc := range []struct{ method, target, accept, encoding string }{
		{"GET", "/metrics", "text/plain;version=0.0.4", "gzip"},
		{"GET", "/metrics?x=1&nocache=42", "text/plain; version=0.0.4; charset=utf-8", "gzip;q=1.0, identity;q=0.5"},
		{"HEAD", "/metrics?ts=99", "text/plain;version=0.0.4;q=0.9, application/json", "deflate, gzip"},
		{"POST", "/metrics?name=foo", "text/plain; version=0.0.4; escaping=underscores", "gzip, *;q=0.1"},
	} {
		r := httptest.NewRequest(tc.method, tc.target, nil)
		r.Header.Set("Accept", tc.accept)
		r.Header.Set("Accept-Encoding", tc.encoding)
		r.Header.Set("User-Agent", tc.target)
		w := canonical(r)
		c := w.request(r)
		keys = append(keys, w.key())
		if c.Header.Get("Accept-Encoding") != "gzip" || c.URL.RawQuery != "" {
			t.Errorf("%+v: canonical Accept-Encoding %q, query %q", tc, c.Header.Get("Accept-Encoding"), c.URL.RawQuery)
		}
	}
	if distinct := slices.Compact(slices.Clone(keys)); len(distinct) != 1 {
		t.Errorf("one response, %d keys: %q", len(distinct), keys)
	}
	// What changes the response changes the key: the escaping, the compression, the filters.
	key := func(target, accept, encoding string) string {
		r := httptest.NewRequest("GET", target, nil)
		r.Header.Set("Accept", accept)
		r.Header.Set("Accept-Encoding", encoding)
		return canonical(r).key()
	}
	text := "text/plain;version=0.0.4"
	for _, other := range []string{
		key("/metrics", text+";escaping=allow-utf-8", "gzip"),
		key("/metrics", text, "identity"),
		key("/metrics", text, "gzip;q=0"),
		key("/metrics?name[]=a", text, "gzip"),
		key("/metrics", "application/openmetrics-text", "gzip"),
	} {
		if other == keys[0] {
			t.Errorf("key %q is the unfiltered text key", other)
		}
	}
	if a, b := key("/metrics?name[]=b&name[]=a&name[]=a", text, "gzip"), key("/metrics?name%5B%5D=a&x=1&name[]=b", text, "gzip"); a != b {
		t.Errorf("one filter set, two keys: %q, %q", a, b)
	}
}

// negotiateCompression picks what promhttp would: gzip when the client takes it at least
// as gladly as the alternatives, identity otherwise.
func TestNegotiateCompression(t *testing.T) {
	for header, want := range map[string]string{
		"":                          "identity",
		"gzip":                      "gzip",
		"GZIP":                      "identity", // promhttp compares case-sensitively
		"gzip;q=0":                  "identity",
		"gzip, identity":            "identity", // equals: the first offered
		"identity;q=0.5, gzip":      "gzip",
		"*":                         "identity",
		"*;q=0.5, gzip;q=0.8":       "gzip",
		"br, deflate":               "identity",
		"gzip;q=0, identity;q=0":    "identity", // nothing acceptable: promhttp falls back to identity
		"gzip;q=bogus, identity":    "identity",
		"deflate, gzip;q=1.0, zstd": "gzip",
	} {
		if got := negotiateCompression([]string{header}); got != want {
			t.Errorf("Accept-Encoding %q: %s, want %s", header, got, want)
		}
	}
}

// gatherCounter is a registry whose one counter tells which gather served a scrape: its
// value is the number of gathers so far.
type gatherCounter struct {
	gathers atomic.Int64
	desc    *prometheus.Desc
}

func (g *gatherCounter) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }
func (g *gatherCounter) Collect(ch chan<- prometheus.Metric) {
	n := g.gathers.Add(1)
	time.Sleep(2 * time.Millisecond) // a collection takes time: concurrent scrapes overlap it
	ch <- prometheus.MustNewConstMetric(g.desc, prometheus.CounterValue, float64(n))
}

// 50 scrapers that vary the query string and spell the same Accept and Accept-Encoding
// differently still share renders: at most one gather per reuseFor. Before, each distinct
// query or header made its own render and gather (2.3x the CPU at 50 clients). Responses
// carry the encoding their request negotiated, and name[] still filters.
func TestCoalescingIgnoresWhatDoesNotChangeTheResponse(t *testing.T) {
	counter := &gatherCounter{desc: prometheus.NewDesc("test_gathers_total", "Gathers so far.", nil, nil)}
	reg := prometheus.NewRegistry()
	reg.MustRegister(counter)
	s := NewServer(nil, ServerConfig{ListenAddresses: []string{"127.0.0.1:0"}, Registry: reg, MaxRequests: 100})
	base := startServer(t, s)
	client := &http.Client{Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 50}}
	t.Cleanup(client.CloseIdleConnections)
	accepts := []string{"text/plain", "text/plain;version=0.0.4", "text/plain; version=0.0.4; charset=utf-8", "text/plain;q=0.9, application/json"}
	encodings := []string{"gzip", "gzip, deflate", "gzip;q=1.0, identity;q=0.5", "identity", ""}
	start := time.Now()
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			for j := range 10 {
				req, _ := http.NewRequest("GET", fmt.Sprintf("%s/metrics?client=%d&n=%d", base, i, j), nil)
				req.Header.Set("Accept", accepts[(i+j)%len(accepts)])
				enc := encodings[(i*7+j)%len(encodings)]
				req.Header.Set("Accept-Encoding", enc)
				resp, err := client.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				wantGzip := negotiateCompression([]string{enc}) == "gzip"
				if resp.StatusCode != 200 || (resp.Header.Get("Content-Encoding") == "gzip") != wantGzip ||
					!strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain; version=0.0.4") {
					t.Errorf("Accept-Encoding %q: %s, headers %v", enc, resp.Status, resp.Header)
					return
				}
				if !wantGzip && !strings.Contains(string(body), "test_gathers_total ") {
					t.Errorf("body without the counter: %q", body)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	gathers := counter.gathers.Load()
	t.Logf("%d gathers for 500 scrapes in %s", gathers, elapsed.Round(time.Millisecond))
	if max := int64(elapsed/reuseFor) + 2; gathers > max {
		t.Errorf("%d gathers in %s, want at most one per %s (%d)", gathers, elapsed.Round(time.Millisecond), reuseFor, max)
	}

	// name[] is honoured, and a filter is a response of its own.
	for target, want := range map[string]bool{"/metrics?name[]=test_gathers_total": true, "/metrics?name[]=nope": false} {
		code, body, _ := get(t, mustRequest(t, base+target))
		if code != 200 || strings.Contains(body, "test_gathers_total ") != want {
			t.Errorf("%s: %d %q", target, code, body)
		}
	}
}

// Distinct responses render one at a time; one that cannot start within renderWait is
// answered 503, as are the requests that joined it, and counted. Requests with a name[]
// filter past maxFiltered are refused at once.
func TestRenderSlot(t *testing.T) {
	block := make(chan struct{})
	var running, most atomic.Int32
	h := coalesceRequests(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := running.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		<-block
		running.Add(-1)
		io.WriteString(w, r.Header.Get("Accept")+" "+r.URL.RawQuery)
	}), 0, nil)
	h.renderWait = 100 * time.Millisecond
	serve := func(target, accept string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", target, nil)
		req.Header.Set("Accept", accept)
		h.ServeHTTP(rec, req)
		return rec
	}
	const text, om = "text/plain;version=0.0.4", "application/openmetrics-text;version=1.0.0"
	first := make(chan *httptest.ResponseRecorder)
	go func() { first <- serve("/metrics", text) }()
	for running.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	var wg sync.WaitGroup
	recs := make([]*httptest.ResponseRecorder, 3)
	for i := range recs { // one distinct response, three requests
		wg.Go(func() { recs[i] = serve("/metrics", om) })
	}
	filtered := make([]*httptest.ResponseRecorder, maxFiltered+1)
	for i := range filtered { // distinct filters: maxFiltered wait, the next is refused
		wg.Go(func() {
			if i == maxFiltered {
				for h.filtered.Load() < maxFiltered {
					time.Sleep(time.Millisecond)
				}
			}
			filtered[i] = serve(fmt.Sprintf("/metrics?name[]=f%d", i), text)
		})
	}
	wg.Wait()
	for _, rec := range append(recs, filtered...) {
		if rec.Code != http.StatusServiceUnavailable {
			t.Errorf("waiting past renderWait, or past maxFiltered: %d %q, want 503", rec.Code, rec.Body.String())
		}
	}
	if n := h.refused.renderWait.Load(); n != 3+maxFiltered {
		t.Errorf("%d render_wait refusals counted, want %d", n, 3+maxFiltered)
	}
	if n := h.refused.filtered.Load(); n != 1 {
		t.Errorf("%d filtered refusals counted, want 1", n)
	}
	// Once the slot is free, the refused response renders on the next request.
	close(block)
	if rec := <-first; rec.Code != 200 || !strings.HasPrefix(rec.Body.String(), "text/plain; version=0.0.4") {
		t.Errorf("first render: %d %q", rec.Code, rec.Body.String())
	}
	if rec := serve("/metrics", om); rec.Code != 200 || !strings.HasPrefix(rec.Body.String(), "application/openmetrics-text; version=1.0.0") {
		t.Errorf("after the slot freed: %d %q", rec.Code, rec.Body.String())
	}
	if rec := serve("/metrics?name[]=a", text); rec.Code != 200 || !strings.HasSuffix(rec.Body.String(), " name%5B%5D=a") {
		t.Errorf("a filter after the slot freed: %d %q", rec.Code, rec.Body.String())
	}
	if most.Load() != 1 {
		t.Errorf("%d renders at once, want %d", most.Load(), renderSlots)
	}
}
