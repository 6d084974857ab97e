#!/usr/bin/env python3
"""Checks a scrape of an exporter with attribution on (stage attrib of validate.sh).

usage: attrib_check.py SCRAPE [INTERVAL_S]

Prints, per GPU: conservation (attributed parts against the device totals; the attributed side
trails by the lag, so it is at most slightly below), the traced/idle/untraced split, late and
dropped records, and the utilisation of the top kernels (tensor pipe, SM active, DRAM and PCIe
bytes per second of kernel time)."""
import re
import sys

from exposition import read, total


def main():
    fams = read(sys.argv[1])
    gpus = sorted({l['gpu'] for l, _ in fams.get('cupti_attribution_seconds_total', [])})
    for gpu in gpus:
        lag = total(fams, 'cupti_attribution_lag_seconds', gpu=gpu)
        kinds = {k: total(fams, 'cupti_attribution_seconds_total', gpu=gpu, kind=k) for k in ('traced', 'idle', 'untraced')}
        sampled = total(fams, 'cupti_kernel_sampled_seconds_total', gpu=gpu)
        print(f"attrib gpu {gpu}: lag {lag:.3f} s; seconds traced {kinds['traced']:.3f} idle {kinds['idle']:.3f} "
              f"untraced {kinds['untraced']:.3f}; kernel sampled {sampled:.3f} (must equal their sum)")
        # conservation of every byte counter: attributed (frontier) vs device (newest sample)
        for fam in sorted(fams):
            m = re.match(r'cupti_kernel_(.+)_total$', fam)
            if not m or fam == 'cupti_kernel_sampled_seconds_total' or fam.endswith('_seconds_total') or fam == 'cupti_kernel_gpu_seconds_total':
                continue
            dev = 'cupti_' + m.group(1) + '_total'
            for direction in sorted({l.get('direction', '') for l, _ in fams[fam]}):
                sel = {'gpu': gpu}
                if direction:
                    sel['direction'] = direction
                a, d = total(fams, fam, **sel), total(fams, dev, **sel)
                if d > 0:
                    print(f"attrib gpu {gpu}: {fam}{{{direction}}} attributed {a:.4g} device {d:.4g} ratio {a / d:.4f}")
        join = total(fams, 'cupti_attribution_join_seconds_total', gpu=gpu)
        print(f"attrib gpu {gpu}: join cost {join:.3f} s of CPU wall time for {sampled:.1f} s attributed ({100 * join / max(sampled, 1e-9):.2f} % of a core)")
        late = total(fams, 'cupti_attribution_late_records_total', gpu=gpu)
        print(f"attrib gpu {gpu}: late records {late:.0f}, late seconds {total(fams, 'cupti_attribution_late_seconds_total', gpu=gpu):.4f}, "
              f"pending {total(fams, 'cupti_attribution_pending_records', gpu=gpu):.0f}")
        # top kernels by sampled time
        ks = sorted(((v, l['kernel']) for l, v in fams.get('cupti_kernel_sampled_seconds_total', []) if l['gpu'] == gpu), reverse=True)[:8]
        for secs, k in ks:
            if secs <= 0:
                continue
            parts = []
            for stem in ('tensor_pipe_active', 'sm_active', 'dram_active'):
                a = total(fams, f'cupti_kernel_{stem}_seconds_total', gpu=gpu, kernel=k)
                parts.append(f"{stem} {a / secs:.3f}")
            for fam in ('cupti_kernel_dram_read_bytes_total', 'cupti_kernel_dram_write_bytes_total', 'cupti_kernel_pcie_bytes_total', 'cupti_kernel_nvlink_bytes_total'):
                for direction in sorted({l.get('direction', '') for l, _ in fams.get(fam, [])}):
                    sel = {'gpu': gpu, 'kernel': k}
                    if direction:
                        sel['direction'] = direction
                    b = total(fams, fam, **sel)
                    if b:
                        parts.append(f"{fam[13:-6]}{'/' + direction if direction else ''} {b / secs / 1e9:.2f} GB/s")
            print(f"attrib gpu {gpu}: kernel {k[:60]!r} {secs:.3f} s: " + ', '.join(parts))
    for l, v in fams.get('cupti_attribution_dropped_records_total', []):
        if v:
            print(f"attrib dropped records {l['reason']}: {v:.0f}")
    for l, v in fams.get('cupti_attribution_bad_coverage_spans_total', []):
        if v:
            print(f"attrib bad coverage spans {l['reason']}: {v:.0f}")


if __name__ == '__main__':
    main()
