"""All-reduce between all visible GPUs through NCCL for SECONDS (one process per GPU)."""
import os, sys, time
import torch, torch.distributed as dist, torch.multiprocessing as mp
from ncclrounds import ring_bytes, rounds

def run(rank, world, secs):
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1"); os.environ.setdefault("MASTER_PORT", "29511")
    dist.init_process_group("nccl", rank=rank, world_size=world)
    torch.cuda.set_device(rank)
    t = torch.ones(64 << 20, device="cuda")  # 256 MiB
    t0, n = time.time(), 0
    for _ in rounds(rank, secs):
        dist.all_reduce(t); torch.cuda.synchronize(); n += 1
    if rank == 0:
        size = t.numel() * 4
        per_rank = ring_bytes(n, size, world)
        print(f"allreduce: {n} x 256MiB in {time.time()-t0:.1f}s ({n * size / 1e9 / (time.time()-t0):.1f} GB/s algbw); "
              f"ring bytes sent per rank {per_rank:.0f}", flush=True)
    dist.destroy_process_group()

if __name__ == "__main__":
    os.environ["NCCL_NVLS_ENABLE"] = "0"; os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"; os.environ["NVSHMEM_DISABLE_NVLS"] = "1"
    world = torch.cuda.device_count()
    mp.spawn(run, args=(world, float(sys.argv[1]) if len(sys.argv) > 1 else 10.0), nprocs=world)
