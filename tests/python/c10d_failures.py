#!/usr/bin/python3
"""The failures backend="herd" must name, as test_herd_distributed.py provokes them:

  --scenario desync-shape   rank 1 all-reduces another shape than the others
  --scenario desync-op      rank 1 broadcasts where the others all-reduce
  --scenario die            rank --victim exits (os._exit) after --after all-reduces
  --scenario stop           rank --victim stops itself (SIGSTOP) after --after all-reduces
  (under `herd local --`: the same, env://; outside: --init-method file://... --rank R)

Every rank that survives writes DIR/rank-R.json: {"error": the message it raised, "raised_at":
time.time() when it did}; the victim writes the time it left.
"""
import argparse
import json
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

import herd.distributed  # noqa: F401


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--scenario", required=True)
    p.add_argument("--init-method", default="env://")
    p.add_argument("--rank", type=int, default=-1)
    p.add_argument("--world-size", type=int, default=-1)
    p.add_argument("--victim", type=int, default=2)
    p.add_argument("--after", type=int, default=5)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    kw = {"rank": args.rank, "world_size": args.world_size} if args.rank >= 0 else {}
    dist.init_process_group("herd", init_method=args.init_method, **kw)
    r = dist.get_rank()
    result = {"rank": r}

    def write():
        with open(os.path.join(args.out, f"rank-{r}.json"), "w") as f:
            json.dump(result, f)

    try:
        if args.scenario == "desync-shape":
            dist.all_reduce(torch.ones(12 if r == 1 else 10, 4))
        elif args.scenario == "desync-op":
            if r == 1:
                dist.broadcast(torch.ones(10), src=0)
            else:
                dist.all_reduce(torch.ones(10))
        else:
            for i in range(10 ** 6):
                if r == args.victim and i == args.after:
                    result["left_at"] = time.time()
                    write()
                    if args.scenario == "die":
                        os._exit(1)
                    os.kill(os.getpid(), signal.SIGSTOP)
                dist.all_reduce(torch.ones(1 << 16))
        result["error"] = None
    except Exception as e:  # what the survivors raise
        result["error"] = f"{type(e).__name__}: {e}"
        result["raised_at"] = time.time()
    write()
    # A broken group is not destroyed cleanly (its peers are gone): leave at once.
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
