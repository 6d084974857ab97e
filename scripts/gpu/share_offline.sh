#!/usr/bin/env bash
# Attributes the recordings of stage attrib_share_record offline (no GPU) for every case of the
# sharing modes, with the checkout's attribution join (scripts/gpu/sharesim, on the recording's
# own clock), and checks each against the processes' truth (attrib_share_check.py).
#   scripts/gpu/share_offline.sh DIR [SET] [CASE...]
# DIR holds what rec-t.tar and rec-c.tar unpack to (rec-MODE.rec.gz, share-MODE.manifest,
# truth-MODE-pN.json). SET is t (tune), c (check) or tc (default: both). A case is
# MODE:HIDDEN as in stages_share.sh (ts3-t:1,2 hides processes 1 and 2, which then replay as
# untraced); without cases, every all-traced mode and every way to hide one process (and two
# of three). One summary line per case ("CASE | ..."), the details with -v (SHARE_V=1).
# SHARE_MERGE=N joins every N recorded PM batches as one (a decode period N times as long).
# A case recorded with its processes truly untraced (rec-ts3-t_1-2.rec.gz, from
# SHARE_REC_MODES="ts3-t:1,2") replays as it was recorded, nothing hidden.
set -euo pipefail
dir=$1; sets=${2:-tc}; shift $(( $# >= 2 ? 2 : 1 ))
here=$(cd "$(dirname "$0")" && pwd)
sim=${SIM:-}
if [ -z "$sim" ]; then
  sim=$(mktemp -d)/sharesim
  (cd "$here/../.." && go build -o "$sim" ./scripts/gpu/sharesim)
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cases=("$@")
if [ ${#cases[@]} = 0 ]; then
  for set in $(echo "$sets" | grep -o .); do
    cases+=(ts2-$set: ts2-$set:0 ts2-$set:1 ts3-$set: ts3-$set:0 ts3-$set:1 ts3-$set:2 ts3-$set:1,2 ts3-$set:0,2 ts3-$set:0,1
      ts4-$set: ts4-$set:3 ts4-$set:2 ts4-$set:1 ts4-$set:0 mps2-$set: mps3-$set: mps3-$set:2 mps3-$set:1 mps3-$set:0)
  done
fi
for c in "${cases[@]}"; do
  mode=${c%%:*} hide=",${c#*:},"
  rec=$mode
  if live=$(echo "$c" | tr ':,' '_-'); [ "$hide" != ",," ] && [ -e "$dir/rec-$live.rec.gz" ]; then
    rec=$live hide=",," # recorded with these processes untraced: replayed as it was
  fi
  [ -e "$dir/rec-$rec.rec.gz" ] || { echo "$c | no recording"; continue; }
  pods=() i=0
  : > "$tmp/manifest"
  while read -r pod truth kind role; do
    truth="$dir/$(basename "$truth")"
    if [[ $hide == *",$i,"* ]]; then
      pods+=("$pod"); kind=untraced
    fi
    echo "$pod $truth $kind $role" >> "$tmp/manifest"
    i=$((i + 1))
  done < "$dir/share-$rec.manifest"
  "$sim" -hide "$(IFS=,; echo "${pods[*]:-}")" -merge "${SHARE_MERGE:-1}" "$dir/rec-$rec.rec.gz" > "$tmp/metrics" 2> "$tmp/err" || { echo "$c | sharesim failed: $(tail -2 "$tmp/err")"; continue; }
  if [ -n "${SHARE_V:-}" ]; then
    python3 "$here/attrib_share_check.py" "$c" "$tmp/metrics" "$tmp/manifest"
  else
    python3 "$here/attrib_share_check.py" "$c" "$tmp/metrics" "$tmp/manifest" | grep ' | '
  fi
done
