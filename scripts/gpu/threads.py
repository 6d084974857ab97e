"""CPU seconds of a process by thread name, from /proc/PID/task/*/stat.

usage: threads.py PID [BEFORE.json]
Prints {"thread name": cpu_seconds, ...} as JSON; with BEFORE (an earlier output) prints the
difference, so the CPU of a measurement window can be split between CUPTI's and the driver's own
threads and the program's (Go's threads all carry the program's name). The difference is taken
thread by thread (an earlier output also holds each thread's id under "_tids" and the process's
total under "_process"), so a thread that ends or starts within the window does not move
another's figure; the CPU of threads that ended within it, which /proc no longer lists, is the
"(exited threads)" entry: the process's total less the threads listed.
"""
import json, os, sys


def ticks(stat):
    """The thread or process name and its utime + stime in seconds, from a stat line."""
    name = stat[stat.index("(") + 1:stat.rindex(")")]
    f = stat[stat.rindex(")") + 2:].split()
    return name, (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def snapshot(pid):
    tids = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            tids[tid] = ticks(open(f"/proc/{pid}/task/{tid}/stat").read())
        except OSError:
            continue  # the thread ended
    _, total = ticks(open(f"/proc/{pid}/stat").read())
    return tids, total


def by_name(tids):
    out = {}
    for name, cpu in tids.values():
        out[name] = out.get(name, 0.0) + cpu
    return out


def main():
    tids, total = snapshot(sys.argv[1])
    if len(sys.argv) > 2:
        before = json.load(open(sys.argv[2]))
        if "_tids" in before:
            old = before["_tids"]
            now = by_name({t: (n, c - old.get(t, [n, 0.0])[1]) for t, (n, c) in tids.items()})
            exited = (total - before["_process"]) - sum(now.values())
            if exited >= 0.005:
                now["(exited threads)"] = exited
        else:  # an output of the earlier threads.py: by name only
            now = {k: v - before.get(k, 0.0) for k, v in by_name(tids).items()}
        out = {k: round(v, 2) for k, v in now.items()}
    else:
        out = {k: round(v, 2) for k, v in by_name(tids).items()}
    out = dict(sorted(out.items(), key=lambda kv: -kv[1]))
    if len(sys.argv) <= 2:
        out["_tids"] = tids
        out["_process"] = total
    print(json.dumps(out))


main()
