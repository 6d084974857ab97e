"""CPU seconds of a process by thread name, from /proc/PID/task/*/stat.

usage: threads.py PID [BEFORE.json]
Prints {"thread name": cpu_seconds, ...} as JSON; with BEFORE (an earlier output) prints the
difference, so the CPU of a measurement window can be split between CUPTI's and the driver's own
threads and the program's.
"""
import json, os, sys
from collections import Counter

def snapshot(pid):
    tick = os.sysconf("SC_CLK_TCK")
    cpu = Counter()
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            s = open(f"/proc/{pid}/task/{tid}/stat").read()
        except OSError:
            continue  # the thread ended
        name = s[s.index("(") + 1:s.rindex(")")]
        f = s[s.rindex(")") + 2:].split()
        cpu[name] += (int(f[11]) + int(f[12])) / tick  # utime, stime
    return cpu

now = snapshot(sys.argv[1])
if len(sys.argv) > 2:
    before = json.load(open(sys.argv[2]))
    now = {k: round(v - before.get(k, 0.0), 2) for k, v in now.items()}
print(json.dumps(dict(sorted(now.items(), key=lambda kv: -kv[1]))))
