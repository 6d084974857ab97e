"""Reads a Prometheus text exposition (a scrape of the exporter, or sharesim's output) for the
check scripts of scripts/gpu: read() gives, per family, its samples as (labels, value);
total() sums the samples of a family whose labels match."""
import re
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
