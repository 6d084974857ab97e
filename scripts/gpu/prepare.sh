#!/usr/bin/env bash
# Builds, on the build machine, what the GPU validation carries: the exporter binary, the
# injection library and the C probes (sources only; they are compiled on the GPU machine
# against its real CUDA headers). Everything lands in .gpu/ (ignored by git: add
# "/.gpu/" to .git/info/exclude) and is carried with the device call.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .gpu
# PREPARE_TAGS=cpuprofile: a binary that writes a CPU profile when CUPTI_EXPORTER_CPUPROFILE is set
# (cmd/cupti-exporter/cpuprofile.go; stage pmcost); PREPARE_TAGS=jointap: one that records what its
# attribution join is given when CUPTI_EXPORTER_JOINTAP is set (pipeline/jointap.go; SHARE_TAP=1)
go build -trimpath -tags "${PREPARE_TAGS:-}" -ldflags="-s -w" -o .gpu/cupti-exporter ./cmd/cupti-exporter
go build -trimpath -ldflags="-s -w" -o .gpu/wakeprobe ./scripts/gpu/wakeprobe
go build -trimpath -ldflags="-s -w" -o .gpu/gpmprobe ./scripts/gpu/gpmprobe
# the Go tests that need the real CUPTI (stage gotest)
go test -c -o .gpu/cupti.test ./internal/cupti
go test -c -o .gpu/pmsample.test ./pmsample
make -s -C activity/inject
cp activity/inject/build/libcupti_exporter_inject.so .gpu/
# nvml.h of the go-nvml the exporter binds, for the C probe nvmlcost (stages gpmcost, gpmids)
cp "$(go list -m -f '{{.Dir}}' github.com/NVIDIA/go-nvml)/pkg/nvml/nvml.h" .gpu/nvml.h && chmod u+w .gpu/nvml.h
probes=${PROBES:-../shared/probes}
[ -d .gpu/probes ] || cp -r "$probes" .gpu/probes
# The straggler stages (stages_straggler.sh): the chart's alert and recording rules as a rules file,
# and Debian's Prometheus (the GPU machine has none; 14 MB gzipped) when this machine has it.
CUPTI_RULES_OUT="$PWD/.gpu/rules.yaml" go test -count=1 -run '^TestWriteRulesFile$' ./helm/ > /dev/null
rm -f .gpu/rules-otlp.yaml
if command -v prometheus > /dev/null; then cp "$(command -v prometheus)" .gpu/prometheus; gzip -f .gpu/prometheus; fi
# A device call carries at most 64 MiB: the binaries travel gzipped; validate.sh unpacks them.
gzip -f .gpu/nvml.h .gpu/gpmprobe .gpu/wakeprobe .gpu/cupti-exporter .gpu/cupti.test .gpu/pmsample.test
ls -l .gpu
