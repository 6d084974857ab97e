# Stages of scripts/gpu/validate.sh (sourced). Each writes logs to $L and lines to the summary.

stage_inject() {
  say "== inject"
  mkdir -p /run/cupti-exporter
  start_exporter "$L/exp-inject.log" 9477 --no-pmsample.enabled --activity.socket=$SOCK || return
  # overhead: interleave no tracing / bare probe / ours / ours at 10% duty cycle, 3 rounds
  for r in 1 2; do
    for v in none probe ours duty; do
      case $v in
        none) env -u CUDA_INJECTION64_PATH $W tiny 4 ;;
        probe) CUDA_INJECTION64_PATH=$G/libinjprobe.so $W tiny 4 ;;
        ours) CUDA_INJECTION64_PATH=$INJ CUPTI_EXPORTER_SOCKET=$SOCK $W tiny 4 ;;
        duty) CUDA_INJECTION64_PATH=$INJ CUPTI_EXPORTER_SOCKET=$SOCK CUPTI_EXPORTER_DUTY_CYCLE=0.1 $W tiny 4 ;;
      esac > "$L/tiny-$v-$r.log" 2>&1
      say "tiny $v round $r: $(grep -o '[0-9.]* us/launch' "$L/tiny-$v-$r.log")"
    done
  done
  # counts: same deterministic workload under the probe and under ours
  CUDA_INJECTION64_PATH=$G/libinjprobe.so $W fixed > "$L/fixed-probe.log" 2>&1
  say "probe fixed: $(grep injprobe "$L/fixed-probe.log")"
  scrape "$L/inj-before.txt"
  CUDA_INJECTION64_PATH=$INJ CUPTI_EXPORTER_SOCKET=$SOCK $W fixed > "$L/fixed-ours.log" 2>&1; say "ours fixed rc=$?"
  sleep 3; scrape "$L/inj-after.txt"
  for m in cupti_kernel_duration_seconds_count cupti_memcpy_duration_seconds_count cupti_memset_duration_seconds_count 'cupti_activity_dropped_records_total'; do
    say "ours $m: before $(val "$L/inj-before.txt" "^$m") after $(val "$L/inj-after.txt" "^$m")"
  done
  # exporter killed mid-run, then restarted: workload unaffected, library reconnects
  CUDA_INJECTION64_PATH=$INJ CUPTI_EXPORTER_SOCKET=$SOCK $W tiny 12 > "$L/kill-ours.log" 2>&1 &
  wp=$!; sleep 3; stop_exporter 9477; sleep 3
  start_exporter "$L/exp-inject2.log" 9477 --no-pmsample.enabled --activity.socket=$SOCK
  wait $wp; say "workload across exporter restart rc=$? $(grep -o '[0-9.]* us/launch' "$L/kill-ours.log")"
  sleep 2; scrape "$L/inj-restart.txt"
  say "after restart kernels=$(val "$L/inj-restart.txt" '^cupti_kernel_duration_seconds_count') dropped=$(val "$L/inj-restart.txt" '^cupti_activity_dropped_records_total')"
  # fork-based DataLoader, PyTorch profiler, ncu
  CUDA_INJECTION64_PATH=$INJ CUPTI_EXPORTER_SOCKET=$SOCK timeout 180 $W loader > "$L/loader.log" 2>&1; say "loader rc=$? $(tail -1 "$L/loader.log")"
  CUDA_INJECTION64_PATH=$INJ CUPTI_EXPORTER_SOCKET=$SOCK timeout 120 $W profiler 2 > "$L/profiler.log" 2>&1; say "profiler rc=$? $(grep -iE 'profiler:|cupti-exporter' "$L/profiler.log" | head -3 | tr '\n' ' ')"
  CUDA_INJECTION64_PATH=$INJ CUPTI_EXPORTER_SOCKET=$SOCK timeout 180 ncu --clock-control none -c 3 $W tiny 1 > "$L/ncu-inject.log" 2>&1; say "ncu+inject rc=$? $(grep -iE 'cupti-exporter|error' "$L/ncu-inject.log" | head -3 | tr '\n' ' ')"
  stop_exporter 9477
}

# coverage: traced seconds reported by the library (wire v2 coverage frames) against the workload's
# wall time, continuous and at a 30 % duty cycle; then a hung exporter (SIGSTOP) while a workload
# floods and exits: the exporter's queue_full must catch up with the workload's own exit line.
stage_coverage() {
  sub() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a - b }'; }
  say "== coverage"
  mkdir -p /run/cupti-exporter
  start_exporter "$L/exp-cov.log" 9477 --no-pmsample.enabled --activity.socket=$SOCK || return
  for v in full duty; do
    scrape "$L/cov-$v-0.txt"; t0=$(date +%s.%N)
    case $v in
      full) CUDA_INJECTION64_PATH=$INJ CUPTI_EXPORTER_SOCKET=$SOCK $W tiny 8 ;;
      duty) CUDA_INJECTION64_PATH=$INJ CUPTI_EXPORTER_SOCKET=$SOCK CUPTI_EXPORTER_DUTY_CYCLE=0.3 CUPTI_EXPORTER_DUTY_PERIOD_MS=1000 $W tiny 8 ;;
    esac > "$L/cov-$v.log" 2>&1
    t1=$(date +%s.%N); sleep 2; scrape "$L/cov-$v-1.txt"
    c0=$(val "$L/cov-$v-0.txt" '^cupti_activity_traced_seconds_total.state="complete"'); c1=$(val "$L/cov-$v-1.txt" '^cupti_activity_traced_seconds_total.state="complete"')
    l0=$(val "$L/cov-$v-0.txt" '^cupti_activity_traced_seconds_total.state="lossy"'); l1=$(val "$L/cov-$v-1.txt" '^cupti_activity_traced_seconds_total.state="lossy"')
    say "coverage $v: process wall $(sub "$t1" "$t0") s, traced complete $(sub "$c1" "$c0") s, lossy $(sub "$l1" "$l0") s (want ~wall minus CUDA start-up for full, ~0.3 x that for duty)"
  done
  scrape "$L/cov-hung-0.txt"
  CUDA_INJECTION64_PATH=$INJ CUPTI_EXPORTER_SOCKET=$SOCK CUPTI_EXPORTER_QUEUE_RECORDS=1024 $W tiny 6 > "$L/cov-hung.log" 2>&1 &
  wp=$!; sleep 2; kill -STOP "$(cat "$L/exporter.9477.pid")"; wait $wp; kill -CONT "$(cat "$L/exporter.9477.pid")"
  sleep 3; scrape "$L/cov-hung-1.txt"
  say "hung exporter: workload exit line: $(grep -o 'exit: .*queue_full=[0-9]*' "$L/cov-hung.log")"
  say "hung exporter: exporter queue_full +$(sub "$(val "$L/cov-hung-1.txt" '^cupti_activity_dropped_records_total.reason="queue_full"')" "$(val "$L/cov-hung-0.txt" '^cupti_activity_dropped_records_total.reason="queue_full"')"), records +$(sub "$(val "$L/cov-hung-1.txt" '^cupti_activity_records_total')" "$(val "$L/cov-hung-0.txt" '^cupti_activity_records_total')"), invalid reports $(val "$L/cov-hung-1.txt" '^cupti_activity_invalid_reports_total') (want queue_full as the exit line, records + queue_full = queued)"
  stop_exporter 9477
}

stage_coexist() {
  say "== coexist"
  start_exporter "$L/exp-A.log" 9477 --no-activity.enabled $PMARGS || return
  sleep 3; scrape "$L/co-0.txt"; say "A state: $(grep '^cupti_pm_sampling_state' "$L/co-0.txt" | awk '$NF==1' | tr '\n' ' ')"
  timeout 120 ncu --clock-control none -c 1 $W tiny 1 > "$L/ncu-while-sampling.log" 2>&1; say "ncu while sampling rc=$? $(grep -m2 -iE 'error|resource' "$L/ncu-while-sampling.log" | tr '\n' ' ')"
  curl -s -XPOST "localhost:9477/api/v1/pm-sampling/pause?duration=120s" > "$L/pause.json"; say "pause: $(cat "$L/pause.json")"
  sleep 1; timeout 120 ncu --clock-control none -c 1 $W tiny 1 > "$L/ncu-paused.log" 2>&1; say "ncu while paused rc=$? $(grep -m1 -E '==PROF==|Duration' "$L/ncu-paused.log")"
  scrape "$L/co-1.txt"
  curl -s -XPOST localhost:9477/api/v1/pm-sampling/resume > "$L/resume.json"; say "resume: $(cat "$L/resume.json")"
  sleep 3; scrape "$L/co-2.txt"
  say "samples paused=$(val "$L/co-1.txt" '^cupti_pm_samples_total') resumed=$(val "$L/co-2.txt" '^cupti_pm_samples_total')"
  start_exporter "$L/exp-B.log" 9478 --no-activity.enabled $PMARGS
  sleep 4; curl -s localhost:9478/readyz > "$L/B-readyz.txt"; say "B readyz while A holds: $(head -c 300 "$L/B-readyz.txt" | tr '\n' ' ')"
  say "B log: $(grep -m2 -iE 'busy' "$L/exp-B.log" | tr '\n' ' ')"
  stop_exporter 9477
  for i in $(seq 1 40); do sleep 1; scrape "$L/co-B.txt" 9478; grep -q '^cupti_pm_sampling_state{.*state="sampling".*} 1' "$L/co-B.txt" && break; done
  say "B took over after ${i}s: samples=$(val "$L/co-B.txt" '^cupti_pm_samples_total')"
  stop_exporter 9478
}

# The metrics compared with the C probe (Perfworks names; the probe prints them in this order).
# The default (DCGM-comparable) set as planned on GH100 (docs/pm-sampling.md).
DEFSET=${DEFSET:-FE_B.TriageCompute.gr__cycles_active.sum.pct_of_peak_sustained_elapsed,TPC.TriageCompute.sm__cycles_active.avg.pct_of_peak_sustained_elapsed,TPC.TriageCompute.tpc__warps_active_realtime.avg.pct_of_peak_sustained_elapsed,TPC.TriageCompute.sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed,dram__cycles_active.avg.pct_of_peak_sustained_elapsed,TPC.TriageCompute.sm__pipe_fp64_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_elapsed,PCI.TriageCompute.pcie__read_bytes.sum,PCI.TriageCompute.pcie__write_bytes.sum}
CMP=${CMP:-sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed,sm__cycles_active.avg.pct_of_peak_sustained_elapsed,gr__cycles_active.sum.pct_of_peak_sustained_elapsed,dram__bytes_read.sum.per_second}

stage_pm() {
  say "== pm (exporter vs pmprobe on the same phases, one after the other)"
  start_exporter "$L/exp-pm.log" 9477 --no-activity.enabled --pmsample.metrics=$CMP --pmsample.window=1s || return
  $W phases > "$L/phases-exporter.log" 2>&1 &
  wp=$!
  while kill -0 $wp 2>/dev/null; do echo "# t $(date +%s.%N)" >> "$L/scrapes.txt"; curl -s localhost:9477/metrics | grep -E '^cupti_' >> "$L/scrapes.txt"; sleep 0.5; done
  curl -s localhost:9477/metrics > "$L/pm-final.txt"; stop_exporter 9477
  say "exporter samples=$(val "$L/pm-final.txt" '^cupti_pm_samples_total') dropped=$(grep -E '^cupti_pm_(samples_dropped|samples_lost)_total' "$L/pm-final.txt" | awk '$NF != 0' | tr '\n' ' ')"
  $W phases > "$L/phases-probe.log" 2>&1 &
  # each probe line is stamped when it arrives: the probe flushes one line per 250 ms decode
  wp=$!; "$G/pmprobe" sample 33 1000000 "$CMP" 2> "$L/pmprobe.err" |
    while IFS= read -r line; do printf '%s\t%s\n' "$(date +%s.%N)" "$line"; done > "$L/pmprobe.tsv"; wait $wp
  python3 scripts/gpu/compare_pm.py "$L" "$CMP" | tee -a "$S"
}

stage_record() {
  say "== record (60 s demo recording: idle, matmul, copies, tiny kernels)"
  mkdir -p /run/cupti-exporter
  # NVML health is recorded too (one snapshot a second; format version 4), so --demo serves it.
  "$BIN" record --output "$OUT/demo.rec" --duration 62s --pmsample.interval=10ms --activity.socket=$SOCK \
    --health.enabled --health.interval=1s > "$L/record.log" 2>&1 &
  rp=$!; sleep 3
  for i in 1 2; do CUDA_INJECTION64_PATH=$INJ CUPTI_EXPORTER_SOCKET=$SOCK CUPTI_EXPORTER_DUTY_CYCLE=${DEMO_DUTY:-0.05} CUPTI_EXPORTER_DUTY_PERIOD_MS=1000 $W phases 6.4 >> "$L/record-work.log" 2>&1; done
  wait $rp; say "record rc=$? size=$(stat -c %s "$OUT/demo.rec" 2>/dev/null) $(tail -2 "$L/record.log" | tr '\n' ' ')"
  # Replay it once, as fast as possible: the health families must be served (want about 60
  # health_snapshots in the log line, power/memory/energy of every GPU; size under 3 MiB).
  setsid "$BIN" replay "$OUT/demo.rec" --replay.speed=0 --web.listen-address=:9481 --web.health-listen-address= > "$L/record-replay.log" 2>&1 &
  local rp2=$!; sleep 4; scrape "$L/record-replay.txt" 9481; kill $rp2 2>/dev/null; wait $rp2 2>/dev/null
  say "record replay: $(grep -o 'health_snapshots=[0-9]*' "$L/record-replay.log" | head -1) power_W=$(val "$L/record-replay.txt" '^cupti_gpu_power_watts') mem_used_B=$(val "$L/record-replay.txt" '^cupti_gpu_memory_used_bytes') energy_J=$(val "$L/record-replay.txt" '^cupti_gpu_energy_joules_total') health_families=$(grep -c '^# TYPE cupti_\(gpu\|nvml\)_' "$L/record-replay.txt")"
}

proc_cpu_s() { awk '{ printf "%.3f", ($14 + $15) / 100 }' /proc/$1/stat; }
proc_rss_mb() { awk '/VmRSS/ { printf "%.1f", $2 / 1024 }' /proc/$1/status; }

# CPU per sample, exporter against pmprobe, same metrics and interval, one after the other under
# the same load (PERF_LOAD: mm, the default, or none). Both sides are split by thread name
# (threads.py): the probe's own figure times only its decode and evaluate calls, so its process CPU
# over the same window says what CUPTI and the driver spend outside those calls.
stage_perf() {
  say "== perf (load ${PERF_LOAD:-mm})"
  lp=
  if [ "${PERF_LOAD:-mm}" = mm ]; then $W mm 400 > "$L/perf-load.log" 2>&1 & lp=$!; fi
  for iv in 1000000 100000; do
    dur=${PERF_1K:-30}; [ $iv = 100000 ] && dur=${PERF_10K:-60}
    M=$DEFSET; [ $iv = 100000 ] && M=$CMP
    for dp in ${PERF_DECODE:-250ms}; do
      say "-- exporter, decode period $dp"
      start_exporter "$L/exp-perf-$iv.log" 9477 --no-activity.enabled --pmsample.interval=$((iv/1000))us --pmsample.metrics=$M --pmsample.decode-period=$dp || continue
      pid=$(cat "$L/exporter.9477.pid"); sleep 3
      scrape "$L/perf0-$iv.txt"; c0=$(proc_cpu_s $pid); rss0=$(proc_rss_mb $pid); python3 scripts/gpu/threads.py $pid > "$L/perf-threads0-$iv.json"
      if [ $iv = 100000 ] && [ $dur -ge 20 ]; then
        for i in $(seq 1 200); do curl -s -o /dev/null -w '%{time_total}\n' localhost:9477/metrics; sleep 0.05; done > "$L/scrape-latency.txt"
        sleep $((dur - 13))
      else sleep $dur; fi
      scrape "$L/perf1-$iv.txt"; c1=$(proc_cpu_s $pid); rss1=$(proc_rss_mb $pid); python3 scripts/gpu/threads.py $pid "$L/perf-threads0-$iv.json" > "$L/perf-threads-$iv.json"
      n0=$(val "$L/perf0-$iv.txt" '^cupti_pm_samples_total'); n1=$(val "$L/perf1-$iv.txt" '^cupti_pm_samples_total')
      say "exporter interval=${iv}ns $(python3 -c "c=$c1-$c0; n=$n1-$n0; print(f'cpu={c:.2f}s samples={n:.0f} us/sample={c*1e6/max(n,1):.2f}')") rss=${rss0}->${rss1}MB"
      say "  cpu by thread (s): $(cat "$L/perf-threads-$iv.json")"
      say "  losses: $(grep -E '^cupti_pm_(samples_dropped|samples_lost|decode_failures|overflows)' "$L/perf1-$iv.txt" | awk '$NF != 0' | tr '\n' ' ')"
      for call in decode sample_info evaluate reset; do
        a=$(val "$L/perf0-$iv.txt" "^cupti_pm_cupti_call_seconds_total.*call=\"$call\""); b=$(val "$L/perf1-$iv.txt" "^cupti_pm_cupti_call_seconds_total.*call=\"$call\"")
        say "  inside CUPTI $call: $(python3 -c "print(f'{($b-$a)*1e6/max($n1-$n0,1):.2f} us/sample')")"
    done
    stop_exporter 9477
    done
    # the probe: each output line (one decode) is stamped on arrival; thread CPU is read 4 s in
    # and 2 s before its end, and divided by the samples decoded in between
    "$G/pmprobe" sample $dur $iv "$M" 2> "$L/probe-perf-$iv.err" |
      while IFS= read -r line; do printf '%s\t%s\n' "$(date +%s.%N)" "$line"; done > "$L/probe-perf-$iv.tsv" &
    pw=$!; sleep 4; pp=$(pgrep -n -f "pmprobe sample $dur $iv")
    ta=$(date +%s.%N); python3 scripts/gpu/threads.py $pp > "$L/probe-threads0-$iv.json"
    sleep $((dur - 6)); prss=$(proc_rss_mb $pp)
    tb=$(date +%s.%N); python3 scripts/gpu/threads.py $pp "$L/probe-threads0-$iv.json" > "$L/probe-threads-$iv.json"
    wait $pw
    say "pmprobe interval=${iv}ns rss=${prss}MB $(awk -F'\t' '$3 ~ /^[0-9]+$/ { n += $3; d += $4; e += $5 } END { printf "samples=%d decode+eval us/sample=%.2f (decode %.2f, evaluate %.2f)", n, (d + e) / n, d / n, e / n }' "$L/probe-perf-$iv.tsv")"
    say "  probe process cpu/sample over ${ta}..${tb}: $(python3 -c "
import json; t = json.load(open('$L/probe-threads-$iv.json')); n = 0
for l in open('$L/probe-perf-$iv.tsv'):
    f = l.split('\t')
    if len(f) > 4 and f[2].isdigit() and $ta < float(f[0]) <= $tb: n += int(f[2])
print(f'{sum(t.values())*1e6/max(n,1):.2f} us/sample ({n} samples); by thread (s): {json.dumps(t)}')")"
  done
  [ -s "$L/scrape-latency.txt" ] && say "scrape latency at 10 kHz: $(sort -n "$L/scrape-latency.txt" | awk '{ a[NR] = $1 } END { printf "p50=%.1fms p99=%.1fms max=%.1fms", a[int(NR*0.5)]*1000, a[int(NR*0.99)]*1000, a[NR]*1000 }')"
  [ -n "$lp" ] && kill $lp 2>/dev/null
}

stage_soak() {
  say "== soak (activity at ~100k kernels/s, RSS every 30 s)"
  mkdir -p /run/cupti-exporter
  start_exporter "$L/exp-soak.log" 9479 --no-pmsample.enabled --activity.socket=/run/cupti-exporter/soak.sock || return
  pid=$(cat "$L/exporter.9479.pid")
  CUDA_INJECTION64_PATH=$INJ CUPTI_EXPORTER_SOCKET=/run/cupti-exporter/soak.sock $W tiny ${SOAK_S:-300} > "$L/soak-work.log" 2>&1 &
  wp=$!
  # RSS and kernels counted every 30 s (into the summary every 60 s, so a cut-off run keeps them);
  # the loop polls each second so the stage ends with the workload
  local t=0
  while kill -0 $wp 2>/dev/null; do
    if [ $((t % 30)) = 0 ]; then
      line="$(date +%s) $(proc_rss_mb $pid) $(curl -s localhost:9479/metrics | awk '/^cupti_kernel_duration_seconds_count/ { s += $NF } END { print s }')"
      echo "$line" >> "$L/soak-rss.txt"; [ $((t % 60)) = 0 ] && say "soak t=${t}s (epoch rss_MB kernels): $line"
    fi
    sleep 1; t=$((t + 1))
  done
  say "soak: $(head -1 "$L/soak-rss.txt") -> $(tail -1 "$L/soak-rss.txt") (epoch rss_MB kernels) $(grep -o '[0-9.]* us/launch' "$L/soak-work.log")"
  scrape "$L/soak-final.txt" 9479; say "soak dropped: $(grep '^cupti_activity_dropped' "$L/soak-final.txt" | tr '\n' ' ')"
  stop_exporter 9479
}

# Issue 11: the exporter under hostile activity clients and a scrape storm, with PM sampling at the
# defaults under a matmul load. Look for: image_full/overflow deltas 0 during the storm, RSS peak
# within PM (~110 MB + 80 MB/GPU) + 2 x the 128 MiB budget and back down after the flood, the real
# workload's kernels counted despite 256 silent connections, unknown_device = 99900.
stage_hostile() {
  say "== hostile (name flood, silent connections, made-up devices, 200 scrapers)"
  mkdir -p /run/cupti-exporter; local hs=/run/cupti-exporter/hostile.sock
  start_exporter "$L/exp-hostile.log" 9480 --activity.socket=$hs --web.max-requests=0 $PMARGS || return
  pid=$(cat "$L/exporter.9480.pid"); sleep 3
  $W mm ${HOSTILE_S:-90} > "$L/hostile-load.log" 2>&1 & lp=$!
  rss0=$(proc_rss_mb $pid)
  python3 scripts/gpu/hostile.py $hs names 256 5 | tee -a "$S" &
  hp=$!; peak=$rss0
  while kill -0 $hp 2>/dev/null; do r=$(proc_rss_mb $pid); peak=$(echo "$r $peak" | awk '{ print ($1 > $2) ? $1 : $2 }'); sleep 0.2; done
  sleep 3; say "hostile names: rss ${rss0} MB -> peak ${peak} MB -> $(proc_rss_mb $pid) MB 3 s after; $(curl -s localhost:9480/metrics | grep -E '^cupti_activity_memory' | tr '\n' ' ')"
  python3 scripts/gpu/hostile.py $hs silent 256 20 > /dev/null & sp=$!; sleep 2
  CUDA_INJECTION64_PATH=$INJ CUPTI_EXPORTER_SOCKET=$hs $W tiny 5 > "$L/hostile-work.log" 2>&1
  wait $sp; python3 scripts/gpu/hostile.py $hs devices | tee -a "$S"
  scrape "$L/hostile-mid.txt" 9480
  say "hostile: kernels counted $(val "$L/hostile-mid.txt" '^cupti_activity_records_total') $(grep -E '^cupti_activity_dropped_(connections|records)_total' "$L/hostile-mid.txt" | grep -v ' 0$' | tr '\n' ' ')"
  local d0 end=$((SECONDS + ${STORM_S:-30}))
  d0=$(grep -E '^cupti_pm_samples_lost_total.*reason="(image_full|overflow|decode_error)"' "$L/hostile-mid.txt" | awk '{ s += $NF } END { print s + 0 }')
  # Each scraper gives up on a scrape after 5 s (a stalled request must not hang the stage); the
  # storm's own pids are waited for, not the load's.
  local sc=()
  for i in $(seq 1 200); do (while [ $SECONDS -lt $end ]; do curl -s -m 5 -o /dev/null localhost:9480/metrics || echo fail; done) >> "$L/storm-fails.txt" & sc+=($!); done
  wait "${sc[@]}" 2>/dev/null
  say "hostile storm: scrapes that failed or took over 5 s: $(grep -c fail "$L/storm-fails.txt")"
  sleep 1; scrape "$L/hostile-final.txt" 9480
  say "hostile storm: 200 scrapers ${STORM_S:-30} s, scrapes $(val "$L/hostile-final.txt" '^promhttp_metric_handler_requests_total'), samples lost to image_full/overflow/decode errors $d0 -> $(grep -E '^cupti_pm_samples_lost_total.*reason="(image_full|overflow|decode_error)"' "$L/hostile-final.txt" | awk '{ s += $NF } END { print s + 0 }'), rss $(proc_rss_mb $pid) MB"
  # Decodes more than about 200 ms apart (the first image's room at 1 kHz) lose samples; 125 ms
  # was the room before run Z.
  say "hostile decode gaps: $(awk '/^cupti_pm_decode_gap_seconds_bucket/ { match($0, /le="[^"]*"/); le = substr($0, RSTART + 4, RLENGTH - 5); c[le] = $NF } /^cupti_pm_decode_gap_seconds_count/ { n = $NF } END { printf "%d decodes, %d over 125 ms, %d over 200 ms", n, n - c["0.125"], n - c["0.2"] }' "$L/hostile-final.txt")"
  kill $lp 2>/dev/null; wait $lp 2>/dev/null
  kill -HUP $pid; sleep 1; say "hostile: after SIGHUP alive=$(kill -0 $pid 2>/dev/null && echo yes || echo no) $(grep -c 'ignoring signal' "$L/exp-hostile.log") log line(s)"
  stop_exporter 9480; say "hostile: socket left behind: $(test -e $hs && echo yes || echo no)"
}

stage_multigpu() {
  say "== multigpu (every GPU sampled; NVLink traffic under an all-reduce)"
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
  "$BIN" metrics plan "nvlrx__bytes.sum,nvltx__bytes.sum,nvlrx__bytes.sum.per_second" > "$L/nvl-plan.log" 2>&1; say "nvlink plan rc=$?: $(head -5 "$L/nvl-plan.log" | tr '\n' ' ')"
  start_exporter "$L/exp-multi.log" 9477 --no-activity.enabled ${MULTI_ARGS:-} || return
  sleep 3; scrape "$L/multi-0.txt"
  timeout 150 python3 scripts/gpu/allreduce.py 15 > "$L/allreduce.log" 2>&1; say "allreduce rc=$? $(tail -1 "$L/allreduce.log")"
  sleep 2; scrape "$L/multi-1.txt"; stop_exporter 9477
  say "gpus sampled: $(grep '^cupti_pm_samples_total' "$L/multi-1.txt" | tr '\n' ' ')"
  say "nvlink/pcie series: $(grep -E '^cupti_(nvlink|pcie)_' "$L/multi-1.txt" | head -8 | tr '\n' ' ')"
  # NVLink bytes each GPU sent and received during the all-reduce (every NVLink series: the
  # default's, and any MULTI_ARGS metrics) against the ring's own count of bytes sent per rank.
  python3 - "$L/multi-0.txt" "$L/multi-1.txt" "$L/allreduce.log" <<'PY' | tee -a "$S"
import re, sys
def read(path):
    out = {}
    for line in open(path):
        if "nvl" in line and "bytes" in line and not line.startswith("#"):
            series, value = line.rsplit(" ", 1)
            out[series] = float(value)
    return out
m = re.search(r"ring bytes sent per rank (\d+)", open(sys.argv[3]).read())
before, after = read(sys.argv[1]), read(sys.argv[2])
for series, v in sorted(after.items()):
    gpu = re.search(r'gpu="(\d+)"', series)
    name = series.split("{")[0] + "".join(re.findall(r',(direction="\w+")', series))
    ratio = f", {(v - before.get(series, 0)) / int(m.group(1)):.4f} of the ring's bytes per rank" if m else ""
    print(f"gpu {gpu.group(1) if gpu else '?'} {name}: {v - before.get(series, 0):.6g}{ratio}")
# One link's two ends: what GPU 0 sent, GPU 1 received, and back (they should agree).
def delta(gpu, direction):
    return sum(v - before.get(s, 0) for s, v in after.items()
               if s.startswith("cupti_nvlink_bytes_total{") and f'gpu="{gpu}"' in s and f'direction="{direction}"' in s)
if delta(1, "rx") and delta(0, "rx"):
    print(f"nvlink ends: gpu 0 tx / gpu 1 rx {delta(0, 'tx') / delta(1, 'rx'):.4f}, gpu 1 tx / gpu 0 rx {delta(1, 'tx') / delta(0, 'rx'):.4f}")
PY
}

stage_p2p() {
  say "== p2p (copies between GPU 0 and GPU 1, traced by the injected library)"
  mkdir -p /run/cupti-exporter
  start_exporter "$L/exp-p2p.log" 9477 --no-pmsample.enabled --activity.socket=$SOCK || return
  scrape "$L/p2p-0.txt"
  CUDA_INJECTION64_PATH=$INJ CUPTI_EXPORTER_SOCKET=$SOCK timeout 120 $W p2p 100 > "$L/p2p-work.log" 2>&1; say "p2p workload rc=$? $(grep '^p2p' "$L/p2p-work.log")"
  sleep 3; scrape "$L/p2p-1.txt"
  say "memcpy before: $(grep '^cupti_memcpy_duration_seconds_count' "$L/p2p-0.txt" | tr '\n' ' ')"
  say "memcpy after: $(grep '^cupti_memcpy_duration_seconds_count' "$L/p2p-1.txt" | tr '\n' ' ')"
  say "dropped: $(grep '^cupti_activity_dropped_records_total' "$L/p2p-1.txt" | tr '\n' ' ')"
  stop_exporter 9477
}

# The Go tests that need the real CUPTI (test binaries built by prepare.sh), and the counter data
# costs the sampling loop is designed on, for a 4-metric set and for the default set.
stage_gotest() {
  say "== gotest"
  CUPTI_EXPORTER_REAL_TEST=1 CUPTI_COST_METRICS=$DEFSET "$G/cupti.test" -test.run 'TestRealMemorySteps' -test.v > "$L/gotest-memory.log" 2>&1; say "memory steps (default set) rc=$?"
  grep 'memory after' "$L/gotest-memory.log" | sed 's/^ *real_cost_test.go:[0-9]*: //' | tee -a "$S"
  CUPTI_EXPORTER_REAL_TEST=1 "$G/cupti.test" -test.run 'TestReal(CUPTI|CounterDataCosts)' -test.v > "$L/gotest-cupti.log" 2>&1; say "cupti real tests rc=$?"
  CUPTI_EXPORTER_REAL_TEST=1 CUPTI_COST_METRICS=$DEFSET "$G/cupti.test" -test.run 'TestRealCounterDataCosts' -test.v > "$L/gotest-cost-defset.log" 2>&1; say "cost test, default set rc=$?"
  for f in "$L/gotest-cupti.log" "$L/gotest-cost-defset.log"; do
    say "-- ${f##*/}"; grep -E 'reset cost|small image|big image|^(---|ok|FAIL)' "$f" | sed 's/^ *//' | cut -c1-230 | tee -a "$S"
  done
  PMSAMPLE_GPU=1 "$G/pmsample.test" -test.run 'TestGPU' -test.v > "$L/gotest-pmsample.log" 2>&1; say "pmsample gpu tests rc=$?"
  grep -E '^(---|ok|FAIL)|new session \(Enable|groups [0-9]+; turns' "$L/gotest-pmsample.log" | sed 's/^ *//' | cut -c1-400 | tee -a "$S"
}

# Where the sample that began before Start falls, FIRSTSAMPLE_N (5) short TestGPUSample runs of
# the build and, interleaved, of .gpu/pmsample-before.test where carried: dropped as the first
# sample, or counted invalid (CUPTI sometimes gives NaN values for it; run DA).
stage_firstsample() {
  say "== firstsample"
  local i b bins=("$G/pmsample.test")
  [ -x "$G/pmsample-before.test" ] && bins=("$G/pmsample-before.test" "${bins[@]}")
  for i in $(seq 1 "${FIRSTSAMPLE_N:-5}"); do
    for b in "${bins[@]}"; do
      PMSAMPLE_GPU=1 PMSAMPLE_SECONDS=2 "$b" -test.run 'TestGPUSample$' -test.v > "$L/firstsample-${b##*/}-$i.log" 2>&1
      say "${b##*/} run $i: $(grep -hE 'batch [0-9]+:|first samples dropped|^--- ' "$L/firstsample-${b##*/}-$i.log" | sed 's/^ *//; s/gpu_test.go:[0-9]*: //' | tr '\n' ';' | cut -c1-400)"
    done
  done
}

# The soak runs beside other stages (it has its own exporter, port and socket).
stage_soakbg() { stage_soak > "$L/soak-stage.log" 2>&1 & echo $! > "$L/soak.pid"; }
stage_soakwait() { wait "$(cat "$L/soak.pid")"; cat "$L/soak-stage.log" >> "$S"; }

# Resident memory of CUDA and CUPTI start-up in a bare process (initrss.py: CUPTI loading what it
# needs, the profiler initialised from a thread, the nvperf libraries preloaded by path), and the Go
# memory-steps test with glibc held to one malloc arena.
stage_initrss() {
  say "== initrss"
  for variant in lazy thread preload; do
    LIBDIR=$LIB python3 scripts/gpu/initrss.py $variant 2>&1 | tee -a "$S"
  done
  for arenas in "" 1; do
    env ${arenas:+MALLOC_ARENA_MAX=$arenas} CUPTI_EXPORTER_REAL_TEST=1 CUPTI_COST_METRICS=$DEFSET "$G/cupti.test" -test.run 'TestRealMemorySteps' -test.v > "$L/gotest-memory-$arenas.log" 2>&1
    say "memory steps, MALLOC_ARENA_MAX=${arenas:-unset}: $(grep -E 'memory after (start|Open)' "$L/gotest-memory-$arenas.log" | sed 's/^ *real_cost_test.go:[0-9]*: //' | tr -s ' ' | tr '\n' ';')"
  done
}

# Where the exporter's resident memory goes (issue 3 targets 100 MB at 1 kHz with the default set):
# the largest mappings by RSS after 10 s of sampling.
stage_rss() {
  say "== rss"
  start_exporter "$L/exp-rss.log" 9477 --no-activity.enabled || return
  pid=$(cat "$L/exporter.9477.pid"); sleep 10
  say "exporter rss=$(proc_rss_mb $pid)MB $(grep -E '^(RssAnon|RssFile|RssShmem|VmSize|Threads)' /proc/$pid/status | tr -s ' \t' ' ' | tr '\n' ' ')"
  say "largest mappings (kB rss, path):"
  awk '/^[0-9a-f]+-[0-9a-f]+ / { path = ($6 == "" ? "[anon]" : $6) } /^Rss:/ { rss[path] += $2 } END { for (p in rss) print rss[p], p }' \
    /proc/$pid/smaps | sort -rn | head -12 | tee -a "$S"
  say "samples after 10 s: $(curl -s localhost:9477/metrics | awk '/^cupti_pm_samples_total/ { s += $NF } END { print s }'); nvperf mapped: $(grep -o 'libnvperf_[a-z]*\.so' /proc/$pid/maps | sort -u | tr '\n' ' ')"
  say "largest single mappings (kB size, kB rss, perms, path):"
  awk '/^[0-9a-f]+-[0-9a-f]+ / { split($1, r, "-"); path = ($6 == "" ? "[anon]" : $6); perms = $2 } /^Size:/ { size = $2 } /^Rss:/ { print size, $2, perms, path }' \
    /proc/$pid/smaps | sort -k2 -rn | head -10 | tee -a "$S"
  stop_exporter 9477
  # peak RSS of one-shot commands: CUDA and profiler initialisation without sampling
  for cmd in "$BIN version" "$BIN metrics plan $DEFSET" "$G/pmprobe check $DEFSET"; do
    say "peak rss $(python3 -c 'import resource, subprocess, sys; subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); print(f"{resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024:.1f}MB")' $cmd): ${cmd##*/}" | cut -c1-160
  done
}

# Injection library absent (a workload pod started before the node DaemonSet copied it into
# the hostPath folder, which the chart mounts DirectoryOrCreate): does CUDA still run?
# Look for: rc=0 and the us/launch line (then the chart's note "runs untraced" holds).
stage_injmissing() {
  say "== injmissing"
  CUDA_INJECTION64_PATH=/run/cupti-exporter-absent/libcupti_exporter_inject.so $W tiny 1 > "$L/injmissing.log" 2>&1
  say "missing injection library: rc=$? $(grep -o '[0-9.]* us/launch' "$L/injmissing.log") $(grep -im2 -E 'error|inject' "$L/injmissing.log" | tr '\n' ' ')"
}

# Issue 14: per run, delivered + lost samples against the configured rate x time, CPU per sample
# against the time inside CUPTI calls, session churn, decode thread CPU and core share, side by
# side under one bf16 matmul load on GPU 0 (pmrate.py). Runs (PMT_RUNS, SET:MICROSECONDS:PIPELINE[:backoff];
# SET def = the default 9 metrics, cmp = 4 metrics; dpN: decode every N ms): the default set at
# 1 ms, 200 us and 100 us, 4 metrics at 100 us, both again with the double pipeline, the default
# set at 100 us decoded every 50 ms (its image, 1,266 slots x 79 KB = 100 MB at 100 ms, is past the
# 80 MB where re-initialisation cost per slot doubled in TestRealCounterDataCosts; 50 ms keeps it
# at 50 MB), serial and double, and the default set at 100 us with --pmsample.backoff. PMT_S seconds each (30), measured after 5 s (past admission). Then what
# CUPTI allows at once on one session (TestRealConcurrentDecode, 4 metrics and the default set
# at 100 us under the same load): two images decoded and evaluated on two threads, and
# evaluation of disjoint ranges on 1/2/4 threads.
stage_pmthroughput() {
  local dur=${PMT_S:-30} lp run set us pipe extra M args pid c0 c1 t0 t1
  say "== pmthroughput (bf16 matmul load, ${dur} s per run)"
  $W mm 900 > "$L/pmt-load.log" 2>&1 & lp=$!
  sleep 5
  for run in ${PMT_RUNS:-def:1000:serial def:200:serial def:100:serial cmp:100:serial def:100:double cmp:100:double def:100:serial:dp50 def:100:double:dp50 def:100:serial:backoff}; do
    IFS=: read -r set us pipe extra <<< "$run"
    M=$DEFSET; [ "$set" = cmp ] && M=$CMP
    args="--no-activity.enabled --pmsample.interval=${us}us --pmsample.metrics=$M --pmsample.pipeline=$pipe"
    [ "$extra" = backoff ] && args="$args --pmsample.backoff"
    [ "${extra#dp}" != "$extra" ] && args="$args --pmsample.decode-period=${extra#dp}ms"
    CUDA_VISIBLE_DEVICES=0 start_exporter "$L/exp-pmt-$set-$us-$pipe$extra.log" 9477 $args || continue
    pid=$(cat "$L/exporter.9477.pid"); sleep 5
    scrape "$L/pmt0.txt"; c0=$(proc_cpu_s $pid); t0=$(date +%s.%N); python3 scripts/gpu/threads.py $pid > "$L/pmt-th0.json"
    sleep "$dur"
    scrape "$L/pmt-$set-$us-$pipe$extra.txt"; c1=$(proc_cpu_s $pid); t1=$(date +%s.%N)
    python3 scripts/gpu/threads.py $pid "$L/pmt-th0.json" > "$L/pmt-th-$set-$us-$pipe$extra.json"
    say "$(python3 scripts/gpu/pmrate.py "$set@${us}us/$pipe${extra:+/$extra}" "$(python3 -c "print($us/1e6)")" "$L/pmt0.txt" \
      "$L/pmt-$set-$us-$pipe$extra.txt" "$(python3 -c "print($t1-$t0)")" "$(python3 -c "print($c1-$c0)")")"
    say "  cpu by thread (s): $(cat "$L/pmt-th-$set-$us-$pipe$extra.json" | cut -c1-200)"
    say "  readyz: $(curl -s localhost:9477/readyz | tr '\n' ' ' | cut -c1-400)"
    say "  log: $(grep -m2 -E 'sustain|backed off' "$L/exp-pmt-$set-$us-$pipe$extra.log" | cut -c1-300 | tr '\n' ' ')"
    stop_exporter 9477
  done
  for set in cmp def; do
    M=$DEFSET; [ "$set" = cmp ] && M=$CMP
    CUDA_VISIBLE_DEVICES=0 CUPTI_EXPORTER_REAL_TEST=1 CUPTI_COST_METRICS=$M CUPTI_CONC_INTERVAL=100us \
      timeout 120 "$G/cupti.test" -test.run 'TestRealConcurrentDecode' -test.v > "$L/gotest-conc-$set.log" 2>&1
    say "-- concurrent decode, $set set, 100 us: rc=$?"
    grep -E '\((a|b|c)\)|^(---|ok|FAIL)' "$L/gotest-conc-$set.log" | sed 's/^ *real_concurrency_test.go:[0-9]*: //' | cut -c1-400 | tee -a "$S"
  done
  kill $lp 2>/dev/null
}

# Issue 11 item 8: multiplexing on the GPU. The default set with --pmsample.multiplex=1s plans the
# FP16 pipe (and, where the GPUs have NVLink peers, the NVLink counters) as a second group beside
# the nine of the first. Phases on GPU 0: bf16 matmul (tensor pipe, group 1), fp16 element-wise
# (FP16 pipe, group 2), and with two GPUs an NCCL all-reduce (NVLink bytes). Each phase is 20 s,
# twice the window, so each group's cupti_pm_observed_ratio should read about 0.5 (a little less:
# the rotation's own gap, cupti_pm_samples_lost_total{reason="rotation"}), decode failures 0.
stage_pmmultiplex() {
  say "== pmmultiplex (default set + FP16 / NVLink groups, a new session each turn, every ${MUX_PERIOD:-2s})"
  "$BIN" metrics plan --multiplex "$DEFSET,sm__inst_executed_pipe_fma_type_fp16.avg.pct_of_peak_sustained_elapsed,nvlrx__bytes.sum,nvltx__bytes.sum" \
    > "$L/mux-plan.log" 2>&1; say "plan rc=$?: $(tr '\n' ' ' < "$L/mux-plan.log" | cut -c1-500)"
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
  start_exporter "$L/exp-mux.log" 9477 --no-activity.enabled --pmsample.multiplex="${MUX_PERIOD:-2s}" --pmsample.window=10s || return
  sleep 3; scrape "$L/mux-0.txt"; local t0; t0=$(date +%s.%N)
  say "groups: $(grep -iE 'left out|planned|group' "$L/exp-mux.log" | head -4 | cut -c1-300 | tr '\n' ' ')"
  local ph
  for ph in mm fp16; do
    $W $ph 20 > "$L/mux-$ph.log" 2>&1; scrape "$L/mux-$ph.txt"
    say "-- after $ph: observed $(grep '^cupti_pm_observed_ratio' "$L/mux-$ph.txt" | grep 'gpu="0"' | sed -E 's/.*metric="([^"]*)".* ([0-9.e+-]+)$/\1=\2/' | tr '\n' ' ')"
    say "   tensor $(grep -E '^cupti_tensor_pipe_active_ratio\{' "$L/mux-$ph.txt" | grep 'gpu="0"' | awk '{print $NF}') fp16 $(grep -E '^cupti_fp16_pipe_active_ratio\{' "$L/mux-$ph.txt" | grep 'gpu="0"' | awk '{print $NF}') coverage $(grep '^cupti_pm_window_coverage_ratio' "$L/mux-$ph.txt" | grep 'gpu="0"' | awk '{print $NF}')"
  done
  if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
    timeout 90 python3 scripts/gpu/mm_allreduce.py 15 > "$L/mux-allreduce.log" 2>&1; say "mm + all-reduce rc=$? $(tail -2 "$L/mux-allreduce.log" | tr "\n" " ")"
    scrape "$L/mux-nvl.txt"
    say "-- after all-reduce: observed $(grep '^cupti_pm_observed_ratio' "$L/mux-nvl.txt" | sed -E 's/.*gpu="([0-9]+)".*metric="([^"]*)".* ([0-9.e+-]+)$/gpu\1 \2=\3/' | grep -i nvl | tr '\n' ' ')"
    say "   nvlink: $(grep -E '^cupti_nvlink_bytes_total' "$L/mux-nvl.txt" | tr '\n' ' ' | cut -c1-400)"
  fi
  scrape "$L/mux-final.txt"
  # Delivered samples a second since mux-0, per GPU: with 2 s turns and about 150 ms per new
  # session, about 0.9 x the rate is expected; run M delivered none after the first turn.
  say "delivered since the first scrape: $(paste <(grep '^cupti_pm_samples_total' "$L/mux-0.txt" | awk '{print $NF}') \
    <(grep '^cupti_pm_samples_total' "$L/mux-final.txt" | awk '{print $NF}') \
    | awk -v dt="$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')" '{ printf "%.0f/s ", ($2 - $1) / dt }') (rate 1000/s)"
  say "failures: $(grep '^cupti_pm_decode_failures_total' "$L/mux-final.txt" | awk '$NF != 0' | tr '\n' ' ') lost: $(grep '^cupti_pm_samples_lost_total' "$L/mux-final.txt" | awk '$NF != 0' | sed -E 's/.*gpu="([0-9]+)".*reason="([^"]*)".* ([0-9.e+-]+)$/gpu\1 \2=\3/' | tr '\n' ' ') samples: $(grep '^cupti_pm_samples_total' "$L/mux-final.txt" | awk '{print $NF}' | tr '\n' ' ')"
  say "log warnings: $(grep -cE 'level=WARN' "$L/exp-mux.log") $(grep -m3 -E 'level=WARN' "$L/exp-mux.log" | cut -c1-200 | tr '\n' ' ')"
  stop_exporter 9477
}

# Attribution on a real run: the PyTorch phases injected (duty cycle off, so gaps are idle where
# the library sends coverage), with both estimators one after the other; after the workload, a
# wait past the watermark, then conservation, the traced/idle/untraced split and the per-kernel
# utilisation from one scrape (attrib_check.py).
stage_attribphases() {
  say "== attribphases"
  mkdir -p /run/cupti-exporter
  "$BIN" metrics plan "$DEFSET,dram__bytes_read.sum,dram__bytes_write.sum" > "$L/attrib-plan.log" 2>&1
  say "attrib plan (default set + dram bytes) rc=$?: $(head -20 "$L/attrib-plan.log" | tr '\n' ' ')"
  for est in ${ATTRIB_EST:-rate overlap}; do
    start_exporter "$L/exp-attrib-$est.log" 9477 --activity.socket=$SOCK --attribution.estimator=$est \
      --pmsample.interval=${ATTRIB_INTERVAL:-1ms} $PMARGS || return
    sleep 2
    CUDA_INJECTION64_PATH=$INJ CUPTI_EXPORTER_SOCKET=$SOCK timeout 120 $W phases > "$L/attrib-work-$est.log" 2>&1; say "attrib $est workload rc=$?"
    sleep 5; scrape "$L/attrib-$est.txt"
    say "attrib $est: pm metrics $(grep -c '^cupti_pm_samples_total' "$L/attrib-$est.txt") devices, families $(grep -oE '^cupti_(kernel|pod)_[a-z_]+_total' "$L/attrib-$est.txt" | sort -u | tr '\n' ' ')"
    python3 scripts/gpu/attrib_check.py "$L/attrib-$est.txt" | sed "s/^attrib /attrib $est /" | tee -a "$S"
    stop_exporter 9477
  done
}
