"""The Explorer: a sampler's batches seen as digideep trajectories (digideep ``Explorer``).

digideep keeps a trajectory as one flat dict of ``'/path'`` keys with batch-major arrays. The
:class:`Explorer` here collects nothing itself: each :meth:`Explorer.update` asks its sampler
for ``[T, B]`` batches (the sampler's own preallocated buffers, filled by its collectors, in
``train``, ``test`` or ``eval`` mode), views them through :func:`samples_to_flat_dict` and
converts the views to the digideep layout with the flat-dict helpers
(:func:`~lightning_rl.data.update_dict_of_lists`, :func:`~lightning_rl.data.complete_dict_of_list`,
:func:`~lightning_rl.data.convert_time_to_batch_major`).

A trajectory of ``n_steps`` steps from ``B`` envs holds ``n_steps + 1`` rows (digideep's final
"pre-step"), float32, ``[B, n_steps + 1, ...]``:

===================================  =========================================================
``/observations`` (``/<field>``...)  the observation the agent acted on at step ``t``; row
                                     ``n_steps``: the observation after the last step
``/masks`` ``[B, T + 1, 1]``         0 where the step before ``t`` ended an episode, so
                                     ``observations[:, t]`` starts a new one (digideep's mask of
                                     the observation; step ``t`` bootstraps with ``masks[:, t+1]``);
                                     with ``collector="wait_reset"`` also 0 on the padding rows
                                     after an episode's end
``/rewards`` ``[B, T + 1, 1]``       reward of step ``t``; NaN in the final row
``/infos/<key>``                     the env's ``env_info`` fields (``truncated``, ``terminated``,
                                     the info dict's keys); NaN in the final row
``/agents/<name>/actions``           the action of step ``t``; final row: the action the agent
                                     would take on the final observation (``final_action``)
``/agents/<name>/hidden_state/...``  recurrent agents only: the state the agent acted from at
                                     step ``t`` (the buffers' ``agent_info.prev_rnn_state``,
                                     ``[B, T + 1, layers, hidden]``); digideep stores the state
                                     after the step, which here is the next row's
``/agents/<name>/artifacts/<key>``   the rest of ``agent_info``, e.g. ``dist_info/prob`` and
                                     ``value``
===================================  =========================================================

Single-agent envs have one agent named ``"agent"`` (:data:`SINGLE_AGENT_NAME`); with a
:class:`~lightning_rl.agents.MultiAgent` every agent of the env's action dict has its own
``/agents/<name>/`` entries. Only rewards and masks gain a trailing unit dim; other entries keep
the buffers' trailing shape (a discrete action is ``[B, T + 1]``).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence
from typing import Any, Literal

import numpy as np

from lightning_rl.agents.recurrent import AlternatingRecurrentAgentMixin, RecurrentAgentMixin
from lightning_rl.data.buffers import numpify_buffer
from lightning_rl.data.flat_dict import (
    complete_dict_of_list,
    convert_time_to_batch_major,
    flat_dict_to_nat,
    join_keys,
    nat_to_flat_dict,
    update_dict_of_lists,
)
from lightning_rl.samplers.base import BaseSampler, Samples
from lightning_rl.samplers.gpu import GpuSampler
from lightning_rl.samplers.serial import SerialSampler

__all__ = [
    "SINGLE_AGENT_NAME",
    "Explorer",
    "agent_names_of",
    "agent_step_to_flat_dict",
    "flat_dict_to_samples",
    "samples_to_flat_dict",
]

#: The agent name of single-agent envs in ``/agents/<name>/...`` keys.
SINGLE_AGENT_NAME = "agent"
_RNN_FIELD = "prev_rnn_state"


def agent_names_of(agent: Any) -> tuple[str, ...]:
    """The agent names an (initialized) agent acts for: a ``MultiAgent``'s, else ``("agent",)``."""
    names = getattr(agent, "agent_names", None)
    return tuple(names) if names else (SINGLE_AGENT_NAME,)


def _is_struct(value: Any) -> bool:
    return isinstance(value, tuple) and hasattr(value, "_fields")


def _leaves(value: Any, path: str) -> dict[str, Any]:
    """``{path: value}`` for an array, the flat view of a (nested) namedarraytuple, {} for None."""
    if value is None:
        return {}
    return nat_to_flat_dict(value, prefix=path) if _is_struct(value) else {path: value}


def _by_agent(value: Any, names: Sequence[str], what: str) -> dict[str, Any]:
    """``{name: value.<name>}`` for several agents, ``{"agent": value}`` for a single one."""
    if tuple(names) == (SINGLE_AGENT_NAME,):
        return {SINGLE_AGENT_NAME: value}
    if value is None:
        return {name: None for name in names}
    if not _is_struct(value) or tuple(value._fields) != tuple(names):
        fields = getattr(value, "_fields", None)
        raise ValueError(f"{what} must have one field per agent {list(names)}, got fields {fields}")
    return {name: getattr(value, name) for name in names}


def _agent_info_paths(agent_info: Any, prefix: str) -> Iterator[tuple[str, Any]]:
    """``(path, value)`` per ``agent_info`` field: RNN state under ``hidden_state``, the rest under ``artifacts``."""
    if agent_info is None:
        return
    for field, value in zip(agent_info._fields, tuple.__iter__(agent_info), strict=True):
        path = join_keys(prefix, "hidden_state") if field == _RNN_FIELD else join_keys(prefix, f"artifacts/{field}")
        yield path, value


def agent_step_to_flat_dict(action: Any, agent_info: Any, agent_names: Sequence[str]) -> dict[str, Any]:
    """``/agents/<name>/actions``, ``.../hidden_state/...`` and ``.../artifacts/...`` of one agent step."""
    flat: dict[str, Any] = {}
    infos = _by_agent(agent_info, agent_names, "agent_info")
    for name, value in _by_agent(action, agent_names, "action").items():
        prefix = f"/agents/{name}"
        flat.update(_leaves(value, join_keys(prefix, "actions")))
        for path, info in _agent_info_paths(infos[name], prefix):
            flat.update(_leaves(info, path))
    return flat


def samples_to_flat_dict(samples: Samples, agent_names: Sequence[str] | None = None) -> dict[str, Any]:
    """View a ``[T, B]`` sample batch as a flat dict with digideep's names, without copying.

    ==================================  =============================================
    key                                 field of ``samples``
    ==================================  =============================================
    ``/observations`` (``/<field>``)    ``env.observation``
    ``/rewards``, ``/prev_rewards``     ``env.reward``, ``env.prev_reward``
    ``/dones``, ``/truncations``           ``env.done``, ``env.truncated``
    ``/infos/<key>``                    ``env.env_info.<key>``
    ``/agents/<n>/actions``             ``agent.action`` (``.<n>``)
    ``/agents/<n>/prev_actions``        ``agent.prev_action`` (``.<n>``)
    ``/agents/<n>/hidden_state/...``    ``agent.agent_info(.<n>).prev_rnn_state``
    ``/agents/<n>/artifacts/<key>``     the other ``agent_info(.<n>)`` fields
    ``/agents/<n>/bootstrap_value``     ``agent.bootstrap_value`` (``.<n>``), ``[B]``
    ==================================  =============================================

    Values are the buffer's own arrays, so writes through the dict land in the batch;
    :func:`flat_dict_to_samples` rebuilds the batch.

    Args:
        samples: A sampler's batch (or any ``Samples`` of arrays).
        agent_names: The agents, whose fields split ``action``, ``prev_action``, ``agent_info``
            and ``bootstrap_value``; None: one agent named ``"agent"``.

    Raises:
        ValueError: If the agent fields do not have one field per agent name.
    """
    names = tuple(agent_names) if agent_names else (SINGLE_AGENT_NAME,)
    env, agent = samples.env, samples.agent
    flat = _leaves(env.observation, "/observations")
    flat.update({"/rewards": env.reward, "/prev_rewards": env.prev_reward})
    flat.update({"/dones": env.done, "/truncations": env.truncated})
    flat.update(_leaves(env.env_info, "/infos"))
    flat.update(agent_step_to_flat_dict(agent.action, agent.agent_info, names))
    prev_actions = _by_agent(agent.prev_action, names, "prev_action")
    bootstrap = _by_agent(getattr(agent, "bootstrap_value", None), names, "bootstrap_value")
    for name in names:
        flat.update(_leaves(prev_actions[name], f"/agents/{name}/prev_actions"))
        flat.update(_leaves(bootstrap[name], f"/agents/{name}/bootstrap_value"))
    return flat


def flat_dict_to_samples(flat: dict[str, Any], like: Samples, agent_names: Sequence[str] | None = None) -> Samples:
    """Rebuild a sample batch from :func:`samples_to_flat_dict`'s keys (the values, not copies).

    Args:
        flat: The flat dict.
        like: A batch with the wanted structure (its values are not used).
        agent_names: As given to :func:`samples_to_flat_dict`.

    Raises:
        ValueError: If a field has no key, or a key matches no field.
    """
    names = tuple(agent_names) if agent_names else (SINGLE_AGENT_NAME,)
    used: set[str] = set()

    def read(template: Any, path: str) -> Any:
        if template is None:
            return None
        if _is_struct(template):
            used.update(k for k in flat if k.startswith(path + "/"))
            return flat_dict_to_nat(flat, template, prefix=path)
        if path not in flat:
            raise ValueError(f"flat_dict_to_samples: flat has no key {path!r}")
        used.add(path)
        return flat[path]

    def join(template: Any, per_agent: dict[str, Any]) -> Any:
        if names == (SINGLE_AGENT_NAME,) or template is None:
            return per_agent[names[0]]
        return template._new([per_agent[name] for name in names])

    env, agent = like.env, like.agent
    new_env = env._replace(
        observation=read(env.observation, "/observations"),
        reward=read(env.reward, "/rewards"),
        prev_reward=read(env.prev_reward, "/prev_rewards"),
        done=read(env.done, "/dones"),
        truncated=read(env.truncated, "/truncations"),
        env_info=read(env.env_info, "/infos"),
    )
    fields: dict[str, Any] = {}
    for field, key in (("action", "actions"), ("prev_action", "prev_actions"), ("bootstrap_value", "bootstrap_value")):
        if field in agent._fields:
            templates = _by_agent(getattr(agent, field), names, field)
            per_agent = {n: read(t, f"/agents/{n}/{key}") for n, t in templates.items()}
            fields[field] = join(getattr(agent, field), per_agent)
    infos = {}
    for name, info in _by_agent(agent.agent_info, names, "agent_info").items():
        values = [read(value, path) for path, value in _agent_info_paths(info, f"/agents/{name}")]
        infos[name] = None if info is None else info._new(values)
    fields["agent_info"] = join(agent.agent_info, infos)
    unknown = sorted(set(flat) - used)
    if unknown:
        raise ValueError(f"flat_dict_to_samples: keys {unknown} match no field of the samples")
    return like._replace(agent=agent._replace(**fields), env=new_env)


def _is_trajectory_key(key: str) -> bool:
    """Keys of :func:`samples_to_flat_dict` that digideep trajectories keep."""
    if key == "/observations" or key.startswith(("/observations/", "/infos/")):
        return True
    parts = key.split("/")
    return len(parts) > 3 and parts[1] == "agents" and parts[3] in ("actions", "hidden_state", "artifacts")


def _is_recurrent(agent: Any) -> bool:
    if getattr(agent, "recurrent", False):
        return True
    return any(isinstance(m, RecurrentAgentMixin) and getattr(m, "recurrent", True) for m in agent.modules())


class _RenderingEnv:
    """An env that renders itself after every step (for :class:`Explorer`'s ``render``)."""

    def __init__(self, env: Any, frames: list[Any], delay: float) -> None:
        self.env = env
        self.frames = frames
        self.delay = delay

    def step(self, action: Any) -> Any:
        out = self.env.step(action)
        frame = self.env.render()
        if frame is not None:
            self.frames.append(frame)
        if self.delay > 0:
            time.sleep(self.delay)
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)


class Explorer:
    """Runs a sampler's envs in ``train``, ``test`` or ``eval`` mode and returns digideep trajectories.

    Every :meth:`update` collects ``n_steps`` steps of every env with the sampler's
    ``obtain_samples`` (``train``: the agent's sample mode, exploring; ``test``/``eval``: its
    eval mode, the same for both, kept apart as digideep keeps them) and returns the
    trajectory described in the module docstring. Steps continue where the previous update
    stopped (episodes run across updates) unless ``do_reset``.

    Args:
        sampler: The sampler whose envs and buffers are used; initialized here (with
            ``agent`` and ``seed``) unless it already is, with ``agent``.
        agent: The agent acting in the sampler (a ``MultiAgent`` for multi-agent envs).
        mode: ``"train"``, ``"test"`` or ``"eval"``.
        n_steps: Steps per env per update: a multiple of the sampler's ``batch_T`` (the
            default), collected as that many whole batches.
        do_reset: Reset every env (and the agent's state) at the start of each update, except
            right after the explorer (or its sampler) started them.
        final_action: Also act on the final observation (the final row's ``/agents`` entries);
            otherwise they are NaN. Recurrent agents keep the state they had before it. For a
            recurrent agent this needs a sampler that acts for all envs in this process
            (``SerialSampler``, ``GpuSampler``).
        deterministic: Act with the policy's mode (``agent.eval_deterministic``), which agents
            honor in eval mode, so only with ``mode`` ``"test"`` or ``"eval"``.
        render: Render env 0 after every step (``SerialSampler`` only, whose envs live in this
            process); frames that ``render()`` returns (``render_mode="rgb_array"`` in the
            sampler's ``env_kwargs``) are kept in :attr:`frames` for the last update.
        render_delay: Seconds to sleep after each render (to watch fast envs).
        seed: Env seed when the explorer initializes the sampler.

    Attributes:
        updates: Calls of :meth:`update`.
        steps: Steps per env taken by all updates.
        env_steps: Env steps (``steps * B``).
        episodes: Episodes completed during updates.
        traj_infos: ``TrajInfo`` of the episodes completed in the last update.

    Raises:
        ValueError: On a bad argument, naming it.

    Examples:
        >>> from lightning_rl.agents import CategoricalPgAgent
        >>> from lightning_rl.samplers import SerialSampler
        >>> explorer = Explorer(SerialSampler("CartPole-v1", batch_T=16, batch_B=2), CategoricalPgAgent(), mode="test")
        >>> explorer.update()["/agents/agent/artifacts/value"].shape
        (2, 17)
    """

    def __init__(
        self,
        sampler: BaseSampler,
        agent: Any,
        mode: Literal["train", "test", "eval"] = "train",
        n_steps: int | None = None,
        do_reset: bool = False,
        final_action: bool = True,
        deterministic: bool = False,
        render: bool = False,
        render_delay: float = 0.0,
        seed: int = 0,
    ) -> None:
        if mode not in ("train", "test", "eval"):
            raise ValueError(f"Explorer: mode must be 'train', 'test' or 'eval', got {mode!r}")
        T = sampler.batch_spec.T
        if n_steps is None:
            n_steps = T
        if isinstance(n_steps, bool) or not isinstance(n_steps, int) or n_steps < 1 or n_steps % T:
            raise ValueError(
                f"Explorer: n_steps must be a positive multiple of the sampler's batch_T={T}, got {n_steps!r}"
            )
        if deterministic and mode == "train":
            raise ValueError("Explorer: deterministic=True acts in the agent's eval mode; use mode='test' or 'eval'")
        if render and not isinstance(sampler, SerialSampler):
            raise ValueError(
                f"Explorer: render=True needs a SerialSampler (the envs of {type(sampler).__name__} live in "
                "worker processes)"
            )
        if render_delay < 0:
            raise ValueError(f"Explorer: render_delay must be >= 0, got {render_delay}")
        if final_action and _is_recurrent(agent):
            in_process = isinstance(sampler, (SerialSampler, GpuSampler))
            if not in_process or any(isinstance(m, AlternatingRecurrentAgentMixin) for m in agent.modules()):
                raise ValueError(
                    f"Explorer: final_action with a recurrent agent needs a SerialSampler or GpuSampler that acts for "
                    f"all envs in this process, got {type(sampler).__name__} with {type(agent).__name__}; "
                    "or set final_action=False"
                )
        if sampler.initialized and sampler.agent is not agent:
            raise ValueError("Explorer: the sampler is initialized with another agent; pass that agent")
        self.was_reset = not sampler.initialized
        if not sampler.initialized:
            sampler.initialize(agent, seed=seed)
        self.sampler = sampler
        self.agent = agent
        self.mode = mode
        self.n_steps = n_steps
        self.do_reset = do_reset
        self.final_action = final_action
        self.deterministic = deterministic
        self.render = render
        self.render_delay = float(render_delay)
        self.agent_names = agent_names_of(agent)
        self.updates = 0
        self.steps = 0
        self.env_steps = 0
        self.episodes = 0
        self.traj_infos: list[Any] = []
        self.frames: list[Any] = []
        # Mask of the observation the next step acts on (digideep's ``state["masks"]``).
        self._masks = np.ones(sampler.batch_spec.B, dtype=np.float32)

    def update(self, itr: int | None = None) -> dict[str, np.ndarray]:
        """Run ``n_steps`` steps of every env and return the trajectory (see the module docstring).

        Args:
            itr: Iteration passed to the sampler (the agent's schedules); default :attr:`updates`.

        Returns:
            ``{key: float32 [B, n_steps + 1, ...]}``, copies that outlive the sampler's buffers.
        """
        itr = self.updates if itr is None else itr
        T = self.sampler.batch_spec.T
        n_batches = self.n_steps // T
        reset = self.do_reset and not self.was_reset
        self.was_reset = False
        if reset:
            self._masks[:] = 1.0
        trajectory: dict[str, list] = {}
        completed: list[Any] = []
        self.frames = []
        previous = self.agent.eval_deterministic
        self.agent.eval_deterministic = self.deterministic
        try:
            with self._rendering():
                for k in range(n_batches):
                    samples, trajs = self.sampler.obtain_samples(
                        itr, agent_mode="sample" if self.mode == "train" else "eval", reset_envs=reset and k == 0
                    )
                    completed.extend(trajs)
                    # Later batches overwrite the buffers: keep copies of all but the last.
                    self._append_batch(trajectory, samples, offset=k * T, copy=k < n_batches - 1)
            update_dict_of_lists(trajectory, self._final_step(), index=self.n_steps)
        finally:
            self.agent.eval_deterministic = previous
        complete_dict_of_list(trajectory, self.n_steps + 1)
        self.updates += 1
        self.steps += self.n_steps
        self.env_steps += self.n_steps * self.sampler.batch_spec.B
        self.episodes += len(completed)
        self.traj_infos = completed
        return convert_time_to_batch_major(trajectory)

    def _append_batch(self, trajectory: dict[str, list], samples: Samples, offset: int, copy: bool) -> None:
        flat = samples_to_flat_dict(samples, self.agent_names)
        done = np.asarray(samples.env.done)
        masks = np.empty(done.shape + (1,), dtype=np.float32)
        masks[0, :, 0] = self._masks
        masks[1:, :, 0] = 1.0 - done[:-1]
        self._masks = 1.0 - done[-1].astype(np.float32)
        views = {k: v for k, v in flat.items() if k == "/observations" or k.startswith("/observations/")}
        views["/masks"] = masks
        views["/rewards"] = np.asarray(flat["/rewards"])[..., None]
        views.update((k, v) for k, v in flat.items() if _is_trajectory_key(k) and k not in views)
        for t in range(len(done)):
            row = {k: (np.array(v[t]) if copy else v[t]) for k, v in views.items()}
            update_dict_of_lists(trajectory, row, index=offset + t)

    def _final_step(self) -> dict[str, Any]:
        """The last row: the observation after the last step, its mask and (``final_action``) the agent's step on it."""
        sb = self.sampler.step_buffer
        row = {k: np.array(v) for k, v in _leaves(sb.observation, "/observations").items()}
        row["/masks"] = self._masks[:, None].copy()
        if self.final_action:
            recurrent = [(m, m.prev_rnn_state) for m in self.agent.modules() if isinstance(m, RecurrentAgentMixin)]
            try:
                action, agent_info = self.agent.step(sb.observation, sb.prev_action, sb.prev_reward)
            finally:
                # The final action is not taken: the next batch acts from the state before it.
                for module, state in recurrent:
                    module.advance_rnn_state(state)
            flat = agent_step_to_flat_dict(numpify_buffer(action), numpify_buffer(agent_info), self.agent_names)
            row.update((k, np.array(v)) for k, v in flat.items())
        return row

    @contextlib.contextmanager
    def _rendering(self) -> Iterator[None]:
        if not self.render:
            yield
            return
        sampler = self.sampler
        assert isinstance(sampler, SerialSampler)  # render=True requires one (checked in __init__)
        envs = sampler.train_collector.envs
        original = envs[0]
        envs[0] = _RenderingEnv(original, self.frames, self.render_delay)
        try:
            yield
        finally:
            envs[0] = original

    def state_dict(self) -> dict[str, Any]:
        """Counters, the mask of the next observation and the sampler's state (its envs, for the serial sampler).

        The agent's own state (weights, recurrent state) is the agent's ``state_dict``.
        """
        return {
            "updates": self.updates,
            "steps": self.steps,
            "env_steps": self.env_steps,
            "episodes": self.episodes,
            "was_reset": self.was_reset,
            "masks": self._masks.copy(),
            "sampler": self.sampler.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` into an explorer on a sampler built with the same arguments.

        Raises:
            ValueError: If the state comes from a sampler with another number of envs.
        """
        masks = np.asarray(state["masks"], dtype=np.float32)
        if masks.shape != self._masks.shape:
            raise ValueError(
                f"Explorer.load_state_dict: the state has {masks.shape[0]} envs, this sampler has "
                f"batch_B={self._masks.shape[0]}"
            )
        self.sampler.load_state_dict(state["sampler"])
        self.updates = int(state["updates"])
        self.steps = int(state["steps"])
        self.env_steps = int(state["env_steps"])
        self.episodes = int(state["episodes"])
        self.was_reset = bool(state["was_reset"])
        self._masks = masks.copy()

    def close(self) -> None:
        """Shut the sampler down (its envs and workers)."""
        self.sampler.shutdown()
