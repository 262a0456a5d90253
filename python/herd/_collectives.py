"""Collectives of the script's own tensors and objects, Horovod's and herd's: allreduce,
allgather, broadcast, broadcast_object, broadcast_parameters, broadcast_optimizer_state, join.

They run over the job's communicator: a herd process group (the torch.distributed backend's,
python/c10d/) that every worker builds at its first collective, over herd's UCX communicator and
herd's collectives with the tuned decision table, so a tensor of any size moves at the
communicator's speed. Every worker calls them in the same order (a rank that calls another
collective, or the same one on another shape, is named in the error).

In an elastic job they go through the job's store at the scheduler instead, in chunks, and
carry on without a dead rank (a sum over the live workers): a communicator would break with the
first death, and the restarted worker's calls must meet the survivors'.
"""

import datetime
import math
import pickle

import numpy as np
import torch
import torch.distributed as dist
from torch._C._distributed_c10d import (AllgatherOptions, AllreduceOptions, BarrierOptions,
                                        BroadcastOptions)

from . import _herd
from . import _session as S


class _ReduceOp:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"herd.{self.name}"


Average = _ReduceOp("Average")
Sum = _ReduceOp("Sum")
Min = _ReduceOp("Min")
Max = _ReduceOp("Max")
Product = _ReduceOp("Product")
_TORCH_OPS = {"Sum": dist.ReduceOp.SUM, "Min": dist.ReduceOp.MIN, "Max": dist.ReduceOp.MAX,
              "Product": dist.ReduceOp.PRODUCT}


class Compression:
    """Horovod's gradient compression: `none`, or a cast to `fp16` / `bf16` for the exchange
    (the sum is taken in that type, as Horovod does) and back to the tensor's type."""

    class _Cast:
        def __init__(self, name, dtype):
            self.name, self.dtype = name, dtype

        def compress(self, tensor):
            if tensor.dtype.is_floating_point and self.dtype is not None:
                return tensor.to(self.dtype), tensor.dtype
            return tensor, None

        def decompress(self, tensor, ctx):
            return tensor.to(ctx) if ctx is not None else tensor

        def __repr__(self):
            return f"herd.Compression.{self.name}"

    none = _Cast("none", None)
    fp16 = _Cast("fp16", torch.float16)
    bf16 = _Cast("bf16", torch.bfloat16)


_group = None  # the process group of the script's collectives (non-elastic jobs)
_store_calls = 0  # the store path's calls so far: the same sequence on every rank
_STORE_CHUNK = 1 << 20  # bytes per key of the scheduler's store


def _elastic():
    return S._session.elastic


def _pg(call):
    """The job's process group for the script's collectives, built at the first call (every
    worker makes its first collective call at the same point of the program)."""
    global _group
    s = S._joined(call)
    if _group is None:
        timeout = float(S._setting("HERD_TIMEOUT", _herd.DEFAULTS["timeout_s"]))
        _group = _herd.create_process_group(
            dist.HashStore(), s.rank, s.size, timeout, "herd.collectives", [], s, True,
            0.0, S._env("HERD_CHECK_CALLS", "1") != "0")
    return _group


def _run(work):
    work.wait()


def _op(op, average):
    if op is None:
        op = Average if average is None or average else Sum
    if not isinstance(op, _ReduceOp):
        raise ValueError(f"op must be herd.Average, herd.Sum, herd.Min, herd.Max or "
                         f"herd.Product, got {op!r}")
    return op


def allreduce(tensor, average=None, name=None, op=None, compression=Compression.none,
              prescale_factor=1.0, postscale_factor=1.0):
    """The reduction of `tensor` over the workers (default: the mean; op=herd.Sum, Min, Max,
    Product), as a new tensor on every worker. `average=False` is herd.Sum (Horovod's older
    argument); `name` is accepted for Horovod's scripts and not needed (calls match in order)."""
    op = _op(op, average)
    t = tensor.detach()
    if prescale_factor != 1.0:
        t = t * prescale_factor
    S._joined("herd.allreduce()")
    if _elastic():
        return _store_allreduce(t, op)
    pg = _pg("herd.allreduce()")
    out, ctx = compression.compress(t.cpu().contiguous().clone())
    if op is Average:
        if out.dtype.is_floating_point:
            _run(pg.allreduce([out], _options(dist.ReduceOp.SUM)))
            out.div_(S._session.size)
        else:
            _run(pg.allreduce([out], _options(dist.ReduceOp.SUM)))
            out = torch.div(out, S._session.size, rounding_mode="floor")
    else:
        _run(pg.allreduce([out], _options(_TORCH_OPS[op.name])))
    out = compression.decompress(out, ctx)
    if postscale_factor != 1.0:
        out = out * postscale_factor
    return out.reshape(tensor.shape)


def allreduce_(tensor, average=None, name=None, op=None, compression=Compression.none):
    """allreduce() into `tensor` itself."""
    value = allreduce(tensor, average=average, op=op, compression=compression)
    with torch.no_grad():
        tensor.copy_(value)
    return tensor


def _options(op):
    o = AllreduceOptions()
    o.reduceOp = op
    return o


def allgather(tensor, name=None):
    """Every worker's `tensor` concatenated along the first dimension, in rank order (the
    first dimension may differ between workers; the others must not), as a new tensor."""
    s = S._joined("herd.allgather()")
    t = tensor.detach().cpu().contiguous()
    if t.dim() == 0:
        t = t.reshape(1)
    if _elastic():
        parts = _exchange(_next_tag("allgather"), pickle.dumps(t), -1)
        return torch.cat([pickle.loads(p) for p in parts])
    pg = _pg("herd.allgather()")
    rows = torch.tensor([t.shape[0]], dtype=torch.int64)
    all_rows = [torch.zeros(1, dtype=torch.int64) for _ in range(s.size)]
    _run(pg.allgather([all_rows], [rows], AllgatherOptions()))
    counts = [int(r.item()) for r in all_rows]
    most = max(counts)
    padded = torch.zeros((most,) + tuple(t.shape[1:]), dtype=t.dtype)
    padded[:t.shape[0]] = t
    out = torch.empty((s.size * most,) + tuple(t.shape[1:]), dtype=t.dtype)
    _run(pg._allgather_base(out, padded, AllgatherOptions()))
    return torch.cat([out[r * most:r * most + counts[r]] for r in range(s.size)])


def broadcast(tensor, root_rank, name=None):
    """`tensor` of worker `root_rank`, as a new tensor on every worker."""
    s = S._joined("herd.broadcast()")
    if not 0 <= root_rank < s.size:
        raise ValueError(f"root_rank {root_rank} is not a rank of this job (0..{s.size - 1})")
    t = tensor.detach().cpu().contiguous()
    if _elastic():
        got = _exchange(_next_tag("broadcast"), _to_bytes(t) if s.rank == root_rank else None,
                        root_rank)
        return torch.from_numpy(np.frombuffer(got[0], dtype=t.numpy().dtype).copy()).reshape(
            t.shape)
    out = t.clone()
    o = BroadcastOptions()
    o.rootRank = root_rank
    _run(_pg("herd.broadcast()").broadcast([out], o))
    return out


def broadcast_(tensor, root_rank, name=None):
    """broadcast() into `tensor` itself."""
    value = broadcast(tensor, root_rank)
    with torch.no_grad():
        tensor.copy_(value)
    return tensor


def broadcast_object(obj, root_rank=0, name=None):
    """`obj` of worker `root_rank` (anything pickle takes), on every worker."""
    s = S._joined("herd.broadcast_object()")
    payload = pickle.dumps(obj) if s.rank == root_rank else b""
    size = broadcast(torch.tensor([len(payload)], dtype=torch.int64), root_rank)
    data = torch.zeros(int(size.item()), dtype=torch.uint8)
    if s.rank == root_rank:
        data = torch.frombuffer(bytearray(payload), dtype=torch.uint8)
    data = broadcast(data, root_rank)
    return obj if s.rank == root_rank else pickle.loads(data.numpy().tobytes())


def allgather_object(obj, name=None):
    """Every worker's `obj`, as a list in rank order."""
    S._joined("herd.allgather_object()")
    payload = torch.frombuffer(bytearray(pickle.dumps(obj)), dtype=torch.uint8)
    sizes = allgather(torch.tensor([payload.numel()], dtype=torch.int64))
    data = allgather(payload)
    out, at = [], 0
    for n in sizes.tolist():
        out.append(pickle.loads(data[at:at + n].numpy().tobytes()))
        at += n
    return out


def broadcast_parameters(params, root_rank=0):
    """Sets every tensor of `params` (a state_dict, (name, tensor) pairs, or tensors) to root's,
    in place, so every worker starts from the same model."""
    if S._optimizer is not None:
        S._optimizer.synchronize()
    items = params.items() if hasattr(params, "items") else params
    tensors = [item[1] if isinstance(item, tuple) else item for item in items]
    tensors = [t for t in tensors if torch.is_tensor(t) and t.numel() > 0]
    s = S._joined("herd.broadcast_parameters()")
    if s.start_iteration > 0 and S._optimizer is not None:
        # Resumed, or joined a running elastic job: the parameters are the checkpoint's or the
        # live workers', already what every rank must hold (in the decentralized modes each
        # rank's own model, which a broadcast would overwrite). An elastic job's calls are
        # counted, so the script's later calls meet the others' under the same keys.
        global _store_calls
        if _elastic():
            _store_calls += len(tensors)
        return
    if _elastic():
        for tensor in tensors:
            broadcast_(tensor, root_rank)
        return
    # One broadcast of the flattened parameters per dtype (the communicator's fast path), then
    # back into each tensor.
    by_dtype = {}
    for t in tensors:
        by_dtype.setdefault(t.dtype, []).append(t)
    for group in by_dtype.values():
        flat = torch.cat([t.detach().reshape(-1).cpu() for t in group])
        flat = broadcast(flat, root_rank)
        at = 0
        with torch.no_grad():
            for t in group:
                t.copy_(flat[at:at + t.numel()].view(t.shape))
                at += t.numel()


def broadcast_optimizer_state(optimizer, root_rank=0):
    """Sets the optimizer's state (its state_dict: per-parameter state and the parameter groups'
    settings) to root's, as Horovod's hvd.broadcast_optimizer_state does."""
    inner = getattr(optimizer, "_inner", optimizer)
    state = broadcast_object(inner.state_dict() if S._joined(
        "herd.broadcast_optimizer_state()").rank == root_rank else None, root_rank)
    if S._session.rank != root_rank:
        inner.load_state_dict(state)
    if hasattr(optimizer, "_state_replaced"):
        optimizer._state_replaced()


def join(device=-1):
    """Waits until every worker called join() and returns the rank that called it last
    (Horovod's hvd.join()). herd's synchronous modes need every worker in every iteration, so a
    worker cannot go on alone: give every worker the same number of batches (DistributedSampler
    does, herd.ElasticSampler follows the live workers)."""
    s = S._joined("herd.join()")
    if S._optimizer is not None:
        S._optimizer.synchronize()
    import time
    stamps = allgather(torch.tensor([time.time()], dtype=torch.float64))
    return int(torch.argmax(stamps).item())


def barrier():
    """Waits until every worker reached it."""
    if _elastic():
        allreduce(torch.zeros(1))
        return
    _run(_pg("herd.barrier()").barrier(BarrierOptions()))


# --- the store path (elastic jobs) -------------------------------------------------------------

def _next_tag(what):
    global _store_calls
    _store_calls += 1
    return f"{what}-{_store_calls}"


def _to_bytes(t):
    return t.detach().cpu().contiguous().numpy().tobytes()


def _exchange(tag, data, root):
    """Every rank's bytes (root < 0), or the root's, through the job's store, in chunks, in rank
    order. In an elastic job the ranks the scheduler declared dead are left out."""
    s = S._require()
    chunks = max(1, math.ceil(len(data) / _STORE_CHUNK)) if data is not None else 0
    head = s.exchange(tag + "/n", str(chunks).encode() if data is not None else b"", root)
    counts = {r: int(h) for r, h in head.items()}
    parts = {r: [] for r in counts}
    for c in range(max(counts.values())):
        piece = data[c * _STORE_CHUNK:(c + 1) * _STORE_CHUNK] if data is not None and c < chunks \
            else b""
        got = s.exchange(f"{tag}/{c}", piece, root)
        for r in list(parts):
            if c < counts[r]:
                if r in got:
                    parts[r].append(got[r])
                else:
                    del parts[r]  # died between two chunks
    return [b"".join(parts[r]) for r in sorted(parts)]


def _store_allreduce(t, op):
    got = _exchange(_next_tag("allreduce"), _to_bytes(t.cpu()), -1)
    dtype = t.cpu().numpy().dtype
    values = [np.frombuffer(b, dtype=dtype).astype(np.float64) for b in got]
    if op is Average or op is Sum:
        total = sum(values)
        if op is Average:
            total = total / len(values)
    elif op is Min:
        total = np.minimum.reduce(values)
    elif op is Max:
        total = np.maximum.reduce(values)
    else:
        total = np.multiply.reduce(values)
    return torch.from_numpy(total.astype(dtype).reshape(tuple(t.shape)))
