#!/usr/bin/python3
"""A modern recipe through herd.DistributedOptimizer, as test_herd_optimizer.py runs it under
`herd local --`, and the same recipe in a single process (--reference --world P) that it must
match: AdamW with no weight decay on biases and norms (two parameter groups), a OneCycle
schedule, clip_grad_norm_ between backward() and step(), or a torch.optim class named by
--optimizer, or a class of the script's own (--optimizer custom).

Worker r of P trains on the B samples at r*B of each global batch of P*B (one permutation per
epoch, the same everywhere); the reference trains on the whole global batch, so its gradient
is the workers' mean and the two runs take the same steps (up to the order of float sums).

--model fmnist trains the CNN on Fashion-MNIST and reports the test accuracy (the slow
accuracy comparison); the default is a tiny MLP on seeded synthetic data.
Writes DIR/rank-R.pt (the final parameters) and DIR/rank-R.json (losses, accuracy).
"""
import argparse
import gzip
import json
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class TinyNormed(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(12, 32)
        self.norm = nn.LayerNorm(32)
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.norm(self.fc1(x))))


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 5, padding=2)
        self.conv2 = nn.Conv2d(16, 32, 5, padding=2)
        self.fc1 = nn.Linear(32 * 7 * 7, 128)
        self.norm = nn.LayerNorm(128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2).flatten(1)
        return self.fc2(F.relu(self.norm(self.fc1(x))))


class SignSgd(torch.optim.Optimizer):
    """A script's own optimizer: signSGD with a global step counter (not per parameter)."""

    def __init__(self, params, lr):
        super().__init__(params, dict(lr=lr))
        self.steps = 0

    @torch.no_grad()
    def step(self, closure=None):
        self.steps += 1
        for g in self.param_groups:
            for p in g["params"]:
                if p.grad is not None:
                    p.add_(p.grad.sign(), alpha=-g["lr"] / (1 + 0.01 * self.steps))


def synthetic(n=640, seed=7):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 12, generator=g)
    teacher = torch.randn(12, 4, generator=g)
    return x, (x @ teacher).argmax(1)


def fashion_mnist(split, limit=0):
    root = "/usr/share/datasets/fashion-mnist"

    def read(name):
        with gzip.open(os.path.join(root, name), "rb") as f:
            data = f.read()
        dims = data[3]
        shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
        return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)

    x = read(f"{split}-images-idx3-ubyte.gz").astype(np.float32) / 255.0
    y = read(f"{split}-labels-idx1-ubyte.gz").astype(np.int64)
    if limit:
        x, y = x[:limit], y[:limit]
    return torch.from_numpy(x).unsqueeze(1), torch.from_numpy(y)


def groups(model, wd):
    decay = [p for p in model.parameters() if p.ndim > 1]
    no_decay = [p for p in model.parameters() if p.ndim <= 1]
    return [{"params": decay, "weight_decay": wd}, {"params": no_decay, "weight_decay": 0.0}]


def make_optimizer(name, model, lr, wd):
    if name == "adamw":
        return torch.optim.AdamW(groups(model, wd), lr=lr)
    if name == "adam":
        return torch.optim.Adam(groups(model, wd), lr=lr)
    if name == "nesterov":
        return torch.optim.SGD(groups(model, wd), lr=lr, momentum=0.9, nesterov=True)
    if name == "sgd":
        return torch.optim.SGD(model.parameters(), lr=lr)
    if name == "rmsprop":
        return torch.optim.RMSprop(groups(model, wd), lr=lr)
    if name == "custom":
        return SignSgd(model.parameters(), lr=lr)
    raise ValueError(name)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--reference", action="store_true", help="one process, no herd")
    p.add_argument("--world", type=int, default=2, help="--reference: the workers it stands for")
    p.add_argument("--model", choices=["tiny", "fmnist"], default="tiny")
    p.add_argument("--optimizer", default="adamw")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--weight-decay", type=float, default=0.05)
    p.add_argument("--clip", type=float, default=0.5)
    p.add_argument("--iterations", type=int, default=30)
    p.add_argument("--epochs", type=int, default=0, help="fmnist: whole epochs instead")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--train-samples", type=int, default=0)
    p.add_argument("--no-schedule", action="store_true")
    p.add_argument("--no-cycle-momentum", action="store_true",
                   help="a constant beta1 (the shards apply the job's)")
    p.add_argument("--zero-after-backward", action="store_true")
    p.add_argument("--synchronize", action="store_true", help="Horovod's synchronize() first")
    args = p.parse_args()

    torch.set_num_threads(1)
    if args.reference:
        herd = None
        rank, world = 0, args.world
    else:
        import herd.torch as herd
        herd.init()
        rank, world = None, None
    torch.manual_seed(3)
    if args.model == "fmnist":
        model = Cnn()
        x, y = fashion_mnist("train", args.train_samples)
        test_x, test_y = fashion_mnist("t10k")
    else:
        model = TinyNormed()
        x, y = synthetic()
    inner = make_optimizer(args.optimizer, model, args.lr, args.weight_decay)
    if herd is not None:
        opt = herd.DistributedOptimizer(inner, model=model)
        rank, world = herd.rank(), herd.size()
    else:
        opt = inner
    n, B = len(x), args.batch
    per_epoch = n // (world * B)
    iterations = args.epochs * per_epoch if args.epochs else args.iterations
    # OneCycle cycles the momentum (Adam's beta1) too, where the optimizer has one.
    cycle = "betas" in inner.defaults or "momentum" in inner.defaults
    schedule = None if args.no_schedule else torch.optim.lr_scheduler.OneCycleLR(
        opt, max_lr=args.lr, total_steps=iterations,
        cycle_momentum=cycle and not args.no_cycle_momentum)
    initial = [t.detach().clone() for t in model.parameters()]

    losses = []
    for it in range(iterations):
        epoch, k = divmod(it, per_epoch)
        order = torch.randperm(n, generator=torch.Generator().manual_seed(100 + epoch))
        batch = order[k * world * B:(k + 1) * world * B]
        idx = batch if herd is None else batch[rank * B:(rank + 1) * B]
        opt.zero_grad()
        loss = F.cross_entropy(model(x[idx]), y[idx])
        loss.backward()
        if args.synchronize and herd is not None:
            opt.synchronize()
        if args.zero_after_backward:
            for q in model.parameters():
                q.grad.zero_()
        if args.clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        opt.step()
        if schedule is not None:
            schedule.step()
        losses.append(loss.item())
    result = {"losses": losses, "iterations": iterations}
    if herd is not None:
        opt.synchronize()
    if args.model == "fmnist":
        model.eval()
        with torch.no_grad():
            correct = sum((model(test_x[i:i + 1000]).argmax(1) == test_y[i:i + 1000]).sum().item()
                          for i in range(0, len(test_x), 1000))
        result["accuracy"] = correct / len(test_x)
    result["moved"] = max((a - b).abs().max().item() for a, b in
                          zip(model.parameters(), initial))
    if herd is not None:
        herd.finish(metrics={"test_accuracy": result.get("accuracy", -1), "loss": losses[-1]})
    os.makedirs(args.out, exist_ok=True)
    torch.save([t.detach().clone() for t in model.parameters()],
               os.path.join(args.out, f"rank-{rank}.pt"))
    with open(os.path.join(args.out, f"rank-{rank}.json"), "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
