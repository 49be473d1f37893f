"""Parameters that become NaN or infinite (a learning rate far too high: the loss was finite, the
step was not) stop training within the training step that produced them, naming the parameters,
and ``last.ckpt`` stays the last finite checkpoint. The choice is to stop rather than skip: a
skipped step would hide a configuration error that every later step repeats."""

from __future__ import annotations

import re

import pytest
import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import ModelCheckpoint

from lightning_rl.agents import CategoricalPgAgent, SacAgent
from lightning_rl.algos import PPO, SAC
from lightning_rl.samplers import SerialSampler
from tests.algos.test_on_policy import make_trainer


class BlowUp(pl.Callback):
    """From epoch ``at`` on, every optimizer's learning rate is 1e39: one Adam step then moves each
    weight by more than float32's largest value."""

    def __init__(self, at: int) -> None:
        self.at = at

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if trainer.current_epoch == self.at:
            for optimizer in trainer.optimizers:
                for group in optimizer.param_groups:
                    group["lr"] = 1e39


def finite(path) -> bool:
    state = torch.load(path, weights_only=True)["state_dict"]
    return all(torch.isfinite(v).all() for v in state.values() if torch.is_tensor(v) and v.is_floating_point())


def ppo() -> PPO:
    return PPO(CategoricalPgAgent(hidden_sizes=[8]), SerialSampler(env_id="CartPole-v1", batch_T=32, batch_B=2),
               epochs=1, minibatches=1, clip_grad_norm=None, linear_lr_schedule=False, log_interval_steps=64)


def sac() -> SAC:
    return SAC(SacAgent(hidden_sizes=[8], q_hidden_sizes=[8]),
               SerialSampler(env_id="Pendulum-v1", batch_T=16, batch_B=2),
               batch_size=16, replay_size=1000, replay_ratio=16, min_steps_learn=32, log_interval_steps=32)


@pytest.mark.parametrize("make, updates_per_epoch, caught_by", [
    # PPO: one update per epoch; its step blows the weights up and the check after the step sees it.
    (ppo, 1, r"non-finite parameters after update (\d+) .*\['agent\."),
    # SAC: 32 updates per epoch (32 env steps x replay_ratio 16 / batch 16); the update after the
    # blown-up one has a NaN loss and stops before stepping (the loss check of test_r13_non_finite.py).
    (sac, 32, r"non-finite loss nan at update (\d+) "),
])
def test_a_blown_up_step_stops_training_and_last_ckpt_stays_finite(tmp_path, make, updates_per_epoch, caught_by):
    pl.seed_everything(0)
    module = make()
    checkpoint = ModelCheckpoint(dirpath=tmp_path, save_last=True, save_top_k=-1)
    with pytest.raises(FloatingPointError) as error:
        make_trainer(max_epochs=10, callbacks=[checkpoint, BlowUp(at=3)]).fit(module)
    match = re.search(caught_by, str(error.value))
    assert match, str(error.value)
    assert not all(torch.isfinite(p).all() for p in module.parameters())
    # last.ckpt is epoch 2's: finite, and so is every checkpoint written; the error came within
    # the epoch that blew up (its updates, no more).
    done = torch.load(tmp_path / "last.ckpt", weights_only=True)["lightning_rl"]["train_state"]["updates"]
    assert done > 0 and done < int(match.group(1)) <= done + updates_per_epoch + 1
    assert all(finite(path) for path in tmp_path.glob("*.ckpt"))


def test_a_checkpoint_due_in_the_blown_up_step_is_refused(tmp_path):
    pl.seed_everything(0)
    # Saving after every training step: the save comes before the module's own check and refuses.
    checkpoint = ModelCheckpoint(dirpath=tmp_path, save_last=True, every_n_train_steps=1)
    with pytest.raises(FloatingPointError, match="non-finite"):
        make_trainer(max_epochs=10, callbacks=[checkpoint, BlowUp(at=2)]).fit(ppo())
    assert torch.load(tmp_path / "last.ckpt", weights_only=True)["lightning_rl"]["train_state"]["updates"] == 2
    assert all(finite(path) for path in tmp_path.glob("*.ckpt"))


def test_the_parameters_are_checked_after_each_iteration_that_updated_them(monkeypatch):
    # 32 env steps per iteration and min_steps_learn=96: iterations 1 and 2 only collect (random
    # actions, no update, the weights unchanged); from iteration 3, which reaches 96, each updates.
    import lightning_rl.algos.base as base

    checked_at: list[tuple[int, int]] = []
    real = base.check_finite_parameters

    def counting(module, tensors):
        checked_at.append((module.train_state.itr, module.train_state.updates))
        real(module, tensors)

    monkeypatch.setattr(base, "check_finite_parameters", counting)
    pl.seed_everything(0)
    module = SAC(SacAgent(hidden_sizes=[8], q_hidden_sizes=[8]),
                 SerialSampler(env_id="Pendulum-v1", batch_T=16, batch_B=2), batch_size=16, replay_size=1000,
                 replay_ratio=16, min_steps_learn=96, log_interval_steps=32, total_env_steps=5 * 32)
    make_trainer(max_epochs=10).fit(module)
    assert module.train_state.itr == 5
    # Once after the first iteration (the weights the run started from), then once per updating
    # iteration (3, 4, 5), each after that iteration's 32 updates; iteration 2 changed nothing.
    assert checked_at == [(1, 0), (3, 32), (4, 64), (5, 96)]
