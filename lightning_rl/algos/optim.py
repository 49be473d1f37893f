"""Optimizers and the one update path of every algorithm: any torch optimizer from the config, the
default fused Adam, the update (finite check, zero grads, backward, clip, step), the finite check
of the parameters, LR schedulers, and per-update metrics averaged once per step."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import pytorch_lightning as pl
import torch
from pytorch_lightning.cli import OptimizerCallable
from pytorch_lightning.plugins.precision import Precision
from pytorch_lightning.strategies import SingleDeviceStrategy

from lightning_rl.algos import private_fast_paths
from lightning_rl.data.arrays import non_finite_keys

__all__ = [
    "LRSchedulerCallable",
    "OptimizerCallable",
    "build_optimizer",
    "clip_grad_norm_",
    "direct_updates_safe",
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
    """``torch.nn.utils.clip_grad_norm_`` with its multi-tensor (``foreach``) kernels on CPU and
    CUDA: one norm kernel and one multiply for all gradients instead of one per tensor."""
    foreach = all(p.device.type in ("cpu", "cuda") for p in parameters)
    torch.nn.utils.clip_grad_norm_(parameters, max_norm, foreach=foreach or None)


def mean_metrics(names: Sequence[str], rows: list[torch.Tensor], prefix: str = "train/") -> dict[str, float]:
    """Average per-update metric rows (each a ``[len(names)]`` tensor) into ``{prefix + name: value}``
    (one host read for all of them)."""
    if not rows:
        return {}
    means = torch.stack(rows).mean(0).tolist()
    return {prefix + name: means[i] for i, name in enumerate(names)}


def all_finite(tensors: Sequence[torch.Tensor]) -> bool:
    """Whether no tensor holds a NaN or an infinity: one multi-tensor L1 norm over all, one host read.

    A NaN or an infinity anywhere makes the total norm non-finite; so does a sum of magnitudes
    beyond the dtype's range, which only weights near its largest value reach (an L2 norm would
    square them: float32 weights of 2e19 would overflow it).
    """
    if not tensors:
        return True
    return math.isfinite(torch.nn.utils.get_total_norm(list(tensors), norm_type=1.0, foreach=True).item())


def check_finite_parameters(module: Any, tensors: Sequence[torch.Tensor]) -> None:
    """Raise ``FloatingPointError`` naming ``module``'s parameters that hold a NaN or an infinity.

    Run after every training step (one sampler iteration): a finite loss can still give a
    non-finite gradient or step (too high a learning rate). Training stops there; checkpoints
    refuse non-finite weights, so ``last.ckpt`` stays the last finite one.

    Args:
        module: The LightningModule (its named parameters, counters and name for the message).
        tensors: Its floating-point parameters (:func:`all_finite` checks them).
    """
    if all_finite(tensors):
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
        direct: Bypass Lightning's per-update hook dispatch
            (:func:`~lightning_rl.algos.private_fast_paths.direct_update`); only where
            :func:`direct_updates_safe` said so and the private fast paths are enabled.

    Raises:
        FloatingPointError: If ``loss`` is NaN or infinite (nothing is stepped).
    """
    value = loss.item()  # one host read (a device sync on GPU, as bool() would be)
    if not math.isfinite(value):
        # Before backward and step: the weights stay those of the last finite update.
        raise FloatingPointError(
            f"{type(module).__name__}: non-finite loss {value} at update {module.train_state.updates + 1} "
            f"({module.global_env_steps} env steps); nothing was updated. Lower the learning rate, clip "
            "gradients (clip_grad_norm) or check the rewards' scale")
    if clip_grad_norm is None or isinstance(clip_grad_norm, (int, float)):
        clips: Sequence[float | None] = [clip_grad_norm] * len(optimizers)
    else:
        clips = clip_grad_norm
    if direct and private_fast_paths.enabled:
        private_fast_paths.direct_update(optimizers, loss, clips)
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
