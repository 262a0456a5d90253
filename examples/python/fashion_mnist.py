#!/usr/bin/python3
"""Fashion-MNIST with your own PyTorch model, trained data-parallel by herd.

    herd local --workers 4 --mode dear -- /usr/bin/python3 examples/python/fashion_mnist.py

A plain PyTorch script (its own dataset reader, model, training loop and evaluation) plus the
lines marked `herd:`; the mode of the job (dear, allreduce, ps_sync, ...) is herd local's
--mode, and the script does not change with it.
"""
import argparse
import gzip
import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data.distributed import DistributedSampler

import herd.torch as herd  # herd:


def read_idx(path):
    """An IDX file (gzip-compressed) as a numpy array: images N x rows x cols, or labels N."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic = int.from_bytes(data[0:4], "big")
    dims = magic & 0xFF
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def load(root, split, limit=0):
    images = read_idx(os.path.join(root, f"{split}-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(root, f"{split}-labels-idx1-ubyte.gz"))
    if limit:
        images, labels = images[:limit], labels[:limit]
    x = torch.from_numpy(images.astype(np.float32) / 255.0).unsqueeze(1)
    return x, torch.from_numpy(labels.astype(np.int64))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 5, padding=2)
        self.conv2 = nn.Conv2d(16, 32, 5, padding=2)
        self.fc1 = nn.Linear(32 * 7 * 7, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2).flatten(1)
        return self.fc2(F.relu(self.fc1(x)))


def evaluate(model, x, y):
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(x), 1000):
            correct += (model(x[i:i + 1000]).argmax(1) == y[i:i + 1000]).sum().item()
    model.train()
    return correct / len(x)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.002)
    p.add_argument("--train-samples", type=int, default=0)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()

    herd.init()  # herd: open the job (registered at the DistributedOptimizer, after the data)
    torch.manual_seed(args.seed)
    train_x, train_y = load(args.data, "train", args.train_samples)
    test_x, test_y = load(args.data, "t10k")
    model = Net()
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    opt = herd.DistributedOptimizer(opt, model=model)  # herd: hooks the model
    herd.broadcast_parameters(model.state_dict(), root_rank=0)  # herd: one starting point

    sampler = DistributedSampler(range(len(train_x)), num_replicas=herd.size(), rank=herd.rank(),
                                 shuffle=True, seed=args.seed, drop_last=True)
    begin = time.time()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        order = torch.tensor(list(sampler))
        for i in range(0, len(order) - args.batch_size + 1, args.batch_size):
            idx = order[i:i + args.batch_size]
            opt.zero_grad()
            loss = F.cross_entropy(model(train_x[idx]), train_y[idx])
            loss.backward()
            opt.step(loss=loss)
        if herd.rank() == 0:
            print(f"epoch {epoch + 1}: loss {loss.item():.4f}, {time.time() - begin:.1f} s",
                  flush=True)
    metrics = {"loss": loss.item()}
    if herd.rank() == 0:  # every replica is the same model: one evaluation is enough
        metrics["test_accuracy"] = evaluate(model, test_x, test_y)
        print(f"test accuracy {metrics['test_accuracy']:.4f}", flush=True)
    herd.finish(metrics=metrics)  # herd: report (the job's summary shows rank 0's)


if __name__ == "__main__":
    main()
