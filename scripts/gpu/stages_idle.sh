# Idle-release stage of scripts/gpu/validate.sh (sourced; issue 13, docs/pm-sampling.md "Idle
# release"): (a) idle power with the exporter off / on with release / on without release,
# interleaved; (b) latency from a workload's first kernel to the first PM sample after the
# exporter takes the session back; (c) 5 s busy / 20 s idle x 3 with attrib_truth (known DRAM
# bytes read) against the exporter's DRAM byte counter. GPU 0; about 4.5 minutes.
# Knobs: IDLE_ROUNDS (3), IDLE_WIN (10 s per power window), IDLE_LAT_RUNS (2), IDLE_CYCLES (3).

IDLE_METRICS=${IDLE_METRICS:-dram__bytes_read.sum,dram__bytes_write.sum,TPC.TriageCompute.sm__cycles_active.avg.pct_of_peak_sustained_elapsed}

# idle_wait_state STATE PORT SECONDS: waits until GPU 0 reports STATE; says so if it never does.
idle_wait_state() {
  local i
  for i in $(seq 1 $((${3} * 5))); do
    curl -s "localhost:$2/metrics" | grep -E "^cupti_pm_sampling_state\{" | grep "gpu=\"0\"" | grep -q "state=\"$1\".*} 1" && return 0
    sleep 0.2
  done
  say "gpu 0 never reached state $1 in $3 s"; return 1; }

idle_power_window() { # idle_power_window LABEL ROUND [CSV]
  local csv=${3:-$L/idle-power.csv}
  echo "# $1 $2 $(date +%s.%N)" >> "$csv"
  timeout "${IDLE_WIN:-10}" nvidia-smi -i 0 --query-gpu=power.draw,clocks.sm --format=csv,noheader,nounits -lms 200 \
    | sed "s/^/$1,$2,/" >> "$csv"; }

idle_cpu() { # idle_cpu PORT -> CPU ticks (utime + stime) of the exporter on PORT
  awk '{ print $14 + $15 }' "/proc/$(cat "$L/exporter.$1.pid")/stat" 2>/dev/null || echo 0; }

# idle_latency TAG WORKENV EXPORTER_ARGS...: wake latency of IDLE_LAT_RUNS workloads that hold
# their context idle past a 3 s release delay, then launch (idle_kernels.py). WORKENV is
# variable assignments for the workload ("" for none). Logs exp-TAG.log, TAG-work-N.log and
# TAG-metrics.txt; the analysis goes to the summary.
idle_latency() {
  local tag=$1 workenv=$2 r; shift 2
  start_exporter "$L/exp-$tag.log" 9477 --pmsample.idle-release-after=3s "$@" || return
  idle_wait_state idle-released 9477 15
  for r in $(seq 1 "${IDLE_LAT_RUNS:-2}"); do
    env $workenv python3 scripts/gpu/idle_kernels.py 8 2 > "$L/$tag-work-$r.log" 2>&1
    idle_wait_state idle-released 9477 10
  done
  scrape "$L/$tag-metrics.txt"; stop_exporter 9477
  python3 scripts/gpu/idle_compare.py latency "$L/exp-$tag.log" "$L"/$tag-work-*.log | tee -a "$S"
}

idle_pct() { awk -v a="$1" -v b="$2" -v hz="$(getconf CLK_TCK)" -v w="${IDLE_WIN:-10}" 'BEGIN { printf "%.1f", (b - a) * 100 / hz / w }'; }

stage_idle() {
  say "== idle (release the PM session of an idle GPU: power, wake latency, busy/idle bytes)"
  mkdir -p /run/cupti-exporter; : > "$L/idle-power.csv"
  # (a) power, interleaved: off, on with release (2 s delay, measured once released), on without.
  local r
  for r in $(seq 1 "${IDLE_ROUNDS:-3}"); do
    sleep 2; idle_power_window off "$r"
    start_exporter "$L/exp-idle-rel-$r.log" 9477 --no-activity.enabled --pmsample.idle-release-after=2s || return
    local c0 c1
    if idle_wait_state idle-released 9477 15; then
      c0=$(idle_cpu 9477); idle_power_window release "$r"; c1=$(idle_cpu 9477)
      say "round $r released: exporter CPU $(idle_pct "$c0" "$c1") % of a core; retakes while idle (want 0): $(grep -c 'pm session retaken' "$L/exp-idle-rel-$r.log") $(grep -o 'signal=[a-z_]*' "$L/exp-idle-rel-$r.log" | sort | uniq -c | tr '\n' ' ')"
    fi
    stop_exporter 9477
    start_exporter "$L/exp-idle-norel-$r.log" 9477 --no-activity.enabled --pmsample.idle-release-after=0 || return
    sleep 2; c0=$(idle_cpu 9477); idle_power_window norelease "$r"; c1=$(idle_cpu 9477)
    say "round $r not released: exporter CPU $(idle_pct "$c0" "$c1") % of a core"
    stop_exporter 9477
  done
  python3 scripts/gpu/idle_compare.py power "$L/idle-power.csv" | tee -a "$S"

  # (b) latency: a process that holds its context idle past the release delay, then launches.
  idle_latency idle-lat "" --no-activity.enabled || return
  say "idle counters: $(grep -E '^cupti_pm_idle_[a-z_]+\{.*gpu="0"' "$L/idle-lat-metrics.txt" | sed 's/{[^}]*}//' | tr '\n' ' ')"

  # (c) 5 s busy / 20 s idle x 3, known DRAM bytes read (attrib_truth), 5 s release delay.
  attrib_build || return
  start_exporter "$L/exp-idle-cyc.log" 9477 --no-activity.enabled --pmsample.idle-release-after=5s \
    --pmsample.window=5s --pmsample.metrics="$IDLE_METRICS" || return
  idle_wait_state idle-released 9477 15
  scrape "$L/idle-cyc-before.txt"
  : > "$L/idle-cyc-scrapes.txt"
  ( while :; do echo "# t $(date +%s.%N)"; curl -s localhost:9477/metrics \
      | grep -E '^cupti_(sm_active_ratio|dram_read_bytes_total|pm_sampling_state|pm_idle_)[^ ]*gpu="0"'; sleep 1; done \
      >> "$L/idle-cyc-scrapes.txt" ) & local sp=$!
  : > "$L/idle-cyc-phases.txt"
  for r in $(seq 1 "${IDLE_CYCLES:-3}"); do
    echo "busy_start $(date +%s.%N)" >> "$L/idle-cyc-phases.txt"
    "$G/attrib_truth" 5 1000 "$r" "$L/idle-truth-$r.json" > "$L/idle-cyc-work-$r.log" 2>&1
    echo "busy_end $(date +%s.%N)" >> "$L/idle-cyc-phases.txt"
    sleep 20
  done
  kill $sp; wait $sp 2>/dev/null
  scrape "$L/idle-cyc-after.txt"; stop_exporter 9477
  python3 scripts/gpu/idle_compare.py cycle "$L" | tee -a "$S"
}

# Wake latency of an untraced workload alone, part (b) of stage idle; about 40 s.
stage_idlelat() {
  say "== idlelat (wake latency of an untraced workload resuming after idle)"
  mkdir -p /run/cupti-exporter
  idle_latency idle-lat "" --no-activity.enabled
}

# The launch watch's CUPTI callback ids (activity/inject/launch_cbids.h, written without
# NVIDIA headers) against the machine's real headers: a name missing or a value different
# fails the compile.
stage_cbidcheck() {
  say "== cbidcheck"
  local inc=${CUDA_INCLUDE:-/usr/local/cuda/targets/x86_64-linux/include}
  if gcc -std=c11 -Wall -Werror -I "$inc" -I activity/inject -o "$L/cbid_check" scripts/gpu/cbid_check.c > "$L/cbid-check.log" 2>&1; then
    say "$("$L/cbid_check")"
  else
    say "cbid check FAILED: $(grep -m3 -E 'error' "$L/cbid-check.log")"
  fi
}

# Wake latency of a traced workload: the injected library flushes every 20 ms once its
# process has been quiet for 1 s (CUPTI_EXPORTER_QUIET_FLUSH_INTERVAL_MS), so the first
# kernel after the idle hold reaches the exporter as a record, ahead of NVML's signals; and
# while quiet it watches the API calls (launch frames, activity/inject/launch.c), so the
# first launch reaches it within about 20 ms of the call, before the GPU has run it.
# Same workload and analysis as (b) of stage_idle; about 40 s.
stage_idletraced() {
  say "== idletraced (wake on the first kernel record of an injected workload)"
  mkdir -p /run/cupti-exporter
  idle_latency idle-traced "CUDA_INJECTION64_PATH=$INJ CUPTI_EXPORTER_SOCKET=$SOCK CUPTI_EXPORTER_LOG=2" \
    --activity.socket=$SOCK || return
  say "quiet flushes, launch frames: $(grep -hoE 'quiet flushes=[0-9]*|launch frames=[0-9]*' "$L"/idle-traced-work-*.log | tr '\n' ' ')"
}

# Which NVML signal shows the first kernel on an idle GPU soonest, with no exporter and no PM
# session: wakeprobe polls every 5 ms while idle_kernels.py holds its context 6 s, then runs
# matmuls (wake_compare.py lines them up). About 15 s a round.
stage_wakeprobe() {
  say "== wakeprobe (NVML signals after the first kernel on an idle GPU, polled every 5 ms)"
  local r
  for r in $(seq 1 "${WAKE_ROUNDS:-3}"); do
    "$G/wakeprobe" -for 11s -poll 5ms > "$L/wake-probe-$r.log" 2> "$L/wake-probe-$r.err" &
    local p=$!
    sleep 1; python3 scripts/gpu/idle_kernels.py 6 2 > "$L/wake-work-$r.log" 2>&1
    wait $p; say "round $r: $(python3 scripts/gpu/wake_compare.py "$L/wake-probe-$r.log" "$L/wake-work-$r.log" 2>&1)"
  done
}
