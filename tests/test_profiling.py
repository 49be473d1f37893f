"""Lightning's SimpleProfiler times the sections lightning_rl marks (it replaced a profiler of our own)."""

from __future__ import annotations

import pytorch_lightning as pl
from pytorch_lightning.profilers import SimpleProfiler

from lightning_rl.agents import CategoricalPgAgent
from lightning_rl.algos import PPO
from lightning_rl.samplers import SerialSampler


def test_simple_profiler_times_sampler_and_learner_sections(tmp_path):
    pl.seed_everything(0)
    epochs, minibatches, rollouts = 2, 2, 4
    module = PPO(
        CategoricalPgAgent(hidden_sizes=[16]),
        SerialSampler(env_id="CartPole-v1", batch_T=16, batch_B=2),
        epochs=epochs, minibatches=minibatches, total_env_steps=32 * rollouts, log_interval_steps=64,
    )
    profiler = SimpleProfiler(dirpath=tmp_path, filename="sections")
    trainer = pl.Trainer(
        max_epochs=-1, accelerator="cpu", logger=False, enable_checkpointing=False, enable_progress_bar=False,
        enable_model_summary=False, profiler=profiler,
    )
    trainer.fit(module)
    durations = profiler.recorded_durations
    # One sampler iteration per rollout; one update per epoch and minibatch.
    assert len(durations["sampler/obtain"]) == rollouts
    assert len(durations["sampler/targets"]) == rollouts
    assert len(durations["learner/update"]) == rollouts * epochs * minibatches == module.train_state.updates
    assert "sampler/obtain" in (tmp_path / "fit-sections.txt").read_text()
