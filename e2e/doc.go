// Package e2e tests the real cupti-exporter binary: it builds it, runs it on the embedded
// demo recording on a loopback port, scrapes and lints /metrics, receives its OTLP pushes
// over gRPC and HTTP with in-process receivers, and checks that bad input fails cleanly.
// It also keeps docs/metrics.md in step with what the exporter emits (-update rewrites it).
package e2e
