#!/usr/bin/env python3
"""Scores runs of scripts/gpu/share_offline.sh (or the summary lines of stage attrib_share)
against issue 31's targets, side by side: each traced pod within 5 %, the untraced class within
15 %, the tensor-active share given to a pod (or the untraced class) that never uses the tensor
pipe within 1 %. Prints, per case, the worst traced error / untraced error / tensor share of
each file, then per file and per workload set (cases named MODE-t... the tune set, MODE-c...
the check set) the targets missed and the sum of the excess over them.

    scripts/gpu/share_offline.sh DIR > before.txt   # with one build
    scripts/gpu/share_offline.sh DIR > after.txt    # with another
    python3 scripts/gpu/share_score.py before.txt after.txt
"""
import re
import sys

TRACED, UNTRACED, TENSOR = 5.0, 15.0, 1.0


def load(path):
    cases = {}
    for line in open(path):
        if " | " not in line:
            continue
        parts = [p.strip() for p in line.split("|")]
        if len(parts) < 5:
            continue
        traced = [abs(float(x)) for x in re.findall(r"[-+]\d+\.\d+", parts[1])]
        untraced = re.findall(r"[-+]\d+\.\d+", parts[2])
        tensor = re.findall(r"([\d.]+) %", parts[4])
        cases[parts[0]] = (max(traced, default=0.0), abs(float(untraced[0])) if untraced else 0.0,
                           float(tensor[0]) if tensor else 0.0)
    return cases


def score(cases, only=None):
    missed, excess = 0, [0.0, 0.0, 0.0]
    for case, (t, u, ten) in cases.items():
        if only and only not in case:
            continue
        for i, (v, bound) in enumerate(((t, TRACED), (u, UNTRACED), (ten, TENSOR))):
            if v > bound:
                missed += 1
                excess[i] += v - bound
    return missed, excess


def main(paths):
    runs = [load(p) for p in paths]
    for case in runs[0]:
        cells = []
        for r in runs:
            t, u, ten = r.get(case, (float("nan"),) * 3)
            cells.append(f"{t:5.1f}/{u:5.1f}/{ten:5.2f}")
        print(f"{case:<11}", "  ".join(cells))
    for label, only in (("all", None), ("tune", "-t"), ("check", "-c")):
        for path, r in zip(paths, runs):
            missed, (et, eu, ete) = score(r, only)
            print(f"{label:<5} {path}: {missed} targets missed; excess traced {et:.0f}, untraced {eu:.0f}, tensor {ete:.1f} points")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
