# Every way one GPU is shared (issue 31; scripts/gpu/validate.sh sources this): time-slicing
# between 2, 3 and 4 processes and MPS with 2 and 3 clients, each process a share_truth.cu role
# whose DRAM read bytes are known and whose tensor-core work is known to be its own.
#
# Two sets of workloads that never mix: the tune set (roles t-*, kernels t_*) to develop the
# join with, the check set (roles c-*, kernels c_*: other shapes, launch widths, bursts, gaps)
# only to check it. A mode is NAME-SET (ts2-t, mps3-c, ...); a case is MODE:UNTRACED, UNTRACED
# the comma-separated indexes of the processes that load no injection library (empty: all
# traced), e.g. ts3-c:1,2 is one traced pod beside two untraced processes.
#
#   attrib_share_record  records every mode with every process traced (`cupti-exporter record`
#                        at the defaults: the curated set with the context-switch counter, 1 ms,
#                        NVML processes at 1 s), for the offline work: scripts/gpu/recfilter
#                        -drop-pods hides any of them to make it untraced, sharesim replays.
#                        Recordings come back as $OUT/rec-t.tar and $OUT/rec-c.tar (gzipped
#                        recordings, truth files, manifests). SHARE_REC_MODES picks modes; a
#                        case there (ts3-t:1,2) records its processes truly untraced, under
#                        the case's name (rec-ts3-t_1-2.rec.gz), which share_offline.sh replays
#                        as it was, nothing hidden.
#   attrib_share         the live exporter (serve, defaults, pods from the hellos) on each case
#                        of SHARE_CASES, truly untraced processes included; attrib_share_check.py
#                        prints one line per case. SHARE_BIN runs another exporter binary (the
#                        "before" of a change).
# SHARE_NVMLPOLL=1 runs scripts/gpu/nvml_mps.py beside each live case, as the recordings have it.
# SHARE_TAP=1, with a binary built with -tags jointap (PREPARE_TAGS=jointap prepare.sh), records what
# the live join of each case was given ($OUT/tap.tar: rec-CASE.rec.gz as share_offline.sh reads; a
# case run again in rN/, N its run).
# SHARE_S (15) is the seconds of work per process. Under MPS the exporter is started first and
# kept out of MPS (its own CUDA_MPS_PIPE_DIRECTORY), the control daemon after it.

SHARE_S=${SHARE_S:-15}
SHARE_MPS_PIPE=/tmp/nvidia-mps

share_build() {
  local set
  for set in t c; do
    [ -x "$G/share_$set" ] && continue
    nvcc -O2 -std=c++17 -arch=sm_90 -DKPFX=${set}_ -o "$G/share_$set" scripts/gpu/share_truth.cu > "$L/build-share-$set.log" 2>&1 ||
      { say "share_truth ($set) build failed: $(grep -m3 -i error "$L/build-share-$set.log")"; return 1; }
  done
  [ -e "$INJ" ] || { say "no injection library"; return 1; }
}

# share_mode MODE -> "MPS ROLE..." (MPS 1: the processes are MPS clients)
share_mode() {
  case $1 in
    ts2-t) echo "0 t-stream t-tensor" ;;
    ts3-t) echo "0 t-stream t-tensor t-light" ;;
    ts4-t) echo "0 t-stream t-tensor t-light t-stream" ;;
    ts3p-t) echo "0 t-stream t-tensor t-pulse" ;; # with the bursty tune role (run DZ on)
    ts4p-t) echo "0 t-stream t-tensor t-light t-pulse" ;;
    ts3f-t) echo "0 t-stream t-tensor t-flick" ;; # the incoming process of many switches (run FC on)
    ts4f-t) echo "0 t-stream t-tensor t-light t-flick" ;;
    ts3n-t) echo "0 t-stream t-tensor t-nibble" ;; # a narrow bursty reader (run FF on)
    ts4n-t) echo "0 t-stream t-tensor t-light t-nibble" ;;
    ts3h-t) echo "0 t-stream t-tensor t-half" ;; # a half-width bursty reader (run FG on)
    ts4h-t) echo "0 t-stream t-tensor t-light t-half" ;;
    ts3k-t) echo "0 t-stream t-tensor t-trickle" ;; # narrow bursts cut by others' turns (run FH on)
    ts4k-t) echo "0 t-stream t-tensor t-light t-trickle" ;;
    ts3l-t) echo "0 t-long t-tensor t-nibble" ;; # a narrow bursty reader beside long reads (run FS on)
    ts4l-t) echo "0 t-long t-tensor t-stream t-nibble" ;;
    mps2-t) echo "1 t-stream t-tensor" ;;
    mps2l-t) echo "1 t-long t-tensor" ;; # long full-occupancy reads beside the tensor client (run FV on)
    mps3-t) echo "1 t-stream t-tensor t-light" ;;
    mps3p-t) echo "1 t-stream t-tensor t-pulse" ;; # the bursty tune role's short kernels under MPS (run ED on)
    ts2-c) echo "0 c-steady c-tensor" ;;
    ts3-c) echo "0 c-burst c-tensor c-steady" ;;
    ts4-c) echo "0 c-burst c-tensor c-steady c-narrow" ;;
    mps2-c) echo "1 c-steady c-tensor" ;;
    mps3-c) echo "1 c-burst c-tensor c-narrow" ;;
    *) return 1 ;;
  esac
}

mps_start() {
  mkdir -p $SHARE_MPS_PIPE /tmp/nvidia-mps-log
  CUDA_MPS_PIPE_DIRECTORY=$SHARE_MPS_PIPE CUDA_MPS_LOG_DIRECTORY=/tmp/nvidia-mps-log nvidia-cuda-mps-control -d ||
    { say "MPS control daemon did not start"; return 1; }
}
mps_stop() {
  echo quit | CUDA_MPS_PIPE_DIRECTORY=$SHARE_MPS_PIPE nvidia-cuda-mps-control > /dev/null 2>&1
  local i
  for i in $(seq 1 20); do pgrep -x nvidia-cuda-mps > /dev/null || break; sleep 0.25; done
  cp /tmp/nvidia-mps-log/control.log "$L/mps-control-$1.log" 2>/dev/null
  cp /tmp/nvidia-mps-log/server.log "$L/mps-server-$1.log" 2>/dev/null
  rm -f /tmp/nvidia-mps-log/*.log
}

# share_launch RUN CASE: starts the processes of CASE (MODE:UNTRACED) in the background, writes
# the manifest $L/share-RUN.manifest (pod truth-file traced|untraced role) and sets SHARE_PIDS.
share_launch() {
  local run=$1 mode=${2%%:*} untr=",${2#*:}," spec mps i=0 role set pod truth seed
  spec=$(share_mode "$mode") || { say "unknown mode $mode"; return 1; }
  read -r mps spec <<< "$spec"
  set=${mode##*-}
  SHARE_PIDS=()
  : > "$L/share-$run.manifest"
  for role in $spec; do
    pod="p$i-$role" truth="$L/truth-$run-p$i.json" seed=$(($(echo -n "$mode" | cksum | cut -d' ' -f1) % 100000 + 17 * i))
    local env=(env -u CUDA_INJECTION64_PATH CUDA_MPS_PIPE_DIRECTORY=$SHARE_MPS_PIPE POD_NAMESPACE=gpu-test POD_NAME=$pod)
    local kind=traced
    [[ $untr == *",$i,"* ]] && kind=untraced
    [ $kind = traced ] && env+=(CUDA_INJECTION64_PATH=$INJ CUPTI_EXPORTER_SOCKET=$SOCK)
    "${env[@]}" "$G/share_$set" "$SHARE_S" "$seed" "$truth" "$role" > "$L/$run-p$i.log" 2>&1 &
    echo "$pod $truth $kind $role" >> "$L/share-$run.manifest"
    SHARE_PIDS+=($!)
    i=$((i + 1))
  done
}

share_is_mps() { [ "$(share_mode "${1%%:*}" | cut -d' ' -f1)" = 1 ]; }

# share_run CASE: the name of CASE's files: ts3-t:1,2 -> ts3-t_1-2, ts3-t: -> ts3-t (the mode's own,
# as share_offline.sh looks them up).
share_run() { local r; r=$(echo "$1" | tr ':,' '_-'); echo "${r%_}"; }

# share_record CASE: one recording of CASE (a mode: every process traced; MODE:UNTRACED: those
# processes load no injection library). If PM sampling gets no sample beside the MPS server, the
# MPS modes after it start the daemon first and let the exporter join MPS as a client
# (SHARE_EXP_MPS=1).
share_record() {
  local case=$1 mode rec rp np mps=0 pipe=/tmp/no-mps-for-the-exporter
  [[ $case == *:* ]] || case="$case:"
  mode=$(share_run "$case")
  rec="$L/rec/rec-$mode.rec"
  share_is_mps "$case" && mps=1
  mkdir -p /run/cupti-exporter "$L/rec"; rm -f "$SOCK"
  if [ $mps = 1 ] && [ -n "${SHARE_EXP_MPS:-}" ]; then mps_start || return 1; pipe=$SHARE_MPS_PIPE; fi
  CUDA_MPS_PIPE_DIRECTORY=$pipe "$BIN" record --output "$rec" --duration "$((SHARE_S + 8))s" \
    --pmsample.interval=1ms --activity.socket=$SOCK --health.interval=1s > "$L/exp-record-$mode.log" 2>&1 &
  rp=$!
  for _ in $(seq 1 50); do [ -S "$SOCK" ] && break; sleep 0.1; done
  [ $mps = 1 ] && [ -z "${SHARE_EXP_MPS:-}" ] && { mps_start || return 1; }
  sleep 1
  python3 scripts/gpu/nvml_mps.py "$((SHARE_S + 4))" > "$L/nvml-$mode.txt" 2>&1 &
  np=$!
  share_launch "$mode" "$case"
  wait "${SHARE_PIDS[@]}"
  wait "$np"
  wait "$rp"; say "record $mode: rc=$? $(grep -m1 'recording done' "$L/exp-record-$mode.log" | grep -o 'batches=[0-9]*.*bytes=[0-9]*')"
  [ $mps = 1 ] && mps_stop "$mode"
  local batches; batches=$(grep -m1 'recording done' "$L/exp-record-$mode.log" | grep -o 'batches=[0-9]*' | cut -d= -f2)
  if [ $mps = 1 ] && [ "${batches:-0}" -lt 10 ] && [ -z "${SHARE_EXP_MPS:-}" ]; then
    say "record $mode: no PM samples beside the MPS server ($(grep -m2 -iE 'error|fail' "$L/exp-record-$mode.log" | tr '\n' ' ')); the exporter joins MPS from now on"
    export SHARE_EXP_MPS=1
    share_record "$case"
    return
  fi
  cat "$L"/"$mode"-p*.log | sed "s/^/$mode: /" | tee -a "$S"
  grep -m4 -E '^(list|mps)' "$L/nvml-$mode.txt" | sed "s/^/$mode nvml: /" | tee -a "$S"
  gzip -f "$rec"
  cp "$L/share-$mode.manifest" "$L"/truth-"$mode"-p*.json "$L/rec/"
}

stage_attrib_share_record() {
  say "== attrib_share_record (issue 31: every sharing mode recorded, every process traced, ${SHARE_S} s, 1 ms, defaults)"
  share_build || return
  local t0=$SECONDS mode
  command -v nvidia-cuda-mps-control > /dev/null || say "no nvidia-cuda-mps-control: the MPS modes are skipped"
  for mode in ${SHARE_REC_MODES:-ts2-t ts3-t ts4-t mps2-t mps3-t ts2-c ts3-c ts4-c mps2-c mps3-c}; do
    share_is_mps "$mode" && ! command -v nvidia-cuda-mps-control > /dev/null && continue
    share_record "$mode"
  done
  (cd "$L/rec" && tar -cf "$OUT/rec-t.tar" ./*-t[._]* ./*-t-p*.json ./*-t_*-p*.json 2>/dev/null
    tar -cf "$OUT/rec-c.tar" ./*-c[._]* ./*-c-p*.json ./*-c_*-p*.json 2>/dev/null)
  ls -l "$OUT"/rec-*.tar | tee -a "$S"
  say "attrib_share_record: $((SECONDS - t0)) s"
}

# share_live CASE: the live exporter on one case; attrib_share_check.py prints its line.
share_live() {
  local case=$1 run port=9479 mps=0 bin=${SHARE_BIN:-$BIN}
  run=$(share_run "$case")
  share_is_mps "$case" && mps=1
  mkdir -p /run/cupti-exporter; rm -f "$SOCK"
  local oldbin=$BIN pipe=/tmp/no-mps-for-the-exporter; BIN=$bin
  if [ $mps = 1 ] && [ -n "${SHARE_EXP_MPS:-}" ]; then mps_start || return 1; pipe=$SHARE_MPS_PIPE; fi
  # a case run again taps into tap/r2, tap/r3, ...: each repeat replays apart (share_offline.sh DIR)
  local tap= tapdir=$L/tap n=1
  if [ -n "${SHARE_TAP:-}" ]; then
    while [ -e "$tapdir/rec-$run.rec.gz" ]; do n=$((n + 1)) tapdir=$L/tap/r$n; done
    mkdir -p "$tapdir"; tap="$tapdir/rec-$run.rec"
  fi
  CUPTI_EXPORTER_JOINTAP=$tap CUDA_MPS_PIPE_DIRECTORY=$pipe start_exporter "$L/exp-share-$run.log" $port --pmsample.interval=1ms \
    --activity.socket=$SOCK --activity.trust-hello-pods --health.interval=1s
  local rc=$?; BIN=$oldbin; [ $rc = 0 ] || return
  [ $mps = 1 ] && [ -z "${SHARE_EXP_MPS:-}" ] && { mps_start || { stop_exporter $port; return 1; }; }
  local np=
  if [ -n "${SHARE_NVMLPOLL:-}" ]; then # as attrib_share_record runs: nvml_mps.py polling NVML beside
    python3 scripts/gpu/nvml_mps.py "$((SHARE_S + 4))" > "$L/nvml-live-$run.txt" 2>&1 &
    np=$!
  fi
  share_launch "$run" "$case"
  wait "${SHARE_PIDS[@]}"
  [ -n "$np" ] && wait "$np"
  sleep 6 # the watermark (3 s) and the last flushes
  scrape "$L/share-$run.txt" $port
  stop_exporter $port
  [ $mps = 1 ] && mps_stop "$run"
  python3 scripts/gpu/attrib_share_check.py "$case" "$L/share-$run.txt" "$L/share-$run.manifest" 2>&1 | tee -a "$S"
  if [ -n "$tap" ] && [ -s "$tap" ]; then # what the live join was given, for share_offline.sh
    gzip -f "$tap"
    cp "$L/share-$run.manifest" "$L"/truth-"$run"-p*.json "$tapdir/"
    (cd "$L/tap" && tar -cf "$OUT/tap.tar" .)
  fi
}

stage_attrib_share() {
  say "== attrib_share (issue 31: the live exporter on every sharing mode, ${SHARE_S} s a case, bin ${SHARE_BIN:-$BIN})"
  share_build || return
  local t0=$SECONDS c
  for c in ${SHARE_CASES:-ts2-c: ts3-c: ts4-c: ts2-c:1 ts3-c:2 ts3-c:1,2 ts4-c:3 mps2-c: mps3-c: mps3-c:2}; do
    share_is_mps "$c" && ! command -v nvidia-cuda-mps-control > /dev/null && continue
    share_live "$c"
  done
  say "attrib_share: $((SECONDS - t0)) s"
}

# attrib_share_before: attrib_share with another binary (SHARE_BEFORE_BIN, default
# .gpu/cupti-exporter-main: the build before a change) on SHARE_BEFORE_CASES, in the same call
# and on the same GPU as the build under test.
stage_attrib_share_before() {
  SHARE_BIN=${SHARE_BEFORE_BIN:-$G/cupti-exporter-main} SHARE_CASES=${SHARE_BEFORE_CASES:-ts2-c: ts3-c:2 ts3-c:1,2 mps2-c: mps3-c:2} \
    stage_attrib_share
}
