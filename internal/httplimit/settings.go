package httplimit

import (
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"syscall"
	"time"
)

// Settings are the per-connection bounds of one HTTP server.
type Settings struct {
	// ReadHeaderTimeout bounds a TLS handshake plus a request's header, from the first
	// byte (or the connection) on: slow-header clients are closed.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, header and body.
	ReadTimeout time.Duration
	// WriteTimeout bounds a request from the end of its header to the last byte of the
	// response: the wait for a scrape slot, the render and the transfer to a slow client.
	WriteTimeout time.Duration
	// IdleTimeout closes keep-alive connections without a request for this long.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's header (HTTP/1 and HTTP/2).
	MaxHeaderBytes int
}

// MaxStreams is the most concurrent HTTP/2 requests on one connection (a scraper sends
// one at a time). It bounds the descriptors a connection can make a web-config server
// open: exporter-toolkit reads the web config file for every request.
const MaxStreams = 4

// Apply sets the bounds on srv, which serves l alone, and the hooks l needs: the
// connections' states for eviction, and the shutdown (l then closes the connections
// without a request, and idle closes are not timeouts).
func (s Settings) Apply(srv *http.Server, l *Listener) {
	srv.ReadHeaderTimeout = s.ReadHeaderTimeout
	srv.ReadTimeout = s.ReadTimeout
	srv.WriteTimeout = s.WriteTimeout
	srv.IdleTimeout = s.IdleTimeout
	srv.MaxHeaderBytes = s.MaxHeaderBytes
	srv.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: MaxStreams}
	prev := srv.ConnState
	srv.ConnState = func(c net.Conn, st http.ConnState) {
		trackState(c, st)
		if prev != nil {
			prev(c, st)
		}
	}
	srv.RegisterOnShutdown(l.shutdown)
}

// Descriptors returns the soft RLIMIT_NOFILE, the most descriptors the process may have
// open (the Go runtime raises it to the hard limit at start), and how many are open now.
func Descriptors() (limit, open int, err error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, 0, fmt.Errorf("read RLIMIT_NOFILE: %w", err)
	}
	limit = math.MaxInt32
	if rl.Cur < uint64(limit) {
		limit = int(rl.Cur)
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0, 0, fmt.Errorf("count open descriptors: %w", err)
	}
	return limit, len(fds) - 1, nil // less the directory's own
}

// PerConnection is the descriptors one connection can hold at once: its socket, plus,
// under an exporter-toolkit web config, the file read at each TLS handshake and request
// (up to MaxStreams requests at once over HTTP/2).
func PerConnection(webConfig bool) int {
	if webConfig {
		return 1 + MaxStreams
	}
	return 1
}
