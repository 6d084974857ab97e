package exporter

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// coalescingGatherer lets scrapes share one Gather: a scrape that arrives while a gather runs,
// or up to reuseFor after it finished, serves its result instead of starting its own. So 200
// concurrent scrapers, or scrapers that each ask for another encoding or name[] filter, cost
// at most one collection per reuseFor, and cannot starve the PM decode loop of CPU. The
// families are shared read-only by the requests (promhttp only encodes them).
type coalescingGatherer struct {
	g prometheus.Gatherer

	mu   sync.Mutex
	call *gatherCall // the gather in flight, or the last one until it expires
}

type gatherCall struct {
	done    chan struct{}
	expires time.Time // when done: until when later gathers may reuse it
	mfs     []*dto.MetricFamily
	err     error
}

// coalesce wraps g so that concurrent and back-to-back Gather calls share one.
func coalesce(g prometheus.Gatherer) prometheus.Gatherer {
	return &coalescingGatherer{g: g}
}

// Gather returns the result of the gather in flight or just done, or runs one.
func (c *coalescingGatherer) Gather() ([]*dto.MetricFamily, error) {
	c.mu.Lock()
	if call := c.call; call != nil && (!isDone(call.done) || time.Now().Before(call.expires)) {
		c.mu.Unlock()
		<-call.done
		return call.mfs, call.err
	}
	call := &gatherCall{done: make(chan struct{})}
	c.call = call
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		call.expires = time.Now().Add(reuseFor)
		c.mu.Unlock()
		close(call.done)
	}()
	call.mfs, call.err = c.g.Gather()
	return call.mfs, call.err
}

// coalescingHandler serves concurrent requests for the same response with one run of the
// wrapped handler (promhttp's): the first request runs it into a buffer, and the requests
// that arrive while it runs, or up to reuseFor after it finished, get a copy of its status,
// headers and body. Which response a request asks for is normalised first (canonical): the
// format and compression promhttp would negotiate, and the set of name[] filters, the only
// query parameter it honours; other headers, query parameters and the method do not make
// another render. Distinct renders run one at a time (renderSlots); one that cannot start
// within renderWait is answered 503. It also bounds the requests waiting or running: past
// maxInFlight (0: no bound) a request gets 503 at once, as promhttp's MaxRequestsInFlight
// does; and of those, requests with a name[] filter, which a client can make distinct
// without end, past maxFiltered, so that they cannot take the slots of scrapers (which
// send none). Every refusal is counted.
type coalescingHandler struct {
	h           http.Handler
	maxInFlight int64
	inFlight    atomic.Int64
	filtered    atomic.Int64  // requests with a name[] filter waiting or running
	renders     chan struct{} // a slot per render in progress
	renderWait  time.Duration
	refused     *refusals

	mu    sync.Mutex
	calls map[string]*responseCall
}

type responseCall struct {
	done    chan struct{}
	expires time.Time // when done: until when later requests may reuse it
	status  int
	header  http.Header
	body    bytes.Buffer
	refused string // the refusal reason when no render slot came in time
}

// Rendering bounds of coalescingHandler.
const (
	// renderSlots is how many distinct responses render at once: a render gathers (or
	// reuses a gather), encodes and compresses on one core. Scrapers of one format share a
	// render; a second format waits for one render.
	renderSlots = 1
	// renderWait is how long a distinct response waits for a render slot before a 503: a
	// queue of maxInFlight other renders must not hold a scraper past its scrape timeout.
	renderWait = 2 * time.Second
	// maxFiltered is how many requests with a name[] filter wait or render at once.
	maxFiltered = 2
)

// Reasons a scrape is refused (the reason label of cupti_exporter_scrapes_refused_total).
const (
	refusedMaxRequests = "max_requests" // past --web.max-requests waiting or running
	refusedRenderWait  = "render_wait"  // no render slot within renderWait
	refusedFiltered    = "filtered"     // past maxFiltered requests with a name[] filter
)

func coalesceRequests(h http.Handler, maxInFlight int, refused *refusals) *coalescingHandler {
	if refused == nil {
		refused = newRefusals()
	}
	return &coalescingHandler{h: h, maxInFlight: int64(maxInFlight), renders: make(chan struct{}, renderSlots),
		renderWait: renderWait, refused: refused, calls: make(map[string]*responseCall)}
}

func (c *coalescingHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	want := canonical(r)
	key := want.key()
	if want.query != "" { // a name[] filter
		if n := c.filtered.Add(1); n > maxFiltered {
			c.filtered.Add(-1)
			c.refused.inc(refusedFiltered)
			http.Error(w, fmt.Sprintf("Limit of concurrent requests with a name[] filter reached (%d), try again later.", maxFiltered), http.StatusServiceUnavailable)
			return
		}
		defer c.filtered.Add(-1)
	}
	if n := c.inFlight.Add(1); c.maxInFlight > 0 && n > c.maxInFlight {
		c.inFlight.Add(-1)
		c.refused.inc(refusedMaxRequests)
		http.Error(w, fmt.Sprintf("Limit of concurrent requests reached (%d), try again later.", c.maxInFlight), http.StatusServiceUnavailable)
		return
	}
	defer c.inFlight.Add(-1)
	c.mu.Lock()
	call, follower := c.calls[key]
	if follower && isDone(call.done) && time.Now().After(call.expires) {
		follower = false
	}
	if !follower {
		if len(c.calls) >= maxCalls {
			c.sweepLocked()
		}
		call = &responseCall{done: make(chan struct{}), header: http.Header{}}
		if len(c.calls) < maxCalls { // else as many responses in flight: this one is not shared
			c.calls[key] = call
		}
	}
	c.mu.Unlock()
	if follower {
		select {
		case <-call.done:
		case <-r.Context().Done():
			return
		}
	} else {
		c.render(call, want.request(r))
	}
	if call.refused != "" {
		c.refused.inc(call.refused)
	}
	for k, v := range call.header {
		w.Header()[k] = v
	}
	w.WriteHeader(call.status)
	w.Write(call.body.Bytes())
}

// render runs the handler into call once a render slot is free, or records a 503 when
// none frees within renderWait. The wait does not end with the request: the requests
// that joined it wait for its outcome.
func (c *coalescingHandler) render(call *responseCall, r *http.Request) {
	reuse := reuseFor
	defer func() {
		c.mu.Lock()
		call.expires = time.Now().Add(reuse)
		c.mu.Unlock()
		close(call.done)
	}()
	wait := time.NewTimer(c.renderWait)
	defer wait.Stop()
	select {
	case c.renders <- struct{}{}:
		defer func() { <-c.renders }()
	case <-wait.C:
		reuse = 0 // the next request tries again
		call.refused, call.status = refusedRenderWait, http.StatusServiceUnavailable
		call.header.Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(&call.body, "Other renders took the exporter's render slot for %s, try again later.\n", c.renderWait)
		return
	}
	c.h.ServeHTTP(&recorder{call: call}, r)
	if call.status == 0 {
		call.status = http.StatusOK
	}
}

// acceptedFormats and offeredCompressions are what the metrics handler negotiates
// (HandlerOpts.AcceptedFormats, OfferedCompressions); canonical negotiates the same.
var (
	acceptedFormats     = expfmt.DefaultOpenMetricsAcceptedFormats()
	offeredCompressions = []promhttp.Compression{promhttp.Identity, promhttp.Gzip}
)

// wanted is the response a request gets, in canonical form: the format (with its name
// escaping) and compression negotiated from the Accept and Accept-Encoding headers, and the
// set of name[] filters (sorted, encoded as a query).
type wanted struct {
	format     expfmt.Format
	enc, query string
}

// canonical is the response r gets.
func canonical(r *http.Request) wanted {
	w := wanted{format: expfmt.NegotiateAccept(r.Header, acceptedFormats...), enc: negotiateCompression(r.Header.Values("Accept-Encoding"))}
	if names := r.URL.Query()["name[]"]; len(names) > 0 {
		slices.Sort(names)
		w.query = url.Values{"name[]": slices.Compact(names)}.Encode()
	}
	return w
}

// key names the response.
func (w wanted) key() string { return string(w.format) + "\x00" + w.enc + "\x00" + w.query }

// request is a copy of r that carries exactly what w says (Accept: the format;
// Accept-Encoding: the compression; the query: the filters), so that the response it renders
// is the one w's key names. Only the request that renders needs it.
func (w wanted) request(r *http.Request) *http.Request {
	c := r.Clone(r.Context())
	c.Header.Set("Accept", string(w.format))
	c.Header.Set("Accept-Encoding", w.enc)
	c.URL.RawQuery = w.query
	return c
}

// negotiateCompression picks the offered compression as promhttp does (the highest q; of
// equals, the first offered; identity when none is acceptable, which promhttp falls back
// to).
func negotiateCompression(header []string) string {
	best, bestQ := string(promhttp.Identity), -1.0
	for _, offer := range offeredCompressions {
		for _, h := range header {
			for _, spec := range strings.Split(h, ",") {
				coding, params, _ := strings.Cut(spec, ";")
				coding = strings.TrimSpace(coding)
				if coding != "*" && coding != string(offer) {
					continue
				}
				q := 1.0
				if v, ok := strings.CutPrefix(strings.TrimSpace(params), "q="); ok {
					f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
					if err != nil || f < 0 || f > 1 {
						continue
					}
					q = f
				}
				if q > bestQ {
					best, bestQ = string(offer), q
				}
			}
		}
	}
	if bestQ == 0 {
		return string(promhttp.Identity)
	}
	return best
}

// reuseFor is how long a finished response (and a gather) also serves requests that arrive
// after it: under back-to-back scrapes, at most one gather per period, and values at most
// that much older.
const reuseFor = 100 * time.Millisecond

// maxCalls bounds the responses kept, one per distinct key (format, compression, name[]
// filters): clients cannot grow the map by varying them.
const maxCalls = 32

// sweepLocked forgets finished responses past their reuse; c.mu is held.
func (c *coalescingHandler) sweepLocked() {
	now := time.Now()
	for k, call := range c.calls {
		if isDone(call.done) && now.After(call.expires) {
			delete(c.calls, k)
		}
	}
}

func isDone(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// recorder captures a response into a responseCall.
type recorder struct{ call *responseCall }

func (r *recorder) Header() http.Header { return r.call.header }

func (r *recorder) WriteHeader(status int) {
	if r.call.status == 0 {
		r.call.status = status
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.call.status == 0 {
		r.call.status = http.StatusOK
	}
	return r.call.body.Write(p)
}

// refusals counts refused scrapes by reason: cupti_exporter_scrapes_refused_total.
type refusals struct {
	maxRequests, renderWait, filtered atomic.Uint64
}

func newRefusals() *refusals { return &refusals{} }

func (f *refusals) inc(reason string) {
	switch reason {
	case refusedMaxRequests:
		f.maxRequests.Add(1)
	case refusedRenderWait:
		f.renderWait.Add(1)
	case refusedFiltered:
		f.filtered.Add(1)
	}
}

func (f *refusals) collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(scrapesRefusedDesc, prometheus.CounterValue, float64(f.maxRequests.Load()), refusedMaxRequests)
	ch <- prometheus.MustNewConstMetric(scrapesRefusedDesc, prometheus.CounterValue, float64(f.renderWait.Load()), refusedRenderWait)
	ch <- prometheus.MustNewConstMetric(scrapesRefusedDesc, prometheus.CounterValue, float64(f.filtered.Load()), refusedFiltered)
}
