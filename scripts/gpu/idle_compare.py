"""Analysis of the idle-release stage (scripts/gpu/stages_idle.sh).

usage: idle_compare.py power IDLE-POWER.CSV
       idle_compare.py latency EXPORTER.LOG WORK.LOG...
       idle_compare.py cycle LOGDIR
"""
import glob, json, re, statistics, sys


def power(path):
    rows = {}  # (label, round) -> [(W, MHz)]
    for line in open(path):
        if line.startswith("#"):
            continue
        p = [x.strip() for x in line.split(",")]
        try:
            rows.setdefault((p[0], int(p[1])), []).append((float(p[2]), float(p[3])))
        except (ValueError, IndexError):
            continue
    by = {}
    for (label, r), v in sorted(rows.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        w = statistics.mean(x[0] for x in v)
        mhz = statistics.mean(x[1] for x in v)
        by.setdefault(label, []).append(w)
        print(f"idle power round {r} {label:9s}: {w:6.2f} W  sm {mhz:5.0f} MHz  ({len(v)} readings, max {max(x[1] for x in v):.0f} MHz)")
    if "off" in by:
        off = statistics.mean(by["off"])
        for label in ("release", "kept", "norelease"):
            if label in by:
                want = "the cost release avoids" if label == "norelease" else "want within 0.5 W"
                print(f"idle power {label} - off: {statistics.mean(by[label]) - off:+.2f} W (mean of {len(by[label])} rounds; {want})")


def logfmt(line):
    return dict(re.findall(r'(\w+)=("[^"]*"|\S+)', line))


def latency(log, works):
    retakes = [logfmt(l) for l in open(log) if "pm sampling retaken after an idle release" in l]
    signals = [logfmt(l) for l in open(log) if "pm session retaken" in l]
    releases = sum(1 for l in open(log) if "pm session released" in l)
    print(f"idle latency: {releases} releases, retakes by signal: {[s.get('signal') for s in signals]}")
    for w in works:
        kv = dict(l.split()[:2] for l in open(w) if l.split() and l.split()[0].endswith("_unix_ns"))
        if "first_kernel_unix_ns" not in kv:
            print(f"idle latency {w}: workload printed no first kernel time: {open(w).read()[-300:]}")
            continue
        k = int(kv["first_kernel_unix_ns"])
        ctx = int(kv.get("context_ready_unix_ns", 0))
        # The retake that the kernel caused: the first whose first sample is at or after the
        # context's idle hold began plus the release delay, i.e. the last one before done.
        done = int(kv.get("done_unix_ns", "0").split()[0]) or k + 10**10
        after = [int(r["first_sample_unix_ns"]) for r in retakes if "first_sample_unix_ns" in r and ctx + 2 * 10**9 < int(r["first_sample_unix_ns"]) < done]
        if not after:
            print(f"idle latency {w}: no retake after the idle hold (was the GPU released before the first kernel?)")
            continue
        first = min(after)
        ms = (first - k) / 1e6
        act = [int(r["activity_unix_ns"]) for r in retakes if r.get("first_sample_unix_ns") == str(first) and "activity_unix_ns" in r]
        split = f" = detection {(act[0] - k) / 1e6:.1f} ms + retake to first sample {(first - act[0]) / 1e6:.1f} ms" if act else ""
        calls = [r for r in retakes if r.get("first_sample_unix_ns") == str(first) and "enable" in r]
        if calls:  # the session calls of that retake (exporters since 2026-11-23, session 2)
            split += f" (Enable {calls[0]['enable']}, SetConfig {calls[0]['set_config']}, Start {calls[0]['start']})"
        print(f"idle latency {w}: first kernel -> first PM sample {ms:.1f} ms{split} (want <= 250 ms)")


def series(path, name, **labels):
    tot = 0.0
    for line in open(path):
        if not line.startswith(name + "{"):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            tot += float(line.rsplit(" ", 1)[1])
    return tot


def cycle(d):
    oracle = 0.0
    for f in sorted(glob.glob(f"{d}/idle-truth-*.json")):
        j = json.load(open(f))
        oracle += sum(k["bytes"] for k in j["kernels"].values()) + 3 * (2 << 30)  # + calibration reads
    before, after = f"{d}/idle-cyc-before.txt", f"{d}/idle-cyc-after.txt"
    got = series(after, "cupti_dram_read_bytes_total", gpu="0") - series(before, "cupti_dram_read_bytes_total", gpu="0")
    missed = series(after, "cupti_pm_idle_missed_seconds_total", gpu="0") - series(before, "cupti_pm_idle_missed_seconds_total", gpu="0")
    rel = series(after, "cupti_pm_idle_releases_total", gpu="0") - series(before, "cupti_pm_idle_releases_total", gpu="0")
    relsec = series(after, "cupti_pm_idle_released_seconds_total", gpu="0") - series(before, "cupti_pm_idle_released_seconds_total", gpu="0")
    lost = series(after, "cupti_pm_lost_seconds_total", gpu="0", reason="idle_release") - series(before, "cupti_pm_lost_seconds_total", gpu="0", reason="idle_release")
    print(f"idle cycle: lost seconds with reason idle_release {lost * 1e3:.1f} ms (should match missed)")
    if oracle:
        print(f"idle cycle: dram read exporter {got / 1e9:.3f} GB vs known {oracle / 1e9:.3f} GB: {100 * (got / oracle - 1):+.2f} % "
              f"(want within 2 % + the missed share); releases {rel:.0f}, released {relsec:.1f} s, missed {missed * 1e3:.1f} ms")
    # Nothing reads 0 (or vanishes) while busy: scrapes between busy_start + 1.5 s and busy_end.
    phases, cur = [], None
    for line in open(f"{d}/idle-cyc-phases.txt"):
        k, t = line.split()
        if k == "busy_start":
            cur = float(t)
        elif cur is not None:
            phases.append((cur + 1.5, float(t)))
    t, busy_scrapes, zero, absent = None, 0, 0, 0
    block = []

    def judge():
        nonlocal busy_scrapes, zero, absent
        if t is None or not any(a <= t <= b for a, b in phases):
            return
        busy_scrapes += 1
        vals = [float(l.rsplit(" ", 1)[1]) for l in block if l.startswith("cupti_sm_active_ratio{")]
        if not vals:
            absent += 1
        elif all(v == 0 for v in vals):
            zero += 1
    for line in open(f"{d}/idle-cyc-scrapes.txt"):
        if line.startswith("# t "):
            judge()
            t, block = float(line.split()[2]), []
        else:
            block.append(line)
    judge()
    print(f"idle cycle: {busy_scrapes} scrapes while busy: sm_active absent in {absent}, 0 in {zero} (want 0 and 0)")


if __name__ == "__main__":
    {"power": lambda a: power(a[0]), "latency": lambda a: latency(a[0], a[1:]), "cycle": lambda a: cycle(a[0])}[sys.argv[1]](sys.argv[2:])
