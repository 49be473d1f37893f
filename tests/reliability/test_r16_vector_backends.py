"""Vector-env backends take what gymnasium takes and train every algorithm: ``module:Name-v0`` ids
(gymnasium imports the module first) on the gymnasium backend, a vector env that does not say how
it autoresets is refused for that reason, and ``overlap=True`` trains PPO (each half of the envs
gets its bootstrap value)."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
import pytorch_lightning as pl

from lightning_rl.agents import CategoricalPgAgent
from lightning_rl.algos import PPO
from lightning_rl.samplers import VectorSampler
from tests.algos.test_on_policy import make_trainer
from tests.samplers.helpers import ObsAgent


def test_ppo_trains_on_the_overlapped_ale_backend():
    # overlap=True steps two halves of the envs in turn; PPO asks for the value of every env's
    # last observation, which each half writes into its part of the batch.
    pl.seed_everything(0)
    sampler = VectorSampler("ALE/Pong-v5", backend="ale", batch_T=8, batch_B=4, overlap=True,
                            max_decorrelation_steps=0)
    module = PPO(CategoricalPgAgent(), sampler, epochs=1, minibatches=2, total_env_steps=64, log_interval_steps=32)
    make_trainer().fit(module)
    assert module.train_state.env_steps == 64
    bootstrap = np.asarray(sampler.samples.agent.bootstrap_value)
    assert bootstrap.shape == (4,) and np.isfinite(bootstrap).all() and (bootstrap != 0).all()


def test_module_prefixed_ids_take_the_gymnasium_backend_as_gymnasium_make_does(tmp_path, monkeypatch):
    # "module:Name-v0" imports the module (which registers the env) before looking the id up.
    (tmp_path / "lrl_test_cartmod.py").write_text(
        "import gymnasium\n"
        "gymnasium.register('ModCart-v0', entry_point='gymnasium.envs.classic_control.cartpole:CartPoleEnv',\n"
        "    vector_entry_point='gymnasium.envs.classic_control.cartpole:CartPoleVectorEnv', max_episode_steps=50)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    for backend in ("auto", "gymnasium"):
        sampler = VectorSampler("lrl_test_cartmod:ModCart-v0", backend=backend, batch_T=4, batch_B=2)
        assert sampler.backend == "gymnasium"
        sampler.initialize(ObsAgent(n_actions=2), seed=0)
        samples, _ = sampler.obtain_samples(0)
        assert np.asarray(samples.env.observation).shape == (4, 2, 4)
        sampler.shutdown()
    with pytest.raises(ValueError, match=r"cannot import its module 'lrl_no_such_module'"):
        VectorSampler("lrl_no_such_module:ModCart-v0", backend="auto")


class _NoModeVectorEnv(gymnasium.vector.VectorEnv):
    """A vector env of two CartPoles that says nothing of how it autoresets."""

    metadata: dict = {}

    def __init__(self, num_envs: int = 2, **kwargs):
        from gymnasium.envs.classic_control.cartpole import CartPoleEnv

        self.num_envs = num_envs
        self.single_observation_space = CartPoleEnv().observation_space
        self.single_action_space = CartPoleEnv().action_space
        self.observation_space = gymnasium.vector.utils.batch_space(self.single_observation_space, num_envs)
        self.action_space = gymnasium.vector.utils.batch_space(self.single_action_space, num_envs)


def test_a_vector_env_without_autoreset_metadata_is_refused_for_that_reason():
    if "NoModeCart-v0" not in gymnasium.registry:
        gymnasium.register("NoModeCart-v0", entry_point="gymnasium.envs.classic_control.cartpole:CartPoleEnv",
                           vector_entry_point=_NoModeVectorEnv)
    sampler = VectorSampler("NoModeCart-v0", backend="gymnasium", batch_T=4, batch_B=2)
    with pytest.raises(ValueError, match=r"does not say how it autoresets \(its metadata\['autoreset_mode'\] is None"):
        sampler.initialize(ObsAgent(n_actions=2), seed=0)
