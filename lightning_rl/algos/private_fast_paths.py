"""The update path's fast paths that use private torch and Lightning APIs, all in this one module.

Each has a public-API twin in :mod:`lightning_rl.algos.optim` that gives the same update bit for
bit (``tests/algos/test_private_fast_paths.py`` checks each pair), and each is kept only because
it pays on a small network (``benchmarks/ppo_cartpole.py``, ``benchmarks/sac_updates.py`` print the
measured gain with ``--no-fast-paths``):

* :func:`direct_update`: one update as Lightning's manual optimization makes it, without its
  per-update hook dispatch; calls ``LightningOptimizer._on_before_step``/``_on_after_step`` for
  the step bookkeeping (``global_step``) Lightning's loop keeps. Only where
  :func:`~lightning_rl.algos.optim.direct_updates_safe` says nothing would see the difference.
* :func:`adam_step`: ``torch.optim.Adam.step`` as the one fused kernel call it ends in
  (``torch._fused_adam_``), without its per-step Python.

A torch or Lightning upgrade that changes these internals shows in those tests; ``enabled = False``
(or ``LIGHTNING_RL_PRIVATE_FAST_PATHS=0`` in the environment) turns both off everywhere.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import torch
import torch.optim.optimizer as torch_optimizer

__all__ = ["adam_step", "direct_update", "enabled"]

#: Use the fast paths (False: the public-API path everywhere, same results).
enabled: bool = os.environ.get("LIGHTNING_RL_PRIVATE_FAST_PATHS", "1") != "0"

#: PyTorch's fused Adam kernels, which :func:`adam_step` calls directly (absent: it never does).
_FUSED_ADAM = getattr(torch, "_fused_adam_", None)
_FUSED_ADAMW = getattr(torch, "_fused_adamw_", None)
#: The optimizer classes whose step is ``Adam.step`` (AdamW is Adam with decoupled weight decay).
_ADAMS = tuple(c for c in (torch.optim.Adam, torch.optim.AdamW) if c.step is torch.optim.Adam.step)


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
            params = groups[0]["params"] if len(groups) == 1 else [p for g in groups for p in g["params"]]
            torch.nn.utils.clip_grad_norm_(params, clip, foreach=params[0].device.type in ("cpu", "cuda") or None)
    for optimizer, inner in zip(optimizers, inners, strict=True):
        # The manual-optimization loop's own step bookkeeping (global_step, profiler).
        optimizer._on_before_step()
        if not adam_step(inner):
            inner.step()
        optimizer._on_after_step()


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
    if not enabled or type(optimizer) not in _ADAMS or _FUSED_ADAM is None or _FUSED_ADAMW is None:
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
