# Attribution stages of scripts/gpu/validate.sh (sourced): ground truth for the join of PM samples
# with kernel records (docs/attribution.md). Recordings come back in $OUT and are attributed
# offline here with both estimators (scripts/gpu/attrib_offline.sh), so one GPU run serves every
# comparison.

# Metrics of the attribution runs: DRAM bytes (the known quantity), SM active (a ratio).
ATTR_METRICS=${ATTR_METRICS:-dram__bytes_read.sum,dram__bytes_write.sum,TPC.TriageCompute.sm__cycles_active.avg.pct_of_peak_sustained_elapsed}
ATTR_S=${ATTR_S:-25}

attrib_build() {
  [ -x "$G/attrib_truth" ] && return 0
  nvcc -O2 -arch=sm_90 -o "$G/attrib_truth" scripts/gpu/attrib_truth.cu > "$L/build-attrib.log" 2>&1 || { say "attrib_truth build failed: $(tail -3 "$L/build-attrib.log")"; return 1; }
}

# Two injected processes of attrib_truth at once on GPU 0 while `record` samples at INTERVAL_US.
attrib_record() { # attrib_record INTERVAL_US
  local iv=$1 rec="$OUT/attrib-$1us.rec"
  mkdir -p /run/cupti-exporter
  "$BIN" record --output "$rec" --duration $((ATTR_S + 9))s --pmsample.interval=${iv}us \
    --pmsample.metrics=$ATTR_METRICS --activity.socket=$SOCK > "$L/attrib-record-$iv.log" 2>&1 &
  local rp=$! wp=() rc; sleep 4
  for seed in 1 2; do
    CUDA_INJECTION64_PATH=$INJ CUPTI_EXPORTER_SOCKET=$SOCK "$G/attrib_truth" "$ATTR_S" "$iv" $seed "$L/truth-${iv}us-$seed.json" > "$L/attrib-work-$iv-$seed.log" 2>&1 &
    wp+=($!)
  done
  wait "${wp[@]}"; wait $rp; rc=$?
  say "attrib ${iv}us: record rc=$rc size=$(stat -c %s "$rec" 2>/dev/null) $(cat "$L"/attrib-work-$iv-*.log | tr '\n' ' ')"
  gzip -f "$rec"
}

stage_attrib() {
  say "== attrib (ground truth: known DRAM bytes per kernel, two processes on one GPU)"
  attrib_build || return
  for iv in 1000 100; do attrib_record $iv; done
}

# The live path: serve with attribution on while the two processes run; the per-kernel DRAM bytes
# and the coverage come from /metrics.
stage_attrib_live() {
  say "== attrib_live (serve, 1 ms, default estimator)"
  attrib_build || return
  mkdir -p /run/cupti-exporter
  start_exporter "$L/exp-attrib.log" 9477 --pmsample.interval=1ms --pmsample.metrics=$ATTR_METRICS --activity.socket=$SOCK || return
  local wp=()
  for seed in 3 4; do
    CUDA_INJECTION64_PATH=$INJ CUPTI_EXPORTER_SOCKET=$SOCK "$G/attrib_truth" 15 1000 $seed "$L/truth-live-$seed.json" > "$L/attrib-live-$seed.log" 2>&1 &
    wp+=($!)
  done
  wait "${wp[@]}"; sleep 8
  scrape "$L/attrib-live.txt"; cp "$L/attrib-live.txt" "$OUT/"; stop_exporter 9477
  say "live: $(grep -cE "^cupti_kernel_dram_read_bytes_total" "$L/attrib-live.txt") per-kernel DRAM series; coverage $(grep "^cupti_attribution_seconds_total" "$L/attrib-live.txt" | tr '\n' ' ')"
}

# Two GPUs: each rank alternates bf16 matmuls and a 256 MiB NCCL all-reduce, both injected.
ATTR2_METRICS=${ATTR2_METRICS:-TPC.TriageCompute.sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed,nvlrx__bytes.sum,nvltx__bytes.sum,dram__bytes_read.sum}
stage_attrib2() {
  say "== attrib2 (two GPUs: matmul + NCCL all-reduce, both ranks injected)"
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
  mkdir -p /run/cupti-exporter
  local mset=(--pmsample.metrics=$ATTR2_METRICS)
  [ "$ATTR2_METRICS" = defaults ] && mset=() # the chip's curated default set
  "$BIN" record --output "$OUT/attrib2.rec" --duration 40s --pmsample.interval=1ms \
    "${mset[@]}" --activity.socket=$SOCK > "$L/attrib2-record.log" 2>&1 &
  local rp=$!; sleep 4
  CUDA_INJECTION64_PATH=$INJ CUPTI_EXPORTER_SOCKET=$SOCK timeout 60 python3 scripts/gpu/mm_allreduce.py 20 > "$L/attrib2-work.log" 2>&1
  say "mm_allreduce rc=$? $(tail -2 "$L/attrib2-work.log" | tr '\n' ' ')"
  wait $rp; say "attrib2 record rc=$? size=$(stat -c %s "$OUT/attrib2.rec" 2>/dev/null) $(grep -iE 'error|refus' "$L/attrib2-record.log" | head -3 | tr '\n' ' ')"
  gzip -f "$OUT/attrib2.rec"
}
