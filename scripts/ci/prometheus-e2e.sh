#!/usr/bin/env bash
# prometheus-e2e.sh: a real Prometheus server (Debian's 2.42 here) scrapes the exporter's
# --demo and the synthetic two-GPU replay, with and without native histograms, with the
# labels prometheus-operator gives a ServiceMonitor target, and loads the chart's alert
# rules (the replays serve the health and attribution families; one stand-in target, the
# health source on go-nvml's mock DGX H100, serves an XID, which no recorded GPU raised);
# every dashboard expression (panels and variables) and every alert rule is then
# evaluated through the HTTP API. Each must return data or be listed, with its reason, in
# dashboards/expected-empty.yaml; no alert may be pending on the healthy replays; and every
# input series of helm/cupti-exporter/tests/rules_test.yaml must have a label set that
# Prometheus really stores; no device series may carry the exporter pod's own pod label. The test is dashboards/prometheus_e2e_test.go.
#
# Then the fleet paths of docs/fleet.md (dashboards/prometheus_fleet_e2e_test.go): two exporters scraped
# by a Prometheus in agent mode that remote-writes to a central Prometheus, and pushing OTLP
# to an OpenTelemetry Collector that remote-writes to a second one; every dashboard
# expression and alert operand that returns data on a direct scrape must return data on both
# central servers, and the gateway's CuptiExporterDown must fire for an exporter killed.
#
# Needs Go, the prometheus server (Debian: apt-get install -y prometheus; the service is
# not started: the tests run their own servers on 127.0.0.1 with temporary storage) and the
# Collector of scripts/ci/otelcol.sh (OTELCOL_BINARY; built here when unset, then cached).
#   scripts/ci/prometheus-e2e.sh
set -euo pipefail

root="$(cd "$(dirname "$0")/../.." && pwd)"
if ! command -v prometheus >/dev/null; then
	echo "prometheus-e2e.sh: the prometheus server is not installed (apt-get install -y prometheus)" >&2
	exit 1
fi
prometheus --version 2>&1 | head -n 1
cd "$root"
OTELCOL_BINARY="${OTELCOL_BINARY:-$(bash scripts/ci/otelcol.sh)}"
export OTELCOL_BINARY
start=$(date +%s)
set +e
# One test binary for both: they share the exporter's build (dashboards/e2e_build_test.go).
CUPTI_PROMETHEUS_E2E=1 CUPTI_FLEET_E2E=1 go test -count=1 -v -run '^Test(Prometheus|Fleet)EndToEnd$' ./dashboards/ 2>&1 |
	grep -Ev '^=== (RUN|PAUSE|CONT)' | tail -n 200
rc=${PIPESTATUS[0]}
set -e
echo "prometheus-e2e: $(( $(date +%s) - start )) s"
exit "$rc"
