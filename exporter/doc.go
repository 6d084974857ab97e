// Package exporter turns the snapshots that sources publish into Prometheus
// and OTLP metrics, and serves them over HTTP.
//
// # Pipeline
//
// Sources (pmsample, activity) build an immutable [snapshot.Snapshot] and
// publish it through an atomic pointer; they implement [Producer], whose
// Snapshot method must never block. One [Exporter] holds the registered
// producers and has two thin outlets over the same snapshots:
//
//   - an unexported prometheus.Collector in [Exporter.Registry] that, on every
//     scrape, loads the latest snapshot of each producer and emits const
//     metrics: gauges, counters (with created timestamps when the sample has a
//     Start), and histograms carrying both classic and native buckets;
//   - [NewMetricProducer], an OpenTelemetry sdk/metric Producer over the same
//     snapshots, used by [NewOTLP] to push over OTLP gRPC or HTTP, together with
//     the self-metrics of [Exporter.SelfMetrics]. Labels become attributes through
//     one table ([OTelAttribute]: semantic-convention keys such as hw.id, the
//     workload under cupti.workload.pod.name etc. (k8s.* keys are the resource's,
//     the exporter's own pod), "cupti." + the label for the rest), so every
//     family, present or future, is renamed the same way. [ResolveOTLPTarget]
//     decides the endpoint and refuses a variable without a scheme. With
//     [NamingPrometheus] the push carries the Prometheus names, labels and classic
//     histograms instead, for a Collector that writes to Prometheus.
//
// Families with the same name from different producers are merged. A family
// whose kind or label names disagree with the first one of that name, and a
// series whose label set repeats, are not emitted: the Prometheus outlet
// reports each through prometheus.NewInvalidMetric (the server uses
// promhttp.ContinueOnError, so the rest of the scrape is served), the OTLP
// outlet drops them, and both count them in
// cupti_exporter_series_dropped_total{outlet,reason}. A family keeps at most
// 4,096 series (the sources bound their own labels; this is the safety net):
// past it the series of lowest [snapshot.Priority] (claimed workload identities,
// then normal, then verified ones) are folded into one overflow series whose
// labels are all "(overflow)" (values, counts and classic buckets added up) and
// counted with reason "cardinality". A GPU's own series (families with a uuid
// label and no pod label of their own) are never folded.
//
// # Pod attribution
//
// [WithDeviceLabeler] adds the labels pod, namespace and container to every
// family whose label names contain "uuid" (and do not already contain "pod").
// The labeler is called once per distinct uuid per scrape and must answer
// from memory; it returns empty strings for a device that no pod holds. Without
// a labeler the three labels are there all the same, empty: a Prometheus that
// scrapes with honor_labels (the chart's ServiceMonitor) keeps an exposed empty
// label empty, where an absent one would take the exporter pod's target label
// and credit every GPU to the exporter itself.
//
// # Self-metrics
//
// The registry also holds cupti_exporter_build_info (from
// prometheus/common/version), cupti_exporter_source_up{source,gpu,reason}
// from the registered [StatusReporter]s (reason is a short code, see
// [ReasonCode]; the full text is in /readyz), cupti_exporter_collect_duration_seconds
// (the time the snapshot collector took), cupti_exporter_series_dropped_total,
// and the Go and process collectors. When [OTLPConfig].Registerer is set (one
// OTLP per registry), the OTLP outlet adds cupti_exporter_otlp_exports_total{result}
// and its own series_dropped_total{outlet="otlp"} series. Sources report their
// own processed and dropped counts inside their snapshots.
//
// # HTTP
//
// [Server] serves the telemetry path (default /metrics; text, OpenMetrics and
// protobuf, the latter carrying native histograms), /healthz, /readyz (200
// when at least one source reports Ready, else 503 with one line per
// source/device and its reason), a landing page, and any handler added with
// [Server.Handle]. Every route goes through exporter-toolkit's web package
// (web.Serve on listeners the Server binds itself, so that a port in use gets
// a clear error; web.ListenAndServe for systemd sockets), so a web config
// file applies TLS and basic auth to all of them. With
// ServerConfig.HealthListenAddress set, a second plain-HTTP listener serves
// /healthz and /readyz alone, outside the web config, for probes that cannot
// authenticate (kubelet). Wire it with ServerConfig{Registry: e.Registry(), Status: e}.
//
// # Lifetime
//
// Register producers and status reporters before serving or calling
// [Exporter.Producers]; Register and RegisterStatus are safe to call
// concurrently with scrapes. Collect and Produce never block on sources, and
// concurrent scrapes only share read-only snapshots.
package exporter
