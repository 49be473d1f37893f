"""MultiAgentPPO: config and CLI, per-agent losses, independent learners, rewards, resume, learning."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import ModelCheckpoint

from lightning_rl.agents import SHARED_AGENT_KEY, CategoricalPgAgent, MultiAgent
from lightning_rl.algos import MultiAgentPPO
from lightning_rl.cli import main
from lightning_rl.envs import COOP_GRID_ID, make_env
from lightning_rl.runs import newest_checkpoint
from lightning_rl.samplers import SerialSampler
from tests.algos.test_on_policy import assert_same, make_trainer, params_vector

CONFIG = str(Path(__file__).resolve().parents[2] / "configs" / "ppo" / "multiagent_coopgrid.yaml")
NAMES = ("agent_0", "agent_1")
TERMS = ("loss", "pi_loss", "value_loss", "entropy", "clip_fraction", "approx_kl")


def coop_ppo(share: bool = False, total_env_steps: int = 1024, **kwargs) -> MultiAgentPPO:
    """The config's settings on a smaller batch."""
    settings = dict(
        agent_rewards_key="agent_rewards", discount=0.95, gae_lambda=0.9, ratio_clip=0.2, epochs=2, minibatches=2,
        value_loss_coeff=0.5, learning_rate=3e-3, clip_grad_norm=0.5, log_interval_steps=512,
    )
    settings.update(kwargs)
    return MultiAgentPPO(
        MultiAgent(CategoricalPgAgent(hidden_sizes=[32, 32]), share_parameters=share),
        SerialSampler(env_id=COOP_GRID_ID, batch_T=64, batch_B=4),
        total_env_steps=total_env_steps,
        **settings,
    )


def test_config_fits_and_resumes_through_the_cli(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    quiet = ["--model.init_args.log_interval_steps", "512", "--trainer.enable_progress_bar", "false"]
    main(["fit", "--config", CONFIG, "--model.init_args.total_env_steps", "1024", *quiet])
    last = newest_checkpoint(tmp_path / "runs" / "multi_agent_ppo_coopgrid")
    state = torch.load(last, weights_only=True)
    assert state["lightning_rl"]["train_state"]["env_steps"] == 1024
    assert len(state["optimizer_states"]) == 2  # one learner per agent
    assert any(k.startswith("agent.agents.agent_1.model.") for k in state["state_dict"])
    main(["fit", "--config", CONFIG, "--model.init_args.total_env_steps", "1536", *quiet, "--ckpt_path", "last"])
    assert torch.load(last, weights_only=True)["lightning_rl"]["train_state"]["env_steps"] == 1536


def test_per_agent_terms_are_logged_and_every_learner_updates():
    pl.seed_everything(0)
    module = coop_ppo()
    before = {}

    class Snapshot(pl.Callback):
        def on_train_start(self, trainer, pl_module):
            before.update({n: params_vector(pl_module.agent.sub_agent(n)) for n in NAMES})

    trainer = make_trainer(callbacks=[Snapshot()])
    trainer.fit(module)
    metrics = trainer.callback_metrics
    assert {f"train/{n}/{t}" for n in NAMES for t in TERMS} <= set(metrics)
    assert "train/loss" in metrics and "train/learning_rate" in metrics
    torch.testing.assert_close(metrics["train/loss"], metrics["train/agent_0/loss"] + metrics["train/agent_1/loss"])
    assert len(trainer.optimizers) == 2
    assert module.train_state.updates == 4 * 2 * 2  # rollouts x epochs x minibatches
    for n in NAMES:
        assert not torch.equal(before[n], params_vector(module.agent.sub_agent(n)))


def collected_batch(module: MultiAgentPPO):
    module.setup("fit")
    return module.make_dataset().collect()


def test_each_learner_gets_the_gradient_of_its_own_loss_only():
    pl.seed_everything(0)
    module = coop_ppo()
    batch = collected_batch(module)
    a0, a1 = module.agent.sub_agent("agent_0"), module.agent.sub_agent("agent_1")
    module.loss(batch, 0.2)["agent_0/loss"].backward()
    assert all(p.grad is not None for p in a0.parameters())
    assert all(p.grad is None for p in a1.parameters())
    alone = [p.grad.clone() for p in a0.parameters()]
    module.agent.zero_grad(set_to_none=True)
    module.loss(batch, 0.2)["loss"].backward()
    for p, g in zip(a0.parameters(), alone, strict=False):
        torch.testing.assert_close(p.grad, g)


def test_shared_parameters_train_one_learner_on_the_mean_of_the_agents_losses():
    pl.seed_everything(0)
    module = coop_ppo(share=True)
    batch = collected_batch(module)
    terms = module.loss(batch, 0.2)
    torch.testing.assert_close(terms["loss"], (terms["agent_0/loss"] + terms["agent_1/loss"]) / 2)
    assert list(module.agent.learners()) == [SHARED_AGENT_KEY]
    trainer = make_trainer()
    shared = module.agent.sub_agent("agent_0")
    start = params_vector(shared)
    trainer.fit(module)
    assert len(trainer.optimizers) == 1
    assert not torch.equal(start, params_vector(shared))


@pytest.mark.parametrize("key", [None, "agent_rewards"])
def test_agents_learn_from_the_team_reward_or_their_own(key):
    pl.seed_everything(0)
    module = coop_ppo(agent_rewards_key=key, discount=0.0)
    batch = collected_batch(module)
    samples = module.sampler.samples
    for n in NAMES:
        # With discount 0 the return is the reward itself (truncated steps are not trained on).
        reward = samples.env.reward if key is None else getattr(samples.env.env_info.agent_rewards, n)
        valid = getattr(batch, n).valid.numpy() > 0
        assert valid.sum() == valid.size - 3 * 4  # 64 steps of 4 envs: 3 truncations each
        np.testing.assert_allclose(getattr(batch, n).return_.numpy()[valid], reward[valid], rtol=1e-6)
        np.testing.assert_array_equal(getattr(batch, n).action.numpy(), getattr(samples.agent.action, n))


def test_exact_resume_matches_an_uninterrupted_run(tmp_path):
    def run(max_epochs: int, dirpath, ckpt_path=None) -> MultiAgentPPO:
        pl.seed_everything(3)
        module = coop_ppo(total_env_steps=10**6, log_interval_steps=256)
        ckpt = ModelCheckpoint(dirpath=dirpath, save_last=True, save_top_k=-1)
        make_trainer(max_epochs=max_epochs, callbacks=[ckpt]).fit(module, ckpt_path=ckpt_path)
        return module

    full = run(4, tmp_path / "full")
    run(2, tmp_path / "part")
    resumed = run(4, tmp_path / "part", ckpt_path=str(tmp_path / "part" / "last.ckpt"))
    assert resumed.train_state.env_steps == full.train_state.env_steps == 4 * 256
    assert_same(full.state_dict(), resumed.state_dict(), "state_dict")
    for a, b in zip(full.trainer.optimizers, resumed.trainer.optimizers, strict=False):
        assert_same(a.state_dict(), b.state_dict(), "optimizer")


@pytest.mark.parametrize("share", [False, True])
def test_recurrent_sub_agents_train_on_sequences(share):
    pl.seed_everything(0)
    module = MultiAgentPPO(
        MultiAgent(CategoricalPgAgent(hidden_sizes=[16], lstm_size=8), share_parameters=share),
        SerialSampler(env_id=COOP_GRID_ID, batch_T=16, batch_B=4, collector="wait_reset"),
        epochs=2, minibatches=2, total_env_steps=64 * 2, log_interval_steps=64,
    )
    start = []

    class Snapshot(pl.Callback):
        def on_train_start(self, trainer, pl_module):
            start.append(params_vector(pl_module.agent))

    make_trainer(callbacks=[Snapshot()]).fit(module)
    assert module.train_state.updates == 2 * 2 * 2
    assert module.recurrent and "train/agent_1/pi_loss" in module.trainer.callback_metrics
    assert not torch.equal(start[0], params_vector(module.agent))


def test_agent_must_be_a_multi_agent():
    with pytest.raises(ValueError, match="MultiAgent"):
        MultiAgentPPO(CategoricalPgAgent(), SerialSampler(env_id=COOP_GRID_ID), total_env_steps=64)


def test_unknown_agent_rewards_key_fails_at_setup():
    module = coop_ppo(agent_rewards_key="rewards_by_agent")
    with pytest.raises(ValueError, match="agent_rewards_key='rewards_by_agent'"):
        make_trainer().fit(module)


def random_policy_return(episodes: int, seed: int) -> float:
    env = make_env(COOP_GRID_ID, seed=seed)
    returns = []
    for _ in range(episodes):
        env.reset()
        total, done = 0.0, False
        while not done:
            step = env.step(env.action_space.sample())
            total, done = total + step.reward, step.done
        returns.append(total)
    return float(np.mean(returns))


@pytest.mark.slow
def test_multi_agent_ppo_clearly_beats_random_agents():
    pl.seed_everything(0)
    random_return = random_policy_return(episodes=200, seed=123)
    module = coop_ppo(total_env_steps=20_480, epochs=4, minibatches=4, log_interval_steps=2048)
    module.sampler = SerialSampler(env_id=COOP_GRID_ID, batch_T=64, batch_B=8)
    start = time.perf_counter()
    make_trainer().fit(module)
    seconds = time.perf_counter() - start
    # 20 episodes of each env in eval mode (sampling from the policy), on envs unseen in training.
    sampler = SerialSampler(COOP_GRID_ID, batch_T=100, batch_B=4)
    sampler.initialize(module.agent, seed=123)
    try:
        _, traj_infos = sampler.obtain_samples(0, agent_mode="eval")
    finally:
        sampler.shutdown()
    trained_return = float(np.mean([t.Return for t in traj_infos]))
    print(f"random {random_return:.2f}, trained {trained_return:.2f} after 20480 env steps in {seconds:.1f} s")
    assert len(traj_infos) == 20
    assert trained_return > random_return + 15.0 and trained_return > 10 * random_return


@pytest.mark.parametrize("share", [False, True])
def test_observation_statistics_follow_every_agents_observations(share):
    # normalize_observation: after each rollout's updates every sub-agent's running statistics
    # fold in that agent's observations of the rollout (a shared model: every agent's). Before
    # the fix nothing updated them and the model normalized with mean 0, var 1 for ever.
    pl.seed_everything(0)
    module = MultiAgentPPO(
        MultiAgent(CategoricalPgAgent(hidden_sizes=[16], normalize_observation=True), share_parameters=share,
                   agent_id=False),
        SerialSampler(env_id=COOP_GRID_ID, batch_T=16, batch_B=2),
        total_env_steps=96, log_interval_steps=32, epochs=1, minibatches=1,
    )
    seen: dict[str, list[np.ndarray]] = {name: [] for name in NAMES}

    class Record(pl.Callback):
        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            for name in NAMES:
                obs = getattr(batch, name).agent_inputs.observation
                seen[name].append(obs.reshape(-1, obs.shape[-1]).double().numpy())

    make_trainer(callbacks=[Record()]).fit(module)
    groups = [list(NAMES)] if share else [[name] for name in NAMES]
    for names in groups:
        rms = module.agent.sub_agent(names[0]).model.encoder.obs_rms
        data = np.concatenate([x for name in names for x in seen[name]])
        assert float(rms.count) == pytest.approx(len(data))  # 3 rollouts x 32 steps (x 2 agents if shared)
        np.testing.assert_allclose(rms.mean.double().numpy(), data.mean(0), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(rms.var.double().numpy(), data.var(0), rtol=1e-4, atol=1e-6)


def test_centralised_critic_is_what_the_value_loss_trains():
    pl.seed_everything(0)
    module = MultiAgentPPO(
        MultiAgent(CategoricalPgAgent(hidden_sizes=[16]), share_parameters=True, critic="centralized"),
        SerialSampler(env_id=COOP_GRID_ID, batch_T=16, batch_B=2), agent_rewards_key="agent_rewards",
        epochs=1, minibatches=1, total_env_steps=32, log_interval_steps=32,
    )
    batch = collected_batch(module)
    data = batch.agent_1
    # The batch keeps the critic's input: both agents' views side by side (CoopGrid has no state()).
    samples = module.sampler.samples
    both = np.concatenate([samples.env.observation.agent_0, samples.env.observation.agent_1], -1)
    np.testing.assert_array_equal(data.agent_inputs.observation.critic.numpy(), both)
    _, value = module.agent.evaluate("agent_1", data.agent_inputs)
    critic_in = torch.cat([data.agent_inputs.observation.critic, torch.tensor([0.0, 1.0]).expand(16, 2, 2)], -1)
    torch.testing.assert_close(value, module.agent.critics[SHARED_AGENT_KEY](critic_in).squeeze(-1))
    module.loss(batch, 0.2)["loss"].backward()
    critic = module.agent.critics[SHARED_AGENT_KEY]
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in critic.parameters())
    own_value_head = module.agent.sub_agent("agent_0").model.head.value
    assert all(p.grad is None for p in own_value_head.parameters())  # unused with a centralised critic
