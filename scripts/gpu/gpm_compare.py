"""Analysis of the GPM stages (scripts/gpu/stages_gpm.sh, issue 32).

usage: gpm_compare.py facts LOGDIR | compare LOGDIR
compare: the gpmcompare stage's three exporters (:9477 PM sampling at 1 ms, :9479 and :9481
  gpm.mode=only), scraped at 1.6 s and 16.6 s into each phase (gc-PHASE-a|b-PORT.txt): per
  curated family, PM's 15 s window mean and max against GPM's, the difference in points, and
  the PCIe rates from each one's counters over the same 15 s.
facts: gpmprobe's GPM readings (gpm-100ms.txt: "end_ns span_ms id ret value") against the exporter's
  PM series scraped every second (pm-scrapes.txt), per workload phase (gpmfacts-wl.log): for each
  curated metric, PM's 10 s window mean at the last scrape of the phase and GPM's mean over the
  same 10 s; the 50 and 20 ms probes' freshness on bursts; GPM while ncu profiles; the ids served.
"""
import collections, glob, os, re, statistics, sys

# curated family (as PM serves it) -> the GPM metric ids whose sum the exporter serves for it
# (gpmsource/metrics.go; occupancy is another quantity in GPM and not served, shown for the
# record); PCIe and NVLink are rates of counters
PAIRS = [("cupti_graphics_engine_active_ratio", (1,)), ("cupti_sm_active_ratio", (2,)), ("cupti_sm_occupancy_ratio", (3,)),
         ("cupti_tensor_pipe_active_ratio", (5,)), ("cupti_dram_active_ratio", (10,)), ("cupti_fp64_pipe_active_ratio", (11,)),
         ("cupti_fp32_pipe_active_ratio", (12, 13)), ("cupti_fp16_pipe_active_ratio", (13,))]
RATES = [("cupti_pcie_bytes_total", "rx", 21), ("cupti_pcie_bytes_total", "tx", 20),
         ("cupti_nvlink_bytes_total", "rx", 60), ("cupti_nvlink_bytes_total", "tx", 61)]
MIB = 1 << 20


def probe(path):
    """id -> [(end_s, span_s, ret, value)]; header and summary lines."""
    out, head = collections.defaultdict(list), []
    if not os.path.exists(path):
        return out, head
    for line in open(path):
        if line.startswith("#"):
            head.append(line.strip())
            continue
        p = line.split()
        if len(p) != 5 or not p[2].isdigit():
            continue
        out[int(p[2])].append((int(p[0]) / 1e9, float(p[1]) / 1e3, int(p[3]), float(p[4])))
    return out, head


def phases(path):
    starts, res = {}, []
    for line in open(path):
        m = re.match(r"phase (\S+) (start|end) ([\d.]+)", line)
        if m:
            name, what, t = m.group(1), m.group(2), float(m.group(3))
            if what == "start":
                starts[name] = t
            else:
                res.append((name, starts.get(name, t), t))
        m = re.match(r"# ncu (start|end) ([\d.]+)", line)
        if m:
            starts["ncu"] = float(m.group(2)) if m.group(1) == "start" else starts.get("ncu")
            if m.group(1) == "end":
                res.append(("ncu", starts["ncu"], float(m.group(2))))
    return res


def scrapes(path):
    """[(t, {series line key: value})]"""
    res, cur = [], None
    for line in open(path):
        if line.startswith("# "):
            cur = (float(line[2:]), {})
            res.append(cur)
        elif cur is not None and " " in line:
            k, v = line.rsplit(" ", 1)
            try:
                cur[1][k] = float(v)
            except ValueError:
                pass
    return res


def pick(series, name, direction=None):
    """The sum of the series of a family (of one direction)."""
    vals = [v for k, v in series.items() if k.startswith(name + "{") and (direction is None or f'direction="{direction}"' in k)]
    return sum(vals) if vals else None


def stale_ends(g):
    """End times of the pairs that saw no GPM refresh (DRAM_BW_UTIL NaN, every activity 0)."""
    return {e for (e, s, r, v) in g.get(10, []) if r == 0 and v != v}


def wmean(rows, t0, t1, stale=frozenset(), ids=None):
    """Span-weighted mean and max of the pairs ending in (t0, t1], as the exporter takes them:
    a pair that saw no refresh is merged into the next (its span added to the next pair's)."""
    sel, carry = [], 0.0
    for (e, s, r, v) in rows:
        if e in stale:
            carry += s
            continue
        if r == 0 and t0 < e <= t1 and v == v:
            sel.append((s + carry, v))
        carry = 0.0
    w = sum(s for s, _ in sel)
    return (sum(s * v for s, v in sel) / w, max(v for _, v in sel), len(sel)) if w > 0 else (None, None, 0)


def summed(g, ids):
    """Rows of the sum of ids, pair by pair (the ids' rows share their pairs)."""
    if len(ids) == 1:
        return g.get(ids[0], [])
    cols = [g.get(i, []) for i in ids]
    return [(rs[0][0], rs[0][1], max(r[2] for r in rs), sum(r[3] for r in rs)) for rs in zip(*cols)]


def facts(d):
    g, head = probe(f"{d}/gpm-100ms.txt")
    print("gpm 100 ms probe:", " ".join(head))
    served = sorted(i for i, rows in g.items() if any(r == 0 for (_, _, r, _) in rows))
    refused = {i: rows[0][2] for i, rows in g.items() if i not in served}
    print(f"gpm ids served: {served}; refused (id: nvml return): {refused}")
    sc = scrapes(f"{d}/pm-scrapes.txt")
    st = stale_ends(g)
    print(f"pairs that saw no refresh (merged into the next): {len(st)} of {len(g.get(10, []))}")
    for name, t0, t1 in phases(f"{d}/gpmfacts-wl.log"):
        if name == "ncu":
            parts = []
            for i in (1, 2, 3, 5, 10, 20, 21):
                vals = [v for (e, s, r, v) in g.get(i, []) if r == 0 and t0 < e <= t1]
                if vals:
                    parts.append(f"id{i} mean {statistics.mean(vals):.3g} [{min(vals):.3g}, {max(vals):.3g}] n={len(vals)}")
            errs = collections.Counter(r for i in g for (e, s, r, v) in g[i] if t0 < e <= t1 and r != 0)
            print(f"ncu {t1 - t0:.0f} s: GPM " + "; ".join(parts) + f"; failed reads by return {dict(errs)}")
            continue
        last = [s for s in sc if t0 + 10.5 <= s[0] <= t1]
        if not last:
            print(f"{name}: no scrape in the phase's last part")
            continue
        ts, ser = last[-1]
        first = [s for s in sc if s[0] >= ts - 10.0]
        print(f"-- phase {name} ({t1 - t0:.1f} s), PM window at {ts - t0:.1f} s into it, against GPM over the same 10 s:")
        for fam, i in PAIRS:
            pm = pick(ser, fam)
            pmx = pick(ser, fam.replace("_ratio", "_max_ratio"))
            gm, gx, n = wmean(summed(g, i), ts - 10, ts, st)
            gs = f"{gm / 100:.4f} (max {gx / 100:.4f}, {n} pairs)" if gm is not None else "-"
            ps = f"{pm:.4f} (max {pmx:.4f})" if pm is not None else "-"
            diff = f"  GPM-PM {100 * (gm / 100 - pm):+.2f} points" if pm is not None and gm is not None else ""
            print(f"   {fam:38s} PM {ps:24s} GPM {gs}{diff}")
        for fam, dirn, i in RATES:
            a = first[0]
            pa, pb = pick(a[1], fam, dirn), pick(ser, fam, dirn)
            gm, _, n = wmean(g.get(i, []), a[0], ts, st)
            pr = (pb - pa) / (ts - a[0]) if pa is not None and pb is not None and ts > a[0] else None
            gs = f"{gm * MIB / 1e9:.3f} GB/s" if gm is not None else "-"
            ps = f"{pr / 1e9:.3f} GB/s" if pr is not None else "-"
            print(f"   {fam + ' ' + dirn:38s} PM {ps:24s} GPM {gs}")
        for i in (4, 6, 7, 8, 9):
            gm, _, n = wmean(g.get(i, []), ts - 10, ts, st)
            if gm is not None:
                print(f"   gpm id {i:<33d} GPM {gm / 100:.4f}")
    for per in ("50ms", "20ms"):
        p, h = probe(f"{d}/gpm-{per}.txt")
        for i in (1, 2, 5):
            rows = [r for r in p.get(i, []) if r[2] == 0]
            if len(rows) < 3:
                continue
            vals = [v for (_, _, _, v) in rows]
            same = sum(1 for x, y in zip(vals, vals[1:]) if x == y)
            spans = [s * 1e3 for (_, s, _, _) in rows]
            print(f"gpm {per} on bursts, id {i}: {len(rows)} pairs, span {statistics.median(spans):.1f} ms median, "
                  f"repeated value {same}/{len(vals) - 1}, zeros {sum(1 for v in vals if v == 0)}, "
                  f"min {min(vals):.3g} max {max(vals):.3g}; {' '.join(h[-1:])}")
    for f in sorted(glob.glob(f"{d}/holders-*.txt")):
        print(f"{os.path.basename(f)}:")
        for line in open(f):
            if "cupti-exporter serve" in line and "libs: |" in line:
                continue
            print("   " + line.rstrip()[:300])


def exposition(path):
    """(time, {(name, frozenset(labels)): value}) of a scrape headed by "# <epoch>"."""
    t, out = None, {}
    for line in open(path):
        if line.startswith("# ") and t is None:
            t = float(line[2:])
            continue
        if line.startswith("#") or not line.strip():
            continue
        m = re.match(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$', line.strip())
        if not m:
            continue
        labels = frozenset(re.findall(r'([a-zA-Z_]+)="([^"]*)"', m.group(3) or ""))
        try:
            out[(m.group(1), labels)] = float(m.group(4))
        except ValueError:
            pass
    return t, out


def value(series, name, **want):
    """The sum of the series of name whose labels include want (source "" matches no label)."""
    vals = []
    for (n, labels), v in series.items():
        d = dict(labels)
        if n == name and all(d.get(k, "") == w for k, w in want.items()):
            vals.append(v)
    return sum(vals) if vals else None


GAUGES = ["cupti_graphics_engine_active_ratio", "cupti_sm_active_ratio", "cupti_tensor_pipe_active_ratio",
          "cupti_dram_active_ratio", "cupti_fp64_pipe_active_ratio", "cupti_fp32_pipe_active_ratio", "cupti_sm_occupancy_ratio"]


def compare(d):
    worst = {}
    for ph in ("sgemm", "dgemm", "burst30", "h2d"):
        files = {(w, p): f"{d}/gc-{ph}-{w}-{p}.txt" for w in "ab" for p in (9477, 9479, 9481)}
        if not all(os.path.exists(f) for f in files.values()):
            print(f"-- {ph}: scrapes missing")
            continue
        sc = {k: exposition(f) for k, f in files.items()}
        print(f"-- {ph}: 15 s windows, PM sampling (:9477) against GPM (:9481 bare, :9479 with health)")
        for fam in GAUGES:
            pm = value(sc[("b", 9477)][1], fam, source="")
            pmx = value(sc[("b", 9477)][1], fam.replace("_ratio", "_max_ratio"), source="")
            g = value(sc[("b", 9481)][1], fam, source="gpm")
            gx = value(sc[("b", 9481)][1], fam.replace("_ratio", "_max_ratio"), source="gpm")
            g2 = value(sc[("b", 9479)][1], fam, source="gpm")
            if pm is None or g is None:
                print(f"   {fam:36s} PM {pm} GPM {g} (not served by one of them)")
                continue
            diff = 100 * (g - pm)
            worst[fam] = max(worst.get(fam, 0), abs(diff))
            print(f"   {fam:36s} PM {pm:.4f} (max {pmx:.4f})  GPM {g:.4f} (max {gx:.4f}; {g2:.4f})  {diff:+.2f} points")
        for dirn in ("rx", "tx"):
            rates = []
            for p, src in ((9477, ""), (9481, "gpm")):
                (ta, a), (tb, b) = sc[("a", p)], sc[("b", p)]
                va = value(a, "cupti_pcie_bytes_total", direction=dirn, source=src)
                vb = value(b, "cupti_pcie_bytes_total", direction=dirn, source=src)
                rates.append((vb - va) / (tb - ta) if va is not None and vb is not None else None)
            if None in rates:
                print(f"   pcie {dirn}: {rates}")
                continue
            rel = (rates[1] / rates[0] - 1) * 100 if rates[0] > 0 else float("nan")
            print(f"   cupti_pcie_bytes_total {dirn:18s} PM {rates[0] / 1e9:.3f} GB/s  GPM {rates[1] / 1e9:.3f} GB/s  {rel:+.1f} %")
        src = {dict(l).get("source", "") for (n, l) in sc[("b", 9477)][1] if n == "cupti_sm_active_ratio"}
        print(f"   :9477 serves cupti_sm_active_ratio from source {sorted(src)}")
    print("largest |GPM - PM| over the phases, points: " + ", ".join(f"{k.replace('cupti_', '').replace('_ratio', '')} {v:.2f}" for k, v in worst.items()))


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("facts", "compare"):
        sys.exit(__doc__)
    {"facts": facts, "compare": compare}[sys.argv[1]](sys.argv[2])
