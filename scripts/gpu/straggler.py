"""A synchronous two-rank (one per visible GPU) data-parallel loop for the straggler stage: each round
every rank runs MATMULS bf16 8192^3 matmuls, then one 256 MiB NCCL all-reduce; in the slowed phases
the last rank runs extra matmuls (10 % or 30 % more compute). Phases follow a schedule of rank 0's
clock, given as NAME:SECONDS,... where NAME is "balanced" or "slowPCT" (slow10, slow30).

Rank 0 decides, before each round, whether to go on and in which phase (ncclrounds.decisions, so
that no rank waits for ever in a collective the others never join), and logs each
phase's start (Unix seconds) to PHASE_LOG. Each rank labels itself as a pod for the exporter
(POD_NAME=strag-RANK, POD_NAMESPACE=ml; the exporter runs with --activity.trust-hello-pods).

usage: straggler.py SCHEDULE PHASE_LOG [MATMULS]"""
import os, sys, time
import torch, torch.distributed as dist, torch.multiprocessing as mp
from ncclrounds import decisions


def parse(schedule):
    out = []
    for item in schedule.split(","):
        name, secs = item.split(":")
        extra = 0.0 if name == "balanced" else float(name.removeprefix("slow")) / 100
        out.append((name, float(secs), extra))
    return out


def run(rank, world, schedule, log, matmuls):
    os.environ.update(POD_NAME=f"strag-{rank}", POD_NAMESPACE="ml", CONTAINER_NAME="trainer")  # before CUDA starts
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1"); os.environ.setdefault("MASTER_PORT", "29517")
    dist.init_process_group("nccl", rank=rank, world_size=world)
    torch.cuda.set_device(rank)
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16); b = torch.randn_like(a)
    grad = torch.ones(64 << 20, device="cuda")  # 256 MiB
    dist.all_reduce(grad); torch.cuda.synchronize()
    phases = parse(schedule)
    t0, n, current = time.time(), 0, -1
    ends = [sum(p[1] for p in phases[:i + 1]) for i in range(len(phases))]
    counts = [0] * len(phases)

    def phase():  # on rank 0's clock: the next round's phase, None past the schedule
        el = time.time() - t0
        return next((i for i, e in enumerate(ends) if el < e), None)

    for idx in decisions(rank, phase):
        if idx != current:
            current = idx
            if rank == 0:
                with open(log, "a") as f:
                    f.write(f"{phases[idx][0]} {time.time():.3f}\n")
        k = matmuls
        if rank == world - 1:
            k += round(matmuls * phases[idx][2])
        for _ in range(k):
            a @ b
        dist.all_reduce(grad)
        counts[idx] += 1
        n += 1
    torch.cuda.synchronize()
    el = time.time() - t0
    print(f"rank {rank}: {n} rounds in {el:.1f}s; rounds per phase " +
          ", ".join(f"{p[0]} {c} ({c / p[1]:.2f}/s)" for p, c in zip(phases, counts)), flush=True)
    if rank == 0:
        with open(log, "a") as f:
            f.write(f"end {time.time():.3f}\n")
    dist.destroy_process_group()  # a normal exit: the injected library sends its last records


if __name__ == "__main__":
    os.environ["NCCL_NVLS_ENABLE"] = "0"; os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"; os.environ["NVSHMEM_DISABLE_NVLS"] = "1"
    schedule, log = sys.argv[1], sys.argv[2]
    matmuls = int(sys.argv[3]) if len(sys.argv) > 3 else 20
    parse(schedule)  # fail early on a bad schedule
    world = torch.cuda.device_count()
    if world < 2:
        sys.exit("straggler.py needs two GPUs")
    mp.spawn(run, args=(world, schedule, log, matmuls), nprocs=world)
