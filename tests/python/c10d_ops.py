#!/usr/bin/python3
"""Every torch.distributed operation through backend="herd", checked against its closed form
on every rank: run by test_herd_distributed.py as N processes (outside a herd job, through
torch's store: --init-method file://... or tcp://...; or under `herd local --`, env://).

Each rank contributes values that depend on its rank, so a wrong reduction, a wrong chunk or a
wrong root shows. Prints `rank R: N checks passed` and exits 0, or raises (exit 1).
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist

import herd.distributed  # noqa: F401  registers backend="herd"

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32,
          torch.int64, torch.int16, torch.int8, torch.uint8]
checks = 0


def value(rank, n, dtype, salt=0):
    """Rank r's vector: small integers, exact in every dtype."""
    v = (torch.arange(n, dtype=torch.int64) * 3 + rank * 7 + salt) % 11 + 1
    return v.to(dtype)


def expect(got, want, what):
    global checks
    if got.dtype != want.dtype or got.shape != want.shape or not torch.equal(got, want):
        raise AssertionError(f"{what}: got {got.tolist()} want {want.tolist()}")
    checks += 1


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--init-method", default="env://")
    p.add_argument("--rank", type=int, default=-1)
    p.add_argument("--world-size", type=int, default=-1)
    p.add_argument("--size", type=int, default=37, help="elements per vector")
    args = p.parse_args()
    kw = {}
    if args.rank >= 0:
        kw = {"rank": args.rank, "world_size": args.world_size}
    dist.init_process_group("herd", init_method=args.init_method, **kw)
    r, P, n = dist.get_rank(), dist.get_world_size(), args.size
    assert dist.get_backend() == "herd", dist.get_backend()
    everyone = [value(q, n, torch.int64) for q in range(P)]

    for dt in DTYPES:
        name = str(dt).replace("torch.", "")
        ops = [(dist.ReduceOp.SUM, lambda vs: torch.stack(vs).sum(0)),
               (dist.ReduceOp.MIN, lambda vs: torch.stack(vs).min(0).values),
               (dist.ReduceOp.MAX, lambda vs: torch.stack(vs).max(0).values),
               (dist.ReduceOp.PRODUCT, lambda vs: torch.stack(vs).prod(0))]
        if dt.is_floating_point:
            ops.append((dist.ReduceOp.AVG, None))
        else:
            ops += [(dist.ReduceOp.BAND, None), (dist.ReduceOp.BOR, None),
                    (dist.ReduceOp.BXOR, None)]
        for op, fold in ops:
            # Exact in every dtype: sums <= 11 P, products of values in 1..3.
            src = (lambda q: value(q, n, torch.int64) % 3 + 1) if op == dist.ReduceOp.PRODUCT \
                else (lambda q: value(q, n, torch.int64))
            t = src(r).to(dt)
            dist.all_reduce(t, op=op)
            vals = [src(q) for q in range(P)]
            if op == dist.ReduceOp.AVG:
                want = torch.stack(vals).to(torch.float64).mean(0)
                if not torch.allclose(t.to(torch.float64), want, rtol=1e-2):
                    raise AssertionError(f"all_reduce avg {name}: {t.tolist()} {want.tolist()}")
                continue
            if fold is None:  # the bitwise ops
                acc = vals[0].clone()
                for e in vals[1:]:
                    acc = {dist.ReduceOp.BAND: acc & e, dist.ReduceOp.BOR: acc | e,
                           dist.ReduceOp.BXOR: acc ^ e}[op]
                want = acc
            else:
                want = fold(vals)
            expect(t, want.to(dt), f"all_reduce {op} {name}")

        # broadcast from every root
        for root in range(P):
            t = value(r, n, dt)
            dist.broadcast(t, src=root)
            expect(t, value(root, n, dt), f"broadcast root {root} {name}")
        # reduce to the last rank
        t = value(r, n, dt)
        dist.reduce(t, dst=P - 1, op=dist.ReduceOp.SUM)
        if r == P - 1:
            expect(t, torch.stack(everyone).sum(0).to(dt), f"reduce {name}")
        # all_gather (list) and _all_gather_base
        outs = [torch.zeros(n, dtype=dt) for _ in range(P)]
        dist.all_gather(outs, value(r, n, dt))
        for q in range(P):
            expect(outs[q], value(q, n, dt), f"all_gather {name} from {q}")
        flat = torch.zeros(P * n, dtype=dt)
        dist._all_gather_base(flat, value(r, n, dt))
        expect(flat, torch.cat([value(q, n, dt) for q in range(P)]), f"_all_gather_base {name}")
        # gather and scatter
        got = [torch.zeros(n, dtype=dt) for _ in range(P)] if r == 0 else None
        dist.gather(value(r, n, dt), gather_list=got, dst=0)
        if r == 0:
            for q in range(P):
                expect(got[q], value(q, n, dt), f"gather {name} from {q}")
        out = torch.zeros(n, dtype=dt)
        dist.scatter(out, scatter_list=[value(q, n, dt, salt=5) for q in range(P)]
                     if r == P - 1 else None, src=P - 1)
        expect(out, value(r, n, dt, salt=5), f"scatter {name}")
        # alltoall: equal and uneven splits, and the list form
        inp = torch.cat([value(r, n, dt, salt=q) for q in range(P)])
        out = torch.zeros(P * n, dtype=dt)
        dist.all_to_all_single(out, inp)
        expect(out, torch.cat([value(q, n, dt, salt=r) for q in range(P)]), f"alltoall {name}")
        in_splits = [q + 1 for q in range(P)]  # rank r sends q+1 rows to q
        out_splits = [r + 1] * P
        inp = torch.cat([torch.full((q + 1,), r * 10 + q).to(dt) for q in range(P)])
        out = torch.zeros(sum(out_splits), dtype=dt)
        dist.all_to_all_single(out, inp, out_splits, in_splits)
        expect(out, torch.cat([torch.full((r + 1,), q * 10 + r).to(dt) for q in range(P)]),
               f"alltoall uneven {name}")
        outs = [torch.zeros(q + 2, dtype=dt) for q in range(P)]
        dist.all_to_all(outs, [torch.full((r + 2,), r * 10 + q).to(dt) for q in range(P)])
        for q in range(P):
            expect(outs[q], torch.full((q + 2,), q * 10 + r).to(dt), f"all_to_all list {name}")
        # reduce_scatter (list) and _reduce_scatter_base
        if dt != torch.bool:
            out = torch.zeros(n, dtype=dt)
            dist.reduce_scatter(out, [value(r, n, dt, salt=q) for q in range(P)])
            want = sum(value(q, n, torch.int64, salt=r) for q in range(P))
            expect(out, want.to(dt), f"reduce_scatter {name}")
            out = torch.zeros(n, dtype=dt)
            whole = torch.cat([value(r, n, dt, salt=q) for q in range(P)])
            keep = whole.clone()
            dist._reduce_scatter_base(out, whole)
            expect(out, want.to(dt), f"_reduce_scatter_base {name}")
            expect(whole, keep, f"_reduce_scatter_base leaves the input {name}")
    # bool: the logical reductions
    t = torch.tensor([r == 0, True, False, r % 2 == 1])
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    expect(t, torch.tensor([True, True, False, P > 1]), "all_reduce bool max")
    # send / recv around the ring, isend/irecv, and recv from any source
    nxt, prv = (r + 1) % P, (r - 1) % P
    if P > 1:
        req = dist.isend(value(r, n, torch.float32), dst=nxt, tag=3)
        got = torch.zeros(n)
        dist.recv(got, src=prv, tag=3)
        req.wait()
        expect(got, value(prv, n, torch.float32), "send/recv ring")
        if r == 0:
            seen = set()
            for _ in range(P - 1):
                got = torch.zeros(1)
                src = dist.recv(got)  # any source
                expect(got, torch.tensor([float(src)]), "recv any source")
                seen.add(src)
            assert seen == set(range(1, P)), seen
        else:
            dist.send(torch.tensor([float(r)]), dst=0)
    # a large tensor (several MiB: the pipelined algorithms) and an empty one
    big = torch.full((3 << 20,), float(r + 1))
    dist.all_reduce(big)
    expect(big, torch.full((3 << 20,), float(P * (P + 1) // 2)), "all_reduce 12 MiB")
    empty = torch.zeros(0)
    dist.all_reduce(empty)
    # a non-contiguous tensor and one of several dimensions
    m = torch.arange(12, dtype=torch.float32).reshape(3, 4).t() * (r + 1)
    dist.all_reduce(m)
    expect(m, torch.arange(12, dtype=torch.float32).reshape(3, 4).t() * (P * (P + 1) // 2),
           "all_reduce non-contiguous")
    # coalesced forms
    ts = [torch.full((5,), float(r)), torch.full((2, 3), float(2 * r))]
    work = dist.all_reduce_coalesced(ts, async_op=True)
    work.wait()
    expect(ts[0], torch.full((5,), float(sum(range(P)))), "all_reduce_coalesced 0")
    expect(ts[1], torch.full((2, 3), float(2 * sum(range(P)))), "all_reduce_coalesced 1")
    outs = [[torch.zeros(2), torch.zeros(3)] for _ in range(P)]
    dist.all_gather_coalesced(outs, [torch.full((2,), float(r)), torch.full((3,), float(-r))])
    for q in range(P):
        expect(outs[q][0], torch.full((2,), float(q)), "all_gather_coalesced")
        expect(outs[q][1], torch.full((3,), float(-q)), "all_gather_coalesced")
    # List-form calls share the group's staging buffer: a large one, then smaller ones of other
    # dtypes, all queued before any is waited on, each with its own result.
    big = [torch.zeros(1000, dtype=torch.float64) for _ in range(P)]
    small = [torch.zeros(3, dtype=torch.int16) for _ in range(P)]
    piece = torch.zeros(5, dtype=torch.float16)
    works = [dist.all_gather(big, value(r, 1000, torch.float64), async_op=True),
             dist.all_gather(small, value(r, 3, torch.int16, salt=1), async_op=True),
             dist.reduce_scatter(piece, [value(r, 5, torch.float16, salt=q) for q in range(P)],
                                 async_op=True)]
    for w in works:
        w.wait()
    for q in range(P):
        expect(big[q], value(q, 1000, torch.float64), "all_gather after staging grew")
        expect(small[q], value(q, 3, torch.int16, salt=1), "all_gather in a grown staging")
    expect(piece, torch.stack([value(q, 5, torch.int64, salt=r) for q in range(P)]).sum(0)
           .to(torch.float16), "reduce_scatter in a grown staging")
    # objects, a subgroup, futures, barrier
    objs = [None] * P
    dist.all_gather_object(objs, {"rank": r})
    assert objs == [{"rank": q} for q in range(P)], objs
    sub = dist.new_group(list(range(0, P, 2)))
    if r % 2 == 0:
        t = torch.ones(4)
        dist.all_reduce(t, group=sub)
        expect(t, torch.full((4,), float(len(range(0, P, 2)))), "subgroup all_reduce")
    fut = dist.all_reduce(torch.ones(3), async_op=True).get_future()
    expect(fut.wait()[0], torch.full((3,), float(P)), "future")
    dist.barrier()
    print(f"rank {r}: {checks} checks passed", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
