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
  seq       phases given as NAME:SECONDS,... (the SECONDS argument): any of mm, fp16, tiny, copy, idle,
            and fp32 / fp64 (element-wise multiply-adds), d2d (1 GiB device-to-device copies),
            h2d (pinned host-to-device copies only), burst (bf16 matmuls 50 ms on, 50 ms off),
            burst30 (4096^3 bf16 matmuls 30 ms on, 70 ms off), sgemm (fp32 4096^3, TF32 off),
            dgemm (fp64 4096^3), d2dsmall (64 MiB device-to-device copies)
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
    secs = float(sys.argv[2]) if len(sys.argv) > 2 and mode != "seq" else 5.0
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

    def elementwise(dtype, n=4 << 20, reps=50):
        def run(s):
            h = torch.randn(n, device=dev, dtype=dtype)
            m = torch.full_like(h, 0.999)
            t0, k = now(), 0
            while now() - t0 < s:
                for _ in range(reps):
                    h.mul_(m).add_(m)
                torch.cuda.synchronize(); k += 1
            return k
        return run

    def d2d_of(nbytes):
        def run(s):
            src = torch.empty(nbytes, device=dev, dtype=torch.uint8)
            dst = torch.empty_like(src)
            t0, k = now(), 0
            while now() - t0 < s:
                dst.copy_(src); torch.cuda.synchronize(); k += 1
            return k
        return run

    def h2d(s):
        d = torch.empty_like(pinned, device=dev)
        t0, k = now(), 0
        while now() - t0 < s:
            d.copy_(pinned, non_blocking=True); torch.cuda.synchronize(); k += 1
        return k

    def burst_of(x, y, on, off):
        def run(s):
            t0, k = now(), 0
            while now() - t0 < s:
                t1 = now()
                while now() - t1 < on:
                    x @ y; torch.cuda.synchronize(); k += 1
                time.sleep(off)
            return k
        return run

    def gemm(dtype, n=4096):
        def run(s):
            torch.backends.cuda.matmul.allow_tf32 = False
            x = torch.randn(n, n, device=dev, dtype=dtype)
            y = torch.randn_like(x)
            t0, k = now(), 0
            while now() - t0 < s:
                x @ y; torch.cuda.synchronize(); k += 1
            return k
        return run

    if mode == "seq":
        a4 = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
        fns = {"mm": mm, "fp16": fp16, "tiny": tiny, "copy": copy, "idle": idle,
               "fp32": elementwise(torch.float32), "fp64": elementwise(torch.float64),
               "d2d": d2d_of(1 << 30), "d2dsmall": d2d_of(64 << 20), "h2d": h2d,
               "burst": burst_of(a, b, 0.05, 0.05), "burst30": burst_of(a4, a4, 0.03, 0.07),
               "sgemm": gemm(torch.float32), "dgemm": gemm(torch.float64)}
        for item in sys.argv[2].split(","):
            name, s = item.split(":")
            phase(name, float(s), fns[name])
        return
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
