"""herd.torch: train your own PyTorch model with herd, in every mode, with a few lines.

    import torch, herd.torch as herd
    herd.init()                                     # opens the job the environment names
    model = MyNet()                                 # (model and data first: see below)
    opt = herd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
                                    model=model)
    herd.broadcast_parameters(model.state_dict(), root_rank=0)
    for x, y in loader:                             # this worker's part of the data
        opt.zero_grad(); loss = F.cross_entropy(model(x), y); loss.backward()
        opt.step(loss=loss)                         # loss= is optional: the progress line's
    herd.finish(metrics={"test_accuracy": acc})     # reported in the job's summary

How it works: a gradient hook on every parameter hands each gradient to the job's mode
executor (worker/executor.h) as backward produces it; a forward pre-hook on every module that
owns parameters is DeAR's wait before that layer; step() ends the iteration. herd applies the
update itself, in place, with the torch optimizer's settings translated (SGD, momentum, weight
decay, Adam); the learning rate is read at every step, so torch's LR schedulers work. The mode
is the job's, and may change between two iterations (a planned switch, `herd job set-mode`)
without the script knowing. Reference: docs/python.md.

Registration: herd.init() only opens the session (it waits for the job and reads its spec); the
process registers as one of the job's workers at its first call that needs the rank, the
membership or the job's state (rank(), size(), start_iteration(), state(), the
DistributedOptimizer, allreduce/broadcast, finish()). A restarted worker of an elastic job is
waited for by the live workers from its registration on, so a script that builds its model and
reads its data before those calls keeps that start-up out of their wait.

Elastic jobs (a worker dies, or a restarted one rejoins): take the data from herd.ElasticSampler
(a batch sampler over herd's global data order) and nothing else changes. A step() that a
membership change interrupts rolls the model and herd's optimizer state back to the last
iteration every live worker completed and returns without an update; the sampler then gives the
batches of the iterations to run again, split among the live workers.
"""

import atexit
import math
import os
import sys
import time
import traceback

import numpy as np
import torch

from . import _herd

Error = _herd.Error

__all__ = [
    "init", "rank", "size", "mode", "iteration", "start_iteration", "state", "DistributedOptimizer",
    "broadcast_parameters",
    "broadcast", "broadcast_", "allreduce", "finish", "epoch_order", "ElasticSampler",
    "rollbacks", "Error",
]

_session = None
_optimizer = None  # the DistributedOptimizer of this process (one per process)
_finished = False
_failed = False  # the script raised: the job was failed, never finished
_preempted = False  # the job stopped at its preemption checkpoint: exit 0 without finishing
_collectives = 0  # calls of allreduce/broadcast so far: the same sequence on every rank
_STORE_CHUNK = 1 << 20  # bytes per key of the scheduler's store


def _env(name, default=""):
    return os.environ.get(name, default)


def init():
    """Opens the job named by HERD_SCHEDULER and HERD_JOB (set by `herd local`): waits for it
    and reads its spec, without registering. The process registers as one of its workers
    (receives its rank, starts heartbeating) at the first call that needs it (rank(), size(),
    start_iteration(), state(), DistributedOptimizer, allreduce/broadcast, finish()), which
    raises herd.Error naming why when the job refuses it. Optional: HERD_NAME (the
    identity a restarted process takes its slot back with), HERD_RANK, HERD_TOKEN (or
    HERD_TOKEN_FILE, a file holding it, as `herd worker --token-file`), HERD_TLS=1,
    HERD_TLS_CA, HERD_SERVER_TLS=1, HERD_SERVER_CA (the shards' TLS), HERD_TRANSPORT
    (ucx|nccl), HERD_THREADS (torch's intra-op threads), HERD_FUSION_THRESHOLD_KIB,
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
    options = {
        "scheduler": scheduler,
        "job": job,
        "name": _env("HERD_NAME"),
        "rank": int(_env("HERD_RANK")) if _env("HERD_RANK") else None,
        "token": _token(),
        "tls": _env("HERD_TLS") == "1",
        "tls_ca_file": _env("HERD_TLS_CA"),
        "transport": _env("HERD_TRANSPORT", "ucx"),
        "timeout_s": float(_env("HERD_TIMEOUT_S", "120")),
        "start_timeout_s": float(_env("HERD_START_TIMEOUT_S", "120")),
        "wait_for_job_s": float(_env("HERD_WAIT_FOR_JOB_S", "300")),
        "fusion_threshold_kib": int(_env("HERD_FUSION_THRESHOLD_KIB", "4096")),
        "tune_fusion": _env("HERD_TUNE_FUSION") == "1",
        "timeline_dir": _env("HERD_TIMELINE"),
        "metrics_listen": _env("HERD_METRICS_LISTEN"),
        "server_tls": _env("HERD_SERVER_TLS") == "1",
        "server_tls_ca_file": _env("HERD_SERVER_CA"),
        # Parsed as `herd worker --preempt-grace` parses it (300, 300s, 5m, 1m30s).
        "preempt_grace": _env("HERD_PREEMPT_GRACE", "60s"),
    }
    _session = _herd.Session(options)
    _install_exit_handlers()


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


# --- The optimizer --------------------------------------------------------------------------

_SUPPORTED = ("supported: torch.optim.SGD (momentum, weight_decay; no nesterov, dampening or "
              "maximize) and torch.optim.Adam (betas, eps, weight_decay; no amsgrad or maximize), "
              "with one parameter group")


def _translate(optimizer):
    """The herd optimizer (name, lr, momentum, weight_decay, beta1, beta2, eps) that makes the
    same update as `optimizer`; ValueError for what herd cannot honour."""
    cls = type(optimizer)
    if cls not in (torch.optim.SGD, torch.optim.Adam):
        raise ValueError(f"herd cannot apply {cls.__module__}.{cls.__name__}: {_SUPPORTED}")
    if len(optimizer.param_groups) != 1:
        raise ValueError(f"the optimizer has {len(optimizer.param_groups)} parameter groups "
                         f"(per-group settings); herd applies one setting to every parameter: "
                         f"{_SUPPORTED}")
    g = optimizer.param_groups[0]
    refused = []
    if g.get("maximize", False):
        refused.append("maximize=True")
    if cls is torch.optim.SGD:
        if g.get("nesterov", False):
            refused.append("nesterov=True")
        if g.get("dampening", 0) != 0:
            refused.append(f"dampening={g['dampening']}")
    else:
        if g.get("amsgrad", False):
            refused.append("amsgrad=True")
    if refused:
        raise ValueError(f"herd cannot honour {cls.__name__}({', '.join(refused)}): {_SUPPORTED}")
    if cls is torch.optim.SGD:
        name = "momentum" if g["momentum"] > 0 else "sgd"
        return (name, float(g["lr"]), float(g["momentum"]), float(g["weight_decay"]), 0.9, 0.999,
                1e-8)
    b1, b2 = g["betas"]
    return ("adam", float(g["lr"]), 0.0, float(g["weight_decay"]), float(b1), float(b2),
            float(g["eps"]))


def _check_tensor(name, p):
    if p.dtype != torch.float32:
        raise ValueError(f"parameter '{name}' is {p.dtype}; herd trains fp32 parameters")
    if p.device.type != "cpu":
        raise ValueError(f"parameter '{name}' is on {p.device}; herd's Python front end trains "
                         f"CPU parameters")
    if not p.is_contiguous():
        raise ValueError(f"parameter '{name}' is not contiguous (shape {tuple(p.shape)}, stride "
                         f"{p.stride()}); herd updates parameters in place in their memory: "
                         f"make it contiguous before building the DistributedOptimizer")


class DistributedOptimizer(torch.optim.Optimizer):
    """Wraps a torch optimizer: its settings are translated and herd applies the update.

    optimizer: torch.optim.SGD or Adam over the model's parameters, one parameter group.
    model: the nn.Module (recommended): its parameter names are the job's tensor names, and its
        modules get forward pre-hooks (DeAR's wait before each layer). Without it, names are
        "param.I" and every pending update is applied when an iteration begins.
    backward_passes_per_step: backward passes whose gradients accumulate (sum, as in .grad)
        before one step.
    """

    def __init__(self, optimizer, model=None, backward_passes_per_step=1):
        global _optimizer
        session = _require()
        if _optimizer is not None:
            raise RuntimeError("this process already has a herd.DistributedOptimizer; a worker "
                               "trains one model")
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise ValueError(f"expected a torch.optim optimizer, got {type(optimizer).__name__}")
        if int(backward_passes_per_step) < 1:
            raise ValueError(f"backward_passes_per_step must be >= 1, got {backward_passes_per_step}")
        self._inner = optimizer
        self._config = _translate(optimizer)
        # The torch optimizer's groups, shared: an LR scheduler on either object changes both.
        self.param_groups = optimizer.param_groups
        self.defaults = optimizer.defaults
        self.state = optimizer.state
        self._step_count = 0
        self._passes_per_step = int(backward_passes_per_step)

        params = list(optimizer.param_groups[0]["params"])
        if model is not None:
            by_id = {id(p): n for n, p in model.named_parameters()}
            missing = [i for i, p in enumerate(params) if id(p) not in by_id]
            if missing:
                raise ValueError(f"{len(missing)} of the optimizer's parameters are not the "
                                 f"model's (the first is #{missing[0]}); give the optimizer "
                                 f"model.parameters()")
            order = {id(p): i for i, (_, p) in enumerate(model.named_parameters())}
            params.sort(key=lambda p: order[id(p)])  # the model's (registration) order
            names = [by_id[id(p)] for p in params]
        else:
            names = [f"param.{i}" for i in range(len(params))]
        if not params:
            raise ValueError("the optimizer has no parameters")
        for n, p in zip(names, params):
            if not p.requires_grad:
                raise ValueError(f"parameter '{n}' does not require grad; give the optimizer "
                                 f"only the parameters to train")
            _check_tensor(n, p)
        self._params = params
        self._names = names
        self._addresses = [p.data_ptr() for p in params]
        self._model = model
        self._model_params = ([id(p) for p in model.parameters()] if model is not None else None)

        # Per iteration.
        self._iteration = 0
        self._in_iteration = False
        self._mode = ""
        self._passes = [0] * len(params)
        self._submitted = [False] * len(params)
        self._announced = [False] * len(params)
        self._error = None
        self._samples = 0
        self._loss = float("nan")
        self._t_begin = None
        self._t_backward = None
        self._first_begin = None
        self._last_end = None
        self._total_samples = 0
        # Tensors no forward pre-hook announced in iteration 0 (used outside their module, or not
        # at all): from then on they are announced when an iteration begins, before any forward.
        self._announce_at_begin = None
        self._prehooked = [False] * len(params)

        # Registers here at the latest (a worker declares the model right after): everything
        # before, the script's model and data included, stays out of a rejoin's wait.
        _joined("herd.DistributedOptimizer()")
        session.set_optimizer(*self._config)
        # A resumed job's parameters are written into these tensors here (the checkpoint's).
        session.attach([_herd.TensorArg(n, p.data_ptr(), p.numel(), list(p.shape))
                        for n, p in zip(names, params)], 0)
        # A worker that joined a running elastic job starts where the live workers go on.
        self._iteration = session.start_iteration
        # Elastic jobs (docs/python.md, "Elastic jobs"): the data position of the next iteration
        # (epoch, offset in herd's global order), kept when an ElasticSampler feeds the loop.
        self._elastic = session.elastic
        self._sampler = None
        self._position = tuple(session.start_position)
        # A worker that joined a running ps_async job gets the job's start position (no peer
        # hands it one): the sampler, which knows the dataset's size, moves it on this many
        # iterations when it first feeds the loop.
        self._position_behind = session.start_iteration - session.start_position_iteration
        self._batches_taken = 0  # the sampler's batches of the current iteration
        self._rollbacks = 0
        self._lr_at_begin = {}  # iteration -> the learning rate when it began (the last few)

        self._handles = []
        for t, p in enumerate(params):
            self._handles.append(p.register_hook(self._make_grad_hook(t)))
        if model is not None:
            index = {id(p): t for t, p in enumerate(params)}
            for module in model.modules():
                own = [index[id(p)] for p in module.parameters(recurse=False) if id(p) in index]
                if own:
                    self._handles.append(module.register_forward_pre_hook(
                        self._make_pre_hook(own)))
            self._handles.append(model.register_forward_pre_hook(self._count_samples))
        _optimizer = self

    # --- hooks -----------------------------------------------------------------------------

    def _count_samples(self, module, inputs):
        # The model's own pre-hook runs before its modules': it may begin the iteration.
        if torch.is_grad_enabled() and inputs and torch.is_tensor(inputs[0]) and inputs[0].dim():
            if not self._in_iteration and not self._begin_in_hook():
                return
            self._samples += int(inputs[0].shape[0])

    def _make_pre_hook(self, tensors):
        def hook(module, inputs):
            if not torch.is_grad_enabled():
                # Evaluation: the parameters must hold every update (dear defers them).
                self.synchronize()
                return
            if self._announce_at_begin is None:  # iteration 0 learns which tensors have one
                for t in tensors:
                    self._prehooked[t] = True
            if self._error is not None:
                return  # the iteration failed already: step() handles it
            if not self._in_iteration and not self._begin_in_hook():
                return
            announced = self._announced
            try:
                for t in tensors:
                    if not announced[t]:
                        announced[t] = True
                        _session.before_forward(t)
            except Error as e:
                if not self._elastic:
                    raise
                self._error = e  # a membership change: step() rolls back
        return hook

    def _begin_in_hook(self):
        """Begins the iteration from a forward hook. In an elastic job an error of herd is kept
        for step(), which rolls back, and the forward goes on without herd (False)."""
        try:
            self._begin_iteration()
            return True
        except Error as e:
            if not self._elastic or _session.preempted:
                raise
            self._error = e
            return False

    def _make_grad_hook(self, t):
        p = self._params[t]

        def hook(grad):
            if self._error is not None:
                return None
            try:
                if not self._in_iteration:
                    self._begin_iteration()
                passes = self._passes[t] + 1
                self._passes[t] = passes
                if passes < self._passes_per_step or self._submitted[t]:
                    return None  # autograd accumulates it into .grad
                g = grad if p.grad is None else p.grad + grad
                if g.dtype != torch.float32:
                    raise ValueError(f"parameter '{self._names[t]}' got a {g.dtype} gradient; "
                                     f"herd takes fp32")
                if not g.is_contiguous():
                    g = g.contiguous()
                self._submit(t, g)
            except BaseException as e:  # a hook cannot raise into autograd: step() raises it
                self._error = e
            return None
        return hook

    def _submit(self, t, g):
        if not self._announced[t]:
            # A pending (dear) update of t must land before its next gradient.
            self._announced[t] = True
            _session.before_forward(t)
        _session.gradient_ready(t, g.data_ptr(), g.numel())
        self._submitted[t] = True

    # --- the iteration ---------------------------------------------------------------------

    def _check_parameters(self):
        for t, p in enumerate(self._params):
            if p.data_ptr() != self._addresses[t] or not p.is_contiguous():
                raise ValueError(
                    f"parameter '{self._names[t]}' was reassigned or resized (its memory moved); "
                    f"herd updates the parameters in place: change them in place "
                    f"(with torch.no_grad(): p.copy_(...)), never assign p.data")
        if self._model is not None:
            now = [id(p) for p in self._model.parameters()]
            if now != self._model_params:
                raise ValueError("the model's parameters were replaced after the "
                                 "DistributedOptimizer was built (a new nn.Parameter assigned to a "
                                 "module); herd trains the parameters it was given: change them in "
                                 "place instead")

    def _begin_iteration(self):
        if self._in_iteration:
            return
        self._check_parameters()
        if self._sampler is not None:
            _session.set_data_position(*self._position)
        try:
            mode = _session.begin_iteration(self._iteration)
        except Error:
            if _session.preempted:
                _stop_preempted(self._iteration)
            raise
        if mode != self._mode:
            self._mode = mode
            self._check_mode()
        self._in_iteration = True
        self._batches_taken = 0
        if self._elastic:
            self._lr_at_begin[self._iteration] = self.param_groups[0]["lr"]
            self._lr_at_begin.pop(self._iteration - 4, None)
        self._passes = [0] * len(self._params)
        self._submitted = [False] * len(self._params)
        self._announced = [False] * len(self._params)
        self._samples = 0
        self._t_begin = time.perf_counter()
        if self._first_begin is None:
            self._first_begin = self._t_begin
        if self._model is None:
            for t in range(len(self._params)):
                self._announced[t] = True
                _session.before_forward(t)
        elif self._announce_at_begin:
            for t in self._announce_at_begin:
                self._announced[t] = True
                _session.before_forward(t)

    def _check_mode(self):
        # ps_sync and ps_async apply the job's optimizer on the shards, at the learning rate
        # each push carries (this script's, read every step): the rest must be the job's.
        if not _herd.Session.optimizer_on_shards(self._mode):
            return
        job = _session.job_optimizer()
        name, lr, momentum, wd = self._config[:4]
        mine = {"name": name, "lr": float(self.param_groups[0]["lr"]),
                "momentum": momentum if name == "momentum" else 0.0, "weight_decay": wd}
        diff = [f"{k} {mine[k]} (the job's: {job[k]})" for k in ("name", "momentum",
                                                                    "weight_decay")
                if (mine[k] != job[k] if k == "name" else not math.isclose(mine[k], job[k],
                                                                          rel_tol=1e-6))]
        if name == "adam" and (self._config[4:] != (0.9, 0.999, 1e-8)):
            diff.append("adam betas/eps other than the defaults")
        if diff:
            raise ValueError(
                f"mode {self._mode} applies the job's optimizer on the shards, and this script's "
                f"differs: {'; '.join(diff)}. Give the job the same optimizer (herd local "
                f"--optimizer {name}) or train in a mode that applies it on the workers")

    def zero_grad(self, set_to_none=True):
        # herd takes the gradients from the hooks; None (torch 2's default) saves a pass. The
        # parameters are the wrapped optimizer's (one group): dropping their .grad here is what
        # its zero_grad does, without its profiler range and grouping, once per iteration.
        if not set_to_none:
            self._inner.zero_grad(set_to_none=False)
            return
        for p in self._params:
            p.grad = None

    def synchronize(self):
        """Waits for every update in flight, so the parameters are final (dear applies an
        update before the layer's next forward). Evaluation under torch.no_grad() and finish()
        call it."""
        if self._in_iteration:
            return  # mid-iteration: the parameters already hold what this forward needs
        if self._sampler is not None:
            # The next iteration's position: where a rollback that finds every live worker past
            # the last one goes on (a death at the very end runs nothing again).
            _session.set_data_position(*self._position)
        try:
            _session.flush()
        except Error:
            if not self._elastic:
                raise
            # A membership change met dear's last all-gathers: the parameters go back to the
            # last iteration every live worker completed; the sampler gives its batches again.
            self._rollback()

    def step(self, closure=None, loss=None):
        """Ends the iteration: gradients not produced in it count as zero, the mode's
        exchange completes and herd applies the update. `loss` (optional, a number or a
        tensor) is what the progress line shows."""
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        try:
            self._raise_hook_error()
            if not self._in_iteration:
                self._begin_iteration()
            if self._announce_at_begin is None:
                self._announce_at_begin = [t for t, h in enumerate(self._prehooked) if not h]
            if not all(self._submitted):
                for t, p in enumerate(self._params):
                    if not self._submitted[t]:
                        g = p.grad if p.grad is not None else torch.zeros_like(p)
                        self._submit(t, g.contiguous())
            self._raise_hook_error()
            # Read by the executor at this step: applied here, or carried by the pushes to the
            # shards (ps_sync, ps_async).
            _session.set_learning_rate(float(self.param_groups[0]["lr"]))
            self._t_backward = time.perf_counter()
            _session.end_backward()
            if loss is not None:
                self._loss = float(loss.detach() if torch.is_tensor(loss) else loss)
            end = time.perf_counter()
            _session.end_iteration(self._loss, 0.0, end - self._t_begin, self._samples)
        except Error:
            self._in_iteration = False
            if not self._elastic:
                raise
            # An elastic job whose live workers changed: roll back (or raise the error itself
            # when no membership change is behind it) and return without an update.
            self._rollback()
            return loss
        except BaseException:
            self._in_iteration = False
            raise
        self._last_end = end
        self._total_samples += self._samples
        self._in_iteration = False
        self._iteration += 1
        if self._sampler is not None:
            for _ in range(self._passes_per_step):
                self._position = self._sampler._advance(self._position)
        return loss

    def _rollback(self):
        """Session::Recover after a failed call of an elastic job: waits for the scheduler's new
        membership, restores the parameters (in place: the model's tensors hold them) and
        herd's optimizer state of the last commit; the next iteration is the first one to run
        again, at its data position. Raises the original error when no membership change is
        behind it."""
        self._error = None
        self._in_iteration = False
        iteration, epoch, offset = _session.recover()
        then, now = self._lr_at_begin.get(iteration), self.param_groups[0]["lr"]
        if then is not None and then != now:
            import warnings
            warnings.warn(
                f"herd: rolled back to iteration {iteration}, which began at learning rate "
                f"{then}; the optimizer's rate is {now} now. A schedule stepped once per step() "
                f"counts the rolled-back steps, and workers may have rolled back different "
                f"numbers of them: set the rate from herd.iteration() in an elastic job "
                f"(docs/python.md, Elastic jobs)", RuntimeWarning)
        self._iteration = iteration
        self._position = (epoch, offset)
        self._position_behind = 0
        self._batches_taken = 0
        self._rollbacks += 1
        for p in self._params:  # the gradients of the iteration that did not complete
            p.grad = None

    def _next_batch(self, sampler, epoch):
        """The indices of this worker's next batch from `sampler` for the loop over `epoch`, or
        None when that epoch is done (the next iteration's position is in a later one)."""
        if self._sampler is None:
            self._sampler = sampler
            for _ in range(self._position_behind * self._passes_per_step):
                self._position = sampler._advance(self._position)
            self._position_behind = 0
        elif self._sampler is not sampler:
            raise ValueError("one herd.ElasticSampler feeds this worker's training; another one "
                             "was iterated before (evaluate with an ordinary sampler)")
        while True:
            if self._in_iteration:
                if self._batches_taken >= self._passes_per_step:
                    raise RuntimeError(
                        f"herd.ElasticSampler gives {self._passes_per_step} batch(es) per "
                        f"step() (backward_passes_per_step): call step() before the next batch. "
                        f"A DataLoader over it needs num_workers=0 (its workers would take "
                        f"batches ahead, before a rollback could change them)")
            else:
                if self._position[0] > epoch:
                    if self._elastic:
                        # The epoch's end: dear's last all-gathers complete here, so a
                        # membership change they meet rolls back into this epoch.
                        self.synchronize()
                        if self._position[0] <= epoch:
                            continue
                    return None
                try:
                    self._begin_iteration()
                except Error:
                    if not self._elastic:
                        raise
                    self._rollback()
                    continue
            at = self._position
            for _ in range(self._batches_taken):
                at = sampler._advance(at)
            first, count = _session.data_slice(sampler.batch_size)
            self._batches_taken += 1
            return sampler._indices(at, first, count)

    def _raise_hook_error(self):
        if self._error is not None:
            e, self._error = self._error, None
            raise e

    def state_dict(self):
        # Checkpoints: herd keeps the optimizer's state (momentum, moments) in its executors;
        # saving and restoring it goes through herd's checkpoints, not this dictionary.
        return self._inner.state_dict()

    def load_state_dict(self, state_dict):
        self._inner.load_state_dict(state_dict)

    def __repr__(self):
        return f"herd.DistributedOptimizer({self._inner!r})"


def _stop_preempted(iteration):
    """SIGTERM (a preemption, as for `herd worker`): the job saved its last checkpoint and
    stopped before `iteration`. The script ends here with status 0 and without finish(); the
    job resumes from the checkpoint (`herd local --resume DIR`)."""
    global _preempted
    _preempted = True
    print(f"herd: preempted: job stopped at its checkpoint before iteration {iteration}",
          file=sys.stderr, flush=True)
    raise SystemExit(0)


# --- the data of an elastic job ---------------------------------------------------------------

class ElasticSampler:
    """A batch sampler over herd's global data order that follows the job's live workers.

        sampler = herd.ElasticSampler(train_set, batch_size=64)   # instead of DistributedSampler
        loader = DataLoader(train_set, batch_sampler=sampler)      # num_workers=0
        for epoch in range(epochs):
            for x, y in loader:
                ...; opt.step()

    Iteration i of the job takes the global batch of batch_size x herd.size() samples at the
    job's data position (an epoch is a permutation of the dataset, herd.epoch_order, the same
    on every worker; the last partial global batch of an epoch is dropped); each worker gets
    its part: batch_size samples at rank x batch_size, or, after a worker died, an even share
    among the live workers, so the global batch (and the learning rate that goes with it) stays
    and every epoch still covers the whole training set. After a rollback the next batches are
    those of the iterations that run again; a worker that joins a running job starts at the
    live workers' position (the loops of the epochs before it give nothing). This is what the
    built-in C++ worker trains on (Session::DataSlice), bit for bit.

    dataset: a dataset (len()) or the number of samples. shuffle: herd's seeded permutation per
    epoch (False: 0..n-1 in order). seed: the permutation's seed (default: the job's).
    Each __iter__ is one epoch (set_epoch(e) names it, as with DistributedSampler). Build the
    herd.DistributedOptimizer first; one ElasticSampler feeds a worker's training.
    """

    def __init__(self, dataset, batch_size, shuffle=True, seed=None):
        n = dataset if isinstance(dataset, int) else len(dataset)
        if n < 1:
            raise ValueError(f"herd.ElasticSampler: the dataset is empty")
        if int(batch_size) < 1:
            raise ValueError(f"herd.ElasticSampler: batch_size must be >= 1, got {batch_size}")
        _require()
        self.count = int(n)
        self.batch_size = int(batch_size)
        self.shuffle = bool(shuffle)
        self.seed = seed
        self._epoch = None  # set_epoch's, for the next __iter__
        self._next_epoch = 0
        self._order = (None, None)  # (epoch, its permutation)

    def set_epoch(self, epoch):
        """The epoch the next iteration over the sampler is (as DistributedSampler.set_epoch);
        without it each __iter__ is the epoch after the previous one's."""
        self._epoch = int(epoch)

    def _global(self):
        return _joined("len(herd.ElasticSampler)").size * self.batch_size

    def __len__(self):
        """Batches of an epoch at the job's worker count (the last partial one dropped)."""
        return max(1, self.count // self._global())

    def __iter__(self):
        epoch = self._epoch if self._epoch is not None else self._next_epoch
        self._epoch = None
        self._next_epoch = epoch + 1
        if _optimizer is None:
            raise RuntimeError("build the herd.DistributedOptimizer before iterating a "
                               "herd.ElasticSampler: the batches follow its iterations")
        while True:
            indices = _optimizer._next_batch(self, epoch)
            if indices is None:
                return
            yield indices

    def _advance(self, at):
        """worker/data/epoch_order.cc Advance: the position one global batch later."""
        epoch, offset = at
        g = self._global()
        offset += g
        if offset + g > self.count and offset > 0:
            return (epoch + 1, 0)
        return (epoch, offset)

    def _indices(self, at, first, count):
        epoch, offset = at
        if self._order[0] != epoch:
            order = epoch_order(self.count, epoch, self.seed) if self.shuffle else \
                torch.arange(self.count, dtype=torch.int64)
            self._order = (epoch, order)
        positions = (offset + first + torch.arange(count, dtype=torch.int64)) % self.count
        return self._order[1][positions].tolist()


# --- collectives of the user's own tensors ----------------------------------------------------

def _next_tag(what):
    global _collectives
    _collectives += 1
    return f"{what}-{_collectives}"


def _to_bytes(t):
    return t.detach().cpu().contiguous().numpy().tobytes()


def _exchange(tag, data, root):
    """Every rank's bytes (root < 0), or the root's, through the job's store, in chunks, in rank
    order. In an elastic job the ranks the scheduler declared dead are left out."""
    s = _require()
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


def allreduce(tensor, average=True):
    """The sum (average=True: the mean) of `tensor` over the workers, as a new tensor. Every
    worker calls it in the same order. Through the scheduler: for metrics, not for models. In an
    elastic job, over the workers alive (a dead one is left out once the scheduler declared it
    dead)."""
    _joined("herd.allreduce()")
    t = tensor.detach().cpu()
    got = _exchange(_next_tag("allreduce"), _to_bytes(t), -1)
    dtype = t.numpy().dtype
    total = sum(np.frombuffer(b, dtype=dtype).astype(np.float64) for b in got)
    if average:
        total = total / len(got)
    return torch.from_numpy(total.astype(dtype).reshape(tuple(t.shape)))


def broadcast(tensor, root_rank):
    """`tensor` of worker `root_rank`, as a new tensor on every worker."""
    s = _joined("herd.broadcast()")
    if not 0 <= root_rank < s.size:
        raise ValueError(f"root_rank {root_rank} is not a rank of this job (0..{s.size - 1})")
    t = tensor.detach().cpu().contiguous()
    got = _exchange(_next_tag("broadcast"), _to_bytes(t) if s.rank == root_rank else None,
                    root_rank)
    return torch.from_numpy(np.frombuffer(got[0], dtype=t.numpy().dtype).copy()).reshape(t.shape)


def broadcast_(tensor, root_rank):
    """broadcast() into `tensor` itself."""
    value = broadcast(tensor, root_rank)
    with torch.no_grad():
        tensor.copy_(value)
    return tensor


def broadcast_parameters(params, root_rank=0):
    """Sets every tensor of `params` (a state_dict, (name, tensor) pairs, or tensors) to root's,
    in place, so every worker starts from the same model."""
    if _optimizer is not None:
        _optimizer.synchronize()
    items = params.items() if hasattr(params, "items") else params
    tensors = [item[1] if isinstance(item, tuple) else item for item in items]
    tensors = [t for t in tensors if torch.is_tensor(t) and t.numel() > 0]
    if _joined("herd.broadcast_parameters()").start_iteration > 0 and _optimizer is not None:
        # Resumed, or joined a running elastic job: the parameters are the checkpoint's or the
        # live workers', already what every rank must hold (in the decentralized modes each
        # rank's own model, which a broadcast would overwrite). The calls are counted, so the
        # script's later herd.allreduce() meets the others' under the same key.
        global _collectives
        _collectives += len(tensors)
        return
    for tensor in tensors:
        broadcast_(tensor, root_rank)


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
