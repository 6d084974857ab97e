# Untraced processes in the attribution join (issue 21; scripts/gpu/validate.sh sources this):
# attrib_truth.cu processes time-slice GPU 0 at 1 ms sampling, some injected (traced, POD_NAME
# set), some not; the exporter sees the untraced ones only through NVML (the health source's
# process list and per-process SM shares). Four live runs, each with its own exporter:
#   same         traced pod + untraced process, the same kernel names
#   diff         traced pod + untraced process with other kernel names and mostly streaming
#   twotraced    two traced pods (the baseline: within 2 %)
#   untracedonly two untraced processes (no pods here: split by NVML time shares, from pmon)
# attrib_untraced_check.py compares the scrapes with the bytes each process knows it read.
# About 3 minutes of GPU time (ATTR_U_S seconds of work per run, default 20).

ATTR_U_S=${ATTR_U_S:-20}

attrib_untraced_build() {
  attrib_build || return 1
  [ -x "$G/attrib_truth_alt" ] && return 0
  nvcc -O2 -arch=sm_90 -DKPFX=alt_ -o "$G/attrib_truth_alt" scripts/gpu/attrib_truth.cu > "$L/build-attrib-alt.log" 2>&1 ||
    { say "attrib_truth_alt build failed: $(tail -3 "$L/build-attrib-alt.log")"; return 1; }
}

# attrib_untraced_run NAME PROC... where PROC is traced:POD:BIN:SEED[:SPIN] or untraced:BIN:SEED[:SPIN]
attrib_untraced_run() {
  local run=$1; shift
  local port=9479 wp=() args=() p kind pod bin seed spin truth a b c d
  mkdir -p /run/cupti-exporter
  start_exporter "$L/exp-untraced-$run.log" $port --pmsample.interval=1ms --pmsample.metrics=$ATTR_METRICS \
    --activity.socket=$SOCK --health.interval=1s || return
  timeout $((ATTR_U_S + 15)) nvidia-smi pmon -i 0 -s u -d 1 > "$L/pmon-$run.txt" 2>&1 &
  local pmon=$!
  for p in "$@"; do
    IFS=: read -r kind a b c d <<< "$p"
    if [ "$kind" = traced ]; then
      pod=$a bin=$b seed=$c spin=${d:-0.3}; truth="$L/truth-untraced-$run-$seed.json"
      POD_NAME=$pod POD_NAMESPACE=gpu-test CUDA_INJECTION64_PATH=$INJ CUPTI_EXPORTER_SOCKET=$SOCK \
        "$G/$bin" "$ATTR_U_S" 1000 "$seed" "$truth" "$spin" > "$L/untraced-$run-$seed.log" 2>&1 &
      args+=("traced:$pod=$truth")
    else
      bin=$a seed=$b spin=${c:-0.3}; truth="$L/truth-untraced-$run-$seed.json"
      env -u CUDA_INJECTION64_PATH "$G/$bin" "$ATTR_U_S" 1000 "$seed" "$truth" "$spin" > "$L/untraced-$run-$seed.log" 2>&1 &
      args+=("untraced:$truth")
    fi
    wp+=($!)
  done
  wait "${wp[@]}"
  sleep 7 # the watermark (3 s) and the last flushes
  scrape "$L/untraced-$run.txt" $port
  kill $pmon 2>/dev/null; wait $pmon 2>/dev/null
  stop_exporter $port
  python3 scripts/gpu/attrib_untraced_check.py "$run" "$L/untraced-$run.txt" "$L/pmon-$run.txt" "${args[@]}" 2>&1 | tee -a "$S"
  grep -hiE 'level=(WARN|ERROR)' "$L/exp-untraced-$run.log" | grep -v 'TLS is disabled' | head -3 | tee -a "$S"
}

stage_attrib_untraced() {
  say "== attrib_untraced (issue 21: traced and untraced processes time-slicing GPU 0, 1 ms, ${ATTR_U_S} s a run)"
  attrib_untraced_build || return
  local t0=$SECONDS
  attrib_untraced_run same traced:traced-a:attrib_truth:11 untraced:attrib_truth:12
  attrib_untraced_run diff traced:traced-b:attrib_truth:13 untraced:attrib_truth_alt:14:0.1
  attrib_untraced_run twotraced traced:traced-c:attrib_truth:15 traced:traced-d:attrib_truth:16
  attrib_untraced_run untracedonly untraced:attrib_truth:17 untraced:attrib_truth_alt:18
  say "attrib_untraced: $((SECONDS - t0)) s"
}
