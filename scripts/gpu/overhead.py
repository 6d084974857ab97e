"""Workload overhead probe (issue 11, stage overhead in stages_issue11.sh): a bf16 matmul loop
and a device-to-device copy loop, each for SECS seconds, timed with CUDA events after a warm-up.
Prints one line per phase: "mm_tflops X" and "copy_gbps Y", and the matmul's timed window in Unix
seconds ("mm_window START END", to read the power logged meanwhile).

usage: overhead.py SECS
"""
import sys
import time

import torch


def timed(secs, step, per_iter):
    """Runs step until secs have passed (after 20 warm-up calls); returns per_iter units a second."""
    for _ in range(20):
        step()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    n, t_end = 0, time.time() + secs
    start.record()
    while time.time() < t_end:
        for _ in range(10):
            step()
        n += 10
        torch.cuda.synchronize()  # keeps the launch queue short, so the time check is honest
    end.record()
    torch.cuda.synchronize()
    return n * per_iter / (start.elapsed_time(end) / 1e3)


def main():
    secs = float(sys.argv[1])
    k = 8192
    a = torch.randn(k, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, k, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(k, k, device="cuda", dtype=torch.bfloat16)
    t0 = time.time()
    tflops = timed(secs, lambda: torch.matmul(a, b, out=c), 2 * k**3) / 1e12
    print(f"mm_tflops {tflops:.3f}\nmm_window {t0:.3f} {time.time():.3f}", flush=True)
    del a, b, c
    n = 1 << 30  # 1 GiB each way
    src = torch.empty(n, device="cuda", dtype=torch.uint8)
    dst = torch.empty(n, device="cuda", dtype=torch.uint8)
    print(f"copy_gbps {timed(secs, lambda: dst.copy_(src), 2 * n) / 1e9:.2f}", flush=True)  # read + write


if __name__ == "__main__":
    main()
