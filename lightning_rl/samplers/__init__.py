"""Samplers: collect ``[T, B]`` batches of agent-env interaction (serial, CPU, GPU, alternating, vector env)."""

from lightning_rl.samplers.alternating import AlternatingSampler, NoOverlapAlternatingSampler
from lightning_rl.samplers.base import (
    AgentSamples,
    AgentSamplesBsv,
    BaseSampler,
    BatchSpec,
    EnvSamples,
    Samples,
    StepBuffer,
)
from lightning_rl.samplers.collectors import EvalCollector, ResetCollector, WaitResetCollector
from lightning_rl.samplers.cpu import CpuSampler
from lightning_rl.samplers.errors import SamplerClosedError, SamplerStepTimeout, SamplerWorkerDied, SamplerWorkerError
from lightning_rl.samplers.gpu import GpuSampler
from lightning_rl.samplers.serial import SerialSampler
from lightning_rl.samplers.vector import VectorSampler
from lightning_rl.samplers.worker import ParallelSamplerBase

__all__ = [
    "AgentSamples",
    "AgentSamplesBsv",
    "AlternatingSampler",
    "BaseSampler",
    "BatchSpec",
    "CpuSampler",
    "EnvSamples",
    "EvalCollector",
    "GpuSampler",
    "NoOverlapAlternatingSampler",
    "ParallelSamplerBase",
    "ResetCollector",
    "SamplerClosedError",
    "SamplerStepTimeout",
    "SamplerWorkerDied",
    "SamplerWorkerError",
    "Samples",
    "SerialSampler",
    "StepBuffer",
    "VectorSampler",
    "WaitResetCollector",
]
