#!/usr/bin/python3
"""DistributedDataParallel's features over a backend (--backend herd or gloo), as
test_herd_distributed.py compares them: find_unused_parameters with no_sync() accumulation, a
communication hook (fp16 compression), static_graph, and join() over uneven inputs. Writes
DIR/rank-R.pt: every model's final parameters."""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

import herd.distributed  # noqa: F401


class Branchy(nn.Module):
    """A branch used only on even steps: its parameters get no gradient on odd ones."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 16)
        self.b = nn.Linear(16, 4)
        self.side = nn.Linear(16, 4)

    def forward(self, x, use_side):
        h = torch.tanh(self.a(x))
        return self.b(h) + (self.side(h) if use_side else 0)


def batch(rank, step, n=6):
    g = torch.Generator().manual_seed(1000 * rank + step)
    return torch.randn(n, 8, generator=g), torch.randint(0, 4, (n,), generator=g)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--backend", default="herd")
    p.add_argument("--out", required=True)
    args = p.parse_args()
    dist.init_process_group(args.backend)
    r = dist.get_rank()
    out = {}

    torch.manual_seed(0)
    m = DDP(Branchy(), find_unused_parameters=True)
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    for step in range(6):
        x, y = batch(r, step)
        if step % 3 != 2:  # accumulate two local steps, synchronise on the third
            with m.no_sync():
                F.cross_entropy(m(x, step % 2 == 0), y).backward()
            continue
        F.cross_entropy(m(x, step % 2 == 0), y).backward()
        opt.step()
        opt.zero_grad()
    out["unused_no_sync"] = [t.detach().clone() for t in m.parameters()]

    torch.manual_seed(1)
    m = DDP(nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4)))
    m.register_comm_hook(state=None, hook=default_hooks.fp16_compress_hook)
    opt = torch.optim.Adam(m.parameters(), lr=0.01)
    for step in range(5):
        x, y = batch(r, step)
        opt.zero_grad()
        F.cross_entropy(m(x), y).backward()
        opt.step()
    out["fp16_hook"] = [t.detach().clone() for t in m.parameters()]

    torch.manual_seed(2)
    m = DDP(nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4)), static_graph=True)
    opt = torch.optim.SGD(m.parameters(), lr=0.05)
    for step in range(5):
        x, y = batch(r, step)
        opt.zero_grad()
        F.cross_entropy(m(x), y).backward()
        opt.step()
    out["static_graph"] = [t.detach().clone() for t in m.parameters()]

    torch.manual_seed(3)
    m = DDP(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)))
    opt = torch.optim.SGD(m.parameters(), lr=0.05)
    with m.join():  # rank r has 4 + 2 r batches
        for step in range(4 + 2 * r):
            x, y = batch(r, step)
            opt.zero_grad()
            F.cross_entropy(m(x), y).backward()
            opt.step()
    out["join_uneven"] = [t.detach().clone() for t in m.parameters()]

    os.makedirs(args.out, exist_ok=True)
    torch.save(out, os.path.join(args.out, f"rank-{r}.pt"))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
