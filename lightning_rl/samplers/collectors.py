"""Collectors: the agent-env interaction loop over a slice of envs (rlpyt section 8).

A collector owns some envs and their views of the sample buffer (``[T, n]``) and of the step
buffer (``[n]``: the observation, previous action and reward the agent acts on next). Acting
and stepping are separate so that the same collector serves every sampler:

* :func:`act` runs the agent on a step buffer and writes row ``t`` of the batch (agent inputs,
  action, agent_info). The serial sampler and CPU workers call it themselves; the GPU and
  alternating samplers call it in the main process for all envs at once.
* :meth:`ResetCollector.step_envs` steps every env with the actions of row ``t``, writes the env
  side of that row, records episode statistics and handles episode ends.

When an env's episode ends, its ``reset_agent`` flag is raised; :func:`reset_agent_envs` then
calls ``agent.reset_one(b)`` (recurrent state) before that env's next action.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Sequence
from typing import Any, cast

import numpy as np

from lightning_rl.data.buffers import buffer_func, numpify_buffer
from lightning_rl.envs.traj_info import AtariTrajInfo, TrajInfo
from lightning_rl.safe_state import copy_into
from lightning_rl.samplers.base import Samples, StepBuffer, zeros_like_buffer

__all__ = [
    "EvalCollector",
    "ResetCollector",
    "WaitResetCollector",
    "act",
    "act_eval",
    "bootstrap_value",
    "collect_batch",
    "evaluate_envs",
    "info_value",
    "reset_agent_envs",
    "restore_traj_infos",
    "traj_info_wants_agent_info",
    "write_rows",
]

_STEPS_IGNORING_AGENT_INFO = (TrajInfo.step, AtariTrajInfo.step)


def act(agent: Any, step_buffer: StepBuffer, samples: Samples, t: int) -> None:
    """Record the agent's inputs at row ``t`` and act on them for every env of the slice.

    Args:
        agent: Acts on ``[n]`` inputs.
        step_buffer: ``[n]`` observation, prev_action, prev_reward.
        samples: ``[T, n]`` view of the batch.
        t: Time index.
    """
    sb = step_buffer
    samples.env.observation[t] = sb.observation
    samples.agent.prev_action[t] = sb.prev_action
    samples.env.prev_reward[t] = sb.prev_reward
    action, agent_info = agent.step(sb.observation, sb.prev_action, sb.prev_reward)
    samples.agent.action[t] = numpify_buffer(action)
    if samples.agent.agent_info is not None:
        samples.agent.agent_info[t] = numpify_buffer(agent_info)


def act_eval(agent: Any, step_buffer: StepBuffer) -> None:
    """Act on an eval step buffer; the actions go to ``step_buffer.action``."""
    sb = step_buffer
    action, _ = agent.step(sb.observation, sb.prev_action, sb.prev_reward)
    sb.action[:] = numpify_buffer(action)


def reset_agent_envs(agent: Any, reset_flags: np.ndarray, offset: int = 0) -> None:
    """``agent.reset_one(offset + i)`` for each raised flag ``i``, then lower the flags.

    Args:
        agent: The agent acting for these envs.
        reset_flags: ``[n]`` bool view of a step buffer's ``reset_agent``.
        offset: Index of the slice's first env in the agent's batch.
    """
    idxs = np.flatnonzero(reset_flags)
    for i in idxs:
        agent.reset_one(int(i) + offset)
    reset_flags[idxs] = False


def restore_traj_infos(factory: Callable[[], Any], stored: list[dict[str, Any]]) -> list[Any]:
    """Unfinished TrajInfos rebuilt from a checkpoint's plain dicts (one per env)."""
    traj_infos = [factory() for _ in stored]
    for traj_info, fields in zip(traj_infos, stored, strict=True):
        traj_info.update(fields)
    return traj_infos


def write_rows(dst: Any, t: int, rows: list[Any], name: str = "env_info") -> None:
    """``dst[t, i] = rows[i]`` for every ``i`` at once, field by field.

    Args:
        dst: ``[T, n]`` array or namedarraytuple of them (nested for nested infos).
        t: Time index.
        rows: ``n`` values with ``dst``'s structure (one env's ``env_info`` each).
        name: Field path for error messages.

    Raises:
        ValueError: Naming the field whose values do not fit the buffer.
    """
    if isinstance(dst, tuple):
        for j, (field, sub) in enumerate(zip(cast(Any, dst)._fields, dst, strict=True)):
            if sub is not None:
                # tuple's own indexing: a namedarraytuple's [] would index every field.
                write_rows(sub, t, [tuple.__getitem__(row, j) for row in rows], f"{name}.{field}")
        return
    try:
        dst[t] = rows
    except (ValueError, TypeError) as e:
        raise ValueError(f"cannot write {name} of {len(rows)} envs into a buffer of shape {dst.shape[1:]}: {e}") from e


def info_value(info: Any, name: str, default: Any) -> Any:
    """``getattr(info, name, default)`` for an ``env_info``, without raising and catching an
    ``AttributeError`` when a named tuple lacks the field (a few microseconds per env step)."""
    fields = getattr(info, "_fields", None)
    if fields is None:
        return getattr(info, name, default)
    return getattr(info, name) if name in fields else default


def traj_info_wants_agent_info(traj_infos: Sequence[Any]) -> bool:
    """Whether these TrajInfos' ``step`` may read ``agent_info`` (the built-in ones do not).

    Slicing one env's ``agent_info`` out of the batch costs a few microseconds per env step, so
    collectors pass ``None`` to TrajInfo classes known to ignore it; any other class (a user's
    subclass overriding ``step``) gets the real slice.
    """
    return bool(traj_infos) and type(traj_infos[0]).step not in _STEPS_IGNORING_AGENT_INFO


def bootstrap_value(agent: Any, step_buffer: StepBuffer, samples: Samples) -> None:
    """Write the agent's value of the step buffer's observations to ``samples.agent.bootstrap_value``."""
    sb = step_buffer
    value = agent.value(sb.observation, sb.prev_action, sb.prev_reward)
    samples.agent.bootstrap_value[:] = numpify_buffer(value)


def collect_batch(
    agent: Any, collector: ResetCollector, step_buffer: StepBuffer, samples: Samples, bootstrap: bool
) -> list[Any]:
    """One batch with an in-process agent: ``T`` rounds of act then step (serial and CPU workers).

    Args:
        agent: Acts on the slice's ``[n]`` envs.
        collector: Owns the slice's envs.
        step_buffer: ``[n]`` view of the step buffer.
        samples: ``[T, n]`` view of the batch.
        bootstrap: Also write ``samples.agent.bootstrap_value``.

    Returns:
        TrajInfos of the episodes that ended.
    """
    collector.begin_batch()
    completed: list[Any] = []
    for t in range(len(samples.env.reward)):
        reset_agent_envs(agent, step_buffer.reset_agent)
        act(agent, step_buffer, samples, t)
        completed.extend(collector.step_envs(t))
    reset_agent_envs(agent, step_buffer.reset_agent)
    if bootstrap:
        bootstrap_value(agent, step_buffer, samples)
    return completed


def evaluate_envs(
    agent: Any,
    collector: EvalCollector,
    max_steps: int | None,
    max_trajectories: int | None,
    on_trajectory: Callable[[Any], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> list[Any]:
    """Run eval envs with an in-process agent from fresh resets (serial and CPU workers).

    Args:
        agent: Acting in eval mode, already reset.
        collector: The eval envs.
        max_steps: Steps per env (``None``: no limit).
        max_trajectories: Stop once this many episodes have completed here.
        on_trajectory: Called with each completed TrajInfo as it completes.
        should_stop: Polled before every step; True ends the evaluation.

    Returns:
        TrajInfos of the completed episodes, in completion order.
    """
    collector.start_envs()
    sb = collector.step_buffer
    completed: list[Any] = []
    if not collector.envs:
        return completed
    steps = range(max_steps) if max_steps is not None else itertools.count()
    for _ in steps:
        if should_stop is not None and should_stop():
            break
        reset_agent_envs(agent, sb.reset_agent)
        act_eval(agent, sb)
        for traj_info in collector.step_envs():
            completed.append(traj_info)
            if on_trajectory is not None:
                on_trajectory(traj_info)
        if max_trajectories is not None and len(completed) >= max_trajectories:
            break
    return completed


class ResetCollector:
    """Steps a slice of envs; an env whose episode ends is reset at once.

    On a done step the episode's TrajInfo is completed (if the game is over: ``traj_done`` in
    ``env_info`` when present, else ``done``), the env is reset, the next stored observation is
    the reset observation, ``prev_action``/``prev_reward`` are zeroed and the agent's state is
    reset (``reset_agent`` flag). With Atari's episodic lives, a lost life is ``done`` (the agent
    resets) without a ``traj_done`` (the game and its TrajInfo go on).

    Args:
        envs: The slice's envs.
        step_buffer: ``[n]`` view of the step buffer.
        samples: ``[T, n]`` view of the batch (``None`` for evaluation).
        traj_info_factory: Builds an empty TrajInfo.
    """

    def __init__(
        self,
        envs: Sequence[Any],
        step_buffer: StepBuffer,
        samples: Samples | None,
        traj_info_factory: Callable[[], Any],
    ) -> None:
        self.envs = list(envs)
        self.step_buffer = step_buffer
        self.samples = samples
        self.traj_info_factory = traj_info_factory
        self.traj_infos = [traj_info_factory() for _ in self.envs]

    def start_envs(self, max_decorrelation_steps: int = 0, rngs: Sequence[np.random.Generator] | None = None) -> None:
        """Reset every env, optionally take random steps, and start fresh TrajInfos.

        Args:
            max_decorrelation_steps: Each env takes ``rng.integers(0, max + 1)`` random actions
                (resetting at episode ends); those episodes are discarded.
            rngs: One generator per env for the step counts and actions.
        """
        sb = self.step_buffer
        for i, env in enumerate(self.envs):
            sb.observation[i] = env.reset()
        sb.prev_action[:] = 0
        sb.prev_reward[:] = 0
        sb.reset_agent[:] = False
        if max_decorrelation_steps > 0:
            if rngs is None or len(rngs) != len(self.envs):
                raise ValueError("start_envs: decorrelation needs one random generator per env")
            for i, env in enumerate(self.envs):
                self._decorrelate(i, env, int(rngs[i].integers(0, max_decorrelation_steps + 1)), rngs[i])
        self.traj_infos = [self.traj_info_factory() for _ in self.envs]

    def _decorrelate(self, i: int, env: Any, n_steps: int, rng: np.random.Generator) -> None:
        sb = self.step_buffer
        # A private copy of the action space, seeded from ``rng``: the random actions then
        # depend only on the env's seed, whichever process steps it.
        space = copy.deepcopy(env.action_space)
        space.seed(int(rng.integers(2**63)))
        for _ in range(n_steps):
            action = space.sample()
            observation, reward, done, env_info = env.step(action)
            if getattr(env_info, "traj_done", done):
                observation = env.reset()
            sb.observation[i] = observation
            if done:
                sb.prev_action[i] = 0
                sb.prev_reward[i] = 0
            else:
                sb.prev_action[i] = action
                sb.prev_reward[i] = reward

    def begin_batch(self) -> None:
        """Called before the first step of every batch (the reset collector has nothing to do)."""

    def step_envs(self, t: int) -> list[Any]:
        """Step every env with the actions in row ``t``; write the env side of row ``t``.

        The per-env loop only steps envs and keeps their TrajInfos; rewards, dones, time-outs
        and ``env_info`` go into row ``t`` once, as whole columns.

        Returns:
            TrajInfos of the episodes that ended.
        """
        samples, sb = self.samples, self.step_buffer
        assert samples is not None  # None only for evaluation, which does not step here
        action = samples.agent.action[t]
        agent_info_t = None
        if samples.agent.agent_info is not None and traj_info_wants_agent_info(self.traj_infos):
            agent_info_t = samples.agent.agent_info[t]
        observation = sb.observation
        n = len(self.envs)
        rewards, dones, truncations, infos = [0.0] * n, [False] * n, [False] * n, [None] * n
        completed = []
        for i, env in enumerate(self.envs):
            a = action[i]
            o, r, d, info = env.step(a)
            traj_info = self.traj_infos[i]
            traj_info.step(observation[i], a, r, d, None if agent_info_t is None else agent_info_t[i], info)
            if info_value(info, "traj_done", d):
                completed.append(traj_info.terminate(o))
                self.traj_infos[i] = self.traj_info_factory()
                o = env.reset()
            observation[i] = o
            rewards[i], dones[i], infos[i] = r, d, info
            truncations[i] = info_value(info, "truncated", False)
        reward = samples.env.reward[t]
        reward[:] = rewards
        samples.env.done[t] = dones
        samples.env.truncated[t] = truncations
        if samples.env.env_info is not None:
            write_rows(samples.env.env_info, t, infos)
        sb.prev_action[:] = action
        sb.prev_reward[:] = reward
        ended = np.flatnonzero(samples.env.done[t])
        if len(ended):
            sb.prev_action[ended] = 0
            sb.prev_reward[ended] = 0
            sb.reset_agent[ended] = True
        return completed

    def state(self) -> dict[str, Any]:
        """Everything but the envs needed to continue exactly (for checkpoints); copies.

        :func:`lightning_rl.safe_state.encode` stores it as data (TrajInfos as plain dicts).
        """
        return {
            "step_buffer": buffer_func(self.step_buffer, np.array),
            "traj_infos": [dict(t) for t in self.traj_infos],
        }

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore a decoded :meth:`state` into the existing buffers, in place."""
        copy_into(self.step_buffer, state["step_buffer"], "collector.step_buffer")
        self.traj_infos = restore_traj_infos(self.traj_info_factory, state["traj_infos"])


class WaitResetCollector(ResetCollector):
    """Steps a slice of envs; an env whose episode ends waits until the next batch.

    After a done step the env is not stepped again in this batch: its rows hold zeros
    (observation, action, agent_info, reward, env_info) with ``done`` True. At the start of the
    next batch it is reset (or, after a lost life, continues from the observation it reached)
    with ``prev_action``/``prev_reward`` zeroed and the agent's state reset. Training sequences
    then never cross an episode boundary, which recurrent agents need (rlpyt
    ``CpuWaitResetCollector``).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """:class:`ResetCollector`'s arguments; adds which envs wait and their next observations."""
        super().__init__(*args, **kwargs)
        n = len(self.envs)
        self.waiting = np.zeros(n, dtype=bool)
        self.need_reset = np.zeros(n, dtype=bool)
        self.next_observation = zeros_like_buffer(self.step_buffer.observation)

    def start_envs(self, max_decorrelation_steps: int = 0, rngs: Sequence[np.random.Generator] | None = None) -> None:
        super().start_envs(max_decorrelation_steps, rngs)
        self.waiting[:] = False
        self.need_reset[:] = False

    def begin_batch(self) -> None:
        """Restart the envs that waited through the end of the previous batch."""
        sb = self.step_buffer
        for i in np.flatnonzero(self.waiting):
            if self.need_reset[i]:
                sb.observation[i] = self.envs[i].reset()
            else:
                sb.observation[i] = self.next_observation[i]
            sb.prev_action[i] = 0
            sb.prev_reward[i] = 0
            sb.reset_agent[i] = True
        self.waiting[:] = False
        self.need_reset[:] = False

    def step_envs(self, t: int) -> list[Any]:
        samples, sb = self.samples, self.step_buffer
        assert samples is not None  # None only for evaluation, which does not step here
        action = samples.agent.action[t]
        agent_info = samples.agent.agent_info
        agent_info_t = None if agent_info is None else agent_info[t]
        # Blank rows below still zero agent_info; TrajInfos get it only if they may read it.
        traj_agent_info = agent_info_t if traj_info_wants_agent_info(self.traj_infos) else None
        env_info = samples.env.env_info
        reward, done, truncated = samples.env.reward[t], samples.env.done[t], samples.env.truncated[t]
        observation = sb.observation
        was_waiting = self.waiting.copy()
        completed = []
        for i, env in enumerate(self.envs):
            if was_waiting[i]:
                continue
            a = action[i]
            o, r, d, info = env.step(a)
            step_agent_info = None if traj_agent_info is None else traj_agent_info[i]
            self.traj_infos[i].step(observation[i], a, r, d, step_agent_info, info)
            if info_value(info, "traj_done", d):
                completed.append(self.traj_infos[i].terminate(o))
                self.traj_infos[i] = self.traj_info_factory()
                self.need_reset[i] = True
            if d:
                self.waiting[i] = True
                self.next_observation[i] = o
                o = 0
            observation[i] = o
            reward[i] = r
            done[i] = d
            truncated[i] = info_value(info, "truncated", False)
            if env_info is not None:
                env_info[t, i] = info
        blank = np.flatnonzero(was_waiting)
        if len(blank):
            action[blank] = 0
            if agent_info_t is not None:
                agent_info_t[blank] = 0
            if env_info is not None:
                env_info[t, blank] = 0
            reward[blank] = 0
            done[blank] = True
            truncated[blank] = False
        sb.prev_action[:] = action
        sb.prev_reward[:] = reward
        waiting = np.flatnonzero(self.waiting)
        if len(waiting):
            sb.prev_action[waiting] = 0
            sb.prev_reward[waiting] = 0
        return completed

    def state(self) -> dict[str, Any]:
        state = super().state()
        state.update(
            waiting=self.waiting.copy(),
            need_reset=self.need_reset.copy(),
            next_observation=buffer_func(self.next_observation, np.array),
        )
        return state

    def load_state(self, state: dict[str, Any]) -> None:
        super().load_state(state)
        self.waiting[:] = state["waiting"]
        self.need_reset[:] = state["need_reset"]
        copy_into(self.next_observation, state["next_observation"], "collector.next_observation")


class EvalCollector(ResetCollector):
    """Steps eval envs with the actions in ``step_buffer.action``, resetting at episode ends.

    Records only TrajInfos (no samples).
    """

    def __init__(self, envs: Sequence[Any], step_buffer: StepBuffer, traj_info_factory: Callable[[], Any]) -> None:
        super().__init__(envs, step_buffer, None, traj_info_factory)

    def step_envs(self, t: int = 0) -> list[Any]:
        """Step every eval env once; return the TrajInfos of the episodes that ended."""
        sb = self.step_buffer
        action, observation = sb.action, sb.observation
        completed = []
        for i, env in enumerate(self.envs):
            a = action[i]
            o, r, d, info = env.step(a)
            self.traj_infos[i].step(observation[i], a, r, d, None, info)
            if info_value(info, "traj_done", d):
                completed.append(self.traj_infos[i].terminate(o))
                self.traj_infos[i] = self.traj_info_factory()
                o = env.reset()
            observation[i] = o
            if d:
                sb.prev_action[i] = 0
                sb.prev_reward[i] = 0
                sb.reset_agent[i] = True
            else:
                sb.prev_action[i] = a
                sb.prev_reward[i] = r
        return completed

