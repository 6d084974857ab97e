# Issue 19 stages of scripts/gpu/validate.sh (sourced): every published PM sample physically
# possible, the exporter against CUPTI called directly (pmref.cu) on the same workloads, and the
# catalogs of every chip the host library knows (issue 20).

# The curated default set as GH100 resolves it (nine metrics, one pass): what pmref samples.
PMC_SET=FE_B.TriageCompute.gr__cycles_active.sum.pct_of_peak_sustained_elapsed,TPC.TriageCompute.sm__cycles_active.avg.pct_of_peak_sustained_elapsed,TPC.TriageCompute.tpc__warps_active_realtime.avg.pct_of_peak_sustained_elapsed,TPC.TriageCompute.sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed,dram__cycles_active.avg.pct_of_peak_sustained_elapsed,TPC.TriageCompute.sm__pipe_fp64_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_elapsed,PCI.TriageCompute.pcie__read_bytes.sum,PCI.TriageCompute.pcie__write_bytes.sum

pmc_build() {
  [ -x "$G/bursts" ] || nvcc -O2 -arch=sm_90 -o "$G/bursts" scripts/gpu/bursts.cu > "$L/build-bursts.log" 2>&1 || { say "bursts build failed: $(tail -3 "$L/build-bursts.log")"; return 1; }
  pmref_build
}

# pmref_build builds scripts/gpu/pmref.cu (stages pmcheck and pmcostref) once.
pmref_build() {
  [ -x "$G/pmref" ] || nvcc -O2 -std=c++17 -o "$G/pmref" scripts/gpu/pmref.cu -I$I -L$LIB -lcupti -lnvperf_host -lnvperf_target -lcuda > "$L/build-pmref.log" 2>&1 || { say "pmref build failed: $(tail -3 "$L/build-pmref.log")"; return 1; }
}

# The workload of one run: bursts.cu's phases (PMC_S seconds each), then a bf16 matmul.
pmc_work() { "$G/bursts" "${PMC_S:-5}" "$1" && $W mm "${PMC_S:-5}"; }

# pmc_exporter NAME ARGS...: the exporter (serve, 1 s window) through the workload, scraped
# every 0.5 s; the guard's rejections and their log lines.
pmc_exporter() {
  local name=$1; shift
  start_exporter "$L/exp-pmc-$name.log" 9477 --no-activity.enabled --pmsample.window=1s "$@" || return
  pmc_work 1 > "$L/pmc-work-$name.log" 2>&1 &
  local wp=$!
  while kill -0 $wp 2>/dev/null; do echo "# t $(date +%s.%N)" >> "$L/pmc-scrapes-$name.txt"; curl -s localhost:9477/metrics | grep -E '^cupti_' >> "$L/pmc-scrapes-$name.txt"; sleep 0.5; done
  scrape "$L/pmc-final-$name.txt"; stop_exporter 9477
  say "pmc $name: samples=$(val "$L/pmc-final-$name.txt" '^cupti_pm_samples_total') incomplete=$(grep -E '^cupti_pm_samples_dropped_total.*incomplete' "$L/pmc-final-$name.txt" | awk '{ s += $NF } END { print s + 0 }') out_of_range=$(val "$L/pmc-final-$name.txt" '^cupti_pm_samples_out_of_range_total') $(grep -E '^cupti_pm_samples_out_of_range_total' "$L/pmc-final-$name.txt" | sed 's/.*metric="\([^"]*\)".* /\1=/' | tr '\n' ' ') max_seen_sm_active=$(awk '$1 ~ /^cupti_sm_active_max_ratio/ { if ($NF > m) m = $NF } END { print m + 0 }' "$L/pmc-scrapes-$name.txt") max_seen_occupancy=$(awk '$1 ~ /^cupti_sm_occupancy_max_ratio/ { if ($NF > m) m = $NF } END { print m + 0 }' "$L/pmc-scrapes-$name.txt") rejected_logged=$(grep -c 'pm sample rejected' "$L/exp-pmc-$name.log") image_full=$(grep -c 'counter data image full' "$L/exp-pmc-$name.log")"
}

# stage pmcheck: the exporter's serve at the defaults and at a 250 ms decode; its record at the
# defaults (every delivered sample); pmref at a 250 ms decode into 20,000 slots (the pattern of
# NVIDIA's sample) and at the exporter's 100 ms into its 216-slot images; the same workload
# each time. The per-sample files come back in $OUT/pmcheck.tar.gz for pmcheck_compare.py.
stage_pmcheck() {
  say "== pmcheck (issue 19: exporter vs CUPTI direct, same workloads; PMC_S=${PMC_S:-5} s a phase)"
  pmc_build || return
  local P=$LB/pmcheck; mkdir -p "$P"
  local c
  for c in ${PMC_CASES:-defaults decode250 record ref250 ref100}; do
    case $c in
      defaults) pmc_exporter defaults ;;
      decode250) pmc_exporter decode250 --pmsample.decode-period=250ms ;;
      record)
        "$BIN" record --output "$P/exporter.rec" --duration "$((${PMC_S:-5} * 6 + 4))s" --no-activity.enabled > "$L/pmc-record.log" 2>&1 &
        local rp=$!; sleep 2; pmc_work 1 > "$L/pmc-work-record.log" 2>&1; wait $rp
        say "pmc record rc=$? size=$(stat -c %s "$P/exporter.rec" 2>/dev/null) rejected_logged=$(grep -c 'pm sample rejected' "$L/pmc-record.log")"
        cp "$L/pmc-work-record.log" "$P/" ;;
      ref250 | ref100)
        local dec=250 cap=20000; [ "$c" = ref100 ] && dec=100 cap=216
        "$G/pmref" "$((${PMC_S:-5} * 6 + 4))" 1000000 $dec $cap "$PMC_SET" "$P/$c.tsv" > "$L/pmc-$c.log" 2>&1 &
        local rp=$!; sleep 2; pmc_work 1 > "$P/pmc-work-$c.log" 2>&1; wait $rp
        say "pmc $c rc=$? $(tail -1 "$L/pmc-$c.log") over100=$(awk -F'\t' 'NR > 2 { for (i = 8; i <= 14; i++) if ($i > 100.0001) { n++; break } } END { print n + 0 }' "$P/$c.tsv")" ;;
    esac
  done
  cp "$L"/exp-pmc-*.log "$L"/pmc-work-*.log "$L"/pmc-scrapes-*.txt "$P/" 2>/dev/null
  [ -f "$P/ref250.tsv" ] && [ -f "$P/pmc-scrapes-defaults.txt" ] && python3 scripts/gpu/pmcheck_compare.py "$P" defaults ref250 | tee -a "$S"
  tar -C "$LB" -czf "$OUT/pmcheck.tar.gz" pmcheck
}

# stage catalogs: every chip's PM sampling catalog (metrics list) and the plan of today's
# curated set, from the host API alone (no such GPU needed); $OUT/catalogs.tar.gz.
stage_catalogs() {
  say "== catalogs (metrics list and plan of the curated set for every supported chip)"
  local C=$LB/catalogs chip n; mkdir -p "$C"
  local chips=${CAT_CHIPS:-GV100 GV11B TU102 TU104 TU106 TU116 TU117 GA100 GA102 GA103 GA104 GA106 GA107 GA10B GH100 AD102 AD103 AD104 AD106 AD107 GB100 GB102 GB110 GB10B GB202 GB203 GB205 GB206 GB207 GB20B}
  local curated; curated=$(go_curated)
  for chip in $chips; do
    "$BIN" metrics list --chip "$chip" > "$C/$chip.txt" 2> "$C/$chip.err"
    n=$(($(wc -l < "$C/$chip.txt") - 1))
    [ -n "$curated" ] && "$BIN" metrics plan --chip "$chip" "$curated" > "$C/$chip.plan" 2>&1
    say "catalog $chip: $n metrics $(grep -c '^rejected' "$C/$chip.plan" 2>/dev/null) rejected of the curated set"
  done
  [ -n "${CHIPS_CMD:-}" ] && { eval "$CHIPS_CMD" > "$L/chips-cmd.log" 2>&1; say "chips command rc=$? $(tail -2 "$L/chips-cmd.log" | tr '\n' ' ')"; }
  tar -C "$LB" -czf "$OUT/catalogs.tar.gz" catalogs
}
# mapping.Curated() as of issue 20's start, for the "before" plans.
go_curated() { echo "$PMC_SET,dram__bytes_read.sum,dram__bytes_write.sum,sm__inst_executed_pipe_fma_type_fp16.avg.pct_of_peak_sustained_elapsed,nvlrx__bytes.sum,nvltx__bytes.sum"; }
