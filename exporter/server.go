package exporter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"
)

// DefaultListenAddress is the port assigned to cupti-exporter.
const DefaultListenAddress = ":9477"

// shutdownTimeout bounds how long Run waits for requests in flight when its
// context ends.
const shutdownTimeout = 5 * time.Second

// ServerConfig configures a Server.
type ServerConfig struct {
	// ListenAddresses are the TCP addresses to listen on; [DefaultListenAddress] when empty.
	ListenAddresses []string
	// WebConfigFile is an exporter-toolkit web config (TLS, basic auth) applied to every route; "" for plain HTTP.
	WebConfigFile string
	// TelemetryPath is where metrics are served; /metrics when empty.
	TelemetryPath string
	// SystemdSocket serves on the sockets systemd passes instead of ListenAddresses.
	SystemdSocket bool
	// MaxRequests limits concurrent scrapes (0: no limit); more get 503.
	MaxRequests int

	// Registry is gathered on the telemetry path (normally Exporter.Registry()).
	// The handler's own promhttp_metric_handler_* metrics are registered in it.
	Registry *prometheus.Registry
	// Status tells /readyz whether sources produce (normally the Exporter).
	Status StatusReporter
}

// Server serves metrics, health and readiness, a landing page and extra
// handlers. Every route goes through exporter-toolkit's web package, so the
// web config's TLS and basic auth apply to all of them.
type Server struct {
	logger *slog.Logger
	cfg    ServerConfig
	mux    *http.ServeMux

	mu      sync.Mutex
	addrs   []net.Addr
	started chan struct{} // closed once listening
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
	s := &Server{logger: logger, cfg: cfg, mux: http.NewServeMux(), started: make(chan struct{})}
	s.routes()
	return s
}

func (s *Server) routes() {
	metrics := promhttp.HandlerFor(s.cfg.Registry, promhttp.HandlerOpts{
		ErrorLog:            slog.NewLogLogger(s.logger.Handler(), slog.LevelError),
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: s.cfg.MaxRequests,
		EnableOpenMetrics:   true,
		Registry:            s.cfg.Registry,
	})
	s.mux.Handle(s.cfg.TelemetryPath, promhttp.InstrumentMetricHandler(s.cfg.Registry, metrics))
	s.mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	s.mux.HandleFunc("/readyz", s.readyz)
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

// readyz answers 200 when at least one source is ready and 503 otherwise;
// the body has one line per source and device.
func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	var statuses []Status
	if s.cfg.Status != nil {
		statuses = s.cfg.Status.Status()
	}
	var body strings.Builder
	ready := false
	for _, st := range statuses {
		ready = ready || st.Ready
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
	if !ready {
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
	if s.cfg.SystemdSocket {
		srv := s.newHTTPServer()
		close(s.started)
		return s.serveUntil(ctx, []*http.Server{srv}, func(int) error { return web.ListenAndServe(srv, flags, s.logger) })
	}

	listeners := make([]net.Listener, 0, len(s.cfg.ListenAddresses))
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	for _, addr := range s.cfg.ListenAddresses {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return listenError(addr, err)
		}
		listeners = append(listeners, l)
	}
	// One http.Server per listener: web.Serve wraps the server's handler, so
	// sharing one between listeners would race.
	servers := make([]*http.Server, len(listeners))
	addrs := make([]net.Addr, len(listeners))
	for i, l := range listeners {
		servers[i] = s.newHTTPServer()
		addrs[i] = l.Addr()
	}
	s.mu.Lock()
	s.addrs = addrs
	s.mu.Unlock()
	close(s.started)
	return s.serveUntil(ctx, servers, func(i int) error { return web.Serve(listeners[i], servers[i], flags, s.logger) })
}

func (s *Server) newHTTPServer() *http.Server {
	return &http.Server{
		Handler:           s.mux,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.logger.Handler(), slog.LevelWarn),
	}
}

// serveUntil runs serve(i) for every server until ctx ends or one fails.
func (s *Server) serveUntil(ctx context.Context, servers []*http.Server, serve func(i int) error) error {
	errc := make(chan error, len(servers))
	for i := range servers {
		go func() { errc <- serve(i) }()
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

// listenError explains a failed listen, with the remedy for a port in use.
func listenError(addr string, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("listen on %s: address already in use: another process holds the port; choose another with --web.listen-address", addr)
	}
	return fmt.Errorf("listen on %s: %w", addr, err)
}
