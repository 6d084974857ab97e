#!/usr/bin/env bash
# check-rules.sh: render the chart's PrometheusRule to a plain Prometheus rules file and
# check it with promtool (syntax and the unit tests of the alert and recording rules in
# helm/cupti-exporter/tests/rules_test.yaml, and of the distributed-training rules in
# rules_training_test.yaml).
#
# Needs Go and promtool (Debian: apt-get install -y prometheus). Run from anywhere:
#   scripts/ci/check-rules.sh
set -euo pipefail

root="$(cd "$(dirname "$0")/../.." && pwd)"
if ! command -v promtool >/dev/null; then
	echo "check-rules.sh: promtool not found: install it (apt-get install -y prometheus)" >&2
	exit 1
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# The Go test renders the chart with the Helm SDK (release "gpu", node mode,
# ServiceMonitor, PrometheusRule and its recording rules on) and writes spec.groups as rules.yaml.
(cd "$root" && CUPTI_RULES_OUT="$work/rules.yaml" go test -count=1 -run '^TestWriteRulesFile$' ./helm/)
test -s "$work/rules.yaml" || { echo "check-rules.sh: no rules written to $work/rules.yaml" >&2; exit 1; }
test -s "$work/rules-otlp.yaml" || { echo "check-rules.sh: no rules written to $work/rules-otlp.yaml" >&2; exit 1; }
cp "$root/helm/cupti-exporter/tests/rules_test.yaml" "$root/helm/cupti-exporter/tests/rules_otlp_test.yaml" \
	"$root/helm/cupti-exporter/tests/rules_training_test.yaml" "$work/"

cd "$work"
promtool check rules rules.yaml rules-otlp.yaml
promtool test rules rules_test.yaml rules_otlp_test.yaml rules_training_test.yaml
