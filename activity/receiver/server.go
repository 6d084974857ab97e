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
	"sync/atomic"
	"time"

	"github.com/cupti-exporter/cupti-exporter/activity"
)

// Defaults of the server's options.
const (
	DefaultSocketMode                fs.FileMode = 0o660
	DefaultMaxConnections                        = 256
	DefaultHelloTimeout                          = 10 * time.Second
	DefaultIdleTimeout                           = 5 * time.Minute
	DefaultMaxConnectionsPerIdentity             = 32
	dirMode                          fs.FileMode = 0o750
)

// Option configures a Server.
type Option func(*config)

type config struct {
	mode         fs.FileMode
	gid          int
	maxConns     int
	helloTimeout time.Duration
	idleTimeout  time.Duration
	budget       *activity.Budget
	procRoot     string
	maxPerID     int
	checkEvery   time.Duration
	noPidfd      bool // tests: take identity as on kernels without SO_PEERPIDFD
}

// withoutPeerPidfd makes the server take identity as it does on kernels without
// SO_PEERPIDFD (before Linux 6.5): /proc read right after the accept, start time to the tick.
func withoutPeerPidfd() Option {
	return func(c *config) { c.noPidfd = true }
}

// WithMaxConnectionsPerIdentity bounds the connections of one verified identity (the
// processes of one container: one cgroup, as the kernel names it), so that one workload
// cannot hold every slot; its next one is refused (reason="identity_limit"). Default 32; a
// non-positive value keeps the default.
func WithMaxConnectionsPerIdentity(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.maxPerID = n
		}
	}
}

// DefaultProcRoot is where the server reads the /proc entries of its peers.
const DefaultProcRoot = "/proc"

// WithProcRoot sets where the /proc entries of connecting processes are read (default
// /proc; tests use a fake tree). It must be a procfs of the PID namespace the exporter
// runs in, since the kernel gives peer PIDs in that namespace.
func WithProcRoot(dir string) Option {
	return func(c *config) {
		if dir != "" {
			c.procRoot = dir
		}
	}
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

// WithHelloTimeout closes connections that have not sent their hello within d, counted as
// cupti_activity_dropped_connections_total{reason="hello_timeout"}. Default 10 s; a
// non-positive value keeps the default.
func WithHelloTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.helloTimeout = d
		}
	}
}

// WithIdleTimeout sets how long a connection must have been silent before it may be closed
// to make room for a new one when the server is full (reason="evicted_idle"). Idle
// connections are not closed otherwise: the injection library sends nothing while its
// process launches no kernels, and the frame it writes into a closed connection is lost.
// Default five minutes; a non-positive value keeps the default.
func WithIdleTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.idleTimeout = d
		}
	}
}

// WithBudget charges every connection's memory (a fixed share for its goroutine and read
// buffer, its hello, its frame buffers and its kernel-name table) to b. A connection that
// does not fit is refused, or closed when a frame would pass the budget or its share of it
// (a 16th of the budget, at least 4 MiB), and counted (reason="memory_budget"); what it held
// is released when it ends. Default: no budget.
func WithBudget(b *activity.Budget) Option {
	return func(c *config) { c.budget = b }
}

// Server accepts activity connections on a Unix socket. Serve and Close may be called
// from different goroutines; Close is idempotent.
type Server struct {
	path string
	agg  *activity.Aggregator
	log  *slog.Logger
	cfg  config
	ln   atomic.Pointer[net.UnixListener]
	file atomic.Pointer[socketFile] // the socket file it listens on, and whether it is missing

	pidfd      peerPidfd     // whether the kernel has SO_PEERPIDFD
	ident      identifier    // reads the /proc entries of peers
	handshakes chan struct{} // a slot per connection being registered or refused (maxHandshakes)

	mu      sync.Mutex
	conns   map[net.Conn]*connState
	ids     map[string]*identityState // verified identities with connections, by key
	claimed int                       // connections the kernel could not name: one group for fair shares
	closed  bool
	wg      sync.WaitGroup

	warn    limitedLog // refusals and drops, at most a line a second per reason
	drainMu sync.Mutex
	drain   []byte // the buffer for refused connections' unread bytes, under drainMu
}

// maxHandshakes bounds the connections being registered or refused at once (each holds its
// socket and a goroutine); past it the accept loop waits, and connections wait in the kernel's
// backlog, holding no descriptor of the exporter.
const maxHandshakes = 64

// connState is what the server knows of one connection, for its eviction policy.
type connState struct {
	c       net.Conn
	peer    peer           // who the kernel says connected
	id      *identityState // its verified identity; nil when the kernel could not name it
	charged atomic.Int64   // bytes of the budget it holds beyond connBaseBytes
	opened  time.Time
	hello   atomic.Bool
	last    atomic.Int64           // Unix ns of the last frame (or the accept)
	evicted atomic.Pointer[string] // the reason it was closed to make room, if it was
	// counted: its end is counted (a drop) or needs no count (its goodbye); see drop.
	counted atomic.Bool
}

// identityState is what the connections of one verified identity hold together.
type identityState struct {
	key   string
	conns int          // under Server.mu
	bytes atomic.Int64 // of the budget, beyond connBaseBytes
}

// identityKey groups connections for their limits: the processes of one container share a
// cgroup. A peer the kernel could not name has none: it is only claimed.
func identityKey(pe peer) string {
	if pe.err != nil {
		return ""
	}
	return pe.proc.cgroup
}

// NewServer creates the socket's directory (mode 0750) if missing, removes a stale socket
// left by a previous run and listens on path. It fails when another server answers on
// path or path is not a socket.
func NewServer(path string, agg *activity.Aggregator, logger *slog.Logger, opts ...Option) (*Server, error) {
	cfg := config{mode: DefaultSocketMode, gid: -1, maxConns: DefaultMaxConnections,
		helloTimeout: DefaultHelloTimeout, idleTimeout: DefaultIdleTimeout, procRoot: DefaultProcRoot,
		maxPerID: DefaultMaxConnectionsPerIdentity, checkEvery: DefaultSocketCheck}
	for _, o := range opts {
		o(&cfg)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := removeStale(path); err != nil {
		return nil, err
	}
	ln, file, err := listen(path, cfg)
	if err != nil {
		return nil, err
	}
	log := logger.With("source", "activity")
	s := &Server{
		path: path, agg: agg, cfg: cfg, log: log,
		conns: make(map[net.Conn]*connState),
		ids:   make(map[string]*identityState),
		warn:  limitedLog{log: log, every: time.Second},

		handshakes: make(chan struct{}, maxHandshakes),
	}
	s.pidfd.off.Store(cfg.noPidfd)
	s.ident.root = cfg.procRoot
	s.ln.Store(ln)
	s.file.Store(file)
	return s, nil
}

// listen creates the socket's directory (mode 0750) if missing and listens on path, with the
// socket file's mode and group.
func listen(path string, cfg config) (*net.UnixListener, *socketFile, error) {
	dir := filepath.Dir(path)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, dirMode); err != nil {
			return nil, nil, fmt.Errorf("creating activity socket directory: %w", err)
		}
		if err := os.Chmod(dir, dirMode); err != nil { // MkdirAll is subject to the umask
			return nil, nil, fmt.Errorf("setting activity socket directory mode: %w", err)
		}
		if cfg.gid >= 0 {
			if err := os.Chown(dir, -1, cfg.gid); err != nil {
				return nil, nil, fmt.Errorf("setting activity socket directory group: %w", err)
			}
		}
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, nil, fmt.Errorf("listening on activity socket: %w", err)
	}
	if err := os.Chmod(path, cfg.mode); err != nil {
		ln.Close()
		return nil, nil, fmt.Errorf("setting activity socket mode: %w", err)
	}
	if cfg.gid >= 0 {
		if err := os.Chown(path, -1, cfg.gid); err != nil {
			ln.Close()
			return nil, nil, fmt.Errorf("setting activity socket group (is the exporter a member of group %d?): %w", cfg.gid, err)
		}
	}
	fi, err := os.Lstat(path)
	if err != nil {
		ln.Close()
		return nil, nil, fmt.Errorf("checking activity socket: %w", err)
	}
	return ln, &socketFile{info: fi}, nil
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
	go s.watchSocket(ctx)
	var backoff time.Duration
	for {
		ln := s.ln.Load()
		c, err := ln.Accept()
		if err != nil {
			if s.isClosed() {
				s.wg.Wait()
				return nil
			}
			if s.ln.Load() != ln { // the socket was re-created: accept on the new one
				continue
			}
			// Out of file descriptors and the like: wait and retry, as net/http does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.log.Warn("accepting activity connection failed; retrying", "err", err, "retry_in", backoff)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		// Who connected is taken first, before anything else: the kernel's credentials and,
		// where it has SO_PEERPIDFD, a pidfd that pins the process, then its /proc entry
		// (identity.go). Registering, refusing and serving happen on the connection's own
		// goroutine, so that the backlog drains at the pace of identification alone: a
		// short-lived process must still be alive when its turn comes.
		opened := time.Now()
		pe := s.ident.identify(takeCreds(c, &s.pidfd))
		s.handshakes <- struct{}{}
		s.wg.Add(1)
		go s.handle(c, pe, opened)
	}
}

// handle registers a new connection or refuses it, and serves it.
func (s *Server) handle(c net.Conn, pe peer, opened time.Time) {
	defer s.wg.Done()
	cs := s.track(c, pe, opened)
	<-s.handshakes
	if cs == nil {
		return
	}
	s.agg.ConnectionAccepted()
	s.serveConn(cs)
}

// track registers c, or refuses it (closing it) when the server is closed, or full with no
// connection to evict, or out of memory budget. When full, it makes room (evictLocked), so
// that neither silent clients nor a few containers can lock real senders out. The refusal
// (draining what the sender wrote) happens outside s.mu.
func (s *Server) track(c net.Conn, pe peer, opened time.Time) *connState {
	cs, refusal := s.register(c, pe, opened)
	switch refusal {
	case "":
	case "closed":
		c.Close()
	case "identity_limit":
		s.refuse(c, refusal)
		s.warn.Warn(refusal, "activity connection refused: its container holds too many connections",
			"max", s.cfg.maxPerID, "pid", pe.pid)
	case "limit":
		s.refuse(c, refusal)
		s.warn.Warn(refusal, "activity connection refused: too many connections, none to replace", "max", s.cfg.maxConns)
	case "memory_budget":
		s.refuse(c, refusal)
		s.warn.Warn(refusal, "activity connection refused: receiver memory budget reached", "budget_bytes", s.cfg.budget.Limit())
	}
	return cs
}

// register adds c to the server's tables, or says why not.
func (s *Server) register(c net.Conn, pe peer, opened time.Time) (*connState, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, "closed"
	}
	key := identityKey(pe)
	id := s.ids[key]
	if key != "" && id != nil && id.conns >= s.cfg.maxPerID && !s.evictOwnLocked(id) {
		return nil, "identity_limit"
	}
	if len(s.conns) >= s.cfg.maxConns && !s.evictLocked(key) {
		return nil, "limit"
	}
	if !s.cfg.budget.Reserve(connBaseBytes) {
		s.evictLocked(key) // frees room for the sender's next try, if a connection can go
		return nil, "memory_budget"
	}
	cs := &connState{c: c, peer: pe, opened: opened}
	if key != "" {
		if id == nil {
			id = &identityState{key: key}
			s.ids[key] = id
		}
		id.conns++
		cs.id = id
	} else {
		s.claimed++
	}
	cs.last.Store(opened.UnixNano())
	s.conns[c] = cs
	return cs, ""
}

// evictLocked closes one connection to make room for a newcomer of identity key ("" when
// the kernel could not name it); s.mu is held. In order:
//   - the oldest connection without hello (evicted_no_hello: a real sender says hello as soon
//     as it connects);
//   - for a verified newcomer, the claimed connection (one the kernel could not name) that
//     holds the most memory, the oldest of equals (evicted_claimed);
//   - the connection silent longest of the identity holding the most connections, when it
//     holds at least two more than the newcomer's (evicted_fair_share): a few containers
//     cannot keep a newcomer out, and equals do not take slots from each other in turn (the
//     claimed connections count as one identity);
//   - the one silent longest, if silent for the idle timeout (evicted_idle).
func (s *Server) evictLocked(key string) bool {
	verified := key != ""
	var noHello, claimed, idle *connState
	for _, cs := range s.conns {
		if cs.evicted.Load() != nil {
			continue
		}
		switch {
		case !cs.hello.Load():
			if noHello == nil || cs.opened.Before(noHello.opened) {
				noHello = cs
			}
		case verified && cs.id == nil:
			if claimed == nil || heavier(cs, claimed) {
				claimed = cs
			}
		}
		if cs.hello.Load() && (idle == nil || cs.last.Load() < idle.last.Load()) {
			idle = cs
		}
	}
	victim, reason := noHello, "evicted_no_hello"
	switch {
	case victim != nil:
	case claimed != nil:
		victim, reason = claimed, "evicted_claimed"
	default:
		if v := s.fairShareVictimLocked(key); v != nil {
			victim, reason = v, "evicted_fair_share"
		} else if idle != nil && time.Since(time.Unix(0, idle.last.Load())) >= s.cfg.idleTimeout {
			victim, reason = idle, "evicted_idle"
		} else {
			return false
		}
	}
	s.evictConnLocked(victim, reason)
	return true
}

// evictConnLocked closes cs to make room, counted as reason here, where it happens: its
// goroutine may end without an error to count it by (a goodbye it had already read) and
// releases its memory when it ends. s.mu is held.
func (s *Server) evictConnLocked(cs *connState, reason string) {
	cs.evicted.Store(&reason)
	s.drop(cs, reason)
	s.forgetLocked(cs)
	cs.c.Close()
}

// drop counts the end of cs as reason, unless its end was counted already: each connection is
// counted once, whichever of its own goroutine and an eviction comes first. cs is nil in
// benchmarks.
func (s *Server) drop(cs *connState, reason string) {
	if cs == nil || cs.counted.CompareAndSwap(false, true) {
		s.agg.ConnectionDropped(reason)
	}
}

// fairShareVictimLocked returns the connection silent longest of the identity holding the
// most connections, if that identity holds at least two more than the newcomer's (key); nil
// otherwise. s.mu is held.
func (s *Server) fairShareVictimLocked(key string) *connState {
	own := s.claimed
	if key != "" {
		own = 0
		if id := s.ids[key]; id != nil {
			own = id.conns
		}
	}
	var hog *identityState // nil with most > 0: the claimed group
	most := 0
	if key != "" {
		most = s.claimed
	}
	for k, id := range s.ids {
		if k != key && (id.conns > most || id.conns == most && hog != nil && id.bytes.Load() > hog.bytes.Load()) {
			hog, most = id, id.conns
		}
	}
	if most < own+2 {
		return nil
	}
	var victim *connState
	for _, cs := range s.conns {
		if cs.id == hog && cs.evicted.Load() == nil && (victim == nil || cs.last.Load() < victim.last.Load()) {
			victim = cs
		}
	}
	return victim
}

// evictOwnLocked closes the oldest connection of identity id that has not said hello, to
// make room for its newcomer; s.mu is held.
func (s *Server) evictOwnLocked(id *identityState) bool {
	var victim *connState
	for _, cs := range s.conns {
		if cs.id == id && cs.evicted.Load() == nil && !cs.hello.Load() && (victim == nil || cs.opened.Before(victim.opened)) {
			victim = cs
		}
	}
	if victim == nil {
		return false
	}
	s.evictConnLocked(victim, "evicted_no_hello")
	return true
}

// heavier orders claimed connections for eviction: the most memory first, then the oldest.
func heavier(a, b *connState) bool {
	if x, y := a.charged.Load(), b.charged.Load(); x != y {
		return x > y
	}
	return a.opened.Before(b.opened)
}

// forgetLocked removes cs from the server's tables; s.mu is held.
func (s *Server) forgetLocked(cs *connState) {
	if s.conns[cs.c] != cs {
		return
	}
	delete(s.conns, cs.c)
	if id := cs.id; id != nil {
		if id.conns--; id.conns <= 0 {
			delete(s.ids, id.key)
		}
	} else {
		s.claimed--
	}
}

func (s *Server) untrack(cs *connState) {
	s.mu.Lock()
	s.forgetLocked(cs)
	s.mu.Unlock()
	cs.c.Close()
	s.cfg.budget.Release(connBaseBytes)
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
	err := s.ln.Load().Close() // removes the socket file
	for _, c := range conns {
		c.Close()
	}
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("closing activity socket: %w", err)
	}
	return nil
}
