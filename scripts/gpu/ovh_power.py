"""The power of the matmul phase of one overhead run (stage overhead, stages_issue11.sh): reads
the run's output (its "mm_window START END" line) and the nvidia-smi log taken meanwhile (lines
"UNIX, sm MHz, mem MHz, power W, sw power cap Active|Not Active") and prints "mm_power_w" (mean
draw) and "mm_power_capped" (share of readings with the software power cap active).

usage: ovh_power.py RUN_OUTPUT SMI_LOG
"""
import sys


def main(run, smi):
    win = [l.split()[1:3] for l in open(run) if l.startswith("mm_window ")]
    if not win:
        return
    t0, t1 = map(float, win[0])
    watts, capped = [], []
    for line in open(smi):
        f = [x.strip() for x in line.split(",")]
        try:
            t, w = float(f[0]), float(f[3])
        except (ValueError, IndexError):
            continue
        if t0 + 1 <= t <= t1:  # past the warm-up
            watts.append(w)
            capped.append(f[4].startswith("Active"))
    if watts:
        print(f"mm_power_w {sum(watts) / len(watts):.1f}")
        print(f"mm_power_capped {sum(capped) / len(capped):.2f}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
