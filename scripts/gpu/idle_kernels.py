"""Idle-release latency workload (scripts/gpu/stages_idle.sh): creates its CUDA context and runs
one matmul (cuBLAS's handle and the lazily loaded kernel: about 85 ms of host time on the first
matmul of a process, run AF of 2026-11-23, which is not GPU work), stays idle for HOLD seconds
(long enough for the exporter to release the GPU again after the new process woke it), then
prints the Unix time (ns, the CUPTI clock on Linux) of the launch of its first kernel after the
hold, as a workload resuming after idle does, and keeps the GPU busy with matmuls for BUSY
seconds. COLD=1 leaves the warm-up matmul out (the first matmul after the hold is the
process's first).

usage: idle_kernels.py HOLD BUSY
"""
import os, sys, time

import torch

hold, busy = float(sys.argv[1]), float(sys.argv[2])
a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)  # context, allocation, fill
if os.environ.get("COLD") != "1":
    b = a @ a  # cuBLAS handle, kernel loaded: the matmul after the hold launches at once
torch.cuda.synchronize()
print(f"context_ready_unix_ns {time.time_ns()}", flush=True)
time.sleep(hold)
t0 = time.time_ns()
b = a @ a
torch.cuda.synchronize()  # how long the first kernel took on a GPU woken from idle
print(f"first_kernel_unix_ns {t0}", flush=True)
print(f"first_kernel_done_unix_ns {time.time_ns()}", flush=True)
end = time.time() + busy
n = 0
while time.time() < end:
    b = a @ a
    n += 1
    if n % 50 == 0:
        torch.cuda.synchronize()
torch.cuda.synchronize()
print(f"done_unix_ns {time.time_ns()} matmuls {n}", flush=True)
