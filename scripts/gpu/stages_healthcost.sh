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
