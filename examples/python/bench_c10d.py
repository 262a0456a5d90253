#!/usr/bin/python3
"""torch.distributed's own collectives through backend="herd" and through gloo, side by side in
one run (the same processes: the default group is herd's, a second group over the same ranks is
gloo's, and every size alternates between them):

    herd local --workers 4 -- /usr/bin/python3 examples/python/bench_c10d.py

all_reduce (sum), all_gather (the list form) and reduce_scatter, fp32, 4 KiB .. 256 MiB. Each
cell is the median over --rounds rounds of the mean time of a timed loop (the slowest rank's,
after a barrier). gloo in torch 1.13 has no reduce_scatter: its cell is all_reduce followed by
taking this rank's chunk, what a gloo user writes instead (marked *).
Prints a markdown table on rank 0.
"""
import argparse
import statistics
import time

import torch
import torch.distributed as dist

import herd.distributed  # noqa: F401

SIZES = [4 << 10, 64 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20]


def label(n):
    return f"{n >> 20}M" if n >= 1 << 20 else f"{n >> 10}K"


def timed(fn, group, budget):
    # Warm-up: a size's first calls (buffers, transport lanes) run slower on either backend;
    # both get the same number, and the same ranks agree on the count (it is fixed).
    for _ in range(10):
        fn()
    dist.barrier(group=group)
    # The repetitions are agreed on (every rank must make the same calls): rank 0's count for
    # the budget, from one timed call.
    t = time.perf_counter()
    fn()
    reps = torch.tensor([max(3, min(50, int(budget / max(time.perf_counter() - t, 1e-6))))])
    dist.broadcast(reps, 0, group=group)
    reps = int(reps.item())
    dist.barrier(group=group)
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    mean = torch.tensor([(time.perf_counter() - t0) / reps])
    dist.all_reduce(mean, op=dist.ReduceOp.MAX, group=group)
    return mean.item()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default=",".join(label(s) for s in SIZES))
    p.add_argument("--ops", default="all_reduce,all_gather,reduce_scatter")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--budget", type=float, default=0.3, help="seconds per timed loop")
    args = p.parse_args()
    dist.init_process_group("herd")
    gloo = dist.new_group(backend="gloo")
    herd = dist.group.WORLD
    P, r = dist.get_world_size(), dist.get_rank()
    sizes = [int(s[:-1]) << (20 if s.endswith("M") else 10) for s in args.sizes.split(",")]
    rows = []
    for op in args.ops.split(","):
        for nbytes in sizes:
            n = max(P, nbytes // 4 // P * P)
            x = torch.ones(n)
            chunks = [torch.empty(n // P) for _ in range(P)]
            piece = torch.empty(n // P)

            def call(group, emulate=False):
                if op == "all_reduce":
                    return lambda: dist.all_reduce(x, group=group)
                if op == "all_gather":
                    return lambda: dist.all_gather(chunks, x[:n // P], group=group)
                if emulate:  # gloo: no reduce_scatter in torch 1.13
                    def rs():
                        y = x.clone()
                        dist.all_reduce(y, group=group)
                        piece.copy_(y[r * (n // P):(r + 1) * (n // P)])
                    return rs
                return lambda: dist.reduce_scatter(piece, list(x.chunk(P)), group=group)

            times = {"herd": [], "gloo": []}
            for _ in range(args.rounds):
                times["herd"].append(timed(call(herd), herd, args.budget))
                times["gloo"].append(timed(call(gloo, op == "reduce_scatter"), gloo,
                                           args.budget))
            h, g = statistics.median(times["herd"]), statistics.median(times["gloo"])
            rows.append((op, label(nbytes), h, g))
            if r == 0:
                print(f"{op} {label(nbytes)}: herd {h * 1e6:.1f} us, gloo {g * 1e6:.1f} us, "
                      f"{g / h:.2f}x", flush=True)
    if r == 0:
        print(f"\n| op (P = {P}, fp32) | size | herd us | gloo us | herd GB/s | gloo GB/s | "
              f"herd / gloo |\n| --- | --- | ---: | ---: | ---: | ---: | ---: |")
        for op, size, h, g in rows:
            nbytes = int(size[:-1]) << (20 if size.endswith("M") else 10)
            star = "*" if op == "reduce_scatter" else ""
            print(f"| {op} | {size} | {h * 1e6:.1f} | {g * 1e6:.1f}{star} | "
                  f"{nbytes / h / 1e9:.2f} | {nbytes / g / 1e9:.2f} | {g / h:.2f}x |")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
