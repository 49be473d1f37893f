"""What DDPG, TD3 and SAC share, as functions: batch preparation, n-step targets, the critic loss.

Each algorithm page (``ddpg.py``, ``td3.py``, ``sac.py``) states its losses and options; TD3 is
DDPG with twin critics, target smoothing (both brought by its agent) and other defaults, so it
subclasses DDPG. Everything here is small and stateless. The update loops avoid per-update Python
overhead: a ``[K, N]`` stack of replay batches is converted once (:func:`split_updates`), target
networks move with one fused op (:class:`~lightning_rl.algos.off_policy.SoftTargetUpdate`) and
metrics stay tensors until the end of a ``training_step``.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NamedTuple

import torch
from torch import nn

from lightning_rl.agents.base import AgentInputs, batch_size_of
from lightning_rl.algos.hparams import POSITIVE, hparam

__all__ = [
    "QpgBatch",
    "QpgHyperparameters",
    "as_tuple",
    "critic_loss",
    "frozen",
    "min_over",
    "n_step_target",
    "split_updates",
]


class QpgHyperparameters:
    """The hyperparameters DDPG, TD3 and SAC share beyond the off-policy ones, declared once here
    (a mixin listed before :class:`~lightning_rl.algos.off_policy.OffPolicyAlgorithm`)."""

    q_learning_rate: float | None = hparam(
        None, "Critic learning rate; None: ``learning_rate``.", check=POSITIVE)
    reward_scale: float = hparam(1.0, "Factor on rewards (returns) in the target.", check=POSITIVE)
    q_target_clip: float | None = hparam(
        None, "Clip targets to ``+-q_target_clip``; None for no clipping.", check=POSITIVE)
    bootstrap_timelimit: bool = hparam(True, "Bootstrap the target after time-outs (terminations never).")
    pretrain_uniform: bool | None = True


class QpgBatch(NamedTuple):
    """One replay batch of ``N`` transitions, ready for a Q-value policy-gradient loss.

    Fields:
        inputs: ``AgentInputs`` at ``t`` (float32 observation ``[N, ...]``).
        action: Action taken at ``t`` in network scale ``[-1, 1]`` ``[N, A]``.
        return_: ``reward_scale`` times the n-step return ``[N]``.
        bootstrap: Discount of the bootstrap value ``[N]``: ``discount ** n_steps``, or 0 after
            a termination (and after a time-out unless ``bootstrap_timelimit``).
        next_inputs: ``AgentInputs`` at ``t + n_steps`` (the bootstrap state).
    """

    inputs: AgentInputs
    action: torch.Tensor
    return_: torch.Tensor
    bootstrap: torch.Tensor
    next_inputs: AgentInputs


def split_updates(agent: Any, batch: Any, reward_scale: float, bootstrap_timelimit: bool) -> list[QpgBatch]:
    """Turn a stack of ``K`` replay batches (``SamplesFromReplay`` ``[K, N]``) into ``K`` :class:`QpgBatch`.

    All conversions (float32 observations, network-scale actions, bootstrap factors) run once
    on the whole stack; the per-update batches are views.

    Args:
        agent: A DDPG, TD3 or SAC agent (``to_agent_inputs``, ``from_env_action``).
        batch: ``SamplesFromReplay`` with leading ``[K, N]`` dims.
        reward_scale: Factor on the n-step returns.
        bootstrap_timelimit: Bootstrap after time-outs (True) or treat them as terminations.

    Returns:
        ``K`` batches of ``N`` transitions.
    """
    inputs = agent.to_agent_inputs(*batch.agent_inputs)
    next_inputs = agent.to_agent_inputs(*batch.target_inputs)
    action = agent.from_env_action(batch.action)
    no_bootstrap = batch.done_n if bootstrap_timelimit else batch.done_n | batch.truncated_n
    bootstrap = batch.discount_n.to(action.dtype).masked_fill(no_bootstrap, 0.0)
    return_ = batch.return_.to(action.dtype)
    if reward_scale != 1.0:
        return_ = return_ * reward_scale
    columns = [_unbind(x) for x in (*inputs, action, return_, bootstrap, *next_inputs)]
    rows = zip(*columns, strict=False)  # absent inputs are Nones for ever
    return [QpgBatch(AgentInputs(*row[:3]), row[3], row[4], row[5], AgentInputs(*row[6:])) for row in rows]


def _unbind(x: Any) -> Iterable[Any]:
    """The ``K`` views ``x[k]`` of a ``[K, ...]`` tensor or namedarraytuple (dict and tuple
    observations: indexing one indexes every field); Nones (absent inputs) for ever."""
    if isinstance(x, torch.Tensor):
        return x.unbind(0)
    if isinstance(x, tuple):
        return [x[k] for k in range(batch_size_of(x))]
    return itertools.repeat(None)


def n_step_target(
    return_: torch.Tensor, bootstrap: torch.Tensor, next_value: torch.Tensor, q_target_clip: float | None
) -> torch.Tensor:
    """``y = return_ + bootstrap * next_value`` ``[N]``, clipped to ``+-q_target_clip`` (rlpyt)."""
    y = torch.addcmul(return_, bootstrap, next_value)
    if q_target_clip is not None:
        y = y.clamp(-q_target_clip, q_target_clip)
    return y


def critic_loss(q_values: Sequence[torch.Tensor], y: torch.Tensor) -> torch.Tensor:
    """``sum_i 0.5 * mean((y - Q_i)^2)`` over the critics (rlpyt's per-critic losses, summed)."""
    loss = 0.5 * torch.mean((y - q_values[0]) ** 2)
    for q in q_values[1:]:
        loss = loss + 0.5 * torch.mean((y - q) ** 2)
    return loss


def as_tuple(values: torch.Tensor | tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    """One critic's ``[N]`` values as a 1-tuple; twin critics' values as they are."""
    return (values,) if isinstance(values, torch.Tensor) else tuple(values)


def min_over(values: Sequence[torch.Tensor]) -> torch.Tensor:
    """Element-wise minimum over critics (the clipped double-Q estimate; a single critic as is)."""
    out = values[0]
    for v in values[1:]:
        out = torch.minimum(out, v)
    return out


@contextlib.contextmanager
def frozen(params: Sequence[nn.Parameter]) -> Iterator[None]:
    """Record forward passes with ``params`` as constants: the policy loss must not train critics.

    Cheaper than computing (and zeroing) the critics' gradients of the policy loss, and the
    graph it records gives exactly the policy's gradients.
    """
    for p in params:
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p in params:
            p.requires_grad_(True)
