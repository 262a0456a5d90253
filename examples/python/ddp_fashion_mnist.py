#!/usr/bin/python3
"""The same model, data and loop as fashion_mnist.py under PyTorch's own DistributedDataParallel
(gloo backend): the baseline of the Python front end's benchmark (docs/BENCHMARKS.md).
torchrun is broken on Debian's Python 3.11 with torch 1.13, so start the ranks by hand:

    for r in 0 1 2 3; do PYTHONPATH=build/python MASTER_ADDR=127.0.0.1 MASTER_PORT=29511 \\
      RANK=$r WORLD_SIZE=4 /usr/bin/python3 examples/python/ddp_fashion_mnist.py --epochs 1 & done
    wait

(PYTHONPATH: fashion_mnist.py, whose model and reader this script reuses, imports herd.torch.)
"""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data.distributed import DistributedSampler

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fashion_mnist import Net, evaluate, load  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.002)
    p.add_argument("--train-samples", type=int, default=0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()

    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo")
    rank, size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)
    train_x, train_y = load(args.data, "train", args.train_samples)
    test_x, test_y = load(args.data, "t10k")
    model = DistributedDataParallel(Net())
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    sampler = DistributedSampler(range(len(train_x)), num_replicas=size, rank=rank,
                                 shuffle=True, seed=args.seed, drop_last=True)
    samples = 0
    iterations = 0
    begin = time.perf_counter()
    cpu_begin = time.process_time()  # this process's CPU, every thread (gloo's included)
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        order = torch.tensor(list(sampler))
        for i in range(0, len(order) - args.batch_size + 1, args.batch_size):
            idx = order[i:i + args.batch_size]
            opt.zero_grad()
            loss = F.cross_entropy(model(train_x[idx]), train_y[idx])
            loss.backward()
            opt.step()
            samples += len(idx)
            iterations += 1
    seconds = time.perf_counter() - begin
    cpu_ms = (time.process_time() - cpu_begin) * 1e3 / max(1, iterations)
    if rank == 0:
        accuracy = evaluate(model.module, test_x, test_y)
        print(f"ddp gloo: {size} workers, {samples * size / seconds:.0f} samples/s, "
              f"{seconds:.1f} s training, test accuracy {accuracy:.4f}, "
              f"rank 0: {cpu_ms:.2f} ms CPU per iteration", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
