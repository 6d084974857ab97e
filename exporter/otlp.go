package exporter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/version"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
)

// ServiceName is the service.name of the OTLP resource.
const ServiceName = "cupti-exporter"

// DefaultOTLPInterval is the push interval when neither OTLPConfig.Interval nor
// OTEL_METRIC_EXPORT_INTERVAL sets one.
const DefaultOTLPInterval = 15 * time.Second

// OTLPConfig configures the OTLP push. Every field left at its zero value falls back to
// the standard OpenTelemetry environment variables, then to the defaults: configuration
// (flags, YAML) wins over the environment, the environment over defaults. The
// otlpmetricgrpc/otlpmetrichttp exporters read OTEL_EXPORTER_OTLP_[METRICS_]ENDPOINT,
// _HEADERS, _CERTIFICATE, _CLIENT_CERTIFICATE, _CLIENT_KEY, _INSECURE, _TIMEOUT and
// _COMPRESSION themselves (the METRICS_ variant wins; OTEL_EXPORTER_OTLP_ENDPOINT is a base
// URL to which /v1/metrics is appended for HTTP, the METRICS_ one is used as is); NewOTLP
// adds the protocol (OTEL_EXPORTER_OTLP_[METRICS_]PROTOCOL), the interval
// (OTEL_METRIC_EXPORT_INTERVAL, read by the SDK) and the resource (OTEL_RESOURCE_ATTRIBUTES,
// OTEL_SERVICE_NAME).
type OTLPConfig struct {
	// Protocol is "grpc", "http" or "http/protobuf" (the same); empty:
	// OTEL_EXPORTER_OTLP_METRICS_PROTOCOL, OTEL_EXPORTER_OTLP_PROTOCOL, else grpc.
	Protocol string
	// Endpoint is host:port, or an http:// or https:// URL whose scheme decides TLS. For
	// HTTP a URL without a path (http://collector:4318) is a base URL and gets /v1/metrics;
	// a URL with a path is used as is. Empty: the environment (which must give a URL), else
	// localhost:4317 (grpc) or localhost:4318 (ResolveOTLPTarget).
	Endpoint string
	// Insecure disables TLS for a host:port endpoint (false: the environment decides).
	Insecure bool
	// Headers are sent with every export (e.g. authorization); when set they replace
	// OTEL_EXPORTER_OTLP_[METRICS_]HEADERS.
	Headers map[string]string
	// Interval between exports; not positive: OTEL_METRIC_EXPORT_INTERVAL, else DefaultOTLPInterval.
	Interval time.Duration
	// Timeout of one export; not positive: OTEL_EXPORTER_OTLP_[METRICS_]TIMEOUT, else 10 s.
	Timeout time.Duration
	// ResourceAttributes are added to the resource last, overriding the
	// detected and environment attributes.
	ResourceAttributes map[string]string
	// Naming picks the names and attributes pushed: NamingOTel (the zero value) or
	// NamingPrometheus.
	Naming Naming
	// SelfMetrics, when set, is gathered at every export and pushed with the snapshots
	// (Exporter.SelfMetrics: source_up, drops, build info, Go and process metrics).
	SelfMetrics prometheus.Gatherer

	// Registerer, when set, receives cupti_exporter_otlp_exports_total{result}
	// and cupti_exporter_series_dropped_total{outlet="otlp",reason}; both are pushed too.
	Registerer prometheus.Registerer
	// Logger receives export failures and dropped series; discarded when nil.
	Logger *slog.Logger
}

// Naming is the naming scheme of the OTLP push.
type Naming int

const (
	// NamingOTel pushes OpenTelemetry names, UCUM units and attribute keys
	// (hw.power, hw.id, cupti.workload.pod.name; docs/metrics.md), for OTel-native backends.
	NamingOTel Naming = iota
	// NamingPrometheus pushes what /metrics serves: the Prometheus names (no unit, so
	// that a Collector adds no suffix), labels as attributes and classic
	// histograms, so that a Collector writing to Prometheus (prometheusremotewrite)
	// gives the series a scrape would, and the dashboards and alerts read them
	// (docs/fleet.md).
	NamingPrometheus
)

// ParseNaming reads a naming scheme: "otel" (or empty) or "prometheus".
func ParseNaming(s string) (Naming, error) {
	switch s {
	case "", "otel":
		return NamingOTel, nil
	case "prometheus":
		return NamingPrometheus, nil
	}
	return 0, fmt.Errorf("%q is neither otel nor prometheus", s)
}

// String is the name ParseNaming reads.
func (n Naming) String() string {
	if n == NamingPrometheus {
		return "prometheus"
	}
	return "otel"
}

// OTLP pushes the snapshots of a set of producers over OTLP at a fixed interval.
type OTLP struct {
	provider *sdkmetric.MeterProvider
	target   OTLPTarget

	once sync.Once
	err  error
}

// OTLPFromEnv reports whether the environment alone asks for an OTLP push, with the
// variable that does: OTEL_EXPORTER_OTLP_METRICS_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT set,
// or OTEL_METRICS_EXPORTER naming otlp. OTEL_METRICS_EXPORTER=none and OTEL_SDK_DISABLED=true
// turn it off (configuration that names an endpoint still pushes).
func OTLPFromEnv() (bool, string) {
	if strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")), "true") {
		return false, ""
	}
	exporters := strings.Split(strings.ToLower(os.Getenv("OTEL_METRICS_EXPORTER")), ",")
	for i := range exporters {
		exporters[i] = strings.TrimSpace(exporters[i])
	}
	if slices.Contains(exporters, "none") {
		return false, ""
	}
	for _, v := range []string{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
		if strings.TrimSpace(os.Getenv(v)) != "" {
			return true, v
		}
	}
	if slices.Contains(exporters, "otlp") {
		return true, "OTEL_METRICS_EXPORTER"
	}
	return false, ""
}

// OTLPProtocol is the protocol NewOTLP uses for protocol p: p itself ("http/protobuf" read
// as "http"), else the environment, else "grpc". It fails on anything else, such as
// http/json, which the Go exporters do not implement.
func OTLPProtocol(p string) (string, error) {
	from := "configuration"
	if p == "" {
		for _, v := range []string{"OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
			if p = strings.TrimSpace(os.Getenv(v)); p != "" {
				from = v
				break
			}
		}
	}
	switch p {
	case "", "grpc":
		return "grpc", nil
	case "http", "http/protobuf":
		return "http", nil
	}
	return "", fmt.Errorf("OTLP protocol %q (from %s): use grpc or http/protobuf", p, from)
}

// NewOTLP starts pushing the latest snapshots of producers over OTLP, through
// an otlpmetricgrpc or otlpmetrichttp exporter and a PeriodicReader fed by
// NewMetricProducer. The resource holds host.name, service.name
// (cupti-exporter), service.version, k8s.node.name, k8s.pod.name and
// k8s.namespace.name (from the environment variables NODE_NAME, POD_NAME and
// POD_NAMESPACE when set: the node the GPUs are on and the exporter's own pod),
// then OTEL_RESOURCE_ATTRIBUTES / OTEL_SERVICE_NAME, then cfg.ResourceAttributes.
// It installs an OpenTelemetry error handler that logs through cfg.Logger, so that
// each failure is logged once, structured. Call Shutdown to push a last time and stop.
func NewOTLP(ctx context.Context, cfg OTLPConfig, producers ...Producer) (*OTLP, error) {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	target, err := ResolveOTLPTarget(cfg)
	if err != nil {
		return nil, fmt.Errorf("create OTLP exporter: %w", err)
	}
	exp, err := newOTLPExporter(ctx, cfg, target)
	if err != nil {
		return nil, err
	}
	res, err := newResource(ctx, cfg.ResourceAttributes)
	if err != nil {
		return nil, err
	}
	// The SDK's own log lines (a variable it cannot parse, say) go through the logger too,
	// structured, its info and debug lines at debug level.
	otel.SetLogger(logr.FromSlogHandler(logger.Handler()))
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		var logged *loggedError
		switch {
		case errors.As(err, &logged): // export failures are logged by countingExporter
		case errors.Is(err, context.Canceled): // an export cut short by Shutdown
			logger.Debug("OpenTelemetry SDK error", "err", err)
		default:
			logger.Warn("OpenTelemetry SDK error", "err", err)
		}
	}))
	counted := &countingExporter{Exporter: exp, logger: logger}
	drops := &dropCounter{}
	own := &otlpCollector{exp: counted, drops: drops}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(own); err != nil {
			_ = exp.Shutdown(ctx)
			return nil, fmt.Errorf("register OTLP self-metrics: %w", err)
		}
	}
	ownReg := prometheus.NewRegistry()
	ownReg.MustRegister(own)
	self := prometheus.Gatherers{ownReg}
	if cfg.SelfMetrics != nil {
		self = append(self, cfg.SelfMetrics)
	}
	var readerOpts []sdkmetric.PeriodicReaderOption
	switch {
	case cfg.Interval > 0:
		readerOpts = append(readerOpts, sdkmetric.WithInterval(cfg.Interval))
	case os.Getenv("OTEL_METRIC_EXPORT_INTERVAL") == "": // else the SDK reads it
		readerOpts = append(readerOpts, sdkmetric.WithInterval(DefaultOTLPInterval))
	}
	if cfg.Timeout > 0 {
		readerOpts = append(readerOpts, sdkmetric.WithTimeout(cfg.Timeout))
	}
	readerOpts = append(readerOpts, sdkmetric.WithProducer(newMetricProducer(producers, cfg.Naming, self, logger, drops)))
	reader := sdkmetric.NewPeriodicReader(counted, readerOpts...)
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader), sdkmetric.WithResource(res))
	return &OTLP{provider: provider, target: target}, nil
}

// Target is where the push goes, as the exporter dials it.
func (o *OTLP) Target() OTLPTarget { return o.target }

// OTLPTarget is where the push goes: what ResolveOTLPTarget makes of the configuration and
// the environment, and what NewOTLP hands the OpenTelemetry exporter.
type OTLPTarget struct {
	Protocol string // grpc or http
	Endpoint string // host:port for gRPC; the full URL, path included, for HTTP
	TLS      bool
	From     string // configuration, the environment variable, or default
}

// ResolveOTLPTarget decides the endpoint as the OTLP specification and the Go exporters do,
// and refuses what they would misread:
//
//   - cfg.Endpoint first: host:port (TLS unless cfg.Insecure or
//     OTEL_EXPORTER_OTLP_[METRICS_]INSECURE=true) or an http:// or https:// URL whose
//     scheme decides TLS; for HTTP a URL without a path gets /v1/metrics;
//   - else OTEL_EXPORTER_OTLP_METRICS_ENDPOINT (used as is), else OTEL_EXPORTER_OTLP_ENDPOINT
//     (a base URL: /v1/metrics appended for HTTP). These must be http:// or https:// URLs:
//     the Go exporters parse them as URLs, so that 127.0.0.1:4317 fails to parse (they log
//     it and dial localhost:4317) and collector:4317 reads as scheme "collector" with no
//     host. Such a value is refused, with the fix in the error;
//   - else localhost:4317 (gRPC) or localhost:4318/v1/metrics (HTTP), TLS unless the
//     INSECURE variable says otherwise, as the Go exporters default.
func ResolveOTLPTarget(cfg OTLPConfig) (OTLPTarget, error) {
	protocol, err := OTLPProtocol(cfg.Protocol)
	if err != nil {
		return OTLPTarget{}, err
	}
	t := OTLPTarget{Protocol: protocol, From: "configuration"}
	insecure := cfg.Insecure || envInsecure()
	raw := strings.TrimSpace(cfg.Endpoint)
	if raw == "" {
		for _, v := range []string{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
			if raw = strings.TrimSpace(os.Getenv(v)); raw != "" {
				t.From = v
				break
			}
		}
	}
	switch {
	case raw == "":
		t.From, t.TLS = "default", !envInsecure()
		t.Endpoint = "localhost:4317"
		if protocol == "http" {
			t.Endpoint = schemeFor(t.TLS) + "://localhost:4318/v1/metrics"
		}
		return t, nil
	case !strings.Contains(raw, "://") && t.From != "configuration":
		return t, fmt.Errorf("%s=%q is not a URL: the OpenTelemetry exporters need a scheme there; write http://%s (no TLS) or https://%s (TLS), or pass it as --otlp.endpoint=%s",
			t.From, raw, raw, raw, raw)
	case !strings.Contains(raw, "://"):
		if _, _, err := net.SplitHostPort(raw); err != nil {
			return t, fmt.Errorf("OTLP endpoint %q is neither host:port nor a URL: %w", raw, err)
		}
		t.TLS = !insecure
		t.Endpoint = raw
		if protocol == "http" {
			t.Endpoint = schemeFor(t.TLS) + "://" + raw + "/v1/metrics"
		}
		return t, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return t, fmt.Errorf("OTLP endpoint %q (from %s): %w", raw, t.From, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return t, fmt.Errorf("OTLP endpoint %q (from %s): want an http:// or https:// URL with a host", raw, t.From)
	}
	t.TLS = u.Scheme == "https"
	t.Endpoint = u.Host
	if protocol == "http" {
		switch {
		case t.From == "OTEL_EXPORTER_OTLP_ENDPOINT": // a base URL
			u.Path = path.Join("/", u.Path, "v1/metrics")
		case t.From == "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT" && u.Path == "":
			u.Path = "/"
		case t.From == "configuration" && (u.Path == "" || u.Path == "/"):
			u.Path = "/v1/metrics"
		}
		t.Endpoint = u.String()
	}
	return t, nil
}

func schemeFor(tls bool) string {
	if tls {
		return "https"
	}
	return "http"
}

// envInsecure reads OTEL_EXPORTER_OTLP_[METRICS_]INSECURE as the Go exporters do (the
// METRICS_ one wins; only "true", in any case, is true).
func envInsecure() bool {
	for _, v := range []string{"OTEL_EXPORTER_OTLP_METRICS_INSECURE", "OTEL_EXPORTER_OTLP_INSECURE"} {
		if s, ok := os.LookupEnv(v); ok {
			return strings.EqualFold(strings.TrimSpace(s), "true")
		}
	}
	return false
}

// newOTLPExporter creates the exporter for target, which it passes explicitly, so that what
// the exporter dials is what Target reports (the Go exporters read the same variables, and
// an option wins over a variable).
func newOTLPExporter(ctx context.Context, cfg OTLPConfig, target OTLPTarget) (sdkmetric.Exporter, error) {
	switch target.Protocol {
	case "grpc":
		// As a URL, whose scheme sets TLS either way over OTEL_EXPORTER_OTLP_INSECURE.
		opts := []otlpmetricgrpc.Option{otlpmetricgrpc.WithEndpointURL(schemeFor(target.TLS) + "://" + target.Endpoint)}
		if len(cfg.Headers) > 0 {
			opts = append(opts, otlpmetricgrpc.WithHeaders(cfg.Headers))
		}
		if cfg.Timeout > 0 {
			opts = append(opts, otlpmetricgrpc.WithTimeout(cfg.Timeout))
		}
		exp, err := otlpmetricgrpc.New(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("create OTLP gRPC exporter for %q: %w", target.Endpoint, err)
		}
		return exp, nil
	default:
		opts := []otlpmetrichttp.Option{otlpmetrichttp.WithEndpointURL(target.Endpoint)}
		if len(cfg.Headers) > 0 {
			opts = append(opts, otlpmetrichttp.WithHeaders(cfg.Headers))
		}
		if cfg.Timeout > 0 {
			opts = append(opts, otlpmetrichttp.WithTimeout(cfg.Timeout))
		}
		exp, err := otlpmetrichttp.New(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("create OTLP HTTP exporter for %q: %w", target.Endpoint, err)
		}
		return exp, nil
	}
}

// ServiceVersion is service.version and the scope version: the build's version, or
// "unknown" for a build that did not set one.
func ServiceVersion() string {
	if version.Version != "" {
		return version.Version
	}
	return "unknown"
}

// newResource builds the resource, each step overriding the previous one:
// SDK and host attributes, service and Kubernetes attributes, environment, extra.
func newResource(ctx context.Context, extra map[string]string) (*resource.Resource, error) {
	own := []attribute.KeyValue{
		attribute.String("service.name", ServiceName),
		attribute.String("service.version", ServiceVersion()),
	}
	for _, e := range []struct{ env, key string }{
		{"NODE_NAME", "k8s.node.name"}, {"POD_NAME", "k8s.pod.name"}, {"POD_NAMESPACE", "k8s.namespace.name"},
	} {
		if v := os.Getenv(e.env); v != "" {
			own = append(own, attribute.String(e.key, v))
		}
	}
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	configured := make([]attribute.KeyValue, 0, len(keys))
	for _, k := range keys {
		if extra[k] != "" {
			configured = append(configured, attribute.String(k, extra[k]))
		}
	}
	res, err := resource.New(ctx,
		resource.WithTelemetrySDK(),
		resource.WithHost(),
		resource.WithAttributes(own...),
		resource.WithFromEnv(),
		resource.WithAttributes(configured...),
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("build OTLP resource: %w", err)
	}
	return res, nil
}

// ForceFlush pushes the latest snapshots now.
func (o *OTLP) ForceFlush(ctx context.Context) error {
	return o.provider.ForceFlush(ctx)
}

// Shutdown pushes a last time and stops; later calls return the first result.
func (o *OTLP) Shutdown(ctx context.Context) error {
	o.once.Do(func() { o.err = o.provider.Shutdown(ctx) })
	return o.err
}

// countingExporter counts the results of Export and logs failures: the first of a run of
// failures (and a change of error text) at warning level, the repeats at debug level, and
// the recovery. The SDK calls Export from one goroutine at a time; mu makes the run of
// failures safe regardless.
type countingExporter struct {
	sdkmetric.Exporter
	logger  *slog.Logger
	success atomic.Uint64
	failure atomic.Uint64

	mu      sync.Mutex
	failing int    // consecutive failures
	lastErr string // text of the last failure
}

// loggedError is an export error countingExporter has logged; the OpenTelemetry error
// handler that NewOTLP installs does not log it a second time.
type loggedError struct{ err error }

func (e *loggedError) Error() string { return e.err.Error() }
func (e *loggedError) Unwrap() error { return e.err }

func (c *countingExporter) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	err := c.Exporter.Export(ctx, rm)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.failure.Add(1)
		c.failing++
		if text := err.Error(); errors.Is(err, context.Canceled) {
			c.logger.Debug("OTLP export cut short", "err", err) // by Shutdown
		} else if c.failing == 1 || text != c.lastErr {
			c.logger.Warn("OTLP export failed", "err", err, "consecutive_failures", c.failing)
			c.lastErr = text
		} else {
			c.logger.Debug("OTLP export failed", "err", err, "consecutive_failures", c.failing)
		}
		return &loggedError{err}
	}
	if c.failing > 0 {
		c.logger.Info("OTLP export succeeded again", "failures", c.failing)
		c.failing, c.lastErr = 0, ""
	}
	c.success.Add(1)
	return nil
}

// otlpCollector exposes the OTLP outlet's counts.
type otlpCollector struct {
	exp   *countingExporter
	drops *dropCounter
}

func (c *otlpCollector) Describe(chan<- *prometheus.Desc) {}

func (c *otlpCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(otlpExportsDesc, prometheus.CounterValue, float64(c.exp.success.Load()), "success")
	ch <- prometheus.MustNewConstMetric(otlpExportsDesc, prometheus.CounterValue, float64(c.exp.failure.Load()), "failure")
	c.drops.collect(ch, "otlp")
}
