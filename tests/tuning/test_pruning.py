"""PruningCallback: each evaluation reported to the trial at its env step, and a pruned trial stopped."""

from __future__ import annotations

import pytest
import pytorch_lightning as pl
from pytorch_lightning.loggers import TensorBoardLogger

from lightning_rl.agents import CategoricalPgAgent
from lightning_rl.algos import PPO
from lightning_rl.callbacks import EvaluationCallback
from lightning_rl.samplers import SerialSampler
from lightning_rl.tuning.pruning import PruningCallback


class FakeTrial:
    """Records reports; says to prune at the report numbers (1-based) in ``prune_at``."""

    def __init__(self, prune_at: tuple[int, ...] = ()) -> None:
        self.reports: list[tuple[int, float]] = []
        self.prune_at = prune_at

    def report(self, value: float, step: int) -> None:
        self.reports.append((step, value))

    def should_prune(self) -> bool:
        return len(self.reports) in self.prune_at


def tiny_ppo(total_env_steps: int) -> PPO:
    # One epoch = 64 env steps (batch_T 16 x batch_B 2 = 32 per rollout, two rollouts).
    return PPO(
        CategoricalPgAgent(hidden_sizes=[8]),
        SerialSampler(env_id="CartPole-v1", batch_T=16, batch_B=2, eval_n_envs=1, eval_max_trajectories=1),
        epochs=1, minibatches=1, total_env_steps=total_env_steps, log_interval_steps=64,
    )


def fit(tmp_path, callbacks, total_env_steps: int) -> PPO:
    pl.seed_everything(0)
    module = tiny_ppo(total_env_steps)
    logger = TensorBoardLogger(tmp_path, name="run", version="v", default_hp_metric=False)
    trainer = pl.Trainer(max_epochs=-1, accelerator="cpu", logger=logger, callbacks=callbacks,
                         enable_progress_bar=False, enable_model_summary=False, log_every_n_steps=1)
    trainer.fit(module)
    return module


def logged(log_dir, tag: str) -> list[tuple[int, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(log_dir), size_guidance={"scalars": 0})
    events.Reload()
    return [(e.step, e.value) for e in events.Scalars(tag)]


def test_each_evaluation_is_reported_at_its_env_step_and_a_pruned_trial_stops(tmp_path):
    trial = FakeTrial(prune_at=(2,))
    callback = PruningCallback(trial)
    module = fit(tmp_path, [EvaluationCallback(every_n_epochs=1), callback], total_env_steps=512)
    # Evaluations at 64 and 128 env steps; pruned after the second, so the budget of 512 is not spent.
    assert module.global_env_steps == 128
    assert callback.pruned_at == 128
    evaluations = logged(tmp_path / "run" / "v", "eval/return_mean")
    assert [step for step, _ in evaluations] == [64, 128]
    assert trial.reports == pytest.approx(evaluations)
    assert callback.reported == trial.reports


def test_epochs_without_an_evaluation_report_nothing_and_an_unpruned_trial_runs_its_budget(tmp_path):
    trial = FakeTrial()
    callback = PruningCallback(trial)
    module = fit(tmp_path, [EvaluationCallback(every_n_epochs=2), callback], total_env_steps=256)
    assert module.global_env_steps == 256
    assert callback.pruned_at is None
    evaluations = logged(tmp_path / "run" / "v", "eval/return_mean")
    assert [step for step, _ in evaluations] == [128, 256]  # epochs 2 and 4, not 1 or 3
    assert trial.reports == pytest.approx(evaluations)


def test_a_trainer_without_evaluation_or_with_it_after_the_pruning_callback_is_refused(tmp_path):
    with pytest.raises(ValueError, match="needs an EvaluationCallback"):
        fit(tmp_path, [PruningCallback(FakeTrial())], total_env_steps=64)
    with pytest.raises(ValueError, match="must come after the EvaluationCallback"):
        fit(tmp_path, [PruningCallback(FakeTrial()), EvaluationCallback()], total_env_steps=64)
