"""Optimizers, built once for every algorithm: any torch optimizer from the config, the default
fused Adam, a cheap gradient-norm clip, and per-update metrics averaged once per step."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytorch_lightning as pl
import torch
import torch.optim.optimizer as torch_optimizer
from pytorch_lightning.cli import OptimizerCallable
from pytorch_lightning.plugins.precision import Precision
from pytorch_lightning.strategies import SingleDeviceStrategy

from lightning_rl.data.arrays import non_finite_keys

__all__ = [
    "LRSchedulerCallable",
    "OptimizerCallable",
    "build_optimizer",
    "clip_grad_norm_",
    "direct_update",
    "direct_updates_safe",
    "FiniteCheck",
    "adam_step",
    "all_finite",
    "check_finite_parameters",
    "mean_metrics",
    "step_lr_schedulers",
    "update_step",
    "with_lr_schedulers",
]

#: What ``lr_scheduler`` arguments accept: a torch LR scheduler class path with its ``init_args``
#: (LightningCLI builds a callable that takes the optimizer).
LRSchedulerCallable = Callable[[torch.optim.Optimizer], torch.optim.lr_scheduler.LRScheduler]

#: Lightning hooks around a manual update; direct updates need them all left as they are.
_UPDATE_HOOKS = ("on_before_backward", "on_after_backward", "on_before_optimizer_step")


def build_optimizer(
    optimizer: OptimizerCallable | None, params: Any, lr: float, eps: float = 1e-8
) -> torch.optim.Optimizer:
    """The one place optimizers are made: ``optimizer(params, lr=lr)``, or Adam when it is None.

    Args:
        optimizer: Any ``torch.optim`` optimizer from the config, as LightningCLI builds it from
            ``{class_path: torch.optim.RMSprop, init_args: {alpha: 0.99}}`` (or a
            ``functools.partial``); it gets the parameters and ``lr``. None: Adam with ``lr`` and
            ``eps``, with PyTorch's fused kernel on CPU and CUDA parameters (one kernel for all
            tensors instead of a Python loop over them; results differ from the loop's in the
            last bits only).
        params: The parameters (or parameter groups) to optimize.
        lr: Learning rate (the algorithm's ``learning_rate``; schedules scale it).
        eps: Adam's epsilon when ``optimizer`` is None.

    Raises:
        ValueError: If there are no parameters to optimize.
    """
    params = list(params)
    if not params:
        raise ValueError("no parameters to optimize: was the agent initialized (setup) before configure_optimizers?")
    if optimizer is not None and not callable(optimizer):
        raise ValueError(
            f"optimizer must be a torch optimizer class or callable (in YAML a class path such as "
            f"{{class_path: torch.optim.RMSprop, init_args: {{alpha: 0.99}}}}) or None for Adam, got {optimizer!r}"
        )
    if optimizer is not None:
        # LightningCLI's callable takes the parameters; the keyword reaches the optimizer class.
        return optimizer(params, lr=lr)  # type: ignore[call-arg]
    devices = {p.device.type for p in params if isinstance(p, torch.Tensor)}
    use_fused = bool(devices) and devices <= {"cpu", "cuda"}
    return torch.optim.Adam(params, lr=lr, eps=eps, fused=use_fused or None)


def clip_grad_norm_(parameters: Sequence[torch.Tensor], max_norm: float) -> None:
    """``torch.nn.utils.clip_grad_norm_`` (same result, bit for bit) in a few ops for one device.

    Gradients of mixed devices or dtypes go through the library function. On the CPU the scale
    factor is read back (no device to wait for) and the gradients are left alone when it is 1,
    where the library multiplies them by exactly 1.
    """
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return
    first = grads[0]
    if any(g.device != first.device or g.dtype != first.dtype for g in grads):
        torch.nn.utils.clip_grad_norm_(parameters, max_norm)
        return
    total = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
    coef = max_norm / (total + 1e-6)
    if first.device.type == "cpu" and coef.item() >= 1.0:  # False for a NaN norm: that one is multiplied
        return
    torch._foreach_mul_(grads, torch.clamp(coef, max=1.0))


#: PyTorch's fused Adam kernels, which :func:`adam_step` calls directly (absent: it never does).
_FUSED_ADAM = getattr(torch, "_fused_adam_", None)
_FUSED_ADAMW = getattr(torch, "_fused_adamw_", None)
#: The optimizer classes whose step is ``Adam.step`` (AdamW is Adam with decoupled weight decay).
_ADAMS = tuple(c for c in (torch.optim.Adam, torch.optim.AdamW) if c.step is torch.optim.Adam.step)


def adam_step(optimizer: torch.optim.Optimizer) -> bool:
    """``optimizer.step()`` for a fused ``torch.optim.Adam`` without its per-step Python; False
    (nothing done) where that would change anything, so the caller steps it the usual way.

    ``Adam.step`` spends most of its time on a small network in Python: its profiler range and
    hook loops, per-parameter state checks, grouping the tensors by device. This makes the calls
    ``Adam.step`` ends in (count the steps, one fused kernel per group), so the parameters and
    the state come out bit for bit the same, when
    - the optimizer is exactly ``Adam`` or ``AdamW``, with ``fused=True``;
    - every parameter has a dense gradient and initialized state (so the first step, which
      creates the state, always goes the usual way), and a group's share one device and dtype;
    - the hyperparameters are numbers, not tensors;
    - nothing hooks the step: no optimizer or global step hooks, no wrapper of ``step`` other
      than an LR scheduler's (whose note that the optimizer stepped is kept).
    """
    if type(optimizer) not in _ADAMS or _FUSED_ADAM is None or _FUSED_ADAMW is None:
        return False
    patched = vars(optimizer).get("step")
    # An LR scheduler wraps ``step`` to note that it ran; that note is kept, any other wrapper
    # makes the usual step run.
    if patched is not None and not getattr(patched, "_wrapped_by_lr_sched", False):
        return False
    if (optimizer._optimizer_step_pre_hooks or optimizer._optimizer_step_post_hooks
            or torch_optimizer._global_optimizer_pre_hooks or torch_optimizer._global_optimizer_post_hooks
            or getattr(optimizer, "grad_scale", None) is not None or getattr(optimizer, "found_inf", None) is not None):
        return False
    calls = []
    state = optimizer.state
    for group in optimizer.param_groups:
        params = group["params"]
        if not params:
            continue
        if (not group["fused"] or group["capturable"] or group["differentiable"]
                or not all(isinstance(x, (int, float)) for x in (group["lr"], group["eps"], group["weight_decay"],
                                                                  *group["betas"]))):
            return False
        grads = [p.grad for p in params]
        if any(g is None or g.is_sparse for g in grads) or any(p not in state for p in params):
            return False
        states = [state[p] for p in params]  # (``state`` is a defaultdict: no lookups before the check)
        if not all(states):
            return False
        first = params[0]
        if any(p.device != first.device or p.dtype != first.dtype or p.is_complex() for p in params):
            return False
        amsgrad = group["amsgrad"]
        calls.append((group, params, grads, [s["exp_avg"] for s in states], [s["exp_avg_sq"] for s in states],
                      [s["max_exp_avg_sq"] for s in states] if amsgrad else [], [s["step"] for s in states]))
    with torch.no_grad():
        for group, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps in calls:
            torch._foreach_add_(steps, 1)
            kernel = _FUSED_ADAMW if group.get("decoupled_weight_decay", False) else _FUSED_ADAM
            beta1, beta2 = group["betas"]
            kernel(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, amsgrad=group["amsgrad"],
                   lr=group["lr"], beta1=beta1, beta2=beta2, weight_decay=group["weight_decay"], eps=group["eps"],
                   maximize=group["maximize"], grad_scale=None, found_inf=None)
    if patched is not None:
        optimizer._opt_called = True  # type: ignore[attr-defined]
    return True


def mean_metrics(names: Sequence[str], rows: list[torch.Tensor], prefix: str = "train/") -> dict[str, float]:
    """Average per-update metric rows (each a ``[len(names)]`` tensor) into ``{prefix + name: value}``
    (one host read for all of them)."""
    if not rows:
        return {}
    means = torch.stack(rows).mean(0).tolist()
    return {prefix + name: means[i] for i, name in enumerate(names)}


def all_finite(tensors: Sequence[torch.Tensor]) -> bool:
    """Whether no tensor holds a NaN or an infinity: one fused norm over all, one host read.

    A NaN or an infinity anywhere makes the sum of the per-tensor norms non-finite; so does a norm
    that overflows, which only weights near the dtype's largest value reach.
    """
    if not tensors:
        return True
    return math.isfinite(torch.stack(torch._foreach_norm(list(tensors))).sum().item())


class FiniteCheck:
    """:func:`all_finite` over a fixed list of tensors, made cheap enough to run after every step.

    Float32/float64 tensors on the CPU are summed through NumPy views of their memory (a NaN or an
    infinity makes a sum non-finite, as it does a norm): on small tensors NumPy's per-array cost is
    a fraction of torch's per-op cost. The others (CUDA, half precision) go through
    :func:`all_finite`. The views are made again when a tensor's storage moves (``p.data = ...``).

    Args:
        tensors: The tensors to check, e.g. a module's floating-point parameters.
    """

    _HOST_DTYPES = (torch.float32, torch.float64)

    def __init__(self, tensors: Sequence[torch.Tensor]) -> None:
        self.tensors = list(tensors)
        self._make_views()

    def _make_views(self) -> None:
        self._storage = [t.data_ptr() for t in self.tensors]
        on_host = [t.device.type == "cpu" and t.dtype in self._HOST_DTYPES for t in self.tensors]
        self._host = [t.detach().numpy() for t, h in zip(self.tensors, on_host, strict=True) if h]
        self._device = [t for t, h in zip(self.tensors, on_host, strict=True) if not h]

    def __call__(self) -> bool:
        """Whether no tensor holds a NaN or an infinity (or a sum beyond the dtype's range)."""
        if [t.data_ptr() for t in self.tensors] != self._storage:
            self._make_views()
        return math.isfinite(sum(float(np.add.reduce(a, axis=None)) for a in self._host)) and all_finite(self._device)


def check_finite_parameters(module: Any, check: FiniteCheck) -> None:
    """Raise ``FloatingPointError`` naming ``module``'s parameters that hold a NaN or an infinity.

    Run after every training step (one sampler iteration): a finite loss can still give a
    non-finite gradient or step (too high a learning rate). Training stops there; checkpoints
    refuse non-finite weights, so ``last.ckpt`` stays the last finite one (row 14).

    Args:
        module: The LightningModule (its named parameters, counters and name for the message).
        check: A :class:`FiniteCheck` of its floating-point parameters, made once per fit.
    """
    if check():
        return
    bad = non_finite_keys(dict(module.named_parameters()))
    raise FloatingPointError(
        f"{type(module).__name__}: non-finite parameters after update {module.train_state.updates} "
        f"({module.global_env_steps} env steps): {bad[:5]}. Lower the learning rate or clip gradients "
        "(clip_grad_norm); the last checkpoint holds the last finite weights"
    )


def mean_over_ranks(trainer: Any, metrics: dict[str, Any]) -> dict[str, Any]:
    """``metrics`` (name -> number or one-element tensor, the same names on every rank) averaged
    over the DDP ranks with one all-reduce; as they are in one process."""
    if trainer.world_size <= 1 or not metrics:
        return metrics
    names = sorted(metrics)
    stacked = torch.stack([torch.as_tensor(metrics[k], dtype=torch.float64).reshape(()) for k in names])
    means = trainer.strategy.reduce(stacked.to(trainer.strategy.root_device), reduce_op="mean")
    return dict(zip(names, means.cpu().tolist(), strict=True))


def direct_updates_safe(module: pl.LightningModule, trainer: Any) -> bool:
    """Whether ``module``'s updates may skip Lightning's per-update hook dispatch unchanged: one
    device, 32-bit precision, and no module or callback hook around backward or the step."""
    strategy = trainer.strategy
    if type(strategy) is not SingleDeviceStrategy or type(strategy.precision_plugin) is not Precision:
        return False
    module_hooks = (*_UPDATE_HOOKS, "backward", "configure_gradient_clipping")
    if any(getattr(type(module), h) is not getattr(pl.LightningModule, h) for h in module_hooks):
        return False
    return all(getattr(type(c), h) is getattr(pl.Callback, h) for c in trainer.callbacks for h in _UPDATE_HOOKS)


def direct_update(optimizers: Sequence[Any], loss: torch.Tensor, clips: Sequence[float | None]) -> None:
    """What Lightning's manual optimization does for one update (zero grads, backward, clip each
    optimizer's parameters, step, ``global_step`` bookkeeping), without its hook dispatch.

    Args:
        optimizers: ``LightningOptimizer``s whose parameter sets ``loss`` trains (disjoint).
        loss: The scalar to minimize.
        clips: Max gradient norm per optimizer (None: no clipping).
    """
    inners = [optimizer.optimizer for optimizer in optimizers]
    for inner in inners:
        # What zero_grad(set_to_none=True) does, without its profiler range.
        for group in inner.param_groups:
            for p in group["params"]:
                p.grad = None
    loss.backward()
    for inner, clip in zip(inners, clips, strict=True):
        if clip is not None:
            groups = inner.param_groups
            clip_grad_norm_(groups[0]["params"] if len(groups) == 1 else [p for g in groups for p in g["params"]], clip)
    for optimizer, inner in zip(optimizers, inners, strict=True):
        # The manual-optimization loop's own step bookkeeping (global_step, profiler).
        optimizer._on_before_step()
        if not adam_step(inner):
            inner.step()
        optimizer._on_after_step()


def update_step(
    module: Any,
    optimizers: Sequence[Any],
    loss: torch.Tensor,
    clip_grad_norm: float | None | Sequence[float | None],
    direct: bool,
) -> None:
    """Zero the grads of ``optimizers``, backpropagate ``loss`` once, clip, step each optimizer.

    Args:
        module: The LightningModule (its ``manual_backward``/``clip_gradients`` when not direct).
        optimizers: The ``LightningOptimizer``s of ``module.optimizers()`` that ``loss`` trains
            (disjoint parameter sets).
        loss: The scalar to minimize.
        clip_grad_norm: Max gradient norm, applied to each optimizer's parameters separately;
            one value for all, a value per optimizer, or None for no clipping.
        direct: Bypass Lightning's per-update hook dispatch (:func:`direct_update`); only where
            :func:`direct_updates_safe` said so.

    Raises:
        FloatingPointError: If ``loss`` is NaN or infinite (nothing is stepped).
    """
    if not math.isfinite(loss.item()):  # one host read (a device sync on GPU, as bool() would be)
        # Before backward and step: the weights stay those of the last finite update.
        raise FloatingPointError(
            f"{type(module).__name__}: non-finite loss {float(loss)} at update {module.train_state.updates + 1} "
            f"({module.global_env_steps} env steps); nothing was updated. Lower the learning rate, clip "
            "gradients (clip_grad_norm) or check the rewards' scale")
    if clip_grad_norm is None or isinstance(clip_grad_norm, (int, float)):
        clips: Sequence[float | None] = [clip_grad_norm] * len(optimizers)
    else:
        clips = clip_grad_norm
    if direct:
        direct_update(optimizers, loss, clips)
        return
    for optimizer in optimizers:
        optimizer.zero_grad(set_to_none=True)
    module.manual_backward(loss)
    for optimizer, clip in zip(optimizers, clips, strict=True):
        if clip is not None:
            module.clip_gradients(optimizer, gradient_clip_val=clip, gradient_clip_algorithm="norm")
    for optimizer in optimizers:
        optimizer.step()


def with_lr_schedulers(optimizers: Any, lr_scheduler: LRSchedulerCallable | None) -> Any:
    """``optimizers`` as ``configure_optimizers`` returns them, each with ``lr_scheduler(optimizer)``
    (Lightning saves and restores its state with the checkpoint) when one is given."""
    if lr_scheduler is None:
        return optimizers
    listed = optimizers if isinstance(optimizers, list) else [optimizers]
    return [{"optimizer": o, "lr_scheduler": {"scheduler": lr_scheduler(o), "interval": "step"}} for o in listed]


def step_lr_schedulers(schedulers: Any) -> None:
    """Step the module's ``lr_schedulers()`` (one, a list, or None)."""
    for scheduler in schedulers if isinstance(schedulers, list) else [s for s in [schedulers] if s is not None]:
        scheduler.step()
