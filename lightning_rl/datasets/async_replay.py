"""Asynchronous off-policy sampling (rlpyt's ``AsyncRl``; docs/guides/samplers.md, 'Asynchronous sampling').

Processes: the training process keeps Lightning, the agent being trained, the replay's reader and
an (idle) copy of the sampler for evaluation; one forked **sampler process** builds its own
sampler from the module's sampler arguments (serial, CPU, GPU or alternating: a parallel sampler
forks its workers from the sampler process) and acts with a private copy of the agent.

Shared memory (all allocated before the fork, nothing large crosses a pipe):

* the replay (``ReplayBuffer(shared=True)``): the sampler process appends under the replay's
  :class:`~lightning_rl.replays.shared.RWLock` as the writer, ``training_step``'s batches are
  drawn under it as a reader;
* :class:`SharedParameters`: a copy of the acting model's ``state_dict`` and its version (the
  trainer's update count when published), under a lock; the sampler process loads it before a
  batch whenever the version changed, so a batch is collected with one set of weights;
* counters: batches appended, env steps, the trainer's update count (written through by
  :class:`SharedTrainState` at every update), the version the sampler acts with, waiting times
  and the measured replay ratio;
* the run lock: held by the sampler process while it collects one batch and while it appends it, and by the
  training process while the sampler is paused (from creation until the first item, and from a
  checkpoint's ``on_save_checkpoint`` until the next item), so a checkpoint sees a replay and
  counters that no batch is half-way through.

Replay ratio: the trainer owes ``u(n) = updates_per_iteration * (n - n0 + 1)``
updates once ``n`` batches are appended (``n0``: the first batch at or past
``min_steps_learn``), the same schedule as synchronous mode. The trainer waits until batch ``n``
is appended before its updates; the sampler *appends* batch ``n + 1`` only once the trainer has
done ``u(n) - LOOKAHEAD * updates_per_iteration`` updates. When batch ``n`` is appended the
trainer's count is therefore within ``LOOKAHEAD`` batches' updates (plus one for rounding) of
``u(n - 1)``, so over any ``RATIO_WINDOW`` batches the measured ratio is within
``LOOKAHEAD / RATIO_WINDOW`` (7.5 %) of the configured one, plus one update at either end,
whichever side is faster.

Overlap: the sampler *collects* batch ``n + 1`` ahead of that, timed to be ready when the trainer
needs it (after ``u(n)`` updates): it starts once the trainer is within ``lead`` updates of
``u(n)``, ``lead`` being what the trainer does in one batch's sampling time (both measured as they
go; ``LEAD_MARGIN`` over it) and at most two batches' updates. A slower sampler therefore never
idles, and a faster one acts with weights as fresh as the trainer's pace allows. Each side sleeps
on a semaphore that the other side releases when the awaited count is reached (a
:class:`_Doorbell`), so a hand-over costs no polling delay.

Faults: the sampler process reports an exception through the queue of a
:class:`~lightning_rl.samplers.worker.WorkerPool` of one process, which raises it in the
training process as its own type and a :class:`~lightning_rl.samplers.errors.SamplerWorkerError`;
a process that dies raises :class:`~lightning_rl.samplers.errors.SamplerWorkerDied`. Every wait
in the training process (for a batch, for a pause, for the replay's or the parameters' lock)
checks the process every ``MAIN_POLL_S`` seconds, and a batch or pause that takes longer than
``WAIT_TIMEOUT_S`` raises :class:`~lightning_rl.samplers.errors.SamplerStepTimeout`. The sampler
process ignores SIGINT and ends with its parent (``PR_SET_PDEATHSIG``, else a watchdog).
"""

from __future__ import annotations

import collections
import copy
import functools
import itertools
import math
import multiprocessing as mp
import os
import signal
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from lightning_rl.agents.base import BaseAgent
from lightning_rl.data.buffers import np_mp_array
from lightning_rl.datasets.replay import ReplayRatioDataset, stack_batches
from lightning_rl.datasets.state import TrainState
from lightning_rl.samplers.base import check_finite_samples
from lightning_rl.samplers.errors import SamplerClosedError, SamplerStepTimeout, describe
from lightning_rl.samplers.worker import (
    MAIN_POLL_S,
    QUIT,
    WorkerPool,
    WorkerSpec,
    _error_report,
    _set_parent_death_signal,
    _Sync,
    _watch_parent,
)

__all__ = ["AsyncReplayDataset", "AsyncSampling", "SharedParameters", "SharedTrainState"]

#: How far (in batches' worth of updates) the sampler may run ahead of the trainer: below 1 so
#: that the ratio bound keeps a margin inside +-10 % over ``RATIO_WINDOW`` batches.
LOOKAHEAD = 0.75
#: Sampler batches per window of the measured replay ratio.
RATIO_WINDOW = 10
#: Longest sleep of a waiting side between looks at the other's counters: the other side wakes it
#: earlier through a :class:`_Doorbell`; this bounds the rare wake-up that races its check.
LOOK_S = 0.008
#: Factor on the measured lead (trainer updates per sampling time) at which the sampler starts the
#: next batch: jitter in either side's pace then costs the trainer no wait.
LEAD_MARGIN = 1.5
#: Seconds the training process waits for one sampler batch or for a pause before giving up.
WAIT_TIMEOUT_S = 300.0

_FORK_ARGS: dict[int, tuple[AsyncSampling, int, bool]] = {}
_fork_tokens = itertools.count()


class _Doorbell:
    """Wakes a process waiting for a shared counter to reach a value, from the process that writes it.

    The waiter names the value (``wake_at``), looks at the counter, then sleeps on the semaphore; the
    writer, after each write, releases the semaphore once the named value is reached. A wake-up
    that races the waiter's look is caught by the sleep's timeout; a stale release only makes the
    next sleep return early, after which the waiter looks again.
    """

    NEVER = 2**62

    def __init__(self, ctx: Any) -> None:
        self.wake_at = mp.RawValue("q", self.NEVER)
        self.semaphore = ctx.Semaphore(0)

    def reached(self, value: int) -> None:
        """Writer side: the counter is now ``value``."""
        if value >= self.wake_at.value:
            self.wake_at.value = self.NEVER
            self.semaphore.release()

    def wait(self, counter: Any, target: float, timeout: float) -> bool:
        """Waiter side: sleep until ``counter.value >= target`` (rung) or ``timeout``; return whether it is."""
        self.wake_at.value = math.ceil(target)
        if counter.value < target:
            self.semaphore.acquire(timeout=timeout)
        self.wake_at.value = self.NEVER
        return counter.value >= target


class SharedTrainState(TrainState):
    """A :class:`~lightning_rl.datasets.state.TrainState` whose ``updates`` live in shared memory,
    so the sampler process sees every update as it happens (the trainer's side of the throttle).

    Args:
        updates_cell: A ``multiprocessing`` int64 value holding ``updates``.
        bell: Rung at every update, for a sampler process waiting on the count (None: no one waits).
    """

    def __init__(self, updates_cell: Any, bell: _Doorbell | None = None) -> None:
        self._updates_cell = updates_cell
        self._bell = bell
        super().__init__()

    @property
    def updates(self) -> int:
        return int(self._updates_cell.value)

    @updates.setter
    def updates(self, value: int) -> None:
        self._updates_cell.value = int(value)
        if self._bell is not None:
            self._bell.reached(int(value))


class SharedParameters:
    """The acting model's ``state_dict`` in shared memory, versioned and locked.

    Args:
        model: The model whose tensors to mirror (shapes and dtypes; any device).

    Attributes:
        on_wait: Called every ``MAIN_POLL_S`` seconds while this process waits for the lock (it
            raises to give up); None waits without limit.
    """

    def __init__(self, model: nn.Module) -> None:
        state = model.state_dict()
        self.names = list(state)
        arrays = [np_mp_array(tuple(t.shape), torch.empty(0, dtype=t.dtype).numpy().dtype) for t in state.values()]
        self.tensors = [torch.from_numpy(a) for a in arrays]
        self.version = mp.RawValue("q", -1)
        self.lock = mp.get_context("fork").Lock()
        self.on_wait: Callable[[], None] | None = None

    def _acquire(self) -> None:
        while not self.lock.acquire(timeout=MAIN_POLL_S):
            if self.on_wait is not None:
                self.on_wait()

    @torch.no_grad()
    def publish(self, model: nn.Module, version: int) -> None:
        """Copy ``model``'s tensors in and mark them as ``version`` (the trainer's update count)."""
        sources = list(model.state_dict().values())
        self._acquire()
        try:
            for dst, src in zip(self.tensors, sources, strict=True):
                dst.copy_(src.detach())
            self.version.value = int(version)
        finally:
            self.lock.release()

    @torch.no_grad()
    def pull(self, model: nn.Module, have: int) -> int:
        """Load the published tensors into ``model`` unless it has version ``have`` already.

        Returns:
            The version ``model`` has now.
        """
        if self.version.value == have:
            return have
        self._acquire()
        try:
            version = int(self.version.value)
            model.load_state_dict(dict(zip(self.names, self.tensors, strict=True)))
        finally:
            self.lock.release()
        return version


class _Counters:
    """Values in shared memory that both processes read (see the module docstring)."""

    def __init__(self) -> None:
        self.appended = mp.RawValue("q", 0)
        self.env_steps = mp.RawValue("q", 0)
        self.updates = mp.RawValue("q", 0)
        self.acting_version = mp.RawValue("q", -1)
        self.updates_per_batch = mp.RawValue("d", 0.0)
        self.learn_start = mp.RawValue("q", 1)
        self.sampler_wait_s = mp.RawValue("d", 0.0)
        self.sampler_time_s = mp.RawValue("d", 0.0)
        self.ratio_last = mp.RawValue("d", math.nan)
        self.ratio_min = mp.RawValue("d", math.inf)
        self.ratio_max = mp.RawValue("d", -math.inf)
        self.ratio_windows = mp.RawValue("q", 0)
        #: The trainer's seconds per update while it is not waiting (EMA; NaN until measured).
        self.train_s_per_update = mp.RawValue("d", math.nan)


class _Quit(Exception):
    """The training process asked the sampler process to stop."""


class _ParentGone(Exception):
    """The training process is gone."""


class AsyncSampling:
    """The sampler process and everything it shares with the training process.

    Build it in the training process after the module's sampler is initialized and the shared
    replay allocated, then :meth:`start`; the sampler stays paused until the dataset's first item.

    Args:
        sampler: An *uninitialized* copy of the module's sampler (the sampler process initializes
            it, so a parallel sampler's workers are that process's children); its eval envs are
            not built.
        agent: The module's agent, initialized, on CPU (the sampler process acts with a copy).
        replay: The shared-memory replay (``ReplayBuffer(shared=True)``).
        samples_to_buffer: What the replay stores of a sampler batch (the module's method).
        seed: Base seed of the envs (as for the synchronous sampler: env ``b`` gets the same seed).
        rank: DDP rank.
        world_size: DDP world size.
        replay_ratio: The configured replay ratio (for the logged measured ratio).

    Raises:
        ValueError: If the replay is not in shared memory.
    """

    def __init__(
        self,
        sampler: Any,
        agent: BaseAgent,
        replay: Any,
        samples_to_buffer: Callable[[Any], Any],
        *,
        seed: int,
        rank: int,
        world_size: int,
        replay_ratio: float,
    ) -> None:
        if getattr(replay, "lock", None) is None:
            raise ValueError("replay: async sampling needs a replay built with shared=True")
        if sampler.initialized:
            raise ValueError("sampler: pass an uninitialized copy; the sampler process initializes it")
        assert agent.model is not None  # the module's sampler initialized it
        self.sampler = sampler
        self.sampler.eval_n_envs = 0
        self.agent = agent
        self.replay = replay
        self.samples_to_buffer = samples_to_buffer
        self.seed, self.rank, self.world_size = seed, rank, world_size
        self.replay_ratio = float(replay_ratio)
        self.batch_size_steps = sampler.batch_spec.size
        self.counters = _Counters()
        self.params = SharedParameters(agent.model)
        ctx = mp.get_context("fork")
        self.run_lock = ctx.Lock()
        self.run_lock.acquire()
        self.paused = True
        self._sync = _Sync(ctx, 1)
        self.update_bell = _Doorbell(ctx)  # trainer -> sampler: the update count reached a value
        self.batch_bell = _Doorbell(ctx)  # sampler -> trainer: a batch was appended
        self.pool: WorkerPool | None = None
        self.trainer_wait_s = 0.0
        self.name = f"{type(sampler).__name__}-async"

    # ----- training process -------------------------------------------------------------------

    def start(self) -> None:
        """Fork the sampler process and wait until its sampler is built (it stays paused)."""
        ctx = mp.get_context("fork")
        token = next(_fork_tokens)
        death_signal = threading.current_thread() is threading.main_thread()
        _FORK_ARGS[token] = (self, os.getpid(), death_signal)
        try:
            proc = ctx.Process(target=_entry, args=(token,), name=self.name, daemon=True)
            proc.start()
        finally:
            del _FORK_ARGS[token]
        spec = WorkerSpec(
            index=0, name=self.name, env_slice=slice(0, self.sampler.batch_spec.B), eval_slice=slice(0, 0),
            acts=True, seed=self.seed, cpu=None,
        )
        self.pool = WorkerPool([proc], [spec], self._sync)
        self._pid = proc.pid
        self.pool.last_command = "start"
        self._finalizer = weakref.finalize(self, self.pool.shutdown, 3.0, "the async sampler was garbage collected")
        self.replay.lock.on_wait = self.check
        self.params.on_wait = self.check
        self.pool.gather("ready")
        self.pool.last_command = "sampling"

    @property
    def pid(self) -> int | None:
        """The sampler process's id (None before :meth:`start`; kept after it stopped)."""
        return getattr(self, "_pid", None)

    @property
    def closed(self) -> bool:
        """Whether the sampler process has been stopped (by :meth:`shutdown` or a failure)."""
        return self.pool is not None and self.pool.closed

    def check(self) -> None:
        """Raise if the sampler process reported an error, died, or is shut down.

        Raises:
            SamplerWorkerDied: The process ended without reporting (e.g. SIGKILL).
            SamplerClosedError: It was shut down before.
            Exception: The process's own exception, of its type and a ``SamplerWorkerError``.
        """
        if self.pool is None:
            raise SamplerClosedError("the async sampler process was never started")
        if self.pool.closed:
            raise SamplerClosedError(f"the async sampler process is stopped ({self.pool.close_reason})")
        self.pool.check()

    def take_traj_infos(self) -> list[Any]:
        """Episodes the sampler process has completed since the last call (checks it too)."""
        self.check()
        assert self.pool is not None
        messages, self.pool._pending = self.pool._pending, []
        out: list[Any] = []
        for kind, _, payload in messages:
            if kind == "trajs":
                out.extend(payload)
        return out

    def set_schedule(self, updates_per_batch: float, min_steps_learn: int) -> None:
        """Tell the sampler process the trainer's schedule (updates per batch from the first
        batch at or past ``min_steps_learn``)."""
        self.counters.updates_per_batch.value = float(updates_per_batch)
        self.counters.learn_start.value = max(1, -(-int(min_steps_learn) // self.batch_size_steps))

    def report_train_speed(self, seconds_per_update: float) -> None:
        """The trainer's measured seconds per update while busy (folded into a moving average): the
        sampler times its next batch by it."""
        cell = self.counters.train_s_per_update
        cell.value = seconds_per_update if math.isnan(cell.value) else 0.7 * cell.value + 0.3 * seconds_per_update

    def resume(self, model: nn.Module, version: int) -> None:
        """Publish ``model`` as ``version`` and let the sampler run (no-op while running)."""
        if not self.paused:
            return
        self.check()
        self.params.publish(model, version)
        self.run_lock.release()
        self.paused = False

    def pause(self) -> None:
        """Stop the sampler between two batches (waits for the batch in progress).

        Raises:
            SamplerStepTimeout: If the batch in progress takes longer than ``WAIT_TIMEOUT_S``.
        """
        if self.paused or self.closed:
            return
        deadline = time.monotonic() + WAIT_TIMEOUT_S
        while not self.run_lock.acquire(timeout=MAIN_POLL_S):
            self.check()
            if time.monotonic() > deadline:
                self._timeout("pause (the batch in progress did not end)")
        self.paused = True

    def wait_for_batch(self, n: int) -> float:
        """Wait until ``n`` batches are in the replay; return the seconds waited.

        Raises:
            SamplerStepTimeout: If no new batch arrives within ``WAIT_TIMEOUT_S``.
        """
        appended = self.counters.appended
        if appended.value >= n:
            return 0.0
        t0 = time.monotonic()
        next_check = t0 + MAIN_POLL_S
        last, last_t = appended.value, t0
        while not self.batch_bell.wait(appended, n, LOOK_S):
            now = time.monotonic()
            if now >= next_check:
                self.check()
                next_check = now + MAIN_POLL_S
                if appended.value != last:
                    last, last_t = appended.value, now
                elif now - last_t > WAIT_TIMEOUT_S:
                    self._timeout(f"batch {n}")
        waited = time.monotonic() - t0
        self.trainer_wait_s += waited
        return waited

    def _timeout(self, what: str) -> None:
        assert self.pool is not None
        pid = self.pid
        self.shutdown(reason=f"{what} took longer than {WAIT_TIMEOUT_S} s")
        message = (
            f"async sampler process ({self.name}, pid {pid}): {what} took longer than {WAIT_TIMEOUT_S} s; "
            "the process was stopped"
        )
        raise describe(
            SamplerStepTimeout(message), timeout=WAIT_TIMEOUT_S, worker=0, pid=pid, worker_name=self.name,
            last_command=what,
        )

    def shutdown(self, reason: str = "shutdown() was called") -> None:
        """Stop the sampler process (and its workers); idempotent."""
        if self.pool is None or self.pool.closed:
            return
        self.pool.shutdown(timeout=3.0, reason=reason)
        self.replay.lock.on_wait = self._gone
        self.params.on_wait = self._gone

    def _gone(self) -> None:
        raise SamplerClosedError(
            f"the async sampler process is stopped ({self.pool.close_reason if self.pool else 'never started'}) "
            "and left the replay's or the parameters' lock held: it died while writing"
        )

    def state_dict(self) -> dict[str, Any]:
        """The sampler's counters (take it while paused): batches appended and env steps."""
        c = self.counters
        return {"sampler_itr": int(c.appended.value), "sampler_env_steps": int(c.env_steps.value)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` (while paused, before the first item)."""
        self.counters.appended.value = int(state["sampler_itr"])
        self.counters.env_steps.value = int(state["sampler_env_steps"])

    def metrics(self, updates: int) -> dict[str, float]:
        """What is logged per iteration (``async/...``): the measured replay ratio over the last
        ``RATIO_WINDOW`` batches and its extremes so far, each side's waiting time (seconds,
        cumulative), the policy lag in updates and the sampler's env steps."""
        c = self.counters
        ratio = self.replay_ratio
        out = {
            "async/replay_ratio": ratio * c.ratio_last.value,
            "async/sampler_wait_s": c.sampler_wait_s.value,
            "async/trainer_wait_s": self.trainer_wait_s,
            "async/policy_lag_updates": float(updates - c.acting_version.value),
            "async/sampler_env_steps": float(c.env_steps.value),
        }
        if c.ratio_windows.value:
            out["async/replay_ratio_min"] = ratio * c.ratio_min.value
            out["async/replay_ratio_max"] = ratio * c.ratio_max.value
        return out

    # ----- sampler process --------------------------------------------------------------------

    def _child_check(self) -> None:
        if self._sync.command.value == QUIT:
            raise _Quit
        if os.getppid() != self._parent_pid:
            raise _ParentGone

    def _child_main(self, parent_pid: int) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        torch.set_num_threads(1)
        # Daemonic (so the training process never waits for it at exit), yet a parallel sampler
        # must fork its workers from here: they end with this process (death signal, watchdog).
        mp.current_process()._config["daemon"] = False  # type: ignore[attr-defined]
        self._parent_pid = parent_pid
        self.replay.lock.on_wait = self._child_check
        self.params.on_wait = self._child_check
        sync, sampler, failed = self._sync, None, False
        try:
            agent = _private_agent(self.agent)
            sampler = self.sampler
            sampler.initialize(agent, seed=self.seed, rank=self.rank, world_size=self.world_size)
            sync.queue.put(("ready", 0, None))
            self._child_loop(sampler, agent)
        except (_Quit, _ParentGone):
            sync.queue.cancel_join_thread()
        except BaseException as e:  # noqa: BLE001 - every failure must reach the training process
            sync.queue.put(("error", 0, _error_report(e, None)))
            failed = True
        finally:
            if sampler is not None:
                try:
                    sampler.shutdown()
                except Exception:  # noqa: BLE001 - the process is exiting; the first error matters
                    pass
        if failed:
            raise SystemExit(1)

    def _owed(self) -> float:
        """Updates the trainer owes for the batches appended so far (``u(n)``; 0 before learning)."""
        c = self.counters
        return c.updates_per_batch.value * max(0, c.appended.value - c.learn_start.value + 1)

    def _append_target(self) -> float:
        """Updates done before the next batch may be appended: the ratio throttle."""
        return self._owed() - LOOKAHEAD * self.counters.updates_per_batch.value - 1

    def _collect_target(self, sample_s: float) -> float:
        """Updates done before the next batch is started, so that it is ready when the trainer needs
        it: ``u(n)`` less the updates the trainer does while one batch is sampled (with a margin)."""
        per_batch = self.counters.updates_per_batch.value
        per_update = self.counters.train_s_per_update.value
        if math.isnan(sample_s) or not per_update > 0:  # not measured yet: as soon as it may be appended
            return self._append_target()
        return self._owed() - min(LEAD_MARGIN * sample_s / per_update + 1, 2 * per_batch)

    def _wait_updates(self, target: Callable[[], float]) -> None:
        """Sleep until the trainer's update count reaches ``target()`` (re-read after every wake-up:
        the counters may be restored while the sampler is paused); the time goes to ``sampler_wait_s``."""
        c = self.counters
        if c.updates.value >= target():
            return
        t0 = time.monotonic()
        next_check = t0 + MAIN_POLL_S
        while not self.update_bell.wait(c.updates, target(), LOOK_S):
            if time.monotonic() >= next_check:
                self._child_check()
                next_check = time.monotonic() + MAIN_POLL_S
        c.sampler_wait_s.value += time.monotonic() - t0

    def _hold_run_lock(self) -> None:
        while not self.run_lock.acquire(timeout=MAIN_POLL_S):
            self._child_check()

    def _child_loop(self, sampler: Any, agent: BaseAgent) -> None:
        c, sync = self.counters, self._sync
        window: collections.deque[int] = collections.deque(maxlen=RATIO_WINDOW + 1)
        acting = -1
        sample_s = math.nan
        while True:
            # Collect the next batch, timed to be ready when the trainer needs it.
            self._wait_updates(functools.partial(self._collect_target, sample_s))
            self._hold_run_lock()
            try:
                self._child_check()
                acting = self.params.pull(agent.model, acting)  # type: ignore[arg-type]
                c.acting_version.value = acting
                t0 = time.perf_counter()
                samples, traj_infos = sampler.obtain_samples(int(c.appended.value))
                if sampler.check_finite:
                    check_finite_samples(samples, int(c.appended.value), sampler.env_id, sampler.env_ranks,
                                         pending=sampler.step_buffer.observation)
                elapsed = time.perf_counter() - t0
            finally:
                self.run_lock.release()
            sample_s = elapsed if math.isnan(sample_s) else 0.7 * sample_s + 0.3 * elapsed
            # Append it once the replay ratio allows (the counters may be restored while paused).
            while True:
                self._wait_updates(self._append_target)
                self._hold_run_lock()
                if c.updates.value >= self._append_target():
                    break
                self.run_lock.release()
            try:
                t0 = time.perf_counter()
                self.replay.append_samples(self.samples_to_buffer(samples))
                c.sampler_time_s.value += elapsed + time.perf_counter() - t0
                c.env_steps.value += self.batch_size_steps
                updates = int(c.updates.value)
                itr = int(c.appended.value)
                c.appended.value = itr + 1
            finally:
                self.run_lock.release()
            del samples
            self.batch_bell.reached(itr + 1)
            if itr + 1 >= c.learn_start.value:
                self._record_ratio(window, updates)
            if traj_infos:
                sync.queue.put(("trajs", 0, traj_infos))

    def _record_ratio(self, window: collections.deque[int], updates: int) -> None:
        window.append(updates)
        per_batch = self.counters.updates_per_batch.value
        if len(window) <= RATIO_WINDOW or per_batch <= 0:
            return
        c = self.counters
        relative = (window[-1] - window[0]) / (per_batch * RATIO_WINDOW)
        c.ratio_last.value = relative
        c.ratio_min.value = min(c.ratio_min.value, relative)
        c.ratio_max.value = max(c.ratio_max.value, relative)
        c.ratio_windows.value += 1


def _private_agent(agent: BaseAgent) -> BaseAgent:
    """A copy of ``agent`` with its own (not shared) tensors: the sampler process must not see the
    trainer's weights change mid-batch, only through :class:`SharedParameters`."""
    copied = copy.deepcopy(agent)
    copied.share_memory_enabled = False
    object.__setattr__(copied, "shared_model", None)
    return copied


def _entry(token: int) -> None:
    controller, parent_pid, death_signal = _FORK_ARGS.pop(token)
    _FORK_ARGS.clear()
    if not (death_signal and _set_parent_death_signal()):
        _watch_parent(parent_pid)
    if os.getppid() != parent_pid:
        os._exit(1)  # the parent died before the death signal was armed
    controller._child_main(parent_pid)


class AsyncReplayDataset(ReplayRatioDataset):
    """:class:`~lightning_rl.datasets.replay.ReplayDataset`'s items, with the sampler in its own
    process: item ``n`` waits until sampler batch ``n`` is in the replay, then holds the replay
    batches the replay ratio owes for it (same schedule as synchronous mode).

    Args:
        runner: The started :class:`AsyncSampling`.
        args, kwargs: :class:`~lightning_rl.datasets.replay.ReplayRatioDataset`'s: the sampler
            (its ``batch_spec``; it collects nothing here), the agent, the shared replay, the
            module's counters (a :class:`SharedTrainState`: ``itr`` and ``env_steps`` count the
            batches the trainer has taken) and the replay-ratio schedule.
    """

    def __init__(self, runner: AsyncSampling, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.runner = runner
        self._busy: tuple[float, int] | None = None  # (time, updates) when the last wait ended

    def collect(self) -> Any:
        """Wait for the next sampler batch, then this iteration's replay batches."""
        runner, state = self.runner, self.state
        runner.set_schedule(self.updates_per_iteration, self.min_steps_learn)
        model = self.agent.model
        assert model is not None
        if runner.paused:
            runner.resume(model, state.updates)
            state.updates_at_sync = state.updates
        elif state.updates - state.updates_at_sync >= self.updates_per_sync:
            runner.params.publish(model, state.updates)
            state.updates_at_sync = state.updates
        if self._busy is not None and state.updates > self._busy[1]:
            # Seconds per update since the last wait ended: the trainer's pace when not waiting.
            runner.report_train_speed((time.perf_counter() - self._busy[0]) / (state.updates - self._busy[1]))
        with self.profiler.profile("sampler/wait"):
            state.sampler_time += runner.wait_for_batch(state.itr + 1)
        self._busy = (time.perf_counter(), state.updates)
        self.agent.train_mode(state.itr)
        state.record_rollout(self.sampler.batch_spec.size, runner.take_traj_infos())
        n_updates = state.take_owed_updates(self.updates_per_iteration, self.min_steps_learn)
        if n_updates == 0:
            return ()
        with self.profiler.profile("sampler/replay_batches"):
            return stack_batches([self.replay.sample_batch(self.batch_size) for _ in range(n_updates)])
