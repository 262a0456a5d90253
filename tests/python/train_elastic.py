#!/usr/bin/python3
"""A training script for an elastic job, written as a PyTorch user writes one: its own model,
a DataLoader over herd.ElasticSampler, epochs, an evaluation. Run by test_herd_elastic.py
through `herd local --min-workers ... -- /usr/bin/python3 train_elastic.py --out DIR`.

Besides training it leaves for the test: DIR/progress-R (its pid and the iterations done, so
the test can kill it at about a third), and at the end DIR/rank-R.json (the batch indices of
every iteration as last run, the rollbacks, where it started, the test accuracy) and
DIR/rank-R.pt (its final parameters).
"""
import argparse
import json
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

import herd.torch as herd


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(12, 32)
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def teacher_data(n, seed):
    """Seeded samples labelled by a fixed random small network (the same on every worker)."""
    g = torch.Generator().manual_seed(seed)
    w1, w2 = torch.randn(12, 8, generator=g), torch.randn(8, 4, generator=g)
    x = torch.randn(n, 12, generator=g)
    return x, (torch.relu(x @ w1) @ w2).argmax(1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--train-samples", type=int, default=2048)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--step-sleep", type=float, default=0.0,
                   help="seconds to wait after each step (so a kill lands mid-run)")
    p.add_argument("--stall-rank", type=int, default=-1,
                   help="this rank waits --stall-seconds before the job's last iteration")
    p.add_argument("--stall-seconds", type=float, default=0.0)
    p.add_argument("--loader-workers", type=int, default=0, help="DataLoader(num_workers=)")
    p.add_argument("--accumulate", type=int, default=1, help="backward_passes_per_step")
    p.add_argument("--restarted-startup", type=float, default=0.0,
                   help="a restarted process (its progress file exists) spends this many more "
                        "seconds building its model (a large one) before it registers")
    args = p.parse_args()

    # The model and the data before the first call that registers (herd.rank(), the
    # DistributedOptimizer): a restarted worker's start-up stays out of the live workers' wait.
    herd.init()
    torch.manual_seed(int(os.environ.get("HERD_SEED", "1")))
    x, y = teacher_data(args.train_samples + 1024, seed=11)
    # The sample's index rides along, so the test can check what each worker trained on.
    n = args.train_samples
    train = TensorDataset(x[:n], y[:n], torch.arange(n))
    test_x, test_y = x[args.train_samples:], y[args.train_samples:]

    model = Net()
    previous = os.path.join(args.out, f"progress-{os.environ['HERD_RANK']}")
    if args.restarted_startup and os.path.exists(previous):
        began = time.time()
        time.sleep(args.restarted_startup)
        with open(os.path.join(args.out, f"startup-{os.getpid()}.json"), "w") as f:
            json.dump({"began": began, "ready": time.time()}, f)
    opt = herd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9),
                                    model=model, backward_passes_per_step=args.accumulate)
    rank = herd.rank()
    herd.broadcast_parameters(model.state_dict(), root_rank=0)
    sampler = herd.ElasticSampler(train, batch_size=args.batch)
    loader = DataLoader(train, batch_sampler=sampler, num_workers=args.loader_workers)

    progress = os.path.join(args.out, f"progress-{rank}")
    batches = {}  # iteration -> this worker's sample indices, as last run
    start = herd.start_iteration()
    passes = 0
    last = args.epochs * (n // (args.batch * herd.size())) - 1
    stalled = False
    for epoch in range(args.epochs):
        for xb, yb, index in loader:
            it = herd.iteration()
            if rank == args.stall_rank and it == last and not stalled:
                # Its neighbours wait for it in the last exchange while the others complete it.
                stalled = True
                time.sleep(args.stall_seconds)
            if passes == 0:
                opt.zero_grad()
                batches[it] = []
            batches[it] += index.tolist()
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            passes += 1
            if passes < args.accumulate:
                continue  # the gradients add up in .grad until the k-th pass
            passes = 0
            opt.step(loss=loss)
            with open(progress + ".tmp", "w") as f:
                f.write(f"{os.getpid()} {herd.iteration()}\n")
            os.replace(progress + ".tmp", progress)
            if args.step_sleep:
                time.sleep(args.step_sleep)

    with torch.no_grad():
        accuracy = float((model(test_x).argmax(1) == test_y).float().mean())
    # Over the live workers: a dead one is left out (it would never answer).
    rank_sum = float(herd.allreduce(torch.tensor([float(rank)]), average=False)[0])
    herd.finish(metrics={"test_accuracy": accuracy, "loss": float(loss)})
    torch.save([t.detach().clone() for t in model.parameters()],
               os.path.join(args.out, f"rank-{rank}.pt"))
    with open(os.path.join(args.out, f"rank-{rank}.json"), "w") as f:
        json.dump({"batches": {str(k): v for k, v in batches.items()}, "start": start,
                   "rollbacks": herd.rollbacks(), "iterations": herd.iteration(),
                   "accuracy": accuracy, "rank_sum": rank_sum, "pid": os.getpid()}, f)


if __name__ == "__main__":
    main()
