#!/usr/bin/python3
"""A Horovod training script with its import changed, and nothing else:

    import horovod.torch as hvd      ->      import herd.torch as hvd

    herd local --workers 4 --mode allreduce -- /usr/bin/python3 examples/python/horovod_fashion_mnist.py

It uses what Horovod's PyTorch examples use: hvd.init(), the rank and local rank, the learning
rate scaled by hvd.size(), DistributedOptimizer(named_parameters=..., compression=...,
op=..., backward_passes_per_step=...), broadcast_parameters and broadcast_optimizer_state from
rank 0, synchronize() + skip_synchronize() around gradient clipping, hvd.allreduce of the
metrics (name=...), hvd.allgather and broadcast_object, and hvd.join() at the end. herd's mode
(allreduce, dear, ps_ec, ...) is herd local's --mode.
"""
import argparse
import gzip
import json
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.data.distributed
from torch.utils.data import DataLoader, TensorDataset

import herd.torch as hvd


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def dataset(root, split, limit=0):
    x = read_idx(os.path.join(root, f"{split}-images-idx3-ubyte.gz"))
    y = read_idx(os.path.join(root, f"{split}-labels-idx1-ubyte.gz"))
    if limit:
        x, y = x[:limit], y[:limit]
    return TensorDataset(torch.from_numpy(x.astype(np.float32) / 255.0).unsqueeze(1),
                         torch.from_numpy(y.astype(np.int64)))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2(x), 2)).flatten(1)
        return self.fc2(F.relu(self.fc1(x)))


def metric_average(value, name):
    return hvd.allreduce(torch.tensor(value), name=name).item()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--momentum", type=float, default=0.5)
    p.add_argument("--fp16-allreduce", action="store_true")
    p.add_argument("--accumulate", type=int, default=1)
    p.add_argument("--train-samples", type=int, default=0)
    p.add_argument("--clip", type=float, default=5.0)
    p.add_argument("--result", default="", help="rank 0 writes its accuracy here (JSON)")
    args = p.parse_args()

    hvd.init()
    torch.manual_seed(42)
    torch.set_num_threads(1)
    print(f"rank {hvd.rank()} of {hvd.size()}, local rank {hvd.local_rank()} of "
          f"{hvd.local_size()}", flush=True)

    train = dataset(args.data, "train", args.train_samples)
    test = dataset(args.data, "t10k")
    train_sampler = torch.utils.data.distributed.DistributedSampler(
        train, num_replicas=hvd.size(), rank=hvd.rank())
    train_loader = DataLoader(train, batch_size=args.batch_size, sampler=train_sampler)
    test_sampler = torch.utils.data.distributed.DistributedSampler(
        test, num_replicas=hvd.size(), rank=hvd.rank())
    test_loader = DataLoader(test, batch_size=1000, sampler=test_sampler)

    model = Net()
    # Horovod's rule: the learning rate grows with the number of workers.
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(),
                                momentum=args.momentum)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                         compression=compression, op=hvd.Average,
                                         backward_passes_per_step=args.accumulate)
    config = hvd.broadcast_object({"epochs": args.epochs, "clip": args.clip}, root_rank=0)

    step = -1  # backward passes so far: every `accumulate` of them make one step
    for epoch in range(config["epochs"]):
        model.train()
        train_sampler.set_epoch(epoch)
        for x, y in train_loader:
            step += 1
            if step % args.accumulate == 0:
                optimizer.zero_grad()
            loss = F.nll_loss(F.log_softmax(model(x), dim=1), y) / args.accumulate
            loss.backward()
            if (step + 1) % args.accumulate:
                continue
            # Horovod's way to clip the averaged gradient.
            optimizer.synchronize()
            torch.nn.utils.clip_grad_norm_(model.parameters(), config["clip"])
            with optimizer.skip_synchronize():
                optimizer.step()

        model.eval()
        test_loss = correct = 0.0
        with torch.no_grad():
            for x, y in test_loader:
                out = model(x)
                test_loss += F.nll_loss(F.log_softmax(out, dim=1), y, reduction="sum").item()
                correct += (out.argmax(1) == y).sum().item()
        n = len(test_sampler)
        test_loss = metric_average(test_loss / n, "avg_loss")
        accuracy = metric_average(correct / n, "avg_accuracy")
        losses = hvd.allgather(torch.tensor([test_loss]), name="losses")
        if hvd.rank() == 0:
            print(f"epoch {epoch}: test loss {test_loss:.4f}, accuracy {accuracy:.4f} "
                  f"(every rank's loss: {losses.tolist()})", flush=True)
    last = hvd.join()
    if hvd.rank() == 0:
        print(f"test accuracy {accuracy:.4f}; the last rank to join was {last}", flush=True)
        if args.result:
            with open(args.result, "w") as f:
                json.dump({"accuracy": accuracy, "last_joined": last, "size": hvd.size(),
                           "local_size": hvd.local_size(), "losses": losses.tolist()}, f)


if __name__ == "__main__":
    main()
