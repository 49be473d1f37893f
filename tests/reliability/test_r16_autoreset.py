"""Row 16: the samplers' autoreset gives exactly the transitions and episodes of single-env rollouts.

The per-env samplers step single envs through :mod:`lightning_rl.samplers.collectors`, which
resets an env itself right after its done step (``ResetCollector``) or at the start of the next
batch (``WaitResetCollector``); they step no gymnasium vector env
(:func:`test_only_the_vector_sampler_steps_gymnasium_vector_envs` keeps it so). The one sampler
that does, :class:`~lightning_rl.samplers.vector.VectorSampler`, is checked here over
``SyncVectorEnv`` and ``AsyncVectorEnv`` in both NEXT_STEP and SAME_STEP modes, and must refuse a
vector env without ``metadata["autoreset_mode"]``.

The reference is plain gymnasium, independent of library code: one
``RecordEpisodeStatistics(TimeLimit(RandomLengthEnv(), 4))`` per env, reset with the seed the
sampler documents for env ``b`` (``seed + b``) and then unseeded, stepped with the policy the
test agent follows (``action = sum(observation) % 3``, :class:`tests.samplers.helpers.ObsAgent`).
Episodes are 1 to 6 steps long, so they terminate, get truncated at step 4, and sometimes
terminate exactly at the limit (both gymnasium flags set).

Checked for the serial, CPU and GPU samplers with both collectors:

* every env's transitions ``(s, a, r, s', terminated, truncated)`` read from the ``[T, B]``
  batches equal the reference's in order (so their multisets are equal too). Every row is one
  real env step: no extra row for a reset, and after a done step the next row starts from the
  reset observation. The batch keeps no ``s'`` for done steps (the row after them belongs to
  the next episode, ``samplers/base.py``), so ``s'`` is compared on the other steps here and,
  for episode ends, through the final observation handed to ``TrajInfo.terminate``;
* ``truncated`` marks an episode cut before it terminated; where gymnasium sets both flags the
  episode terminated (nothing to bootstrap), so the reference's flag is ``truncated and not
  terminated``;
* the wait-reset collector's padding rows (after a done, until the batch ends) are exactly
  the rows ``valid_from_done`` masks, and hold no reward;
* the finished episodes' ``Length``/``Return`` and full transition lists equal
  ``RecordEpisodeStatistics``' lengths and returns and the reference episodes, as multisets.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pytest
from gymnasium.wrappers import RecordEpisodeStatistics

from lightning_rl.data.buffers import buffer_func
from lightning_rl.envs.traj_info import TrajInfo
from lightning_rl.returns import valid_from_done
from lightning_rl.samplers import CpuSampler, GpuSampler, SerialSampler, VectorSampler
from tests.samplers.helpers import ObsAgent
from tests.toy_envs import make_random_length_env

SEED, T, B, N_BATCHES = 11, 7, 3, 5
TIME_LIMIT = 4
#: ``(s, a, r, s', terminated, truncated)``; ``s'`` is None where the batch cannot hold it (done steps).
Transition = tuple[tuple[float, ...], int, float, tuple[float, ...] | None, bool, bool]


def policy(observation: np.ndarray) -> int:
    """ObsAgent's action, by hand: the observation's entries are small integers."""
    return int(round(float(np.sum(observation)))) % 3


def as_key(observation: Any) -> tuple[float, ...]:
    return tuple(float(x) for x in np.asarray(observation).ravel())


def reference_rollout(seed: int, n_steps: int) -> tuple[list[Transition], list[tuple[int, float, tuple]]]:
    """``n_steps`` steps of one gymnasium env: its transitions, and ``(length, return, transitions)``
    of each episode that ended (length and return from ``RecordEpisodeStatistics``)."""
    env = RecordEpisodeStatistics(make_random_length_env(max_episode_steps=TIME_LIMIT))
    observation, _ = env.reset(seed=seed)
    transitions: list[Transition] = []
    episodes, episode_start = [], 0
    for _ in range(n_steps):
        action = policy(observation)
        next_observation, reward, terminated, truncated, info = env.step(action)
        done = terminated or truncated
        transitions.append((as_key(observation), action, float(reward), None if done else as_key(next_observation),
                            bool(terminated), bool(truncated and not terminated)))
        if done:
            # The episode's transitions, the last one with the final observation as s'.
            last = transitions[-1]
            steps = [*transitions[episode_start:-1], (*last[:3], as_key(next_observation), *last[4:])]
            episodes.append((int(info["episode"]["l"]), float(info["episode"]["r"]), tuple(steps)))
            observation, _ = env.reset()
            episode_start = len(transitions)
        else:
            observation = next_observation
    env.close()
    return transitions, episodes


class RecordingTrajInfo(TrajInfo):
    """A TrajInfo that also keeps its episode's transitions, as the collectors report them."""

    def __init__(self, discount: float = 0.99) -> None:
        super().__init__(discount=discount)
        self._steps: list[Any] = []

    def step(self, observation, action, reward, done, agent_info, env_info) -> None:
        super().step(observation, action, reward, done, agent_info, env_info)
        self._steps.append((as_key(observation), int(action), float(reward), None,
                            bool(env_info.terminated), bool(env_info.truncated)))

    def terminate(self, observation: Any) -> TrajInfo:
        steps = self._steps
        for i in range(len(steps) - 1):
            steps[i] = steps[i][:3] + (steps[i + 1][0],) + steps[i][4:]
        steps[-1] = steps[-1][:3] + (as_key(observation),) + steps[-1][4:]
        return self


def run_sampler(sampler_cls: type, collector: str, **kwargs: Any) -> tuple[list[Any], np.ndarray, list[Any]]:
    """``N_BATCHES`` batches (copies), the step buffer's observations after the last one, and the
    finished episodes' TrajInfos."""
    if sampler_cls in (CpuSampler, GpuSampler):
        kwargs["n_workers"] = 2
    sampler = sampler_cls(functools.partial(make_random_length_env, max_episode_steps=TIME_LIMIT), batch_T=T,
                          batch_B=B, collector=collector, traj_info_cls=RecordingTrajInfo, **kwargs)
    try:
        sampler.initialize(ObsAgent(n_actions=3), seed=SEED)
        batches, trajs = [], []
        for itr in range(N_BATCHES):
            samples, traj_infos = sampler.obtain_samples(itr)
            batches.append(buffer_func(samples, np.copy))
            trajs += traj_infos
        last_observation = np.array(sampler.step_buffer.observation)
    finally:
        sampler.shutdown()
    return batches, last_observation, trajs


def padding_mask(done: np.ndarray) -> np.ndarray:
    """``[T, B]``, by hand: the rows after each env's first done of the batch."""
    mask = np.zeros_like(done, dtype=bool)
    for b in range(done.shape[1]):
        ends = np.flatnonzero(done[:, b])
        if len(ends):
            mask[ends[0] + 1:, b] = True
    return mask


def batch_transitions(batches: list[Any], last_observation: np.ndarray, collector: str) -> list[list[Transition]]:
    """Each env's transitions in the order the batches hold them, padding rows left out."""
    per_env: list[list[Transition]] = [[] for _ in range(B)]
    for n, s in enumerate(batches):
        done, truncated = np.asarray(s.env.done), np.asarray(s.env.truncated)
        padding = padding_mask(done) if collector == "wait_reset" else np.zeros_like(done)
        if collector == "wait_reset":
            assert (np.asarray(valid_from_done(done)) == ~padding).all()
            assert (np.asarray(s.env.reward)[padding] == 0).all() and not truncated[padding].any()
        following = batches[n + 1].env.observation[0] if n + 1 < len(batches) else last_observation
        for b in range(B):
            for t in np.flatnonzero(~padding[:, b]):
                if done[t, b]:
                    next_key = None
                else:
                    next_key = as_key(s.env.observation[t + 1, b] if t + 1 < T else following[b])
                per_env[b].append((as_key(s.env.observation[t, b]), int(s.agent.action[t, b]),
                                   float(s.env.reward[t, b]), next_key, bool(done[t, b] and not truncated[t, b]),
                                   bool(truncated[t, b])))
    return per_env


@pytest.mark.parametrize("collector", ["reset", "wait_reset"])
@pytest.mark.parametrize("sampler_cls", [SerialSampler, CpuSampler, GpuSampler], ids=lambda c: c.__name__)
def test_transitions_and_episodes_equal_single_env_rollouts(sampler_cls, collector):
    check_against_single_env_rollouts(*run_sampler(sampler_cls, collector), collector)


@pytest.mark.parametrize("autoreset_mode", ["next_step", "same_step"])
@pytest.mark.parametrize("backend", ["sync", "async"])
def test_vector_sampler_transitions_and_episodes_equal_single_env_rollouts(backend, autoreset_mode):
    check_against_single_env_rollouts(
        *run_sampler(VectorSampler, "reset", backend=backend, autoreset_mode=autoreset_mode), "reset"
    )


def test_vector_sampler_refuses_a_vector_env_without_autoreset_mode(monkeypatch):
    original = gymnasium.vector.SyncVectorEnv.__init__

    def without_mode(self, *args, **kwargs):
        original(self, *args, **kwargs)
        self.metadata = {k: v for k, v in self.metadata.items() if k != "autoreset_mode"}

    monkeypatch.setattr(gymnasium.vector.SyncVectorEnv, "__init__", without_mode)
    sampler = VectorSampler(functools.partial(make_random_length_env, max_episode_steps=TIME_LIMIT), backend="sync",
                            batch_T=T, batch_B=B)
    with pytest.raises(ValueError, match="autoreset_mode"):
        sampler.initialize(ObsAgent(n_actions=3), seed=SEED)


def check_against_single_env_rollouts(batches: list[Any], last_observation: np.ndarray, trajs: list[Any],
                                      collector: str) -> None:
    per_env = batch_transitions(batches, last_observation, collector)
    reference_episodes = []
    for b in range(B):
        # The reset collector steps every env on every row; the wait-reset one pads after dones.
        if collector == "reset":
            assert len(per_env[b]) == T * N_BATCHES
        reference, episodes = reference_rollout(SEED + b, len(per_env[b]))
        assert per_env[b] == reference, f"env {b}"
        assert Counter(per_env[b]) == Counter(reference)
        reference_episodes += episodes
    flags = Counter((t[4], t[5]) for env in per_env for t in env)
    assert flags[(True, False)] and flags[(False, True)], flags  # terminations and truncations occurred
    steps = [e[2] for e in reference_episodes]
    assert any(len(s) == TIME_LIMIT and s[-1][4] for s in steps)  # terminated at the limit: both flags

    # Episode statistics and transitions as the TrajInfos recorded them, against gymnasium's.
    assert len(trajs) == len(reference_episodes) > 3 * B
    got = Counter((int(t.Length), float(t.Return), tuple(t._steps)) for t in trajs)
    assert got == Counter(reference_episodes)


def test_only_the_vector_sampler_steps_gymnasium_vector_envs():
    # The module docstring's premise: the per-env samplers wrap no gymnasium vector env; were one
    # wrapped elsewhere, its autoreset mode (NEXT_STEP/SAME_STEP) would need tests here too.
    # The vector sampler's EnvPool backend adapts EnvPool to the VectorEnv calls (NEXT_STEP with
    # partial resets); tests/samplers/test_envpool_backend.py checks that no reset step becomes a row.
    # safe_state.py stores a SyncVectorEnv's copies in checkpoints and steps nothing.
    package = Path(__file__).resolve().parents[2] / "lightning_rl"
    pattern = re.compile(r"gymnasium\.vector|gym\.vector|VectorEnv|autoreset_mode|AutoresetMode")
    hits = {str(p.relative_to(package)) for p in sorted(package.rglob("*.py"))
            for line in p.read_text().splitlines() if pattern.search(line)}
    assert hits == {"samplers/vector.py", "samplers/envpool_backend.py", "safe_state.py"}
