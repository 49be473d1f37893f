"""NaN never trains quietly into a checkpoint: a NaN or infinite observation or reward stops
training at the sampler boundary with an error naming the env, the step and the field; a
non-finite loss stops it before the update; no checkpoint is written with non-finite weights."""

from __future__ import annotations

import copy
from typing import Any

import gymnasium
import numpy as np
import pytest
import pytorch_lightning as pl
import torch
from gymnasium import spaces
from pytorch_lightning.callbacks import ModelCheckpoint

from lightning_rl.agents import CategoricalPgAgent, SacAgent
from lightning_rl.algos import PPO, SAC
from lightning_rl.samplers import SerialSampler
from lightning_rl.samplers.base import NonFiniteSampleError
from tests.algos.test_on_policy import make_trainer


class PoisonedEnv(gymnasium.Env):
    """Zero observations and rewards, except a NaN (or inf) in one field at step ``at`` of its first
    episode (episodes last 1000 steps)."""

    def __init__(self, field: str, at: int = 5, value: float = float("nan"), box_action: bool = False) -> None:
        self.observation_space = spaces.Box(-1.0, 1.0, shape=(3,), dtype=np.float32)
        self.action_space = spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32) if box_action else spaces.Discrete(2)
        # The poison as text: the env's attributes are checkpoint state, which must stay finite.
        self.field, self.at, self.value_text, self._t, self._episode = field, at, repr(value), 0, 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self._t, self._episode = 0, self._episode + 1
        return np.zeros(3, np.float32), {}

    def step(self, action: Any):
        self._t += 1
        poisoned = self._episode == 1 and self._t == self.at
        obs = np.zeros(3, np.float32)
        if poisoned and self.field == "observation":
            obs[1] = float(self.value_text)
        reward = float(self.value_text) if poisoned and self.field == "reward" else 0.0
        return obs, reward, False, self._t >= 1000, {}


def ppo(field: str, check_finite: bool = True, value: float = float("nan")) -> PPO:
    return PPO(
        CategoricalPgAgent(hidden_sizes=[8]),
        # check_env=False: the env contract's ten probe steps would find the NaN before training
        # (test_the_env_contract_check_finds_it_first); this module is about the guard in training.
        SerialSampler(env_id=lambda: PoisonedEnv(field, value=value), batch_T=4, batch_B=2,
                      check_finite=check_finite, check_env=False),
        minibatches=1, epochs=1, total_env_steps=64, log_interval_steps=8,
    )


def test_nan_observation_stops_ppo_naming_env_step_and_field(tmp_path):
    pl.seed_everything(0)
    checkpoint = ModelCheckpoint(dirpath=tmp_path, save_last=True)
    module = ppo("observation")
    # Step 5 returns the NaN, so it is the observation the agent acts on at row 5: the second
    # batch of 4 rows (iteration 1, counted from 0), row 1, in both envs (the first env named).
    with pytest.raises(NonFiniteSampleError, match=r"non-finite observation from env 0 .* at time step 1 of "
                                                   r"sampler iteration 1: array\(\[ 0., nan,  0.\]"):
        make_trainer(callbacks=[checkpoint]).fit(module)
    # The first batch trained, the poisoned one did not: every weight is finite, and so is any checkpoint.
    assert all(torch.isfinite(p).all() for p in module.parameters())
    for path in tmp_path.glob("*.ckpt"):
        state = torch.load(path, weights_only=True)["state_dict"]
        assert all(torch.isfinite(v).all() for v in state.values() if torch.is_tensor(v) and v.is_floating_point())


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_reward_stops_sac_before_it_reaches_the_replay_loss(value):
    pl.seed_everything(0)
    module = SAC(
        SacAgent(hidden_sizes=[8], q_hidden_sizes=[8]),
        SerialSampler(env_id=lambda: PoisonedEnv("reward", at=6, value=value, box_action=True), batch_T=4, batch_B=1,
                      check_env=False),
        batch_size=4, replay_size=64, min_steps_learn=4, replay_ratio=4, total_env_steps=64, log_interval_steps=8,
    )
    # Step 6's reward sits in row 5 (rows hold the reward of the step taken there): iteration 1, row 1.
    with pytest.raises(NonFiniteSampleError, match=r"non-finite reward from env 0 .* at time step 1 of sampler "
                                                   r"iteration 1: np.float32"):
        make_trainer().fit(module)
    assert all(torch.isfinite(p).all() for p in module.parameters())


def test_with_the_check_off_a_nan_reaches_the_loss_and_stops_training_before_the_update():
    pl.seed_everything(0)
    module = ppo("observation", check_finite=False)
    before: dict[str, torch.Tensor] = {}

    class Snapshot(pl.Callback):
        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            before.update(copy.deepcopy(pl_module.state_dict()))

    with pytest.raises(FloatingPointError, match=r"PPO: non-finite loss nan at update 2 "):
        make_trainer(callbacks=[Snapshot()]).fit(module)
    # Nothing was stepped with the NaN: the weights are those before the poisoned batch.
    for key, value in module.state_dict().items():
        if isinstance(value, torch.Tensor):
            assert torch.equal(value, before[key]), key


def test_no_checkpoint_is_written_with_non_finite_weights(tmp_path):
    module = ppo("reward")
    module.agent.initialize(_spaces())
    with torch.no_grad():
        next(module.agent.parameters()).view(-1)[0] = float("nan")
    checkpoint: dict[str, Any] = {"state_dict": module.state_dict()}
    with pytest.raises(FloatingPointError, match="refusing to write a checkpoint with non-finite weights: "
                                                 r"\['agent.model."):
        module.on_save_checkpoint(checkpoint)


def _spaces() -> Any:
    from lightning_rl.envs import make_env

    return make_env(lambda: PoisonedEnv("reward")).spaces


def test_the_env_contract_check_finds_it_first():
    from lightning_rl.envs.check import EnvCheckError

    sampler = SerialSampler(env_id=lambda: PoisonedEnv("observation"), batch_T=4, batch_B=1)
    with pytest.raises(EnvCheckError, match=r"the observation returned by step\(\) 4 lies outside the observation "
                                            r"space .*values from nan to nan"):
        sampler.initialize(CategoricalPgAgent(hidden_sizes=[8]), seed=0)
    sampler.shutdown()


def non_finite_paths(value: Any, where: str = "") -> list[str]:
    """Every place in a loaded checkpoint (nested dicts, lists, tensors) holding a NaN or an infinity,
    but for ModelCheckpoint's own ``kth_value`` (Lightning's infinite "no score yet")."""
    if where.endswith(".kth_value") and "ModelCheckpoint" in where:
        return []
    if torch.is_tensor(value):
        return [where] if value.is_floating_point() and not torch.isfinite(value).all() else []
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in non_finite_paths(v, f"{where}.{k}")]
    if isinstance(value, (list, tuple)):
        return [p for i, v in enumerate(value) for p in non_finite_paths(v, f"{where}[{i}]")]
    if isinstance(value, float) and not np.isfinite(value):
        return [where]
    return []


def test_a_nan_observation_ending_a_batch_raises_in_that_iteration_before_any_checkpoint(tmp_path):
    # batch_T=1: the NaN the env returns at its 8th step is no row of a batch yet, but the
    # observation the next batch starts from, held in the sampler's step buffer (and in its
    # checkpoint state). The epoch (8 iterations) ends with that step and saves: the guard must
    # raise first, so no checkpoint ever holds the NaN.
    pl.seed_everything(0)
    module = SAC(
        SacAgent(hidden_sizes=[8], q_hidden_sizes=[8]),
        SerialSampler(env_id=lambda: PoisonedEnv("observation", at=8, box_action=True), batch_T=1, batch_B=1,
                      check_env=False),
        batch_size=4, replay_size=64, min_steps_learn=4, replay_ratio=4, total_env_steps=64, log_interval_steps=4,
    )
    with pytest.raises(NonFiniteSampleError, match=r"non-finite observation from env 0 .* returned at the last step "
                                                   r"\(0\) of sampler iteration 7: array\(\[ 0., nan,  0.\]"):
        make_trainer(callbacks=[ModelCheckpoint(dirpath=tmp_path, save_last=True)]).fit(module)
    saved = sorted(tmp_path.glob("*.ckpt*"))
    # The epoch after iteration 3 saved; the one that would end after iteration 7 did not.
    assert saved and all(not path.name.startswith("epoch=1") for path in saved), saved
    for path in saved:
        assert non_finite_paths(torch.load(path, weights_only=True)) == [], path
