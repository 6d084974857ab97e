#!/usr/bin/env bash
# GPU validation: runs on the GPU machine from the repo root, with the binary, the injection
# library and the probes carried in .gpu/ (see scripts/gpu/README.md). Writes logs and a summary
# to $OUT (summary.txt + logs.tar.gz).
# usage: scripts/gpu/validate.sh STAGE...   stages: see scripts/gpu/README.md
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
# Logs live outside $OUT (a device call brings back at most 8 files) and are packed into
# $OUT/logs.tar.gz after every stage, so a run cut off at its time limit still returns them.
LB=$(mktemp -d); G=$(pwd)/.gpu; L=$LB/logs; mkdir -p "$L"
for z in "$G"/*.gz; do [ -e "$z" ] && gunzip -f "$z"; done # prepare.sh gzips the binaries
BIN=$G/cupti-exporter; INJ=$G/libcupti_exporter_inject.so
I=/usr/local/cuda/targets/x86_64-linux/include; LIB=/usr/local/cuda/targets/x86_64-linux/lib
export LD_LIBRARY_PATH=$LIB:${LD_LIBRARY_PATH:-}
S=$OUT/summary.txt
say() { echo "$*" | tee -a "$S"; }
W="python3 scripts/gpu/workload.py"
SOCK=/run/cupti-exporter/activity.sock
PMARGS=${PMARGS:-}
scrape() { curl -s "localhost:${2:-9477}/metrics" > "$1"; }
val() { # val FILE NAME_REGEX -> sum of matching series values
  awk -v re="$2" '$0 !~ /^#/ && $1 ~ re { s += $NF } END { printf "%.6g", s }' "$1"; }
start_exporter() { # start_exporter LOG PORT ARGS...
  local log=$1 port=$2; shift 2
  # No health listener (two exporters run side by side in some stages); the pause API is opt-in.
  # Every series (--series.extra=all): the stages read the decode timings, window minimums and
  # loss reasons the defaults leave out (docs/sizing.md "An idle GPU"); SERIES_EXTRA= serves the defaults.
  local extra=(); [ -n "${SERIES_EXTRA-all}" ] && extra=(--series.extra="${SERIES_EXTRA-all}")
  setsid "$BIN" serve --web.listen-address=":$port" --web.health-listen-address= --web.enable-pm-sampling-api "${extra[@]}" "$@" > "$log" 2>&1 &
  echo $! > "$L/exporter.$port.pid"
  for _ in $(seq 1 50); do curl -sf "localhost:$port/healthz" >/dev/null && return 0; sleep 0.2; done
  say "exporter on :$port did not come up"; tail -20 "$log" | tee -a "$S"; return 1; }
# stop_exporter PORT: SIGTERM, up to 10 s for a clean exit, then SIGKILL; says how it ended and
# whether the log shows a crash (a SIGSEGV at shutdown was found on the GPU once).
stop_exporter() {
  local p i rc; p=$(cat "$L/exporter.$1.pid" 2>/dev/null) || return 0
  kill "$p" 2>/dev/null
  for i in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.2; done
  kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null; rc=$?
  say "exporter :$1 stopped rc=$rc after $((i / 5)) s $(grep -m1 -hE 'SIGSEGV|panic|fatal error' "$L"/exp-*.log 2>/dev/null)"
  rm -f "$L/exporter.$1.pid"; true; }

stage_env() {
  say "== env $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,driver_version --format=csv,noheader | tee -a "$S"
  ls -l $LIB/libcupti.so* | tee -a "$S"
  python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda, torch.cuda.device_count())' | tee -a "$S"
  "$BIN" version 2>&1 | head -3 | tee -a "$S"
  cat /proc/driver/nvidia/params 2>/dev/null | grep -i RmProfilingAdminOnly | tee -a "$S"
  [ -n "${NOPROBES:-}" ] && return
  (cd "$G/probes" && nvcc -O2 -std=c++17 -o "$G/pmprobe" pmprobe.cu -I$I -L$LIB -lcupti -lnvperf_host -lnvperf_target -lcuda > "$L/build-pmprobe.log" 2>&1) && say "pmprobe built"
  gcc -O2 -shared -fPIC -o "$G/libinjprobe.so" "$G/probes/injprobe.c" -I$I -L$LIB -lcupti > "$L/build-injprobe.log" 2>&1 && say "injprobe built"
}

stage_layout() {
  say "== layout"
  bash scripts/gpu/layout_check.sh > "$L/layout.log" 2>&1; rc=$?
  tail -5 "$L/layout.log" | tee -a "$S"; say "layout_check rc=$rc"
}

source scripts/gpu/stages.sh
for f in scripts/gpu/stages_*.sh; do source "$f"; done
# Stopped by a timeout (timeout sends TERM), still bring the logs of the stage cut off back.
trap 'cp "$S" "$L/" 2>/dev/null; tar -C "$LB" -czf "$OUT/logs.tar.gz" logs; exit 143' TERM

for st in "$@"; do "stage_${st//-/_}"; cp "$S" "$L/" 2>/dev/null; tar -C "$LB" -czf "$OUT/logs.tar.gz" logs; done
cp "$S" "$L/" 2>/dev/null
tar -C "$LB" -czf "$OUT/logs.tar.gz" logs && rm -rf "$LB"
