# Health (NVML) stage of scripts/gpu/validate.sh (sourced): the health source against
# nvidia-smi in the same run, per-process memory, and whether NVML's GPM metrics keep working
# while a CUPTI PM session (the exporter) or ncu holds the counters.

stage_health() {
  say "== health (NVML source vs nvidia-smi; GPM while PM sampling / ncu)"
  mkdir -p /run/cupti-exporter
  $W mm 120 > "$L/health-load.log" 2>&1 & local lp=$!
  start_exporter "$L/exp-health.log" 9477 --no-activity.enabled --web.enable-pm-sampling-api --health.gpm || { kill $lp; return; }
  sleep 4
  local q=index,uuid,pci.bus_id,memory.used,memory.total,temperature.gpu,temperature.memory,clocks.sm,clocks.mem,clocks.gr,clocks.max.sm,power.draw,power.draw.instant,power.limit,utilization.gpu,pcie.link.gen.current
  for i in 1 2 3 4 5; do
    echo "# t $(date +%s.%N)" >> "$L/health-smi.csv"
    nvidia-smi --query-gpu=$q --format=csv,noheader,nounits >> "$L/health-smi.csv"
    echo "# t $(date +%s.%N)" >> "$L/health-scrapes.txt"
    curl -s localhost:9477/metrics | grep -E '^cupti_(gpu|nvml|health)_' >> "$L/health-scrapes.txt"
    sleep 2
  done
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits > "$L/health-apps.csv"
  curl -s localhost:9477/metrics | grep -E '^cupti_gpu_process_memory_bytes' > "$L/health-procs.txt"
  python3 scripts/gpu/health_compare.py "$L" | tee -a "$S"
  # GPM (nvidia-smi dmon --gpm-metrics: 2 = SM activity, 5 = any tensor activity) while the
  # exporter's PM session is on, then while it is paused and ncu profiles.
  timeout 20 nvidia-smi dmon --gpm-metrics 2,5 -c 4 > "$L/gpm-while-pm.txt" 2>&1; say "gpm while PM sampling rc=$?: $(tail -2 "$L/gpm-while-pm.txt" | tr '\n' ' ')"
  # The exporter's own GPM families (--health.gpm) beside PM Sampling's: want cupti_gpm_sm_active_ratio
  # near cupti_sm_active_ratio under the matmul load (both about 0.9+), tensor > 0, dram > 0.
  scrape "$L/gpm-exp-pm.txt"; say "exporter gpm while PM sampling: $(grep -hE '^cupti_(gpm_[a-z_]+|sm_active_ratio)\{' "$L/gpm-exp-pm.txt" | head -4 | tr '\n' ' ')"
  curl -s -XPOST "localhost:9477/api/v1/pm-sampling/pause?duration=60s" > /dev/null
  timeout 90 ncu --clock-control none -c 40 --metrics sm__throughput.avg.pct_of_peak_sustained_elapsed $W mm 30 > "$L/gpm-ncu.log" 2>&1 & local np=$!
  sleep 8; timeout 20 nvidia-smi dmon --gpm-metrics 2,5 -c 4 > "$L/gpm-while-ncu.txt" 2>&1; say "gpm while ncu rc=$?: $(tail -2 "$L/gpm-while-ncu.txt" | tr '\n' ' ')"
  scrape "$L/gpm-exp-ncu.txt"; say "exporter gpm while ncu (PM paused): $(grep -hE '^cupti_gpm_[a-z_]+\{' "$L/gpm-exp-ncu.txt" | head -3 | tr '\n' ' ') read errors: $(grep -h '^cupti_health_read_errors_total.*gpm' "$L/gpm-exp-ncu.txt" | tr '\n' ' ')"
  wait $np; say "ncu rc=$? $(grep -m1 -E '==PROF==|ERR' "$L/gpm-ncu.log")"
  curl -s -XPOST localhost:9477/api/v1/pm-sampling/resume > /dev/null
  scrape "$L/health-final.txt"; stop_exporter 9477; kill $lp 2>/dev/null; wait $lp 2>/dev/null
  say "health families: $(grep -cE '^cupti_(gpu|nvml)_' "$L/health-final.txt") series; source_up: $(grep 'source_up{.*health' "$L/health-final.txt" | tr '\n' ' ')"
}
