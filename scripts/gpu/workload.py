"""PyTorch workloads for the GPU validation scripts.

usage: workload.py MODE [SECONDS]
  mm        bf16 8192^3 matmuls (tensor pipe busy)
  fp16      element-wise fp16 multiply-adds on 4 Mi halves, L2-resident (FP16 FMA pipe, no tensor cores)
  tiny      a loop of tiny kernels; prints us per launch
  copy      pinned and pageable host<->device copies
  idle      sleep
  phases    idle 4s, mm 8s, idle 4s, copy 6s, tiny 6s, idle 4s (prints phase boundaries, epoch seconds)
  loader    a DataLoader with the fork start method and 4 workers, feeding a GPU
  profiler  tiny kernels under torch.profiler (another CUPTI user in the process)
  p2p       N (the SECONDS argument) round trips of a 64 MiB tensor between GPU 0 and GPU 1
Prints one summary line per phase with kernel/copy counts the script itself launched.
"""
import sys, time, os

def now():
    return time.time()

def phase(name, secs, fn):
    t0 = now()
    print(f"phase {name} start {t0:.3f}", flush=True)
    n = fn(secs)
    t1 = now()
    print(f"phase {name} end {t1:.3f} iters {n}", flush=True)
    return n

def main():
    mode = sys.argv[1]
    secs = float(sys.argv[2]) if len(sys.argv) > 2 else 5.0
    import torch
    dev = "cuda"
    a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    b = torch.randn_like(a)
    x = torch.zeros(256, device=dev)
    pinned = torch.randn(16 << 20, dtype=torch.float32).pin_memory()
    pageable = torch.randn(16 << 20, dtype=torch.float32)
    torch.cuda.synchronize()

    def mm(s):
        t0, n = now(), 0
        while now() - t0 < s:
            for _ in range(20):
                a @ b
            torch.cuda.synchronize(); n += 1
        return n

    def tiny(s):
        t0, n = now(), 0
        while now() - t0 < s:
            for _ in range(1000):
                x.add_(1.0)
            torch.cuda.synchronize(); n += 1
        dt = now() - t0
        print(f"tiny: {n*1000} launches {dt/(n*1000)*1e6:.3f} us/launch", flush=True)
        return n * 1000

    def copy(s):
        t0, n = now(), 0
        while now() - t0 < s:
            d = pinned.to(dev, non_blocking=True); pinned.copy_(d, non_blocking=True)
            d2 = pageable.to(dev); pageable.copy_(d2)
            torch.cuda.synchronize(); n += 1
        return n

    def idle(s):
        time.sleep(s); return 0

    def fp16(s):
        h = torch.randn(4 << 20, device=dev, dtype=torch.float16)
        m = torch.full_like(h, 0.999)
        t0, n = now(), 0
        while now() - t0 < s:
            for _ in range(50):
                h.mul_(m).add_(m)  # hfma-class work on the FP16 pipe
            torch.cuda.synchronize(); n += 1
        return n

    if mode == "mm": phase("mm", secs, mm)
    elif mode == "tiny": phase("tiny", secs, tiny)
    elif mode == "copy": phase("copy", secs, copy)
    elif mode == "idle": phase("idle", secs, idle)
    elif mode == "fp16": phase("fp16", secs, fp16)
    elif mode == "phases":
        for name, s, fn in [("idle", 4, idle), ("mm", 8, mm), ("idle", 4, idle), ("copy", 6, copy), ("tiny", 6, tiny), ("idle", 4, idle)]:
            phase(name, s * secs / 5.0 if secs != 5.0 else s, fn)
    elif mode == "fixed":
        # deterministic counts for comparing tracers: 20000 tiny kernels, 40 matmuls,
        # 50 pinned + 50 pageable round trips, 100 memsets
        for _ in range(20):
            for _ in range(1000):
                x.add_(1.0)
            torch.cuda.synchronize()
        for _ in range(40):
            a @ b
        for _ in range(50):
            d = pinned.to(dev, non_blocking=True); pinned.copy_(d, non_blocking=True)
            d2 = pageable.to(dev); pageable.copy_(d2)
        for _ in range(100):
            x.zero_()
        torch.cuda.synchronize()
        print("fixed: done", flush=True)
    elif mode == "loader":
        import torch.multiprocessing as mp
        from torch.utils.data import DataLoader, TensorDataset
        ds = TensorDataset(torch.randn(4096, 256))
        dl = DataLoader(ds, batch_size=64, num_workers=4, multiprocessing_context=mp.get_context("fork"))
        n = 0
        for epoch in range(3):
            for (batch,) in dl:
                (batch.to(dev) * 2).sum().item(); n += 1
        print(f"loader: {n} batches ok", flush=True)
    elif mode == "profiler":
        from torch.profiler import profile, ProfilerActivity
        with profile(activities=[ProfilerActivity.CUDA]) as p:
            tiny(secs)
        print(f"profiler: {len(p.events())} events ok", flush=True)
    elif mode == "p2p":
        n = int(secs)
        y0 = torch.randn(16 << 20, device="cuda:0")
        y1 = torch.empty(16 << 20, device="cuda:1")
        for _ in range(n):
            y1.copy_(y0); y0.copy_(y1)
        torch.cuda.synchronize("cuda:0"); torch.cuda.synchronize("cuda:1")
        print(f"p2p: {2 * n} copies, peer access {torch.cuda.can_device_access_peer(0, 1)}", flush=True)
    else:
        sys.exit(f"unknown mode {mode}")

if __name__ == "__main__":
    main()
