# Issue 11 stages of scripts/gpu/validate.sh (sourced): the workload overhead to publish in
# docs/performance.md, and the soak under load and attack.

# Workload overhead: scripts/gpu/overhead.py (bf16 matmul, then a 1 GiB device-to-device copy
# loop) with the exporter off, at 1 ms (the defaults), at 1 ms with exporter and workload on
# separate cores (is it CPU contention?), and at 100 us (double pipeline), interleaved, OVH_ROUNDS
# rounds; the workload always on cores 0-7. Each run also records the exporter's CPU and the mean
# SM and memory clocks (are they the cause?). About OVH_ROUNDS x 4 x (2 x OVH_S + 8) s.
# The cases (OVH_CASES): off, 1ms (the defaults), 1ms-apart (the exporter on other cores),
# 100us, and the ones that find where the cost comes from: nvml (health and GPM only, no PM
# session), pm-only (PM sampling without NVML health), dram / tpc (PM sampling of two or three
# metrics of one unit only, without health), duty50 and duty50-8s (the PM session held half
# the time, in 2 s or 8 s cycles: --pmsample.duty-cycle).
overhead_args() {
  local tpc=TPC.TriageCompute
  case $1 in
    1ms | 1ms-apart) echo ;;
    100us) echo --pmsample.interval=100us --pmsample.pipeline=double ;;
    nvml) echo --no-pmsample.enabled ;;
    pm-only) echo --no-health.enabled ;;
    dram) echo --no-health.enabled --pmsample.metrics=dram__bytes_read.sum,dram__bytes_write.sum ;;
    duty50) echo --pmsample.duty-cycle=0.5 --pmsample.duty-period=2s ;;
    duty50-8s) echo --pmsample.duty-cycle=0.5 --pmsample.duty-period=8s ;;
    tpc) echo --no-health.enabled --pmsample.metrics=$tpc.sm__cycles_active.avg.pct_of_peak_sustained_elapsed,$tpc.sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed,$tpc.tpc__warps_active_realtime.avg.pct_of_peak_sustained_elapsed ;;
    *) return 1 ;;
  esac
}

stage_overhead() {
  local cases=${OVH_CASES:-off 1ms 1ms-apart 100us}
  say "== overhead (bf16 matmul + D2D copy; exporter ${cases// / / }; ${OVH_ROUNDS:-3} interleaved rounds of ${OVH_S:-8} s a phase)"
  local r c pid f c0 t0 sp
  for r in $(seq 1 "${OVH_ROUNDS:-3}"); do
    for c in $cases; do
      f="$L/overhead-$c-r$r.txt"; pid=
      if [ "$c" != off ]; then
        # shellcheck disable=SC2046 # the arguments split on purpose
        start_exporter "$L/exp-ovh-$c-$r.log" 9477 --no-activity.enabled $(overhead_args "$c") || continue
      fi
      [ "$c" != off ] && pid=$(cat "$L/exporter.9477.pid")
      [ "$c" = 1ms-apart ] && taskset -a -p -c 8-15 "$pid" > /dev/null
      sleep 2
      [ -n "$pid" ] && c0=$(proc_cpu_s "$pid"); t0=$(date +%s.%N)
      nvidia-smi -i 0 --query-gpu=clocks.sm,clocks.mem,power.draw,clocks_event_reasons.sw_power_cap --format=csv,noheader,nounits -lms 200 \
        | while read -r l; do echo "$(date +%s.%N), $l"; done > "$L/ovh-clk.csv" & sp=$!
      taskset -c 0-7 python3 scripts/gpu/overhead.py "${OVH_S:-8}" > "$f" 2>&1
      pkill -x nvidia-smi; kill $sp 2>/dev/null; wait $sp 2>/dev/null
      awk -F', *' '$2 ~ /^[0-9]/ { s += $2; m += $3; n++ } END { if (n) printf "sm_mhz %.0f\nmem_mhz %.0f\n", s / n, m / n }' "$L/ovh-clk.csv" >> "$f"
      python3 scripts/gpu/ovh_power.py "$f" "$L/ovh-clk.csv" >> "$f"
      if [ -n "$pid" ]; then
        echo "cpu_pct $(awk -v a="$c0" -v b="$(proc_cpu_s "$pid")" -v t0="$t0" -v t1="$(date +%s.%N)" 'BEGIN { printf "%.1f", (b - a) * 100 / (t1 - t0) }')" >> "$f"
        scrape "$L/ovh-$c-$r.prom"
        say "overhead $c round $r: $(tr '\n' ' ' < "$f") lost: $(grep -E '^cupti_pm_samples_lost_total' "$L/ovh-$c-$r.prom" | grep -v 'reason="start"' | awk '$NF != 0' | sed -E 's/.*reason="([^"]*)".* /\1=/' | tr '\n' ' ')"
        stop_exporter 9477 > /dev/null
      else
        say "overhead off round $r: $(tr '\n' ' ' < "$f")"
      fi
    done
  done
  python3 scripts/gpu/overhead_compare.py "$L" | tee -a "$S"
}

# Soak under load and attack (issue 11 "Proven"): PM sampling at 1 kHz (defaults), an injected
# workload of tiny kernels (about 100k kernels/s), 50 scrapers every 200 ms and a hostile client
# (name floods and silent connections every 20 s) for SOAK11_S seconds. RSS every 15 s; want it
# flat in the second half, PM losses other than start 0, every drop counted.
stage_soak11() {
  local secs=${SOAK11_S:-300}
  say "== soak11 (PM 1 kHz + injected tiny kernels + 50 scrapers + hostile client, ${secs} s)"
  mkdir -p /run/cupti-exporter; local sk=/run/cupti-exporter/soak11.sock pid wp hp i
  start_exporter "$L/exp-soak11.log" 9481 --activity.socket=$sk || return
  pid=$(cat "$L/exporter.9481.pid"); sleep 3
  scrape "$L/soak11-0.txt" 9481
  local end=$((SECONDS + secs)) sc=()
  CUDA_INJECTION64_PATH=$INJ CUPTI_EXPORTER_SOCKET=$sk $W tiny "$secs" > "$L/soak11-work.log" 2>&1 & wp=$!
  for i in $(seq 1 50); do
    (while [ $SECONDS -lt $end ]; do curl -s -m 5 -o /dev/null localhost:9481/metrics || echo fail; sleep 0.2; done) >> "$L/soak11-fails.txt" & sc+=($!)
  done
  (while [ $SECONDS -lt $end ]; do
     python3 scripts/gpu/hostile.py $sk names 32 > /dev/null 2>&1; python3 scripts/gpu/hostile.py $sk silent 32 10 > /dev/null 2>&1; sleep 20
   done) & hp=$!
  : > "$L/soak11-rss.txt"
  while [ $SECONDS -lt $end ]; do echo "$(date +%s) $(proc_rss_mb "$pid")" >> "$L/soak11-rss.txt"; sleep 15; done
  wait "${sc[@]}" 2>/dev/null; wait $wp 2>/dev/null; kill $hp 2>/dev/null; wait $hp 2>/dev/null
  sleep 2; scrape "$L/soak11-final.txt" 9481
  say "soak11 rss: $(python3 -c "
import sys
p = [tuple(map(float, l.split())) for l in open('$L/soak11-rss.txt') if len(l.split()) == 2]
h = p[len(p) // 2:]
n = len(h); mt = sum(t for t, _ in h) / n; mr = sum(r for _, r in h) / n
slope = sum((t - mt) * (r - mr) for t, r in h) / max(sum((t - mt) ** 2 for t, _ in h), 1e-9) * 60
print(f'first {p[0][1]:.1f} MB, max {max(r for _, r in p):.1f} MB, last {p[-1][1]:.1f} MB; second half {slope:+.2f} MB/min over {n} readings')
")"
  say "soak11 PM lost (delta, by reason): $(paste <(grep -E '^cupti_pm_samples_lost_total' "$L/soak11-0.txt" | sed -E 's/.*gpu="([0-9]+)".*reason="([^"]*)".* ([0-9.e+-]+)$/\1:\2 \3/') \
    <(grep -E '^cupti_pm_samples_lost_total' "$L/soak11-final.txt" | sed -E 's/.*gpu="([0-9]+)".*reason="([^"]*)".* ([0-9.e+-]+)$/\3/') | awk '$3 - $2 != 0 { printf "%s=%g ", $1, $3 - $2 }')"
  say "soak11 activity: records $(val "$L/soak11-final.txt" '^cupti_activity_records_total'), kernels counted $(val "$L/soak11-final.txt" '^cupti_kernel_duration_seconds_count'), $(grep -E '^cupti_activity_dropped_(connections|records)_total' "$L/soak11-final.txt" | grep -v ' 0$' | sed -E 's/\{.*reason="([^"]*)".*\} /{\1} /' | tr '\n' ' '); workload: $(grep -o '[0-9.]* us/launch' "$L/soak11-work.log")"
  say "soak11 scrapes: $(val "$L/soak11-final.txt" '^promhttp_metric_handler_requests_total') served, $(grep -c fail "$L/soak11-fails.txt") failed or over 5 s"
  stop_exporter 9481
}
