# Issue 22 stages of scripts/gpu/validate.sh (sourced).

# PM sampling off, NVML on: made-up device UUIDs in a hello take no device slot (the activity
# socket checks them against the GPUs NVML lists), and a real workload's records all count.
# Look for: "pmoffdevices: made-up series 0", unknown_device drops = 64, kernel records > 0.
stage_pmoffdevices() {
  say "== pmoffdevices (PM sampling off: made-up UUIDs against NVML's GPUs)"
  mkdir -p /run/cupti-exporter; local s22=/run/cupti-exporter/i22.sock
  start_exporter "$L/exp-pmoff.log" 9482 --activity.socket=$s22 --no-pmsample.enabled || return
  sleep 3
  python3 scripts/gpu/hostile.py $s22 madeup 64 | tee -a "$S"
  CUDA_INJECTION64_PATH=$INJ CUPTI_EXPORTER_SOCKET=$s22 $W tiny 5 > "$L/pmoff-work.log" 2>&1
  sleep 2; scrape "$L/pmoff.txt" 9482
  say "pmoffdevices: made-up series $(grep -v '^#' "$L/pmoff.txt" | grep -c dead-beef), unknown_device drops $(val "$L/pmoff.txt" '^cupti_activity_dropped_records_total.*unknown_device'), kernel records $(val "$L/pmoff.txt" '^cupti_activity_records_total.*kernel'), kernel series $(grep -c '^cupti_kernel_gpu_seconds_total' "$L/pmoff.txt")"
  stop_exporter 9482
}
