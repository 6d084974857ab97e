"""Summarises stage overhead (stages_issue11.sh): for each configuration, the matmul and copy
throughput of every round as a ratio to the exporter-off run of the same round (rounds are
interleaved, so each ratio compares neighbours in time), with the mean, min and max over rounds,
the exporter's CPU and the mean SM / memory clocks during the run.

usage: overhead_compare.py LOGDIR
"""
import glob
import os
import re
import statistics
import sys


def read(path):
    out = {}
    for line in open(path):
        f = line.split()
        if len(f) == 2 and f[0] in ("mm_tflops", "copy_gbps", "cpu_pct", "sm_mhz", "mem_mhz", "mm_power_w", "mm_power_capped"):
            out[f[0]] = float(f[1])
    return out


def main():
    d = sys.argv[1]
    runs = {}  # (config, round) -> figures
    for p in glob.glob(os.path.join(d, "overhead-*-r*.txt")):
        m = re.match(r"overhead-(.+)-r(\d+)\.txt$", os.path.basename(p))
        if m:
            runs[(m.group(1), int(m.group(2)))] = read(p)
    configs = sorted({c for c, _ in runs if c != "off"})
    rounds = sorted({r for _, r in runs})
    for c in ["off"] + configs:
        for key in ("mm_tflops", "copy_gbps"):
            vals = [runs[(c, r)].get(key) for r in rounds if (c, r) in runs and runs[(c, r)].get(key)]
            if c == "off":
                print(f"overhead off {key}: {' '.join(f'{v:.2f}' for v in vals)}")
                continue
            ratios = [runs[(c, r)][key] / runs[("off", r)][key] - 1 for r in rounds
                      if runs.get((c, r), {}).get(key) and runs.get(("off", r), {}).get(key)]
            if ratios:
                print(f"overhead {c} {key}: mean {statistics.mean(ratios) * 100:+.2f} % "
                      f"(min {min(ratios) * 100:+.2f}, max {max(ratios) * 100:+.2f}, {len(ratios)} rounds)")
        extra = [runs[(c, r)] for r in rounds if (c, r) in runs]
        if extra:
            def avg(k, fmt=".0f"):
                v = [e[k] for e in extra if k in e]
                return f"{statistics.mean(v):{fmt}}" if v else "?"
            print(f"overhead {c}: exporter cpu {avg('cpu_pct')} % of a core, SM clock {avg('sm_mhz')} MHz, memory clock {avg('mem_mhz')} MHz, "
                  f"matmul power {avg('mm_power_w', '.1f')} W (power cap active {avg('mm_power_capped', '.2f')} of the time)")


if __name__ == "__main__":
    main()
