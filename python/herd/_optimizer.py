"""herd.DistributedOptimizer: herd's modes under any torch optimizer.

    opt = herd.DistributedOptimizer(torch.optim.AdamW(groups, lr=1e-3), model=model)
    for x, y in loader:
        opt.zero_grad(); F.cross_entropy(model(x), y).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)   # the averaged gradient
        opt.step()                                                 # AdamW steps

How it works. A hook on every parameter hands its gradient to the job's mode executor
(worker/executor.h) as backward produces it, so WFBP and DeAR communicate while backward goes on.
When backward ends (a callback queued on autograd's engine, as DDP's reducer does) the exchange
completes and the mode's gradient lands in each parameter's .grad: the mean over the workers in
the collective modes and ps_ec, this worker's own gradient in the decentralized modes (after
the parameters were averaged with the neighbours'). The script may change it (clip, scale,
mask), and step() runs the wrapped torch optimizer on it: any torch.optim optimizer, several
parameter groups, LR schedulers, a class of the script's own.

Where a mode cannot apply a gradient the script changed after backward(), step() refuses the
change with what to do instead:
  - dear keeps its overlap: the mean of a bucket arrives during the next forward, just before the
    bucket's first layer runs, and the wrapped optimizer steps that bucket's parameters there
    (with the hyperparameters of the step() it belongs to; optimizers that update each parameter
    from its own gradient and state only, i.e. every torch.optim one but LBFGS; any other class
    steps at step() after the exchange completed). So after backward() .grad holds this worker's
    gradient, not the mean: `opt.synchronize()` completes the exchange first (the mean in .grad,
    for the iteration; the overlap of its all-gathers is lost), then clipping applies to the mean.
  - ps_sync and ps_async apply the job's optimizer on the shards from the gradients pushed when
    backward ended.

herd's state of the torch optimizer: its tensors (SGD's momentum buffers, Adam's moments and
step) are herd's optimizer slots, under herd's names, so checkpoints, mode switches (to and from
the shards' optimizer) and elastic rollbacks carry them.
"""

import contextlib
import math
import time
import warnings

import torch
from torch.autograd import Variable

from . import _herd
from . import _session as S
from ._collectives import Average, Compression, Sum

# Optimizers whose step updates each parameter from its own gradient and state only: dear
# steps them bucket by bucket, during the next forward.
_PER_PARAMETER = tuple(getattr(torch.optim, n) for n in (
    "SGD", "Adam", "AdamW", "Adagrad", "Adadelta", "Adamax", "RMSprop", "Rprop", "NAdam", "RAdam",
    "ASGD") if hasattr(torch.optim, n))

# torch's state keys that mean what herd's own optimizers' slots mean (optim::SlotKind): a mode
# switch to the shards' optimizer and back keeps them. Other keys are saved as "torch.<key>".
_SLOT_KINDS = {"momentum_buffer": "momentum", "exp_avg": "adam_m", "exp_avg_sq": "adam_v"}


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


def _shard_optimizer(optimizer):
    """What the shards' optimizer must be for `optimizer` (ps_sync, ps_async): (name, momentum,
    weight decay, betas, eps) per parameter group; ValueError for what the shards cannot run."""
    cls = type(optimizer)
    out = []
    for g in optimizer.param_groups:
        refused = [k for k in ("maximize", "nesterov", "amsgrad") if g.get(k, False)]
        if g.get("dampening", 0):
            refused.append(f"dampening={g['dampening']}")
        if cls is torch.optim.SGD:
            name = "momentum" if g["momentum"] > 0 else "sgd"
            entry = (name, float(g["momentum"]), float(g["weight_decay"]), None)
        elif cls in (torch.optim.Adam, torch.optim.AdamW):
            name = "adamw" if cls is torch.optim.AdamW else "adam"
            entry = (name, 0.0, float(g["weight_decay"]),
                     (float(g["betas"][0]), float(g["betas"][1]), float(g["eps"])))
        else:
            raise ValueError(
                f"the shards of ps_sync and ps_async apply the job's optimizer (sgd, momentum, "
                f"adam, adamw); {cls.__module__}.{cls.__name__} is none of them: train in a mode "
                f"where the workers apply the update (allreduce, dear, ps_ec, ...)")
        if refused:
            raise ValueError(f"the shards of ps_sync and ps_async cannot honour "
                             f"{cls.__name__}({', '.join(refused)}): train in a mode where the "
                             f"workers apply the update")
        out.append(entry)
    return out


class DistributedOptimizer(torch.optim.Optimizer):
    """Wraps a torch optimizer: herd exchanges the gradients in the job's mode, the wrapped
    optimizer applies them.

    optimizer: any torch.optim.Optimizer (any class, any number of parameter groups).
    named_parameters: (name, parameter) pairs, as Horovod takes them: the job's tensor names and
        order (forward order: DeAR's buckets follow it).
    model: the nn.Module (recommended): its parameter names and order, and its modules get
        forward pre-hooks (DeAR's wait before each layer). Without model or named_parameters,
        names are "param.I" and every pending update is applied when an iteration begins.
    compression: herd.Compression.none | fp16 | bf16: the gradient is rounded to that type before
        the exchange, as Horovod's compression rounds it (herd's modes move fp32).
    backward_passes_per_step: backward passes whose gradients accumulate (sum, as in .grad)
        before one exchange and step.
    op: herd.Average (the mean, default) or herd.Sum (the sum over the workers) in .grad.
    gradient_predivide_factor, num_groups, groups, sparse_as_dense: Horovod's, accepted; herd's
        fusion buckets group the tensors.
    """

    def __init__(self, optimizer, named_parameters=None, model=None,
                 compression=Compression.none, backward_passes_per_step=1, op=Average,
                 gradient_predivide_factor=1.0, num_groups=0, groups=None, sparse_as_dense=False):
        session = S._require()
        if S._optimizer is not None:
            raise RuntimeError("this process already has a herd.DistributedOptimizer; a worker "
                               "trains one model")
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise ValueError(f"expected a torch.optim optimizer, got {type(optimizer).__name__}")
        if isinstance(optimizer, DistributedOptimizer):
            raise ValueError("the optimizer is a herd.DistributedOptimizer already")
        if isinstance(optimizer, torch.optim.LBFGS):
            raise ValueError("herd cannot run torch.optim.LBFGS: its step() evaluates the loss "
                             "again (a closure that runs forward and backward several times per "
                             "step); herd exchanges one gradient per step")
        if int(backward_passes_per_step) < 1:
            raise ValueError(f"backward_passes_per_step must be >= 1, got {backward_passes_per_step}")
        if op is not Average and op is not Sum:
            raise ValueError(f"op must be herd.Average or herd.Sum, got {op!r}")
        if compression not in (Compression.none, Compression.fp16, Compression.bf16):
            raise ValueError(f"compression must be herd.Compression.none, fp16 or bf16, got "
                             f"{compression!r}")
        self._inner = optimizer
        # The torch optimizer's groups, shared: an LR scheduler on either object changes both.
        self.param_groups = optimizer.param_groups
        self.defaults = optimizer.defaults
        self.state = optimizer.state
        self._step_count = 0
        self._passes_per_step = int(backward_passes_per_step)
        self._op = op
        self._compression = compression
        # dear's bucket-by-bucket steps happen in the forward pre-hooks of the model's modules;
        # without model= there are none, and the whole step happens at step().
        self._per_parameter = isinstance(optimizer, _PER_PARAMETER) and model is not None

        params, seen = [], set()
        for g in optimizer.param_groups:
            for p in g["params"]:
                if id(p) not in seen:
                    seen.add(id(p))
                    params.append(p)
        if not params:
            raise ValueError("the optimizer has no parameters")
        if model is not None:
            pairs = list(model.named_parameters())
        elif named_parameters is not None:
            pairs = list(named_parameters)
            if len({n for n, _ in pairs}) != len(pairs):
                raise ValueError("named_parameters has duplicate names")
        else:
            pairs = None
        if pairs is not None:
            by_id = {id(p): n for n, p in pairs}
            missing = [i for i, p in enumerate(params) if id(p) not in by_id]
            if missing:
                what = "model's" if model is not None else "named_parameters'"
                raise ValueError(f"{len(missing)} of the optimizer's parameters are not the "
                                 f"{what} (the first is #{missing[0]}); give the optimizer "
                                 f"the model's parameters")
            order = {id(p): i for i, (_, p) in enumerate(pairs)}
            params.sort(key=lambda p: order[id(p)])  # the model's (registration) order
            names = [by_id[id(p)] for p in params]
        else:
            names = [f"param.{i}" for i in range(len(params))]
        for n, p in zip(names, params):
            if not p.requires_grad:
                raise ValueError(f"parameter '{n}' does not require grad; give the optimizer "
                                 f"only the parameters to train")
            _check_tensor(n, p)
        self._params = params
        self._names = names
        self._index = {id(p): t for t, p in enumerate(params)}
        self._addresses = [p.data_ptr() for p in params]
        self._model = model
        self._model_params = ([id(p) for p in model.parameters()] if model is not None else None)
        # Where the mean of a deferred (dear) step lands before the step that applies it.
        self._avg = [torch.zeros_like(p) for p in params]

        # Per iteration.
        self._iteration = 0
        self._in_iteration = False
        self._mode = ""
        self._passes = [0] * len(params)
        self._submitted = [False] * len(params)
        self._announced = [False] * len(params)
        self._backward_calls = 0
        self._callback_queued = False
        self._exchanged = False  # the mode's gradient is in .grad (or on its way: dear)
        self._synchronized = False  # synchronize() after backward: the mean is in .grad
        self._marks = None  # .grad as the exchange left it (to see the script's changes)
        self._pending = None  # dear: the hyperparameters of the step the deliveries belong to
        self._error = None
        self._samples = 0
        self._loss = float("nan")
        self._t_begin = None
        self._first_begin = None
        self._last_end = None
        self._total_samples = 0
        self._slot_signature = None
        # Tensors no forward pre-hook announced in iteration 0 (used outside their module, or not
        # at all): from then on they are announced when an iteration begins, before any forward.
        self._announce_at_begin = None
        self._prehooked = [False] * len(params)

        # Registers here at the latest (a worker declares the model right after): everything
        # before, the script's model and data included, stays out of a rejoin's wait.
        S._joined("herd.DistributedOptimizer()")
        session.use_external_optimizer([p.numel() for p in params])
        session.set_gradient_destinations([b.data_ptr() for b in self._avg])
        session.set_immediate_step(self._step_now)
        # The state a fresh step would create, now, so a resumed job's (or a joining worker's)
        # optimizer state has a place to land before the first step.
        self._precreate_state()
        self._register_slots()
        # A resumed job's parameters are written into these tensors here (the checkpoint's).
        # Each tensor's parameter group's rate (as a multiple of group 0's, which the pushes to
        # the shards carry) and weight decay, where they differ: the layout carries them, so
        # the shards of ps_sync and ps_async apply a no-decay group as the workers do.
        self._group_of = {}
        for i, g in enumerate(optimizer.param_groups):
            for p in g["params"]:
                self._group_of.setdefault(id(p), i)
        self._lr_scales = self._group_lr_scales()
        g0 = optimizer.param_groups[0]
        hyper = []
        for p in params:
            g = optimizer.param_groups[self._group_of[id(p)]]
            scale = self._lr_scales[self._group_of[id(p)]]
            wd = g.get("weight_decay")
            hyper.append((None if scale == 1.0 else scale,
                          None if wd is None or wd == g0.get("weight_decay") else float(wd)))
        session.attach([_herd.TensorArg(n, p.data_ptr(), p.numel(), list(p.shape), scale, wd)
                        for n, p, (scale, wd) in zip(names, params, hyper)], 0)
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
            for module in model.modules():
                own = [self._index[id(p)] for p in module.parameters(recurse=False)
                       if id(p) in self._index]
                if own:
                    self._handles.append(module.register_forward_pre_hook(
                        self._make_pre_hook(own)))
            self._handles.append(model.register_forward_pre_hook(self._count_samples))
        S._optimizer = self

    # --- herd's view of the torch optimizer's state -------------------------------------------

    def _precreate_state(self):
        """The state torch's SGD (momentum, no dampening) and Adam/AdamW create at their first
        step, created now with the same values (zeros), so herd can restore a checkpoint's or a
        live worker's state into it before the first step. Other classes create theirs at
        their first step; their state is herd's from then on."""
        inner = self._inner
        for g in inner.param_groups:
            for p in g["params"]:
                st = inner.state[p]
                if st:
                    continue
                if type(inner) is torch.optim.SGD and g["momentum"] > 0 and not g["dampening"]:
                    st["momentum_buffer"] = torch.zeros_like(p)
                elif type(inner) in (torch.optim.Adam, torch.optim.AdamW) and \
                        not g.get("capturable", False) and not g.get("fused", False):
                    st["step"] = torch.tensor(0.0)
                    st["exp_avg"] = torch.zeros_like(p)
                    st["exp_avg_sq"] = torch.zeros_like(p)
                    if g.get("amsgrad", False):
                        st["max_exp_avg_sq"] = torch.zeros_like(p)

    def _register_slots(self):
        """Tells herd where the torch optimizer's state tensors are (again when they moved)."""
        slots = []
        for t, p in enumerate(self._params):
            for key, v in self._inner.state.get(p, {}).items():
                if not torch.is_tensor(v) or v.dtype != torch.float32 or not v.is_contiguous() \
                        or v.device.type != "cpu":
                    continue
                if key == "step" and v.numel() == 1:
                    slots.append(("step", t, v.data_ptr(), 1))
                elif v.numel() == p.numel():
                    slots.append((_SLOT_KINDS.get(key, "torch." + key), t, v.data_ptr(),
                                  v.numel()))
        signature = tuple(s[2] for s in slots)
        if signature != self._slot_signature:
            S._session.set_optimizer_slots(slots)
            self._slot_signature = signature

    def _state_replaced(self):
        self._register_slots()

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
                        S._session.before_forward(t)
                self._apply_delivered()
            except S.Error as e:
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
        except S.Error as e:
            if not self._elastic or S._session.preempted:
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
                if not self._callback_queued:
                    # When this backward pass ends (every .grad accumulated): the exchange.
                    Variable._execution_engine.queue_callback(self._backward_done)
                    self._callback_queued = True
                passes = self._passes[t] + 1
                self._passes[t] = passes
                if passes > self._passes_per_step:
                    raise RuntimeError(
                        f"parameter '{self._names[t]}' got gradients from {passes} backward() "
                        f"passes in one step(), but backward_passes_per_step is "
                        f"{self._passes_per_step}: give DistributedOptimizer("
                        f"backward_passes_per_step={passes}) to accumulate them, or call step() "
                        f"after each backward()")
                if passes < self._passes_per_step:
                    return None  # autograd accumulates it into .grad
                g = grad if p.grad is None else p.grad + grad
                self._submit(t, g)
            except BaseException as e:  # a hook cannot raise into autograd: step() raises it
                self._error = e
            return None
        return hook

    def _submit(self, t, g):
        if g.dtype != torch.float32:
            raise ValueError(f"parameter '{self._names[t]}' got a {g.dtype} gradient; herd takes "
                             f"fp32")
        if self._compression is not Compression.none:
            g = g.to(self._compression.dtype).to(torch.float32)
        if not g.is_contiguous():
            g = g.contiguous()
        if not self._announced[t]:
            # A pending (dear) update of t must land before its next gradient.
            self._announced[t] = True
            S._session.before_forward(t)
            self._apply_delivered()
        S._session.gradient_ready(t, g.data_ptr(), g.numel())
        self._submitted[t] = True

    def _backward_done(self):
        self._callback_queued = False
        if self._error is not None:
            return
        try:
            self._backward_calls += 1
            if self._backward_calls >= self._passes_per_step:
                self._exchange()
        except BaseException as e:
            self._error = e

    # --- the exchange ----------------------------------------------------------------------

    def _exchange(self):
        """Completes the iteration's exchange (EndBackward): parameters without a gradient count
        as zero; in the modes where the workers apply the update the mode's gradient lands in
        .grad (dear's arrives during the next forward)."""
        if self._exchanged:
            return
        s = S._session
        unused = []  # no gradient here this iteration: torch leaves .grad None for them
        for t, p in enumerate(self._params):
            if not self._submitted[t]:
                if p.grad is None:
                    unused.append(t)
                g = p.grad if p.grad is not None else torch.zeros_like(p)
                self._submit(t, g)
        s.set_learning_rate(float(self.param_groups[0]["lr"]))
        into_grad = not self._deferred() and not self._on_shards()
        if into_grad:
            for t, p in enumerate(self._params):
                if p.grad is None or not p.grad.is_contiguous() or p.grad.dtype != p.dtype or \
                        p.grad.shape != p.shape:
                    p.grad = torch.zeros_like(p)
            s.set_gradient_destinations([p.grad.data_ptr() for p in self._params])
        try:
            s.end_backward()
        finally:
            if into_grad:
                s.take_delivered()  # in .grad
                s.set_gradient_destinations([b.data_ptr() for b in self._avg])
        self._apply_delivered()  # dear: buckets of the last step no forward waited for
        if into_grad:
            # A parameter no worker had a gradient for keeps .grad None (the optimizer skips it,
            # as a single process's would); one another worker used gets the mean.
            for t in unused:
                p = self._params[t]
                if not bool(p.grad.any()):
                    p.grad = None
            if self._op is Sum:
                with torch.no_grad():
                    for p in self._params:
                        if p.grad is not None:
                            p.grad.mul_(s.size)
        self._exchanged = True
        self._marks = [None if p.grad is None else (id(p.grad), p.grad._version)
                       for p in self._params]

    def _deferred(self):
        return self._mode == "dear"

    def _on_shards(self):
        return _herd.Session.optimizer_on_shards(self._mode)

    def _apply_delivered(self):
        """dear: steps the wrapped optimizer on the buckets whose mean just arrived, with the
        hyperparameters of the step() they belong to."""
        delivered = S._session.take_delivered()
        if not delivered:
            return
        if self._pending is None:
            return  # a rollback discarded their step
        self._inner_step(delivered, self._pending)

    def _step_now(self, t):
        """dear: a checkpoint's cut or a mode switch flushed tensor t's mean inside
        begin_iteration, which saves or hands on the parameters right after: step it now."""
        if self._pending is not None:
            self._inner_step([t], self._pending)

    def _inner_step(self, tensors=None, hyper=None):
        """The wrapped optimizer's step on `tensors` (all: None) with their .grad from the
        exchange: the deferred means (dear) go in, the other parameters' gradients are hidden
        and put back, and `hyper` (a step()'s group settings) is the groups' for the step."""
        inner = self._inner
        saved_hyper = None
        if hyper is not None:
            saved_hyper = [{k: v for k, v in g.items() if k != "params"} for g in inner.param_groups]
            for g, h in zip(inner.param_groups, hyper):
                g.update(h)
        saved = None
        if tensors is not None:
            saved = [p.grad for p in self._params]
            chosen = set(tensors)
            for t, p in enumerate(self._params):
                p.grad = self._avg[t] if t in chosen else None
            if self._op is Sum:
                with torch.no_grad():
                    for t in chosen:
                        self._avg[t].mul_(S._session.size)
        try:
            with torch.no_grad():
                inner.step()
        finally:
            if saved is not None:
                for p, g in zip(self._params, saved):
                    p.grad = g
            if saved_hyper is not None:
                for g, h in zip(inner.param_groups, saved_hyper):
                    g.update(h)
        self._register_slots()

    def _changed(self):
        """The parameters whose .grad the script changed after backward()."""
        if self._marks is None:
            return []
        out = []
        for t, p in enumerate(self._params):
            mark = None if p.grad is None else (id(p.grad), p.grad._version)
            if mark != self._marks[t]:
                out.append(self._names[t])
        return out

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
            S._session.set_data_position(*self._position)
        try:
            mode = S._session.begin_iteration(self._iteration)
        except S.Error:
            if S._session.preempted:
                S._stop_preempted(self._iteration)
            raise
        # A mode switch flushed the executor before: dear's last buckets.
        self._apply_delivered()
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
        self._backward_calls = 0
        self._exchanged = False
        self._synchronized = False
        self._marks = None
        self._samples = 0
        self._t_begin = time.perf_counter()
        if self._first_begin is None:
            self._first_begin = self._t_begin
        announce = range(len(self._params)) if self._model is None else \
            (self._announce_at_begin or [])
        for t in announce:
            self._announced[t] = True
            S._session.before_forward(t)
        self._apply_delivered()

    def _check_mode(self):
        # ps_sync and ps_async apply the job's optimizer on the shards, at the learning rate
        # each push carries (this script's, read every step): the rest must be the job's.
        if not self._on_shards():
            return
        job = S._session.job_optimizer()
        groups = _shard_optimizer(self._inner)
        diff = []
        for i, (name, momentum, wd, adam) in enumerate(groups):
            where = f"parameter group {i}: " if len(groups) > 1 else ""
            if name != job["name"]:
                diff.append(f"{where}optimizer {name} (the job's: {job['name']})")
            if name == "momentum" and not math.isclose(momentum, job["momentum"], rel_tol=1e-6):
                diff.append(f"{where}momentum {momentum} (the job's: {job['momentum']})")
            # Group 0's decay is the job's; another group's travels with the layout.
            if i == 0 and not math.isclose(wd, job["weight_decay"], rel_tol=1e-6, abs_tol=1e-12):
                diff.append(f"{where}weight_decay {wd} (the job's: {job['weight_decay']})")
            if adam is not None and any(not math.isclose(a, b, rel_tol=1e-6) for a, b in
                                        zip(adam, (job["beta1"], job["beta2"], job["epsilon"]))):
                diff.append(f"{where}betas/eps {adam} (the job's: {(job['beta1'], job['beta2'], job['epsilon'])})")
        self._check_lr_scales(diff)
        if diff:
            raise ValueError(
                f"mode {self._mode} applies the job's optimizer on the shards, and this script's "
                f"differs: {'; '.join(diff)}. Give the job the same optimizer (herd local "
                f"--optimizer {groups[0][0]} ...) or train in a mode that applies it on the "
                f"workers")

    def _group_lr_scales(self):
        base = float(self._inner.param_groups[0]["lr"])
        return [1.0 if base == 0 or float(g["lr"]) == base else float(g["lr"]) / base
                for g in self._inner.param_groups]

    def _check_lr_scales(self, diff):
        """ps_sync, ps_async: each push carries group 0's rate and the layout each group's
        multiple of it, fixed when the optimizer was built; a schedule must keep the ratios."""
        now = self._group_lr_scales()
        for i, (a, b) in enumerate(zip(now, self._lr_scales)):
            if not math.isclose(a, b, rel_tol=1e-6):
                diff.append(f"parameter group {i}'s learning rate is {a:g} x group 0's, not "
                            f"{b:g} x as when the DistributedOptimizer was built (the shards "
                            f"apply one rate per push and each tensor's multiple of it)")

    def zero_grad(self, set_to_none=True):
        """The wrapped optimizer's zero_grad (None, torch 2's default, saves a pass)."""
        self._inner.zero_grad(set_to_none=set_to_none)

    def synchronize(self):
        """Completes the exchange in flight. After backward() and before step() (Horovod's
        use): the mode's gradient is in .grad from here on, also in dear (whose overlap of the
        all-gathers with the next forward is lost for this step), so the script may clip or
        scale the mean; then `with opt.skip_synchronize(): opt.step()` (or plain step()).
        Between iterations: every update in flight lands (dear applies them before each layer's
        next forward), so the parameters are final; evaluation under torch.no_grad(), finish()
        and broadcast_parameters call it."""
        if self._in_iteration:
            if self._exchanged and self._deferred() and not self._synchronized:
                self._flush_into_grad()
            return  # mid-forward: the parameters already hold what this forward needs
        if self._sampler is not None:
            # The next iteration's position: where a rollback that finds every live worker past
            # the last one goes on (a death at the very end runs nothing again).
            S._session.set_data_position(*self._position)
        try:
            S._session.flush()
            self._apply_delivered()
        except S.Error:
            if not self._elastic:
                raise
            # A membership change met dear's last all-gathers: the parameters go back to the
            # last iteration every live worker completed; the sampler gives its batches again.
            self._rollback()

    def _flush_into_grad(self):
        """dear, after backward(): the all-gathers of this iteration complete now and their
        means go into .grad."""
        changed = self._changed()
        if changed:
            raise ValueError(self._dear_refusal(changed))
        self._pending = None
        S._session.flush()
        S._session.take_delivered()
        with torch.no_grad():
            for t, p in enumerate(self._params):
                if self._op is Sum:
                    self._avg[t].mul_(S._session.size)
                if p.grad is None:
                    p.grad = self._avg[t].clone()
                else:
                    p.grad.copy_(self._avg[t])
        self._synchronized = True
        self._marks = None  # the script changes the mean from here on: step() applies it

    @contextlib.contextmanager
    def skip_synchronize(self):
        """Horovod's: step() inside it does not exchange again after synchronize() (herd's
        step() never exchanges twice; this is for Horovod's scripts)."""
        yield

    def _dear_refusal(self, changed):
        return (f"the script changed the gradient of {', '.join(changed[:3])}"
                f"{' and others' if len(changed) > 3 else ''} after backward(), but in mode dear "
                f"the mean over the workers arrives during the next forward (its overlap) and "
                f".grad holds this worker's own gradient: call opt.synchronize() after backward() "
                f"and before changing .grad (the mean is in .grad then; clip_grad_norm_ clips "
                f"it), or train in mode allreduce")

    def step(self, closure=None, loss=None):
        """Ends the iteration: the wrapped optimizer steps on the mode's gradient in .grad (as
        the script left it), and the iteration is reported. `loss` (optional, a number or a
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
            if not self._exchanged:
                self._exchange()  # no backward() ran (or its callback did not)
            self._raise_hook_error()
            if self._on_shards():
                changed = self._changed()
                if changed:
                    raise ValueError(
                        f"the script changed the gradient of {', '.join(changed[:3])}"
                        f"{' and others' if len(changed) > 3 else ''} after backward(), but "
                        f"mode {self._mode} applies the update on the shards from the gradients "
                        f"pushed when backward() ended: change gradients inside backward (a "
                        f"tensor hook), or train in a mode where the workers apply the update "
                        f"(ps_ec, allreduce, dear with synchronize(), ...)")
                # The shards applied the job's optimizer; the parameters hold the update.
                diff = []
                self._check_lr_scales(diff)
                if diff:
                    raise ValueError(f"mode {self._mode}: {diff[0]}")
            elif self._deferred() and not self._synchronized:
                changed = self._changed()
                if changed:
                    raise ValueError(self._dear_refusal(changed))
                hyper = [{k: v for k, v in g.items() if k != "params"}
                         for g in self._inner.param_groups]
                if self._per_parameter:
                    self._pending = hyper  # applied bucket by bucket in the next forward
                else:
                    self._pending = None
                    self._flush_into_grad()
                    self._inner_step()
            else:
                self._inner_step()
            if loss is not None:
                self._loss = float(loss.detach() if torch.is_tensor(loss) else loss)
            end = time.perf_counter()
            S._session.end_iteration(self._loss, 0.0, end - self._t_begin, self._samples)
        except S.Error:
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
        self._step_count += 1
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
        membership, restores the parameters (in place: the model's tensors hold them) and the
        optimizer's state (the torch optimizer's tensors are herd's slots) of the last commit;
        the next iteration is the first one to run again, at its data position. Raises the
        original error when no membership change is behind it."""
        self._error = None
        self._in_iteration = False
        self._pending = None
        iteration, epoch, offset = S._session.recover()
        S._session.take_delivered()
        then, now = self._lr_at_begin.get(iteration), self.param_groups[0]["lr"]
        if then is not None and then != now:
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
                except S.Error:
                    if not self._elastic:
                        raise
                    self._rollback()
                    continue
            at = self._position
            for _ in range(self._batches_taken):
                at = sampler._advance(at)
            first, count = S._session.data_slice(sampler.batch_size)
            self._batches_taken += 1
            return sampler._indices(at, first, count)

    def _raise_hook_error(self):
        if self._error is not None:
            e, self._error = self._error, None
            raise e

    def state_dict(self):
        return self._inner.state_dict()

    def load_state_dict(self, state_dict):
        self._inner.load_state_dict(state_dict)
        self._register_slots()

    def __repr__(self):
        return f"herd.DistributedOptimizer({self._inner!r})"
