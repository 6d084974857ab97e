# idlebudget stage of scripts/gpu/validate.sh (sourced): issue 23's idle-GPU series budget on
# real GPUs, which the recorded one (e2e TestIdleGPUBudget, 59 series) cannot show: the live
# sampler's own series (sampling state, interval, decode-gap histogram, idle-release counters).
# The exporter runs with the defaults (no --series.extra) on idle GPUs, with idle release after
# 10 s; every series labelled gpu="0" is counted by family while sampling (after 8 s) and once
# released (after 30 s), then the same with --series.extra=all.
stage_idlebudget() {
  say "== idlebudget"
  local mode tag
  for mode in "" all; do
    tag=${mode:-defaults}
    SERIES_EXTRA=$mode start_exporter "$L/exp-idlebudget-$tag.log" 9477 --no-activity.enabled --pmsample.idle-release-after=10s || return
    sleep 8; scrape "$L/idlebudget-$tag-sampling.txt"
    sleep 22; scrape "$L/idlebudget-$tag-released.txt"
    stop_exporter 9477
    local f
    for f in sampling released; do
      say "idlebudget $tag $f: gpu 0 $(grep -c '^[^#].*gpu="0"' "$L/idlebudget-$tag-$f.txt") series, state $(grep -o '^cupti_pm_sampling_state{[^}]*gpu="0"[^}]*state="[^"]*"' "$L/idlebudget-$tag-$f.txt" | grep -o 'state="[^"]*"' | tr '\n' ' ')"
      grep '^[^#].*gpu="0"' "$L/idlebudget-$tag-$f.txt" | sed 's/{.*//; s/_bucket$//; s/_sum$//; s/_count$//' | sort | uniq -c | sort -rn | head -12 | tee -a "$S"
    done
  done
}
