#!/usr/bin/python3
"""A small training script over herd.torch, run by test_herd_torch.py through `herd local --`.

Trains a tiny MLP on seeded synthetic data (or, with --builtin-mlp, the built-in `mlp` on
Fashion-MNIST with herd's own initial values and data order), with the variations the tests
need, and writes what it saw to --out/rank-R.json and its final parameters to --out/rank-R.pt.
"""
import argparse
import json
import os

import torch
import torch.nn as nn
import torch.nn.functional as F

import herd.torch as herd


class Tiny(nn.Module):
    def __init__(self, unused=False, hidden=16):
        super().__init__()
        self.fc1 = nn.Linear(12, hidden)
        self.fc2 = nn.Linear(hidden, 4)
        # A layer the forward never uses: its gradient never appears.
        self.spare = nn.Linear(3, 3) if unused else None

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class BuiltinMlp(nn.Module):
    """herd's built-in `mlp` (worker/torch/models.cc): 784-256-10, drawn after manual_seed."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 256)
        self.fc2 = nn.Linear(256, 10)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x.flatten(1))))


def synthetic(n=512, seed=7):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 12, generator=g)
    teacher = torch.randn(12, 4, generator=g)
    return x, (x @ teacher).argmax(1)


def fashion_mnist(limit):
    import gzip
    import numpy as np
    root = "/usr/share/datasets/fashion-mnist"

    def read(name):
        with gzip.open(os.path.join(root, name), "rb") as f:
            data = f.read()
        dims = data[3]
        shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
        return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)

    x = read("train-images-idx3-ubyte.gz")[:limit].astype(np.float32) / 255.0
    y = read("train-labels-idx1-ubyte.gz")[:limit].astype(np.int64)
    return torch.from_numpy(x).unsqueeze(1), torch.from_numpy(y)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--iterations", type=int, default=20)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--optimizer", default="momentum")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--accumulate", type=int, default=1)
    p.add_argument("--scheduler", action="store_true")
    p.add_argument("--unused", action="store_true")
    p.add_argument("--noncontiguous", action="store_true")
    p.add_argument("--reassign-at", type=int, default=-1)
    p.add_argument("--raise-at", type=int, default=-1)
    p.add_argument("--raise-rank", type=int, default=1)
    p.add_argument("--mismatch-rank", type=int, default=-1)
    p.add_argument("--builtin-mlp", action="store_true")
    p.add_argument("--train-samples", type=int, default=12000)
    p.add_argument("--no-model", action="store_true", help="DistributedOptimizer without model=")
    p.add_argument("--ask-rank", type=int, default=-1,
                   help="ask the job for this rank (HERD_RANK), refused when it is no slot")
    p.add_argument("--raise-before-registering", action="store_true")
    args = p.parse_args()

    if args.ask_rank >= 0:
        os.environ["HERD_RANK"] = str(args.ask_rank)
    herd.init()
    print("herd.init() returned", flush=True)
    if args.raise_before_registering:
        raise RuntimeError("the script failed on purpose before registering")
    rank, size = herd.rank(), herd.size()
    seed = int(os.environ.get("HERD_SEED", "1"))
    torch.manual_seed(seed)
    if args.builtin_mlp:
        model = BuiltinMlp()
        x, y = fashion_mnist(args.train_samples)
    else:
        model = Tiny(unused=args.unused, hidden=24 if rank == args.mismatch_rank else 16)
        x, y = synthetic()
    if args.noncontiguous:
        with torch.no_grad():
            model.fc1.weight = nn.Parameter(model.fc1.weight.detach().t().contiguous().t())

    if args.optimizer == "adam":
        inner = torch.optim.Adam(model.parameters(), lr=args.lr)
    elif args.optimizer == "nesterov":
        inner = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, nesterov=True)
    else:
        inner = torch.optim.SGD(model.parameters(), lr=args.lr,
                                momentum=0.9 if args.optimizer == "momentum" else 0.0)
    opt = herd.DistributedOptimizer(inner, model=None if args.no_model else model,
                                    backward_passes_per_step=args.accumulate)
    herd.broadcast_parameters(model.state_dict(), root_rank=0)
    scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=5, gamma=0.5) \
        if args.scheduler else None

    losses, modes, lrs = [], [], []
    n, B = len(x), args.batch
    start = herd.start_iteration()  # a resumed job skips the iterations before its checkpoint
    resumed_state = herd.state()  # what the script registered, as of the checkpoint
    for it in range(start, args.iterations):
        herd.state(next_iteration=it, note=f"at {it}")
        if it == args.reassign_at:
            model.fc2.weight = nn.Parameter(model.fc2.weight.detach().clone())
        if it == args.raise_at and rank == args.raise_rank:
            raise RuntimeError(f"the script failed on purpose at iteration {it}")
        opt.zero_grad()
        total = 0.0
        for k in range(args.accumulate):
            # herd's global data order: global batch g of P x B samples, this rank's B of it.
            g = it * args.accumulate + k
            per_epoch = n // (size * B)
            order = herd.epoch_order(n, g // per_epoch)
            first = (g % per_epoch) * size * B + rank * B
            idx = order[first:first + B]
            loss = F.cross_entropy(model(x[idx]), y[idx])
            loss.backward()
            total += loss.item()
        lrs.append(opt.param_groups[0]["lr"])
        opt.step(loss=total / args.accumulate)
        if scheduler is not None:
            scheduler.step()
        losses.append(total / args.accumulate)
        modes.append(herd.mode())
    # What the final checkpoint (a job with a checkpoint directory) holds: the loop is over.
    herd.state(next_iteration=args.iterations, note="done")

    metrics = {"rank_sum": float(herd.allreduce(torch.tensor([float(rank)]), average=False)[0])}
    if losses:  # a run resumed from the final checkpoint has nothing left to train
        metrics.update(loss=losses[-1], first_loss=losses[0])
    herd.finish(metrics=metrics)
    torch.save([t.detach().clone() for t in model.parameters()],
               os.path.join(args.out, f"rank-{rank}.pt"))
    with open(os.path.join(args.out, f"rank-{rank}.json"), "w") as f:
        json.dump({"losses": losses, "modes": modes, "lrs": lrs, "start": start,
                   "resumed_state": resumed_state,
                   "iterations": herd.iteration()}, f)


if __name__ == "__main__":
    main()
