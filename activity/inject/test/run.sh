#!/bin/sh
# Runs every harness scenario against the injection library and the fake libcupti.
set -u
: "${BUILD:?set BUILD to the build directory}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export INJECT_LIB="$BUILD/libcupti_exporter_inject.so"
export CUPTI_EXPORTER_CUPTI_LIBRARY="$BUILD/libfake_cupti.so"
export CUPTI_EXPORTER_CUDA_LIBRARY="$BUILD/libfake_cupti.so"
export CUPTI_EXPORTER_FLUSH_INTERVAL_MS=20
export CUPTI_EXPORTER_LOG=${CUPTI_EXPORTER_LOG:-1}
fail=0
run() { # name, then env assignments, then the mode
	name=$1; shift
	if env CUPTI_EXPORTER_SOCKET="$tmp/$name.sock" FAKE_CUPTI_VIOLATIONS="$tmp/$name.violations" \
		"$@" 2>"$tmp/$name.err"; then
		:
	else
		echo "FAIL $name"; cat "$tmp/$name.err"; fail=1
	fi
}
run basic            "$BUILD/harness" basic
run pool             CUPTI_EXPORTER_BUFFER_COUNT=4 "$BUILD/harness" pool
run pool-old         CUPTI_EXPORTER_BUFFER_COUNT=4 FAKE_CUPTI_VERSION=28 "$BUILD/harness" pool-old
run absent           CUPTI_EXPORTER_QUEUE_RECORDS=1024 "$BUILD/harness" absent
run hung             CUPTI_EXPORTER_QUEUE_RECORDS=1024 CUPTI_EXPORTER_EXIT_TIMEOUT_MS=400 "$BUILD/harness" hung
run absent-exit      "$BUILD/harness" absent-exit
if ! grep -q 'records sent of 100 queued; dropped: pool_exhausted=0 queue_full=100 ' "$tmp/absent-exit.err"; then
	echo "FAIL absent-exit: records left at exit not counted"; cat "$tmp/absent-exit.err"; fail=1
fi
run fork             "$BUILD/harness" fork
run step-aside       FAKE_CUPTI_REGISTER_RESULT=39 "$BUILD/harness" step-aside
run step-aside-en    FAKE_CUPTI_ENABLE_RESULT=39 FAKE_CUPTI_ENABLE_FAIL_KIND=2 "$BUILD/harness" step-aside
run step-aside-env   CUPTI_EXPORTER_STEP_ASIDE_ENV=OTHER_TOOL,PROFILER_ON PROFILER_ON=1 "$BUILD/harness" step-aside
run version          FAKE_CUPTI_VERSION=140000 "$BUILD/harness" version
run duty             CUPTI_EXPORTER_DUTY_CYCLE=0.3 CUPTI_EXPORTER_DUTY_PERIOD_MS=100 "$BUILD/harness" duty
run kinds            CUPTI_EXPORTER_KINDS=memcpy,ptop "$BUILD/harness" kinds
run quiet            CUPTI_EXPORTER_FLUSH_INTERVAL_MS=1000 CUPTI_EXPORTER_QUIET_AFTER_MS=200 \
	CUPTI_EXPORTER_QUIET_FLUSH_INTERVAL_MS=10 "$BUILD/harness" quiet
run launch           CUPTI_EXPORTER_LOG=2 CUPTI_EXPORTER_FLUSH_INTERVAL_MS=1000 CUPTI_EXPORTER_QUIET_AFTER_MS=200 \
	CUPTI_EXPORTER_QUIET_FLUSH_INTERVAL_MS=10 "$BUILD/harness" launch
if ! grep -q 'launch watches=2 launch frames=1' "$tmp/launch.err"; then
	echo "FAIL launch: the exit line does not count 2 watches and 1 launch frame"; cat "$tmp/launch.err"; fail=1
fi
run launch-off       CUPTI_EXPORTER_FLUSH_INTERVAL_MS=1000 CUPTI_EXPORTER_QUIET_AFTER_MS=200 \
	CUPTI_EXPORTER_QUIET_FLUSH_INTERVAL_MS=10 CUPTI_EXPORTER_LAUNCH_WATCH=0 "$BUILD/harness" launch
# Bad settings are warned about and replaced by defaults; tracing still works.
run bad-config       CUPTI_EXPORTER_BUFFER_COUNT=lots CUPTI_EXPORTER_KINDS=kernel,bogus "$BUILD/harness" basic
if ! grep -q 'ignoring CUPTI_EXPORTER_BUFFER_COUNT=lots' "$tmp/bad-config.err"; then
	echo "FAIL bad-config: no warning for CUPTI_EXPORTER_BUFFER_COUNT"; fail=1
fi
[ $fail -eq 0 ] && echo "all injection tests passed"
exit $fail
