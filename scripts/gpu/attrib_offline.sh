#!/usr/bin/env bash
# Attributes a recording made by stage attrib/attrib2 offline (no GPU: runs on the build machine),
# with one estimator, and prints /metrics of the finished replay.
#   scripts/gpu/attrib_offline.sh REC[.gz] ESTIMATOR [PORT] > metrics.txt
# SPEED (default 0: as fast as it goes) is the replay speed. The join takes a process's
# connection time from the wall clock, so only SPEED=1 places it where the recording did: at
# other speeds a process counts as present from too early, and its untraced time is off (the
# two-GPU recording of run AZ: 1.0 s of untraced time per GPU at SPEED=0, 0.0014 s at SPEED=1;
# byte and ratio splits of traced kernels were the same).
set -euo pipefail
rec=$1 est=$2 port=${3:-19577}
bin=${BIN:-./cupti-exporter}
[ -n "${BIN:-}" ] || go build -o "$bin" ./cmd/cupti-exporter # always the checkout's code
tmp=$(mktemp -d); trap 'kill $pid 2>/dev/null; rm -rf "$tmp"' EXIT
case $rec in *.gz) gunzip -c "$rec" > "$tmp/r.rec"; rec=$tmp/r.rec ;; esac
"$bin" replay "$rec" --replay.speed=${SPEED:-0} --attribution.estimator="$est" --attribution.watermark=2s --attribution.top-kernels=0 --activity.top-kernels=100 ${EXTRA:-} \
  --web.listen-address="127.0.0.1:$port" > "$tmp/log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do
  grep -q 'PM sample source finished' "$tmp/log" && break
  kill -0 $pid 2>/dev/null || { cat "$tmp/log" >&2; exit 1; }
  sleep 0.5
done
sleep 4 # the watermark's wall-clock flush releases the last samples
curl -sf "127.0.0.1:$port/metrics"
