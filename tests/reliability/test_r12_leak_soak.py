"""Row 12: building and closing parallel samplers 200 times leaks no process, fd, shared memory or RSS.

Each cycle builds a two-worker sampler (CPU, GPU and alternating in turn) over a tiny native env
with a policy-gradient agent, draws one batch through a DataLoader over the on-policy dataset
and shuts the sampler down; every tenth cycle the envs raise instead, so the error path is
soaked too.
"""

from __future__ import annotations

import gc
import os

import psutil
import pytest
from torch.utils.data import DataLoader

from lightning_rl.agents import CategoricalPgAgent
from lightning_rl.datasets.on_policy import OnPolicyDataset
from lightning_rl.datasets.state import TrainState
from lightning_rl.samplers import AlternatingSampler, CpuSampler, GpuSampler
from tests.samplers.helpers import LivesEnv

CYCLES = 200
WARM_UP = 10
SAMPLERS = [CpuSampler, GpuSampler, AlternatingSampler]


def cycle(i: int) -> None:
    failing = i % 10 == 9
    env_kwargs = {"fail_at": 2} if failing else None
    sampler = SAMPLERS[i % 3](LivesEnv, env_kwargs=env_kwargs, batch_T=4, batch_B=2, n_workers=2)
    agent = CategoricalPgAgent(hidden_sizes=[8])
    sampler.initialize(agent, seed=i, bootstrap_value=True)
    dataset = OnPolicyDataset(sampler, agent, TrainState(), 1, discount=0.99, gae_lambda=0.95, normalize_advantage=True)
    loader = iter(DataLoader(dataset, batch_size=None, num_workers=0))
    if failing:
        with pytest.raises(ValueError, match="boom at step 2"):
            next(loader)
    else:
        assert next(loader).advantage.shape == (4, 2)
    sampler.shutdown()


def resources() -> tuple[int, int, int]:
    gc.collect()
    children = len(psutil.Process().children(recursive=True))
    shm = len(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else 0
    return children, len(os.listdir("/proc/self/fd")), shm


def test_200_sampler_lifecycles_return_to_baseline():
    # Baseline after a warm-up: the first cycle imports modules, fills allocator caches and makes
    # multiprocessing's heap keep one small shared-memory arena (two fds: the file and mmap's
    # duplicate) that later buffers reuse for the life of the process.
    for i in range(WARM_UP):
        cycle(i)
    baseline = resources()
    rss_start = psutil.Process().memory_info().rss
    for i in range(WARM_UP, CYCLES):
        cycle(i)
    gc.collect()
    rss_growth = psutil.Process().memory_info().rss / rss_start - 1
    children, fds, shm = resources()
    assert (children, fds, shm) == baseline, "(child processes, open fds, /dev/shm entries) after vs before"
    assert rss_growth < 0.05


def test_three_fits_in_one_process_return_to_baseline():
    # A notebook or a sweep calls fit again and again in one process: each fit's sampler workers,
    # shared memory and fds must go with its teardown.
    import pytorch_lightning as pl

    from lightning_rl.algos import PPO
    from tests.algos.test_on_policy import make_trainer

    def fit(seed: int) -> None:
        pl.seed_everything(seed)
        sampler = CpuSampler(LivesEnv, batch_T=8, batch_B=2, n_workers=2)
        module = PPO(CategoricalPgAgent(hidden_sizes=[8]), sampler, epochs=1, minibatches=1,
                     linear_lr_schedule=False, log_interval_steps=16)
        make_trainer(max_epochs=2).fit(module)
        assert module.train_state.env_steps == 32

    fit(0)  # warm-up: imports, allocator caches, multiprocessing's shared-memory arena
    baseline = resources()
    rss_start = psutil.Process().memory_info().rss
    for seed in (1, 2, 3):
        fit(seed)
    assert resources() == baseline
    assert psutil.Process().memory_info().rss < 1.05 * rss_start
