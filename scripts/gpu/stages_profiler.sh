# Issue 32: profilers beside the exporter (give way by itself, coexistence table), the PM path's
# own CPU. Stages:
#   profexplore  how ncu and nsys start, what they load, what each neighbour sees beside the
#                exporter, the availability probe, a CPU profile of the exporter at 1 ms (run BK)
#   profcoexist  the give-way on the GPU: ncu (defaults, the issue's --metrics, a PyTorch target)
#                while the exporter runs at its defaults, an exporter started while ncu profiles,
#                nsys with and without GPU metrics, nvidia-smi and a GPM reader, ncu with the
#                injection variable set; resume latency after each (exporter log)
#   pmcost       the PM path's CPU at 1 ms: the defaults (CPU profile with a cpuprofile build),
#                without NVML health, decode periods PMCOST_DP (250ms 500ms 1s 2s), and pmprobe
#                on the same set and load, in one run
#   pmcostab     the same before / after a change (.gpu/cupti-exporter-main against this build,
#                interleaved), and this build's decode periods with the attribution lag (runs CA, CB)
#   pmcostdp     the decode periods 100 ms and 250 ms on a workload of another shape (run CB)
#   givewaymargin  how long ncu and nsys take from their start to their target's context and first
#                kernel, and ncu/nsys beside the exporter at each give-way poll of GWM_POLLS

PA=$G/profapp
build_profapp() { [ -x "$PA" ] || nvcc -O2 -o "$PA" scripts/gpu/profapp.cu > "$L/build-profapp.log" 2>&1 || say "profapp build failed: $(tail -3 "$L/build-profapp.log")"; }
# nsys: not on PATH on these machines; Nsight Compute carries a copy
NSYS=${NSYS:-$(command -v nsys || ls -d /opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys 2>/dev/null | head -1)}
# ncu's summary of a run: rc, kernels profiled (==PROF== lines with "Profiling"), errors
ncu_summary() { echo "rc=${2#rc=} profiled=$(grep -c '==PROF== Profiling' "$1") errors=$(grep -m2 -E '==ERROR==|==WARNING==' "$1" | tr '\n' ' ' | cut -c1-300)"; }
state_of() { curl -s "localhost:${1:-9477}/metrics" | awk '/^cupti_pm_sampling_state/ && $NF == 1 { match($0, /state="[^"]*"/); printf "%s ", substr($0, RSTART + 7, RLENGTH - 8) }'; }
# found_after LOG T0: how long after T0 (s since the epoch) the exporter first logged "profiler
# found" (never: not at all)
found_after() { python3 - "$1" "$2" <<'PY'
import sys, re, datetime
t0 = float(sys.argv[2])
for line in open(sys.argv[1]):
    m = re.match(r'time=(\S+) .*profiler found', line)
    if m:
        t = datetime.datetime.fromisoformat(m.group(1).replace('Z', '+00:00')).timestamp()
        if t >= t0:
            print(f"+{(t - t0) * 1e3:.0f} ms")
            break
else:
    print("never")
PY
}

stage_profexplore() {
  say "== profexplore (issue 32)"
  build_profapp
  say "ncu: $(ncu --version 2>&1 | tail -1); nsys: $NSYS $("$NSYS" --version 2>&1 | head -1)"
  say "gpu metrics flags: $("$NSYS" profile --help 2>&1 | grep -oE -- '--gpu-metrics-[a-z-]+' | sort -u | tr '\n' ' ')"
  say "dcgm: $(command -v nv-hostengine dcgmi dcgm-exporter 2>&1 | tr '\n' ' ') processes: $(ls /proc | grep -c '^[0-9]')"
  # (a) how ncu and nsys start: every new process, its environment and libraries
  say "ncu is $(command -v ncu) -> $(readlink -f "$(command -v ncu)"); $(ls /opt/nvidia/nsight-compute/*/ 2>/dev/null | tr '\n' ' ' | cut -c1-300)"
  python3 scripts/gpu/procwatch.py 90 "$L/watch-ncu.jsonl" 2 & wp=$!; sleep 0.5
  echo "ncu_start $(date +%s.%N)" > "$L/ncu-alone.log"
  timeout 60 ncu -c 3 "$PA" 3 0 200 >> "$L/ncu-alone.log" 2>&1; rc=$?
  echo "ncu_end $(date +%s.%N)" >> "$L/ncu-alone.log"; sleep 0.5; kill $wp; wait $wp 2>/dev/null
  say "ncu alone: $(ncu_summary "$L/ncu-alone.log" $rc)"
  python3 scripts/gpu/procwatch.py 90 "$L/watch-nsys.jsonl" 2 & wp=$!; sleep 0.5
  echo "nsys_start $(date +%s.%N)" > "$L/nsys-alone.log"
  timeout 60 "$NSYS" profile --gpu-metrics-devices=0 -o /tmp/nsys-alone -f true "$PA" 3 0 200 >> "$L/nsys-alone.log" 2>&1; rc=$?
  echo "nsys_end $(date +%s.%N)" >> "$L/nsys-alone.log"; sleep 0.5; kill $wp; wait $wp 2>/dev/null
  say "nsys --gpu-metrics-devices=0 alone rc=$rc: $(grep -m3 -iE 'error|fail|warn|metric' "$L/nsys-alone.log" | tr '\n' ' ' | cut -c1-400)"
  # (b) probe of the counters' availability: free, then while ncu profiles kernels 100 ms apart
  PMSAMPLE_GPU=1 PMSAMPLE_PROBE_SECONDS=1 "$G/pmsample.test" -test.run GPUAvailabilityProbe -test.v > "$L/probe-free.log" 2>&1
  say "probe, counters free: $(grep -m1 'probe summary' "$L/probe-free.log")"
  (timeout 60 ncu -c 20 "$PA" 20 100 200 > "$L/ncu-probe.log" 2>&1; echo "rc=$?" >> "$L/ncu-probe.log") & np=$!
  PMSAMPLE_GPU=1 PMSAMPLE_PROBE_SECONDS=10 PMSAMPLE_PROBE_EVERY=20ms "$G/pmsample.test" -test.run GPUAvailabilityProbe -test.v > "$L/probe-ncu.log" 2>&1
  wait $np; say "probe during ncu -c 20 (kernels 100 ms apart): $(grep -m1 'probe summary' "$L/probe-ncu.log"); changes: $(grep -c 'probe [0-9]' "$L/probe-ncu.log"); ncu $(ncu_summary "$L/ncu-probe.log" "$(tail -1 "$L/ncu-probe.log")")"
  # (c) a CPU profile of the exporter at the defaults (1 ms) under a matmul
  mkdir -p /run/cupti-exporter
  $W mm 60 > "$L/prof-load.log" 2>&1 & lp=$!; sleep 4
  export CUPTI_EXPORTER_CPUPROFILE=$OUT/cpu-defaults.pprof,8s,20s
  start_exporter "$L/exp-prof.log" 9477 || return
  unset CUPTI_EXPORTER_CPUPROFILE
  pid=$(cat "$L/exporter.9477.pid"); sleep 8
  scrape "$L/prof0.txt"; c0=$(proc_cpu_s $pid); python3 scripts/gpu/threads.py $pid > "$L/prof-thr0.json"
  sleep 20
  scrape "$L/prof1.txt"; c1=$(proc_cpu_s $pid); python3 scripts/gpu/threads.py $pid "$L/prof-thr0.json" > "$L/prof-thr.json"
  n=$(python3 -c "print($(val "$L/prof1.txt" '^cupti_pm_samples_total') - $(val "$L/prof0.txt" '^cupti_pm_samples_total'))")
  cu=$(python3 -c "print($(val "$L/prof1.txt" '^cupti_pm_cupti_call_seconds_total') - $(val "$L/prof0.txt" '^cupti_pm_cupti_call_seconds_total'))")
  say "exporter defaults under mm, 20 s: cpu=$(python3 -c "print(round($c1-$c0,2))") s samples=$n us/sample=$(python3 -c "print(round(($c1-$c0)*1e6/$n,1))") cupti us/sample=$(python3 -c "print(round($cu*1e6/$n,1))") ratio=$(python3 -c "print(round(($c1-$c0)/$cu,3))") rss=$(proc_rss_mb $pid) MB"
  say "  by call: $(for c in decode sample_info evaluate reset session; do printf '%s=%s ' $c $(python3 -c "print(round(($(val "$L/prof1.txt" "^cupti_pm_cupti_call_seconds_total.*call=\"$c\"") - $(val "$L/prof0.txt" "^cupti_pm_cupti_call_seconds_total.*call=\"$c\""))*1e6/$n,1))"); done)"
  say "  threads: $(cat "$L/prof-thr.json")"
  grep -E '^(Rss|Pss|Anonymous|Private)' /proc/$pid/smaps_rollup | tr -s ' ' | tr '\n' ' ' | sed 's/^/  smaps: /' | tee -a "$S"; echo | tee -a "$S"
  awk '$6 ~ /\// { print $6 }' /proc/$pid/maps | sort -u > "$L/prof-maps.txt"
  python3 - "$pid" > "$L/prof-rss-by-map.txt" <<'PY'
import sys, collections
pid = sys.argv[1]; cur = None; rss = collections.Counter()
for l in open(f"/proc/{pid}/smaps"):
    f = l.split()
    if not f[0].endswith(":"):
        cur = f[5] if len(f) > 5 else "[anon]"
    elif f[0] == "Rss:":
        rss[cur] += int(f[1])
for k, v in rss.most_common(15): print(f"{v/1024:8.1f} MB {k}")
PY
  say "  rss by mapping: $(head -8 "$L/prof-rss-by-map.txt" | tr -s ' ' | tr '\n' ';')"
  stop_exporter 9477; kill $lp 2>/dev/null; wait $lp 2>/dev/null
  # (d) neighbours beside the exporter at its defaults (idle release off so that an idle GPU keeps its session)
  start_exporter "$L/exp-nb.log" 9477 --pmsample.idle-release-after=0 || return
  sleep 3; say "exporter state: $(state_of)"
  echo "ncu_start $(date +%s.%N)" > "$L/ncu-beside.log"; timeout 60 ncu -c 3 "$PA" 3 0 200 >> "$L/ncu-beside.log" 2>&1; rc=$?
  say "ncu -c 3 (defaults) beside: $(ncu_summary "$L/ncu-beside.log" $rc); exporter: $(state_of)"
  timeout 60 ncu --metrics sm__cycles_active.avg,dram__bytes_read.sum -c 3 "$PA" 3 0 200 > "$L/ncu-beside-m.log" 2>&1; rc=$?
  say "ncu --metrics (issue's command) beside: $(ncu_summary "$L/ncu-beside-m.log" $rc)"
  PMSAMPLE_GPU=1 PMSAMPLE_PROBE_SECONDS=1 "$G/pmsample.test" -test.run GPUAvailabilityProbe -test.v > "$L/probe-held.log" 2>&1
  say "probe while the exporter holds: $(grep -m1 'probe summary' "$L/probe-held.log")"
  # give way simulated: pause when an ncu process appears (100 ms poll), resume when it is gone
  python3 scripts/gpu/procwatch.py 90 "$L/watch-giveway.jsonl" 100 --pause-on=ncu & wp=$!; sleep 0.5
  echo "ncu_start $(date +%s.%N)" > "$L/ncu-giveway.log"; timeout 60 ncu -c 3 "$PA" 3 0 200 >> "$L/ncu-giveway.log" 2>&1; rc=$?
  echo "ncu_end $(date +%s.%N)" >> "$L/ncu-giveway.log"
  say "ncu with pause on sight (100 ms poll): $(ncu_summary "$L/ncu-giveway.log" $rc)"
  for i in $(seq 1 30); do sleep 0.1; echo "$(date +%s.%N) $(curl -s localhost:9477/metrics | grep '^cupti_pm_last_sample_timestamp_seconds' | head -1)" >> "$L/giveway-last.txt"; done
  kill $wp; wait $wp 2>/dev/null; say "  watcher: $(grep -E '"ev": "(pause|resume)"' "$L/watch-giveway.jsonl" | python3 -c "import sys,json; [print(d['ev'], round(d['t0'],3), round(d['t1']-d['t0'],3), end='; ') for d in map(json.loads, sys.stdin)]") last sample: $(tail -1 "$L/giveway-last.txt")"
  timeout 60 "$NSYS" profile -t cuda -o /tmp/nsys-b1 -f true "$PA" 3 0 200 > "$L/nsys-beside.log" 2>&1; rc=$?
  say "nsys -t cuda beside: rc=$rc $(grep -m3 -iE 'error|fail|warn' "$L/nsys-beside.log" | tr '\n' ' ' | cut -c1-300); exporter: $(state_of)"
  (for i in $(seq 1 20); do echo "$(date +%s.%N) $(state_of)"; sleep 0.5; done > "$L/nsys-gm-state.txt") & sp=$!
  timeout 60 "$NSYS" profile --gpu-metrics-devices=0 -o /tmp/nsys-b2 -f true "$PA" 3 0 200 > "$L/nsys-gm-beside.log" 2>&1; rc=$?
  say "nsys --gpu-metrics-devices=0 beside: rc=$rc $(grep -m3 -iE 'error|fail|warn|metric' "$L/nsys-gm-beside.log" | tr '\n' ' ' | cut -c1-400); exporter states: $(awk '{print $2}' "$L/nsys-gm-state.txt" | sort | uniq -c | tr '\n' ' ')"
  wait $sp # (run BK waited for every child here, the exporter too, and was cut at its limit)
  timeout 20 nvidia-smi --query-gpu=utilization.gpu,power.draw --format=csv,noheader > "$L/smi-beside.txt" 2>&1; say "nvidia-smi query beside rc=$?: $(cat "$L/smi-beside.txt")"
  timeout 20 nvidia-smi dmon --gpm-metrics 1,2,3,10 -c 3 > "$L/smi-gpm-beside.txt" 2>&1; say "nvidia-smi dmon --gpm-metrics beside rc=$?: $(tail -2 "$L/smi-gpm-beside.txt" | tr '\n' ';')"
  say "exporter after the neighbours: $(state_of) samples=$(curl -s localhost:9477/metrics | awk '/^cupti_pm_samples_total/ { s += $NF } END { print s }')"
  stop_exporter 9477
  # (e) ncu and nsys with the injection library's variable set (a pod the webhook wired)
  CUDA_INJECTION64_PATH=$INJ timeout 60 ncu -c 1 "$PA" 1 0 200 > "$L/ncu-injected.log" 2>&1; rc=$?
  say "ncu with CUDA_INJECTION64_PATH set: $(ncu_summary "$L/ncu-injected.log" $rc) $(grep -m2 -iE 'inject|another' "$L/ncu-injected.log" | tr '\n' ' ' | cut -c1-300)"
  CUDA_INJECTION64_PATH=$INJ CUPTI_EXPORTER_SOCKET=/tmp/none.sock timeout 60 "$NSYS" profile -t cuda -o /tmp/nsys-inj -f true "$PA" 1 0 200 > "$L/nsys-injected.log" 2>&1; rc=$?
  say "nsys with CUDA_INJECTION64_PATH set: rc=$rc $(grep -m3 -iE 'inject|error|warn' "$L/nsys-injected.log" | tr '\n' ' ' | cut -c1-300)"
}

# give_lines LOG: the exporter's give-way lines (found, given, gone, taken back, resumed)
give_lines() { grep -hE 'profiler found|gives way|counters free for|profiler gone|takes its counters back|resumed after a profiler' "$1" | sed -E 's/^time=[^ ]+ level=[A-Z]+ //' | cut -c1-300; }

stage_profcoexist() {
  # PROFCO_SKIP (words): slow (the PyTorch ncu and the nsys runs), inject (ncu/nsys with CUDA_INJECTION64_PATH)
  say "== profcoexist (issue 32: the give-way on the GPU)"
  build_profapp; mkdir -p /run/cupti-exporter
  say "dcgm: $(command -v nv-hostengine dcgmi dcgm-exporter 2>&1 | tr '\n' ' ') (none: DCGM not measured)"
  # the exporter at its defaults (start_exporter adds only the listener, the pause API and every series)
  start_exporter "$L/exp-co.log" 9477 || return
  sleep 3; say "exporter: $(state_of)"
  for run in "defaults:-c 3" "metrics:--metrics sm__cycles_active.avg,dram__bytes_read.sum -c 3"; do
    name=${run%%:*}; args=${run#*:}
    echo "ncu_start $(date +%s.%N)" > "$L/ncu-co-$name.log"
    timeout 90 ncu $args "$PA" 3 0 200 >> "$L/ncu-co-$name.log" 2>&1; rc=$?
    echo "ncu_end $(date +%s.%N)" >> "$L/ncu-co-$name.log"; sleep 1.5
    say "ncu $args beside the exporter: $(ncu_summary "$L/ncu-co-$name.log" $rc); ncu ended $(awk '/^ncu_end/ {print $2}' "$L/ncu-co-$name.log"); exporter: $(state_of)"
  done
  if [[ " ${PROFCO_SKIP:-} " != *" slow "* ]]; then # PROFCO_SKIP=slow: no PyTorch ncu, no nsys
    timeout 120 ncu -c 5 $W mm 3 > "$L/ncu-co-torch.log" 2>&1; rc=$?; sleep 1.5
    say "ncu -c 5 on a PyTorch matmul beside the exporter: $(ncu_summary "$L/ncu-co-torch.log" $rc); exporter: $(state_of)"
    timeout 60 "$NSYS" profile -t cuda -o /tmp/nsys-co1 -f true "$PA" 3 0 200 > "$L/nsys-co-trace.log" 2>&1; rc=$?
    say "nsys -t cuda beside: rc=$rc; exporter: $(state_of)"
    (for i in $(seq 1 40); do echo "$(date +%s.%N) $(state_of)"; sleep 0.25; done > "$L/nsys-co-state.txt") & sp=$!
    timeout 60 "$NSYS" profile --gpu-metrics-devices=all -o /tmp/nsys-co2 -f true "$PA" 20 100 200 > "$L/nsys-co-gm.log" 2>&1; rc=$?
    wait $sp
    say "nsys --gpu-metrics-devices=all beside: rc=$rc $(grep -m2 -iE 'illegal|error|metrics' "$L/nsys-co-gm.log" | tr '\n' ' ' | cut -c1-300); exporter states: $(awk '{print $2}' "$L/nsys-co-state.txt" | sort | uniq -c | tr '\n' ' ')"
  fi
  $W mm 12 > "$L/co-gpm-load.log" 2>&1 & lp=$!; sleep 3
  timeout 20 nvidia-smi --query-gpu=utilization.gpu,power.draw --format=csv,noheader > "$L/co-smi.txt" 2>&1; say "nvidia-smi query beside rc=$?: $(cat "$L/co-smi.txt")"
  timeout 20 nvidia-smi dmon --gpm-metrics 1,2,5,10 -c 3 > "$L/co-gpm.txt" 2>&1; say "nvidia-smi dmon --gpm-metrics beside rc=$?: $(tail -2 "$L/co-gpm.txt" | tr '\n' ';')"
  scrape "$L/co-gpm-scrape.txt"; say "  exporter meanwhile: $(state_of) sm_active=$(val "$L/co-gpm-scrape.txt" '^cupti_sm_active_ratio')"
  kill $lp 2>/dev/null; wait $lp 2>/dev/null
  scrape "$L/co-end.txt"
  say "give-ways: $(grep '^cupti_pm_give_ways_total' "$L/co-end.txt" | sed 's/{.*tool=/ tool=/' | tr '\n' ' '); lost as yielded: $(val "$L/co-end.txt" '^cupti_pm_lost_seconds_total.*yielded') s"
  give_lines "$L/exp-co.log" > "$L/co-giveway.txt"; say "$(cat "$L/co-giveway.txt")"
  stop_exporter 9477
  # an exporter started while ncu profiles (kernels 100 ms apart), then ncu's exit
  echo "ncu_start $(date +%s.%N)" > "$L/ncu-co-first.log"
  (timeout 90 ncu -c 30 "$PA" 30 100 200 >> "$L/ncu-co-first.log" 2>&1; echo "rc=$?" >> "$L/ncu-co-first.log"; echo "ncu_end $(date +%s.%N)" >> "$L/ncu-co-first.log") & np=$!
  sleep 4; start_exporter "$L/exp-co2.log" 9477 || return
  sleep 1; say "exporter started while ncu profiles: $(state_of) $(curl -s localhost:9477/readyz | grep -m1 pmsample | cut -c1-200)"
  # GPM fills the gap (issue 32 item 2): the curated series labelled source="gpm" while ncu holds the counters
  sleep 1; curl -s localhost:9477/metrics > "$L/co-ncu-gpm.txt"
  say "  meanwhile: $(grep -c 'source="gpm"' "$L/co-ncu-gpm.txt") series labelled source=gpm; $(grep -m1 '^cupti_sm_active_ratio{.*source="gpm"' "$L/co-ncu-gpm.txt" | sed 's/{.*}/ /')"
  wait $np; sleep 2
  say "ncu -c 30 (kernels 100 ms apart): $(ncu_summary "$L/ncu-co-first.log" "$(grep '^rc=' "$L/ncu-co-first.log")"); ended $(awk '/^ncu_end/ {print $2}' "$L/ncu-co-first.log"); exporter: $(state_of)"
  give_lines "$L/exp-co2.log" | tee -a "$S"
  stop_exporter 9477
  [[ " ${PROFCO_SKIP:-} " == *" inject "* ]] && return # PROFCO_SKIP=inject: not the injected-pod runs
  # a pod the webhook wired: the injection variable set
  CUDA_INJECTION64_PATH=$INJ timeout 60 ncu -c 1 "$PA" 1 0 200 > "$L/ncu-co-injected.log" 2>&1; rc=$?
  say "ncu with CUDA_INJECTION64_PATH set: $(ncu_summary "$L/ncu-co-injected.log" $rc) $(grep -m2 -iE 'inject|another' "$L/ncu-co-injected.log" | tr '\n' ' ' | cut -c1-300)"
  CUDA_INJECTION64_PATH=$INJ timeout 60 env -u CUDA_INJECTION64_PATH ncu -c 1 "$PA" 1 0 200 > "$L/ncu-co-uninjected.log" 2>&1; rc=$?
  say "the same through env -u CUDA_INJECTION64_PATH: $(ncu_summary "$L/ncu-co-uninjected.log" $rc)"
  CUDA_INJECTION64_PATH=$INJ CUPTI_EXPORTER_SOCKET=/tmp/none.sock timeout 60 "$NSYS" profile -t cuda -o /tmp/nsys-co3 -f true "$PA" 1 0 200 > "$L/nsys-co-injected.log" 2>&1; rc=$?
  say "nsys with CUDA_INJECTION64_PATH set: rc=$rc $(grep -m2 -iE 'inject|error' "$L/nsys-co-injected.log" | tr '\n' ' ' | cut -c1-300)"
}

# The curated default set as the exporter plans it on one GH100 without NVLink peers (9 + DRAM
# bytes + the context-switch counter), for pmprobe beside it.
DEF12=${DEF12:-$DEFSET,dram__bytes_read.sum,dram__bytes_write.sum,FE_A.TriageCompute.gpu__gr_cycles_active_cmd_ctxsw.sum}

# pmcost_run NAME SECONDS ARGS...: the exporter under the matmul, CPU and CUPTI calls per sample
pmcost_run() {
  local name=$1 secs=$2; shift 2
  start_exporter "$L/exp-cost-$name.log" 9477 "$@" || return
  local pid; pid=$(cat "$L/exporter.9477.pid"); sleep 4
  scrape "$L/cost0-$name.txt"; local c0; c0=$(proc_cpu_s $pid); python3 scripts/gpu/threads.py $pid > "$L/cost-thr0-$name.json"
  # PMCOST_PERF="NAME…": perf's call graphs of these variants over 5 s of the window (a build with
  # its symbol table: no -s), where the GPU machine has perf
  local pp=
  if [[ " ${PMCOST_PERF:-} " == *" $name "* ]] && command -v perf > /dev/null; then
    perf record -F 997 -g -p "$pid" -o "$L/perf-$name.data" -- sleep 5 > "$L/perf-$name.log" 2>&1 & pp=$!
  fi
  sleep "$secs"
  if [ -n "$pp" ]; then
    wait $pp
    perf report -i "$L/perf-$name.data" --stdio --no-children --sort dso,sym -g none 2> /dev/null | grep -v '^#' | grep . | head -70 > "$OUT/perf-$name-flat.txt"
    perf report -i "$L/perf-$name.data" --stdio --children --sort sym -g caller,0.5,callee --percent-limit 2 2> /dev/null | head -400 > "$OUT/perf-$name-tree.txt"
    perf report -i "$L/perf-$name.data" --stdio --no-children --sort tid -g none 2> /dev/null | grep -v '^#' | grep . | head -20 > "$OUT/perf-$name-tid.txt"
  fi
  scrape "$L/cost1-$name.txt"; local c1; c1=$(proc_cpu_s $pid); THREADS_DETAIL=$L/cost-thrd-$name.json python3 scripts/gpu/threads.py $pid "$L/cost-thr0-$name.json" > "$L/cost-thr-$name.json"
  local rss; rss=$(proc_rss_mb $pid)
  local anon; anon=$(awk '/^Anonymous/ {printf "%.0f", $2/1024}' /proc/$pid/smaps_rollup)
  python3 - "$L/cost0-$name.txt" "$L/cost1-$name.txt" "$c0" "$c1" "$secs" "$name" "$rss" "$anon" "$L/cost-thr-$name.json" <<'PY' | tee -a "$S"
import sys, re, json
def vals(f):
    out = {}
    for l in open(f):
        if l.startswith("#"): continue
        m = re.match(r'(\w+)(\{[^}]*\})? (\S+)', l)
        if m: out[m.group(1) + (m.group(2) or "")] = float(m.group(3))
    return out
a, b = vals(sys.argv[1]), vals(sys.argv[2])
d = lambda k: sum(v - a.get(n, 0) for n, v in b.items() if n.startswith(k))
call = lambda c: sum(v - a.get(n, 0) for n, v in b.items() if n.startswith("cupti_pm_cupti_call_seconds_total") and f'call="{c}"' in n)
n = d("cupti_pm_samples_total"); cpu = float(sys.argv[4]) - float(sys.argv[3]); cu = d("cupti_pm_cupti_call_seconds_total")
lost = sum(v - a.get(k, 0) for k, v in b.items() if k.startswith("cupti_pm_samples_lost_total"))
us = lambda x: x * 1e6 / max(n, 1)
print(f"{sys.argv[6]}: {n:.0f} samples in {sys.argv[5]} s, lost {lost:.0f}; process {us(cpu):.1f} us/sample, CUPTI calls {us(cu):.1f} "
      f"(decode {us(call('decode')):.1f}, evaluate {us(call('evaluate')):.1f}, reset {us(call('reset')):.1f}, sample_info {us(call('sample_info')):.1f}, session {us(call('session')):.1f}); "
      f"ratio {cpu / max(cu, 1e-9):.3f}; {100 * cpu / float(sys.argv[5]):.1f} % of a core; RSS {sys.argv[7]} MB (anonymous {sys.argv[8]} MB)")
# The window's CPU by thread group (threads.py): Go's threads carry the binary's name (either
# build's: cupti-exporter, cupti-exporter-), CUPTI's and the driver's name themselves.
groups = {}
for t, s in json.load(open(sys.argv[9])).items():
    g = "go" if t.startswith("cupti-exporte") else t
    groups[g] = groups.get(g, 0.0) + s
print(f"  {sys.argv[6]} by thread, us/sample: " + ", ".join(f"{g} {us(s):.1f}" for g, s in sorted(groups.items(), key=lambda kv: -kv[1]))
      + f" (threads' sum {us(sum(groups.values())):.1f}; Go's threads / CUPTI calls {groups.get('go', 0) / max(cu, 1e-9):.3f})")
# The decode thread (its own CPU clock, cupti_pm_decode_thread_cpu_seconds_total) against the rest of
# the process, and how often each thread slept and woke (THREADS_DETAIL).
dt = d("cupti_pm_decode_thread_cpu_seconds_total"); secs = float(sys.argv[5])
print(f"  {sys.argv[6]}: decode thread {us(dt):.1f} us/sample ({dt / max(cu, 1e-9):.3f} x CUPTI calls), the rest of the process {us(cpu - dt):.1f}")
PY
  say "  $name: $(thread_detail "$L/cost-thrd-$name.json" "$secs")"
  [ -n "${PMCOST_LAG:-}" ] && pmcost_lag "$name"
  stop_exporter 9477
}

# thread_detail FILE SECONDS: a THREADS_DETAIL file (threads.py) in one line: context switches a
# second and the busiest threads (name:tid CPU seconds, voluntary, involuntary switches).
thread_detail() {
  python3 - "$1" "$2" <<'PY'
import json, sys
d, s = json.load(open(sys.argv[1])), float(sys.argv[2])
print(f"context switches {d['voluntary'] / s:.0f}/s voluntary, {d['involuntary'] / s:.0f}/s involuntary; "
      f"{len(d['threads'])} threads, {d.get('cpu', 0):.3f} s of CPU, busiest (cpu s, vol, invol): " + ", ".join(f"{r[0][:14]}:{r[1]} {r[2]:.3f} {r[3]} {r[4]}" for r in d["threads"][:8]))
PY
}

# pmcost_lag NAME: after the measured window, 6 scrapes 0.7 s apart: how old the newest PM
# sample is at a scrape (scrape time - cupti_pm_last_sample_timestamp_seconds) and the
# attribution lag (the largest cupti_attribution_lag_seconds).
pmcost_lag() {
  local i t f=$L/cost-lag-$1.txt; : > "$f"
  for i in $(seq 1 6); do
    t=$(date +%s.%N); curl -s localhost:9477/metrics > "$L/cost-lag.tmp"
    echo "$t $(awk '/^cupti_pm_last_sample_timestamp_seconds/ { if ($NF > m) m = $NF } END { printf "%.3f", m }' "$L/cost-lag.tmp") $(awk '/^cupti_attribution_lag_seconds/ { if ($NF > m) m = $NF } END { printf "%.3f", m }' "$L/cost-lag.tmp")" >> "$f"
    sleep 0.7
  done
  say "  $1: newest sample's age at a scrape $(awk '{ a = $1 - $2; s += a; if (a > m) m = a } END { printf "mean %.2f max %.2f s", s / NR, m }' "$f"); attribution lag $(awk '{ s += $3; if ($3 > m) m = $3 } END { printf "mean %.2f max %.2f s", s / NR, m }' "$f")"
}

# pmcostab (issue 32 item 5, runs CA, CB): the PM path's CPU at 1 ms at the defaults under one
# uninjected bf16 matmul (as run BK), the build before the change (.gpu/cupti-exporter-main) and
# this one interleaved, PMCOST_ROUNDS (2) rounds of PMCOST_S (12) s each, a CPU profile of this
# build's first run ($OUT/cpu-pmcost-after.pprof, a cpuprofile build); this build without NVML
# health; then, under an injected bf16 matmul (so attribution has a pod to join), this build at
# the decode periods PMCOST_DP (100ms 250ms 1s 2s): CPU, RSS, the newest sample's age and the
# attribution lag. Every run's CPU is also split by thread group, in µs a sample (pmcost_run,
# threads.py). About 3.5 minutes.
stage_pmcostab() {
  say "== pmcostab (issue 32 item 5: before / after, decode periods)"
  mkdir -p /run/cupti-exporter
  local secs=${PMCOST_S:-12} r dp
  $W mm 600 > "$L/costab-load.log" 2>&1 & local lp=$!; sleep 4
  for r in $(seq 1 "${PMCOST_ROUNDS:-2}"); do
    BIN=$G/cupti-exporter-main pmcost_run "before-$r" "$secs"
    [ "$r" = 1 ] && export CUPTI_EXPORTER_CPUPROFILE=$OUT/cpu-pmcost-after.pprof,5s,$((secs - 1))s
    pmcost_run "after-$r" "$secs"
    unset CUPTI_EXPORTER_CPUPROFILE
  done
  pmcost_run after-no-health "$secs" --no-health.enabled
  kill $lp 2>/dev/null; wait $lp 2>/dev/null
  CUDA_INJECTION64_PATH=$INJ CUPTI_EXPORTER_SOCKET=$SOCK $W mm 600 > "$L/costab-load2.log" 2>&1 & lp=$!; sleep 4
  for dp in ${PMCOST_DP:-100ms 250ms 1s 2s}; do PMCOST_LAG=1 pmcost_run "decode-$dp" "$secs" --pmsample.decode-period="$dp"; done
  kill $lp 2>/dev/null; wait $lp 2>/dev/null
}

stage_pmcost() {
  say "== pmcost (issue 32 item 5: the PM path's CPU at 1 ms)"
  mkdir -p /run/cupti-exporter
  $W mm 400 > "$L/cost-load.log" 2>&1 & lp=$!; sleep 4
  local secs=${PMCOST_S:-15}
  export CUPTI_EXPORTER_CPUPROFILE=$OUT/cpu-pmcost.pprof,5s,$((secs - 2))s # inside the measured window
  pmcost_run defaults "$secs"
  unset CUPTI_EXPORTER_CPUPROFILE
  pmcost_run no-health "$secs" --no-health.enabled
  for dp in ${PMCOST_DP:-250ms 500ms 1s 2s}; do pmcost_run "decode-$dp" "$secs" --pmsample.decode-period=$dp; done
  if [ -x "$G/pmprobe" ]; then
    "$G/pmprobe" sample $((secs + 6)) 1000000 "$DEF12" 2> "$L/cost-probe.err" |
      while IFS= read -r line; do printf '%s\t%s\n' "$(date +%s.%N)" "$line"; done > "$L/cost-probe.tsv" &
    pw=$!; sleep 4; pp=$(pgrep -n -f "pmprobe sample"); python3 scripts/gpu/threads.py $pp > "$L/cost-probe-thr0.json"
    sleep "$secs"; python3 scripts/gpu/threads.py $pp "$L/cost-probe-thr0.json" > "$L/cost-probe-thr.json"; prss=$(proc_rss_mb $pp)
    wait $pw
    say "pmprobe, the same 12 metrics at 1 ms: rss=${prss}MB $(awk -F'\t' '$3 ~ /^[0-9]+$/ { n += $3; d += $4; e += $5 } END { printf "samples=%d decode+eval us/sample=%.2f (decode %.2f, evaluate %.2f)", n, (d + e) / n, d / n, e / n }' "$L/cost-probe.tsv"); threads $(cat "$L/cost-probe-thr.json")"
  fi
  kill $lp 2>/dev/null; wait $lp 2>/dev/null
}

# pmcost_variants RUNS ROUND SECS: pmcost_run of each variant of RUNS (NAME:WORDS separated by
# "|", WORDS the exporter's --flags and VAR=VALUE for its environment), named NAME-ROUND.
pmcost_variants() {
  local v name flags w
  IFS='|' read -ra vs <<< "$1"
  for v in "${vs[@]}"; do
    name=${v%%:*} flags=${v#*:}
    local envs=() args=()
    for w in $flags; do case $w in --*) args+=("$w") ;; *=*) envs+=("$w") ;; esac; done
    ( [ ${#envs[@]} -gt 0 ] && export "${envs[@]}"; pmcost_run "$name-$2" "$3" "${args[@]}" )
  done
}

# pmcostref (issue 32 item 5, runs CL-CP, CS): the exporter beside NVIDIA's API path called directly
# at the exporter's own settings, interleaved under one uninjected bf16 matmul: the exporter in
# each variant of PMCOSTREF_RUNS (NAME:WORDS separated by "|", WORDS the exporter's --flags and
# VAR=VALUE for its environment; default the defaults and without NVML health), then
# scripts/gpu/pmref.cu with the same 12 metrics, 1 ms, PMREF_DECODE (250) ms decodes into
# PMREF_SLOTS (366) slots (the exporter's image at its default decode period; 100 and 216 before
# run DP), 64 MiB, writing no samples; PMCOST_ROUNDS (2) rounds of PMCOST_S (12) s.
# pmref prints its process CPU (every thread) and the time inside each CUPTI
# call, both a sample: whatever CUPTI spends outside its calls shows in its ratio too.
stage_pmcostref() {
  say "== pmcostref (issue 32 item 5: the exporter beside CUPTI called directly, 1 ms)"
  mkdir -p /run/cupti-exporter
  pmref_build || return
  local secs=${PMCOST_S:-12} r
  local runs=${PMCOSTREF_RUNS:-defaults:|no-health:--no-health.enabled}
  $W mm 600 > "$L/costref-load.log" 2>&1 & local lp=$!; sleep 4
  for r in $(seq 1 "${PMCOST_ROUNDS:-2}"); do
    pmcost_variants "$runs" "$r" "$secs"
    "$G/pmref" "$secs" 1000000 "${PMREF_DECODE:-250}" "${PMREF_SLOTS:-366}" "$DEF12" - > "$L/pmref-cost-$r.log" 2>&1 & local rp=$!
    # its threads' context switches over the middle of its run, as the exporter's (pmcost_run)
    sleep 2; python3 scripts/gpu/threads.py $rp > "$L/pmref-thr0-$r.json" 2>/dev/null
    sleep $((secs - 3)); THREADS_DETAIL=$L/pmref-thrd-$r.json python3 scripts/gpu/threads.py $rp "$L/pmref-thr0-$r.json" > /dev/null 2>&1
    wait $rp
    say "pmref-$r: $(grep -m1 'pmref:' "$L/pmref-cost-$r.log"); $(grep -m1 'pmref cost' "$L/pmref-cost-$r.log" || tail -2 "$L/pmref-cost-$r.log")"
    [ -s "$L/pmref-thrd-$r.json" ] && say "  pmref-$r: $(thread_detail "$L/pmref-thrd-$r.json" $((secs - 3)))"
  done
  kill $lp 2>/dev/null; wait $lp 2>/dev/null
}

# pmcostdp (issue 32 item 5, run CB): the default decode period's check on a workload of
# another shape than pmcostab's (an injected matmul in 30 % bursts, 30 ms on, 70 ms off):
# 100 ms and 250 ms interleaved (or the variants of PMCOSTDP_RUNS, as pmcostref's), PMCOST_ROUNDS
# (2) rounds of PMCOST_S (12) s at 1 ms, then both at 100 us with the double pipeline (one round;
# PMCOSTDP_100US= leaves it out): CPU, RSS, the newest sample's age, the attribution lag.
# PMCOSTDP_LOAD: workload.py's words for another load ("tiny 600": tiny kernels at a high rate, the
# activity receiver's and the join's heaviest case). About 2.5 minutes.
stage_pmcostdp() {
  say "== pmcostdp (issue 32 item 5: variants under an injected load, ${PMCOSTDP_LOAD:-seq burst30:600})"
  mkdir -p /run/cupti-exporter
  local secs=${PMCOST_S:-12} r dp
  CUDA_INJECTION64_PATH=$INJ CUPTI_EXPORTER_SOCKET=$SOCK $W ${PMCOSTDP_LOAD:-seq burst30:600} > "$L/costdp-load.log" 2>&1 & local lp=$!; sleep 5
  for r in $(seq 1 "${PMCOST_ROUNDS:-2}"); do
    PMCOST_LAG=1 pmcost_variants "${PMCOSTDP_RUNS:-bursts-100ms:--pmsample.decode-period=100ms|bursts-250ms:--pmsample.decode-period=250ms}" "$r" "$secs"
  done
  [ -n "${PMCOSTDP_100US-1}" ] && for dp in 100ms 250ms; do PMCOST_LAG=1 pmcost_run "bursts-100us-$dp" "$secs" --pmsample.interval=100us --pmsample.pipeline=double --pmsample.decode-period=$dp; done
  kill $lp 2>/dev/null; wait $lp 2>/dev/null
}

# givewaymargin (issue 32 items 1 and 5): how much time a profiler leaves the give-way, and
# whether the give-way wins at each watcher poll of GWM_POLLS (default "100ms 250ms": the
# default, and the decode period, at which the watch's polls would cost no wake-ups of their
# own: docs/performance.md). (a) Alone, no exporter: from just before `ncu -c 3 profapp` (or
# `nsys profile --gpu-metrics-devices=all profapp`) starts to profapp's own prints (main, its
# context, the first launch): the earliest a profiler can ask for the counters is after the
# front end started its target. GWM_ALONE (4) runs of ncu, GWM_NSYS_ALONE (GWM_NSYS) of nsys. (b) For each poll, beside
# the exporter at its defaults with --pmsample.give-way-poll=POLL (idle release off, so the
# idle GPU keeps its session): GWM_BESIDE (6) runs of ncu -c 3, GWM_NSYS (2) of nsys with GPU
# metrics on `profapp GWM_NSYS_ARGS` (default "20 100 200", about 10 s a run; "3 0 200": 3 s);
# what each profiled, the give-way lines. About 1 + 1.5 minutes a poll.
stage_givewaymargin() {
  say "== givewaymargin (issue 32: a profiler's start against the give-way polls ${GWM_POLLS:-100ms 250ms})"
  build_profapp; mkdir -p /run/cupti-exporter
  local i t0 rc log poll took
  # gap NAME LOG T0: profapp's prints in LOG against T0 (s, before the profiler started)
  gap() { awk -v t0="$3" -v n="$1" '/^main / && !m {m=$2} /^context / && !c {c=$2} /^launch 0 / && !l {l=$3}
    END {printf "%s: target main +%.3f s, its context +%.3f s, first launch +%.3f s after the profiler started\n", n, m-t0, c-t0, l-t0}' "$2"; }
  for i in $(seq 1 "${GWM_ALONE:-4}"); do
    log=$L/gwm-ncu-alone-$i.log; t0=$(date +%s.%N); timeout 60 ncu -c 3 "$PA" 3 0 200 > "$log" 2>&1; rc=$?
    say "$(gap "ncu alone $i (rc=$rc, profiled $(grep -c '==PROF== Profiling' "$log"))" "$log" "$t0")"
  done
  for i in $(seq 1 "${GWM_NSYS_ALONE:-${GWM_NSYS:-2}}"); do
    log=$L/gwm-nsys-alone-$i.log; t0=$(date +%s.%N); timeout 60 "$NSYS" profile --gpu-metrics-devices=all -o "/tmp/gwm-nsys-$i" -f true "$PA" 3 0 200 > "$log" 2>&1; rc=$?
    say "$(gap "nsys --gpu-metrics-devices=all alone $i (rc=$rc)" "$log" "$t0")"
  done
  # GWM_CPULOAD=N: N busy loops (one per core: nproc) beside the exporter and the profilers, a
  # node whose CPUs are all taken (data loaders, a build): do the polls still find them in time?
  # GWM_EXECLOAD=N: N loops exec'ing /bin/true without pause, a node that starts programs all the
  # time: the watch's looks at reported execs are paced (a burst, then one every 100 ms).
  local loads=() n e
  for poll in ${GWM_POLLS:-100ms 250ms}; do
    start_exporter "$L/exp-gwm-$poll.log" 9477 --pmsample.idle-release-after=0 --pmsample.give-way-poll="$poll" || return
    n=${GWM_CPULOAD:-0}; [ "$n" = nproc ] && n=$(nproc)
    for _ in $(seq 1 "$n"); do (while :; do :; done) & loads+=($!); done
    e=${GWM_EXECLOAD:-0}
    for _ in $(seq 1 "$e"); do (while :; do /bin/true; done) & loads+=($!); done
    sleep 3; say "exporter (give-way poll $poll, $n busy loops, $e exec loops): $(state_of); load $(cut -d' ' -f1-3 /proc/loadavg)"
    for i in $(seq 1 "${GWM_BESIDE:-6}"); do
      log=$L/gwm-ncu-$poll-$i.log; t0=$(date +%s.%N); timeout 60 ncu -c 3 "$PA" 3 0 200 > "$log" 2>&1; rc=$?
      sleep 1.2; say "  ncu -c 3 beside, poll $poll, $i: $(ncu_summary "$log" $rc);$(gap t "$log" "$t0" | cut -d: -f2); exporter: $(state_of)"
    done
    for i in $(seq 1 "${GWM_NSYS:-2}"); do
      log=$L/gwm-nsys-$poll-$i.log; t0=$(date +%s.%N); timeout 60 "$NSYS" profile --gpu-metrics-devices=all -o "/tmp/gwm-nsysb-$i" -f true "$PA" ${GWM_NSYS_ARGS:-20 100 200} > "$log" 2>&1; rc=$?
      took=$(python3 -c "import time; print(f'{time.time() - $t0:.2f}')")
      sleep 1.2; say "  nsys --gpu-metrics-devices=all beside, poll $poll, $i: rc=$rc after $took s, found $(found_after "$L/exp-gwm-$poll.log" "$t0") $(grep -m2 -iE 'illegal|already|error' "$log" | tr '\n' ' ' | cut -c1-200); exporter: $(state_of)"
    done
    scrape "$L/gwm-end-$poll.txt"
    say "  give-ways at poll $poll: $(grep '^cupti_pm_give_ways_total' "$L/gwm-end-$poll.txt" | sed 's/{.*tool=/ tool=/' | tr '\n' ' ')$(grep -E '^cupti_pm_give_way_exec' "$L/gwm-end-$poll.txt" | tr '\n' ' ')"
    give_lines "$L/exp-gwm-$poll.log" | sed 's/^/    /' | tee -a "$S"
    [ ${#loads[@]} -gt 0 ] && { kill "${loads[@]}" 2>/dev/null; wait "${loads[@]}" 2>/dev/null; loads=(); }
    stop_exporter 9477
  done
}

# nsyswatch (issue 32 item 1, run BZ): how soon Nsight Systems with GPU metrics checks the
# counters after it starts, against how soon the exporter (defaults, give-way on) sees it and
# lets go. A watcher lists nsys's processes every 10 ms (pgrep); nsys runs with
# --gpu-metrics-devices=all on profapp, beside the exporter, then again with the exporter
# paused through its API first (the documented workaround); NSYSW_RUNS ("beside paused") says
# which runs, in order. About 20 s a run.
stage_nsyswatch() {
  say "== nsyswatch (issue 32: nsys --gpu-metrics-devices beside the give-way)"
  build_profapp; mkdir -p /run/cupti-exporter
  start_exporter "$L/exp-nsysw.log" 9477 || return
  sleep 3; say "exporter: $(state_of)"
  local run rc t0 t1 wp i=0
  for run in ${NSYSW_RUNS:-beside paused}; do
    i=$((i + 1))
    if [ "$run" = paused ]; then
      curl -s -X POST "localhost:9477/api/v1/pm-sampling/pause?duration=2m" > /dev/null; sleep 0.5; say "paused: $(state_of)"
    fi
    (while :; do pgrep -a nsys | sed "s/^/$(date +%s.%N) /"; pgrep -a -f QdstrmImporter | sed "s/^/$(date +%s.%N) /"; sleep 0.01; done > "$L/nsysw-$run$i-ps.txt") & wp=$!
    t0=$(date +%s.%N)
    timeout 60 "$NSYS" profile --gpu-metrics-devices=all -o "/tmp/nsysw-$run$i" -f true "$PA" 20 100 200 > "$L/nsysw-$run$i.log" 2>&1; rc=$?
    t1=$(date +%s.%N)
    kill $wp 2>/dev/null; wait $wp 2>/dev/null
    say "nsys --gpu-metrics-devices=all ($run): rc=$rc after $(python3 -c "print(f'{$t1-$t0:.3f}')") s (started $t0) $(grep -m3 -iE 'illegal|already|metrics for' "$L/nsysw-$run$i.log" | tr '\n' ' ' | cut -c1-240)"
    say "  nsys processes seen: first $(head -1 "$L/nsysw-$run$i-ps.txt" | cut -c1-160); $(awk '{print $2, $3}' "$L/nsysw-$run$i-ps.txt" | sort -u | head -6 | tr '\n' ';')"
    if [ "$run" = paused ]; then
      curl -s -X POST "localhost:9477/api/v1/pm-sampling/resume" > /dev/null; sleep 1
    fi
  done
  sleep 1; say "exporter: $(state_of)"
  give_lines "$L/exp-nsysw.log" | sed 's/^/  /' | tee -a "$S"
  grep -hE 'profiler found|gives way|profiler gone|takes its counters back' "$L/exp-nsysw.log" | grep -oE '^time=[^ ]+' | sed 's/^/  at /' | tee -a "$S"
  stop_exporter 9477
}

# givewaygpus (issue 32 item 1, a host of two or more GPUs): a profiler gets the GPUs it wants and
# the others keep sampling. The exporter at its defaults; each case runs a profiler on `profapp
# GWG_ARGS` (default "20 100 200", about 3 s of kernels) and, GWG_MID (1.5) s after it started,
# reads every GPU's state and the samples each took in the next second; then what it profiled
# and the states after it. Cases: ncu with CUDA_VISIBLE_DEVICES set to GPU 1's UUID, then GPU
# 0's; ncu with CUDA_VISIBLE_DEVICES=1 (an index: every GPU is given, docs/pm-sampling.md); nsys
# with GPU metrics on every GPU (GWG_CASES: ncu-uuid1 ncu-uuid0 ncu-index1 nsys-all, in any order
# and number). About 10 s a case.
stage_givewaygpus() {
  say "== givewaygpus (issue 32: a profiler gets the GPUs it wants, the others keep sampling)"
  build_profapp; mkdir -p /run/cupti-exporter
  local ng u0 u1
  ng=$(nvidia-smi -L | wc -l)
  [ "$ng" -ge 2 ] || { say "needs two GPUs, found $ng"; return; }
  u0=$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i 0); u1=$(nvidia-smi --query-gpu=uuid --format=csv,noheader -i 1)
  # by_gpu FILE: gpu=state for every GPU of a scrape
  by_gpu() { awk '/^cupti_pm_sampling_state/ && $NF == 1 { match($0, /gpu="[^"]*"/); g = substr($0, RSTART + 5, RLENGTH - 6); match($0, /state="[^"]*"/); printf "gpu %s %s; ", g, substr($0, RSTART + 7, RLENGTH - 8) }' "$1"; }
  # samples_between A B: each GPU's samples from scrape A to scrape B
  samples_between() { awk '/^cupti_pm_samples_total/ { match($0, /gpu="[^"]*"/); g = substr($0, RSTART + 5, RLENGTH - 6); if (FILENAME == ARGV[1]) a[g] = $NF; else printf "gpu %s %d; ", g, $NF - a[g] }' "$1" "$2"; }
  gwg_case() { # NAME CUDA_VISIBLE_DEVICES COMMAND...
    local name=$1 cvd=$2 log=$L/gwg-$1.log p rc t0 took; shift 2
    t0=$(date +%s.%N)
    env ${cvd:+CUDA_VISIBLE_DEVICES=$cvd} timeout 60 "$@" > "$log" 2>&1 & p=$!
    sleep "${GWG_MID:-1.5}"; scrape "$L/gwg-$name-1.txt"; sleep 1; scrape "$L/gwg-$name-2.txt"
    wait $p; rc=$?; took=$(python3 -c "import os; print(f'{os.stat(\"$log\").st_mtime - $t0:.2f}')")
    say "  $name: rc=$rc (its output last written $took s after its start), found $(found_after "$L/exp-gwg.log" "$t0"), ncu profiled $(grep -c '==PROF== Profiling' "$log") $(grep -m1 -iE 'illegal|already|==ERROR==' "$log" | cut -c1-160)"
    say "    while it ran: $(by_gpu "$L/gwg-$name-1.txt")samples in the next second: $(samples_between "$L/gwg-$name-1.txt" "$L/gwg-$name-2.txt")"
    sleep 1.5; scrape "$L/gwg-$name-3.txt"; say "    after: $(by_gpu "$L/gwg-$name-3.txt")"
  }
  start_exporter "$L/exp-gwg.log" 9477 --pmsample.idle-release-after=0 || return
  sleep 3; scrape "$L/gwg-start.txt"; say "exporter: $(by_gpu "$L/gwg-start.txt")(GPU 0 $u0, GPU 1 $u1)"
  local args=${GWG_ARGS:-20 100 200} c n=0
  for c in ${GWG_CASES:-ncu-uuid1 ncu-uuid0 ncu-index1 nsys-all}; do
    n=$((n + 1))
    case $c in
    ncu-uuid1) gwg_case "$n-$c" "$u1" ncu -c 3 "$PA" $args ;;
    ncu-uuid0) gwg_case "$n-$c" "$u0" ncu -c 3 "$PA" $args ;;
    ncu-index1) gwg_case "$n-$c" 1 ncu -c 3 "$PA" $args ;;
    nsys-all) gwg_case "$n-$c" "" "$NSYS" profile --gpu-metrics-devices=all -o /tmp/gwg-nsys -f true "$PA" $args ;;
    *) say "  unknown case $c" ;;
    esac
  done
  scrape "$L/gwg-end.txt"
  say "  give-ways: $(grep '^cupti_pm_give_ways_total' "$L/gwg-end.txt" | sed -E 's/\{.*gpu="([^"]*)".*tool="([^"]*)".*\} / gpu \1 tool \2: /' | tr '\n' ' ')"
  give_lines "$L/exp-gwg.log" | grep -E 'gives way|takes its counters back' | sed 's/^/    /' | tee -a "$S"
  stop_exporter 9477
}
