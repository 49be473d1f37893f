"""Worker processes of the parallel samplers and their supervision (rlpyt sections 6.2, 6.3).

Workers are forked (``multiprocessing.get_context("fork")``), so they inherit the sampler
object: the shared-memory sample and step buffers, the shared-memory agent and the
synchronization objects. Each worker builds its own slice of envs (seeded by global env index)
inside the child, then waits for commands.

Protocol (main process <-> worker ``w``):

* ``go[w]``: the main process released a command (``COLLECT``, ``EVALUATE``, ``SAVE_STATE``,
  ``LOAD_STATE`` or ``QUIT``) whose code and iteration are in shared values.
* Acting workers (CPU sampler) run the whole batch themselves and report on the queue.
* Serving workers (GPU and alternating samplers) release ``obs_ready[w]`` whenever their
  observations are in the step buffer and wait on ``act_ready[w]`` for the actions.
* Everything a worker reports (ready, finished batch with its TrajInfos, eval episodes, errors)
  goes through one ``multiprocessing.Queue``; nothing large crosses it per step. The envs' state
  for a checkpoint crosses it on ``SAVE_STATE``, and goes back through the worker's own
  ``inbox`` pipe on ``LOAD_STATE`` (:mod:`lightning_rl.samplers.worker_state`).

The main process never blocks without a timeout: every wait polls the workers' exit codes, the
queue and the workers' env-call stamps, so within a fraction of a second

* a worker that raises re-raises its exception, of the same type, naming the worker and the env
  and carrying the worker's traceback (:func:`~lightning_rl.samplers.errors.remote_exception`);
* a worker that dies raises :class:`~lightning_rl.samplers.errors.SamplerWorkerDied`;
* an env ``step()`` or ``reset()`` running past ``step_timeout`` raises
  :class:`~lightning_rl.samplers.errors.SamplerStepTimeout` (a ``TimeoutError``).

Each of them shuts the workers down first. Workers ignore SIGINT (Ctrl-C is the main process's
business) and end with their parent: Linux sends them SIGKILL when the thread that forked
them exits (``prctl(PR_SET_PDEATHSIG)``); elsewhere, or when forked from another thread than the
main one, a watchdog thread in each worker exits once the parent is gone.
"""

from __future__ import annotations

import ctypes
import dataclasses
import itertools
import multiprocessing as mp
import os
import queue as queue_module
import random
import signal
import sys
import threading
import time
import traceback
import weakref
from time import monotonic as _monotonic
from typing import Any, Literal, NamedTuple

import numpy as np
import torch
from pytorch_lightning.utilities import rank_zero_warn

from lightning_rl.samplers.base import (
    BaseSampler,
    Samples,
    check_step_timeout,
    cpu_count,
    set_agent_mode,
    slice_samples,
    split_slices,
)
from lightning_rl.samplers.collectors import (
    EvalCollector,
    act,
    act_eval,
    bootstrap_value,
    collect_batch,
    evaluate_envs,
    reset_agent_envs,
)
from lightning_rl.samplers.errors import (
    SamplerClosedError,
    SamplerStepTimeout,
    SamplerWorkerDied,
    describe,
    pickled_type,
    remote_exception,
)
from lightning_rl.samplers.serial import make_collector
from lightning_rl.samplers.worker_state import load_worker_state, state_from_bytes, state_to_bytes, worker_state

__all__ = ["ParallelSamplerBase", "WorkerPool", "WorkerSpec"]

QUIT, COLLECT, EVALUATE, SAVE_STATE, LOAD_STATE = 0, 1, 2, 3, 4
COMMAND_NAMES = {QUIT: "quit", COLLECT: "collect", EVALUATE: "evaluate", SAVE_STATE: "save state",
                 LOAD_STATE: "load state"}
#: What a worker is calling on one of its envs (``_Sync.busy_what`` holds ``8 * env + 2 * call + evaluation``).
CONSTRUCTION, STEP, RESET = 0, 1, 2
CALL_NAMES = ("construction", "step()", "reset()")
CALL_VERBS = ("building", "stepping", "resetting")
#: ``prctl`` option: the signal the kernel sends a process when its parent thread exits.
PR_SET_PDEATHSIG = 1
#: Bits of ``_Sync.collect_flags`` for a ``COLLECT`` command (see ``obtain_samples``); the last
#: one carries the main process's ``agent.eval_deterministic`` to the workers' agent copies.
EVAL_MODE_FLAG, RESET_ENVS_FLAG, DETERMINISTIC_FLAG = 1, 2, 4
#: Seconds between liveness checks while the main process waits on workers.
MAIN_POLL_S = 0.2
#: Seconds between checks of the parent's life while a worker waits.
WORKER_POLL_S = 1.0

# Arguments of workers being forked, keyed by a token: the child reads them from its copy of
# this dict, so no Process object keeps a reference to the sampler (which would keep it alive).
_FORK_ARGS: dict[int, tuple[Any, WorkerSpec, int, bool]] = {}
_fork_tokens = itertools.count()


@dataclasses.dataclass(frozen=True)
class WorkerSpec:
    """What one worker owns.

    Attributes:
        index: Worker index ``w``.
        name: Process name, used in error messages.
        env_slice: Its training envs (indexes into ``[B]``).
        eval_slice: Its eval envs (indexes into ``[eval_n_envs]``).
        acts: Act with the (shared-memory) agent in the worker (CPU sampler) rather than wait
            for the main process's actions (GPU samplers).
        seed: Seed of the worker's numpy, random and torch generators.
        cpu: CPU to pin the worker to, or ``None``.
    """

    index: int
    name: str
    env_slice: slice
    eval_slice: slice
    acts: bool
    seed: int
    cpu: int | None


class _Sync:
    """Shared control values, per-worker semaphores and the report queue."""

    def __init__(self, ctx: Any, n_workers: int) -> None:
        self.command = ctx.RawValue("i", COLLECT)
        self.itr = ctx.RawValue("q", 0)
        self.stop_eval = ctx.RawValue("b", 0)
        self.collect_flags = ctx.RawValue("i", 0)
        self.go = [ctx.Semaphore(0) for _ in range(n_workers)]
        self.obs_ready = [ctx.Semaphore(0) for _ in range(n_workers)]
        self.act_ready = [ctx.Semaphore(0) for _ in range(n_workers)]
        self.queue = ctx.Queue()
        # Checkpointed state going to each worker (LOAD_STATE): only when a run resumes.
        self.inbox = [ctx.SimpleQueue() for _ in range(n_workers)]
        # Per worker: when (time.monotonic(), one clock for all processes) its current env
        # step() or reset() began, 0 when it is in none; and which env and call that is.
        self.busy_since = ctx.RawArray("d", n_workers)
        self.busy_what = ctx.RawArray("i", n_workers)


class _ParentGone(Exception):
    """The main process has exited; the worker should too."""


class _Quit(Exception):
    """The main process asked the worker to stop in the middle of a command."""


class WorkerPool:
    """The main process's handle on the workers: commands, waits with liveness checks, shutdown.

    Args:
        procs: Started worker processes, in worker order.
        specs: Their :class:`WorkerSpec`.
        sync: The shared synchronization objects.
        step_timeout: Seconds an env ``step()`` or ``reset()`` may run; None: no limit.
    """

    def __init__(
        self, procs: list[Any], specs: list[WorkerSpec], sync: _Sync, step_timeout: float | None = None
    ) -> None:
        self.procs = procs
        self.specs = specs
        self.sync = sync
        self.step_timeout = step_timeout
        self.owner_pid = os.getpid()
        self.closed = False
        #: Why the pool was shut down (for the error of a later call), None while open.
        self.close_reason: str | None = None
        #: The last command released, for error messages: the workers build their envs first.
        self.last_command = "start"
        self._pending: list[tuple[str, int, Any]] = []

    def command(self, command: int, itr: int = 0) -> None:
        """Release one command to every worker."""
        self.last_command = f"{COMMAND_NAMES[command]} (itr {itr})"
        self.sync.itr.value = int(itr)
        self.sync.command.value = command
        for sem in self.sync.go:
            sem.release()

    def release_act(self, workers: Any) -> None:
        """Tell ``workers`` their actions are in the buffer."""
        for w in workers:
            self.sync.act_ready[w].release()

    def wait_obs(self, workers: Any) -> None:
        """Wait until each of ``workers`` has written its observations."""
        for w in workers:
            sem = self.sync.obs_ready[w]
            while not sem.acquire(timeout=MAIN_POLL_S):
                self.check()

    def recv(self) -> tuple[str, int, Any]:
        """The next report ``(kind, worker, payload)``; raises if a worker failed."""
        while True:
            # Checked on every pass: check() moves reports that arrived after a timed-out get()
            # into _pending, and waiting on the queue again would wait for them forever.
            if self._pending:
                return self._pending.pop(0)
            try:
                msg = self.sync.queue.get(timeout=MAIN_POLL_S)
            except queue_module.Empty:
                self.check()
                continue
            except (EOFError, OSError) as error:  # a worker died while its report was being read
                self.check()
                raise RuntimeError(f"sampler: a worker's report could not be read ({error!r})") from error
            if msg[0] == "error":
                self._raise_error(msg)
            return msg

    def poll(self) -> list[tuple[str, int, Any]]:
        """Reports that have arrived so far, without waiting."""
        out, self._pending = self._pending, []
        while True:
            try:
                msg = self.sync.queue.get_nowait()
            except queue_module.Empty:
                return out
            if msg[0] == "error":
                self._raise_error(msg)
            out.append(msg)

    def gather(self, kind: str) -> list[Any]:
        """One ``kind`` report from every worker; their payloads in worker order."""
        payloads: list[Any] = [None] * len(self.procs)
        missing = set(range(len(self.procs)))
        while missing:
            msg = self.recv()
            if msg[0] != kind or msg[1] not in missing:
                raise RuntimeError(
                    f"sampler protocol error: expected {kind!r} reports, got {msg[0]!r} from worker {msg[1]}"
                )
            payloads[msg[1]] = msg[2]
            missing.discard(msg[1])
        return payloads

    def check(self) -> None:
        """Raise if a worker reported an error, is no longer running or overran ``step_timeout``.

        Raises:
            SamplerWorkerDied: A worker process ended without reporting an error.
            SamplerStepTimeout: An env call in a worker has run longer than ``step_timeout``.
            Exception: A worker's own exception, of its type (see :meth:`_raise_error`).
        """
        # poll() replaces _pending (returning what it held with what arrived since): read the
        # attribute after it ran, not before, or the reports would go to the list it replaced.
        arrived = self.poll()
        self._pending.extend(arrived)
        dead = [w for w, p in enumerate(self.procs) if p.exitcode is not None]
        if dead:
            # A worker that raised has reported it before exiting; give the report a moment to arrive.
            try:
                msg = self.sync.queue.get(timeout=0.5)
                if msg[0] == "error":
                    self._raise_error(msg)
                self._pending.append(msg)
            except queue_module.Empty:
                pass
            self._raise_died(dead[0])
        if self.step_timeout is not None:
            now = time.monotonic()
            for w in range(len(self.procs)):
                since = self.sync.busy_since[w]
                if since > 0.0 and now - since > self.step_timeout:
                    self._raise_timeout(w, now - since)

    def _who(self, w: int) -> str:
        return f"sampler worker {w} ({self.specs[w].name}, pid {self.procs[w].pid})"

    def _info(self, w: int) -> dict[str, Any]:
        return dict(
            worker=w, pid=self.procs[w].pid, worker_name=self.specs[w].name, last_command=self.last_command
        )

    def _raise_died(self, w: int) -> None:
        who, info, code = self._who(w), self._info(w), self.procs[w].exitcode
        how, signal_name = f"exit code {code}", None
        if code < 0:
            try:
                signal_name = signal.Signals(-code).name
                how += f" (killed by {signal_name})"
            except ValueError:
                pass
        self.shutdown(reason=f"worker {w} died with {how}")
        message = f"{who} died unexpectedly with {how} while running {self.last_command}"
        raise describe(SamplerWorkerDied(message), exitcode=code, signal=signal_name, **info)

    def _raise_timeout(self, w: int, elapsed: float) -> None:
        who, info = self._who(w), self._info(w)
        env, code = divmod(self.sync.busy_what[w], 8)
        call, kind = CALL_NAMES[code // 2], "eval" if code % 2 else "training"
        # The worker is stuck inside the env and cannot take the QUIT command: kill it now.
        self.procs[w].kill()
        self.shutdown(reason=f"worker {w} timed out in {call} of {kind} env {env}")
        message = (
            f"{who}: {call} of {kind} env {env} did not return within step_timeout={self.step_timeout} s "
            f"(running for {elapsed:.1f} s, during {self.last_command}); the sampler's workers were stopped"
        )
        raise describe(
            SamplerStepTimeout(message), env=env, env_kind=kind, env_call=call, timeout=self.step_timeout, **info
        )

    def _raise_error(self, msg: tuple[str, int, Any]) -> None:
        """Raise the exception a worker reported, as its own type where possible.

        The message names the worker, the env it was calling (if any) and the command, then the
        worker's message and its traceback; the attributes of
        :class:`~lightning_rl.samplers.errors.SamplerWorkerError` are set.
        """
        _, w, report = msg
        type_name, type_bytes, exc_msg, tb, where = report
        who, info = self._who(w), self._info(w)
        short_name = type_name.rsplit(".", 1)[-1]
        env_info: dict[str, Any] = {}
        in_env = ""
        if where is not None:
            evaluation, env, call = where
            kind = "eval" if evaluation else "training"
            env_info = dict(env=env, env_kind=kind, env_call=CALL_NAMES[call])
            in_env = f" {CALL_VERBS[call]} {kind} env {env}"
        self.shutdown(reason=f"worker {w} failed with {short_name}: {exc_msg}")
        message = (
            f"{who}{in_env} failed with {short_name}: {exc_msg}\n(while running {self.last_command})\n\n"
            f"Worker traceback:\n{tb}"
        )
        error = remote_exception(type_name, type_bytes, message)
        raise describe(error, remote_type=type_name, remote_traceback=tb, **env_info, **info)

    def shutdown(self, timeout: float = 1.0, reason: str = "shutdown() was called") -> None:
        """Ask the workers to quit, then terminate those that do not within ``timeout`` seconds
        (and kill those that ignore that within another ``timeout``). Idempotent.

        Args:
            timeout: Seconds to wait at each stage.
            reason: Why, for the error a later use of the sampler raises.
        """
        if self.closed or os.getpid() != self.owner_pid:
            return
        self.closed = True
        self.close_reason = reason
        sync = self.sync
        sync.command.value = QUIT
        for w in range(len(self.procs)):
            sync.go[w].release()
            sync.act_ready[w].release()
        deadline = time.monotonic() + timeout
        for p in self.procs:
            p.join(max(0.0, deadline - time.monotonic()))
        stuck = [p for p in self.procs if p.is_alive()]
        for p in stuck:
            p.terminate()
        deadline = time.monotonic() + timeout
        for p in stuck:
            p.join(max(0.0, deadline - time.monotonic()))
        for p in stuck:
            if p.is_alive():
                p.kill()
                p.join()
        for p in self.procs:
            p.close()
        sync.queue.close()
        sync.queue.join_thread()
        for inbox in sync.inbox:
            inbox.close()


class _Group(NamedTuple):
    """Workers whose envs form one contiguous block, acted for in one ``agent.step``."""

    workers: list[int]
    env_slice: slice
    eval_slice: slice


class ParallelSamplerBase(BaseSampler):
    """Base of the samplers whose envs live in forked worker processes.

    Buffers are in OS shared memory, written by the workers in place. ``shutdown()`` stops the
    workers; so do garbage collection of the sampler and interpreter exit (a
    ``weakref.finalize``), and the workers exit by themselves if the main process dies.

    Attributes:
        step_timeout: Seconds an env ``step()`` or ``reset()`` in a worker may take before the
            sampler raises :class:`~lightning_rl.samplers.errors.SamplerStepTimeout` (a
            ``TimeoutError``) and stops its workers; None (default): no limit. Set it before or
            after :meth:`initialize`; a value that is not a positive number raises ``ValueError``.
            Env construction is not timed.
    """

    share_memory = True
    #: Workers act with their copy of the agent (CPU sampler); else the main process serves actions.
    workers_act = True
    #: With two groups: may both groups' envs step at the same time.
    overlap = True
    _step_timeout: float | None = None

    @property
    def step_timeout(self) -> float | None:
        """Seconds an env call in a worker may take (see the class docstring); None: no limit."""
        return self._step_timeout

    @step_timeout.setter
    def step_timeout(self, value: float | None) -> None:
        self._step_timeout = check_step_timeout(value)
        pool = getattr(self, "pool", None)
        if pool is not None:
            pool.step_timeout = self._step_timeout

    def _resolve_n_workers(self) -> int:
        return self.n_workers if self.n_workers is not None else min(self.batch_spec.B, cpu_count())

    def _check_workers_args(self) -> None:
        n = self._resolve_n_workers()
        if n > self.batch_spec.B:
            raise ValueError(f"n_workers={n} must not exceed batch_B={self.batch_spec.B}")
        if self.cpu_affinity is not None:
            available = os.sched_getaffinity(0)
            bad = [c for c in self.cpu_affinity if c not in available]
            if bad:
                raise ValueError(
                    f"cpu_affinity={self.cpu_affinity} names CPUs {bad} not available (have {sorted(available)})"
                )
        self.n_workers_ = n

    def _layout(self) -> tuple[list[slice], list[slice], list[_Group]]:
        """Env and eval-env slices of each worker, and the worker groups."""
        n = self.n_workers_
        env_slices = split_slices(self.batch_spec.B, n)
        eval_slices = split_slices(self.eval_n_envs, n)
        group = _Group(list(range(n)), slice(0, self.batch_spec.B), slice(0, self.eval_n_envs))
        return env_slices, eval_slices, [group]

    def _start(self) -> None:
        ctx = mp.get_context("fork")
        n = self.n_workers_
        env_slices, eval_slices, self.groups = self._layout()
        self._sync = _Sync(ctx, n)
        seeds = np.random.SeedSequence([self.seed, self.rank, 0x5A3]).generate_state(n)
        name = type(self).__name__
        specs = [
            WorkerSpec(
                index=w,
                name=f"{name}-worker-{w}",
                env_slice=env_slices[w],
                eval_slice=eval_slices[w],
                acts=self.workers_act,
                seed=int(seeds[w]),
                cpu=None if self.cpu_affinity is None else self.cpu_affinity[w % len(self.cpu_affinity)],
            )
            for w in range(n)
        ]
        procs: list[Any] = []
        self.pool = WorkerPool(procs, specs, self._sync, self.step_timeout)
        self._finalizer = weakref.finalize(self, self.pool.shutdown)
        # PR_SET_PDEATHSIG fires when the forking *thread* exits: only safe from the main thread.
        death_signal = threading.current_thread() is threading.main_thread()
        for spec in specs:
            token = next(_fork_tokens)
            _FORK_ARGS[token] = (self, spec, os.getpid(), death_signal)
            try:
                p = ctx.Process(target=_worker_entry, args=(token,), name=spec.name, daemon=True)
                p.start()
            finally:
                del _FORK_ARGS[token]
            procs.append(p)
        assert self.samples is not None  # allocated by initialize() before _start()
        self._group_views = [
            (
                self.step_buffer[g.env_slice],
                slice_samples(self.samples, g.env_slice),
                None if self.eval_step_buffer is None else self.eval_step_buffer[g.eval_slice],
            )
            for g in self.groups
        ]
        self._busy = False
        self.pool.gather("ready")

    def _check_ready(self, what: str) -> None:
        if self.closed:
            reason = self.pool.close_reason
            raise SamplerClosedError(
                f"{type(self).__name__}.{what}: the sampler is closed ({reason}); build a new sampler"
            )
        super()._check_ready(what)

    def _begin(self, what: str) -> None:
        self._check_ready(what)
        if self._busy:
            raise RuntimeError(
                f"{type(self).__name__}.{what}: a previous call was interrupted mid-batch and the workers are out "
                "of step; shut this sampler down and build a new one"
            )
        self._busy = True

    def obtain_samples(
        self, itr: int, agent_mode: Literal["sample", "eval"] = "sample", reset_envs: bool = False
    ) -> tuple[Samples, list[Any]]:
        if agent_mode not in ("sample", "eval"):
            raise ValueError(f"agent_mode must be 'sample' or 'eval', got {agent_mode!r}")
        self._begin("obtain_samples")
        set_agent_mode(self.agent, itr, agent_mode)
        if reset_envs:
            self.agent.reset()
        self._sync.collect_flags.value = (
            (EVAL_MODE_FLAG if agent_mode == "eval" else 0)
            | (RESET_ENVS_FLAG if reset_envs else 0)
            | (DETERMINISTIC_FLAG if getattr(self.agent, "eval_deterministic", False) else 0)
        )
        self.pool.command(COLLECT, itr)
        if not self.workers_act:
            self._serve_batch()
        per_worker = self.pool.gather("batch")
        self._busy = False
        self.env_steps += self.batch_spec.size
        assert self.samples is not None
        return self.samples, [traj for trajs in per_worker for traj in trajs]

    def evaluate_agent(self, itr: int) -> list[Any]:
        self._check_can_evaluate()
        self._begin("evaluate_agent")
        self.agent.eval_mode(itr)
        self.agent.reset()
        self._sync.stop_eval.value = 0
        # Worker-side agent copies act with the main agent's deterministic-evaluation setting.
        self._sync.collect_flags.value = DETERMINISTIC_FLAG if getattr(self.agent, "eval_deterministic", False) else 0
        self.pool.command(EVALUATE, itr)
        completed: list[Any] = []
        if not self.workers_act:
            self._serve_evaluation(completed)
        limit = self.eval_max_trajectories
        n_done = 0
        while n_done < len(self.pool.procs):
            kind, _, payload = self.pool.recv()
            if kind == "traj":
                completed.append(payload)
                if limit is not None and len(completed) >= limit:
                    self._sync.stop_eval.value = 1
            elif kind == "eval_done":
                n_done += 1
            else:
                raise RuntimeError(f"sampler protocol error: unexpected {kind!r} report during evaluation")
        self._busy = False
        return completed[:limit]

    def state_dict(self) -> dict[str, Any]:
        """Counters and every worker's state (:func:`~lightning_rl.samplers.worker_state.worker_state`:
        envs, collector, generators, acting agent), as plain data, so a resumed run continues every
        episode exactly. When some env holds state that cannot be stored, or the workers are
        stopped or in the middle of a batch, only the counters (``env_state_missing`` says why):
        a resumed run then starts new episodes."""
        state = super().state_dict()
        if not self.initialized:
            return state
        if self.closed or self._busy:
            state["env_state_missing"] = ["the sampler's workers are stopped or in the middle of a batch"]
            return state
        self._begin("state_dict")
        self.pool.command(SAVE_STATE)
        workers = [state_from_bytes(payload) for payload in self.pool.gather("state")]
        self._busy = False
        missing = sorted({name for w in workers for name in w.get("missing", [])})
        if missing:
            state["env_state_missing"] = missing
        else:
            state["workers"] = workers
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` into an initialized sampler built with the same arguments;
        without stored worker state only the counters (the envs play on from their own reset, a
        new episode each, with a warning naming what could not be stored).

        Raises:
            ValueError: If the state is for another number of workers or envs per worker.
        """
        super().load_state_dict(state)
        if "workers" not in state:
            if state.get("env_state_missing"):
                rank_zero_warn(f"{type(self).__name__}: the checkpoint holds no env state "
                               f"({', '.join(state['env_state_missing'])}); the envs start new episodes")
            return
        workers = state["workers"]
        sizes = [len(w["envs"]) for w in workers]
        own = [spec.env_slice.stop - spec.env_slice.start for spec in self.pool.specs]
        if sizes != own:
            raise ValueError(
                f"{type(self).__name__}.load_state_dict: the state holds {len(sizes)} workers with {sizes} envs, "
                f"this sampler has {len(own)} with {own} (n_workers and batch_B must match the checkpoint's)"
            )
        self._begin("load_state_dict")
        self.pool.command(LOAD_STATE)
        for w, payload in enumerate(workers):
            self._sync.inbox[w].put(state_to_bytes(payload))
        self.pool.gather("loaded")
        self._busy = False

    def _serve_batch(self) -> None:
        """Act for every group at every step while the workers step the envs."""
        pool, agent = self.pool, self.agent
        stepping = [True] * len(self.groups)
        for t in range(self.batch_spec.T):
            for g, group in enumerate(self.groups):
                sb, samples, _ = self._group_views[g]
                self._wait_group(g, stepping)
                reset_agent_envs(agent, sb.reset_agent, offset=group.env_slice.start)
                act(agent, sb, samples, t)
                if not self.overlap:
                    for other in range(len(self.groups)):
                        self._wait_group(other, stepping)
                pool.release_act(group.workers)
                stepping[g] = True
        for g in range(len(self.groups)):
            self._wait_group(g, stepping)
        for g, group in enumerate(self.groups):
            sb, samples, _ = self._group_views[g]
            reset_agent_envs(agent, sb.reset_agent, offset=group.env_slice.start)
            if self.bootstrap_value:
                bootstrap_value(agent, sb, samples)

    def _serve_evaluation(self, completed: list[Any]) -> None:
        """Act on the eval envs until the step or trajectory limit, then stop the workers."""
        pool, agent, limit = self.pool, self.agent, self.eval_max_trajectories
        stepping = [True] * len(self.groups)
        stopped = False
        steps = range(self.eval_max_steps) if self.eval_max_steps is not None else itertools.count()
        for _ in steps:
            for g, group in enumerate(self.groups):
                self._wait_group(g, stepping)
                if g == 0:
                    completed.extend(payload for kind, _, payload in self._poll_reports("traj"))
                    stopped = limit is not None and len(completed) >= limit
                if stopped:
                    continue
                esb = self._group_views[g][2]
                assert esb is not None  # evaluation runs only with eval envs
                reset_agent_envs(agent, esb.reset_agent, offset=group.eval_slice.start)
                if group.eval_slice.stop > group.eval_slice.start:
                    act_eval(agent, esb)
                if not self.overlap:
                    for other in range(len(self.groups)):
                        self._wait_group(other, stepping)
                pool.release_act(group.workers)
                stepping[g] = True
            if stopped:
                break
        for g in range(len(self.groups)):
            self._wait_group(g, stepping)
        if stopped:
            self._sync.stop_eval.value = 1
            pool.release_act(range(len(pool.procs)))

    def _wait_group(self, g: int, stepping: list[bool]) -> None:
        if stepping[g]:
            self.pool.wait_obs(self.groups[g].workers)
            stepping[g] = False

    def _poll_reports(self, kind: str) -> list[tuple[str, int, Any]]:
        msgs = self.pool.poll()
        out = [m for m in msgs if m[0] == kind]
        self.pool._pending.extend(m for m in msgs if m[0] != kind)
        return out

    @property
    def closed(self) -> bool:
        """True once the workers are stopped (by :meth:`shutdown` or a worker failure)."""
        pool = getattr(self, "pool", None)
        return pool is not None and pool.closed

    def shutdown(self) -> None:
        """Stop the workers (idempotent); the sampler cannot sample afterwards."""
        finalizer = getattr(self, "_finalizer", None)
        if finalizer is not None:
            finalizer()

    @property
    def worker_pids(self) -> list[int]:
        """Process ids of the workers (empty before :meth:`initialize`)."""
        pool = getattr(self, "pool", None)
        return [] if pool is None else [p.pid for p in pool.procs if not pool.closed]


def _set_parent_death_signal() -> bool:
    """Have Linux SIGKILL this process when the thread that forked it exits; False if unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def _watch_parent(parent_pid: int) -> None:
    """Exit the process once ``parent_pid`` is no longer its parent, even while the main thread is
    inside an env call (a daemon thread; the fallback where the death signal is unavailable)."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(WORKER_POLL_S)
        os._exit(1)

    threading.Thread(target=watch, name="sampler-parent-watchdog", daemon=True).start()


def _worker_entry(token: int) -> None:
    sampler, spec, parent_pid, death_signal = _FORK_ARGS.pop(token)
    _FORK_ARGS.clear()
    if not (death_signal and _set_parent_death_signal()):
        _watch_parent(parent_pid)
    if os.getppid() != parent_pid:
        os._exit(1)  # the parent died before the death signal was armed
    worker_main(sampler, spec, parent_pid)


def worker_main(sampler: ParallelSamplerBase, spec: WorkerSpec, parent_pid: int) -> None:
    """Body of a worker process: build envs, report ready, serve commands until ``QUIT``.

    An exception is reported to the main process (type, message, traceback and the env call it
    came from) before the envs are closed, so a failing ``close()`` cannot hide it.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sync = sampler._sync
    worker = _Worker(sampler, spec, parent_pid)
    failed = False
    try:
        worker.start(sampler)
        sync.queue.put(("ready", spec.index, None))
        worker.run()
    except (_ParentGone, _Quit):
        sync.queue.cancel_join_thread()
    except BaseException as e:  # noqa: BLE001 - every failure must reach the main process
        sync.busy_since[spec.index] = 0.0
        sync.queue.put(("error", spec.index, _error_report(e, worker.active)))
        failed = True
    finally:
        worker.close_envs()
    if failed:
        raise SystemExit(1)


def _error_report(e: BaseException, active: tuple[bool, int, int] | None) -> tuple[Any, ...]:
    """What the main process needs to raise ``e`` again: ``(qualified type name, pickled type or
    None, message, traceback text, (evaluation, env, call) or None)``."""
    cls = type(e)
    try:
        message = str(e)
    except Exception:  # noqa: BLE001 - a broken __str__ must not lose the report
        message = f"<{cls.__name__} whose str() failed>"
    tb = "".join(traceback.format_exception(e))
    return f"{cls.__module__}.{cls.__qualname__}", pickled_type(e), message, tb, active


class _WatchedEnv:
    """One of a worker's envs as its collectors see it: ``step()`` and ``reset()`` are stamped
    in shared memory (for ``step_timeout``) and remembered (to name the env in an error); every
    other attribute is the env's. Everything a stamp writes is computed here once: ``step()``
    runs for every env step."""

    def __init__(self, worker: _Worker, index: int, evaluation: bool, env: Any) -> None:
        self.worker = worker
        self.where = (evaluation, index)
        self.env = env
        self._env_step, self._env_reset = env.step, env.reset
        self._w = worker.spec.index
        self._since, self._what = worker.sync.busy_since, worker.sync.busy_what
        self._step = ((evaluation, index, STEP), 8 * index + 2 * STEP + evaluation)
        self._reset = ((evaluation, index, RESET), 8 * index + 2 * RESET + evaluation)

    def step(self, action: Any) -> Any:
        worker, w = self.worker, self._w
        worker.active, self._what[w] = self._step
        self._since[w] = _monotonic()
        result = self._env_step(action)
        self._since[w] = 0.0
        worker.active = None
        return result

    def reset(self) -> Any:
        worker, w = self.worker, self._w
        worker.active, self._what[w] = self._reset
        self._since[w] = _monotonic()
        result = self._env_reset()
        self._since[w] = 0.0
        worker.active = None
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)


class _Worker:
    """A worker's envs, collectors and command loop."""

    def __init__(self, sampler: ParallelSamplerBase, spec: WorkerSpec, parent_pid: int) -> None:
        self.spec = spec
        self.sync = sampler._sync
        self.parent_pid = parent_pid
        #: ``(evaluation, env, call)`` of the env call in progress; left set when the call raised.
        self.active: tuple[bool, int, int] | None = None
        self.built: list[_WatchedEnv] = []

    def build_env(self, sampler: ParallelSamplerBase, index: int, evaluation: bool) -> _WatchedEnv:
        """Training (or eval) env ``index`` of this rank; construction is not timed."""
        self.active = (evaluation, index, CONSTRUCTION)
        env = _WatchedEnv(self, index, evaluation, sampler.make_env(index, evaluation=evaluation))
        self.active = None
        self.built.append(env)
        return env

    def close_envs(self) -> None:
        """Close every env built so far (best effort: the worker is exiting)."""
        for env in self.built:
            try:
                env.close()
            except Exception:  # noqa: BLE001 - a failing close must not mask the exit
                pass

    def start(self, sampler: ParallelSamplerBase) -> None:
        """Seed, build the envs and collectors, reset the envs and set up the agent copy."""
        spec = self.spec
        if spec.cpu is not None:
            os.sched_setaffinity(0, {spec.cpu})
        torch.set_num_threads(1)
        np.random.seed(spec.seed % 2**32)
        random.seed(spec.seed)
        torch.manual_seed(spec.seed)
        s = sampler
        self.T = s.batch_spec.T
        self.bootstrap = s.bootstrap_value
        self.eval_max_steps = s.eval_max_steps
        self.eval_max_trajectories = s.eval_max_trajectories
        sl, esl = spec.env_slice, spec.eval_slice
        envs = [self.build_env(s, b, evaluation=False) for b in range(sl.start, sl.stop)]
        self.step_buffer = s.step_buffer[sl]
        assert s.samples is not None
        self.samples = slice_samples(s.samples, sl)
        self.collector = make_collector(s.collector, envs, self.step_buffer, self.samples, s.traj_info_factory)
        self.collector.start_envs(s.max_decorrelation_steps, [s.decorrelation_rng(b) for b in range(sl.start, sl.stop)])
        eval_envs = [self.build_env(s, i, evaluation=True) for i in range(esl.start, esl.stop)]
        self.eval_collector = None
        if s.eval_step_buffer is not None:
            self.eval_collector = EvalCollector(eval_envs, s.eval_step_buffer[esl], s.traj_info_factory)
        self.agent = s.agent if spec.acts else None
        if self.agent is not None:
            agent = self.agent
            if agent.shared_model is not None and agent.model is not agent.shared_model:
                # The main process trains a private (e.g. GPU) copy; act with the shared CPU one.
                agent.model = agent.shared_model
            if hasattr(agent, "collector_initialize"):
                ranks = [s.env_ranks[b] for b in range(sl.start, sl.stop)]
                agent.collector_initialize(global_B=s.global_B, env_ranks=ranks)
            agent.reset()

    def run(self) -> None:
        sync, w = self.sync, self.spec.index
        while True:
            self._wait(sync.go[w])
            command, itr = sync.command.value, sync.itr.value
            if command == QUIT:
                return
            if command == COLLECT:
                trajs = self._collect(itr) if self.agent is not None else self._collect_served()
                sync.queue.put(("batch", w, trajs))
            elif command == EVALUATE:
                if self.agent is not None:
                    self._evaluate(itr)
                else:
                    self._evaluate_served()
                sync.queue.put(("eval_done", w, None))
            elif command == SAVE_STATE:
                # As bytes: the queue's pickler would pass tensors as shared-memory handles that the
                # main process can open only while this worker lives.
                sync.queue.put(("state", w, state_to_bytes(worker_state(self))))
            elif command == LOAD_STATE:
                load_worker_state(self, state_from_bytes(sync.inbox[w].get()))
                sync.queue.put(("loaded", w, None))

    def _wait(self, sem: Any) -> None:
        while not sem.acquire(timeout=WORKER_POLL_S):
            if os.getppid() != self.parent_pid:
                raise _ParentGone

    def _wait_act(self) -> None:
        self._wait(self.sync.act_ready[self.spec.index])
        if self.sync.command.value == QUIT:
            raise _Quit

    def _collect(self, itr: int) -> list[Any]:
        flags = self.sync.collect_flags.value
        assert self.agent is not None  # only acting workers collect with their own agent
        self.agent.eval_deterministic = bool(flags & DETERMINISTIC_FLAG)
        set_agent_mode(self.agent, itr, "eval" if flags & EVAL_MODE_FLAG else "sample")
        if flags & RESET_ENVS_FLAG:
            self.collector.start_envs()
            self.agent.reset()
        return collect_batch(self.agent, self.collector, self.step_buffer, self.samples, self.bootstrap)

    def _collect_served(self) -> list[Any]:
        obs_ready = self.sync.obs_ready[self.spec.index]
        if self.sync.collect_flags.value & RESET_ENVS_FLAG:
            self.collector.start_envs()
        self.collector.begin_batch()
        obs_ready.release()
        completed: list[Any] = []
        for t in range(self.T):
            self._wait_act()
            completed.extend(self.collector.step_envs(t))
            obs_ready.release()
        return completed

    def _evaluate(self, itr: int) -> None:
        agent, sync, w = self.agent, self.sync, self.spec.index
        assert agent is not None and self.eval_collector is not None
        agent.eval_deterministic = bool(sync.collect_flags.value & DETERMINISTIC_FLAG)
        agent.eval_mode(itr)
        agent.reset()
        evaluate_envs(
            agent,
            self.eval_collector,
            self.eval_max_steps,
            None,
            on_trajectory=lambda traj: sync.queue.put(("traj", w, traj)),
            should_stop=lambda: bool(sync.stop_eval.value),
        )

    def _evaluate_served(self) -> None:
        sync, w = self.sync, self.spec.index
        obs_ready = sync.obs_ready[w]
        collector = self.eval_collector
        assert collector is not None
        collector.start_envs()
        obs_ready.release()
        steps = range(self.eval_max_steps) if self.eval_max_steps is not None else itertools.count()
        for _ in steps:
            self._wait_act()
            if sync.stop_eval.value:
                return
            for traj in collector.step_envs():
                sync.queue.put(("traj", w, traj))
            obs_ready.release()
