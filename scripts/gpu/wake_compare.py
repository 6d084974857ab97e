"""How soon each NVML signal showed the first kernel of an idle GPU (stage wakeprobe).

usage: wake_compare.py PROBE_LOG WORKLOAD_LOG
PROBE_LOG: wakeprobe's lines "unix_ns signal value"; WORKLOAD_LOG: idle_kernels.py's output.
For each signal: its value before the kernel, and the first change after the launch that
means work (GPM SM utilisation >= 0.1 %, instant power >= 20 W over the value before, SM clock
up, clock-event reasons changed, utilisation > 0), in ms after the launch.
"""
import sys


def busy(sig, before, value):
    try:
        v, b = float(value), float(before)
    except ValueError:
        return sig == "clock_events" and value != before
    return {"gpm": v >= 0.1, "power_instant_w": v >= b + 20, "sm_clock_mhz": v > b,
            "utilization": v > 0}.get(sig, value != before)


def main(probe_log, work_log):
    work = dict(l.split()[:2] for l in open(work_log) if l.startswith("first_kernel"))
    t0, done = int(work["first_kernel_unix_ns"]), int(work.get("first_kernel_done_unix_ns", 0))
    before, first = {}, {}
    for line in open(probe_log):
        t, sig, value = line.split()
        t = int(t)
        if t < t0:
            before[sig] = value
        elif sig not in first and busy(sig, before.get(sig, "0"), value):
            first[sig] = (t - t0) / 1e6, value
    out = [f"first kernel done after {(done - t0) / 1e6:.1f} ms" if done else "first kernel done: not printed"]
    for sig in ("gpm", "power_instant_w", "sm_clock_mhz", "clock_events", "utilization"):
        if sig in first:
            out.append(f"{sig} {before.get(sig, '?')}->{first[sig][1]} at {first[sig][0]:.0f} ms")
        else:
            out.append(f"{sig} {before.get(sig, '?')}: no change")
    print("wake signals: " + "; ".join(out))


if __name__ == "__main__":
    main(*sys.argv[1:3])
