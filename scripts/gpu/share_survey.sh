#!/usr/bin/env bash
# Replays the tap recordings of many runs of stage attrib_share (SHARE_TAP=1: $OUT/tap.tar
# unpacked into one folder a run, a case run again in rN/) through the checkout's join, one
# summary line per case, prefixed by the run's folder name, for scripts/gpu/share_score.py:
#   scripts/gpu/share_survey.sh live DIR...    every recording as it was recorded: the live
#                                              figures, to the digit
#   scripts/gpu/share_survey.sh hidden DIR...  every recording with every process traced
#                                              (time-sliced and MPS), with every way to hide one
#                                              process and, where three or more ran, two (they
#                                              replay as untraced; share_offline.sh takes a
#                                              live recording of that case instead where the
#                                              folder has one)
# SIM: a scripts/gpu/sharesim binary (built from the checkout when unset); SHARE_SET=t or c keeps
# one workload set. Two joins side by side: run it with each SIM, then
#   python3 scripts/gpu/share_score.py before.txt after.txt
set -euo pipefail
how=${1:?live or hidden}; shift
here=$(cd "$(dirname "$0")" && pwd)
if [ -z "${SIM:-}" ]; then
  SIM=$(mktemp -d)/sharesim
  (cd "$here/../.." && go build -o "$SIM" ./scripts/gpu/sharesim)
fi
export SIM
for d in "$@"; do
  name=$(basename "$d")
  case $how in
  live) recs=$(find "$d" -name 'rec-*.rec.gz' | sort) ;;
  hidden) recs=$(find "$d" -maxdepth 1 \( -name 'rec-ts*.rec.gz' -o -name 'rec-mps*.rec.gz' \) ! -name '*_*' | sort) ;;
  *) echo "share_survey.sh: live or hidden, not $how" >&2; exit 2 ;;
  esac
  for f in $recs; do
    dd=$(dirname "$f") m=$(basename "$f" .rec.gz); m=${m#rec-}
    [ -e "$dd/share-$m.manifest" ] || continue
    case ${m%%_*} in *-t) set=t ;; *) set=c ;; esac
    [ -n "${SHARE_SET:-}" ] && [ "$SHARE_SET" != "$set" ] && continue
    cases=()
    if [ "$how" = live ]; then
      case $m in *_*) cases=("${m%%_*}:$(echo "${m#*_}" | tr - ,)") ;; *) cases=("$m:") ;; esac
    else
      n=$(wc -l < "$dd/share-$m.manifest")
      for i in $(seq 0 $((n - 1))); do cases+=("$m:$i"); done
      if [ "$n" -ge 3 ]; then
        for i in $(seq 0 $((n - 1))); do for j in $(seq $((i + 1)) $((n - 1))); do cases+=("$m:$i,$j"); done; done
      fi
    fi
    prefix=$name${dd#"$d"}
    bash "$here/share_offline.sh" "$dd" "$set" "${cases[@]}" | sed "s|^|$prefix |"
  done
done
