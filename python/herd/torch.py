"""herd.torch: train your own PyTorch model with herd, in every mode; Horovod's API beside
herd's own; and backend="herd" for torch.distributed.

    import torch, herd.torch as herd
    herd.init()                                     # opens the job the environment names
    model = MyNet()                                 # (model and data first: see init())
    opt = herd.DistributedOptimizer(torch.optim.AdamW(model.parameters(), lr=1e-3),
                                    model=model)    # any torch optimizer
    herd.broadcast_parameters(model.state_dict(), root_rank=0)
    for x, y in loader:                             # this worker's part of the data
        opt.zero_grad(); loss = F.cross_entropy(model(x), y); loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)   # clips the averaged gradient
        opt.step()
    herd.finish(metrics={"test_accuracy": acc})     # reported in the job's summary

A Horovod script runs with its import changed (`import herd.torch as hvd`); a DDP script needs
only `import herd.torch` (or herd.distributed) and `init_process_group(backend="herd")`.
Reference: docs/python.md. The package's parts:

    _session      the job, its environment, rank/size/local_rank, state(), finish()
    _optimizer    DistributedOptimizer: herd's modes under any torch optimizer
    _collectives  allreduce, allgather, broadcast(_object), broadcast_parameters, join, ...
    _sampler      ElasticSampler: the data of an elastic job
    _backend      torch.distributed backend "herd" (registered on import)
"""

from . import _backend  # noqa: F401  registers backend="herd"
from ._collectives import (Average, Compression, Max, Min, Product, Sum, allgather,
                           allgather_object, allreduce, allreduce_, barrier, broadcast,
                           broadcast_, broadcast_object, broadcast_optimizer_state,
                           broadcast_parameters, join)
from ._optimizer import DistributedOptimizer
from ._sampler import ElasticSampler
from ._session import (Error, epoch_order, finish, in_job, init, is_initialized, iteration,
                       local_rank, local_size, mode, rank, rollbacks, shutdown, size,
                       start_iteration, state)

__all__ = [
    "init", "is_initialized", "shutdown", "in_job", "rank", "size", "local_rank", "local_size",
    "mode", "iteration", "start_iteration", "state", "rollbacks", "epoch_order", "finish",
    "DistributedOptimizer", "ElasticSampler", "Compression", "Average", "Sum", "Min", "Max",
    "Product", "allreduce", "allreduce_", "allgather", "allgather_object", "broadcast",
    "broadcast_", "broadcast_object", "broadcast_parameters", "broadcast_optimizer_state",
    "join", "barrier", "Error",
]
