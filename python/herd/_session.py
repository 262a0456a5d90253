"""herd's session and environment: the job a process trains in, its rank and size, the values
it saves with checkpoints, and the end of its training. Shared by every part of the package
(the optimizer, the collectives, the sampler, the torch.distributed backend); the public names
are re-exported by herd.torch.

Registration: init() only opens the session (it waits for the job and reads its spec); the
process registers as one of the job's workers at its first call that needs the rank, the
membership or the job's state (rank(), size(), start_iteration(), state(), the
DistributedOptimizer, the collectives, init_process_group(backend="herd"), finish()). A
restarted worker of an elastic job is waited for by the live workers from its registration on,
so a script that builds its model and reads its data before those calls keeps that start-up out
of their wait.
"""

import atexit
import math
import os
import socket
import sys
import time
import traceback
import warnings

import torch

from . import _herd

Error = _herd.Error

_session = None
_optimizer = None  # the DistributedOptimizer of this process (one per process)
_finished = False
_failed = False  # the script raised: the job was failed, never finished
_preempted = False  # the job stopped at its preemption checkpoint: exit 0 without finishing
_local = None  # (local_rank, local_size), from the job's members once asked


def _env(name, default=""):
    return os.environ.get(name, default)


# The settings `herd worker` also takes have one environment name for both front ends: its
# flag's twin (`--timeout`: HERD_TIMEOUT; cli/env_twins.cc), so a pod configured for one is
# configured for the other. The names this package read before still work, with a warning.
RENAMED = {
    "HERD_TIMEOUT": "HERD_TIMEOUT_S",
    "HERD_START_TIMEOUT": "HERD_START_TIMEOUT_S",
    "HERD_WAIT_FOR_JOB": "HERD_WAIT_FOR_JOB_S",
    "HERD_FUSION_THRESHOLD": "HERD_FUSION_THRESHOLD_KIB",
    "HERD_SCHEDULER_TLS": "HERD_TLS",
    "HERD_SCHEDULER_CA": "HERD_TLS_CA",
}


def _setting(name, default=""):
    """The value of setting `name`: its environment variable, else its old name's (warned)."""
    if name in os.environ:
        return os.environ[name]
    old = RENAMED.get(name)
    if old is not None and old in os.environ:
        warnings.warn(f"{old} is the old name of {name} (the name `herd worker` reads too); "
                      f"set {name} instead", FutureWarning, stacklevel=3)
        value = os.environ[old]
        # HERD_WAIT_FOR_JOB_S was seconds, possibly fractional; the new name is a duration
        # as `herd worker --wait-for-job` takes it (300, 300s, 5m).
        return f"{value}s" if old == "HERD_WAIT_FOR_JOB_S" else value
    return default


def _switch(name):
    """A flag setting: on for 1, true, yes or on (as `herd worker`'s flags read it)."""
    return _setting(name).strip().lower() in ("1", "true", "yes", "on")


def options_from_env():
    """The session's options as the environment gives them (without HERD_SCHEDULER/HERD_JOB
    checks): what herd.init() passes to the session."""
    return {
        "scheduler": _env("HERD_SCHEDULER"),
        "job": _env("HERD_JOB"),
        "name": _env("HERD_NAME"),
        "host": _env("HERD_HOST") or socket.gethostname(),
        "rank": int(_env("HERD_RANK")) if _env("HERD_RANK") else None,
        "token": _token(),
        "tls": _switch("HERD_SCHEDULER_TLS"),
        "tls_ca_file": _setting("HERD_SCHEDULER_CA"),
        "transport": _env("HERD_TRANSPORT", "ucx"),
        "timeout_s": float(_setting("HERD_TIMEOUT", _herd.DEFAULTS["timeout_s"])),
        "start_timeout_s": float(_setting("HERD_START_TIMEOUT", _herd.DEFAULTS["start_timeout_s"])),
        # Parsed as `herd worker --wait-for-job` parses it (300, 300s, 5m, 1h30m).
        "wait_for_job": _setting("HERD_WAIT_FOR_JOB", _herd.DEFAULTS["wait_for_job"]),
        "fusion_threshold_kib": int(_setting("HERD_FUSION_THRESHOLD", "4096")),
        "tune_fusion": _switch("HERD_TUNE_FUSION"),
        "timeline_dir": _env("HERD_TIMELINE"),
        "metrics_listen": _env("HERD_METRICS_LISTEN"),
        "server_tls": _switch("HERD_SERVER_TLS"),
        "server_tls_ca_file": _env("HERD_SERVER_CA"),
        # Parsed as `herd worker --preempt-grace` parses it (300, 300s, 5m, 1m30s).
        "preempt_grace": _env("HERD_PREEMPT_GRACE", _herd.DEFAULTS["preempt_grace"]),
    }


def in_job():
    """Whether the environment names a herd job (HERD_SCHEDULER and HERD_JOB: `herd local --
    CMD`, herd's Kubernetes manifests)."""
    return bool(_env("HERD_SCHEDULER") and _env("HERD_JOB"))


def is_initialized():
    """Whether init() opened the job's session (Horovod's hvd.is_initialized)."""
    return _session is not None

def init():
    """Opens the job named by HERD_SCHEDULER and HERD_JOB (set by `herd local`): waits for it
    and reads its spec, without registering. The process registers as one of its workers
    (receives its rank, starts heartbeating) at the first call that needs it (rank(), size(),
    start_iteration(), state(), DistributedOptimizer, allreduce/broadcast, finish()), which
    raises herd.Error naming why when the job refuses it. Optional: HERD_NAME (the
    identity a restarted process takes its slot back with), HERD_RANK, HERD_TOKEN (or
    HERD_TOKEN_FILE, a file holding it, as `herd worker --token-file`), HERD_SCHEDULER_TLS=1,
    HERD_SCHEDULER_CA, HERD_SERVER_TLS=1, HERD_SERVER_CA (the shards' TLS), HERD_TRANSPORT
    (ucx|nccl), HERD_THREADS (torch's intra-op threads), HERD_FUSION_THRESHOLD (KiB),
    HERD_TUNE_FUSION=1, HERD_TIMELINE (a directory), HERD_METRICS_LISTEN (HOST:PORT: serve
    Prometheus metrics there, docs/metrics.md), HERD_PREEMPT_GRACE (SIGTERM: how long the job
    may take to checkpoint and stop, default 60s)."""
    global _session
    if _session is not None:
        return
    scheduler, job = _env("HERD_SCHEDULER"), _env("HERD_JOB")
    if not scheduler or not job:
        raise RuntimeError(
            "herd.init(): HERD_SCHEDULER and HERD_JOB are not set; start the script with "
            "`herd local --workers N --mode MODE -- python3 SCRIPT`, or set them to the "
            "scheduler's address and the job's name")
    if _env("HERD_THREADS"):
        torch.set_num_threads(int(_env("HERD_THREADS")))
    options = options_from_env()
    _session = _herd.Session(options)
    _install_exit_handlers()


def shutdown():
    """Horovod's hvd.shutdown(): finishes this worker's training (finish())."""
    finish()


def _token():
    """HERD_TOKEN, else the contents of HERD_TOKEN_FILE (a mounted Secret, as the Kubernetes
    manifests give every herd process), stripped of whitespace as `--token-file` reads it."""
    if _env("HERD_TOKEN") or not _env("HERD_TOKEN_FILE"):
        return _env("HERD_TOKEN")
    path = _env("HERD_TOKEN_FILE")
    try:
        with open(path) as f:
            token = f.read().strip()
    except OSError as e:
        raise RuntimeError(f"herd.init(): cannot read HERD_TOKEN_FILE {path}: {e.strerror}") \
            from None
    if not token:
        raise RuntimeError(f"herd.init(): the token file {path} (HERD_TOKEN_FILE) is empty")
    return token


def _require():
    if _session is None:
        raise RuntimeError("call herd.init() first")
    return _session


def _joined(call):
    """The session, this process registered in the job: `call` (e.g. "herd.rank()") is the
    first that needs it, and names itself in the herd.Error of a refused registration (the job
    ended, a rank that is no slot of it, a running job that takes no worker back...)."""
    s = _require()
    if not s.registered:
        s.register(call)
    return s




def rank():
    """This worker's rank, 0 .. size()-1 (registers the process, see init())."""
    return _joined("herd.rank()").rank


def size():
    """The job's number of workers (registers the process, see init())."""
    return _joined("herd.size()").size


def mode():
    """The mode of the current iteration (before the first: the job's first mode)."""
    s = _require()
    return s.mode or s.job_mode


def local_rank():
    """This worker's index among the job's workers on its host (Horovod's hvd.local_rank()):
    from the hosts the job's members registered with (HERD_HOST, else the host name), in rank
    order."""
    return _local_view()[0]


def local_size():
    """The number of the job's workers on this worker's host (Horovod's hvd.local_size())."""
    return _local_view()[1]


def _local_view():
    global _local
    if _local is None:
        s = _joined("herd.local_rank()")
        # Every worker's host once every worker registered (the job starts with all of them).
        deadline = time.monotonic() + float(
            _setting("HERD_START_TIMEOUT", _herd.DEFAULTS["start_timeout_s"]))
        while True:
            members = s.members()
            if all(name for _r, name, _h, _a in members) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        mine = s.host
        same = sorted(r for r, _name, host, _alive in members if host == mine)
        if s.rank not in same:  # the scheduler lists this worker under another host
            same = sorted(same + [s.rank])
        _local = (same.index(s.rank), len(same))
    return _local


def iteration():
    """The index of the next iteration: the optimizer steps completed (a resumed or joining
    worker counts from herd.start_iteration(); in an elastic job a rollback moves it back to the
    iteration that runs again)."""
    return _optimizer._iteration if _optimizer is not None else 0


def start_iteration():
    """The iteration this run begins at: 0, or the cut of the checkpoint the job resumes from
    (`herd local --resume DIR`, `herd job submit --resume`). A resumed script skips the batches
    before it; the model's parameters and herd's optimizer state (momentum, Adam, residuals)
    are the checkpoint's once the DistributedOptimizer is built."""
    return _joined("herd.start_iteration()").start_iteration


def state(**values):
    """Registers the script's own values to come back with a checkpoint (the epoch, the batch,
    the best accuracy so far: anything JSON can write) and returns what the job resumed with.

        saved = herd.state()                       # {} in a fresh run
        for epoch in range(saved.get("epoch", 0), epochs):
            ...
            herd.state(epoch=epoch + 1)            # as set before a checkpoint's iteration

    Each checkpoint holds the values as last set before its iteration began. At most 64 names
    of up to 64 characters, 64 KiB of JSON each (ValueError beyond, nothing changed)."""
    import json
    s = _joined("herd.state()")
    for name, value in values.items():
        try:
            text = json.dumps(value)
        except (TypeError, ValueError) as e:
            raise ValueError(f"herd.state({name}=...): not a JSON value: {e}") from None
        s.set_program_value(name, text)  # ValueError past the bounds
    return {k: json.loads(v) for k, v in s.resumed_program_values().items()}


def rollbacks():
    """How many times this worker rolled back after a membership change of an elastic job
    (each time step() returned without an update and herd.iteration() went back)."""
    return _optimizer._rollbacks if _optimizer is not None else 0


def epoch_order(count, epoch, seed=None):
    """The job's global data order of `epoch` (worker/data/epoch_order.h): a permutation of
    range(count), the same on every worker and at every worker count. Iteration i of an epoch
    takes the global batch [i*P*B, (i+1)*P*B) of it, worker r the B from i*P*B + r*B."""
    return torch.tensor(_herd.epoch_order(count, _require().seed if seed is None else seed, epoch),
                        dtype=torch.int64)



def _stop_preempted(iteration):
    """SIGTERM (a preemption, as for `herd worker`): the job saved its last checkpoint and
    stopped before `iteration`. The script ends here with status 0 and without finish(); the
    job resumes from the checkpoint (`herd local --resume DIR`)."""
    global _preempted
    _preempted = True
    print(f"herd: preempted: job stopped at its checkpoint before iteration {iteration}",
          file=sys.stderr, flush=True)
    raise SystemExit(0)



# --- the end ----------------------------------------------------------------------------------

def finish(metrics=None):
    """Ends this worker's training: every update applied, the result reported to the job, whose
    summary shows `metrics` (name -> number; "test_accuracy" and "loss" fill the summary's
    fields). The job completes when every worker has finished. In a job with a checkpoint
    directory the steps done so far are the job's planned iterations and its final checkpoint
    (parameters, herd's optimizer state, the values of herd.state() as set now) commits before
    this returns: a resume from it has nothing left to train (docs/python.md)."""
    global _finished
    s = _require()
    if _finished:
        return
    s = _joined("herd.finish()")
    metrics = {str(k): float(v) for k, v in (metrics or {}).items()}
    for k, v in metrics.items():
        if not math.isfinite(v):
            raise ValueError(f"metric '{k}' is {v}; metrics must be finite")
    o = _optimizer
    # This run's steps (a resumed run's result counts what it trained, as the built-in's does).
    iterations = o._iteration - s.start_iteration if o else 0
    seconds = (o._last_end - o._first_begin) if o and o._last_end else 0.0
    samples = o._total_samples if o else 0
    if o is not None:
        before = o._iteration
        o.synchronize()
        if o._iteration != before:
            raise RuntimeError(
                f"herd.finish(): a membership change met this worker's last iteration after its "
                f"loop ended; the job went back to iteration {o._iteration}, which this worker "
                f"can no longer train (take the data from a herd.ElasticSampler: its loop ends "
                f"only after the last iteration's updates completed)")
    loss = metrics.get("loss", o._loss if o else float("nan"))
    s.finish(iterations, loss if math.isfinite(loss) else 0.0,
             metrics.get("test_accuracy", -1.0), seconds,
             samples * s.size / seconds if seconds > 0 else 0.0, metrics)
    _finished = True


def _install_exit_handlers():
    previous = sys.excepthook

    def on_exception(kind, value, tb):
        # The script failed: the job fails, naming this worker and why, so no peer waits.
        global _failed
        _failed = True
        if _session is not None and not _finished:
            last = traceback.format_exception_only(kind, value)[-1].strip()
            try:
                _session.fail(f"the training script raised {last}")
            except Exception:  # the job may be gone already
                pass
        previous(kind, value, tb)

    sys.excepthook = on_exception

    def at_exit():
        # A script that ends without herd.finish() finishes with no metrics; one that is
        # ending because of an exception failed the job in on_exception already.
        if _session is not None and not _finished and not _failed and not _preempted:
            finish()

    atexit.register(at_exit)
