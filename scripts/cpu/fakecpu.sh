#!/usr/bin/env bash
# CPU of the exporter's process at its defaults against the fake CUPTI (no GPU), builds
# interleaved round by round: `perf stat -e task-clock` over a window after a warm-up.
#
#   FAKE=/tmp/cupti-fake-<hash> scripts/cpu/fakecpu.sh NAME=BINARY... [-- FLAGS...]
#
# FAKE is a directory of the fake libraries (cuptitest.Build makes one in $TMPDIR whenever the
# tests run). ROUNDS (3), WARM (5 s), WINDOW (20 s). Prints each round's ms of CPU a second
# and, per build, the range; docs/performance.md records what it measured.
set -euo pipefail
: "${FAKE:?FAKE: a directory with the fake libcupti.so.13 and libcuda.so.1}"
ROUNDS=${ROUNDS:-3} WARM=${WARM:-5} WINDOW=${WINDOW:-20}
builds=()
while [[ $# -gt 0 && $1 != -- ]]; do builds+=("$1"); shift; done
[[ ${1:-} == -- ]] && shift
flags=("$@")
command -v perf >/dev/null || { echo "perf is needed (linux-perf)" >&2; exit 1; }
declare -A all
port=19411
for r in $(seq 1 "$ROUNDS"); do
	for b in "${builds[@]}"; do
		name=${b%%=*} bin=${b#*=}
		port=$((port + 1))
		LD_LIBRARY_PATH=$FAKE CUPTI_FAKE_DEVICES=1 "$bin" serve --cupti.library="$FAKE/libcupti.so.13" \
			--web.listen-address=127.0.0.1:$port --activity.socket="$(mktemp -u /tmp/fakecpu.XXXXXX.sock)" \
			"${flags[@]}" >/tmp/fakecpu-$name.log 2>&1 &
		pid=$!
		sleep "$WARM"
		out=$(perf stat -x, -e task-clock,context-switches -p "$pid" -- sleep "$WINDOW" 2>&1); ms=$(awk -F, '/task-clock/ {print $1}' <<<"$out"); cs=$(awk -F, '/context-switches/ {print $1}' <<<"$out")
		kill "$pid"; wait "$pid" 2>/dev/null || true
		v=$(awk -v ms="$ms" -v w="$WINDOW" 'BEGIN {printf "%.2f", ms / w}')
		echo "round $r $name: $v ms of CPU a second, $((cs / WINDOW)) context switches a second"
		all[$name]="${all[$name]:-} $v"
	done
done
for b in "${builds[@]}"; do
	name=${b%%=*}
	echo "$name:${all[$name]}"
done
