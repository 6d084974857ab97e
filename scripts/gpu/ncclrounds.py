"""Rounds of collectives that every rank runs the same number of times."""
import time
import torch, torch.distributed as dist


def rounds(rank, secs):
    """Yields round numbers for SECS seconds of rank 0's clock, the same count on every rank.

    Each rank stopping on its own clock leaves one of them waiting for ever in a collective
    the others never join (allreduce.py hung so on two H100s, run AV): rank 0 decides, and
    broadcasts the decision before each round."""
    go = torch.ones(1, device="cuda")
    t0, n = time.time(), 0
    while True:
        go.fill_(1.0 if rank != 0 or time.time() - t0 < secs else 0.0)
        dist.broadcast(go, 0)
        if go.item() == 0:
            return
        yield n
        n += 1


def ring_bytes(rounds, size, world):
    """Bytes a ring all-reduce of SIZE bytes sends (and receives) per rank in ROUNDS rounds:
    2 (world-1)/world of the buffer each."""
    return rounds * size * 2 * (world - 1) / world
