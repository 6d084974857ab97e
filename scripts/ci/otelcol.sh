#!/usr/bin/env bash
# Builds a real OpenTelemetry Collector v0.162.0 with the collector builder, once per machine,
# and prints the path of the binary. Components: the OTLP receiver; the debug exporter, which
# e2e/otelcol_test.go (TestOTLPCollector) reads; the contrib prometheusremotewrite exporter,
# through which dashboards/prometheus_fleet_e2e_test.go (TestFleetEndToEnd) writes to a central Prometheus.
# Both tests run when OTELCOL_BINARY names the binary (.ci/run sets it).
#
# Cached under ${XDG_CACHE_HOME:-$HOME/.cache}/cupti-exporter-ci/otelcol-0.162.0/<hash of the
# component list>/, so a changed list builds a new binary; the builder itself is shared.
# Building it took 3 min 22 s on the shared 2-core CI machine with the core collector's modules
# already downloaded (the remote-write exporter adds about 1.5 CPU-minutes of compiling);
# cached: instant. v0.163+ components need a module the Go proxy here refuses, so the version is
# pinned; the contrib prometheusexporter v0.162.0 is refused too, hence remote write.
set -euo pipefail

version=0.162.0
components="receivers:
  - gomod: go.opentelemetry.io/collector/receiver/otlpreceiver v$version
exporters:
  - gomod: go.opentelemetry.io/collector/exporter/debugexporter v$version
  - gomod: github.com/open-telemetry/opentelemetry-collector-contrib/exporter/prometheusremotewriteexporter v$version"
base="${XDG_CACHE_HOME:-$HOME/.cache}/cupti-exporter-ci/otelcol-$version"
cache="$base/$(printf '%s' "$components" | sha256sum | cut -c1-12)"
bin="$cache/otelcol-cupti-ci"
if [ -x "$bin" ]; then
	echo "$bin"
	exit 0
fi

mkdir -p "$cache"
builder="$base/builder"
if [ ! -x "$builder" ]; then
	GOBIN="$base" go install "go.opentelemetry.io/collector/cmd/builder@v$version" >&2
fi
cat >"$cache/builder.yaml" <<MANIFEST
dist:
  name: otelcol-cupti-ci
  description: OpenTelemetry Collector for cupti-exporter CI (OTLP in; debug and Prometheus remote write out)
  output_path: $cache/dist
$components
MANIFEST
"$builder" --config "$cache/builder.yaml" >&2
cp "$cache/dist/otelcol-cupti-ci" "$bin.tmp"
mv "$bin.tmp" "$bin"
echo "$bin"
