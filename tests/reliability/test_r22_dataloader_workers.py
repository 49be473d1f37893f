"""Row 22: an env-backed dataset refuses DataLoader workers with a clear message (a worker would
step its own copy of the sampler, envs and replay, with stale weights)."""

from __future__ import annotations

import pytest
from torch.utils.data import DataLoader

from lightning_rl.agents import CategoricalPgAgent
from lightning_rl.algos import PPO
from lightning_rl.samplers import SerialSampler


def test_a_dataloader_with_workers_is_refused_naming_num_workers():
    module = PPO(CategoricalPgAgent(hidden_sizes=[4]), SerialSampler(env_id="CartPole-v1", batch_T=4, batch_B=1),
                 minibatches=1, total_env_steps=8, log_interval_steps=4)
    module.setup("fit")
    try:
        dataset = module.make_dataset()
        loader = DataLoader(dataset, batch_size=None, num_workers=1, multiprocessing_context="fork")
        with pytest.raises(ValueError, match=r"runs in the training process only \(DataLoader num_workers=0\)"):
            next(iter(loader))
        # The module's own DataLoader keeps everything in the training process.
        assert module.train_dataloader().num_workers == 0
    finally:
        module.teardown("fit")
