# Untraced processes in the attribution join (issue 21; scripts/gpu/validate.sh sources this):
# attrib_truth.cu processes time-slice GPU 0 at 1 ms sampling, some injected (traced, POD_NAME
# set), some not; the exporter sees the untraced ones only through NVML (the health source's
# process list and per-process SM shares). Four live runs, each with its own exporter:
#   same         traced pod + untraced process, the same kernel names
#   diff         traced pod + untraced process with other kernel names and mostly streaming
#   twotraced    two traced pods (the baseline: within 2 %)
#   untracedonly two untraced processes (no pods here: split by NVML time shares, from pmon)
# attrib_untraced_check.py compares the scrapes with the bytes each process knows it read.
# About 3 minutes of GPU time (ATTR_U_S seconds of work per run, default 20). ATTR_U_RUNS picks
# runs; ATTR_METRICS sets the PM metrics (ATTR_METRICS=defaults: the chip's curated set, which has
# the context-switch counter the join's turn ownership needs on Hopper and later, docs/attribution.md).

ATTR_U_S=${ATTR_U_S:-20}

attrib_untraced_build() {
  attrib_build || return 1
  [ -x "$G/attrib_truth_alt" ] && return 0
  nvcc -O2 -arch=sm_90 -DKPFX=alt_ -o "$G/attrib_truth_alt" scripts/gpu/attrib_truth.cu > "$L/build-attrib-alt.log" 2>&1 ||
    { say "attrib_truth_alt build failed: $(tail -3 "$L/build-attrib-alt.log")"; return 1; }
}

# attrib_launch TAG PROC starts one attrib_truth process in the background, PROC being
# traced:POD:BIN:SEED[:SPIN] (injected, POD_NAME set) or untraced:BIN:SEED[:SPIN]; its truth goes
# to $L/truth-TAG-SEED.json, its output to $L/TAG-SEED.log. Sets LAUNCHED (traced:POD=TRUTH or
# untraced:TRUTH, as attrib_untraced_check.py takes it) and LAUNCHED_PID.
attrib_launch() {
  local tag=$1 kind a b c d pod bin seed spin truth
  IFS=: read -r kind a b c d <<< "$2"
  if [ "$kind" = traced ]; then pod=$a bin=$b seed=$c spin=${d:-0.3}; else bin=$a seed=$b spin=${c:-0.3}; fi
  truth="$L/truth-$tag-$seed.json"
  if [ "$kind" = traced ]; then
    POD_NAME=$pod POD_NAMESPACE=gpu-test CUDA_INJECTION64_PATH=$INJ CUPTI_EXPORTER_SOCKET=$SOCK \
      "$G/$bin" "$ATTR_U_S" 1000 "$seed" "$truth" "$spin" > "$L/$tag-$seed.log" 2>&1 &
    LAUNCHED="traced:$pod=$truth"
  else
    env -u CUDA_INJECTION64_PATH "$G/$bin" "$ATTR_U_S" 1000 "$seed" "$truth" "$spin" > "$L/$tag-$seed.log" 2>&1 &
    LAUNCHED="untraced:$truth"
  fi
  LAUNCHED_PID=$!
}

# attrib_untraced_run NAME PROC... (PROC as attrib_launch takes it)
attrib_untraced_run() {
  local run=$1; shift
  local port=9479 wp=() args=() p
  mkdir -p /run/cupti-exporter
  local mset=(--pmsample.metrics=$ATTR_METRICS)
  [ "$ATTR_METRICS" = defaults ] && mset=() # the chip's curated default set
  start_exporter "$L/exp-untraced-$run.log" $port --pmsample.interval=1ms "${mset[@]}" \
    --activity.socket=$SOCK --activity.trust-hello-pods --health.interval=1s || return
  timeout $((ATTR_U_S + 15)) nvidia-smi pmon -i 0 -s u -d 1 > "$L/pmon-$run.txt" 2>&1 &
  local pmon=$!
  for p in "$@"; do
    attrib_launch "untraced-$run" "$p"
    args+=("$LAUNCHED")
    wp+=("$LAUNCHED_PID")
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
  local run
  for run in ${ATTR_U_RUNS:-same diff twotraced untracedonly}; do
    case $run in
      same) attrib_untraced_run same traced:traced-a:attrib_truth:11 untraced:attrib_truth:12 ;;
      diff) attrib_untraced_run diff traced:traced-b:attrib_truth:13 untraced:attrib_truth_alt:14:0.1 ;;
      twotraced) attrib_untraced_run twotraced traced:traced-c:attrib_truth:15 traced:traced-d:attrib_truth:16 ;;
      untracedonly) attrib_untraced_run untracedonly untraced:attrib_truth:17 untraced:attrib_truth_alt:18 ;;
      *) say "attrib_untraced: unknown run $run" ;;
    esac
  done
  say "attrib_untraced: $((SECONDS - t0)) s"
}

# Stage attrib_record: the same workloads recorded (`cupti-exporter record`, NVML processes
# frames included) instead of served, for replay and estimator work off the GPU
# (scripts/gpu/attrib_offline.sh), plus what NVML and the GPU's scheduler do meanwhile:
#   - tsprobe: one context's view of the time slices while an attrib_truth process runs;
#   - nvml_procutil.py: every per-process utilisation sample the driver takes (20 ms polls);
#   - runs `*-g`: the "untraced" process is injected too (pod ghost-*), so its kernels are
#     known; recfilter drops its connection from the recording to make it untraced offline.
# Recordings come back gzipped as $OUT/rec-RUN.rec.gz. About 3 minutes. ATTR_REC_RUNS picks runs,
# ATTR_REC_NOTS=1 skips the tsprobe, ATTR_METRICS sets the PM metrics.
attrib_record_run() {
  local run=$1; shift
  local wp=() p rec="$L/rec-$run.rec"
  mkdir -p /run/cupti-exporter; rm -f "$SOCK"
  "$BIN" record --output "$rec" --duration "$((ATTR_U_S + 7))s" --pmsample.interval=1ms --pmsample.metrics=$ATTR_METRICS \
    --activity.socket=$SOCK --health.interval=1s > "$L/exp-record-$run.log" 2>&1 &
  local rp=$!
  for _ in $(seq 1 50); do [ -S "$SOCK" ] && break; sleep 0.1; done
  sleep 1
  python3 scripts/gpu/nvml_procutil.py "$((ATTR_U_S + 3))" > "$L/nvmlraw-$run.txt" 2>&1 &
  local np=$!
  for p in "$@"; do
    attrib_launch "rec-$run" "$p"
    wp+=("$LAUNCHED_PID")
  done
  wait "${wp[@]}" "$np"
  wait "$rp"; say "record $run: rc=$? $(grep -m1 'recording done' "$L/exp-record-$run.log" | grep -o 'batches=[0-9]*.*')"
  gzip -c "$rec" > "$OUT/rec-$run.rec.gz" && rm -f "$rec"
  awk '!/^#/ { n[$2]++ } END { for (k in n) print "nvml samples pid " k ": " n[k] }' \
    "$L/nvmlraw-$run.txt" | tee -a "$S"
}

stage_attrib_record() {
  say "== attrib_record (issue 21: recordings of traced + untraced processes at 1 ms, ${ATTR_U_S} s a run)"
  attrib_untraced_build || return
  nvcc -O2 -arch=sm_90 -o "$G/tsprobe" scripts/gpu/tsprobe.cu > "$L/build-tsprobe.log" 2>&1 || { say "tsprobe build failed"; return 1; }
  local t0=$SECONDS
  [ -n "${ATTR_REC_NOTS:-}" ] || {
  "$G/tsprobe" 4 | head -3 | sed 's/^/alone: /' | tee -a "$S"
  "$G/attrib_truth" 8 1000 21 "$L/truth-ts.json" > "$L/ts-truth.log" 2>&1 &
  local ap=$!; sleep 2
  "$G/tsprobe" 4 > "$L/tsprobe.txt" 2>&1; head -3 "$L/tsprobe.txt" | sed 's/^/beside attrib_truth: /' | tee -a "$S"
  wait $ap; }
  local run
  for run in ${ATTR_REC_RUNS:-same-u diff-u same-g diff-g only-u}; do
    case $run in
      same-u) attrib_record_run same-u traced:traced-a:attrib_truth:11 untraced:attrib_truth:12 ;;
      diff-u) attrib_record_run diff-u traced:traced-b:attrib_truth:13 untraced:attrib_truth_alt:14:0.1 ;;
      same-g) attrib_record_run same-g traced:traced-a:attrib_truth:11 traced:ghost-b:attrib_truth:12 ;;
      diff-g) attrib_record_run diff-g traced:traced-b:attrib_truth:13 traced:ghost-c:attrib_truth_alt:14:0.1 ;;
      only-u) attrib_record_run only-u untraced:attrib_truth:17 untraced:attrib_truth_alt:18 ;;
      *) say "attrib_record: unknown run $run" ;;
    esac
  done
  say "attrib_record: $((SECONDS - t0)) s"
}
