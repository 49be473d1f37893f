"""The vector-env sampler: one ``gymnasium.vector.VectorEnv`` of ``batch_B`` copies per call.

Where a vectorised implementation of an env exists (ale-py's ``AtariVectorEnv`` stepping Atari
games in C++ threads, gymnasium's NumPy ``CartPoleVectorEnv``), one ``step`` call advances all
``B`` copies, and the per-env Python loop of the other samplers disappears from the hot path.
:class:`VectorSampler` fills the same ``[T, B]`` :class:`~lightning_rl.samplers.base.Samples`
as :class:`~lightning_rl.samplers.serial.SerialSampler`, row for row:

* every row is one real env step: the vector env's autoreset mode (``metadata["autoreset_mode"]``)
  is read, and neither NEXT_STEP's reset step nor anything else becomes a row. Under NEXT_STEP
  (and DISABLED) the envs whose episode ended are reset at once with a partial reset
  (``reset(options={"reset_mask": ...})``), so the agent's next action already acts on the
  reset observation; under SAME_STEP the step returns it, and ``info["final_obs"]`` the last one;
* ``done = terminated | truncated`` and ``truncated`` marks truncation without termination, as
  in :class:`~lightning_rl.envs.gymnasium.GymEnvWrapper`;
* episode statistics go to the same :class:`~lightning_rl.envs.traj_info.TrajInfo` classes.
  The built-in ones are accumulated as ``[B]`` arrays (no per-env call per step); a subclass
  overriding ``step`` gets its per-env calls.

Backends (``backend``):

* ``"gymnasium"``: ``gymnasium.make_vec(env_id, vectorization_mode="vector_entry_point")`` for ids
  registered with a vector entry point (``CartPole-v1``). gymnasium's ``CartPoleVectorEnv`` has no
  partial reset; :class:`CartPolePartialReset` gives it one (its own reset distribution).
* ``"ale"``: ale-py's ``AtariVectorEnv`` for ``ALE/<Game>-v5`` and ``<Game>NoFrameskip-v4`` ids,
  with :class:`~lightning_rl.envs.atari.AtariEnv`'s arguments (``env_kwargs``) mapped onto it (see
  :func:`ale_vector_kwargs`). Observations equal ``AtariEnv``'s frame for frame.
* ``"envpool"``: EnvPool's pool of copies (:mod:`~lightning_rl.samplers.envpool_backend`): any id
  EnvPool knows (``CartPole-v1``, MuJoCo ``*-v5``, Atari ids with ``AtariEnv``'s arguments).
* ``"sync"`` / ``"async"``: gymnasium's ``SyncVectorEnv`` / ``AsyncVectorEnv`` over
  ``gymnasium.make(env_id)`` (or a callable returning a ``gymnasium.Env``), in the
  ``autoreset_mode`` asked for: any gymnasium env, mainly for comparisons and tests.
* ``"auto"``: the fastest of these that takes ``env_id`` and needs no optional extra: ``ale``
  for Atari ids, ``gymnasium`` for ids whose vector entry point is a NumPy env this module can
  reset copy by copy (:data:`AUTO_VECTOR_ENTRY_POINTS`), else ``sync`` (a user's own env id or
  callable). The choice is made when the sampler is built and is its ``backend`` from then on.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from typing import Any, Literal

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode

from lightning_rl.data.buffers import buffer_func
from lightning_rl.envs.atari import AtariEnvInfo
from lightning_rl.envs.make import (
    atari_game_from_id,
    is_atari_id,
    make_gymnasium_env,
    vector_atari_settings,
)
from lightning_rl.envs.traj_info import AtariTrajInfo, TrajInfo
from lightning_rl.safe_state import copy_into, decode, encode, env_state, load_env_state
from lightning_rl.samplers.base import BaseSampler, Samples, StepBuffer, cpu_count, set_agent_mode, slice_samples
from lightning_rl.samplers.collectors import act, act_eval, bootstrap_value, reset_agent_envs, restore_traj_infos
from lightning_rl.samplers.envpool_backend import EnvPoolVectorEnv, envpool_atari_kwargs
from lightning_rl.samplers.errors import SamplerWorkerError, describe, pickled_type, remote_exception
from lightning_rl.spaces import Composite, from_gymnasium, from_gymnasium_value

__all__ = [
    "AUTO_VECTOR_ENTRY_POINTS", "BACKENDS", "CartPolePartialReset", "VectorCollector", "VectorSampler",
    "ale_vector_kwargs", "auto_backend",
]

#: Backend names accepted by :class:`VectorSampler`.
BACKENDS = ("auto", "gymnasium", "ale", "envpool", "sync", "async")
#: gymnasium vector entry points that ``backend="auto"`` uses: NumPy envs that step every copy
#: in one array operation and take partial resets (through :class:`CartPolePartialReset`).
AUTO_VECTOR_ENTRY_POINTS = ("gymnasium.envs.classic_control.cartpole:CartPoleVectorEnv",)
_AUTORESET_MODES = {"next_step": AutoresetMode.NEXT_STEP, "same_step": AutoresetMode.SAME_STEP}
#: ``max_num_frames_per_episode`` standing for "no horizon" (the emulator counts frames in an int32).
_NO_FRAME_LIMIT = 2**31 - 1


def ale_vector_kwargs(env_id: str, env_kwargs: dict[str, Any]) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """Map :class:`~lightning_rl.envs.atari.AtariEnv` arguments onto ``AtariVectorEnv``'s.

    ``make_env``'s defaults apply (``AtariEnv``'s, plus sticky actions 0.25 for ``ALE/...-v5``
    ids). Mapped: ``frame_skip`` -> ``frameskip``, ``num_img_obs`` -> ``stack_num``,
    ``max_start_noops`` -> ``noop_max = max_start_noops + 1`` (ale-py draws ``0..noop_max - 1``
    no-op frames, AtariEnv ``0..max_start_noops``), ``repeat_action_probability`` as it is,
    ``horizon`` -> ``max_num_frames_per_episode = horizon * frame_skip``, ``fire_on_reset`` ->
    ``use_fire_reset`` (ale-py presses FIRE for one frame at a new game only, AtariEnv for one
    step after every reset). ``episodic_lives`` -> ``life_loss_info``: a lost life terminates
    the episode but the game goes on, as in AtariEnv (ale-py's own ``episodic_life`` would
    start a new game at every lost life). Reward clipping stays with the sampler, which keeps
    the raw score as ``game_score``, as AtariEnv does.

    Returns:
        ``(game, AtariVectorEnv keyword arguments, the AtariEnv settings used)``.

    Raises:
        ValueError: On an id that is not an Atari id, an unknown key, or ``obs_type="rgb"``.
    """
    if not is_atari_id(env_id):
        raise ValueError(f"backend='ale' needs an Atari env_id ('ALE/<Game>-v5'), got env_id={env_id!r}")
    settings = vector_atari_settings(env_id, env_kwargs, "ale")
    horizon = settings["horizon"]
    kwargs = dict(
        frameskip=int(settings["frame_skip"]),
        stack_num=int(settings["num_img_obs"]),
        noop_max=int(settings["max_start_noops"]) + 1,
        repeat_action_probability=float(settings["repeat_action_probability"]),
        max_num_frames_per_episode=_NO_FRAME_LIMIT if horizon is None else int(horizon) * int(settings["frame_skip"]),
        use_fire_reset=bool(settings["fire_on_reset"]),
        life_loss_info=bool(settings["episodic_lives"]),
        episodic_life=False,
        reward_clipping=False,
        grayscale=True,
        maxpool=True,
        img_height=84,
        img_width=84,
    )
    return atari_game_from_id(env_id), kwargs, settings


def registered_spec(env_id: str) -> Any:
    """gymnasium's registration of ``env_id``, or None where there is none.

    A ``"module:Name-v0"`` id imports ``module`` first (it registers the env), as ``gymnasium.make``
    does, and looks up ``Name-v0``.

    Raises:
        ValueError: If the module of a ``module:`` id cannot be imported.
    """
    module, _, name = env_id.rpartition(":")
    if module:
        try:
            importlib.import_module(module)
        except ImportError as error:
            raise ValueError(f"env_id={env_id!r}: cannot import its module {module!r} ({error})") from error
    try:
        return gymnasium.spec(name)
    except gymnasium.error.Error:
        return None  # not registered: make_env's own error names it when the probe env is built


def _entry_point_name(entry_point: Any) -> str | None:
    """A spec's entry point as ``"module:Qualname"`` (it may be registered as the class itself)."""
    if entry_point is None or isinstance(entry_point, str):
        return entry_point
    return f"{entry_point.__module__}:{entry_point.__qualname__}"


def auto_backend(env_id: str | Callable[..., Any]) -> str:
    """The backend ``backend="auto"`` picks for ``env_id`` (see the module docstring)."""
    if isinstance(env_id, str):
        if is_atari_id(env_id):
            return "ale"
        spec = registered_spec(env_id)
        if spec is not None and _entry_point_name(spec.vector_entry_point) in AUTO_VECTOR_ENTRY_POINTS:
            return "gymnasium"
    return "sync"


class CartPolePartialReset(gymnasium.vector.VectorWrapper):
    """``reset(options={"reset_mask": mask})`` for gymnasium's ``CartPoleVectorEnv``.

    Its own ``reset`` restarts every copy; a masked reset here draws the masked copies' states
    from the env's generator and reset bounds exactly as its autoreset does (the step after a
    done), and clears their step counters and pending autoreset.
    """

    def reset(self, *, seed: Any = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Reset all copies, or only ``options["reset_mask"]``'s (then ``seed`` must be None)."""
        if options is None or "reset_mask" not in options:
            return self.env.reset(seed=seed, options=options)
        mask = np.asarray(options["reset_mask"], dtype=bool)
        env: Any = self.env.unwrapped
        env.state[:, mask] = env.np_random.uniform(low=env.low, high=env.high, size=(4, int(mask.sum())))
        env.steps[mask] = 0
        env.prev_done[mask] = False
        return env.state.T.astype(np.float32), {}


class VectorCollector:
    """Steps one vector env of ``n`` copies and writes rows of a ``[T, n]`` batch (or only
    TrajInfos, for evaluation: ``samples=None``).

    Args:
        venv: The vector env (reset by :meth:`start_envs`).
        step_buffer: ``[n]`` state the agent acts on next.
        samples: ``[T, n]`` batch, or None for evaluation.
        traj_info_factory: Builds an empty TrajInfo.
        observation_space: The single env's observation space (``lightning_rl.spaces``).
        atari: ``AtariEnv`` settings when ``venv`` is ale-py's (reward clipping, lives), else None.
        fault: Turns an exception raised by the vector env into the sampler's error.
    """

    def __init__(
        self,
        venv: Any,
        step_buffer: StepBuffer,
        samples: Samples | None,
        traj_info_factory: Callable[[], Any],
        observation_space: Any,
        atari: dict[str, Any] | None,
        fault: Callable[[str, BaseException], BaseException],
    ) -> None:
        self.venv = venv
        self.n = int(venv.num_envs)
        self.step_buffer = step_buffer
        self.samples = samples
        self.traj_info_factory = traj_info_factory
        self.observation_space = observation_space
        self.atari = atari
        self._fault = fault
        mode = venv.metadata.get("autoreset_mode")
        if not isinstance(mode, AutoresetMode):
            raise ValueError(
                f"the vector env {type(venv.unwrapped).__name__} has metadata['autoreset_mode']={mode!r}; "
                "VectorSampler needs a gymnasium.vector.AutoresetMode (NEXT_STEP, SAME_STEP or DISABLED)"
            )
        self.autoreset_mode = mode
        probe = traj_info_factory()
        # The built-in TrajInfos are summed here as [n] arrays; a subclass overriding step() is
        # called per env, as the other collectors do.
        self.vector_stats = type(probe).step in (TrajInfo.step, AtariTrajInfo.step)
        self.game_score = isinstance(probe, AtariTrajInfo)
        self.discount = float(getattr(probe, "_discount", 1.0))
        self._reset_stats(np.ones(self.n, dtype=bool))
        self.traj_infos = [traj_info_factory() for _ in range(self.n)]
        self.lives = np.zeros(self.n, dtype=np.int64)

    def _reset_stats(self, mask: np.ndarray) -> None:
        if not hasattr(self, "length"):
            self.length = np.zeros(self.n, dtype=np.int64)
            self.ret = np.zeros(self.n, dtype=np.float64)
            self.nonzero = np.zeros(self.n, dtype=np.int64)
            self.discounted = np.zeros(self.n, dtype=np.float64)
            self.cur_discount = np.ones(self.n, dtype=np.float64)
            self.score = np.zeros(self.n, dtype=np.float64)
        for a in (self.length, self.ret, self.nonzero, self.discounted, self.score):
            a[mask] = 0
        self.cur_discount[mask] = 1.0

    def _call(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - any env failure becomes the sampler's error
            raise self._fault(what, e) from e

    def _observation(self, obs: Any) -> Any:
        if isinstance(self.observation_space, Composite):
            return from_gymnasium_value(self.observation_space, obs)
        return obs

    def start_envs(self, seeds: Any, max_decorrelation_steps: int = 0, rngs: list[np.random.Generator] | None = None
                   ) -> None:
        """Reset every copy with ``seeds``, optionally take random steps, start fresh statistics.

        Args:
            seeds: One seed per copy (a list), one int for the whole vector env (gymnasium's
                entry points), or None (continue the generators).
            max_decorrelation_steps: Env ``b`` ends ``rngs[b].integers(0, max + 1)`` random
                steps into an episode: all copies take ``N`` random steps (the largest count),
                and env ``b`` is reset (partially) when ``N - n_b`` of them remain. Those
                episodes are not reported.
            rngs: One generator per copy (step counts; copy 0's also seeds the random actions).
        """
        obs, info = self._call("reset", self.venv.reset, seed=seeds)
        if seeds is not None:
            self._seed_spaces(seeds)
        sb = self.step_buffer
        sb.observation[:] = self._observation(obs)
        sb.prev_action[:] = 0
        sb.prev_reward[:] = 0
        sb.reset_agent[:] = False
        self._read_lives(info, np.ones(self.n, dtype=bool))
        if max_decorrelation_steps > 0:
            if rngs is None or len(rngs) != self.n:
                raise ValueError("start_envs: decorrelation needs one random generator per env")
            counts = np.array([int(rng.integers(0, max_decorrelation_steps + 1)) for rng in rngs])
            space = self.venv.action_space
            space.seed(int(rngs[0].integers(2**63)))
            total = int(counts.max())
            for s in range(total):
                mask = counts == total - s
                if mask.any() and s > 0:
                    self._partial_reset(mask)
                self._step(_venv_action(space.sample()))
        self._reset_stats(np.ones(self.n, dtype=bool))
        self.traj_infos = [self.traj_info_factory() for _ in range(self.n)]

    def _seed_spaces(self, seeds: Any) -> None:
        """Seed the vector env's spaces from the copies' seeds.

        gymnasium's vector envs seed their batched spaces from the single ones, whose generators
        are seeded from OS entropy when first read: a wrapper that samples from a space would make
        two runs with the same seed differ, and the checkpoints of the same run would too.
        """
        first = int(np.asarray(seeds).reshape(-1)[0])
        venv = self.venv
        for i, name in enumerate(("single_action_space", "action_space", "single_observation_space",
                                  "observation_space")):
            space = getattr(venv, name, None)
            if space is not None and hasattr(space, "seed"):
                space.seed(int(np.random.SeedSequence([first, i]).generate_state(1)[0]))

    def _read_lives(self, info: dict[str, Any], mask: np.ndarray) -> None:
        if self.atari is not None:
            self.lives[mask] = np.asarray(info["lives"])[mask]

    def _partial_reset(self, mask: np.ndarray) -> Any:
        """Reset the copies in ``mask``; their reset observations go to the step buffer."""
        obs, info = self._call("reset", self.venv.reset, options={"reset_mask": mask})
        observation = self._observation(obs)
        # Dict/Tuple observations are named tuples of [n] arrays: index every leaf.
        self.step_buffer.observation[mask] = buffer_func(observation, lambda x: x[mask])
        self._read_lives(info, mask)
        return obs

    def send(self, t: int) -> None:
        """Start stepping every copy with the actions of row ``t`` (the env's ``send``); the
        caller works meanwhile and finishes with ``step_envs(t, sent=True)``."""
        assert self.samples is not None
        self._call("step", self.venv.send, _venv_action(self.samples.agent.action[t]))

    def _step(self, action: np.ndarray, sent: bool = False) -> tuple[Any, ...]:
        """Step all copies (or, ``sent``, receive the step :meth:`send` started); put the
        observations the agent acts on next into the step buffer.

        Returns:
            ``(reward as stored, raw reward, terminated, truncated (without termination), done,
            traj_done, final observations of the traj_done copies (dict by copy), the step's info)``.
        """
        if sent:
            obs, raw_reward, terminated, truncated, info = self._call("step", self.venv.recv)
        else:
            obs, raw_reward, terminated, truncated, info = self._call("step", self.venv.step, action)
        raw_reward = np.asarray(raw_reward, dtype=np.float64)
        terminated = np.asarray(terminated, dtype=bool)
        truncated = np.asarray(truncated, dtype=bool) & ~terminated
        done = terminated | truncated
        reward = raw_reward
        traj_done = done
        observation = self._observation(obs)
        if self.atari is not None:
            if self.atari["clip_reward"]:
                reward = np.sign(raw_reward)
            lives = np.asarray(info["lives"])
            if self.atari["episodic_lives"]:
                # ale-py flags a lost life (lives left > 0) as terminated and plays on, frame
                # stack and all, as AtariEnv under the reset collector (no reset before traj_done).
                life_lost = terminated & (lives > 0) & (lives < self.lives)
                traj_done = done & ~life_lost
            self.lives[:] = lives
        ended = np.flatnonzero(traj_done)
        finals: dict[int, Any] = {}
        self.step_buffer.observation[:] = observation
        if self.autoreset_mode == AutoresetMode.SAME_STEP:
            # The step reset the ended copies; their last observations are in info["final_obs"].
            for b in ended:
                finals[int(b)] = self._observation(info["final_obs"][b])
            final_info = info.get("final_info")
            if len(ended) and isinstance(final_info, dict):
                # The reset copies' info is the reset's; their step's info is in final_info.
                info = dict(info)
                for key, value in final_info.items():
                    if key in info and not key.startswith("_"):
                        info[key] = np.where(final_info.get("_" + key, traj_done), value, info[key])
        elif len(ended):
            for b in ended:
                finals[int(b)] = buffer_func(observation, lambda x, b=b: np.copy(x[b]))
            self._partial_reset(traj_done)
        return reward, raw_reward, terminated, truncated, done, traj_done, finals, info

    def _account(self, observation: Any, action: Any, reward: np.ndarray, raw_reward: np.ndarray,
                 done: np.ndarray, traj_done: np.ndarray, finals: dict[int, Any], agent_info: Any, env_info: Any
                 ) -> list[Any]:
        """Episode statistics of one step; returns the completed TrajInfos."""
        completed = []
        if self.vector_stats:
            self.length += 1
            self.ret += reward
            self.nonzero += reward != 0
            self.discounted += self.cur_discount * reward
            self.cur_discount *= self.discount
            self.score += raw_reward
            for i in np.flatnonzero(traj_done):
                b = int(i)
                traj_info = self.traj_info_factory()
                traj_info.Length = int(self.length[b])
                traj_info.Return = float(self.ret[b])
                traj_info.NonzeroRewards = int(self.nonzero[b])
                traj_info.DiscountedReturn = float(self.discounted[b])
                traj_info._cur_discount = float(self.cur_discount[b])
                if self.game_score:
                    traj_info.GameScore = float(self.score[b])
                completed.append(traj_info.terminate(finals[b]))
            self._reset_stats(traj_done)
            return completed
        for b in range(self.n):  # a user's TrajInfo.step, called per env (not the fast path)
            info_b = None if env_info is None else env_info[b]
            self.traj_infos[b].step(observation[b], action[b], reward[b], done[b],
                                    None if agent_info is None else agent_info[b], info_b)
            if traj_done[b]:
                completed.append(self.traj_infos[b].terminate(finals[b]))
                self.traj_infos[b] = self.traj_info_factory()
        return completed

    def step_envs(self, t: int, sent: bool = False) -> list[Any]:
        """Step every copy with the actions of row ``t`` (``sent``: finish the step :meth:`send`
        started); write the env side of row ``t``.

        Returns:
            TrajInfos of the episodes that ended.
        """
        samples = self.samples
        assert samples is not None  # None only for evaluation
        action = samples.agent.action[t]
        observation = samples.env.observation[t]
        stepped = self._step(_venv_action(action), sent)
        reward, raw_reward, terminated, truncated, done, traj_done, finals, info = stepped
        samples.env.reward[t] = reward
        samples.env.done[t] = done
        samples.env.truncated[t] = truncated
        env_info = samples.env.env_info
        if env_info is not None:
            row = env_info[t]
            values = dict(truncated=truncated, terminated=terminated, game_score=raw_reward, traj_done=traj_done)
            for name in row._fields:
                # Numeric info keys of the vector env (gymnasium batches them as [n] arrays) fill
                # the fields of the same name; keys the vector env lacks stay zero.
                _fill_info(getattr(row, name), values[name] if name in values else info.get(name, 0))
            env_info = row
        agent_info = samples.agent.agent_info
        completed = self._account(observation, action, reward, raw_reward, done, traj_done, finals,
                                  None if agent_info is None else agent_info[t], env_info)
        self._carry_over(action, reward, done)
        return completed

    def step_eval(self) -> list[Any]:
        """Step every copy with ``step_buffer.action`` (evaluation); return finished TrajInfos."""
        sb = self.step_buffer
        action = buffer_func(sb.action, np.array)
        observation = None if self.vector_stats else np.copy(sb.observation)
        reward, raw_reward, terminated, truncated, done, traj_done, finals, _ = self._step(_venv_action(action))
        env_info = None
        if not self.vector_stats:
            env_info = [AtariEnvInfo(bool(truncated[b]), bool(terminated[b]), float(raw_reward[b]), bool(traj_done[b]))
                        for b in range(self.n)]
        completed = self._account(observation, action, reward, raw_reward, done, traj_done, finals, None, env_info)
        self._carry_over(action, reward, done)
        return completed

    def _carry_over(self, action: np.ndarray, reward: np.ndarray, done: np.ndarray) -> None:
        """The agent's next inputs: this step's action and reward, zeroed (and its state reset) where
        an episode ended."""
        sb = self.step_buffer
        sb.prev_action[:] = action
        sb.prev_reward[:] = reward
        sb.prev_action[done] = 0
        sb.prev_reward[done] = 0
        sb.reset_agent[done] = True

    #: The per-copy episode statistics of :meth:`_account`, kept in checkpoints.
    _STATS = ("length", "ret", "nonzero", "discounted", "cur_discount", "score", "lives")

    def state(self) -> dict[str, Any]:
        """Everything but the vector env needed to continue exactly (for checkpoints); copies.

        :func:`lightning_rl.safe_state.encode` stores it as data (TrajInfos as plain dicts).
        """
        return {
            "step_buffer": buffer_func(self.step_buffer, np.array),
            "stats": {name: np.array(getattr(self, name)) for name in self._STATS},
            "traj_infos": [dict(t) for t in self.traj_infos],
        }

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore a decoded :meth:`state` into the existing buffers, in place.

        Raises:
            ValueError: If a stored array's shape differs from this collector's (another ``n``).
        """
        copy_into(self.step_buffer, state["step_buffer"], "collector.step_buffer")
        for name in self._STATS:
            copy_into(getattr(self, name), state["stats"][name], f"collector.{name}")
        self.traj_infos = restore_traj_infos(self.traj_info_factory, state["traj_infos"])

    def close(self) -> None:
        """Close the vector env."""
        self.venv.close()


class VectorSampler(BaseSampler):
    """All ``batch_B`` envs in one ``gymnasium.vector.VectorEnv``, stepped by one call per time
    step; one ``agent.step`` per time step for all of them (see the module docstring).

    Env ``b`` of this rank is reset with seed ``seed + rank * batch_B + b`` where the backend
    seeds copies one by one (``ale``, ``sync``, ``async``); gymnasium's vector entry points take
    one seed for all copies (``seed + rank * batch_B``). ``frame_stack``, ``env_spaces`` and the
    buffers' examples come from a single probe env built by ``make_env`` with ``env_kwargs``,
    whose spaces the vector env must match. ``env_info`` holds ``truncated``, ``terminated`` (and
    Atari's ``game_score``, ``traj_done``); other fields of the probe's ``env_info`` are zeros.

    Checkpoints hold the counters and, for vector envs whose state is plain data (gymnasium's
    NumPy entry points, and ``SyncVectorEnv`` over envs the serial sampler can store), that
    state, so a resumed run continues its episodes exactly; with the other backends a resumed
    run starts new episodes, as with the parallel samplers.

    An exception raised by the vector env is raised again as an instance of its type that is
    also a :class:`~lightning_rl.samplers.errors.SamplerWorkerError`, naming the backend and the
    call, and the sampler is shut down.

    ``sampler_kwargs`` are :class:`~lightning_rl.samplers.base.BaseSampler`'s arguments (``batch_T``,
    ``batch_B``, ``env_kwargs``, the eval settings, ...), by keyword;
    with the ``ale`` and ``envpool`` backends ``n_workers`` is the number of emulator threads
    (default: the library's, one per env up to the CPU count; with ``overlap``, per half, default
    ``max(1, (CPUs - 1) // 2)``). ``collector`` must be ``"reset"`` (copies of a vector env cannot
    wait); ``cpu_affinity`` and ``step_timeout`` are not used.

    Args:
        backend: ``"auto"``, ``"gymnasium"``, ``"ale"``, ``"envpool"``, ``"sync"`` or ``"async"`` (module
            docstring). ``"auto"`` is resolved here: :attr:`backend` holds the one chosen.
        autoreset_mode: ``"next_step"`` or ``"same_step"`` for the backends that take one
            (``ale``, ``sync``, ``async``); None: the backend's default (NEXT_STEP). The
            gymnasium entry points have their own (read from their metadata).
        overlap: ``ale`` backend only: two vector envs of ``batch_B / 2`` copies that take
            turns, EnvPool-style ``send``/``recv``: while one half's emulators step (C++
            threads, outside the GIL), the agent acts for the other half, so inference hides
            behind stepping. ``agent.step`` (and ``value``) then gets ``[B / 2]`` inputs,
            alternately for envs ``0 .. B/2 - 1`` and ``B/2 .. B - 1``, as with
            :class:`~lightning_rl.samplers.alternating.AlternatingSampler`; recurrent agents are
            refused (their state is per env of a whole batch). Training only: evaluation steps
            its envs together.

    Raises:
        ValueError: On a bad argument (naming it), or a vector env whose spaces differ from
            the probe env's, or that cannot reset single copies under NEXT_STEP.
    """

    def __init__(
        self,
        env_id: str | Callable[..., Any],
        *,
        backend: Literal["auto", "gymnasium", "ale", "envpool", "sync", "async"] = "gymnasium",
        autoreset_mode: Literal["next_step", "same_step"] | None = None,
        overlap: bool = False,
        **sampler_kwargs: Any,
    ) -> None:
        super().__init__(env_id, **sampler_kwargs)
        collector = self.collector
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got backend={backend!r}")
        if backend == "auto":
            backend = auto_backend(env_id)  # type: ignore[assignment]
            if backend == "gymnasium" and autoreset_mode is not None:
                backend = "sync"  # the entry point has its own mode; sync takes the one asked for
        if autoreset_mode is not None and autoreset_mode not in _AUTORESET_MODES:
            raise ValueError(f"autoreset_mode must be 'next_step', 'same_step' or None, got {autoreset_mode!r}")
        if collector != "reset":
            raise ValueError(
                f"VectorSampler: collector={collector!r} is not supported: the copies of a vector env are all stepped "
                "every call, so a done env cannot wait; use collector='reset' or a per-env sampler"
            )
        if backend == "gymnasium":
            if autoreset_mode is not None:
                raise ValueError(
                    "autoreset_mode: backend='gymnasium' uses the entry point's own mode; leave autoreset_mode=None"
                )
            spec = registered_spec(env_id) if isinstance(env_id, str) else None
            if spec is None or spec.vector_entry_point is None:
                raise ValueError(
                    f"backend='gymnasium' needs an env id registered with a vector entry point, got env_id={env_id!r}; "
                    "use backend='sync' or a per-env sampler"
                )
        if backend == "envpool":
            if not isinstance(env_id, str):
                raise ValueError(f"backend='envpool' needs an env id EnvPool knows, got env_id={env_id!r}")
            if autoreset_mode not in (None, "next_step"):
                raise ValueError("autoreset_mode: backend='envpool' resets at the next step; leave autoreset_mode=None")
            if is_atari_id(env_id):
                envpool_atari_kwargs(env_id, self.env_kwargs)
                if self.eval_n_envs:
                    envpool_atari_kwargs(env_id, self.eval_env_kwargs)
        if backend == "ale":
            ale_vector_kwargs(env_id if isinstance(env_id, str) else "", self.env_kwargs)
            if self.eval_n_envs:
                ale_vector_kwargs(env_id if isinstance(env_id, str) else "", self.eval_env_kwargs)
        if overlap and backend != "ale":
            raise ValueError(f"overlap=True needs backend='ale' (a vector env with send/recv), got backend={backend!r}")
        if overlap and self.batch_spec.B % 2:
            raise ValueError(f"overlap=True: batch_B={self.batch_spec.B} must be even (two halves take turns)")
        self.backend = backend
        self.autoreset_mode = autoreset_mode
        self.overlap = bool(overlap)

    @property
    def agent_step_B(self) -> int:
        """Envs one ``agent.step`` acts for: half of ``batch_B`` with ``overlap``."""
        return self.batch_spec.B // 2 if self.overlap else self.batch_spec.B

    def make_vector_env(self, n: int, env_kwargs: dict[str, Any]) -> tuple[Any, dict[str, Any] | None]:
        """A vector env of ``n`` copies for this sampler's backend, and Atari settings for ``ale``."""
        mode = _AUTORESET_MODES[self.autoreset_mode] if self.autoreset_mode is not None else AutoresetMode.NEXT_STEP
        env_id = self.env_id
        if self.backend == "ale":
            from ale_py.vector_env import AtariVectorEnv

            game, kwargs, settings = ale_vector_kwargs(str(env_id), env_kwargs)
            threads = 0 if self.n_workers is None else self.n_workers
            if self.overlap and self.n_workers is None:
                # Each half's emulators share the cores the main thread (acting) leaves free.
                threads = max(1, (cpu_count() - 1) // 2)
            return AtariVectorEnv(game, n, autoreset_mode=mode, num_threads=threads, **kwargs), settings
        if self.backend == "envpool":
            threads = 0 if self.n_workers is None else self.n_workers
            if is_atari_id(str(env_id)):
                kwargs, settings = envpool_atari_kwargs(str(env_id), env_kwargs)
                return EnvPoolVectorEnv(str(env_id), n, threads, life_loss_info=settings["episodic_lives"],
                                        **kwargs), settings
            return EnvPoolVectorEnv(str(env_id), n, threads, **env_kwargs), None
        if self.backend == "gymnasium":
            spec = registered_spec(str(env_id))
            venv = gymnasium.make_vec(spec, num_envs=n, vectorization_mode="vector_entry_point", **env_kwargs)
            name, own_mode = type(venv.unwrapped).__name__, venv.metadata.get("autoreset_mode")
            if name == "CartPoleVectorEnv":
                return CartPolePartialReset(venv), None
            if own_mode != AutoresetMode.SAME_STEP:
                venv.close()
                why = (f"autoresets at the next step ({own_mode})" if isinstance(own_mode, AutoresetMode) else
                       f"does not say how it autoresets (its metadata['autoreset_mode'] is {own_mode!r}: set it "
                       "to a gymnasium.vector.AutoresetMode)")
                raise ValueError(
                    f"backend='gymnasium': {name} of env_id={env_id!r} {why}; VectorSampler needs SAME_STEP or a "
                    "vector env that resets single copies, so that no reset step becomes a sample. Use backend='sync'"
                )
            return venv, None
        factory = functools.partial(_make_gymnasium_env, env_id, env_kwargs)
        cls = gymnasium.vector.SyncVectorEnv if self.backend == "sync" else gymnasium.vector.AsyncVectorEnv
        return cls([factory] * n, autoreset_mode=mode), None

    def _seeds(self, first: int, n: int) -> Any:
        if self.backend in ("gymnasium", "envpool"):
            return first
        if self.backend == "ale":
            return np.arange(first, first + n)
        return [first + i for i in range(n)]

    def _fault(self, kind: str) -> Callable[[str, BaseException], BaseException]:
        def fault(call: str, error: BaseException) -> BaseException:
            message = (f"VectorSampler(backend={self.backend!r}) {kind} env {self.env_id!r}: {call}() raised "
                       f"{type(error).__name__}: {error}")
            self.shutdown()
            if isinstance(error, Exception):
                new = remote_exception(f"{type(error).__module__}.{type(error).__qualname__}", pickled_type(error),
                                       message)
            else:
                new = SamplerWorkerError(message)
            return describe(new, env_kind=kind, env_call=call, remote_type=type(error).__qualname__)
        return fault

    def _collector(self, n: int, env_kwargs: dict[str, Any], step_buffer: StepBuffer, samples: Samples | None,
                   kind: str) -> VectorCollector:
        venv, atari = self.make_vector_env(n, env_kwargs)
        try:
            self._check_spaces(venv)
            return VectorCollector(venv, step_buffer, samples, self.traj_info_factory, self.env_spaces.observation,
                                   atari, self._fault(kind))
        except Exception:
            venv.close()
            raise

    def _check_spaces(self, venv: Any) -> None:
        obs_space = from_gymnasium(venv.single_observation_space, "obs", True)
        act_space = from_gymnasium(venv.single_action_space, "act", True)
        for name, mine, probe in (("observation", obs_space, self.env_spaces.observation),
                                  ("action", act_space, self.env_spaces.action)):
            # n is an int for Discrete spaces and an array of sizes for MultiDiscrete ones.
            same = (getattr(mine, "shape", None) == getattr(probe, "shape", None)
                    and np.array_equal(np.asarray(getattr(mine, "n", None)), np.asarray(getattr(probe, "n", None))))
            if not same:
                raise ValueError(f"VectorSampler(backend={self.backend!r}): the vector env's {name} space {mine!r} "
                                 f"differs from the single env's {probe!r} (env_id={self.env_id!r})")

    def _start(self) -> None:
        T, B = self.batch_spec
        assert self.samples is not None
        self.train_collector: VectorCollector | None = None
        self.eval_collector: VectorCollector | None = None
        self.halves: list[tuple[VectorCollector, slice]] = []
        if self.overlap:
            if getattr(self.agent, "recurrent", False):
                raise ValueError(f"overlap=True: {type(self.agent).__name__} is recurrent; use overlap=False")
            for h in range(2):
                sl = slice(h * B // 2, (h + 1) * B // 2)
                half = self._collector(B // 2, self.env_kwargs, self.step_buffer[sl], slice_samples(self.samples, sl),
                                       "training")
                self.halves.append((half, sl))
                rngs = [self.decorrelation_rng(b) for b in range(sl.start, sl.stop)]
                half.start_envs(self._seeds(self.seed + self.env_ranks[0] + sl.start, B // 2),
                                self.max_decorrelation_steps, rngs)
            self.train_collector = self.halves[0][0]
        else:
            self.train_collector = self._collector(B, self.env_kwargs, self.step_buffer, self.samples, "training")
            self.train_collector.start_envs(self._seeds(self.seed + self.env_ranks[0], B),
                                            self.max_decorrelation_steps, [self.decorrelation_rng(b) for b in range(B)])
        self.agent.reset()
        if self.eval_n_envs:
            assert self.eval_step_buffer is not None
            self.eval_collector = self._collector(self.eval_n_envs, self.eval_env_kwargs, self.eval_step_buffer,
                                                  None, "eval")
            self._eval_seeded = False

    def obtain_samples(
        self, itr: int, agent_mode: Literal["sample", "eval"] = "sample", reset_envs: bool = False
    ) -> tuple[Samples, list[Any]]:
        self._check_ready("obtain_samples")
        assert self.samples is not None and self.train_collector is not None
        set_agent_mode(self.agent, itr, agent_mode)
        collector, sb, samples = self.train_collector, self.step_buffer, self.samples
        if self.overlap:
            return self._obtain_overlapped(reset_envs)
        if reset_envs:
            collector.start_envs(None)
            self.agent.reset()
        completed: list[Any] = []
        for t in range(self.batch_spec.T):
            reset_agent_envs(self.agent, sb.reset_agent)
            act(self.agent, sb, samples, t)
            completed.extend(collector.step_envs(t))
        reset_agent_envs(self.agent, sb.reset_agent)
        if self.bootstrap_value:
            bootstrap_value(self.agent, sb, samples)
        self.env_steps += self.batch_spec.size
        return samples, completed

    def _obtain_overlapped(self, reset_envs: bool) -> tuple[Samples, list[Any]]:
        """``obtain_samples`` with two halves taking turns: half ``h`` acts, sends its actions and
        is received only after the other half has acted (``overlap``)."""
        assert self.samples is not None
        halves = self.halves  # each collector holds its half's views of the step buffer and samples
        if reset_envs:
            for c, _ in halves:
                c.start_envs(None)
            self.agent.reset()

        def act_and_send(h: int, t: int) -> None:
            c, sl = halves[h]
            assert c.samples is not None
            reset_agent_envs(self.agent, c.step_buffer.reset_agent, sl.start)
            act(self.agent, c.step_buffer, c.samples, t)
            c.send(t)

        T = self.batch_spec.T
        completed: list[Any] = []
        act_and_send(0, 0)
        for t in range(T):
            act_and_send(1, t)  # while half 0 steps
            completed.extend(halves[0][0].step_envs(t, sent=True))
            if t + 1 < T:
                act_and_send(0, t + 1)  # while half 1 steps
            completed.extend(halves[1][0].step_envs(t, sent=True))
        for c, sl in halves:
            assert c.samples is not None
            reset_agent_envs(self.agent, c.step_buffer.reset_agent, sl.start)
            if self.bootstrap_value:
                bootstrap_value(self.agent, c.step_buffer, c.samples)
        self.env_steps += self.batch_spec.size
        return self.samples, completed

    def evaluate_agent(self, itr: int) -> list[Any]:
        self._check_can_evaluate()
        collector = self.eval_collector
        assert collector is not None
        self.agent.eval_mode(itr)
        self.agent.reset()
        seeds = None
        if not self._eval_seeded:
            seeds = self._seeds(self.seed + self.global_B + self.rank * self.eval_n_envs, self.eval_n_envs)
            self._eval_seeded = True
        collector.start_envs(seeds)
        sb = collector.step_buffer
        completed: list[Any] = []
        t = 0
        while self.eval_max_steps is None or t < self.eval_max_steps:
            reset_agent_envs(self.agent, sb.reset_agent)
            act_eval(self.agent, sb)
            completed.extend(collector.step_eval())
            t += 1
            if self.eval_max_trajectories is not None and len(completed) >= self.eval_max_trajectories:
                break
        return completed[: self.eval_max_trajectories]

    def state_dict(self) -> dict[str, Any]:
        """Counters and, where the vector env's state is plain data (gymnasium's NumPy vector
        envs, ``SyncVectorEnv`` over storable envs), that state and the collector's: a resumed
        run continues every episode exactly, as with
        :class:`~lightning_rl.samplers.serial.SerialSampler`. Emulators in C++ (``ale``,
        ``envpool``) and envs in other processes (``async``) are not stored: a resumed run starts
        new episodes, as with the parallel samplers. ``overlap`` stores counters only.
        """
        state = super().state_dict()
        collector = getattr(self, "train_collector", None)
        if not self.initialized or self.overlap or collector is None:
            return state
        layers, missing = env_state(collector.venv)
        if missing or layers is None:
            return state
        state["num_envs"] = collector.n
        state["envs"] = layers
        state["collector"] = encode(collector.state(), "collector")
        if self.eval_collector is not None:
            eval_layers, eval_missing = env_state(self.eval_collector.venv)
            if not eval_missing and eval_layers is not None:
                state["eval_envs"] = eval_layers
                state["eval_num_envs"] = self.eval_collector.n
                state["eval_seeded"] = self._eval_seeded
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` into an initialized sampler built with the same arguments
        (without stored env state, only the counters: the envs play on from their own reset).

        Raises:
            ValueError: If the sampler is not initialized, or the state is for another number of
                envs or another vector env (wrapper chain).
        """
        super().load_state_dict(state)
        if "envs" not in state:
            return
        collector = getattr(self, "train_collector", None)
        if not self.initialized or collector is None or self.overlap:
            raise ValueError("VectorSampler.load_state_dict: call initialize() (without overlap) before loading "
                             "env state")
        if state["num_envs"] != collector.n:
            raise ValueError(f"VectorSampler.load_state_dict: the state holds {state['num_envs']} envs, this "
                             f"sampler has batch_B={collector.n}")
        load_env_state(collector.venv, state["envs"])
        collector.load_state(decode(state["collector"]))
        eval_collector = self.eval_collector
        if state.get("eval_envs") is not None and eval_collector is not None:
            if state.get("eval_num_envs", eval_collector.n) == eval_collector.n:
                load_env_state(eval_collector.venv, state["eval_envs"])
                self._eval_seeded = bool(state["eval_seeded"])
            # Another number of eval envs than the checkpoint's: they start from their seeds.

    def shutdown(self) -> None:
        if self._closed:
            return
        self._closed = True
        collectors = [getattr(self, name, None) for name in ("train_collector", "eval_collector")]
        collectors += [c for c, _ in getattr(self, "halves", [])]
        self.train_collector = self.eval_collector = None
        self.halves = []
        for c in {id(c): c for c in collectors if c is not None}.values():
            try:
                c.close()
            except Exception:  # noqa: BLE001 - a failed env may not close cleanly; nothing to keep
                pass


def _fill_info(field: Any, value: Any) -> None:
    """Write one batched info value into its ``[n]`` buffer field; a nested info dict (the
    per-agent entries of a multi-agent env) fills the nested fields of the same names."""
    if hasattr(field, "_fields"):
        for name in field._fields:
            _fill_info(getattr(field, name), value.get(name, 0) if isinstance(value, dict) else 0)
        return
    field[:] = 0 if getattr(value, "dtype", None) == np.dtype(object) else value


def _venv_action(action: Any) -> Any:
    """Actions of all copies as the vector env takes them: an array, or for a dict action space
    (multi-agent envs) a dict of arrays by key, from the namedarraytuple of ``[n]`` arrays by field."""
    if isinstance(action, dict):
        return action
    if isinstance(action, tuple) and hasattr(action, "_fields"):
        return {f: _venv_action(getattr(action, f)) for f in action._fields}
    return np.asarray(action)


def _make_gymnasium_env(env_id: str | Callable[..., Any], env_kwargs: dict[str, Any]) -> gymnasium.Env:
    """One gymnasium env for the ``sync``/``async`` backends (PettingZoo envs through their adapter)."""
    try:
        return make_gymnasium_env(env_id, **env_kwargs)
    except ValueError as error:
        raise ValueError(f"backend 'sync'/'async': {error}") from None

