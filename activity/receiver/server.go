package receiver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity"
)

// Defaults of the server's options.
const (
	DefaultSocketMode     fs.FileMode = 0o660
	DefaultMaxConnections             = 256
	dirMode               fs.FileMode = 0o750
)

// Option configures a Server.
type Option func(*config)

type config struct {
	mode     fs.FileMode
	gid      int
	maxConns int
}

// WithSocketMode sets the permission bits of the socket file. Default 0660; zero keeps
// the default.
func WithSocketMode(m fs.FileMode) Option {
	return func(c *config) {
		if m != 0 {
			c.mode = m.Perm()
		}
	}
}

// WithSocketGroup gives the socket file (and a directory the server creates) to group gid,
// so that workloads running with that group can connect. Default: the process's group.
func WithSocketGroup(gid int) Option {
	return func(c *config) { c.gid = gid }
}

// WithMaxConnections bounds the number of concurrent connections; further ones are
// refused and counted. Default 256; a non-positive value keeps the default.
func WithMaxConnections(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.maxConns = n
		}
	}
}

// Server accepts activity connections on a Unix socket. Serve and Close may be called
// from different goroutines; Close is idempotent.
type Server struct {
	path string
	agg  *activity.Aggregator
	log  *slog.Logger
	cfg  config
	ln   *net.UnixListener

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// NewServer creates the socket's directory (mode 0750) if missing, removes a stale socket
// left by a previous run and listens on path. It fails when another server answers on
// path or path is not a socket.
func NewServer(path string, agg *activity.Aggregator, logger *slog.Logger, opts ...Option) (*Server, error) {
	cfg := config{mode: DefaultSocketMode, gid: -1, maxConns: DefaultMaxConnections}
	for _, o := range opts {
		o(&cfg)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	dir := filepath.Dir(path)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, dirMode); err != nil {
			return nil, fmt.Errorf("creating activity socket directory: %w", err)
		}
		if err := os.Chmod(dir, dirMode); err != nil { // MkdirAll is subject to the umask
			return nil, fmt.Errorf("setting activity socket directory mode: %w", err)
		}
		if cfg.gid >= 0 {
			if err := os.Chown(dir, -1, cfg.gid); err != nil {
				return nil, fmt.Errorf("setting activity socket directory group: %w", err)
			}
		}
	}
	if err := removeStale(path); err != nil {
		return nil, err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listening on activity socket: %w", err)
	}
	if err := os.Chmod(path, cfg.mode); err != nil {
		ln.Close()
		return nil, fmt.Errorf("setting activity socket mode: %w", err)
	}
	if cfg.gid >= 0 {
		if err := os.Chown(path, -1, cfg.gid); err != nil {
			ln.Close()
			return nil, fmt.Errorf("setting activity socket group (is the exporter a member of group %d?): %w", cfg.gid, err)
		}
	}
	return &Server{
		path: path, agg: agg, cfg: cfg, ln: ln,
		log:   logger.With("source", "activity"),
		conns: make(map[net.Conn]struct{}),
	}, nil
}

// removeStale removes a socket at path that nobody listens on.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("checking activity socket path: %w", err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("activity socket path %s exists and is not a socket: remove it or choose another path", path)
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("activity socket %s is in use by another process: stop it or choose another path", path)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("removing stale activity socket: %w", err)
	}
	return nil
}

// Path returns the socket path.
func (s *Server) Path() string { return s.path }

// Serve accepts connections until ctx is done or Close is called, then closes every
// connection and waits for their goroutines. Accept errors are logged and retried with
// backoff. It returns nil once closed.
func (s *Server) Serve(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { s.Close() })
	defer stop()
	var backoff time.Duration
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if s.isClosed() {
				s.wg.Wait()
				return nil
			}
			// Out of file descriptors and the like: wait and retry, as net/http does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.log.Warn("accepting activity connection failed; retrying", "err", err, "retry_in", backoff)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		if !s.track(c) {
			continue
		}
		s.agg.ConnectionAccepted()
		go s.serveConn(c)
	}
}

// track registers c, or refuses it (closing it) when the server is closed or full.
func (s *Server) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		c.Close()
		return false
	}
	if len(s.conns) >= s.cfg.maxConns {
		c.Close()
		s.agg.ConnectionDropped("limit")
		s.log.Warn("activity connection refused: too many connections", "max", s.cfg.maxConns)
		return false
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	return true
}

func (s *Server) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	c.Close()
	s.wg.Done()
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Close stops accepting, closes every connection (unblocking their reads) and removes the
// socket file. Serve returns once the connection goroutines are done.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	conns := make([]net.Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	err := s.ln.Close() // removes the socket file
	for _, c := range conns {
		c.Close()
	}
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("closing activity socket: %w", err)
	}
	return nil
}
