"""Each rank (one per visible GPU) alternates bf16 8192^3 matmuls and a 256 MiB NCCL all-reduce for
SECONDS: the two-GPU attribution workload (tensor pipe busy in one kernel, NVLink in the other).
Every rank runs the same number of rounds (ncclrounds), so NCCL's teardown cannot hang."""
import os, sys, time
import torch, torch.distributed as dist, torch.multiprocessing as mp
from ncclrounds import ring_bytes, rounds

def run(rank, world, secs):
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1"); os.environ.setdefault("MASTER_PORT", "29513")
    dist.init_process_group("nccl", rank=rank, world_size=world)
    torch.cuda.set_device(rank)
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16); b = torch.randn_like(a)
    t = torch.ones(64 << 20, device="cuda")  # 256 MiB
    dist.all_reduce(t); torch.cuda.synchronize()
    t0, n = time.time(), 0
    for _ in rounds(rank, secs):  # the stop flag's .item() synchronises each round
        for _ in range(4):
            a @ b
        dist.all_reduce(t)
        n += 1
    torch.cuda.synchronize()
    ring = ring_bytes(n, t.numel() * 4, world)
    print(f"rank {rank}: {n} rounds of 4 matmuls + 1 all-reduce in {time.time()-t0:.1f}s; ring bytes sent per rank {ring:.0f}", flush=True)
    dist.destroy_process_group()  # a normal exit: the injected library sends its last records

if __name__ == "__main__":
    os.environ["NCCL_NVLS_ENABLE"] = "0"; os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"; os.environ["NVSHMEM_DISABLE_NVLS"] = "1"
    world = torch.cuda.device_count()
    mp.spawn(run, args=(world, float(sys.argv[1]) if len(sys.argv) > 1 else 10.0), nprocs=world)
