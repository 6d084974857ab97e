# Issue 20 stage of scripts/gpu/validate.sh (sourced): every chip's catalog, captured with the
# host-only Profiler API (no GPU of that chip needed), as test data for the fake libcupti.

# chips: `metrics chips` (the resolved default set of every chip CUPTI supports, with its pass
# count) and `metrics chips --capture` into $OUT/chips/, packed as $OUT/chips-capture.tar.gz
# (bring that one file back; unpack it into testdata/chips/). Then, on this GPU, the default
# set the exporter really plans (`metrics chips --chip 0`, with the device's counter
# availability). A few seconds a chip.
stage_chips() {
  say "== chips (default set per chip; capture for testdata/chips)"
  local t0=$SECONDS
  mkdir -p "$OUT/chips"
  "$BIN" metrics chips --capture "$OUT/chips" > "$L/chips.txt" 2> "$L/chips.err"
  say "metrics chips --capture: rc=$? in $((SECONDS - t0)) s, $(ls "$OUT/chips" | grep -c '\.passes$') chips captured"
  cat "$L/chips.txt" | tee -a "$S"
  cp "$L/chips.txt" "$OUT/chips/chips.txt"
  "$BIN" metrics chips --chip 0 > "$L/chips-dev0.txt" 2>&1
  cat "$L/chips-dev0.txt" | tee -a "$S"
  cp "$L/chips-dev0.txt" "$OUT/chips/chips-dev0.txt"
  tar czf "$OUT/chips-capture.tar.gz" -C "$OUT" chips && say "chips-capture.tar.gz: $(du -k "$OUT/chips-capture.tar.gz" | cut -f1) KiB"
}
