# Straggler stages of scripts/gpu/validate.sh (sourced), issue 33: a two-rank job on two GPUs
# (straggler.py: bf16 matmuls + a 256 MiB NCCL all-reduce each round, rank 0 deciding when to stop
# and which phase runs), both ranks injected and labelled as pods ml/strag-0 and ml/strag-1; one
# exporter for both GPUs; a local Prometheus (Debian's 2.42, carried gzipped as .gpu/prometheus.gz
# by prepare.sh, the GPU machine has none) scraping it every second with the chart's rules
# (.gpu/rules.yaml, rendered by prepare.sh with the chart's defaults) and a kube-state-metrics
# stand-in that gives both pods the PyTorchJob label of job "strag" (straggler_eval.py ksm).
# straggler_eval.py watch reads what the rules say every 5 s; summary gives, per phase, the ranks'
# wait shares and gaps, the alerts, and the seconds from a slowdown to the straggler record naming
# strag-1 (the dashboard's "Straggler" panel reads that record; CuptiTrainingStraggler fires
# prometheusRule.training.for, 10 minutes, later).
#   straggler:   5 minutes balanced (no alert may be pending or firing), then rank 1 30 % slower
#                for 200 s. About 9.5 minutes with the starts: run it alone in a call of nvidia-h100-x2.
#   straggler10: 1 minute balanced, then rank 1 10 % slower for 420 s (a 10 % slowdown needs most of
#                the rules' 5-minute window to pass the 5-point gap). About 8.5 minutes.
# STRAG_MATMULS (20) sets the matmuls per round; STRAG_SCHEDULE overrides a stage's schedule.

strag_run() { # strag_run TAG SCHEDULE
  local tag=$1 sched=$2 rc
  say "== straggler $tag (schedule $sched, ${STRAG_MATMULS:-20} matmuls a round)"
  [ "$(nvidia-smi -L | wc -l)" -ge 2 ] || { say "straggler: needs two GPUs (kind nvidia-h100-x2)"; return; }
  [ -x "$G/prometheus" ] && [ -s "$G/rules.yaml" ] || { say "straggler: .gpu/prometheus or .gpu/rules.yaml missing (scripts/gpu/prepare.sh)"; return; }
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
  mkdir -p /run/cupti-exporter
  start_exporter "$L/exp-strag-$tag.log" 9477 --activity.socket=$SOCK --activity.trust-hello-pods || return
  python3 scripts/gpu/straggler_eval.py ksm 9479 & local ksm=$!
  local pd=$LB/prom-$tag; mkdir -p "$pd"
  cat > "$pd/prometheus.yml" <<EOF
global: {scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}
rule_files: [$G/rules.yaml]
scrape_configs:
  - job_name: cupti
    honor_labels: true
    static_configs: [{targets: ["127.0.0.1:9477"], labels: {job: gpu-cupti-exporter, namespace: monitoring, pod: gpu-cupti-exporter-gpu0, container: exporter, service: gpu-cupti-exporter, endpoint: metrics, node: gpu-node}}]
  - job_name: ksm
    honor_labels: true
    static_configs: [{targets: ["127.0.0.1:9479"], labels: {job: kube-state-metrics, namespace: monitoring, pod: kube-state-metrics-0, container: kube-state-metrics, service: kube-state-metrics, endpoint: http}}]
EOF
  "$G/prometheus" --config.file="$pd/prometheus.yml" --storage.tsdb.path="$pd/data" --web.listen-address=127.0.0.1:9090 --log.level=warn > "$L/prom-$tag.log" 2>&1 & local prom=$!
  local stop=$LB/stop-$tag csv=$L/straggler-$tag.csv phases=$L/phases-$tag.txt
  rm -f "$stop" "$phases"
  python3 scripts/gpu/straggler_eval.py watch http://127.0.0.1:9090 "$csv" "$stop" 2> "$L/watch-$tag.log" & local watch=$!
  CUDA_INJECTION64_PATH=$INJ CUPTI_EXPORTER_SOCKET=$SOCK python3 scripts/gpu/straggler.py "$sched" "$phases" "${STRAG_MATMULS:-20}" > "$L/strag-work-$tag.log" 2>&1; rc=$?
  say "straggler.py rc=$rc $(tail -2 "$L/strag-work-$tag.log" | tr '\n' ' ')"
  sleep 6; touch "$stop"; wait $watch
  curl -s 'http://127.0.0.1:9090/api/v1/rules?type=alert' > "$L/rules-$tag.json"
  scrape "$L/strag-$tag-final.txt"
  kill $prom $ksm; wait $prom $ksm 2>/dev/null; stop_exporter 9477
  python3 scripts/gpu/straggler_eval.py summary "$csv" "$phases" | tee -a "$S"
  say "time split at the end: $(grep -E '^cupti_pod_time_seconds_total' "$L/strag-$tag-final.txt" | sed 's/{.*pod="\([^"]*\)".*state="\([^"]*\)".*} / \1 \2=/' | tr '\n' ' ')"
  say "split drops: $(grep -E '^cupti_activity_split_dropped_records_total' "$L/strag-$tag-final.txt" | tr '\n' ' ')"
  cp "$csv" "$OUT/" 2>/dev/null
}

stage_straggler() { strag_run 30 "${STRAG_SCHEDULE:-balanced:300,slow30:200}"; }
stage_straggler10() { strag_run 10 "${STRAG_SCHEDULE:-balanced:60,slow10:420}"; }
