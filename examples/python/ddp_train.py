#!/usr/bin/python3
"""A torch.distributed DDP training script, written the way DDP scripts are written today:
init_process_group from the environment, DistributedDataParallel, AdamW with no weight decay on
biases and norms, a OneCycle learning-rate schedule, gradient clipping, DistributedSampler.
Nothing in it is herd's but the import that registers the backend; the backend is a flag.

    herd local --workers 4 -- /usr/bin/python3 examples/python/ddp_train.py --backend herd
    herd local --workers 4 -- /usr/bin/python3 examples/python/ddp_train.py --backend gloo

(`herd local -- CMD` sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT as torchrun
does; any launcher that sets them works, e.g. a Slurm script or four shells.)

Prints `rank R: test accuracy A, N samples/s, T s` on rank 0 and, with --out DIR, writes every
rank's final parameters (DIR/rank-R.pt) and its accuracy and timing (DIR/rank-R.json).
"""
import argparse
import gzip
import json
import os
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

import herd.distributed  # noqa: F401  registers backend="herd"


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def fashion_mnist(root, split, limit=0):
    x = read_idx(os.path.join(root, f"{split}-images-idx3-ubyte.gz"))
    y = read_idx(os.path.join(root, f"{split}-labels-idx1-ubyte.gz"))
    if limit:
        x, y = x[:limit], y[:limit]
    x = torch.from_numpy(x.astype(np.float32) / 255.0).unsqueeze(1)
    return TensorDataset((x - 0.2860) / 0.3530, torch.from_numpy(y.astype(np.int64)))


class ConvNet(nn.Module):
    """A small CNN with batch norm (its running statistics are buffers DDP broadcasts)."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 5, padding=2, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 32, 5, padding=2, bias=False)
        self.bn2 = nn.BatchNorm2d(32)
        self.fc1 = nn.Linear(32 * 7 * 7, 128)
        self.norm = nn.LayerNorm(128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2).flatten(1)
        return self.fc2(F.relu(self.norm(self.fc1(x))))


class WideMlp(nn.Module):
    """Wide fully connected layers: 6.9 M parameters for little compute, so the gradient
    exchange is a large part of every iteration."""

    def __init__(self, width=2048):
        super().__init__()
        self.fc1 = nn.Linear(784, width)
        self.fc2 = nn.Linear(width, width)
        self.fc3 = nn.Linear(width, 10)

    def forward(self, x):
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc3(F.relu(self.fc2(x)))


def param_groups(model, weight_decay):
    """The transformer recipe: no weight decay on biases and normalisation parameters."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.ndim <= 1 else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay},
            {"params": no_decay, "weight_decay": 0.0}]


def evaluate(model, dataset):
    model.eval()
    correct = 0
    with torch.no_grad():
        for x, y in DataLoader(dataset, batch_size=1000):
            correct += (model(x).argmax(1) == y).sum().item()
    model.train()
    return correct / len(dataset)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--backend", default="gloo")
    p.add_argument("--model", choices=["cnn", "mlp"], default="cnn")
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--weight-decay", type=float, default=0.05)
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument("--train-samples", type=int, default=0)
    p.add_argument("--max-iterations", type=int, default=0, help="stop after N (0: all)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--out", default="")
    p.add_argument("--no-exchange", action="store_true",
                   help="benchmarks only: DDP's gradient exchange replaced by a hook that keeps "
                        "the local gradient (the replicas drift): the iteration without "
                        "communication, under the same load of P processes")
    args = p.parse_args()

    if args.threads:
        torch.set_num_threads(args.threads)
    dist.init_process_group(backend=args.backend)  # env://: RANK, WORLD_SIZE, MASTER_*
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)

    train = fashion_mnist(args.data, "train", args.train_samples)
    test = fashion_mnist(args.data, "t10k")
    sampler = DistributedSampler(train, num_replicas=world, rank=rank, shuffle=True,
                                 seed=args.seed, drop_last=True)
    loader = DataLoader(train, batch_size=args.batch_size, sampler=sampler, drop_last=True)

    model = DDP(ConvNet() if args.model == "cnn" else WideMlp())
    if args.no_exchange:
        def keep_local(_, bucket):
            fut = torch.futures.Future()
            fut.set_result(bucket.buffer())
            return fut
        model.register_comm_hook(None, keep_local)
    opt = torch.optim.AdamW(param_groups(model, args.weight_decay), lr=args.lr)
    steps = args.epochs * len(loader)
    if args.max_iterations:
        steps = min(steps, args.max_iterations)
    schedule = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=steps)

    done = samples = 0
    begin = time.perf_counter()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for x, y in loader:
            if done == steps:
                break
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            opt.step()
            schedule.step()
            done += 1
            samples += len(x)
    seconds = time.perf_counter() - begin
    accuracy = evaluate(model.module, test)
    rate = samples * world / seconds
    if rank == 0:
        print(f"rank 0: backend {args.backend}, {world} workers, {args.model}: test accuracy "
              f"{accuracy:.4f}, {rate:.0f} samples/s, {seconds:.1f} s, loss {loss.item():.4f}",
              flush=True)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        torch.save({k: v.detach().clone() for k, v in model.module.state_dict().items()},
                   os.path.join(args.out, f"rank-{rank}.pt"))
        with open(os.path.join(args.out, f"rank-{rank}.json"), "w") as f:
            json.dump({"rank": rank, "world": world, "backend": args.backend,
                       "accuracy": accuracy, "samples_per_second": rate, "seconds": seconds,
                       "iterations": done, "loss": loss.item()}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
