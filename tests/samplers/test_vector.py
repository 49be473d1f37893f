"""VectorSampler: one gymnasium VectorEnv per call gives the serial sampler's batches.

Expected values come from the serial sampler (single envs stepped one by one, seeded ``seed + b``)
or from gymnasium stepped directly, never from the vector sampler's own code.
"""

from __future__ import annotations

import functools
import threading

import numpy as np
import pytest

from lightning_rl.samplers import SerialSampler, VectorSampler
from lightning_rl.samplers.errors import SamplerWorkerError
from tests.samplers.helpers import (
    CounterEnv,
    ObsAgent,
    assert_same_runs,
    assert_state_round_trip_continues,
    check_cartpole_transitions,
    leaves,
    make_counter_env,
    run_sampler,
)

MODES = ["next_step", "same_step"]


@pytest.mark.parametrize("mode", MODES)
def test_sync_backend_batches_equal_the_serial_sampler(mode):
    # Episodes of 2, 3 and 5 steps end at different rows of the 3 envs, so partial resets happen
    # mid-batch; eval envs and bootstrap values are compared too.
    kwargs = dict(env_kwargs={"episode_lengths": (2, 3, 5)}, batch_T=6, batch_B=3, eval_n_envs=2, eval_max_steps=7)
    serial = run_sampler(SerialSampler, n_batches=4, **kwargs)
    vector = run_sampler(VectorSampler, n_batches=4, backend="sync", autoreset_mode=mode, **kwargs)
    assert_same_runs(serial, vector)
    done = np.concatenate([b.env.done for b in vector[0]])
    assert done.sum() >= 6 and len(vector[2]) >= 2


def test_agent_state_resets_where_episodes_end():
    # ObsAgent's agent_info.steps counts steps since reset_one(b): by hand it restarts at 0 on
    # the row after each done, and counts up otherwise.
    batches, _, _ = run_sampler(VectorSampler, n_batches=2, backend="sync", env_kwargs={"episode_lengths": (2, 3)},
                                batch_T=5, batch_B=2)
    steps = np.concatenate([np.asarray(b.agent.agent_info.steps) for b in batches])
    done = np.concatenate([b.env.done for b in batches])
    expected = np.zeros_like(steps)
    for b in range(steps.shape[1]):
        for t in range(1, len(steps)):
            expected[t, b] = 0 if done[t - 1, b] else expected[t - 1, b] + 1
    np.testing.assert_array_equal(steps, expected)


def cartpole_sampler(**kwargs) -> VectorSampler:
    sampler = VectorSampler("CartPole-v1", batch_T=64, batch_B=4, backend="gymnasium", **kwargs)
    sampler.initialize(ObsAgent(n_actions=2), seed=3)
    return sampler


def test_cartpole_transitions_follow_gymnasium_cartpole():
    # Every transition the vector backend reports is the one gymnasium's single-env CartPole
    # makes from the same state: s' (up to the float32 observations), reward 1 and terminated.
    sampler = cartpole_sampler()
    try:
        checked, ends = check_cartpole_transitions(sampler)
        assert checked > 900 and ends > 10
    finally:
        sampler.shutdown()


def test_cartpole_episode_statistics_match_the_serial_sampler():
    # Random-policy CartPole: the vector backend's copies share one generator, so episodes are
    # not identical, but their lengths have the serial sampler's distribution (mean about 22
    # steps, standard deviation about 12: over 600+ episodes each the means differ by < 2.5).
    lengths = {}
    for name, cls, kw in (("serial", SerialSampler, {}), ("vector", VectorSampler, {"backend": "gymnasium"})):
        sampler = cls("CartPole-v1", batch_T=100, batch_B=8, **kw)
        sampler.initialize(_RandomAgent(), seed=1)
        trajs = []
        for itr in range(20):
            trajs += sampler.obtain_samples(itr)[1]
        sampler.shutdown()
        lengths[name] = np.array([t.Length for t in trajs])
        assert all(t.Return == t.Length for t in trajs)
    assert len(lengths["vector"]) > 600 and len(lengths["serial"]) > 600
    assert abs(lengths["vector"].mean() - lengths["serial"].mean()) < 2.5


class _RandomAgent(ObsAgent):
    """Uniform random actions from a seeded generator."""

    def __init__(self) -> None:
        super().__init__(n_actions=2)
        self.rng = np.random.default_rng(0)

    def step(self, observation, prev_action, prev_reward):
        out = super().step(observation, prev_action, prev_reward)
        action = self.rng.integers(0, 2, len(observation))
        import torch

        return type(out)(torch.as_tensor(action), out.agent_info)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("game", ["Pong", "Breakout"])
def test_ale_backend_equals_atari_env_frame_for_frame(game, mode):
    # With no no-ops and no sticky actions the games are deterministic: ale-py's AtariVectorEnv
    # and our AtariEnv (serial sampler) must give identical frames, rewards, flags, game scores
    # and episodes; Breakout's lost lives end episodes but not the game (5 lives, game over).
    # With overlap=True the two halves take turns (send/recv) and the agent acts for one half at
    # a time (an alternating agent): the batches must still be the serial sampler's, the value of
    # each env's last observation (bootstrap_value, which PPO and A2C ask for) included.
    env_kwargs = dict(max_start_noops=0, repeat_action_probability=0.0)
    runs = []
    variants = ((SerialSampler, {}), (VectorSampler, {"backend": "ale", "autoreset_mode": mode}),
                (VectorSampler, {"backend": "ale", "autoreset_mode": mode, "overlap": True}))
    for cls, kw in variants:
        sampler = cls(f"ALE/{game}-v5", env_kwargs=env_kwargs, batch_T=50, batch_B=4, **kw)
        sampler.initialize(ObsAgent(n_actions=4, alternating=bool(kw.get("overlap"))), seed=7, bootstrap_value=True)
        assert sampler.frame_stack == 4
        batches, trajs = [], []
        for itr in range(5):
            samples, t = sampler.obtain_samples(itr)
            batches.append([np.copy(x) for x in leaves(samples)])
            trajs += [(t_.Length, t_.Return, t_.GameScore) for t_ in t]
        sampler.shutdown()
        runs.append((batches, trajs))
    (serial_batches, serial_trajs), *vector_runs = runs
    for vector_batches, vector_trajs in vector_runs:
        for a, b in zip(serial_batches, vector_batches, strict=True):
            for u, v in zip(a, b, strict=True):
                np.testing.assert_array_equal(u, v)
        assert serial_trajs == vector_trajs
    if game == "Breakout":
        assert len(serial_trajs) >= 2


def test_bad_arguments_name_the_parameter():
    with pytest.raises(ValueError, match="backend"):
        VectorSampler("CartPole-v1", backend="envpool2")
    with pytest.raises(ValueError, match="collector"):
        VectorSampler("CartPole-v1", collector="wait_reset")
    with pytest.raises(ValueError, match="vector entry point"):
        VectorSampler("Pendulum-v1", backend="gymnasium")
    with pytest.raises(ValueError, match="autoreset_mode"):
        VectorSampler("CartPole-v1", backend="sync", autoreset_mode="sometimes")
    with pytest.raises(ValueError, match="Atari env_id"):
        VectorSampler("CartPole-v1", backend="ale")
    with pytest.raises(ValueError, match="does not take"):
        VectorSampler("ALE/Pong-v5", backend="ale", env_kwargs={"frameskip": 4})
    with pytest.raises(ValueError, match="overlap=True needs backend='ale'"):
        VectorSampler("CartPole-v1", backend="sync", overlap=True)
    with pytest.raises(ValueError, match="batch_B=3 must be even"):
        VectorSampler("ALE/Pong-v5", backend="ale", batch_B=3, overlap=True)


def test_env_error_is_raised_with_its_type_and_closes_the_sampler():
    sampler = VectorSampler(functools.partial(make_counter_env, fail_at=4, fail_seed=6), backend="sync",
                            batch_T=3, batch_B=2)
    sampler.initialize(ObsAgent(), seed=5)
    sampler.obtain_samples(0)
    with pytest.raises(ValueError, match="step") as info:
        sampler.obtain_samples(1)
    assert isinstance(info.value, SamplerWorkerError) and info.value.env_call == "step"
    assert sampler.closed
    with pytest.raises(RuntimeError, match="shut down"):
        sampler.obtain_samples(2)


def test_gymnasium_backend_state_round_trip_continues_identically(tmp_path):
    trajs, eval_trajs = assert_state_round_trip_continues(
        VectorSampler, "CartPole-v1", tmp_path, n_batches=3, evaluate=True, batch_T=16, batch_B=3,
        backend="gymnasium", max_decorrelation_steps=30, eval_n_envs=2, eval_max_steps=60,
    )
    assert any(0 < t["Length"] < 500 for t in map(dict, trajs))  # episodes begun before the save ended after it
    assert eval_trajs  # eval episodes from the eval envs' generators as they were at the save


@pytest.mark.parametrize("mode", MODES)
def test_sync_backend_state_round_trip_continues_identically(tmp_path, mode):
    # SyncVectorEnv keeps its copies as Python envs: each copy's wrapper chain (CartPole's state
    # and generator, the TimeLimit counter) is stored as the serial sampler stores its envs.
    trajs, eval_trajs = assert_state_round_trip_continues(
        VectorSampler, "CartPole-v1", tmp_path, n_batches=3, evaluate=True, batch_T=16, batch_B=3,
        backend="sync", autoreset_mode=mode, max_decorrelation_steps=30, eval_n_envs=2, eval_max_steps=60,
    )
    assert any(0 < t["Length"] < 500 for t in map(dict, trajs))
    assert eval_trajs


class LockedCounterEnv(CounterEnv):
    """A counter env holding a lock: state that cannot be stored as data."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()


def test_sync_backend_stores_no_env_state_when_a_copy_cannot_be_stored():
    # A partial state would resume envs that are neither the saved ones nor fresh ones, so only
    # the counters are stored.
    sampler = VectorSampler(LockedCounterEnv, batch_T=2, batch_B=2, backend="sync")
    sampler.initialize(ObsAgent())
    sampler.obtain_samples(0)
    assert set(sampler.state_dict()) == {"env_steps"}
    sampler.shutdown()


def assert_same_batches_and_episodes(samplers, make_agent, n_batches, torch_seed=0):
    """Each sampler (initialized with ``make_agent()``, seed 1, torch seeded alike) collects
    ``n_batches``; all give identical batches (copied as they come: the buffers are reused) and
    identical finished episodes. Returns the last sampler's episodes per batch."""
    import torch

    runs = []
    for sampler in samplers:
        torch.manual_seed(torch_seed)
        sampler.initialize(make_agent(), seed=1)
        run = []
        for itr in range(n_batches):
            samples, trajs = sampler.obtain_samples(itr)
            run.append(([np.copy(x) for x in leaves(samples)], [dict(t) for t in trajs]))
        sampler.shutdown()
        runs.append(run)
    first, *others = runs
    for other in others:
        for (a, a_trajs), (b, b_trajs) in zip(first, other, strict=True):
            for x, y in zip(a, b, strict=True):
                np.testing.assert_array_equal(x, y)
            assert a_trajs == b_trajs
    return [trajs for _, trajs in runs[-1]]


@pytest.mark.parametrize("mode", MODES)
def test_dict_observations_step_as_in_the_serial_sampler(mode):
    # Dict observations arrive as named tuples of [B] arrays: the last observation of an ended
    # episode and the partial reset's observations are taken leaf by leaf.
    from lightning_rl.agents import CategoricalPgAgent
    from tests.toy_envs import DictTargetEnv

    make = functools.partial(DictTargetEnv, episode_length=3)
    trajs = assert_same_batches_and_episodes(
        (SerialSampler(make, batch_T=7, batch_B=3),
         VectorSampler(make, batch_T=7, batch_B=3, backend="sync", autoreset_mode=mode)),
        lambda: CategoricalPgAgent(hidden_sizes=(8,)), n_batches=2)
    assert sum(map(len, trajs)) == 12  # 14 steps of 3 envs, episodes of 3 steps


def test_multidiscrete_actions_step_as_in_the_serial_sampler_and_other_sizes_are_refused():
    # MultiDiscrete spaces carry an array of sizes: the space check compares it element-wise.
    from lightning_rl.agents import CategoricalPgAgent
    from tests.toy_envs import MultiDiscreteTargetEnv

    trajs = assert_same_batches_and_episodes(
        (SerialSampler(MultiDiscreteTargetEnv, batch_T=5, batch_B=3),
         VectorSampler(MultiDiscreteTargetEnv, batch_T=5, batch_B=3, backend="auto")),
        lambda: CategoricalPgAgent(hidden_sizes=(8,)), n_batches=1)
    assert len(trajs[0]) == 15  # one-step episodes

    # The same observation size, other action sizes: only the element-wise check tells them apart.
    sizes = iter([(3, 4)] + [(4, 3)] * 8)  # the probe env, then the vector env's copies

    def changing_env():
        return MultiDiscreteTargetEnv(nvec=next(sizes))

    sampler = VectorSampler(changing_env, batch_T=2, batch_B=2, backend="sync")
    with pytest.raises(ValueError, match="action space .* differs from the single env's"):
        sampler.initialize(ObsAgent())


def test_auto_backend_picks_the_vector_env_that_takes_the_id():
    import gymnasium

    assert VectorSampler("CartPole-v1", backend="auto").backend == "gymnasium"
    assert VectorSampler("ALE/Pong-v5", backend="auto").backend == "ale"
    assert VectorSampler("Pendulum-v1", backend="auto").backend == "sync"  # no vector entry point
    assert VectorSampler(make_counter_env, backend="auto").backend == "sync"  # a user's callable
    # An id registered by a user (no vector entry point) steps in a SyncVectorEnv, and learns its
    # batches as the serial sampler does.
    env_id = "LightningRlAutoBackendCartPole-v0"
    gymnasium.register(env_id, entry_point="gymnasium.envs.classic_control:CartPoleEnv", max_episode_steps=50)
    try:
        trajs = assert_same_batches_and_episodes(
            (SerialSampler(env_id, batch_T=40, batch_B=3),
             VectorSampler(env_id, batch_T=40, batch_B=3, backend="auto")),
            lambda: ObsAgent(n_actions=2), n_batches=2)
        assert sum(map(len, trajs)) >= 2  # episodes (of at most 50 steps) ended
    finally:
        gymnasium.registry.pop(env_id)
    # The entry point has its own autoreset mode: asking for one gives the sync backend.
    assert VectorSampler("CartPole-v1", backend="auto", autoreset_mode="same_step").backend == "sync"
    with pytest.raises(ValueError, match="overlap=True needs backend='ale'"):
        VectorSampler("CartPole-v1", backend="auto", overlap=True)


def test_load_state_dict_checks_the_env_count_and_other_backends_store_counters_only():
    a = cartpole_sampler()
    a.obtain_samples(0)
    b = VectorSampler("CartPole-v1", batch_T=64, batch_B=2, backend="gymnasium")
    b.initialize(ObsAgent(n_actions=2), seed=3)
    with pytest.raises(ValueError, match="holds 4 envs, this sampler has batch_B=2"):
        b.load_state_dict(a.state_dict())
    sync = VectorSampler(make_counter_env, batch_T=2, batch_B=2, backend="async")
    sync.initialize(ObsAgent())
    sync.obtain_samples(0)
    assert set(sync.state_dict()) == {"env_steps"}  # envs in other processes: nothing to store
    for s in (a, b, sync):
        s.shutdown()


def test_counters_resume():
    sampler = cartpole_sampler()
    sampler.obtain_samples(0)
    state = sampler.state_dict()
    sampler.shutdown()
    resumed = cartpole_sampler()
    resumed.load_state_dict(state)
    assert resumed.env_steps == 64 * 4
    resumed.obtain_samples(1)
    assert resumed.env_steps == 2 * 64 * 4
    resumed.shutdown()


@pytest.mark.slow
def test_ppo_cartpole_config_learns_to_475_with_the_vector_backend(tmp_path, monkeypatch):
    # The shipped configs/ppo/cartpole.yaml as it is (VectorSampler, backend auto: gymnasium's
    # NumPy CartPole), its EarlyStopping at a mean return of 475. EarlyStopping records stopped_epoch only
    # when its threshold stopped the run (Lightning leaves best_score at the last value below it);
    # the 200k-step budget alone would end after epoch 97 (2048 env steps each).
    import json
    from pathlib import Path

    import torch

    from lightning_rl.cli import main

    monkeypatch.chdir(tmp_path)
    root = Path(__file__).resolve().parents[2]
    ckpt_dir = tmp_path / "ckpt"
    stop = {"class_path": "pytorch_lightning.callbacks.EarlyStopping",
            "init_args": {"monitor": "train/return_mean", "mode": "max", "stopping_threshold": 475.0,
                          "patience": 10**6, "strict": False, "check_on_train_epoch_end": True}}
    checkpoint = {"class_path": "pytorch_lightning.callbacks.ModelCheckpoint",
                  "init_args": {"dirpath": str(ckpt_dir), "save_last": True}}
    import yaml

    config = root / "configs" / "ppo" / "cartpole.yaml"
    sampler = yaml.safe_load(config.read_text())["model"]["init_args"]["sampler"]
    assert sampler["class_path"] == "lightning_rl.samplers.VectorSampler"
    assert VectorSampler(**sampler["init_args"]).backend == "gymnasium"
    main(["fit", "--config", str(config),
          "--trainer.enable_progress_bar", "false", "--trainer.logger", "false",
          "--trainer.callbacks", json.dumps([checkpoint, stop])])
    state = torch.load(ckpt_dir / "last.ckpt", weights_only=True)
    early = next(v for k, v in state["callbacks"].items() if k.startswith("EarlyStopping"))
    assert early["stopped_epoch"] > 0 and state["epoch"] == early["stopped_epoch"] < 97

