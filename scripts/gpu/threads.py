"""CPU seconds of a process by thread name, from /proc/PID/task/*/stat.

usage: threads.py PID [BEFORE.json]
With THREADS_DETAIL=FILE and BEFORE, also writes to FILE each thread's CPU and context switches
(voluntary, involuntary) in the window, busiest first, and their sums: how often the program's
threads sleep and wake, which a thread group's CPU alone does not show.
Prints {"thread name": cpu_seconds, ...} as JSON; with BEFORE (an earlier output) prints the
difference, so the CPU of a measurement window can be split between CUPTI's and the driver's own
threads and the program's (Go's threads all carry the program's name). The difference is taken
thread by thread (an earlier output also holds each thread's id under "_tids" and the process's
total under "_process"), so a thread that ends or starts within the window does not move
another's figure; the process's total less the threads listed is the "(exited threads or
rounding)" entry: threads that ended within the window, which /proc no longer lists, and the
difference between the process's and its threads' tick counts, which the kernel rounds apart
(the exporter on the fake library showed 20-30 ms of it in 10 s with no thread ending, strace).
"""
import json, os, sys


def ticks(stat):
    """The thread or process name and its utime + stime in seconds, from a stat line."""
    name = stat[stat.index("(") + 1:stat.rindex(")")]
    f = stat[stat.rindex(")") + 2:].split()
    return name, (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def snapshot(pid):
    tids, switches = {}, {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            tids[tid] = ticks(open(f"/proc/{pid}/task/{tid}/stat").read())
            switches[tid] = context_switches(open(f"/proc/{pid}/task/{tid}/status").read()) + [on_cpu(pid, tid)]
        except OSError:
            continue  # the thread ended
    _, total = ticks(open(f"/proc/{pid}/stat").read())
    return tids, total, switches


def context_switches(status):
    """[voluntary, involuntary] context switches from a /proc status file."""
    out = [0, 0]
    for line in status.splitlines():
        if line.startswith("voluntary_ctxt_switches:"):
            out[0] = int(line.split()[1])
        elif line.startswith("nonvoluntary_ctxt_switches:"):
            out[1] = int(line.split()[1])
    return out


def on_cpu(pid, tid):
    """The thread's time on a CPU in seconds from schedstat (nanoseconds, where stat counts
    ticks of 10 ms and a thread's and the process's roundings differ), None without it."""
    try:
        return int(open(f"/proc/{pid}/task/{tid}/schedstat").read().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def detail(tids, switches, before):
    """Each thread's CPU (schedstat's where there is one) and switches since before (an earlier
    output), busiest first."""
    old_t, old_s = before["_tids"], before.get("_switches", {})
    rows = []
    for tid, (name, cpu) in tids.items():
        v, i, ns = (switches.get(tid, [0, 0]) + [None])[:3]
        ov, oi, ons = (old_s.get(tid, [0, 0]) + [None])[:3]
        if ns is not None and (ons is not None or tid not in old_s):
            used = ns - (ons or 0.0)
        else:
            used = cpu - old_t.get(tid, [name, 0.0])[1]
        rows.append([name, tid, round(used, 4), v - ov, i - oi])
    rows.sort(key=lambda r: (-r[2], -r[3]))
    return {"voluntary": sum(r[3] for r in rows), "involuntary": sum(r[4] for r in rows), "cpu": round(sum(r[2] for r in rows), 4), "threads": rows}


def by_name(tids):
    out = {}
    for name, cpu in tids.values():
        out[name] = out.get(name, 0.0) + cpu
    return out


def main():
    tids, total, switches = snapshot(sys.argv[1])
    if len(sys.argv) > 2:
        before = json.load(open(sys.argv[2]))
        if "_tids" in before:
            old = before["_tids"]
            now = by_name({t: (n, c - old.get(t, [n, 0.0])[1]) for t, (n, c) in tids.items()})
            exited = (total - before["_process"]) - sum(now.values())
            if exited >= 0.005:
                now["(exited threads or rounding)"] = exited
            if os.environ.get("THREADS_DETAIL"):
                with open(os.environ["THREADS_DETAIL"], "w") as f:
                    json.dump(detail(tids, switches, before), f)
        else:  # an output of the earlier threads.py: by name only
            now = {k: v - before.get(k, 0.0) for k, v in by_name(tids).items()}
        out = {k: round(v, 2) for k, v in now.items()}
    else:
        out = {k: round(v, 2) for k, v in by_name(tids).items()}
    out = dict(sorted(out.items(), key=lambda kv: -kv[1]))
    if len(sys.argv) <= 2:
        out["_tids"] = tids
        out["_process"] = total
        out["_switches"] = switches
    print(json.dumps(out))


main()
