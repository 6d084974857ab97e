#!/usr/bin/env bash
# layout_check.sh: compare internal/cupti/cupti_decl.h with the machine's real CUDA headers
# (sizeof, offsetof and size of every field, *_STRUCT_SIZE, enum values); print a table; exit
# non-zero on any mismatch.
#
#   scripts/gpu/layout_check.sh            real mode: needs g++ and CUDA headers
#                                          (CUDA_INCLUDE, default /usr/local/cuda/targets/x86_64-linux/include)
#   scripts/gpu/layout_check.sh --self     self mode: no CUDA; checks the project header against the
#                                          expected 13.0 figures in layout_check.c (CI runs this)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
inc=${CUDA_INCLUDE:-/usr/local/cuda/targets/x86_64-linux/include}
src=$here/layout_check.c
decl=$root/internal/cupti
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

mode=real
[[ ${1:-} == --self ]] && mode=self

cc=${CC:-gcc}
cxx=${CXX:-g++}
flags=(-std=c11 -Wall -Werror)

"$cc" "${flags[@]}" -DLAYOUT_SIDE_OURS -I "$decl" -c "$src" -o "$work/ours.o"
if [[ $mode == self ]]; then
	"$cc" "${flags[@]}" -DLAYOUT_SIDE_MAIN -DLAYOUT_SELF -c "$src" -o "$work/main.o"
	"$cc" -o "$work/layout_check" "$work/main.o" "$work/ours.o"
else
	if [[ ! -f $inc/cupti_pmsampling.h ]]; then
		echo "layout_check: no CUPTI headers in $inc (set CUDA_INCLUDE, or use --self)" >&2
		exit 2
	fi
	# The 13.0 cupti_profiler_host.h includes <string>: the real side must be C++.
	"$cxx" -std=c++17 -Wall -x c++ -DLAYOUT_SIDE_REAL -I "$inc" -c "$src" -o "$work/real.o"
	"$cc" "${flags[@]}" -DLAYOUT_SIDE_MAIN -c "$src" -o "$work/main.o"
	"$cxx" -o "$work/layout_check" "$work/main.o" "$work/ours.o" "$work/real.o"
	grep -h '#define CUPTI_API_VERSION ' "$inc/cupti_version.h" || true
fi
"$work/layout_check"
