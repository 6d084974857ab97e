"""Compares the per-kernel DRAM read bytes the exporter attributed with the bytes the ground-truth
program (attrib_truth.cu) knows it read.

usage: attrib_compare.py METRICS.txt TRUTH.json [TRUTH.json ...] [--gpu 0]
METRICS.txt is a scrape of /metrics after the attribution finished (attrib_offline.sh or live)."""
import json, re, sys

def parse(path):
    series = []
    for line in open(path):
        if line.startswith("#") or not line.strip():
            continue
        m = re.match(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)', line)
        if not m:
            continue
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
        series.append((m.group(1), labels, float(m.group(4))))
    return series

def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    gpu = "0"
    if "--gpu" in sys.argv:
        gpu = sys.argv[sys.argv.index("--gpu") + 1]; args.remove(gpu)
    metrics, truths = args[0], args[1:]
    s = parse(metrics)
    known, launches, ratio = {}, {}, {}
    interval = None
    for t in truths:
        j = json.load(open(t))
        interval = j["interval_us"]
        for k, v in j["kernels"].items():
            known[k] = known.get(k, 0) + v["bytes"]
            launches[k] = launches.get(k, 0) + v["launches"]
            ratio[k] = v.get("ratio")
    got = {}
    for name, l, v in s:
        if name == "cupti_kernel_dram_read_bytes_total" and l.get("gpu") == gpu:
            got[l["kernel"]] = got.get(l["kernel"], 0) + v
    device = sum(v for n, l, v in s if n == "cupti_dram_read_bytes_total" and l.get("gpu") == gpu)
    print(f"interval {interval} us; kernel duration / interval, launches, known GB, attributed GB, error")
    for k in sorted(known, key=lambda k: (ratio.get(k) is None, ratio.get(k) or 0)):
        g = got.get(k, 0.0)
        err = (g - known[k]) / known[k] * 100 if known[k] else float("nan")
        r = "-" if ratio.get(k) is None else f"{ratio[k]:g}"
        extra = f"{g/1e9:10.3f} GB attributed (known 0)" if not known[k] else f"{err:+7.2f} %"
        print(f"  {k:10s} ratio {r:>4s}  launches {launches[k]:7d}  known {known[k]/1e9:10.3f}  got {g/1e9:10.3f}  {extra}")
    others = {k: v for k, v in got.items() if k not in known}
    for k, v in sorted(others.items()):
        print(f"  {k:10s} (not a ground-truth kernel) got {v/1e9:10.3f} GB")
    tot_known, tot_attr = sum(known.values()), sum(got.values())
    print(f"  device total {device/1e9:.3f} GB; known {tot_known/1e9:.3f} GB ({(device-tot_known)/tot_known*100:+.2f} %)")
    print(f"  conservation: sum over kernel labels {tot_attr/1e9:.6f} GB vs device {device/1e9:.6f} GB "
          f"(diff {(tot_attr-device)/max(device,1)*100:+.2e} %)")
    cov = {l.get("kind"): v for n, l, v in s if n == "cupti_attribution_seconds_total" and l.get("gpu") == gpu}
    print(f"  coverage seconds: {cov}")

if __name__ == "__main__":
    main()
