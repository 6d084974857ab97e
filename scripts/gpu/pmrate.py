"""One line of the pmthroughput stage: delivered + lost samples against the configured rate,
and CPU per sample against the time inside CUPTI calls, between two scrapes of one exporter.

usage: pmrate.py LABEL INTERVAL_S BEFORE.txt AFTER.txt WALL_S PROCESS_CPU_S
The time line is the newest sample's end in each scrape (cupti_pm_last_sample_timestamp_seconds),
so the comparison does not depend on when the scrapes happened within a decode period.
"""
import re, sys
from collections import defaultdict

def parse(path):
    out = defaultdict(float)
    for line in open(path):
        if line.startswith("#") or not line.strip():
            continue
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?\s+(\S+)', line)
        if not m:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(3) or ""))
        key = m.group(1)
        for k in ("reason", "call"):
            if k in labels:
                key += f"|{labels[k]}"
        try:
            out[key] += float(m.group(4))
        except ValueError:
            pass
    return out

label, iv, before, after, wall, cpu = sys.argv[1], float(sys.argv[2]), parse(sys.argv[3]), parse(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6])
d = lambda k: after.get(k, 0.0) - before.get(k, 0.0)
span = d("cupti_pm_last_sample_timestamp_seconds")
delivered = d("cupti_pm_samples_total")
lost = {k.split("|")[1]: d(k) for k in after if k.startswith("cupti_pm_samples_lost_total|") and d(k) > 0}
eff_iv = after.get("cupti_pm_sampling_interval_seconds", iv) or iv
want = span / eff_iv if span > 0 else 0
got = delivered + sum(lost.values())
calls = {c: d(f"cupti_pm_cupti_call_seconds_total|{c}") for c in ("decode", "sample_info", "evaluate", "reset", "session")}
cupti = sum(v for c, v in calls.items() if c != "session")
thread = d("cupti_pm_decode_thread_cpu_seconds_total")
us = lambda s: s * 1e6 / max(delivered, 1)
print(f"{label}: {delivered / max(span, 1e-9):.0f}/s delivered of {1 / iv:.0f}/s asked (effective interval {eff_iv * 1e6:.0f} us); "
      f"delivered+lost {got:.0f} vs rate x time {want:.0f} = {got / max(want, 1):.4f}; lost {', '.join(f'{k} {v:.0f}' for k, v in sorted(lost.items())) or 'none'}; "
      f"CPU {us(cpu):.1f} us/sample vs CUPTI calls {us(cupti):.1f} (decode {us(calls['decode']):.1f}, info {us(calls['sample_info']):.1f}, "
      f"evaluate {us(calls['evaluate']):.1f}, reset {us(calls['reset']):.1f}) = {cpu / max(cupti, 1e-9):.3f}x; session {us(calls['session']):.1f}; "
      f"decode thread(s) {us(thread):.1f}; core share {cpu / max(wall, 1e-9) * 100:.1f} %; "
      f"failures image_full {d('cupti_pm_decode_failures_total|image_full'):.0f} overflow {d('cupti_pm_decode_failures_total|overflow'):.0f} decode_error {d('cupti_pm_decode_failures_total|decode_error'):.0f}")
