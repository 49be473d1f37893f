"""The direct update path of RLModule.update_step matches Lightning's manual optimization exactly."""

from __future__ import annotations

import pytest
import pytorch_lightning as pl
import torch

from lightning_rl.agents import SacAgent, Td3Agent
from lightning_rl.algos import PPO, SAC, TD3
from lightning_rl.samplers import SerialSampler
from tests.algos.test_on_policy import cartpole_ppo, make_trainer, params_vector


class CountBackward(pl.Callback):
    """A callback hooked into backward: its presence forces Lightning's path."""

    def __init__(self) -> None:
        self.calls = 0

    def on_after_backward(self, trainer, pl_module) -> None:
        self.calls += 1


def _ppo() -> PPO:
    return cartpole_ppo(total_env_steps=3 * 64, epochs=2, minibatches=2)


def _sac() -> SAC:
    # clip_grad_norm exercises per-optimizer clipping (policy and critics clipped, alpha not).
    return SAC(SacAgent(hidden_sizes=[16], q_hidden_sizes=[16]), SerialSampler("Pendulum-v1", batch_T=16, batch_B=2),
               batch_size=32, replay_ratio=64, min_steps_learn=64, total_env_steps=192, log_interval_steps=64,
               clip_grad_norm=1.0)


def _td3() -> TD3:
    return TD3(Td3Agent(hidden_sizes=[16], q_hidden_sizes=[16]), SerialSampler("Pendulum-v1", batch_T=16, batch_B=2),
               batch_size=32, replay_ratio=64, min_steps_learn=64, total_env_steps=192, log_interval_steps=64,
               clip_grad_norm=1.0)


@pytest.mark.parametrize("make", [_ppo, _sac, _td3], ids=["ppo", "sac", "td3"])
def test_direct_and_lightning_paths_give_identical_weights_and_step_counts(make):
    results, steps = {}, {}
    hooked = CountBackward()
    for name, direct, callbacks in (("direct", True, []), ("lightning", False, []), ("hooked", True, [hooked])):
        pl.seed_everything(0)
        module = make()
        module.direct_updates = direct
        trainer = make_trainer(callbacks=callbacks)
        trainer.fit(module)
        assert module._direct == (name == "direct")
        assert module.train_state.updates > 0
        results[name] = params_vector(module.agent)
        steps[name] = trainer.global_step
    assert hooked.calls > 0  # Lightning's path ran the callback's hook on every backward
    torch.testing.assert_close(results["direct"], results["lightning"], rtol=0, atol=0)
    torch.testing.assert_close(results["hooked"], results["lightning"], rtol=0, atol=0)
    # global_step counts optimizer steps (several per update for SAC and TD3) on both paths.
    assert steps["direct"] == steps["lightning"] == steps["hooked"] > 0
