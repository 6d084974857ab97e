package exporter

import (
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"

	"github.com/cupti-exporter/cupti-exporter/snapshot"
)

// Producer publishes the latest snapshot of one source.
//
// Snapshot must not block: producers publish snapshots through an atomic
// pointer and Snapshot only loads it. It returns nil while the source has
// nothing to report yet. The returned snapshot is never modified.
type Producer interface {
	Snapshot() *snapshot.Snapshot
}

// Status is the state of one source on one device.
type Status struct {
	Source string // source name, e.g. "pmsample"
	Device string // GPU index the status is about, e.g. "0" (the gpu label); "" when not per GPU
	Ready  bool   // whether the source is producing data
	Reason string // why it is not ready, in full (e.g. "hardware busy: paused for ncu"), for /readyz and logs; "" when ready
	// Code is the short reason code of cupti_exporter_source_up{reason} (ReasonBusy, ...);
	// derived from Reason when empty (see ReasonCode).
	Code string
	// Required: a part the exporter needs whatever the sources produce (the activity
	// socket); not ready, it makes /readyz 503; ready, it does not make /readyz 200 alone.
	Required bool
}

// StatusReporter reports the state of a source. Status must not block.
type StatusReporter interface {
	Status() []Status
}

// DeviceLabeler maps a device uuid to the pod, namespace and container that
// hold it; empty strings when no pod holds it or it is not known (podresources.Client).
// It is called on the scrape path and must answer from memory without blocking.
type DeviceLabeler interface {
	DeviceLabels(uuid string) (pod, namespace, container string)
}

// DeviceLabelerFunc is a function as a DeviceLabeler.
type DeviceLabelerFunc func(uuid string) (pod, namespace, container string)

// DeviceLabels calls f.
func (f DeviceLabelerFunc) DeviceLabels(uuid string) (pod, namespace, container string) {
	return f(uuid)
}

// Option configures an Exporter.
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	labeler        DeviceLabeler
	runtimeMetrics bool
}

func newConfig(opts []Option) config {
	c := config{runtimeMetrics: true}
	for _, o := range opts {
		o.apply(&c)
	}
	return c
}

// WithDeviceLabeler adds the labels pod, namespace and container to every
// family whose label names contain "uuid", with the values l returns for the
// series' uuid (empty strings when unknown). Families that already have a
// "pod" label are left as they are. Without a labeler (a nil l, the default) those
// families carry the three labels too, empty: see labeledProducer.
func WithDeviceLabeler(l DeviceLabeler) Option {
	return optionFunc(func(c *config) { c.labeler = l })
}

// WithoutRuntimeMetrics leaves the Go and process collectors out of the
// registry (they are in by default).
func WithoutRuntimeMetrics() Option {
	return optionFunc(func(c *config) { c.runtimeMetrics = false })
}

// Exporter holds the registered producers and status reporters and a
// Prometheus registry that mirrors them. Its methods are safe for concurrent use.
type Exporter struct {
	logger   *slog.Logger
	cfg      config
	start    time.Time
	registry *prometheus.Registry
	self     *prometheus.Registry // self-metrics only, for the OTLP outlet
	drops    *dropCounter

	mu        sync.RWMutex
	producers []named[Producer]
	statuses  []named[StatusReporter]
}

type named[T any] struct {
	name string
	v    T
}

// New returns an Exporter whose registry holds the snapshot collector, the
// self-metrics and, unless WithoutRuntimeMetrics, the Go and process collectors.
// A second registry (SelfMetrics) holds the same self-metrics without the snapshots.
func New(logger *slog.Logger, opts ...Option) *Exporter {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	e := &Exporter{
		logger:   logger,
		cfg:      newConfig(opts),
		start:    time.Now(),
		registry: prometheus.NewRegistry(),
		self:     prometheus.NewRegistry(),
		drops:    &dropCounter{},
	}
	shared := []prometheus.Collector{versioncollector.NewCollector("cupti_exporter")}
	if e.cfg.runtimeMetrics {
		shared = append(shared,
			collectors.NewGoCollector(),
			collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		)
	}
	e.registry.MustRegister(append(shared, &collector{e: e})...)
	// The snapshot collector emits source_up and the Prometheus outlet's drops itself.
	e.self.MustRegister(append(shared, statusCollector{e}, dropsCollector{e.drops})...)
	return e
}

// SelfMetrics returns a gatherer of the exporter's self-metrics (source_up, the Prometheus
// outlet's drops, build info, Go and process metrics) without the snapshots, for the OTLP
// outlet: OTLPConfig.SelfMetrics. Gathering it has no side effect on the served registry.
func (e *Exporter) SelfMetrics() prometheus.Gatherer { return e.self }

// Register adds a producer under name; a producer registered earlier under the
// same name is replaced. Families are emitted in the order producers were
// first registered when names collide (the first family of a name wins).
func (e *Exporter) Register(name string, p Producer) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.producers = upsert(e.producers, name, p)
}

// RegisterStatus adds a status reporter under name; one registered earlier
// under the same name is replaced.
func (e *Exporter) RegisterStatus(name string, r StatusReporter) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.statuses = upsert(e.statuses, name, r)
}

func upsert[T any](list []named[T], name string, v T) []named[T] {
	if i := slices.IndexFunc(list, func(n named[T]) bool { return n.name == name }); i >= 0 {
		list = slices.Clone(list)
		list[i].v = v
		return list
	}
	return append(slices.Clip(list), named[T]{name, v})
}

// Registry returns the registry to serve (see Server).
func (e *Exporter) Registry() *prometheus.Registry { return e.registry }

// Producers returns the registered producers, each seen through the device
// labeler, for the OTLP outlet: NewOTLP(ctx, cfg, e.Producers()...).
// Producers registered later are not included.
func (e *Exporter) Producers() []Producer {
	e.mu.RLock()
	defer e.mu.RUnlock()
	out := make([]Producer, len(e.producers))
	for i, p := range e.producers {
		out[i] = e.view(p.v)
	}
	return out
}

func (e *Exporter) view(p Producer) Producer {
	return labeledProducer{p: p, labeler: e.cfg.labeler}
}

// Status returns the statuses of every registered reporter; a Status with an
// empty Source gets the name the reporter was registered under.
// Exporter thus implements StatusReporter, as Server expects.
func (e *Exporter) Status() []Status {
	e.mu.RLock()
	reporters := e.statuses
	e.mu.RUnlock()
	var out []Status
	for _, r := range reporters {
		for _, s := range r.v.Status() {
			if s.Source == "" {
				s.Source = r.name
			}
			out = append(out, s)
		}
	}
	return out
}

// snapshots loads the latest snapshot of every producer, through the labeler.
func (e *Exporter) snapshots() []*snapshot.Snapshot {
	e.mu.RLock()
	producers := e.producers
	e.mu.RUnlock()
	out := make([]*snapshot.Snapshot, 0, len(producers))
	for _, p := range producers {
		if s := e.view(p.v).Snapshot(); s != nil {
			out = append(out, s)
		}
	}
	return out
}
