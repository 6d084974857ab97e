# Health (NVML) stage of scripts/gpu/validate.sh (sourced): the health source against
# nvidia-smi in the same run, per-process memory, and whether NVML's GPM metrics keep working
# while a CUPTI PM session (the exporter) or ncu holds the counters.

stage_health() {
  say "== health (NVML source vs nvidia-smi; GPM while PM sampling / ncu)"
  mkdir -p /run/cupti-exporter
  # (1) at rest, values are steady: memory exact to the MiB, temperature and clocks exact,
  # power within 5 % (both read the same sensors; the exporter's value is up to 1 s old).
  start_exporter "$L/exp-health.log" 9477 --no-activity.enabled --health.gpm || return
  sleep 3
  local q=index,uuid,pci.bus_id,memory.used,memory.total,temperature.gpu,temperature.memory,clocks.sm,clocks.mem,clocks.gr,clocks.max.sm,power.draw,power.draw.instant,power.limit,utilization.gpu,pcie.link.gen.current
  health_pairs() { # health_pairs N: N scrape + nvidia-smi pairs, 1.1 s apart
    for i in $(seq 1 "$1"); do
      echo "# t $(date +%s.%N)" >> "$L/health-smi.csv"
      nvidia-smi --query-gpu=$q --format=csv,noheader,nounits >> "$L/health-smi.csv"
      echo "# t $(date +%s.%N)" >> "$L/health-scrapes.txt"
      curl -s localhost:9477/metrics | grep -E '^cupti_(gpu|nvml|health)_' >> "$L/health-scrapes.txt"
      sleep 1.1
    done; }
  : > "$L/health-smi.csv"; : > "$L/health-scrapes.txt"
  health_pairs 5
  say "-- at rest"; python3 scripts/gpu/health_compare.py "$L" | tee -a "$S"
  # (2) under a bf16 matmul load: the energy counter against power integrated from nvidia-smi
  # sampled every 100 ms over the same 15 s; per-process memory against --query-compute-apps.
  $W mm 100 > "$L/health-load.log" 2>&1 & local lp=$!
  sleep 6
  local e0 e1 t0 t1
  e0=$(curl -s localhost:9477/metrics | awk '/^cupti_gpu_energy_joules_total/ { print $NF; exit }'); t0=$(date +%s.%N)
  timeout 15 nvidia-smi -i 0 --query-gpu=power.draw --format=csv,noheader,nounits -lms 100 > "$L/health-power.csv"
  e1=$(curl -s localhost:9477/metrics | awk '/^cupti_gpu_energy_joules_total/ { print $NF; exit }'); t1=$(date +%s.%N)
  say "energy under load: counter +$(python3 -c "print(f'{$e1-$e0:.1f}')") J over $(python3 -c "print(f'{$t1-$t0:.2f}')") s; nvidia-smi mean power x time $(python3 -c "
import sys; p=[float(l) for l in open('$L/health-power.csv') if l.strip()]; m=sum(p)/len(p); print(f'{m*($t1-$t0):.1f} J ({len(p)} readings, mean {m:.1f} W); ratio {($e1-$e0)/(m*($t1-$t0)):.4f}')")"
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits > "$L/health-apps.csv"
  curl -s localhost:9477/metrics | grep -E '^cupti_gpu_process_memory_bytes' > "$L/health-procs.txt"
  python3 scripts/gpu/health_compare.py "$L" procs | tee -a "$S"
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
