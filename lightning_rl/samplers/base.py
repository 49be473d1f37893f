"""What every sampler shares: the batch spec, the sample buffers and the common constructor.

A sampler (rlpyt section 6) runs ``B`` envs for ``T`` steps per :meth:`BaseSampler.obtain_samples`
and returns one preallocated ``[T, B]`` :class:`Samples` buffer, written in place every call,
with the :class:`~lightning_rl.envs.traj_info.TrajInfo` of every episode that ended in it.

Row ``t`` of the buffer is one agent-env interaction:

* ``env.observation[t]``, ``agent.prev_action[t]``, ``env.prev_reward[t]``: what the agent acted
  on (``prev_*`` are zeros on the first step of an episode);
* ``agent.action[t]``, ``agent.agent_info[t]``: what it did;
* ``env.reward[t]``, ``env.done[t]``, ``env.truncated[t]``, ``env.env_info[t]``: what the env
  answered. ``done = terminated or truncated`` and ``truncated`` marks truncation (time limit), so
  returns can bootstrap through it. After a done step, ``observation[t + 1]`` is the first
  observation of the next episode (reset collector) or zeros (wait-reset collector).

``agent.bootstrap_value`` (``[B]``, only with ``initialize(bootstrap_value=True)``) is the
agent's value of the observation after the last step, for returns that continue past the batch.

All samplers take the same constructor arguments, so a config swaps one for another by its
``class_path`` alone.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable, Sequence
from typing import Any, Literal, NamedTuple

import numpy as np
from pytorch_lightning.utilities import rank_zero_warn

from lightning_rl.data.buffers import buffer_from_example, buffer_func, numpify_buffer
from lightning_rl.data.namedarraytuple import NamedArrayTupleBase
from lightning_rl.envs.check import check_gymnasium_env
from lightning_rl.envs.gymnasium import GymEnvWrapper
from lightning_rl.envs.make import default_traj_info_cls, make_env
from lightning_rl.envs.traj_info import TrajInfo

__all__ = [
    "EVAL_DEFAULTS",
    "AgentSamples",
    "AgentSamplesBsv",
    "BaseSampler",
    "BatchSpec",
    "EnvSamples",
    "Samples",
    "StepBuffer",
]


class BatchSpec(NamedTuple):
    """``T`` time steps for each of ``B`` envs per batch."""

    T: int
    B: int

    @property
    def size(self) -> int:
        """Env steps per batch, ``T * B``."""
        return self.T * self.B


class AgentSamples(NamedArrayTupleBase):
    """Agent side of a ``[T, B]`` batch: ``action``, ``prev_action`` and the agent's ``agent_info``."""

    action: Any
    prev_action: Any
    agent_info: Any


class AgentSamplesBsv(NamedArrayTupleBase):
    """:class:`AgentSamples` plus ``bootstrap_value`` ``[B]`` (value of the observation after step ``T - 1``)."""

    action: Any
    prev_action: Any
    agent_info: Any
    bootstrap_value: Any


class EnvSamples(NamedArrayTupleBase):
    """Env side of a ``[T, B]`` batch; ``reward``/``prev_reward`` float32, ``done``/``truncated`` bool."""

    observation: Any
    reward: Any
    prev_reward: Any
    done: Any
    truncated: Any
    env_info: Any


class Samples(NamedArrayTupleBase):
    """One batch: ``agent`` (:class:`AgentSamples` or :class:`AgentSamplesBsv`) and ``env`` (:class:`EnvSamples`)."""

    agent: Any
    env: Any


class StepBuffer(NamedArrayTupleBase):
    """The ``[B]`` state between steps, which the agent acts on next.

    ``reset_agent[b]`` asks for ``agent.reset_one(b)`` before env ``b``'s next action. ``action``
    is only used by evaluation (training actions go straight into the sample buffer).
    """

    observation: Any
    prev_action: Any
    prev_reward: Any
    action: Any
    reset_agent: Any


def slice_samples(samples: Samples, sl: slice) -> Samples:
    """View of envs ``sl`` of a batch: ``[T, sl]`` fields and ``bootstrap_value[sl]``."""
    agent = samples.agent
    if isinstance(agent, AgentSamplesBsv):
        agent_view = AgentSamplesBsv(
            action=agent.action[:, sl],
            prev_action=agent.prev_action[:, sl],
            agent_info=None if agent.agent_info is None else agent.agent_info[:, sl],
            bootstrap_value=agent.bootstrap_value[sl],
        )
    else:
        agent_view = agent[:, sl]
    return Samples(agent=agent_view, env=samples.env[:, sl])


def split_slices(n: int, n_parts: int) -> list[slice]:
    """``n`` items cut into ``n_parts`` contiguous slices whose sizes differ by at most one."""
    # The first ``n % n_parts`` slices get one extra item, as in np.array_split.
    sizes = np.full(n_parts, n // n_parts) + (np.arange(n_parts) < n % n_parts)
    starts = np.concatenate([[0], np.cumsum(sizes)])
    return [slice(int(starts[i]), int(starts[i + 1])) for i in range(n_parts)]


#: The evaluation settings a sampler uses where the config leaves them unset.
EVAL_DEFAULTS: dict[str, int] = {"eval_n_envs": 4, "eval_max_trajectories": 10, "eval_max_steps": 100_000}


class BaseSampler:
    """Base class of samplers: arguments, env seeding, buffer allocation, counters.

    Subclasses implement :meth:`_start`, :meth:`obtain_samples` and :meth:`evaluate_agent`.

    Args:
        env_id: A gymnasium id (``"CartPole-v1"``), an Atari id (``"ALE/Pong-v5"``) or a callable
            returning an env, passed to :func:`lightning_rl.envs.make.make_env`.
        env_kwargs: Keyword arguments for ``make_env`` (training envs).
        batch_T: Time steps per batch.
        batch_B: Envs per batch (on this rank).
        max_decorrelation_steps: At :meth:`initialize`, step each env through up to this many
            random actions (a per-env random number), so the envs start out of phase; those
            episodes are not reported.
        eval_n_envs: Envs for :meth:`evaluate_agent`; 0: :data:`EVAL_DEFAULTS`'s 4 when something
            evaluates (``EvaluationCallback``, ``validate``, ``test``), none otherwise.
        eval_max_steps: Time steps per eval env in one evaluation (``eval_n_envs *
            eval_max_steps`` env steps at most); None: 100,000 once eval envs exist (an evaluation
            of an env whose episodes never end still ends).
        eval_max_trajectories: Stop an evaluation once this many episodes have completed; None: 10
            when ``eval_max_steps`` is None too, else no limit (the step limit ends it).
        eval_env_kwargs: ``make_env`` keyword arguments for the eval envs (default
            ``env_kwargs``).
        traj_info_cls: Class recording episode statistics (default: ``AtariTrajInfo`` for Atari
            ids, else ``TrajInfo``).
        collector: ``"reset"`` resets an env as soon as its episode ends; ``"wait_reset"`` lets a
            done env wait (zeros in the batch) until the next batch, so recurrent training
            sequences never contain a reset.
        n_workers: Worker processes of parallel samplers (default: ``min(batch_B, cpu count)``;
            alternating samplers: twice that, at most ``batch_B``). Ignored by
            :class:`~lightning_rl.samplers.serial.SerialSampler`.
        cpu_affinity: CPUs the workers are pinned to, worker ``w`` to ``cpu_affinity[w % n]``;
            ``None`` leaves scheduling to the OS. Ignored by the serial sampler.
        check_finite: Raise :class:`NonFiniteSampleError`, naming the env, the step and the
            field, when a collected batch holds a NaN or infinite observation or reward (one
            ``np.isfinite`` pass over the float fields per batch). False lets them through.
        step_timeout: Parallel samplers: seconds an env ``step()``/``reset()`` in a worker may
            take before ``TimeoutError`` names the worker and every worker is stopped (None: no
            limit). Ignored by the serial sampler.
        check_env: Check a probe env against the env contract when the sampler is built
            (gymnasium's env checker plus lightning_rl's rules, :mod:`lightning_rl.envs.check`);
            a broken env raises ``EnvCheckError`` naming the rule before any training.

    Raises:
        ValueError: On a bad argument, naming it.
    """

    #: Buffers and agent in OS shared memory (parallel samplers).
    share_memory: bool = False
    #: The agent's model must be in shared memory (workers act with it).
    agent_in_shared_memory: bool = False

    def __init__(
        self,
        env_id: str | Callable[..., Any],
        env_kwargs: dict[str, Any] | None = None,
        batch_T: int = 128,
        batch_B: int = 8,
        max_decorrelation_steps: int = 0,
        eval_n_envs: int = 0,
        eval_max_steps: int | None = None,
        eval_max_trajectories: int | None = None,
        eval_env_kwargs: dict[str, Any] | None = None,
        traj_info_cls: type[TrajInfo] | None = None,
        collector: Literal["reset", "wait_reset"] = "reset",
        n_workers: int | None = None,
        cpu_affinity: list[int] | None = None,
        check_finite: bool = True,
        check_env: bool = True,
        step_timeout: float | None = None,
    ) -> None:
        if not (isinstance(env_id, str) or callable(env_id)):
            raise ValueError(f"env_id must be an env id string or a callable, got {env_id!r}")
        _check_int("batch_T", batch_T, 1)
        _check_int("batch_B", batch_B, 1)
        _check_int("max_decorrelation_steps", max_decorrelation_steps, 0)
        _check_int("eval_n_envs", eval_n_envs, 0)
        if eval_max_steps is not None:
            _check_int("eval_max_steps", eval_max_steps, 1)
        if eval_max_trajectories is not None:
            _check_int("eval_max_trajectories", eval_max_trajectories, 1)
        if collector not in ("reset", "wait_reset"):
            raise ValueError(f"collector must be 'reset' or 'wait_reset', got {collector!r}")
        if n_workers is not None:
            _check_int("n_workers", n_workers, 1)
        if cpu_affinity is not None:
            if len(cpu_affinity) == 0 or any(not isinstance(c, int) or c < 0 for c in cpu_affinity):
                raise ValueError(f"cpu_affinity must be a non-empty list of CPU indexes >= 0, got {cpu_affinity!r}")
        if env_kwargs is not None and not isinstance(env_kwargs, dict):
            raise ValueError(f"env_kwargs must be a dict or None, got {env_kwargs!r}")
        if eval_env_kwargs is not None and not isinstance(eval_env_kwargs, dict):
            raise ValueError(f"eval_env_kwargs must be a dict or None, got {eval_env_kwargs!r}")
        self.env_id = env_id
        self.env_kwargs = dict(env_kwargs or {})
        self.batch_spec = BatchSpec(batch_T, batch_B)
        self.max_decorrelation_steps = max_decorrelation_steps
        self.eval_n_envs = eval_n_envs
        self.eval_max_steps = eval_max_steps
        self.eval_max_trajectories = eval_max_trajectories
        self.eval_env_kwargs = dict(self.env_kwargs if eval_env_kwargs is None else eval_env_kwargs)
        self.traj_info_cls = traj_info_cls
        self.collector = collector
        self.n_workers = n_workers
        self.cpu_affinity = None if cpu_affinity is None else list(cpu_affinity)
        self.check_finite = bool(check_finite)
        self.check_env = bool(check_env)
        self.step_timeout = check_step_timeout(step_timeout)
        self.env_steps = 0
        self.initialized = False
        self._closed = False
        self.agent: Any = None
        self.env_spaces: Any = None
        #: The probe env's :attr:`~lightning_rl.envs.Env.frame_stack` (set by :meth:`initialize`).
        self.frame_stack: int | dict[str, int] | None = None
        self.examples: dict[str, Any] = {}
        self.samples: Samples | None = None

    def use_eval_defaults(self) -> list[str]:
        """Give every evaluation setting left unchosen its default (:data:`EVAL_DEFAULTS`): something
        will evaluate (``EvaluationCallback``, ``validate``, ``test``). Call before :meth:`initialize`.

        Returns:
            ``name=value`` of each default used (empty when the config chose everything).

        Raises:
            ValueError: If the sampler is built already.
        """
        if self.initialized:
            raise ValueError(f"{type(self).__name__}.use_eval_defaults: call it before initialize()")
        used = []
        if not self.eval_n_envs:
            self.eval_n_envs = EVAL_DEFAULTS["eval_n_envs"]
            used.append(f"eval_n_envs={self.eval_n_envs}")
        used += self._fill_eval_limits()
        return used

    def _fill_eval_limits(self) -> list[str]:
        used = []
        if self.eval_max_trajectories is None and self.eval_max_steps is None:
            self.eval_max_trajectories = EVAL_DEFAULTS["eval_max_trajectories"]
            used.append(f"eval_max_trajectories={self.eval_max_trajectories}")
        if self.eval_max_steps is None:
            self.eval_max_steps = EVAL_DEFAULTS["eval_max_steps"]
        return used

    def initialize(
        self,
        agent: Any,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
        bootstrap_value: bool = False,
        traj_info_kwargs: dict[str, Any] | None = None,
    ) -> None:
        """Build the envs, the agent's model (if not built yet) and the buffers; start workers.

        Env ``b`` of this rank gets seed ``seed + rank * batch_B + b`` (its global index among
        ``batch_B * world_size`` envs), so DDP ranks sample different streams and samplers of
        any kind give env ``b`` the same stream. Eval envs are seeded after all training envs.

        Afterwards :attr:`env_spaces`, :attr:`samples` and :attr:`examples` (one observation,
        action, reward, done, env_info and agent_info, e.g. to allocate a replay buffer) are set.

        Args:
            agent: A :class:`~lightning_rl.agents.base.BaseAgent`; initialized here with the
                env's spaces unless it already is.
            seed: Base seed of the envs.
            rank: This process's DDP rank.
            world_size: Number of DDP ranks.
            bootstrap_value: Store ``agent.value`` of the last observation in
                ``samples.agent.bootstrap_value`` (the agent needs a ``value`` method).
            traj_info_kwargs: Keyword arguments for every ``traj_info_cls(...)``, e.g.
                ``{"discount": 0.99}``.

        Raises:
            ValueError: On a bad argument, or if the sampler was initialized already.
        """
        if self.initialized:
            raise ValueError(f"{type(self).__name__} is already initialized; call shutdown() and build a new one")
        _check_int("seed", seed, None)
        _check_int("world_size", world_size, 1)
        if not isinstance(rank, int) or not 0 <= rank < world_size:
            raise ValueError(f"rank must be an int in [0, world_size={world_size}), got {rank!r}")
        if bootstrap_value and not callable(getattr(agent, "value", None)):
            raise ValueError(
                f"bootstrap_value=True needs an agent with a value() method; {type(agent).__name__} has none"
            )
        self._check_workers_args()
        if self.eval_n_envs:
            self._fill_eval_limits()  # an evaluation always ends
        T, B = self.batch_spec
        self.seed = seed
        self.rank = rank
        self.world_size = world_size
        self.global_B = B * world_size
        self.env_ranks = [rank * B + b for b in range(B)]
        self.bootstrap_value = bootstrap_value
        self.traj_info_factory = self._make_traj_info_factory(traj_info_kwargs)

        env = self.make_env(0)
        try:
            if self.check_env and isinstance(env, GymEnvWrapper):
                # The probe env's next reset is seeded again (make_env), so checking it first
                # changes nothing that follows.
                for line in check_gymnasium_env(env.env, self.env_id, strict=False):
                    if line.startswith("gymnasium's env checker"):  # its other advice stays with check-env
                        rank_zero_warn(f"env {self.env_id!r}: {line}")
            self.env_spaces = env.spaces
            self.frame_stack = env.frame_stack
            null_action = env.action_space.null_value()
            observation = env.reset()
            check_observation(self.env_spaces.observation, observation, self.env_id, "reset()")
            env_step = env.step(null_action)
            check_observation(self.env_spaces.observation, env_step.observation, self.env_id, "step()")
        finally:
            env.close()
        self._initialize_agent(agent)
        self.agent = agent

        # One agent step on copies of the first observation gives the action and agent_info
        # examples (dtype, shape) the buffers need; as many as one training step acts for, so
        # per-env schedules (vector epsilon) fit.
        n = self.agent_step_B
        example_inputs = buffer_from_example(observation, n)
        example_inputs[:] = observation
        example_action_in = buffer_from_example(null_action, n)
        agent.reset()
        agent_step = agent.step(example_inputs, example_action_in, np.zeros(n, dtype=np.float32))
        bootstrap_example: Any = np.float32(0)
        if bootstrap_value:
            value = numpify_buffer(agent.value(example_inputs, example_action_in, np.zeros(n, dtype=np.float32)))
            if isinstance(value, tuple):
                # One value per agent of a multi-agent env: a namedarraytuple of [B] values.
                bootstrap_example = buffer_func(value[0], np.float32)
        agent.reset()
        action = numpify_buffer(agent_step.action)[0]
        agent_info = None if agent_step.agent_info is None else numpify_buffer(agent_step.agent_info)[0]
        self.examples = dict(
            observation=observation,
            action=action,
            reward=np.float32(env_step.reward),
            done=np.bool_(env_step.done),
            env_info=env_step.env_info,
            agent_info=agent_info,
            bootstrap_value=bootstrap_example,
        )
        self.samples = self._allocate_samples()
        self.step_buffer = self._allocate_step_buffer(B, with_action=False)
        self.eval_step_buffer = None
        if self.eval_n_envs:
            self.eval_step_buffer = self._allocate_step_buffer(self.eval_n_envs, with_action=True)
        self._start()
        self.initialized = True

    @property
    def agent_step_B(self) -> int:
        """Envs one ``agent.step`` call acts for in the main process (``batch_B``)."""
        return self.batch_spec.B

    def _check_workers_args(self) -> None:
        """Subclass hook: validate worker arguments against the machine."""

    def _initialize_agent(self, agent: Any) -> None:
        # Env steps of one sampler iteration over all ranks: schedules in env steps (epsilon) need it.
        agent.set_steps_per_itr(self.batch_spec.T * self.global_B)
        share = self.agent_in_shared_memory
        if not agent.initialized:
            agent.initialize(self.env_spaces, share_memory=share, global_B=self.global_B, env_ranks=self.env_ranks)
        elif share and not agent.share_memory_enabled:
            if agent.device.type != "cpu":
                raise ValueError(
                    f"{type(self).__name__} needs the agent's model in CPU shared memory, but the agent is already "
                    f"initialized on {agent.device}; initialize the sampler before moving the agent"
                )
            agent.initialize(self.env_spaces, share_memory=True, global_B=self.global_B, env_ranks=self.env_ranks)

    def _make_traj_info_factory(self, traj_info_kwargs: dict[str, Any] | None) -> Callable[[], Any]:
        cls = self.traj_info_cls if self.traj_info_cls is not None else default_traj_info_cls(self.env_id)
        return functools.partial(cls, **(traj_info_kwargs or {}))

    def make_env(self, b: int, evaluation: bool = False) -> Any:
        """Build training env ``b`` (or eval env ``b``) of this rank, seeded (see :meth:`initialize`)."""
        if evaluation:
            seed = self.seed + self.global_B + self.rank * self.eval_n_envs + b
            return make_env(self.env_id, seed=seed, **self.eval_env_kwargs)
        return make_env(self.env_id, seed=self.seed + self.env_ranks[b], **self.env_kwargs)

    def decorrelation_rng(self, b: int) -> np.random.Generator:
        """Random source of env ``b``'s decorrelation steps (independent of the worker layout)."""
        return np.random.default_rng([self.seed, self.env_ranks[b], 0xDEC0])

    def _allocate_samples(self) -> Samples:
        T, B = self.batch_spec
        ex, share = self.examples, self.share_memory
        agent_fields = dict(
            action=buffer_from_example(ex["action"], (T, B), share),
            prev_action=buffer_from_example(ex["action"], (T, B), share),
            agent_info=buffer_from_example(ex["agent_info"], (T, B), share),
        )
        agent: AgentSamples | AgentSamplesBsv
        if self.bootstrap_value:
            bootstrap = buffer_from_example(ex["bootstrap_value"], B, share)
            agent = AgentSamplesBsv(**agent_fields, bootstrap_value=bootstrap)
        else:
            agent = AgentSamples(**agent_fields)
        env = EnvSamples(
            observation=buffer_from_example(ex["observation"], (T, B), share),
            reward=buffer_from_example(np.float32(0), (T, B), share),
            prev_reward=buffer_from_example(np.float32(0), (T, B), share),
            done=buffer_from_example(np.bool_(False), (T, B), share),
            truncated=buffer_from_example(np.bool_(False), (T, B), share),
            env_info=buffer_from_example(ex["env_info"], (T, B), share),
        )
        return Samples(agent=agent, env=env)

    def _allocate_step_buffer(self, n: int, with_action: bool) -> StepBuffer:
        ex, share = self.examples, self.share_memory
        return StepBuffer(
            observation=buffer_from_example(ex["observation"], n, share),
            prev_action=buffer_from_example(ex["action"], n, share),
            prev_reward=buffer_from_example(np.float32(0), n, share),
            action=buffer_from_example(ex["action"], n, share) if with_action else None,
            reset_agent=buffer_from_example(np.bool_(False), n, share),
        )

    def _start(self) -> None:
        """Subclass hook: build envs and collectors, or fork workers."""
        raise NotImplementedError

    def obtain_samples(
        self, itr: int, agent_mode: Literal["sample", "eval"] = "sample", reset_envs: bool = False
    ) -> tuple[Samples, list[Any]]:
        """Collect one batch with the agent in sample mode (or eval mode).

        Args:
            itr: Sampler iteration (the agent's exploration schedules read it).
            agent_mode: ``"sample"`` (training data) or ``"eval"``: act in the agent's eval mode
                (test trajectories outside training). The
                agent switches to eval mode only if it is not there already, so a recurrent
                agent's state carries over between consecutive eval-mode batches.
            reset_envs: Reset every training env and the agent's state first; the unfinished
                episodes are dropped (not reported).

        Returns:
            ``(samples, traj_infos)``: the ``[T, B]`` buffer (the same numpy-backed object every
            call, overwritten in place) and the TrajInfos of episodes completed in the batch.
        """
        raise NotImplementedError

    def evaluate_agent(self, itr: int) -> list[Any]:
        """Run the agent in eval mode on the eval envs; return the completed episodes' TrajInfos.

        Stops after ``eval_max_steps`` steps of every eval env or once
        ``eval_max_trajectories`` episodes have completed (the first that many are returned).
        Episodes still running at the end are dropped.
        """
        raise NotImplementedError

    def _check_ready(self, what: str) -> None:
        if not self.initialized:
            raise ValueError(f"{type(self).__name__}.{what}: call initialize() first")
        if self.closed:
            raise RuntimeError(f"{type(self).__name__}.{what}: the sampler was shut down (or a worker failed)")

    def _check_can_evaluate(self) -> None:
        self._check_ready("evaluate_agent")
        if self.eval_n_envs == 0:
            raise ValueError(f"{type(self).__name__}.evaluate_agent: eval_n_envs=0, no eval envs were built")

    def shutdown(self) -> None:
        """Stop worker processes and close envs; the sampler cannot be used afterwards."""

    @property
    def closed(self) -> bool:
        """True once :meth:`shutdown` ran (or a worker failed)."""
        return self._closed

    def state_dict(self) -> dict[str, Any]:
        """Counters to resume from (parallel samplers restart their envs on resume)."""
        return {"env_steps": self.env_steps}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        self.env_steps = int(state["env_steps"])

    def __enter__(self) -> BaseSampler:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()


def set_agent_mode(agent: Any, itr: int, agent_mode: str) -> None:
    """Put ``agent`` in the mode a batch is collected in (see :meth:`BaseSampler.obtain_samples`).

    Raises:
        ValueError: If ``agent_mode`` is not ``"sample"`` or ``"eval"``.
    """
    if agent_mode == "sample":
        agent.sample_mode(itr)
    elif agent_mode == "eval":
        if agent.mode != "eval":
            agent.eval_mode(itr)
    else:
        raise ValueError(f"agent_mode must be 'sample' or 'eval', got {agent_mode!r}")


def _check_int(name: str, value: Any, minimum: int | None) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an int, got {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")


def cpu_count() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def zeros_like_buffer(buffer_: Any) -> Any:
    """Private zeroed copy of a buffer (same structure, dtypes and shapes)."""
    return buffer_func(buffer_, np.zeros_like)


class NonFiniteSampleError(ValueError):
    """A collected batch holds a NaN or infinite observation or reward."""


def check_finite_samples(
    samples: Any, itr: int, env_id: Any, env_ranks: Sequence[int] | None = None, pending: Any = None
) -> None:
    """Raise :class:`NonFiniteSampleError` at the first NaN or infinite observation or reward.

    Args:
        samples: A ``[T, B]`` batch (``samples.env.observation`` may be a structure of arrays).
        itr: The sampler iteration that collected it (for the message).
        env_id: The env's id (for the message).
        env_ranks: Global index of each of the batch's envs (default: ``0..B-1``).
        pending: The observations ``[B, ...]`` the envs returned at the batch's last step, which
            the next batch starts from (the sampler's ``step_buffer.observation``): checked too,
            so a non-finite one raises in this iteration, before any checkpoint can store it.

    Raises:
        NonFiniteSampleError: Naming the field, the env, the time step and the value. The
            observation at step ``t`` is what the env returned at step ``t - 1`` (or at reset).
    """
    env = samples.env
    T = int(np.shape(env.reward)[0])
    fields: list[tuple[str, Any, bool]] = [("observation", env.observation, False), ("reward", env.reward, False)]
    if pending is not None:
        fields.append(("observation", pending, True))
    for name, field, last in fields:
        leaves: list[Any] = []
        buffer_func(field, leaves.append)
        for leaf in leaves:
            array = np.asarray(leaf)
            if array.dtype.kind not in "fc" or bool(np.isfinite(array).all()):
                continue
            bad = np.argwhere(~np.isfinite(array))[0]
            t, b = (T, int(bad[0])) if last else (int(bad[0]), int(bad[1]))
            value = array[b] if last else array[t, b]
            rank = b if env_ranks is None else env_ranks[b]
            when = f"returned at the last step ({T - 1})" if last else f"at time step {t}"
            raise NonFiniteSampleError(
                f"non-finite {name} from env {b} (global env {rank}) of {env_id!r} {when} of sampler "
                f"iteration {itr}: {value!r}; training stopped before it reached a loss or a checkpoint. Fix the "
                f"env, or pass check_finite=False to the sampler to let such values through"
            )


def check_step_timeout(value: Any) -> float | None:
    """``value`` as a step timeout in seconds (None: no limit).

    Raises:
        ValueError: If it is not None or a positive finite number.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"step_timeout must be a number of seconds or None, got {value!r}")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"step_timeout must be > 0 seconds (None: no limit), got {value!r}")
    return float(value)


def check_observation(space: Any, observation: Any, env_id: Any, where: str, name: str = "observation") -> None:
    """Raise ``ValueError`` naming the env and the broken rule unless ``observation`` fits ``space``.

    The sampler checks the first ``reset()`` and ``step()`` of its first env, so a malformed env
    fails when the sampler is built, not later as a shape error deep inside a model. Rules, per
    (sub-)space: the shape is the space's; the dtype is of the space's kind (integer spaces take
    integers or bools, float spaces real numbers); the values lie within the space's bounds.
    """
    spaces = getattr(space, "spaces", None)
    if spaces is not None:  # Composite: check each field against its sub-space
        for sub_name, sub_space in zip(space.names, spaces, strict=True):
            check_observation(sub_space, getattr(observation, sub_name), env_id, where, f"{name}.{sub_name}")
        return
    a = np.asarray(observation)
    shape = tuple(space.shape)
    rule = None
    if a.shape != shape:
        rule = f"has shape {a.shape}, but the observation space {space!r} has shape {shape}"
    elif np.issubdtype(space.dtype, np.integer) and not (np.issubdtype(a.dtype, np.integer) or a.dtype == bool):
        rule = f"has dtype {a.dtype}, but the observation space {space!r} holds integers ({space.dtype})"
    elif not (np.issubdtype(a.dtype, np.number) or a.dtype == bool):
        rule = f"has dtype {a.dtype}, not a number"
    elif not space.contains(a):
        rule = (f"lies outside the observation space {space!r} (values from {a.min()} to {a.max()}, "
                f"bounds {np.min(space.low)} to {np.max(space.high)})")
    if rule is not None:
        raise ValueError(f"env {env_id!r}: the {name} returned by {where} {rule}")
