"""herd's torch.distributed backend: `torch.distributed.init_process_group(backend="herd")`.

Importing herd.torch (or herd.distributed) registers it; an unchanged DDP or FSDP script then
only names it:

    import herd.distributed                      # or: import herd.torch
    dist.init_process_group("herd")              # env://, tcp://..., file://..., as with gloo
    model = DistributedDataParallel(model)

Every group torch makes (the default one and each new_group) is a herd process group
(python/c10d/process_group.cc): herd's communicator and collectives. In a herd job (`herd local
-- CMD`, herd's Kubernetes manifests: HERD_SCHEDULER and HERD_JOB set) the process registers as
one of the job's workers (its rank is herd's, and must be torch's), the default group
bootstraps through the job's store and the scheduler's failure detection aborts its
communicator; the job completes when every worker's script ends. Outside one it bootstraps
through torch's store, as gloo does, and the ranks heartbeat through that store.

Environment: HERD_HEARTBEAT_TIMEOUT_S (outside herd jobs: a rank silent this long is named as
gone; default 20), HERD_CHECK_CALLS=0 (skip the exchange of call descriptors before each
collective: no names for desynchronised ranks, one round trip less per call).
"""

import os

import torch.distributed as dist

from . import _herd
from . import _session as S

NAME = "herd"


def _create(opts, pg_options=None):
    timeout = opts.timeout.total_seconds() if hasattr(opts.timeout, "total_seconds") else \
        float(opts.timeout)
    ranks = list(opts.global_ranks_in_group)
    default_group = len(ranks) == 0
    session = None
    if S.in_job():
        if S._session is None:
            S.init()
        session = S._joined("torch.distributed.init_process_group(backend='herd')")
        if default_group and (opts.group_rank != session.rank or opts.group_size != session.size):
            raise RuntimeError(
                f"herd: torch.distributed's rank {opts.group_rank} of {opts.group_size} is not "
                f"this worker's rank in herd job '{session.job}' ({session.rank} of "
                f"{session.size}): start the script with `herd local` (which sets RANK and "
                f"WORLD_SIZE to herd's), or set RANK to HERD_RANK")
    heartbeat = float(os.environ.get("HERD_HEARTBEAT_TIMEOUT_S", "20"))
    return _herd.create_process_group(
        opts.store, opts.group_rank, opts.group_size, timeout, str(opts.group_id), ranks,
        session, default_group and session is not None, heartbeat,
        os.environ.get("HERD_CHECK_CALLS", "1") != "0")


def _monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
    """torch 1.13's dist.monitored_barrier refuses every backend but gloo by name; herd's
    groups implement it (rank 0 names the ranks that did not reach it), so it goes to them."""
    c10d = dist.distributed_c10d
    if group is not None and c10d._rank_not_in_group(group):
        return _torch_monitored_barrier(group, timeout, wait_all_ranks)
    if dist.get_backend(group) != NAME:
        return _torch_monitored_barrier(group, timeout, wait_all_ranks)
    pg = c10d._get_default_group() if group is None else group
    return pg.monitored_barrier(c10d.default_pg_timeout if timeout is None else timeout,
                                wait_all_ranks=wait_all_ranks)


_torch_monitored_barrier = dist.monitored_barrier


def register():
    """Registers backend "herd" with torch.distributed (once per process)."""
    if NAME.upper() in dist.Backend._plugins:
        return
    dist.Backend.register_backend(NAME, _create, extended_api=True)
    dist.monitored_barrier = _monitored_barrier
    dist.distributed_c10d.monitored_barrier = _monitored_barrier


register()
