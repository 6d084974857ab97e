"""Rounds of collectives that every rank runs the same number of times."""
import time
import torch, torch.distributed as dist


def rounds(rank, secs):
    """Yields round numbers for SECS seconds of rank 0's clock, the same count on every rank.

    Each rank stopping on its own clock leaves one of them waiting for ever in a collective
    the others never join (allreduce.py hung so on two H100s, run AV): rank 0 decides, and
    broadcasts the decision before each round."""
    t0 = time.time()
    for n, _ in enumerate(decisions(rank, lambda: 0 if time.time() - t0 < secs else None)):
        yield n


def decisions(rank, decide):
    """Yields, before each round, the whole number rank 0's decide() returned, the same on
    every rank, until it returns None (see rounds): one broadcast a round, which also
    synchronises the host with the GPU."""
    ctl = torch.zeros(2, device="cuda")  # [go, decision]
    while True:
        if rank == 0:
            d = decide()
            ctl[0], ctl[1] = (0.0, 0.0) if d is None else (1.0, float(d))
        dist.broadcast(ctl, 0)
        go, d = ctl.tolist()
        if go == 0:
            return
        yield int(d)


def ring_bytes(rounds, size, world):
    """Bytes a ring all-reduce of SIZE bytes sends (and receives) per rank in ROUNDS rounds:
    2 (world-1)/world of the buffer each."""
    return rounds * size * 2 * (world - 1) / world
