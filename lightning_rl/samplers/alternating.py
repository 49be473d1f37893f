"""Alternating GPU samplers: two worker groups take turns so acting hides behind stepping."""

from __future__ import annotations

from lightning_rl.samplers.base import cpu_count, split_slices
from lightning_rl.samplers.worker import ParallelSamplerBase, _Group

__all__ = ["AlternatingSampler", "NoOverlapAlternatingSampler"]


class AlternatingSampler(ParallelSamplerBase):
    """Like :class:`~lightning_rl.samplers.gpu.GpuSampler`, with the envs split into two halves
    (each stepped by half of the workers) that alternate: while group 0's envs step, the main
    process computes group 1's actions, and the other way round (rlpyt ``AlternatingSampler``).
    When an env step takes about as long as a forward pass this nearly doubles throughput.

    ``batch_B`` and ``n_workers`` must be even (default ``n_workers``: twice the CPUs, at most
    ``batch_B``: the two workers of a pair share a core), and so must ``eval_n_envs``.

    The agent's ``step`` (and, with ``bootstrap_value``, ``value``) is called with ``[B / 2]``
    inputs, alternately for envs ``0 .. B/2 - 1`` and ``B/2 .. B - 1``; ``reset_one(b)`` gets
    the env's index over all ``B``, just before that half's next ``step``. A recurrent agent must
    therefore keep one state per half:
    :class:`~lightning_rl.agents.recurrent.AlternatingRecurrentAgentMixin` does.
    Feed-forward agents need nothing.

    Takes the arguments of :class:`~lightning_rl.samplers.base.BaseSampler`.
    """

    workers_act = False
    agent_in_shared_memory = False
    overlap = True

    @property
    def agent_step_B(self) -> int:
        """Each ``agent.step`` acts for one half of the envs."""
        return self.batch_spec.B // 2

    def _resolve_n_workers(self) -> int:
        if self.n_workers is not None:
            return self.n_workers
        return min(2 * cpu_count(), self.batch_spec.B) // 2 * 2

    def _check_workers_args(self) -> None:
        name = type(self).__name__
        if self.batch_spec.B % 2:
            raise ValueError(f"{name}: batch_B={self.batch_spec.B} must be even (two halves take turns)")
        if self.eval_n_envs % 2:
            raise ValueError(f"{name}: eval_n_envs={self.eval_n_envs} must be even (two halves take turns)")
        n = self._resolve_n_workers()
        if n % 2 or n < 2:
            raise ValueError(f"{name}: n_workers={n} must be even and >= 2 (two groups of workers)")
        super()._check_workers_args()

    def _layout(self) -> tuple[list[slice], list[slice], list[_Group]]:
        half_w = self.n_workers_ // 2
        B, E = self.batch_spec.B, self.eval_n_envs
        env_slices, eval_slices, groups = [], [], []
        for g in range(2):
            env_half = slice(g * B // 2, (g + 1) * B // 2)
            eval_half = slice(g * E // 2, (g + 1) * E // 2)
            for sl in split_slices(B // 2, half_w):
                env_slices.append(slice(env_half.start + sl.start, env_half.start + sl.stop))
            for sl in split_slices(E // 2, half_w):
                eval_slices.append(slice(eval_half.start + sl.start, eval_half.start + sl.stop))
            groups.append(_Group(list(range(g * half_w, (g + 1) * half_w)), env_half, eval_half))
        return env_slices, eval_slices, groups


class NoOverlapAlternatingSampler(AlternatingSampler):
    """:class:`AlternatingSampler` in which the two groups' envs never step at the same time: a
    group is released only after the other has finished its step (acting still overlaps the
    other group's stepping). For checking the alternating schedule's correctness and for envs
    that must not run concurrently (rlpyt ``NoOverlapAlternatingSampler``).
    """

    overlap = False
