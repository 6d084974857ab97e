package exporter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/version"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
)

// ServiceName is the service.name of the OTLP resource.
const ServiceName = "cupti-exporter"

var otlpExportsDesc = prometheus.NewDesc(
	"cupti_exporter_otlp_exports_total",
	"OTLP exports attempted, by result (success or failure).",
	[]string{"result"}, nil)

// OTLPConfig configures the OTLP push.
type OTLPConfig struct {
	// Protocol is "grpc" (the default when empty) or "http" (protobuf over HTTP).
	Protocol string
	// Endpoint is host:port (the exporters' defaults localhost:4317 / localhost:4318
	// when empty), or a URL (http://host:port/path) whose scheme decides TLS
	// and, for "http", whose path replaces /v1/metrics.
	Endpoint string
	// Insecure disables TLS for a host:port endpoint.
	Insecure bool
	// Headers are sent with every export (e.g. authorization).
	Headers map[string]string
	// Interval between exports; the SDK default (60 s, or OTEL_METRIC_EXPORT_INTERVAL) when not positive.
	Interval time.Duration
	// Timeout of one export; the SDK default (30 s, or OTEL_METRIC_EXPORT_TIMEOUT) when not positive.
	Timeout time.Duration
	// ResourceAttributes are added to the resource last, overriding the
	// detected and environment attributes.
	ResourceAttributes map[string]string

	// Registerer, when set, receives cupti_exporter_otlp_exports_total{result}
	// and cupti_exporter_series_dropped_total{outlet="otlp",reason}.
	Registerer prometheus.Registerer
	// Logger receives export failures and dropped series; discarded when nil.
	Logger *slog.Logger
}

// OTLP pushes the snapshots of a set of producers over OTLP at a fixed interval.
type OTLP struct {
	provider *sdkmetric.MeterProvider

	once sync.Once
	err  error
}

// NewOTLP starts pushing the latest snapshots of producers over OTLP, through
// an otlpmetricgrpc or otlpmetrichttp exporter and a PeriodicReader fed by
// NewMetricProducer. The resource holds host.name, service.name
// (cupti-exporter), service.version, k8s.pod.name and k8s.namespace.name (from
// the environment variables POD_NAME and POD_NAMESPACE when set), then
// OTEL_RESOURCE_ATTRIBUTES / OTEL_SERVICE_NAME, then cfg.ResourceAttributes.
// Call Shutdown to push a last time and stop.
func NewOTLP(ctx context.Context, cfg OTLPConfig, producers ...Producer) (*OTLP, error) {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	exp, err := newOTLPExporter(ctx, cfg)
	if err != nil {
		return nil, err
	}
	res, err := newResource(ctx, cfg.ResourceAttributes)
	if err != nil {
		return nil, err
	}
	counted := &countingExporter{Exporter: exp, logger: logger}
	drops := &dropCounter{}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(&otlpCollector{exp: counted, drops: drops}); err != nil {
			_ = exp.Shutdown(ctx)
			return nil, fmt.Errorf("register OTLP self-metrics: %w", err)
		}
	}
	var readerOpts []sdkmetric.PeriodicReaderOption
	if cfg.Interval > 0 {
		readerOpts = append(readerOpts, sdkmetric.WithInterval(cfg.Interval))
	}
	if cfg.Timeout > 0 {
		readerOpts = append(readerOpts, sdkmetric.WithTimeout(cfg.Timeout))
	}
	readerOpts = append(readerOpts, sdkmetric.WithProducer(newMetricProducer(producers, logger, drops)))
	reader := sdkmetric.NewPeriodicReader(counted, readerOpts...)
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader), sdkmetric.WithResource(res))
	return &OTLP{provider: provider}, nil
}

func newOTLPExporter(ctx context.Context, cfg OTLPConfig) (sdkmetric.Exporter, error) {
	isURL := strings.Contains(cfg.Endpoint, "://")
	switch cfg.Protocol {
	case "", "grpc":
		var opts []otlpmetricgrpc.Option
		switch {
		case isURL:
			opts = append(opts, otlpmetricgrpc.WithEndpointURL(cfg.Endpoint))
		case cfg.Endpoint != "":
			opts = append(opts, otlpmetricgrpc.WithEndpoint(cfg.Endpoint))
		}
		if cfg.Insecure && !isURL {
			opts = append(opts, otlpmetricgrpc.WithInsecure())
		}
		if len(cfg.Headers) > 0 {
			opts = append(opts, otlpmetricgrpc.WithHeaders(cfg.Headers))
		}
		if cfg.Timeout > 0 {
			opts = append(opts, otlpmetricgrpc.WithTimeout(cfg.Timeout))
		}
		exp, err := otlpmetricgrpc.New(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("create OTLP gRPC exporter for %q: %w", cfg.Endpoint, err)
		}
		return exp, nil
	case "http":
		var opts []otlpmetrichttp.Option
		switch {
		case isURL:
			opts = append(opts, otlpmetrichttp.WithEndpointURL(cfg.Endpoint))
		case cfg.Endpoint != "":
			opts = append(opts, otlpmetrichttp.WithEndpoint(cfg.Endpoint))
		}
		if cfg.Insecure && !isURL {
			opts = append(opts, otlpmetrichttp.WithInsecure())
		}
		if len(cfg.Headers) > 0 {
			opts = append(opts, otlpmetrichttp.WithHeaders(cfg.Headers))
		}
		if cfg.Timeout > 0 {
			opts = append(opts, otlpmetrichttp.WithTimeout(cfg.Timeout))
		}
		exp, err := otlpmetrichttp.New(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("create OTLP HTTP exporter for %q: %w", cfg.Endpoint, err)
		}
		return exp, nil
	}
	return nil, fmt.Errorf("create OTLP exporter: unknown protocol %q: use grpc or http", cfg.Protocol)
}

// newResource builds the resource, each step overriding the previous one:
// SDK and host attributes, service and pod attributes, environment, extra.
func newResource(ctx context.Context, extra map[string]string) (*resource.Resource, error) {
	own := []attribute.KeyValue{
		attribute.String("service.name", ServiceName),
		attribute.String("service.version", version.Version),
	}
	if v := os.Getenv("POD_NAME"); v != "" {
		own = append(own, attribute.String("k8s.pod.name", v))
	}
	if v := os.Getenv("POD_NAMESPACE"); v != "" {
		own = append(own, attribute.String("k8s.namespace.name", v))
	}
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	configured := make([]attribute.KeyValue, len(keys))
	for i, k := range keys {
		configured[i] = attribute.String(k, extra[k])
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

// countingExporter counts the results of Export.
type countingExporter struct {
	sdkmetric.Exporter
	logger  *slog.Logger
	success atomic.Uint64
	failure atomic.Uint64
}

func (c *countingExporter) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	err := c.Exporter.Export(ctx, rm)
	if err != nil {
		c.failure.Add(1)
		c.logger.Warn("OTLP export failed", "err", err)
		return err
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
