# Issue 32 (GPM filling the gap, GPM mode): sourced by validate.sh.

# holders FILE: every process that maps a profiling library (nvperf, CUPTI, an injection
# library) or has a GPU device open, with its command line: who may hold the PM counters.
holders() {
  local p libs dev
  for p in /proc/[0-9]*; do
    libs=$(grep -oE '[^/ ]*(nvperf|cupti|njection|ToolsInjection|nvidia-ml)[^/ ]*$' "$p/maps" 2>/dev/null | sort -u | tr '\n' ' ')
    dev=$(ls -l "$p/fd" 2>/dev/null | grep -oE '/dev/nvidia[0-9]+' | sort -u | tr '\n' ' ')
    [ -n "$libs$dev" ] && echo "${p#/proc/} $(cat "$p/comm" 2>/dev/null) | libs: $libs| dev: $dev| $(tr '\0' ' ' < "$p/cmdline" 2>/dev/null | cut -c1-160)"
  done
  nvidia-smi --query-compute-apps=pid,process_name --format=csv,noheader
}

# pmscrapes FILE PORT PID: the curated PM series and the state every second while PID runs,
# each scrape headed by "# <epoch seconds>".
pmscrapes() {
  while kill -0 "$3" 2>/dev/null; do
    echo "# $(date +%s.%N)"
    curl -s "localhost:$2/metrics" | grep -E '^cupti_(sm_|graphics|tensor|dram_active|fp[0-9]+_pipe|pcie|nvlink|pm_sampling_state)'
    sleep 1
  done > "$1"
}

# gpmfacts: which GPM metrics GPU 0 serves, what they read beside the exporter's PM session
# (1 ms, the default set) on the development workloads, how often they refresh (100, 50 and
# 20 ms periods on bursts), what they read while ncu profiles (exporter paused), which
# processes hold the counters then, and what reading GPM costs. About 150 s.
stage_gpmfacts() {
  say "== gpmfacts"
  nvidia-smi -q | grep -E 'Product Name|Driver Version|CUDA Version|Current +: (Enabled|Disabled|N/A)' | head -5 | tee -a "$S"
  start_exporter "$L/exp-gpmfacts.log" 9477 --pmsample.window=10s || return
  "$G/gpmprobe" -for 400s -period 100ms > "$L/gpm-100ms.txt" 2> "$L/gpm-100ms.err" & local gp=$!
  python3 -u scripts/gpu/workload.py seq idle:12,mm:12,copy:12,fp16:12,fp32:12,fp64:12,d2d:12,burst:14 > "$L/gpmfacts-wl.log" 2>&1 & local wp=$!
  pmscrapes "$L/pm-scrapes.txt" 9477 $wp & local sp=$!
  local i; for i in $(seq 1 300); do grep -q 'phase mm start' "$L/gpmfacts-wl.log" && break; sleep 0.2; done
  sleep 3; holders > "$L/holders-plain.txt" 2>&1 # a PyTorch process beside the exporter's session
  for i in $(seq 1 600); do grep -q 'phase burst start' "$L/gpmfacts-wl.log" && break; sleep 0.2; done
  "$G/gpmprobe" -for 12s -period 50ms > "$L/gpm-50ms.txt" 2>&1 &
  "$G/gpmprobe" -for 12s -period 20ms -ids 1,2,5 > "$L/gpm-20ms.txt" 2>&1 &
  wait $wp; wait $sp
  say "workload: $(grep -c 'phase .* end' "$L/gpmfacts-wl.log") phases; $(grep -m1 -iE 'error|Traceback' "$L/gpmfacts-wl.log")"
  # ncu profiles a matmul while the exporter is paused; GPM keeps reading at 100 ms.
  curl -s -XPOST "localhost:9477/api/v1/pm-sampling/pause?duration=90s" > /dev/null
  echo "# ncu start $(date +%s.%N)" >> "$L/gpmfacts-wl.log"
  timeout 100 ncu --clock-control none -c 15 --metrics sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum python3 -u scripts/gpu/workload.py mm 20 > "$L/gpm-ncu.log" 2>&1 & local np=$!
  sleep 12; holders > "$L/holders-ncu.txt" 2>&1
  sleep 10; holders > "$L/holders-ncu2.txt" 2>&1
  wait $np; say "ncu rc=$? profiled $(grep -c '^  [a-z_]*.*(' "$L/gpm-ncu.log") kernels; $(grep -m1 -E '==ERROR==' "$L/gpm-ncu.log")"
  echo "# ncu end $(date +%s.%N)" >> "$L/gpmfacts-wl.log"
  curl -s -XPOST localhost:9477/api/v1/pm-sampling/resume > /dev/null
  # The counters held by a second exporter (a CUPTI PM client that is no profiler).
  start_exporter "$L/exp-gpmfacts-2.log" 9479; sleep 3; holders > "$L/holders-exporter.txt" 2>&1; stop_exporter 9479
  kill $gp; wait $gp
  stop_exporter 9477
  say "gpm support: $(head -1 "$L/gpm-100ms.txt")"
  say "gpm cost: $(grep -h '# cpu_s' "$L"/gpm-*.txt | tr '\n' ' ')"
  say "holders while ncu: $(wc -l < "$L/holders-ncu.txt") lines"
  python3 scripts/gpu/gpm_compare.py facts "$L" 2>&1 | tee -a "$S"
}

# scrape3 TAG: the three exporters of gpmcompare at once, into gc-TAG-PORT.txt, with the time.
# It waits for its own scrapes only (a bare wait would wait for the exporters and the
# workload too, which run in the background of the same shell: run BS hung there).
scrape3() {
  local p pids=()
  for p in 9477 9479 9481; do { echo "# $(date +%s.%N)"; curl -s -m 5 "localhost:$p/metrics"; } > "$L/gc-$1-$p.txt" & pids+=($!); done
  wait "${pids[@]}"
}

# cpu_of PORT: user + system CPU seconds of an exporter so far; rss_of PORT: its VmRSS (kB).
cpu_of() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.3f", ($14 + $15) / hz }' "/proc/$(cat "$L/exporter.$1.pid")/stat"; }
rss_of() { awk '/VmRSS/ { print $2 }' "/proc/$(cat "$L/exporter.$1.pid")/status"; }

# gpmcompare (issue 32): three exporters side by side at their defaults but the window (15 s):
# :9477 PM sampling at 1 ms (gpm.mode=fill, the default), :9479 gpm.mode=only, :9481
# gpm.mode=only without health and activity (GPM's own cost). On the checking workloads
# (not those gpmfacts developed with: FP32 and FP64 GEMMs, 30 % bursts of a smaller matmul,
# host-to-device copies), each exporter scraped at 1.6 s and 16.6 s into each 17 s phase:
# GPM's window means against PM sampling's, PCIe rates from the counters, each exporter's CPU
# and RSS over the phases. Then ncu profiles a matmul while :9477 is paused and resumed in
# the middle: which source serves :9477's curated families, its state, /readyz. About 110 s.
stage_gpmcompare() {
  say "== gpmcompare"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$S"
  SERIES_EXTRA= start_exporter "$L/exp-gc-pm.log" 9477 --pmsample.window=15s || return
  SERIES_EXTRA= start_exporter "$L/exp-gc-gpm.log" 9479 --pmsample.window=15s --gpm.mode=only --no-activity.enabled || return
  SERIES_EXTRA= start_exporter "$L/exp-gc-gpmbare.log" 9481 --pmsample.window=15s --gpm.mode=only --no-activity.enabled --no-health.enabled || return
  python3 -u scripts/gpu/workload.py seq sgemm:17,dgemm:17,burst30:17,h2d:17 > "$L/gc-wl.log" 2>&1 & local wp=$!
  local ph t0 c0=() c1=() p
  for ph in sgemm dgemm burst30 h2d; do
    for _ in $(seq 1 400); do grep -q "phase $ph start" "$L/gc-wl.log" && break; sleep 0.1; done
    t0=$(awk -v p="$ph" '$1 == "phase" && $2 == p && $3 == "start" { print $4 }' "$L/gc-wl.log")
    [ "$ph" = sgemm ] && for p in 9477 9479 9481; do c0+=("$(cpu_of $p)"); done
    sleep "$(python3 -c "import time; print(max(0, $t0 + 1.6 - time.time()))")"; scrape3 "$ph-a"
    sleep "$(python3 -c "import time; print(max(0, $t0 + 16.6 - time.time()))")"; scrape3 "$ph-b"
  done
  for p in 9477 9479 9481; do c1+=("$(cpu_of $p)"); done
  local span; span=$(python3 -c "import re; t=[float(l.split()[3]) for l in open('$L/gc-wl.log') if re.match(r'phase \S+ (start|end)', l)]; print(t[-1]-t[0])")
  wait $wp
  say "exporter CPU over the $span s of the phases: pm-1ms $(python3 -c "print(f'{(${c1[0]}-${c0[0]})/$span*100:.2f} %')"), gpm-only $(python3 -c "print(f'{(${c1[1]}-${c0[1]})/$span*100:.2f} %')"), gpm-only bare $(python3 -c "print(f'{(${c1[2]}-${c0[2]})/$span*100:.2f} %')") of a core; RSS $(rss_of 9477) / $(rss_of 9479) / $(rss_of 9481) kB"
  python3 scripts/gpu/gpm_compare.py compare "$L" 2>&1 | tee -a "$S"
  # A second exporter while :9477 holds the counters: busy, its curated families from GPM,
  # and who holds the counters.
  SERIES_EXTRA= start_exporter "$L/exp-gc-second.log" 9483 --pmsample.window=15s --no-activity.enabled
  sleep 4; curl -s localhost:9483/metrics > "$L/gc-second.txt"; curl -s localhost:9483/readyz > "$L/gc-second-readyz.txt"
  stop_exporter 9483
  # ncu profiles a matmul while :9477 is paused: its curated families from GPM meanwhile.
  curl -s -XPOST "localhost:9477/api/v1/pm-sampling/pause?duration=60s" > /dev/null
  timeout 60 ncu --clock-control none -c 3 --metrics sm__throughput.avg.pct_of_peak_sustained_elapsed python3 -u scripts/gpu/workload.py mm 10 > "$L/gc-ncu.log" 2>&1 & local np=$!
  sleep 11; curl -s localhost:9477/metrics > "$L/gc-ncu.txt"
  wait $np; say "ncu rc=$? $(grep -m1 '==ERROR==' "$L/gc-ncu.log") $(grep -m1 -E '==PROF== Disconnected' "$L/gc-ncu.log")"
  curl -s -XPOST localhost:9477/api/v1/pm-sampling/resume > /dev/null; sleep 2; curl -s localhost:9477/metrics > "$L/gc-after.txt"
  for t in second ncu after; do
    say "$t: state $(grep -h '^cupti_pm_sampling_state{' "$L/gc-$t.txt" | sed 's/.*state="\([^"]*\)".*/\1/' | tr '\n' ' ')| $(grep -hE '^cupti_(sm_active|tensor_pipe_active|dram_active)_ratio\{' "$L/gc-$t.txt" | sed -E 's/^(cupti_[a-z_]+)\{.*(source="[a-z]*").*\} /\1 \2 /' | tr '\n' ' ')| holder: $(grep -h '^cupti_pm_counters_holder_info' "$L/gc-$t.txt" | sed -E 's/.*(command="[^"]*").*(library="[^"]*").*(pid="[0-9]+").*/\1 \2 \3/' | tr '\n' ' ')"
  done
  say "second exporter's readyz: $(grep -E 'pmsample|gpm' "$L/gc-second-readyz.txt" | tr '\n' ' ' | cut -c1-700)"
  say "exporter :9477 pid $(cat "$L/exporter.9477.pid")"
  stop_exporter 9481; stop_exporter 9479; stop_exporter 9477
}

# gpmcost (issue 32 item 3, run CA): what NVML's calls cost and what gpm.mode=only costs above
# them, under one bf16 matmul on GPU 0. nvmlcost (nvmlcost.c, built here against the carried
# nvml.h): (a) every call NVML health makes and GPM's sample and metrics calls, thread CPU per
# call (`calls`); (b) the floor alone, one nvmlGpmSampleGet and one nvmlGpmMetricsGet of the
# exporter's 9 ids every 100 ms and nothing else, GPMCOST_FLOOR_S (10) s; (c) side by side for
# GPMCOST_S (25) s: the floor again and four exporters in gpm.mode=only without activity, the
# build before the change (.gpu/cupti-exporter-main) and this one, each with and without NVML
# health at its defaults; each process's CPU over the same window, RSS; a CPU profile of this
# build without health ($OUT/cpu-gpmonly.pprof, a cpuprofile build). About 60 s.
stage_gpmcost() {
  say "== gpmcost (issue 32 item 3: gpm.mode=only against NVML's floor)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$S"
  gcc -O2 -Wno-deprecated-declarations -o "$G/nvmlcost" scripts/gpu/nvmlcost.c -I"$G" -l:libnvidia-ml.so.1 > "$L/build-nvmlcost.log" 2>&1 ||
    { say "nvmlcost build failed: $(tail -3 "$L/build-nvmlcost.log")"; return; }
  local secs=${GPMCOST_S:-25} p
  $W mm 300 > "$L/gpmcost-load.log" 2>&1 & local lp=$!; sleep 4
  "$G/nvmlcost" calls 20 > "$L/nvmlcost-calls.txt" 2>&1; say "nvmlcost calls rc=$?:"; tee -a "$S" < "$L/nvmlcost-calls.txt"
  "$G/nvmlcost" floor "${GPMCOST_FLOOR_S:-10}" 100 9 2>&1 | sed 's/^/alone: /' | tee -a "$S"
  local main=$G/cupti-exporter-main
  SERIES_EXTRA= BIN=$main start_exporter "$L/exp-gpmcost-before-bare.log" 9477 --gpm.mode=only --no-activity.enabled --no-health.enabled || return
  export CUPTI_EXPORTER_CPUPROFILE=$OUT/cpu-gpmonly.pprof,5s,$((secs - 2))s
  SERIES_EXTRA= start_exporter "$L/exp-gpmcost-after-bare.log" 9479 --gpm.mode=only --no-activity.enabled --no-health.enabled || return
  unset CUPTI_EXPORTER_CPUPROFILE
  SERIES_EXTRA= BIN=$main start_exporter "$L/exp-gpmcost-before-health.log" 9481 --gpm.mode=only --no-activity.enabled || return
  SERIES_EXTRA= start_exporter "$L/exp-gpmcost-after-health.log" 9483 --gpm.mode=only --no-activity.enabled || return
  sleep 3
  local c0=() c1=() t0 t1
  t0=$(date +%s.%N); for p in 9477 9479 9481 9483; do c0+=("$(cpu_of $p)"); done
  python3 scripts/gpu/threads.py "$(cat "$L/exporter.9479.pid")" > "$L/gpmcost-thr0.json"
  "$G/nvmlcost" floor "$secs" 100 9 > "$L/gpmcost-floor.txt" 2>&1
  t1=$(date +%s.%N); for p in 9477 9479 9481 9483; do c1+=("$(cpu_of $p)"); done
  python3 scripts/gpu/threads.py "$(cat "$L/exporter.9479.pid")" "$L/gpmcost-thr0.json" > "$L/gpmcost-thr.json"
  say "side by side: $(sed 's/^floor: /nvmlcost floor: /' "$L/gpmcost-floor.txt")"
  local i=0 name
  for name in "before, no health" "after, no health" "before, health" "after, health"; do
    p=$((9477 + 2 * i))
    say "  gpm.mode=only $name (:$p): $(python3 -c "print(f'{(${c1[$i]}-${c0[$i]})/($t1-$t0)*100:.2f} % of a core over {$t1-$t0:.1f} s')"), RSS $(rss_of $p) kB, GPM pairs $(curl -s localhost:$p/metrics | awk '/^cupti_gpm_samples_total/ { s += $NF } END { print s + 0 }')"
    i=$((i + 1))
  done
  say "  threads of :9479: $(cat "$L/gpmcost-thr.json")"
  for p in 9483 9481 9479 9477; do stop_exporter $p; done
  kill $lp 2>/dev/null; wait $lp 2>/dev/null
}

# gpmids (issue 32 item 3, run CB): which GPM metric costs what (nvmlcost ids: each of the
# exporter's 9 ids alone and the 9 without each), and gpm.mode=only at 5 Hz
# (--gpm.interval=200ms) without health beside nvmlcost's floor at 200 ms, GPMIDS_S (20) s,
# under one bf16 matmul. About 45 s.
stage_gpmids() {
  say "== gpmids (issue 32 item 3: per metric, 5 Hz)"
  [ -x "$G/nvmlcost" ] || gcc -O2 -Wno-deprecated-declarations -o "$G/nvmlcost" scripts/gpu/nvmlcost.c -I"$G" -l:libnvidia-ml.so.1 > "$L/build-nvmlcost.log" 2>&1 ||
    { say "nvmlcost build failed: $(tail -3 "$L/build-nvmlcost.log")"; return; }
  local secs=${GPMIDS_S:-20}
  $W mm 200 > "$L/gpmids-load.log" 2>&1 & local lp=$!; sleep 4
  "$G/nvmlcost" ids 20 > "$L/nvmlcost-ids.txt" 2>&1; say "nvmlcost ids rc=$?:"; tee -a "$S" < "$L/nvmlcost-ids.txt"
  SERIES_EXTRA= start_exporter "$L/exp-gpmids.log" 9479 --gpm.mode=only --gpm.interval=200ms --no-activity.enabled --no-health.enabled || return
  sleep 3
  local c0 c1 t0 t1
  t0=$(date +%s.%N); c0=$(cpu_of 9479)
  "$G/nvmlcost" floor "$secs" 200 9 > "$L/gpmids-floor.txt" 2>&1
  t1=$(date +%s.%N); c1=$(cpu_of 9479)
  say "5 Hz side by side: $(sed 's/^floor: /nvmlcost floor: /' "$L/gpmids-floor.txt")"
  say "  gpm.mode=only --gpm.interval=200ms, no health: $(python3 -c "print(f'{($c1-$c0)/($t1-$t0)*100:.2f} % of a core over {$t1-$t0:.1f} s')"), RSS $(rss_of 9479) kB"
  stop_exporter 9479
  kill $lp 2>/dev/null; wait $lp 2>/dev/null
}

# gpmfamilies (issue 32 item 3, run CE): gpm.mode=only with every family against
# --gpm.families without the graphics engine (whose GPM metric is most of NVML's cost of a read,
# runs CC and CD), with and without NVML health, side by side under one bf16 matmul for
# GPMFAM_S (25) s. About 40 s.
stage_gpmfamilies() {
  say "== gpmfamilies (issue 32 item 3: gpm.mode=only without the graphics engine's metric)"
  local secs=${GPMFAM_S:-25} p i=0 name c0=() c1=() t0 t1
  local fams=cupti_sm_active_ratio,cupti_tensor_pipe_active_ratio,cupti_dram_active_ratio,cupti_fp64_pipe_active_ratio,cupti_fp32_pipe_active_ratio,cupti_pcie_bytes_total,cupti_nvlink_bytes_total
  $W mm 300 > "$L/gpmfam-load.log" 2>&1 & local lp=$!; sleep 4
  SERIES_EXTRA= start_exporter "$L/exp-gpmfam-all.log" 9477 --gpm.mode=only --no-activity.enabled --no-health.enabled || return
  SERIES_EXTRA= start_exporter "$L/exp-gpmfam-nogr.log" 9479 --gpm.mode=only --gpm.families="$fams" --no-activity.enabled --no-health.enabled || return
  SERIES_EXTRA= start_exporter "$L/exp-gpmfam-nogr-health.log" 9481 --gpm.mode=only --gpm.families="$fams" --no-activity.enabled || return
  sleep 3
  t0=$(date +%s.%N); for p in 9477 9479 9481; do c0+=("$(cpu_of $p)"); done
  sleep "$secs"
  t1=$(date +%s.%N); for p in 9477 9479 9481; do c1+=("$(cpu_of $p)"); done
  for name in "every family, no health" "no graphics engine, no health" "no graphics engine, health"; do
    p=$((9477 + 2 * i))
    scrape "$L/gpmfam-$p.txt" "$p"
    say "  gpm.mode=only, $name (:$p): $(python3 -c "print(f'{(${c1[$i]}-${c0[$i]})/($t1-$t0)*100:.2f} % of a core over {$t1-$t0:.1f} s')"), RSS $(rss_of $p) kB, sm_active=$(val "$L/gpmfam-$p.txt" '^cupti_sm_active_ratio') graphics=$(val "$L/gpmfam-$p.txt" '^cupti_graphics_engine_active_ratio')"
    i=$((i + 1))
  done
  for p in 9481 9479 9477; do stop_exporter $p; done
  kill $lp 2>/dev/null; wait $lp 2>/dev/null
}
