#!/usr/bin/env bash
# Builds a real OpenTelemetry Collector (otlpreceiver + debugexporter, v0.162.0) with the
# collector builder, once per machine, and prints the path of the binary. The e2e test
# TestOTLPCollector runs the demo against it when OTELCOL_BINARY names it.
#
# Cached under ${XDG_CACHE_HOME:-$HOME/.cache}/cupti-exporter-ci/otelcol-0.162.0 and rebuilt
# only when the binary is missing (first run about 2-3 minutes on 2 cores; cached: instant).
# v0.163+ components need a module the Go proxy here refuses, so the version is pinned.
set -euo pipefail

version=0.162.0
cache="${XDG_CACHE_HOME:-$HOME/.cache}/cupti-exporter-ci/otelcol-$version"
bin="$cache/otelcol-cupti-ci"
if [ -x "$bin" ]; then
	echo "$bin"
	exit 0
fi

mkdir -p "$cache"
builder="$cache/builder"
if [ ! -x "$builder" ]; then
	GOBIN="$cache" go install "go.opentelemetry.io/collector/cmd/builder@v$version" >&2
fi
cat >"$cache/builder.yaml" <<EOF
dist:
  name: otelcol-cupti-ci
  description: OpenTelemetry Collector for cupti-exporter CI (OTLP in, debug out)
  output_path: $cache/dist
receivers:
  - gomod: go.opentelemetry.io/collector/receiver/otlpreceiver v$version
exporters:
  - gomod: go.opentelemetry.io/collector/exporter/debugexporter v$version
EOF
"$builder" --config "$cache/builder.yaml" >&2
cp "$cache/dist/otelcol-cupti-ci" "$bin.tmp"
mv "$bin.tmp" "$bin"
echo "$bin"
