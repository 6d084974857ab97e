"""Compares the exporter's NVML health series with nvidia-smi queried at the same moments
(stage health). usage: health_compare.py LOGDIR"""
import re, sys, os

def blocks(path, parse):
    out, t, cur = [], None, []
    for line in open(path):
        if line.startswith("# t "):
            if t is not None: out.append((t, parse(cur)))
            t, cur = float(line.split()[2]), []
        elif line.strip():
            cur.append(line.rstrip("\n"))
    if t is not None: out.append((t, parse(cur)))
    return out

def prom(lines):
    d = {}
    for l in lines:
        m = re.match(r'(\w+)\{(.*)\} (\S+)', l)
        if m:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
            d.setdefault(m.group(1), []).append((labels, float(m.group(3))))
    return d

def smi(lines):
    return [[c.strip() for c in l.split(",")] for l in lines]

def get(d, name, gpu, **kw):
    for l, v in d.get(name, []):
        if l.get("gpu") == gpu and all(l.get(k) == x for k, x in kw.items()):
            return v
    return None

def main():
    L = sys.argv[1]
    if len(sys.argv) > 2 and sys.argv[2] == "procs":
        return procs_only(L)
    S = blocks(os.path.join(L, "health-scrapes.txt"), prom)
    Q = blocks(os.path.join(L, "health-smi.csv"), smi)
    worst = {}
    def note(k, rel):
        worst[k] = max(worst.get(k, 0), abs(rel))
    energy = []
    for (ts, m), (tq, rows) in zip(S, Q):
        for r in rows:
            idx, mem_used, temp, sm, memclk, pw = r[0], float(r[3]), float(r[5]), float(r[7]), float(r[8]), float(r[11])
            e = get(m, "cupti_gpu_memory_used_bytes", idx)
            if e is not None: note("memory used (MiB, abs diff)", e / 2**20 - mem_used)
            e = get(m, "cupti_gpu_temperature_celsius", idx)
            if e is not None: note("temperature (C, abs diff)", e - temp)
            e = get(m, "cupti_gpu_clock_hertz", idx, clock="sm")
            if e is not None: note("sm clock (MHz, abs diff)", e / 1e6 - sm)
            e = get(m, "cupti_gpu_clock_hertz", idx, clock="memory")
            if e is not None: note("mem clock (MHz, abs diff)", e / 1e6 - memclk)
            e = get(m, "cupti_gpu_power_watts", idx)
            if e is not None and pw > 0: note("power (relative)", (e - pw) / pw)
            en = get(m, "cupti_gpu_energy_joules_total", idx)
            if en is not None and e is not None: energy.append((idx, ts, en, e))
    for k, v in worst.items():
        print(f"health vs nvidia-smi, worst {k}: {v:.4g}")
    by = {}
    for idx, ts, en, p in energy:
        by.setdefault(idx, []).append((ts, en, p))
    for idx, v in by.items():
        if len(v) >= 2:
            (t0, e0, _), (t1, e1, _) = v[0], v[-1]
            pmean = sum(p for _, _, p in v) / len(v)
            print(f"gpu {idx}: energy +{e1-e0:.1f} J over {t1-t0:.1f} s vs mean power x time {pmean*(t1-t0):.1f} J ({((e1-e0)/(pmean*(t1-t0))-1)*100:+.1f} %)")

def procs_only(L):
    apps = [l.split(",") for l in open(os.path.join(L, "health-apps.csv")) if l.strip()]
    procs = prom(open(os.path.join(L, "health-procs.txt")).read().splitlines())
    for pid, used in apps:
        got = [v for l, v in procs.get("cupti_gpu_process_memory_bytes", []) if l.get("pid") == pid.strip()]
        print(f"pid {pid.strip()}: nvidia-smi {used.strip()} MiB, exporter {[g/2**20 for g in got]} MiB")

if __name__ == "__main__":
    main()
