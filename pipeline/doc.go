// Package pipeline assembles the exporter: the sources (the CUPTI PM sampler or a
// recording, the activity socket, NVML health and GPM, the pod informers), the consumers
// they feed (the PM aggregator, the attribution join, the idle controller, a recording
// writer) and the exporter that serves them on /metrics and pushes them over OTLP. Serve,
// Replay and Demo run the same assembly over live GPUs or a recording; Record writes what
// the live sources produce to a file.
//
// Config is the whole configuration (YAML and flags), made of the sections the packages own
// (attribution.Config, health.Config, receiver.Config, exporter.WebSettings, ...);
// DefaultConfig and Validate gather their defaults and checks and add those that span
// sections. cmd/cupti-exporter parses the command line into it, picks the
// subcommand and owns the process (signals, exit codes); everything between a Config and
// a running exporter is here (docs/architecture.md).
package pipeline
