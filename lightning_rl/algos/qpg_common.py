"""What DDPG, TD3 and SAC share: the module base, batch preparation, n-step targets, critic losses,
target updates.

Each algorithm page (``ddpg.py``, ``td3.py``, ``sac.py``) states its losses and options.
:class:`QpgAlgorithm` holds the options and set-up all three have (target updates, reward scale,
clipping, time-limit bootstrapping, pretraining actions); SAC keeps its own update loop, and TD3
is DDPG with twin critics and other defaults, so it inherits DDPG's loop and losses. The other
pieces are small and stateless (but for :class:`SoftTargetUpdate`, which caches the tensor lists
of the target networks). The update loops avoid per-update Python overhead: a
``[K, N]`` stack of replay batches is converted once (:func:`split_updates`), target networks
move with one fused ``torch._foreach_lerp_`` and metrics stay tensors until the end of a
``training_step``.
"""

from __future__ import annotations

import contextlib
import itertools
import math
from typing import Any, Iterable, Iterator, NamedTuple, Sequence

import torch
from torch import nn

from lightning_rl.agents.base import AgentInputs, BaseAgent
from lightning_rl.algos.base import make_optimizer
from lightning_rl.algos.off_policy import OffPolicyAlgorithm
from lightning_rl.samplers.base import BaseSampler

__all__ = [
    "QpgAlgorithm",
    "QpgBatch",
    "SoftTargetUpdate",
    "as_tuple",
    "check_qpg_args",
    "critic_loss",
    "frozen",
    "make_adam",
    "min_over",
    "n_step_target",
    "split_updates",
]


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
    no_bootstrap = batch.done_n if bootstrap_timelimit else batch.done_n | batch.timeout_n
    bootstrap = batch.discount_n.to(action.dtype).masked_fill(no_bootstrap, 0.0)
    return_ = batch.return_.to(action.dtype)
    if reward_scale != 1.0:
        return_ = return_ * reward_scale
    columns = [_unbind(x) for x in (*inputs, action, return_, bootstrap, *next_inputs)]
    return [QpgBatch(AgentInputs(*row[:3]), row[3], row[4], row[5], AgentInputs(*row[6:])) for row in zip(*columns)]


def _unbind(x: torch.Tensor | None) -> Iterable[torch.Tensor | None]:
    """The ``K`` views ``x[k]`` of a ``[K, ...]`` tensor; Nones (absent inputs) for ever."""
    return x.unbind(0) if isinstance(x, torch.Tensor) else itertools.repeat(None)


def n_step_target(batch: QpgBatch, next_value: torch.Tensor, q_target_clip: float | None) -> torch.Tensor:
    """``y = return_ + bootstrap * next_value`` ``[N]``, clipped to ``+-q_target_clip`` (rlpyt)."""
    y = torch.addcmul(batch.return_, batch.bootstrap, next_value)
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


class SoftTargetUpdate:
    """``target <- tau * online + (1 - tau) * target`` for all target networks in one fused op.

    Caches the tensor lists of ``agent.target_pairs()`` (built at the first call, after the
    Trainer placed the model); :meth:`reset` drops them (call it when tensors may have been
    replaced, e.g. at ``on_train_start``). Integer buffers are copied.
    """

    def __init__(self) -> None:
        self._lists: tuple[list[torch.Tensor], ...] | None = None

    def reset(self) -> None:
        self._lists = None

    def _build(self, agent: Any) -> tuple[list[torch.Tensor], ...]:
        soft_dst, soft_src, hard_dst, hard_src = [], [], [], []
        for target, online in agent.target_pairs():
            t_state = dict(target.named_parameters())
            t_state.update(target.named_buffers())
            o_state = dict(online.named_parameters())
            o_state.update(online.named_buffers())
            if t_state.keys() != o_state.keys():
                raise ValueError(f"target network does not match its online network: {sorted(t_state ^ o_state)}")
            for name, dst in t_state.items():
                src = o_state[name].detach()
                if dst.is_floating_point():
                    soft_dst.append(dst)
                    soft_src.append(src)
                else:
                    hard_dst.append(dst)
                    hard_src.append(src)
        return soft_dst, soft_src, hard_dst, hard_src

    @torch.no_grad()
    def __call__(self, agent: Any, tau: float) -> None:
        if self._lists is None:
            self._lists = self._build(agent)
        soft_dst, soft_src, hard_dst, hard_src = self._lists
        if tau == 1.0:
            torch._foreach_copy_(soft_dst, soft_src)
        else:
            torch._foreach_lerp_(soft_dst, soft_src, tau)
        if hard_dst:
            torch._foreach_copy_(hard_dst, hard_src)


def make_adam(params: Sequence[nn.Parameter], lr: float, eps: float = 1e-8) -> torch.optim.Adam:
    """Adam with the fused kernel on CPU and CUDA (see :func:`~lightning_rl.algos.base.make_optimizer`)."""
    return make_optimizer("adam", params, lr, eps)


def check_qpg_args(**values: Any) -> None:
    """Raise ``ValueError`` naming the first bad DDPG/TD3/SAC hyperparameter.

    Known names: ``target_update_tau`` in (0, 1]; ``target_update_interval``,
    ``policy_update_interval`` ints >= 1; learning rates, ``reward_scale``, ``clip_grad_norm``,
    ``q_target_clip`` and ``fixed_alpha`` positive (the last three may be None).
    """
    for name, value in values.items():
        if value is None and name in ("clip_grad_norm", "q_target_clip", "fixed_alpha", "q_learning_rate",
                                      "alpha_learning_rate"):
            continue
        if name == "target_update_tau":
            if not 0.0 < value <= 1.0:
                raise ValueError(f"target_update_tau must be in (0, 1], got {value}")
        elif name.endswith("_interval"):
            if int(value) != value or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value}")
        elif not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be a positive number, got {value}")


class QpgAlgorithm(OffPolicyAlgorithm):
    """Base of DDPG, TD3 and SAC (Q-value policy gradients): their shared options and set-up.

    Subclasses list every argument in their own signature (the CLI shows their defaults) and
    pass these by keyword; the rest go to :class:`~lightning_rl.algos.off_policy.OffPolicyAlgorithm`.

    Args:
        agent: A DDPG, TD3 or SAC agent (``set_min_itr_learn``, ``target_pairs``).
        sampler: Collects ``[T, B]`` batches.
        target_update_tau: Soft target update step tau in (0, 1].
        target_update_interval: Updates between target updates.
        reward_scale: Factor on rewards (returns) in the target.
        clip_grad_norm: Max gradient norm of each network; None for no clipping.
        q_target_clip: Clip targets to ``+-q_target_clip``; None for no clipping.
        bootstrap_timelimit: Bootstrap the target after time-outs (terminations never).
        pretrain_uniform: Act uniformly at random before ``min_steps_learn``; False: with the
            agent's ``pretrain_std`` noise (or its usual noise when that is None).
        **kwargs: :class:`~lightning_rl.algos.off_policy.OffPolicyAlgorithm`'s arguments.

    Raises:
        ValueError: Naming the first bad hyperparameter.
    """

    def __init__(
        self,
        agent: BaseAgent,
        sampler: BaseSampler,
        *,
        target_update_tau: float,
        target_update_interval: int,
        reward_scale: float,
        clip_grad_norm: float | None,
        q_target_clip: float | None,
        bootstrap_timelimit: bool,
        pretrain_uniform: bool,
        **kwargs: Any,
    ) -> None:
        super().__init__(agent, sampler, **kwargs)
        check_qpg_args(
            target_update_tau=target_update_tau, target_update_interval=target_update_interval,
            reward_scale=reward_scale, clip_grad_norm=clip_grad_norm, q_target_clip=q_target_clip,
        )
        self.target_update_tau = target_update_tau
        self.target_update_interval = target_update_interval
        self.reward_scale = reward_scale
        self.clip_grad_norm = clip_grad_norm
        self.q_target_clip = q_target_clip
        self.bootstrap_timelimit = bootstrap_timelimit
        self.pretrain_uniform = pretrain_uniform
        self.soft_target_update = SoftTargetUpdate()

    def setup(self, stage: str) -> None:
        if not self._sampler_ready:
            # Before the sampler forks its workers, so they pretrain too.
            min_itr = self.min_steps_learn // self.sampler.batch_spec.size
            self.agent.set_min_itr_learn(min_itr, uniform=self.pretrain_uniform)
        super().setup(stage)

    def on_train_start(self) -> None:
        super().on_train_start()
        self.soft_target_update.reset()

    def split_updates(self, batch: Any) -> list[QpgBatch]:
        """The ``K`` per-update batches of a ``[K, N]`` replay stack (see :func:`split_updates`)."""
        return split_updates(self.agent, batch, self.reward_scale, self.bootstrap_timelimit)
