"""How soon each NVML signal showed the first kernel of an idle GPU (stage wakeprobe).

usage: wake_compare.py PROBE_LOG WORKLOAD_LOG
PROBE_LOG: wakeprobe's lines "unix_ns signal value"; WORKLOAD_LOG: idle_kernels.py's output.
For each signal: its value before the kernel, and the first change after the launch that
means work (GPM SM utilisation >= 0.1 %, instant power >= 20 W over the value before, SM clock
up, clock-event reasons changed, utilisation > 0), in ms after the launch. Then the idle
noise of the instant power (lowest and highest reading before the launch) and when it first
rose 10, 15, 20 and 30 W over that lowest reading: the idle controller's power signal
(--pmsample.idle-power-rise) wakes on such a rise.
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
    before, first, idle_w, rise = {}, {}, [], {}
    for line in open(probe_log):
        t, sig, value = line.split()
        t = int(t)
        if t < t0:
            before[sig] = value
            if sig == "power_instant_w":
                idle_w.append(float(value))
            continue
        if sig == "power_instant_w" and idle_w:
            for m in (10, 15, 20, 30):
                if m not in rise and float(value) >= min(idle_w) + m:
                    rise[m] = (t - t0) / 1e6
        if sig not in first and busy(sig, before.get(sig, "0"), value):
            first[sig] = (t - t0) / 1e6, value
    out = [f"first kernel done after {(done - t0) / 1e6:.1f} ms" if done else "first kernel done: not printed"]
    for sig in ("gpm", "power_instant_w", "sm_clock_mhz", "clock_events", "utilization"):
        if sig in first:
            out.append(f"{sig} {before.get(sig, '?')}->{first[sig][1]} at {first[sig][0]:.0f} ms")
        else:
            out.append(f"{sig} {before.get(sig, '?')}: no change")
    if idle_w:
        out.append(f"idle power {min(idle_w):.0f}-{max(idle_w):.0f} W ({len(idle_w)} changes); rise over the lowest: " +
                   ", ".join(f"+{m} W at {rise[m]:.0f} ms" if m in rise else f"+{m} W never" for m in (10, 15, 20, 30)))
    print("wake signals: " + "; ".join(out))


if __name__ == "__main__":
    main(*sys.argv[1:3])
