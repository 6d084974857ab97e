package exporter

import (
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/cupti-exporter/cupti-exporter/internal/settings"
)

// WebSettings is the exporter's web section (web.*): the HTTP listeners, with their YAML
// keys, flags and help.
type WebSettings struct {
	ListenAddress       string `yaml:"listen_address" help:"Address to serve /metrics, /healthz, /readyz and the pause/resume API on."`
	ConfigFile          string `yaml:"config_file" flag:"web.config.file" help:"exporter-toolkit web configuration file (TLS, basic auth)."`
	TelemetryPath       string `yaml:"telemetry_path" help:"Path under which to expose metrics (letters, digits and ._~-/; not /healthz, /readyz or under /api/v1/pm-sampling/)."`
	HealthListenAddress string `yaml:"health_listen_address" help:"Address to serve only /healthz and /readyz on, in plain HTTP without the web config (for kubelet probes when TLS or auth is on); without a host (:9478) it takes web.listen_address's host; empty: off."`
	EnablePMSamplingAPI bool   `yaml:"enable_pm_sampling_api" flag:"web.enable-pm-sampling-api" help:"Serve POST /api/v1/pm-sampling/pause and /resume on the listen address (under the web config); off: they answer 404."`
	MaxRequests         int    `yaml:"max_requests" help:"Most concurrent scrapes served (more get 503); concurrent scrapes share one collection. 0: no limit."`

	// Connection bounds of both listeners (docs/security.md, "HTTP listeners").
	MaxConnections int               `yaml:"max_connections" help:"Most connections the listen address holds at once; past it a newcomer replaces the connection waiting longest without a request, else is closed (docs/security.md). 0: 512, or fewer if the descriptor limit (RLIMIT_NOFILE) cannot hold them beside the activity socket's reserve; a value that does not fit is refused."`
	IdleTimeout    settings.Duration `yaml:"idle_timeout" help:"Close keep-alive HTTP connections without a request for this long (both listeners); keep it above the scrape interval."`
	WriteTimeout   settings.Duration `yaml:"write_timeout" help:"Longest time from a request's header to the end of its response (waiting for a render, rendering, and sending to a slow client); keep it above the scrape timeout."`
}

// DefaultWebSettings is the web section's default.
func DefaultWebSettings() WebSettings {
	return WebSettings{
		ListenAddress:       DefaultListenAddress,
		TelemetryPath:       "/metrics",
		HealthListenAddress: DefaultHealthListenAddress,
		MaxRequests:         40,
		IdleTimeout:         settings.Duration(DefaultIdleTimeout),
		WriteTimeout:        settings.Duration(DefaultWriteTimeout),
	}
}

// Validate checks the section's values.
func (c WebSettings) Validate() []error {
	var errs []error
	if c.MaxRequests < 0 {
		errs = append(errs, fmt.Errorf("web.max_requests must not be negative (0: no limit), got %d", c.MaxRequests))
	}
	if c.MaxConnections < 0 {
		errs = append(errs, fmt.Errorf("web.max_connections must not be negative (0: picked from the descriptor limit), got %d", c.MaxConnections))
	}
	for _, d := range []struct {
		name string
		d    settings.Duration
	}{{"web.idle_timeout", c.IdleTimeout}, {"web.write_timeout", c.WriteTimeout}} {
		if time.Duration(d.d) < time.Second || time.Duration(d.d) > time.Hour {
			errs = append(errs, fmt.Errorf("%s must be between %s and %s, got %s", d.name, time.Second, time.Hour, d.d))
		}
	}
	if err := c.checkListenAddresses(); err != nil {
		errs = append(errs, err)
	}
	if err := checkTelemetryPath(c.TelemetryPath); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// reservedPaths are served by the exporter itself; the telemetry path must not take them.
var reservedPaths = []string{"/healthz", "/readyz"}

// PauseAPIPath is the prefix of the PM sampling pause/resume API (the sampler's handler,
// served under PauseAPIPath + "/"): the telemetry path must stay out of it.
const PauseAPIPath = "/api/v1/pm-sampling"

// telemetryPathRE is what a telemetry path may be: a literal http.ServeMux path.
var telemetryPathRE = regexp.MustCompile(`^/[A-Za-z0-9._~/-]*$`)

// checkListenAddresses checks web.listen_address and web.health_listen_address (with
// the host it takes from the former) and that they do not ask for the same port.
func (c WebSettings) checkListenAddresses() error {
	mainHost, mainPort, err := checkListenAddress("web.listen_address", c.ListenAddress, DefaultListenAddress)
	if err != nil || c.HealthListenAddress == "" {
		return err
	}
	if _, _, err := checkListenAddress("web.health_listen_address", c.HealthListenAddress, DefaultHealthListenAddress); err != nil {
		return fmt.Errorf("%w, or empty to turn the health listener off", err)
	}
	healthHost, healthPort, _ := net.SplitHostPort(c.HealthAddress())
	if mainPort == healthPort && mainPort != "0" && hostsOverlap(mainHost, healthHost) {
		return fmt.Errorf("web.listen_address %q and web.health_listen_address %q (the plain /healthz and /readyz listener, default :9478) both take port %s: give --web.health-listen-address another port, or empty to turn it off",
			c.ListenAddress, c.HealthListenAddress, mainPort)
	}
	return nil
}

// checkListenAddress accepts host:port with a port number; an empty host means every
// interface. It returns the host and port; example is a valid value for key.
func checkListenAddress(key, addr, example string) (host, port string, err error) {
	if addr == "" {
		return "", "", fmt.Errorf("%s is empty: give host:port, e.g. %s (every interface) or 127.0.0.1%s", key, example, example)
	}
	host, port, err = net.SplitHostPort(addr)
	if err != nil {
		return "", "", fmt.Errorf("%s %q: want host:port, e.g. %s or 127.0.0.1%s", key, addr, example, example)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || (n == 0 && port != "0") {
		return "", "", fmt.Errorf("%s %q: port must be a number from 0 to 65535", key, addr)
	}
	return host, port, nil
}

// HealthAddress is web.health_listen_address, where an address without a host
// (the default :9478) takes web.listen_address's host: with the main listener on
// loopback, the health listener is too. Give a host (0.0.0.0:9478, [::]:9478) to
// listen elsewhere.
func (c WebSettings) HealthAddress() string {
	h := c.HealthListenAddress
	host, port, err := net.SplitHostPort(h)
	if err != nil || host != "" {
		return h
	}
	mainHost, _, err := net.SplitHostPort(c.ListenAddress)
	if err != nil {
		return h
	}
	return net.JoinHostPort(mainHost, port)
}

// hostsOverlap reports whether listeners on hosts a and b would share addresses:
// the same host, or either one every interface.
func hostsOverlap(a, b string) bool {
	every := func(h string) bool { return h == "" || h == "0.0.0.0" || h == "::" }
	return a == b || every(a) || every(b)
}

// checkTelemetryPath accepts a literal path that takes no route of the exporter's own.
func checkTelemetryPath(p string) error {
	if !telemetryPathRE.MatchString(p) {
		return fmt.Errorf("web.telemetry_path must be a path of letters, digits and ._~-/ starting with /, got %q", p)
	}
	if strings.Contains(p, "//") || strings.Contains(p+"/", "/./") || strings.Contains(p+"/", "/../") {
		return fmt.Errorf("web.telemetry_path must be a clean path (no //, /./ or /../), got %q", p)
	}
	for _, r := range reservedPaths {
		if strings.TrimSuffix(p, "/") == r {
			return fmt.Errorf("web.telemetry_path %q is taken by the exporter's own %s endpoint: choose another, e.g. /metrics", p, r)
		}
	}
	if strings.TrimSuffix(p, "/") == PauseAPIPath || strings.HasPrefix(p, PauseAPIPath+"/") {
		return fmt.Errorf("web.telemetry_path %q is inside the PM sampling pause API (%s/): choose another, e.g. /metrics", p, PauseAPIPath)
	}
	return nil
}

// OTLPSettings is the exporter's OTLP section (otlp.*): the push, with its YAML keys, flags
// and help.
type OTLPSettings struct {
	Endpoint string            `yaml:"endpoint" help:"OTLP endpoint: host:port, or a URL (for http, one without a path gets /v1/metrics); empty: OTEL_EXPORTER_OTLP_[METRICS_]ENDPOINT, and no push when neither is set."`
	Protocol string            `yaml:"protocol" help:"OTLP protocol: grpc or http (http/protobuf); empty: OTEL_EXPORTER_OTLP_[METRICS_]PROTOCOL, else grpc."`
	Interval settings.Duration `yaml:"interval" help:"OTLP push interval; 0: OTEL_METRIC_EXPORT_INTERVAL, else 15s."`
	Timeout  settings.Duration `yaml:"timeout" help:"Timeout of one OTLP export; 0: OTEL_EXPORTER_OTLP_[METRICS_]TIMEOUT, else 10s."`
	Insecure bool              `yaml:"insecure" help:"Push OTLP without TLS (false: OTEL_EXPORTER_OTLP_[METRICS_]INSECURE or the URL scheme decide)."`
	Header   map[string]string `yaml:"header" help:"OTLP request header NAME=VALUE (repeatable); replaces OTEL_EXPORTER_OTLP_[METRICS_]HEADERS."`
	Resource map[string]string `yaml:"resource_attribute" flag:"otlp.resource-attribute" help:"OTLP resource attribute NAME=VALUE (repeatable); overrides OTEL_RESOURCE_ATTRIBUTES."`
	Naming   string            `yaml:"naming" help:"Names of what is pushed: otel (OpenTelemetry names and attributes, docs/metrics.md) or prometheus (the /metrics names and labels and classic histograms, for a Collector that writes to Prometheus: docs/fleet.md)."`
}

// DefaultOTLPSettings is the OTLP section's default: no push unless an endpoint is given here
// or in the environment.
func DefaultOTLPSettings() OTLPSettings { return OTLPSettings{Naming: NamingOTel.String()} }

// Validate checks the section's values.
func (c OTLPSettings) Validate() []error {
	var errs []error
	if c.Interval < 0 || c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("otlp.interval and otlp.timeout must not be negative, got %s and %s", c.Interval, c.Timeout))
	}
	if _, err := ParseNaming(c.Naming); err != nil {
		errs = append(errs, fmt.Errorf("otlp.naming: %w", err))
	}
	if c.Protocol != "" && c.Protocol != "grpc" && c.Protocol != "http" && c.Protocol != "http/protobuf" {
		errs = append(errs, fmt.Errorf("otlp.protocol must be grpc or http, got %q", c.Protocol))
	}
	return errs
}
