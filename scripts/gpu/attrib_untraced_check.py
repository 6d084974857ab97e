#!/usr/bin/env python3
"""Checks one run of stage attrib_untraced (scripts/gpu/stages_untraced.sh): processes of
attrib_truth.cu time-slicing GPU 0, some traced (injected, POD_NAME set), some not; the
exporter's per-pod and (untraced) DRAM read bytes against the bytes each process knows it read.

usage: attrib_untraced_check.py RUN SCRAPE PMON traced:POD=TRUTH.json ... untraced:TRUTH.json ...

PMON is `nvidia-smi pmon -s u` output of the run (NVML's per-process SM %, the same data the
exporter reads), used for the NVML shares and, with only untraced processes, the split by time
shares. Prints one compact line per quantity, prefixed with RUN."""
import json
import sys
from collections import defaultdict

from exposition import read, total


def truth(path):
    j = json.load(open(path))
    return sum(k['bytes'] for k in j['kernels'].values()) + j.get('calibration_bytes', 0), j.get('pid')


def pmon(path):
    sm = defaultdict(list)
    try:
        for line in open(path):
            f = line.split()
            if not f or f[0].startswith('#') or len(f) < 4:
                continue
            if f[0] == '0' and f[1].isdigit():
                sm[int(f[1])].append(0.0 if f[3] == '-' else float(f[3]))
    except OSError:
        pass
    return sm


def main():
    run, scrape, pm = sys.argv[1:4]
    fams = read(scrape)
    sm = pmon(pm)
    n = max((len(v) for v in sm.values()), default=0)
    share = {pid: sum(v) / max(n, 1) / 100 for pid, v in sm.items()}  # mean over the run's seconds
    dev = total(fams, 'cupti_dram_read_bytes_total', gpu='0')
    attributed = total(fams, 'cupti_kernel_dram_read_bytes_total', gpu='0')
    known_all, untraced_known, untraced = 0.0, 0.0, []
    res = []
    for arg in sys.argv[4:]:
        kind, rest = arg.split(':', 1)
        if kind == 'traced':
            pod, path = rest.split('=', 1)
            t, pid = truth(path)
            got = total(fams, 'cupti_pod_dram_read_bytes_total', gpu='0', pod=pod, source='kernel')
            res.append(f"{run}: traced pod {pod} (pid {pid}, NVML share {share.get(pid, 0):.2f}): {got/1e9:.1f} GB of {t/1e9:.1f} known, error {100*(got/t-1):+.2f} %")
        else:
            t, pid = truth(rest)
            untraced.append((pid, t))
            untraced_known += t
            res.append(f"{run}: untraced pid {pid} (NVML share {share.get(pid, 0):.2f}): {t/1e9:.1f} GB known")
        known_all += t
    for r in res:
        print(r)
    if untraced:
        u = total(fams, 'cupti_kernel_dram_read_bytes_total', gpu='0', kernel='(untraced)')
        print(f"{run}: kernel=(untraced) {u/1e9:.1f} GB of the untraced processes' {untraced_known/1e9:.1f} known, error {100*(u/untraced_known-1):+.2f} %")
        if len(untraced) > 1:  # no pods here: the split by NVML time shares, as the exporter makes it for pods
            s = sum(share.get(pid, 0) for pid, _ in untraced)
            for pid, t in untraced:
                if s > 0:
                    est = share.get(pid, 0) / s * u
                    print(f"{run}: pid {pid} by NVML time share {share.get(pid, 0)/s:.3f}: {est/1e9:.1f} GB of {t/1e9:.1f} known, error {100*(est/t-1):+.2f} %")
    idle_s = total(fams, 'cupti_kernel_sampled_seconds_total', gpu='0', kernel='(idle)')
    idle_b = total(fams, 'cupti_kernel_dram_read_bytes_total', gpu='0', kernel='(idle)')
    kinds = {k: total(fams, 'cupti_attribution_seconds_total', gpu='0', kind=k) for k in ('traced', 'idle', 'untraced')}
    present = total(fams, 'cupti_attribution_untraced_present_ratio', gpu='0')
    print(f"{run}: device DRAM read {dev/1e9:.1f} GB (known {known_all/1e9:.1f}, {100*(dev/max(known_all,1)-1):+.2f} %); "
          f"conservation attributed/device {attributed/max(dev,1):.6f}; (idle) {idle_s:.2f} s {idle_b/1e9:.2f} GB; "
          f"seconds traced {kinds['traced']:.1f} idle {kinds['idle']:.1f} untraced {kinds['untraced']:.1f}; untraced-present {present:.2f}")
    drops = {l['reason']: v for l, v in fams.get('cupti_attribution_dropped_process_observations_total', []) if v}
    late = total(fams, 'cupti_attribution_late_records_total', gpu='0')
    print(f"{run}: late records {late:.0f}; dropped NVML observations {drops or 0}")


if __name__ == '__main__':
    main()
