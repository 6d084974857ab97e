"""Per GPU and kernel, from a scrape of a finished attribution: sampled seconds, each ratio's
utilisation while the kernel ran (active seconds / sampled seconds) and each byte counter's share
of the device total (kernel="(idle)", "(untraced)" and the copy classes included).
usage: attrib_kernels.py METRICS.txt [MIN_SHARE]"""
import re, sys
from collections import defaultdict

def parse(path):
    for line in open(path):
        m = re.match(r'(cupti_kernel_\w+)\{(.*)\} (\S+)', line)
        if m:
            yield m.group(1), dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2))), float(m.group(3))

def main():
    path = sys.argv[1]; min_share = float(sys.argv[2]) if len(sys.argv) > 2 else 0.001
    sampled = defaultdict(float); active = defaultdict(lambda: defaultdict(float)); byts = defaultdict(lambda: defaultdict(float))
    for name, l, v in parse(path):
        key = (l.get("gpu"), l.get("kernel"))
        if name == "cupti_kernel_sampled_seconds_total":
            sampled[key] += v
        elif name.endswith("_seconds_total") and name not in ("cupti_kernel_gpu_seconds_total",):
            active[key][name[len("cupti_kernel_"):-len("_seconds_total")]] += v
        elif name.endswith("_bytes_total"):
            q = name[len("cupti_kernel_"):-len("_total")] + ("/" + l["direction"] if "direction" in l else "")
            byts[key][q] += v
    tot = defaultdict(float)
    for (gpu, _), qs in byts.items():
        for q, v in qs.items():
            tot[(gpu, q)] += v
    for key in sorted(sampled, key=lambda k: (k[0], -sampled[k])):
        gpu, kernel = key
        if sampled[key] < 1e-3 and all(v < min_share * max(tot[(gpu, q)], 1) for q, v in byts[key].items()):
            continue
        util = " ".join(f"{q}={active[key][q] / sampled[key]:.3f}" for q in sorted(active[key]) if sampled[key] > 0)
        share = " ".join(f"{q}={v / tot[(gpu, q)] * 100:.1f}%" for q, v in sorted(byts[key].items()) if tot[(gpu, q)] > 0)
        print(f"gpu {gpu} {kernel[:60]:60s} sampled {sampled[key]:8.3f} s | {util} | share {share}")

if __name__ == "__main__":
    main()
