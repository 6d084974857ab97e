package exporter

import (
	"bytes"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// coalescingGatherer lets concurrent scrapes share one Gather: a scrape that arrives while a
// gather runs waits for it and serves its result (at most one gather old) instead of
// starting its own. So 200 concurrent scrapers cost about one collection at a time, not
// 200, and cannot starve the PM decode loop of CPU. The families are shared read-only by
// the waiting requests (promhttp only encodes them).
type coalescingGatherer struct {
	g prometheus.Gatherer

	mu   sync.Mutex
	call *gatherCall // the gather in flight, if any
}

type gatherCall struct {
	done chan struct{}
	mfs  []*dto.MetricFamily
	err  error
}

// coalesce wraps g so that concurrent Gather calls share one.
func coalesce(g prometheus.Gatherer) prometheus.Gatherer {
	return &coalescingGatherer{g: g}
}

// Gather returns the result of the gather in flight, or runs one.
func (c *coalescingGatherer) Gather() ([]*dto.MetricFamily, error) {
	c.mu.Lock()
	if call := c.call; call != nil {
		c.mu.Unlock()
		<-call.done
		return call.mfs, call.err
	}
	call := &gatherCall{done: make(chan struct{})}
	c.call = call
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.call = nil
		c.mu.Unlock()
		close(call.done)
	}()
	call.mfs, call.err = c.g.Gather()
	return call.mfs, call.err
}

// coalescingHandler serves concurrent requests that ask for the same encoding (Accept and
// Accept-Encoding headers) with one run of the wrapped handler: the first request runs it
// into a buffer, and the requests that arrive while it runs get a copy of its status, headers
// and body, as do those that arrive up to 100 ms after it finished. Gathering, encoding and compressing the exposition are then paid once per
// burst of scrapes, not once per scrape. It also bounds the requests waiting or running:
// past maxInFlight (0: no bound) a request gets 503 at once, as promhttp's
// MaxRequestsInFlight does.
type coalescingHandler struct {
	h           http.Handler
	maxInFlight int64
	inFlight    atomic.Int64

	mu    sync.Mutex
	calls map[string]*responseCall
}

type responseCall struct {
	done    chan struct{}
	expires time.Time // when done: until when later requests may reuse it
	status  int
	header  http.Header
	body    bytes.Buffer
}

func coalesceRequests(h http.Handler, maxInFlight int) http.Handler {
	return &coalescingHandler{h: h, maxInFlight: int64(maxInFlight), calls: make(map[string]*responseCall)}
}

func (c *coalescingHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if n := c.inFlight.Add(1); c.maxInFlight > 0 && n > c.maxInFlight {
		c.inFlight.Add(-1)
		http.Error(w, fmt.Sprintf("Limit of concurrent requests reached (%d), try again later.", c.maxInFlight), http.StatusServiceUnavailable)
		return
	}
	defer c.inFlight.Add(-1)
	key := r.Method + "\x00" + r.Header.Get("Accept") + "\x00" + r.Header.Get("Accept-Encoding") + "\x00" + r.URL.RawQuery
	c.mu.Lock()
	call, follower := c.calls[key]
	if follower && isDone(call.done) && time.Now().After(call.expires) {
		follower = false
	}
	if !follower {
		if len(c.calls) >= maxCalls {
			c.sweepLocked()
		}
		if len(c.calls) >= maxCalls { // as many encodings in flight: serve this one alone
			c.mu.Unlock()
			c.h.ServeHTTP(w, r)
			return
		}
		call = &responseCall{done: make(chan struct{}), header: http.Header{}}
		c.calls[key] = call
	}
	c.mu.Unlock()
	if follower {
		select {
		case <-call.done:
		case <-r.Context().Done():
			return
		}
	} else {
		func() {
			defer func() {
				c.mu.Lock()
				call.expires = time.Now().Add(reuseFor)
				c.mu.Unlock()
				close(call.done)
			}()
			rec := &recorder{call: call}
			c.h.ServeHTTP(rec, r)
			if call.status == 0 {
				call.status = http.StatusOK
			}
		}()
	}
	for k, v := range call.header {
		w.Header()[k] = v
	}
	w.WriteHeader(call.status)
	w.Write(call.body.Bytes())
}

// reuseFor is how long a finished response also serves requests that arrive after it: under
// back-to-back scrapes, at most one gather per period, and values at most that much older.
const reuseFor = 100 * time.Millisecond

// maxCalls bounds the responses kept, one per distinct request key (method, Accept,
// Accept-Encoding, query): clients cannot grow the map by varying headers.
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
