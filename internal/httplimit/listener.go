package httplimit

import (
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Reasons a connection is closed by a limit (the reason label of
// <namespace>_http_connections_closed_total).
const (
	ReasonLimit   = "limit"   // refused: the listener is full and every connection is in a request
	ReasonEvicted = "evicted" // idle or silent longest, closed to make room for a newcomer
	ReasonTimeout = "timeout" // a header, read, write or idle timeout passed
)

var reasons = [...]string{ReasonLimit, ReasonEvicted, ReasonTimeout}

// Listener holds at most max connections at once. A newcomer past the limit replaces
// the open connection that has waited longest without a request in progress (idle
// between requests, or not yet through its TLS handshake and request header); when every
// connection is in a request, the newcomer is closed at once. Either way it is counted.
//
// netutil.LimitListener instead stops accepting: newcomers wait in the kernel's backlog
// behind whatever holds the slots, so a client that holds the slots idle makes a
// scraper wait for an idle timeout, past its scrape timeout (BenchmarkScrapeUnderFlood).
// Here a scraper is only refused while every slot is in a request, which the handlers'
// own bounds (in-flight scrapes, timeouts) keep short.
type Listener struct {
	net.Listener
	max    int
	counts *counts // its name's in the Metrics

	mu    sync.Mutex
	conns map[*conn]struct{}
	down  atomic.Bool // the server is shutting down: idle closes are not timeouts
}

// NewListener limits l to maxConns connections (at least 1), counting under name in m.
func NewListener(l net.Listener, name string, maxConns int, m *Metrics) *Listener {
	if maxConns < 1 {
		maxConns = 1
	}
	c := m.get(name)
	c.limit.Add(int64(maxConns))
	return &Listener{Listener: l, max: maxConns, counts: c, conns: make(map[*conn]struct{})}
}

// Accept returns the next connection it admits; those it refuses are closed and counted.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		tc := &conn{Conn: c, l: l}
		tc.state.Store(int32(http.StateNew))
		tc.since.Store(time.Now().UnixNano())
		if l.admit(tc) {
			return tc, nil
		}
	}
}

// admit registers c, evicting a waiting connection when full; it closes c when none can go.
func (l *Listener) admit(c *conn) bool {
	l.mu.Lock()
	var victim *conn
	if len(l.conns) >= l.max {
		victim = l.oldestWaitingLocked()
		if victim == nil {
			l.mu.Unlock()
			l.counts.close(ReasonLimit) // counted before the client can see the close
			c.Conn.Close()
			return false
		}
		victim.forgetLocked(ReasonEvicted)
	}
	l.conns[c] = struct{}{}
	l.counts.open.Add(1)
	l.mu.Unlock()
	if victim != nil {
		victim.Conn.Close() // its server goroutine sees the error and ends
	}
	return true
}

// oldestWaitingLocked is the connection that has waited longest without a request in
// progress (new or idle); nil when every connection is in a request. l.mu is held.
func (l *Listener) oldestWaitingLocked() *conn {
	var victim *conn
	var since int64
	for c := range l.conns {
		switch http.ConnState(c.state.Load()) {
		case http.StateNew, http.StateIdle:
			if s := c.since.Load(); victim == nil || s < since {
				victim, since = c, s
			}
		}
	}
	return victim
}

// shutdown marks the server shutting down, and closes the connections without a request
// yet (http.Server.Shutdown closes the idle ones, and waits 5 s for new ones).
func (l *Listener) shutdown() {
	l.down.Store(true)
	l.mu.Lock()
	var fresh []*conn
	for c := range l.conns {
		if http.ConnState(c.state.Load()) == http.StateNew {
			fresh = append(fresh, c)
		}
	}
	l.mu.Unlock()
	for _, c := range fresh {
		c.Close()
	}
}

// Open is the number of connections held now.
func (l *Listener) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

// conn is an admitted connection: its state (from the server's ConnState hook) orders
// eviction, and its reads and writes tell a timeout from a client that went away.
type conn struct {
	net.Conn
	l     *Listener
	state atomic.Int32 // http.ConnState
	since atomic.Int64 // when it last became new or idle, Unix ns

	aborted  atomic.Bool // the server set a read deadline in the past to abort a read
	timedOut atomic.Bool // a read or write deadline passed
	ioErr    atomic.Bool // a read or write failed otherwise (the client went away)
	gone     bool        // forgotten by the listener; under l.mu
}

func (c *conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.noteErr(err)
	return n, err
}

func (c *conn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.noteErr(err)
	return n, err
}

// noteErr records why I/O failed. net/http aborts its background read with a deadline in
// the past; that is not a timeout.
func (c *conn) noteErr(err error) {
	switch {
	case err == nil:
	case errors.Is(err, os.ErrDeadlineExceeded):
		if !c.aborted.Load() {
			c.timedOut.Store(true)
		}
	default:
		c.ioErr.Store(true)
	}
}

// CloseWrite half-closes a TCP connection: net/http does it before closing a connection
// whose request body it stopped reading, so the client reads the error response.
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *conn) SetDeadline(t time.Time) error {
	c.noteDeadline(t)
	return c.Conn.SetDeadline(t)
}

func (c *conn) SetReadDeadline(t time.Time) error {
	c.noteDeadline(t)
	return c.Conn.SetReadDeadline(t)
}

func (c *conn) noteDeadline(t time.Time) {
	c.aborted.Store(!t.IsZero() && time.Until(t) < -time.Hour)
}

// Close closes the connection and frees its slot; a connection that timed out, or that
// the server closed while idle without the client having gone (HTTP/2's idle timeout), is
// counted as a timeout.
func (c *conn) Close() error {
	l := c.l
	l.mu.Lock()
	if !c.gone {
		reason := ""
		switch {
		case c.timedOut.Load():
			reason = ReasonTimeout
		case http.ConnState(c.state.Load()) == http.StateIdle && !c.ioErr.Load() && !l.down.Load():
			reason = ReasonTimeout
		}
		c.forgetLocked(reason)
	}
	l.mu.Unlock()
	return c.Conn.Close()
}

// forgetLocked frees c's slot and counts why, when a limit closed it; l.mu is held.
func (c *conn) forgetLocked(reason string) {
	c.gone = true
	delete(c.l.conns, c)
	c.l.counts.open.Add(-1)
	if reason != "" {
		c.l.counts.close(reason)
	}
}

// trackState is an http.Server ConnState hook: it keeps the state of connections that
// came from a Listener (directly or under TLS).
func trackState(nc net.Conn, s http.ConnState) {
	if t, ok := nc.(*tls.Conn); ok {
		nc = t.NetConn()
	}
	c, ok := nc.(*conn)
	if !ok {
		return
	}
	if s == http.StateNew || s == http.StateIdle {
		c.since.Store(time.Now().UnixNano())
	}
	c.state.Store(int32(s))
}
