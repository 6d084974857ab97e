#!/usr/bin/env python3
"""Offline check of per-sample ownership from the GPU's context-switch counter (issue 21).

Time-slicing gives each context turns of about 2 ms (H100, run AM); every switch costs about
250,000 cycles of FE_A.TriageCompute.gpu__gr_cycles_active_cmd_ctxsw (run AN), so the 1 ms PM
samples without switch cycles are owned by one context, and with two contexts on the GPU the
owner alternates at every switch. Segments whose traced process has no kernel running cannot
be its own: they anchor the alternation's phase. This prototype assigns each sample's DRAM read
bytes to the traced process or to the others that way and compares them with the bytes each
process knows it read.

usage: attrib_ctxsw.py DUMP TRUTH_TRACED.json TRUTH_OTHER.json TRACED_POD [CTXSW_MIN] [W] [CYCLES_PER_SWITCH]
DUMP is `go run ./scripts/gpu/recfilter -dump REC` of a stage attrib_record recording made with
ATTR_METRICS=dram__bytes_read.sum,dram__bytes_write.sum,TPC...sm__cycles_active...,FE_A.TriageCompute.gpu__gr_cycles_active_cmd_ctxsw.sum
(values in that order)."""
import bisect
import json
import sys


def known_bytes(path):
    j = json.load(open(path))
    return sum(k['bytes'] for k in j['kernels'].values()) + j.get('calibration_bytes', 0)


def main():
    dump, ta, tb, pod = sys.argv[1:5]
    thr = float(sys.argv[5]) if len(sys.argv) > 5 else 50000
    W = int(sys.argv[6]) if len(sys.argv) > 6 else 4
    per_switch = float(sys.argv[7]) if len(sys.argv) > 7 else 250000
    S, K = [], []
    for line in open(dump):
        f = line.split()
        if f[0] == 'S':
            S.append((int(f[1]), int(f[2]), [float(x) for x in f[3:]]))
        elif f[0] == 'K' and f[1] == pod:
            K.append((int(f[2]), int(f[3])))
    merged = []
    for s, e in sorted(K):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    starts = [m[0] for m in merged]

    def coverage(lo, hi):  # the traced process's kernel time in [lo, hi), as a fraction
        i, c = max(bisect.bisect_right(starts, lo) - 1, 0), 0
        while i < len(merged) and merged[i][0] < hi:
            c += max(0, min(hi, merged[i][1]) - max(lo, merged[i][0]))
            i += 1
        return c / (hi - lo)

    sw = [s[2][3] > thr for s in S]
    cov = [coverage(s[0], s[1]) for s in S]
    byt = [s[2][0] for s in S]
    # Segments: runs of samples without switch cycles, and runs with them (markers).
    segs, cur = [], []
    for i, x in enumerate(sw):
        if cur and sw[cur[0]] != x:
            segs.append(cur)
            cur = []
        cur.append(i)
    if cur:
        segs.append(cur)
    # Parity of each owned segment: switches before it (a marker may hold more than one).
    par, n = {}, 0
    for k, sg in enumerate(segs):
        if sw[sg[0]]:
            n += max(1, round(sum(S[i][2][3] for i in sg) / per_switch))
        else:
            par[k] = n % 2
    body = [k for k in par]
    anchors = []  # (position in body, parity that is not the traced process's)
    for bi, k in enumerate(body):
        c = sum(cov[i] for i in segs[k]) / len(segs[k])
        if c < 0.2 and sum(byt[i] for i in segs[k]) > 0:
            anchors.append((bi, par[k]))
    pos = [a[0] for a in anchors]
    a_bytes = b_bytes = 0.0
    for bi, k in enumerate(body):
        j = bisect.bisect_left(pos, bi)
        v = {0: 0.0, 1: 0.0}
        for x in range(max(0, j - W), min(len(anchors), j + W)):
            v[anchors[x][1]] += 1.0 / (1 + abs(anchors[x][0] - bi))
        mine = 1 if v[0] > v[1] else 0
        for i in segs[k]:
            if cov[i] > 0 and par[k] == mine:
                a_bytes += byt[i]
            else:
                b_bytes += byt[i]
    for sg in segs:  # samples with a switch: half each, the traced part at most its coverage
        if sw[sg[0]]:
            for i in sg:
                a_bytes += byt[i] * 0.5 * cov[i]
                b_bytes += byt[i] * (1 - 0.5 * cov[i])
    A, B = known_bytes(ta), known_bytes(tb)
    print(f"samples {len(S)}, with switch cycles {sum(sw)}, anchors {len(anchors)}: traced {100 * (a_bytes / A - 1):+.2f} %, "
          f"others {100 * (b_bytes / B - 1):+.2f} % (device {100 * ((a_bytes + b_bytes) / (A + B) - 1):+.2f} %)")


main()
