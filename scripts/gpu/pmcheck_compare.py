"""Issue 19: the exporter's window statistics against pmref's samples, phase by phase.

usage: pmcheck_compare.py LOGDIR EXPORTER_CASE REF_CASE
  LOGDIR/pmc-scrapes-CASE.txt   the exporter's scrapes (1 s window), "# t EPOCH" before each
  LOGDIR/pmc-work-CASE.log      the phases of the exporter's run (workload.py format)
  LOGDIR/REF.tsv, pmc-work-REF.log   pmref's samples and the phases of its run
Per phase (1 s trimmed at each end) and metric: the exporter's mean of window means, its
highest window max and lowest window min; pmref's mean, max and min over its samples; the
difference of the means in points of a ratio. Out-of-range values on either side are counted.
"""
import re, sys

logdir, ecase, rcase = sys.argv[1:4]
METRICS = [  # (exporter family stem, pmref column)
    ("cupti_graphics_engine_active", "FE_B.TriageCompute.gr__cycles_active.sum.pct_of_peak_sustained_elapsed"),
    ("cupti_sm_active", "TPC.TriageCompute.sm__cycles_active.avg.pct_of_peak_sustained_elapsed"),
    ("cupti_sm_occupancy", "TPC.TriageCompute.tpc__warps_active_realtime.avg.pct_of_peak_sustained_elapsed"),
    ("cupti_tensor_pipe_active", "TPC.TriageCompute.sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed"),
    ("cupti_dram_active", "dram__cycles_active.avg.pct_of_peak_sustained_elapsed"),
    ("cupti_fp32_pipe_active", "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_elapsed"),
]

def phases(path):
    out, starts = [], {}
    for line in open(path):
        m = re.match(r"phase (\w+) (start|end) ([0-9.]+)", line)
        if not m:
            continue
        name, what, t = m.group(1), m.group(2), float(m.group(3))
        if what == "start":
            starts[name] = t
        else:
            out.append((name, starts.pop(name), t))
    return out

def scrapes(path):
    out, t, cur = [], None, {}
    for line in open(path):
        if line.startswith("# t "):
            if t is not None:
                out.append((t, cur))
            t, cur = float(line.split()[2]), {}
            continue
        name, _, val = line.rpartition(" ")
        cur[name.split("{")[0]] = float(val)
    if t is not None:
        out.append((t, cur))
    return out

ref_rows, cols = [], None
for line in open(f"{logdir}/{rcase}.tsv"):
    if line.startswith("#"):
        continue
    f = line.rstrip("\n").split("\t")
    if cols is None:
        cols = f
        continue
    ref_rows.append(f)
ex = scrapes(f"{logdir}/pmc-scrapes-{ecase}.txt")
eph = phases(f"{logdir}/pmc-work-{ecase}.log")
rph = phases(f"{logdir}/pmc-work-{rcase}.log")
worst = 0.0
print(f"{'phase':9} {'metric':26} {'exp mean':>9} {'ref mean':>9} {'diff pt':>8} {'exp max':>8} {'ref max':>8} {'exp min':>8} {'ref min':>8}")
for (pname, e0, e1), (_, r0, r1) in zip(eph, rph):
    win = [v for t, v in ex if e0 + 1.5 <= t <= e1 - 0.5]  # the 1 s window lies inside the phase
    for stem, col in METRICS:
        k = cols.index(col)
        rv = [float(r[k]) / 100 for r in ref_rows if r0 + 1 <= int(r[5]) / 1e9 <= r1 - 1]
        em = [v[stem + "_ratio"] for v in win if stem + "_ratio" in v]
        emax = [v[stem + "_max_ratio"] for v in win if stem + "_max_ratio" in v]
        emin = [v[stem + "_min_ratio"] for v in win if stem + "_min_ratio" in v]
        if not rv or not em:
            continue
        d = sum(em) / len(em) - sum(rv) / len(rv)
        worst = max(worst, abs(d))
        print(f"{pname:9} {stem:26} {sum(em)/len(em):9.4f} {sum(rv)/len(rv):9.4f} {d*100:+8.2f} {max(emax):8.4f} {max(rv):8.4f} {min(emin):8.4f} {min(rv):8.4f}")
ex_over = sum(1 for _, v in ex for n, x in v.items() if n.endswith("_ratio") and (x > 1.0 or x < 0))
ref_over = sum(1 for r in ref_rows if any("pct_of_peak" in cols[k] and float(r[k]) > 100.0001 for k in range(7, len(cols))))
print(f"worst |mean difference| {worst*100:.2f} points; exporter ratios outside [0, 1] in scrapes: {ex_over}; pmref samples above 100 %: {ref_over}")
