"""Compare the exporter's windowed means with pmprobe's per-decode averages over the same phases.

usage: compare_pm.py LOGDIR METRICS   (METRICS: comma-separated Perfworks names, probe column order)
The exporter ran first, the probe second, each beside its own run of `workload.py phases`; phase
boundaries come from the workload logs, so each tool is compared on its own run's phases.
"""
import re, sys, statistics

logdir, metrics = sys.argv[1], sys.argv[2].split(",")

def phases(path):
    out, starts = [], {}
    for line in open(path):
        m = re.match(r"phase (\w+) (start|end) ([0-9.]+)", line)
        if not m: continue
        name, what, t = m.group(1), m.group(2), float(m.group(3))
        if what == "start": starts[name] = t
        else: out.append((name, starts.pop(name), t))
    return out

# exporter: windowed means at scrape times; take gauges whose help names the Perfworks metric
final = open(f"{logdir}/pm-final.txt").read()
fam_of = {}
for m in metrics:
    for line in final.splitlines():
        if line.startswith("# HELP ") and m in line:
            name = line.split()[2]
            if "_max_" in name or "_min_" in name: continue
            fam_of[m] = name
            break
rows, t = [], None
for line in open(f"{logdir}/scrapes.txt"):
    if line.startswith("# t "): t = float(line.split()[2]); continue
    parts = line.split()
    if len(parts) >= 2 and t is not None and ('gpu="0"' in parts[0] or "{" not in parts[0]):  # the probe samples device 0
        rows.append((t, parts[0].split("{")[0], float(parts[-1])))

def exporter_mean(m, a, b):
    name = fam_of.get(m)
    if not name: return None
    v = [val for (t, n, val) in rows if n == name and a + 1.5 <= t <= b]  # window 1 s, skip the edge
    return statistics.mean(v) if v else None

# probe: each line carries its arrival time (epoch s) first; a line averages the samples of
# the ~250 ms before it
probe_rows = []
for line in open(f"{logdir}/pmprobe.tsv"):
    f = line.rstrip("\n").split("\t")
    if len(f) < 5 + len(metrics) or f[1] == "t_ms": continue
    probe_rows.append((float(f[0]), [float(x) for x in f[5:5 + len(metrics)]]))

def probe_mean(k, a, b):
    v = [vals[k] for (t, vals) in probe_rows if a + 1.0 <= t - 0.3 and t <= b]
    return statistics.mean(v) if v else None

pe, pp = phases(f"{logdir}/phases-exporter.log"), phases(f"{logdir}/phases-probe.log")
print("metric phase exporter probe ratio")
for k, m in enumerate(metrics):
    scale = 0.01 if "pct" in m else 1.0
    for (name, a, b), (_, c, d) in zip(pe, pp):
        e, p = exporter_mean(m, a, b), probe_mean(k, c, d)
        if p is not None: p *= scale
        ratio = (e / p) if (e is not None and p) else float("nan")
        print(f"{fam_of.get(m, m)} {name} {e if e is not None else 'n/a'} {p if p is not None else 'n/a'} {ratio:.3f}")
