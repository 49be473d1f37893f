"""The parallel-CPU sampler: worker processes step their envs and act with the shared agent."""

from __future__ import annotations

from lightning_rl.samplers.worker import ParallelSamplerBase

__all__ = ["CpuSampler"]


class CpuSampler(ParallelSamplerBase):
    """Each of ``n_workers`` forked processes owns a contiguous slice of the envs, runs the
    agent's forward pass for them with the shared-memory model, and writes its columns of the
    shared ``[T, B]`` buffer (rlpyt ``CpuSampler``).

    The agent is initialized with ``share_memory=True`` before the fork, so workers act with the
    newest weights once the algorithm has called ``agent.sync_shared_memory()``. Each worker's
    copy of the agent acts on its own ``[B / n_workers]`` envs: recurrent state is per worker and
    ``reset_one`` receives the env's index within the worker's slice. Agents with a
    ``collector_initialize(global_B, env_ranks)`` method (per-env epsilon) get the worker's
    env ranks. Workers run one torch thread each and are seeded per worker, so stochastic
    agents draw different random numbers than the serial sampler (deterministic agents give
    identical batches).

    Takes the arguments of :class:`~lightning_rl.samplers.base.BaseSampler`. A failing, dead or
    hung worker (``step_timeout``) raises and stops the sampler: see
    :class:`~lightning_rl.samplers.worker.ParallelSamplerBase`.
    """

    workers_act = True
    agent_in_shared_memory = True
