"""The parallel-GPU sampler: workers step envs, the main process acts for all of them."""

from __future__ import annotations

from lightning_rl.samplers.worker import ParallelSamplerBase

__all__ = ["GpuSampler"]


class GpuSampler(ParallelSamplerBase):
    """Worker processes only step envs; the main process runs one ``agent.step`` per time step
    for all ``B`` envs, on the agent's device (a GPU under a GPU trainer), as an action server
    (rlpyt ``GpuSampler``).

    Per step: workers write observations to the shared ``[B]`` step buffer and release their
    ``obs_ready`` semaphore; the main process waits for all of them, calls ``reset_one(b)`` for
    envs whose episode ended, acts, writes the actions into the shared batch and releases
    ``act_ready``. The agent is not put in shared memory and is stepped with the full batch, so
    its recurrent state and ``reset_one`` indexes are over all ``B`` envs, as in the serial
    sampler; a deterministic agent gives the serial sampler's batches exactly.

    Takes the arguments of :class:`~lightning_rl.samplers.base.BaseSampler`. A failing, dead or
    hung worker (``step_timeout``) raises and stops the sampler: see
    :class:`~lightning_rl.samplers.worker.ParallelSamplerBase`.
    """

    workers_act = False
    agent_in_shared_memory = False
