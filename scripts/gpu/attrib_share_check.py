#!/usr/bin/env python3
"""Checks one case of the sharing modes (issue 31; stage attrib_share, and offline the output
of scripts/gpu/sharesim): per-pod DRAM read bytes against what each process read, the untraced
processes' class against what they read together, and the tensor-pipe active seconds given to
processes that never use the tensor pipe.

usage: attrib_share_check.py CASE METRICS MANIFEST [--tsv]
  METRICS   Prometheus text (a scrape of the exporter, or sharesim's output)
  MANIFEST  lines "pod truth.json traced|untraced role" (stages_share.sh writes it)
Prints one line per process and a summary line starting with "CASE |"; with --tsv a
tab-separated row (case, traced errors, untraced error, worst tensor share, uncertain share)."""
import json
import re
import sys
from collections import defaultdict

LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)')
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def read(path):
    out = defaultdict(list)
    for line in open(path):
        if line.startswith('#'):
            continue
        m = LINE.match(line)
        if m:
            out[m.group(1)].append((dict(LABEL.findall(m.group(3) or '')), float(m.group(4))))
    return out


def total(fams, name, **want):
    return sum(v for l, v in fams.get(name, []) if all(l.get(k) == x for k, x in want.items()))


def main():
    case, metrics, manifest = sys.argv[1:4]
    tsv = '--tsv' in sys.argv[4:]
    fams = read(metrics)
    procs = []
    for line in open(manifest):
        f = line.split()
        if len(f) == 4:
            j = json.load(open(f[1]))
            procs.append({'pod': f[0], 'traced': f[2] == 'traced', 'role': f[3],
                          'bytes': sum(k['bytes'] for k in j['kernels'].values()), 'pid': j['pid']})
    dev = total(fams, 'cupti_dram_read_bytes_total', gpu='0')
    attributed = total(fams, 'cupti_kernel_dram_read_bytes_total', gpu='0')
    tensor_all = total(fams, 'cupti_kernel_tensor_pipe_active_seconds_total', gpu='0')
    traced_err, lines = [], []
    tensor_worst = 0.0
    for p in procs:
        if not p['traced']:
            continue
        got = total(fams, 'cupti_pod_dram_read_bytes_total', gpu='0', pod=p['pod'], source='kernel')
        e = 100 * (got / p['bytes'] - 1) if p['bytes'] else float('nan')
        traced_err.append(e)
        ts = total(fams, 'cupti_pod_tensor_pipe_active_seconds_total', gpu='0', pod=p['pod'], source='kernel')
        share = ts / tensor_all if tensor_all else 0.0
        note = ''
        if 'tensor' not in p['role']:
            tensor_worst = max(tensor_worst, share)
            note = f', tensor-active share {100 * share:.2f} % (never uses it)'
        else:
            note = f', tensor-active share {100 * share:.1f} %'
        lines.append(f"{case}: traced {p['pod']} (pid {p['pid']}): {got / 1e9:.1f} GB of {p['bytes'] / 1e9:.1f} known, {e:+.2f} %{note}")
    untr = [p for p in procs if not p['traced']]
    untr_err = None
    if untr:
        known = sum(p['bytes'] for p in untr)
        got = total(fams, 'cupti_kernel_dram_read_bytes_total', gpu='0', kernel='(untraced)')
        untr_err = 100 * (got / known - 1)
        ts = total(fams, 'cupti_kernel_tensor_pipe_active_seconds_total', gpu='0', kernel='(untraced)')
        share = ts / tensor_all if tensor_all else 0.0
        note = f', tensor-active share {100 * share:.1f} %'
        if not any('tensor' in p['role'] for p in untr):
            tensor_worst = max(tensor_worst, share)
            note = f', tensor-active share {100 * share:.2f} % (never uses it)'
        roles = '+'.join(p['role'] for p in untr)
        lines.append(f"{case}: (untraced) [{roles}]: {got / 1e9:.1f} GB of {known / 1e9:.1f} known, {untr_err:+.2f} %{note}")
    known_all = sum(p['bytes'] for p in procs)
    idle_b = total(fams, 'cupti_kernel_dram_read_bytes_total', gpu='0', kernel='(idle)')
    uncertain = total(fams, 'cupti_attribution_uncertain_ratio', gpu='0')
    present = total(fams, 'cupti_attribution_untraced_present_ratio', gpu='0')
    for l in lines:
        print(l)
    print(f"{case}: device DRAM read {dev / 1e9:.1f} GB (known {known_all / 1e9:.1f}, {100 * (dev / max(known_all, 1) - 1):+.2f} %); "
          f"conservation {attributed / max(dev, 1):.6f}; (idle) {idle_b / 1e9:.2f} GB; untraced-present {present:.2f}; uncertain {uncertain:.2f}")
    worst_t = max((abs(e) for e in traced_err), default=float('nan'))
    te = ', '.join(f'{e:+.1f}' for e in traced_err) or '-'
    ue = f'{untr_err:+.1f}' if untr_err is not None else '-'
    print(f"{case} | traced {te} % | untraced {ue} % | worst traced {worst_t:.1f} % | tensor to non-tensor {100 * tensor_worst:.2f} % | uncertain {uncertain:.2f}")
    if tsv:
        print('\t'.join([case, te, ue, f'{100 * tensor_worst:.2f}', f'{uncertain:.2f}']))


if __name__ == '__main__':
    main()
