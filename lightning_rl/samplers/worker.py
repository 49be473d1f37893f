"""Worker processes of the parallel samplers and their supervision (rlpyt sections 6.2, 6.3).

Workers are forked (``multiprocessing.get_context("fork")``), so they inherit the sampler
object: the shared-memory sample and step buffers, the shared-memory agent and the
synchronization objects. Each worker builds its own slice of envs (seeded by global env index)
inside the child, then waits for commands.

Protocol (main process <-> worker ``w``):

* ``go[w]``: the main process released a command (``COLLECT``, ``EVALUATE`` or ``QUIT``) whose
  code and iteration are in shared values.
* Acting workers (CPU sampler) run the whole batch themselves and report on the queue.
* Serving workers (GPU and alternating samplers) release ``obs_ready[w]`` whenever their
  observations are in the step buffer and wait on ``act_ready[w]`` for the actions.
* Everything a worker reports (ready, finished batch with its TrajInfos, eval episodes, errors)
  goes through one ``multiprocessing.Queue``; nothing large crosses it.

The main process never blocks without a timeout: every wait polls the workers' exit codes and
the queue, so a worker that raises or dies turns into a ``RuntimeError`` naming it within a
fraction of a second. Workers ignore SIGINT (Ctrl-C is the main process's business) and exit by
themselves when their parent disappears.
"""

from __future__ import annotations

import dataclasses
import itertools
import multiprocessing as mp
import os
import queue as queue_module
import random
import signal
import time
import traceback
import weakref
from typing import Any, Literal, NamedTuple

import numpy as np
import torch

from lightning_rl.samplers.base import BaseSampler, Samples, cpu_count, set_agent_mode, slice_samples, split_slices
from lightning_rl.samplers.collectors import (
    EvalCollector,
    act,
    act_eval,
    bootstrap_value,
    collect_batch,
    evaluate_envs,
    reset_agent_envs,
)
from lightning_rl.samplers.serial import make_collector

__all__ = ["ParallelSamplerBase", "WorkerPool", "WorkerSpec"]

QUIT, COLLECT, EVALUATE = 0, 1, 2
#: Bits of ``_Sync.collect_flags`` for a ``COLLECT`` command (see ``obtain_samples``); the last
#: one carries the main process's ``agent.eval_deterministic`` to the workers' agent copies.
EVAL_MODE_FLAG, RESET_ENVS_FLAG, DETERMINISTIC_FLAG = 1, 2, 4
#: Seconds between liveness checks while the main process waits on workers.
MAIN_POLL_S = 0.2
#: Seconds between checks of the parent's life while a worker waits.
WORKER_POLL_S = 1.0

# Arguments of workers being forked, keyed by a token: the child reads them from its copy of
# this dict, so no Process object keeps a reference to the sampler (which would keep it alive).
_FORK_ARGS: dict[int, tuple[Any, Any]] = {}
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
    """

    def __init__(self, procs: list[Any], specs: list[WorkerSpec], sync: _Sync) -> None:
        self.procs = procs
        self.specs = specs
        self.sync = sync
        self.owner_pid = os.getpid()
        self.closed = False
        self._pending: list[tuple[str, int, Any]] = []

    def command(self, command: int, itr: int = 0) -> None:
        """Release one command to every worker."""
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
        if self._pending:
            return self._pending.pop(0)
        while True:
            try:
                msg = self.sync.queue.get(timeout=MAIN_POLL_S)
            except queue_module.Empty:
                self.check()
                continue
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
        """Raise ``RuntimeError`` if a worker reported an error or is no longer running."""
        self._pending.extend(self.poll())
        dead = [w for w, p in enumerate(self.procs) if p.exitcode is not None]
        if not dead:
            return
        # A worker that raised has reported it before exiting; give the report a moment to arrive.
        try:
            msg = self.sync.queue.get(timeout=0.5)
            if msg[0] == "error":
                self._raise_error(msg)
            self._pending.append(msg)
        except queue_module.Empty:
            pass
        w = dead[0]
        pid, code = self.procs[w].pid, self.procs[w].exitcode
        how = f"exit code {code}"
        if code < 0:
            try:
                how += f" (killed by {signal.Signals(-code).name})"
            except ValueError:
                pass
        self.shutdown()
        raise RuntimeError(f"sampler worker {w} ({self.specs[w].name}, pid {pid}) died unexpectedly with {how}")

    def _raise_error(self, msg: tuple[str, int, Any]) -> None:
        _, w, (exc_type, exc_msg, tb) = msg
        pid = self.procs[w].pid
        self.shutdown()
        raise RuntimeError(
            f"sampler worker {w} ({self.specs[w].name}, pid {pid}) failed with {exc_type}: {exc_msg}\n\n"
            f"Worker traceback:\n{tb}"
        )

    def shutdown(self, timeout: float = 1.0) -> None:
        """Ask the workers to quit, then terminate those that do not within ``timeout`` seconds."""
        if self.closed or os.getpid() != self.owner_pid:
            return
        self.closed = True
        sync = self.sync
        sync.command.value = QUIT
        for w in range(len(self.procs)):
            sync.go[w].release()
            sync.act_ready[w].release()
        deadline = time.monotonic() + timeout
        for p in self.procs:
            p.join(max(0.0, deadline - time.monotonic()))
        for p in self.procs:
            if p.is_alive():
                p.terminate()
                p.join(timeout)
            if p.is_alive():
                p.kill()
                p.join()
        for p in self.procs:
            p.close()
        sync.queue.close()
        sync.queue.join_thread()


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
    """

    share_memory = True
    #: Workers act with their copy of the agent (CPU sampler); else the main process serves actions.
    workers_act = True
    #: With two groups: may both groups' envs step at the same time.
    overlap = True

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
        self.pool = WorkerPool(procs, specs, self._sync)
        self._finalizer = weakref.finalize(self, self.pool.shutdown)
        for spec in specs:
            token = next(_fork_tokens)
            _FORK_ARGS[token] = (self, spec)
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




def _worker_entry(token: int) -> None:
    sampler, spec = _FORK_ARGS.pop(token)
    _FORK_ARGS.clear()
    worker_main(sampler, spec)


def worker_main(sampler: ParallelSamplerBase, spec: WorkerSpec) -> None:
    """Body of a worker process: build envs, report ready, serve commands until ``QUIT``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sync = sampler._sync
    try:
        worker = _Worker(sampler, spec, os.getppid())
        sync.queue.put(("ready", spec.index, None))
        worker.run()
    except (_ParentGone, _Quit):
        sync.queue.cancel_join_thread()
    except BaseException as e:  # noqa: BLE001 - every failure must reach the main process
        sync.queue.put(("error", spec.index, (type(e).__name__, str(e), "".join(traceback.format_exception(e)))))
        raise SystemExit(1) from None


class _Worker:
    """A worker's envs, collectors and command loop."""

    def __init__(self, sampler: ParallelSamplerBase, spec: WorkerSpec, parent_pid: int) -> None:
        self.spec = spec
        self.sync = sampler._sync
        self.parent_pid = parent_pid
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
        envs = [s.make_env(b) for b in range(sl.start, sl.stop)]
        self.step_buffer = s.step_buffer[sl]
        assert s.samples is not None
        self.samples = slice_samples(s.samples, sl)
        self.collector = make_collector(s.collector, envs, self.step_buffer, self.samples, s.traj_info_factory)
        self.collector.start_envs(s.max_decorrelation_steps, [s.decorrelation_rng(b) for b in range(sl.start, sl.stop)])
        eval_envs = [s.make_env(i, evaluation=True) for i in range(esl.start, esl.stop)]
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
        try:
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
        finally:
            for c in (self.collector, self.eval_collector):
                if c is not None:
                    for env in c.envs:
                        env.close()

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
