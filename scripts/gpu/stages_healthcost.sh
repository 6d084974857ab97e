# healthcost stage of scripts/gpu/validate.sh (sourced): what one NVML collection costs on this host
# (cupti_health_collection_seconds over 20 collections; error and link counters are read every tenth).
stage_healthcost() {
  say "== healthcost"
  start_exporter "$L/exp-healthcost.log" 9477 --no-activity.enabled --no-pmsample.enabled || return
  local i; : > "$L/healthcost.txt"
  for i in $(seq 1 20); do sleep 1; curl -s localhost:9477/metrics | awk '/^cupti_health_collection_seconds / { print $2 }' >> "$L/healthcost.txt"; done
  say "health collection seconds (20 scrapes, 1 s apart): $(sort -g "$L/healthcost.txt" | tr '\n' ' ')"
  stop_exporter 9477
}

# procshare (issue 32 item 5): whether the device's GPU utilisation samples (nvmlDeviceGetSamples)
# tell a lone process's SM share as nvmlDeviceGetProcessUtilization does, and what each costs:
# `nvmlcost shares` beside one process of bursts, a matmul and idle gaps, then beside two
# processes; `nvmlcost calls` under the matmul. About 45 s.
stage_procshare() {
  say "== procshare (issue 32 item 5: per-process utilisation against the device's samples)"
  [ -x "$G/nvmlcost" ] || gcc -O2 -Wno-deprecated-declarations -o "$G/nvmlcost" scripts/gpu/nvmlcost.c -I"$G" -l:libnvidia-ml.so.1 > "$L/build-nvmlcost.log" 2>&1 ||
    { say "nvmlcost build failed: $(tail -3 "$L/build-nvmlcost.log")"; return; }
  $W seq burst:6,mm:4,idle:3,burst30:6 > "$L/procshare-one.log" 2>&1 & local lp=$!; sleep 4
  "$G/nvmlcost" shares 18 > "$L/procshare-one.txt" 2>&1; say "one process:"; tee -a "$S" < "$L/procshare-one.txt"
  wait $lp
  $W seq burst:10 > "$L/procshare-a.log" 2>&1 & local la=$!
  $W seq burst30:10 > "$L/procshare-b.log" 2>&1 & local lb=$!; sleep 4
  "$G/nvmlcost" shares 8 > "$L/procshare-two.txt" 2>&1; say "two processes:"; tee -a "$S" < "$L/procshare-two.txt"
  wait $la $lb
  $W mm 20 > "$L/procshare-mm.log" 2>&1 & lp=$!; sleep 4
  "$G/nvmlcost" calls 20 2>&1 | grep -E "GetProcessUtilization|GetSamples|GetComputeRunning|GetUtilizationRates" | tee -a "$S"
  kill $lp 2>/dev/null; wait $lp 2>/dev/null
}

# violfields (issue 32 item 5; nvmlDeviceGetViolationStatus is deprecated in CUDA 13.0, to be removed
# in 14.0): the clock-event counters by the old call and by the field values nvml.h translates them
# to, side by side under a matmul (values, return codes), and what either way costs a thread
# (`nvmlcost viol`, `nvmlcost calls`). About 30 s.
stage_violfields() {
  say "== violfields (the clock-event counters: GetViolationStatus against GetFieldValues)"
  [ -x "$G/nvmlcost" ] || gcc -O2 -Wno-deprecated-declarations -o "$G/nvmlcost" scripts/gpu/nvmlcost.c -I"$G" -l:libnvidia-ml.so.1 > "$L/build-nvmlcost.log" 2>&1 ||
    { say "nvmlcost build failed: $(tail -3 "$L/build-nvmlcost.log")"; return; }
  $W mm 30 > "$L/violfields-mm.log" 2>&1 & local lp=$!; sleep 4
  "$G/nvmlcost" viol 3 > "$L/violfields.txt" 2>&1; tee -a "$S" < "$L/violfields.txt"
  "$G/nvmlcost" calls 20 2>&1 | grep -E "Violation|FieldValues|Energy" | tee -a "$S"
  kill $lp 2>/dev/null; wait $lp 2>/dev/null
}

# healthcpu (issue 32 item 5, run EO): NVML health alone (no PM sampling, activity or GPM), the
# on-CPU time of every thread of the process (/proc/PID/task/*/schedstat, ns) over HEALTHCPU_S (30)
# s, for each build of HEALTHCPU_RUNS ("NAME:BINARY|NAME:" separated by "|"; an empty binary is this
# one), HEALTHCPU_ROUNDS (2) interleaved rounds. About 70 s a round of two builds.
stage_healthcpu() {
  say "== healthcpu (NVML health alone: CPU a second of each build)"
  local secs=${HEALTHCPU_S:-30} r v name bin p c0 c1
  task_cpu_ns() { local s=0 f; for f in /proc/$1/task/*/schedstat; do s=$((s + $(cut -d' ' -f1 "$f"))); done; echo $s; }
  for r in $(seq 1 "${HEALTHCPU_ROUNDS:-2}"); do
    IFS='|' read -ra vs <<< "${HEALTHCPU_RUNS:-this:}"
    for v in "${vs[@]}"; do
      name=${v%%:*} bin=${v#*:}; [ -n "$bin" ] || bin=$BIN
      "$bin" --no-activity.enabled --no-pmsample.enabled --gpm.mode=off --web.listen-address=:9490 \
        --web.health-listen-address= > "$L/healthcpu-$name-$r.log" 2>&1 & p=$!
      sleep 5; c0=$(task_cpu_ns $p); sleep "$secs"; c1=$(task_cpu_ns $p)
      say "healthcpu $name round $r: $(( (c1 - c0) / 1000 / secs )) us of CPU a second"
      kill $p; wait $p 2>/dev/null
    done
  done
}
