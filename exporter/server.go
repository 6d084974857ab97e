package exporter

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/activation"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"

	"github.com/cupti-exporter/cupti-exporter/internal/httplimit"
)

// DefaultListenAddress is the port assigned to cupti-exporter.
const DefaultListenAddress = ":9477"

// DefaultHealthListenAddress is the plain-HTTP address of /healthz and /readyz
// beside the main listener, for probes that cannot pass TLS client checks or
// basic auth (kubelet).
const DefaultHealthListenAddress = ":9478"

// shutdownTimeout bounds how long Run waits for requests in flight when its
// context ends.
const shutdownTimeout = 5 * time.Second

// Connection bounds of the listeners (docs/security.md, "HTTP listeners").
const (
	// DefaultMaxConnections is the most connections a main listener holds at once. One
	// connection holds 20-50 KB (buffers, goroutine, TLS state): 512 hold at most 25 MB.
	DefaultMaxConnections = 512
	// HealthMaxConnections is the most connections the health listener holds: kubelet
	// opens one per probe and closes it.
	HealthMaxConnections = 32
	// DefaultIdleTimeout closes keep-alive connections idle this long; longer than the
	// usual scrape intervals (15 s to 1 min), so that Prometheus reuses its connection.
	DefaultIdleTimeout = 2 * time.Minute
	// DefaultWriteTimeout bounds a request from the end of its header to the last byte of
	// its response: the wait for a render, the render and the transfer of a big exposition
	// to a slow client over TLS; as long as the longest usual scrape timeout.
	DefaultWriteTimeout = 2 * time.Minute
	// readHeaderTimeout bounds a TLS handshake and a request header (slow headers).
	readHeaderTimeout = 10 * time.Second
	// readTimeout bounds a whole request, header and body (the pause API's is a few bytes).
	readTimeout = 30 * time.Second
	// maxHeaderBytes bounds a request header: Prometheus sends a few hundred bytes; a
	// bearer token or basic auth fits many times over.
	maxHeaderBytes = 16 << 10
)

// ServerConfig configures a Server.
type ServerConfig struct {
	// ListenAddresses are the TCP addresses to listen on; [DefaultListenAddress] when empty.
	ListenAddresses []string
	// WebConfigFile is an exporter-toolkit web config (TLS, basic auth) applied to every route; "" for plain HTTP.
	WebConfigFile string
	// HealthListenAddress, when not empty, is a second TCP address serving only
	// /healthz and /readyz, in plain HTTP and without the web config: liveness and
	// readiness probes keep working when the main listener requires TLS client
	// certificates or basic auth. They reveal only "ok" and the sources' states.
	// The main listener serves both paths too, under the web config.
	HealthListenAddress string
	// TelemetryPath is where metrics are served; /metrics when empty.
	TelemetryPath string
	// SystemdSocket serves on the sockets systemd passes instead of ListenAddresses.
	SystemdSocket bool
	// MaxRequests limits concurrent scrapes (0: no limit); more get 503.
	MaxRequests int
	// MaxConnections is the most connections each main listener holds at once (past it a
	// newcomer replaces the connection waiting longest without a request);
	// DefaultMaxConnections when 0.
	MaxConnections int
	// IdleTimeout closes keep-alive connections idle this long; DefaultIdleTimeout when 0.
	IdleTimeout time.Duration
	// WriteTimeout bounds a request from its header to the end of its response;
	// DefaultWriteTimeout when 0.
	WriteTimeout time.Duration

	// Registry is gathered on the telemetry path (normally Exporter.Registry()).
	// The handler's own promhttp_metric_handler_* metrics are registered in it.
	Registry *prometheus.Registry
	// Status tells /readyz whether sources produce (normally the Exporter).
	Status StatusReporter
}

// Server serves metrics, health and readiness, a landing page and extra
// handlers. Every route of the main listener goes through exporter-toolkit's web
// package, so the web config's TLS and basic auth apply to all of them; the
// optional health listener serves /healthz and /readyz alone, in plain HTTP.
type Server struct {
	logger  *slog.Logger
	cfg     ServerConfig
	mux     *http.ServeMux
	health  *http.ServeMux
	conns   *httplimit.Metrics
	refused *refusals
	self    *prometheus.Registry // the server's self-metrics, for the OTLP outlet

	mu         sync.Mutex
	addrs      []net.Addr
	healthAddr net.Addr
	started    chan struct{} // closed once listening
}

// NewServer returns a Server for cfg; it listens when Run is called.
func NewServer(logger *slog.Logger, cfg ServerConfig) *Server {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if len(cfg.ListenAddresses) == 0 {
		cfg.ListenAddresses = []string{DefaultListenAddress}
	}
	if cfg.TelemetryPath == "" {
		cfg.TelemetryPath = "/metrics"
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	if cfg.MaxConnections <= 0 {
		cfg.MaxConnections = DefaultMaxConnections
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	s := &Server{logger: logger, cfg: cfg, mux: http.NewServeMux(), health: http.NewServeMux(),
		conns: httplimit.NewMetrics(selfNamespace), refused: newRefusals(), self: prometheus.NewRegistry(), started: make(chan struct{})}
	own := serverCollector{s}
	if err := cfg.Registry.Register(own); err != nil { // a second Server on one registry
		logger.Warn("HTTP server self-metrics not registered", "err", err)
	}
	s.self.MustRegister(own)
	s.routes()
	return s
}

// SelfMetrics gathers the server's own metrics (connections by listener, refused scrapes),
// which it also registers in ServerConfig.Registry, for the OTLP outlet (OTLPConfig.SelfMetrics).
func (s *Server) SelfMetrics() prometheus.Gatherer { return s.self }

// serverCollector emits cupti_exporter_http_connections*, and
// cupti_exporter_scrapes_refused_total.
type serverCollector struct{ s *Server }

func (c serverCollector) Describe(ch chan<- *prometheus.Desc) {
	c.s.conns.Describe(ch)
	ch <- scrapesRefusedDesc
}

func (c serverCollector) Collect(ch chan<- prometheus.Metric) {
	c.s.conns.Collect(ch)
	c.s.refused.collect(ch)
}

func (s *Server) routes() {
	metrics := promhttp.HandlerFor(coalesce(s.cfg.Registry), promhttp.HandlerOpts{
		ErrorLog:            slog.NewLogLogger(s.logger.Handler(), slog.LevelError),
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: s.cfg.MaxRequests,
		EnableOpenMetrics:   true,
		AcceptedFormats:     acceptedFormats,
		OfferedCompressions: offeredCompressions,
		Registry:            s.cfg.Registry,
	})
	s.mux.Handle(s.cfg.TelemetryPath, promhttp.InstrumentMetricHandler(s.cfg.Registry, coalesceRequests(metrics, s.cfg.MaxRequests, s.refused)))
	for _, mux := range []*http.ServeMux{s.mux, s.health} {
		mux.HandleFunc("/healthz", healthz)
		mux.HandleFunc("/readyz", s.readyz)
	}
	if s.cfg.TelemetryPath != "/" {
		landing, err := web.NewLandingPage(web.LandingConfig{
			Name:        "CUPTI Exporter",
			Description: "Prometheus and OTLP exporter for NVIDIA CUPTI GPU metrics",
			Version:     version.Info(),
			Profiling:   "false",
			Links: []web.LandingLinks{
				{Address: s.cfg.TelemetryPath, Text: "Metrics"},
				{Address: "/healthz", Text: "Health"},
				{Address: "/readyz", Text: "Readiness", Description: "200 when at least one source produces data"},
			},
		})
		if err != nil {
			// The configuration is fixed, so this is a programming error.
			panic(fmt.Sprintf("build landing page: %v", err))
		}
		s.mux.Handle("/{$}", landing)
	}
}

// healthz answers 200 "ok" while the process serves.
func healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintln(w, "ok")
}

// readyz answers 200 when at least one source is ready and every required part is, and 503
// otherwise; the body has one line per source and device.
func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	var statuses []Status
	if s.cfg.Status != nil {
		statuses = s.cfg.Status.Status()
	}
	var body strings.Builder
	ready, blocked := false, false
	for _, st := range statuses {
		if st.Required {
			blocked = blocked || !st.Ready
		} else {
			ready = ready || st.Ready
		}
		fmt.Fprintf(&body, "source=%s device=%s ", st.Source, orDash(st.Device))
		if st.Ready && st.Reason != "" { // ready but degraded (e.g. a PM rate the host cannot sustain)
			fmt.Fprintf(&body, "ready: %s\n", st.Reason)
		} else if st.Ready {
			body.WriteString("ready\n")
		} else {
			fmt.Fprintf(&body, "not ready: %s\n", orDash(st.Reason))
		}
	}
	if len(statuses) == 0 {
		body.WriteString("no sources registered\n")
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if !ready || blocked {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	fmt.Fprint(w, body.String())
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Handle adds a handler for pattern (http.ServeMux syntax, e.g. "POST /pause").
// Call it before Run.
func (s *Server) Handle(pattern string, h http.Handler) {
	s.mux.Handle(pattern, h)
}

// Addrs returns the addresses the server listens on, once Run has bound them
// (nil before, and with systemd sockets).
func (s *Server) Addrs() []net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addrs
}

// HealthAddr returns the address of the health listener once Run has bound it
// (nil before, and when ServerConfig.HealthListenAddress is empty).
func (s *Server) HealthAddr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.healthAddr
}

// Run listens on every address and serves until ctx ends, then shuts down
// gracefully and returns nil. It returns an error when the web config is
// invalid, an address cannot be bound, or serving fails.
func (s *Server) Run(ctx context.Context) error {
	if s.cfg.WebConfigFile != "" {
		if err := web.Validate(s.cfg.WebConfigFile); err != nil {
			return fmt.Errorf("load web config %s: %w", s.cfg.WebConfigFile, err)
		}
	}
	flags := &web.FlagConfig{
		WebListenAddresses: &s.cfg.ListenAddresses,
		WebSystemdSocket:   &s.cfg.SystemdSocket,
		WebConfigFile:      &s.cfg.WebConfigFile,
	}

	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	var servers []*http.Server
	var serve []func() error
	// add serves h on l under the listener's bounds, through the web config (TLS, basic
	// auth) when webConfig.
	add := func(l net.Listener, name string, maxConns int, h http.Handler, webConfig bool) {
		ll := httplimit.NewListener(l, name, maxConns, s.conns)
		listeners = append(listeners, ll)
		srv := s.newHTTPServer(h, ll)
		servers = append(servers, srv)
		if webConfig {
			serve = append(serve, func() error { return web.Serve(ll, srv, flags, s.logger) })
		} else {
			serve = append(serve, func() error { return srv.Serve(ll) })
		}
		s.logger.Info("HTTP listener limits", "listener", name, "address", l.Addr().String(), "max_connections", maxConns,
			"idle_timeout", s.cfg.IdleTimeout, "write_timeout", s.cfg.WriteTimeout, "read_timeout", readTimeout,
			"read_header_timeout", readHeaderTimeout, "max_header_bytes", maxHeaderBytes)
	}
	if addr := s.cfg.HealthListenAddress; addr != "" {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return listenError(addr, "--web.health-listen-address", err)
		}
		add(l, "health", HealthMaxConnections, s.health, false)
		s.mu.Lock()
		s.healthAddr = l.Addr()
		s.mu.Unlock()
		s.logger.Info("serving /healthz and /readyz without TLS or auth", "address", l.Addr().String())
	}

	if s.cfg.SystemdSocket {
		ls, err := activation.Listeners()
		if err != nil {
			return fmt.Errorf("systemd socket activation: %w", err)
		}
		if len(ls) == 0 {
			return errors.New("systemd socket activation: no sockets passed (--web.systemd-socket without a .socket unit?)")
		}
		for _, l := range ls {
			add(l, "web", s.cfg.MaxConnections, s.mux, true)
		}
		close(s.started)
		return s.serveUntil(ctx, servers, serve)
	}

	var addrs []net.Addr
	for _, addr := range s.cfg.ListenAddresses {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			if h := s.healthAddr; h != nil && errors.Is(err, syscall.EADDRINUSE) && samePort(addr, h) {
				return fmt.Errorf("listen on %s: address already in use by this exporter's own health listener (--web.health-listen-address %s): give one of them another port",
					addr, s.cfg.HealthListenAddress)
			}
			return listenError(addr, "--web.listen-address", err)
		}
		addrs = append(addrs, l.Addr())
		// One http.Server per listener: web.Serve wraps the server's handler, so
		// sharing one between listeners would race.
		add(l, "web", s.cfg.MaxConnections, s.mux, true)
	}
	s.mu.Lock()
	s.addrs = addrs
	s.mu.Unlock()
	close(s.started)
	return s.serveUntil(ctx, servers, serve)
}

// newHTTPServer is an http.Server for h on l, with the listener's bounds.
func (s *Server) newHTTPServer(h http.Handler, l *httplimit.Listener) *http.Server {
	srv := &http.Server{Handler: h, ErrorLog: serverLog(s.logger)}
	httplimit.Settings{
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      s.cfg.WriteTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
	}.Apply(srv, l)
	return srv
}

// serverLog is the http.Server error log: warnings, except the TLS handshake errors of
// clients that closed or were closed by a limit (counted in
// cupti_exporter_http_connections_closed_total), which a flood would repeat by the thousand.
func serverLog(logger *slog.Logger) *log.Logger {
	return log.New(serverLogWriter{logger}, "", 0)
}

type serverLogWriter struct{ logger *slog.Logger }

func (w serverLogWriter) Write(p []byte) (int, error) {
	msg := strings.TrimSuffix(string(p), "\n")
	level := slog.LevelWarn
	if strings.HasPrefix(msg, "http: TLS handshake error") {
		level = slog.LevelDebug
	}
	w.logger.Log(context.Background(), level, msg)
	return len(p), nil
}

// serveUntil runs serve[i] for every server until ctx ends or one fails.
func (s *Server) serveUntil(ctx context.Context, servers []*http.Server, serve []func() error) error {
	errc := make(chan error, len(servers))
	for _, f := range serve {
		go func() { errc <- f() }()
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		} else {
			err = fmt.Errorf("serve http: %w", err)
		}
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	for _, srv := range servers {
		if e := srv.Shutdown(sctx); e != nil {
			err = errors.Join(err, fmt.Errorf("shut down http server: %w", e))
		}
	}
	return err
}

// samePort reports whether addr asks for the port that bound holds.
func samePort(addr string, bound net.Addr) bool {
	_, port, err := net.SplitHostPort(addr)
	tcp, ok := bound.(*net.TCPAddr)
	return err == nil && ok && port == strconv.Itoa(tcp.Port)
}

// listenError explains a failed listen, with the remedy (the flag) for a port in use.
func listenError(addr, flag string, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("listen on %s: address already in use: another process holds the port; choose another with %s", addr, flag)
	}
	return fmt.Errorf("listen on %s: %w", addr, err)
}
