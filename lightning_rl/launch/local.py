"""The local launcher: a grid's variants run on this machine, N at a time, each pinned to its slot.

Each variant runs ``lightning-rl fit --config config.yaml`` in its own directory (so its run lands
in ``<variant>/runs/<group>/<date-time>/``), with stdout and stderr appended to ``stdout.log`` and
``stderr.log`` there. The launch is resumable: a variant with a ``done`` marker is skipped, one whose
run has a ``last.ckpt`` continues with ``--ckpt_path last``, any other starts afresh. A failed run
does not stop the others; the summary at the end names each failure's log. Ctrl-C or SIGTERM on
the launcher passes SIGINT to every child (a run then saves ``last.ckpt`` and exits), waits for them
and kills what is left, child process groups included, so no run outlives its launcher.
"""

from __future__ import annotations

import datetime
import fcntl
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import IO

import yaml

from lightning_rl.launch.affinity import Slot, slot_environment

__all__ = [
    "DONE", "VariantResult", "env_steps_of", "fit_command", "launch_local", "last_checkpoint", "print_summary",
    "write_done",
]

#: The marker of a finished variant (YAML: exit status, env steps, wall time).
DONE = "done"
#: How long children get to save and exit after the launcher is stopped, before they are killed.
STOP_GRACE_S = 60.0
_POLL_S = 0.2


@dataclass
class VariantResult:
    """What became of one variant in a launch.

    Attributes:
        name: The variant directory's name.
        status: ``finished``, ``skipped`` (done before), ``failed``, ``interrupted`` (the launcher was stopped)
            or ``pending`` (never started because the launcher was stopped).
        exit_status: The run's exit status (None when it did not run).
        env_steps: Env steps in its newest ``last.ckpt`` (None without one).
        wall_time_s: Seconds this launch's run took.
        resumed: Whether the run continued from a ``last.ckpt``.
        log: Its stderr log (where a failure's traceback is).
    """

    name: str
    status: str
    exit_status: int | None = None
    env_steps: int | None = None
    wall_time_s: float | None = None
    resumed: bool = False
    log: Path | None = None


def last_checkpoint(variant_dir: Path) -> Path | None:
    """The newest ``last*.ckpt`` of a variant's runs (``<variant>/runs/*/*/checkpoints``), None without one."""
    found = [p for p in variant_dir.glob("runs/*/*/checkpoints/last*.ckpt") if not p.name.endswith(".tmp")]
    return max(found, key=lambda p: p.stat().st_mtime) if found else None


def env_steps_of(checkpoint: Path | None) -> int | None:
    """The env-step counter saved in ``checkpoint`` (None without a checkpoint or a counter)."""
    if checkpoint is None:
        return None
    from lightning_rl.algos.checkpointing import load_data

    state = load_data(checkpoint).get("lightning_rl") or {}
    steps = (state.get("train_state") or {}).get("env_steps")
    return None if steps is None else int(steps)


def fit_command(variant_dir: Path, python: str = sys.executable) -> tuple[list[str], bool]:
    """The command that runs (or continues) a variant, and whether it resumes.

    A variant whose run holds a ``last.ckpt`` continues it (``--ckpt_path last``). Without one, run
    directories left by an attempt that died before its first checkpoint hold nothing to resume; they
    are removed, so the variant's new run is its only one.
    """
    command = [python, "-m", "lightning_rl.cli", "fit", "--config", "config.yaml"]
    if last_checkpoint(variant_dir) is not None:
        return [*command, "--ckpt_path", "last"], True
    shutil.rmtree(variant_dir / "runs", ignore_errors=True)
    return command, False


def child_environment(extra: dict[str, str]) -> dict[str, str]:
    """The launcher's environment plus ``extra``, with this checkout first on ``PYTHONPATH`` so a child
    (which runs in its variant directory) imports the same ``lightning_rl`` as the launcher."""
    import lightning_rl

    env = dict(os.environ)
    root = str(Path(lightning_rl.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join([root, *(p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p)])
    env.update(extra)
    return env


def write_done(variant_dir: Path, exit_status: int, wall_time_s: float, resumed: bool) -> int | None:
    """Write the ``done`` marker of a finished variant; its env steps (from the newest ``last.ckpt``)."""
    last = last_checkpoint(variant_dir)
    steps = env_steps_of(last)
    marker = {
        "exit_status": exit_status,
        "env_steps": steps,
        "wall_time_s": round(wall_time_s, 1),
        "resumed": resumed,
        "finished_at": datetime.datetime.now().isoformat(timespec="seconds"),
        "run_dir": None if last is None else str(last.parent.parent.relative_to(variant_dir)),
    }
    (variant_dir / DONE).write_text(yaml.safe_dump(marker, sort_keys=False))
    return steps


@contextmanager
def grid_lock(grid_dir: Path) -> Iterator[None]:
    """Hold ``<grid_dir>/.launch.lock`` while launching, so two launchers never run one grid.

    Raises:
        ValueError: If another launcher holds it.
    """
    grid_dir.mkdir(parents=True, exist_ok=True)
    with open(grid_dir / ".launch.lock", "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            raise ValueError(f"another launcher is running the grid {grid_dir} (pid {handle.read().strip()})") from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@dataclass
class _Running:
    variant_dir: Path
    slot: Slot
    process: subprocess.Popen[bytes]
    started: float
    resumed: bool
    logs: list[IO[str]] = field(default_factory=list)


def _pin(cpus: tuple[int, ...]) -> Callable[[], None]:
    """The child's pre-exec step: its CPUs, and SIGTERM when the launcher dies (no orphan runs)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)

    def pin() -> None:
        os.sched_setaffinity(0, cpus)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG

    return pin


def _start(variant_dir: Path, slot: Slot, python: str, out: IO[str]) -> _Running:
    command, resumed = fit_command(variant_dir, python)
    stamp = datetime.datetime.now().isoformat(timespec="seconds")
    where = f"cpus {list(slot.cpus)}, CUDA_VISIBLE_DEVICES {slot.cuda_visible_devices}"
    header = f"=== {stamp} {' '.join(command[1:])} ({where})\n"
    stdout = open(variant_dir / "stdout.log", "a")  # noqa: SIM115 (closed when the run ends)
    stderr = open(variant_dir / "stderr.log", "a")  # noqa: SIM115
    for log in (stdout, stderr):
        log.write(header)
        log.flush()
    process = subprocess.Popen(
        command, cwd=variant_dir, stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL,
        env=child_environment(slot_environment(slot)), start_new_session=True, preexec_fn=_pin(slot.cpus),
    )
    how = f"resuming {last_checkpoint(variant_dir)}" if resumed else "new run"
    print(f"start  {variant_dir.name} on cpus {','.join(map(str, slot.cpus))} (pid {process.pid}, {how})", file=out)
    out.flush()
    return _Running(variant_dir, slot, process, time.monotonic(), resumed, [stdout, stderr])


def _stop(running: Sequence[_Running], grace_s: float) -> None:
    """SIGINT to every child (a run saves ``last.ckpt`` and exits, as after Ctrl-C), then, after
    ``grace_s``, SIGKILL to whatever is left of its process group (sampler workers included)."""
    for run in running:
        with _suppress_lookup():
            os.kill(run.process.pid, signal.SIGINT)
    deadline = time.monotonic() + grace_s
    for run in running:
        try:
            run.process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
        with _suppress_lookup():
            os.killpg(run.process.pid, signal.SIGKILL)  # the group: sampler workers included
        run.process.wait(timeout=grace_s)


@contextmanager
def _suppress_lookup() -> Iterator[None]:
    try:
        yield
    except ProcessLookupError:
        pass


def launch_local(
    variant_dirs: Sequence[Path],
    slots: Sequence[Slot],
    parallel: int | None = None,
    *,
    python: str = sys.executable,
    run_timeout_s: float | None = None,
    stop_grace_s: float = STOP_GRACE_S,
    out: IO[str] | None = None,
) -> tuple[list[VariantResult], int | None]:
    """Run the variants in ``variant_dirs`` on this machine, at most ``parallel`` at a time, each in one of ``slots``.

    Args:
        variant_dirs: Variant directories (each with ``config.yaml``), run in this order.
        slots: From :func:`~lightning_rl.launch.affinity.make_affinity`.
        parallel: Runs at a time; default: one per slot.
        python: The interpreter that runs ``lightning_rl.cli``.
        run_timeout_s: A run still going after this many seconds is stopped (SIGINT, then SIGKILL) and
            counts as failed; None: no limit.
        stop_grace_s: Seconds children get to save and exit once the launcher is stopped.
        out: Where progress lines go (default: stdout).

    Returns:
        One result per variant, in order, and the signal that stopped the launcher (None if none did).

    Raises:
        ValueError: If ``parallel`` is below 1 or above the number of slots.
    """
    out = out if out is not None else sys.stdout
    parallel = len(slots) if parallel is None else parallel
    if not 1 <= parallel <= len(slots):
        raise ValueError(
            f"parallel={parallel}: the affinity gives {len(slots)} slot(s); run 1 to {len(slots)} at a time"
        )
    results = {d.name: VariantResult(d.name, "pending") for d in variant_dirs}
    queue: list[Path] = []
    for variant_dir in variant_dirs:
        if (variant_dir / DONE).is_file():
            marker = yaml.safe_load((variant_dir / DONE).read_text()) or {}
            results[variant_dir.name] = VariantResult(
                variant_dir.name, "skipped", marker.get("exit_status"), marker.get("env_steps"),
                marker.get("wall_time_s"),
            )
            print(f"skip   {variant_dir.name} (done)", file=out)
        else:
            queue.append(variant_dir)
    free = list(slots[:parallel])
    running: list[_Running] = []
    stopped_by: int | None = None

    received: list[int] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        received.append(signum)  # acted on in the loop, between whole steps

    in_main = threading.current_thread() is threading.main_thread()  # signal handlers live in the main thread
    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)} if in_main else {}
    try:
        while (queue or running) and not received:
            while queue and free and not received:
                running.append(_start(queue.pop(0), free.pop(0), python, out))
            time.sleep(_POLL_S)
            for run in list(running):
                elapsed = time.monotonic() - run.started
                timed_out = run_timeout_s is not None and elapsed > run_timeout_s and run.process.poll() is None
                if timed_out:
                    print(f"timeout {run.variant_dir.name} after {elapsed:.0f} s: stopping it", file=out)
                    _stop([run], stop_grace_s)
                code = run.process.poll()
                if code is None:
                    continue
                running.remove(run)
                free.append(run.slot)
                results[run.variant_dir.name] = _finish(run, code, timed_out, out)
        if received:
            stopped_by = received[0]
            name = signal.Signals(stopped_by).name
            print(f"{name}: stopping {len(running)} run(s) (SIGINT, up to {stop_grace_s:.0f} s to save)", file=out)
            out.flush()
            _stop(running, stop_grace_s)
            for run in running:
                results[run.variant_dir.name] = _finish(run, run.process.returncode, False, out, interrupted=True)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return [results[d.name] for d in variant_dirs], stopped_by


def _finish(run: _Running, code: int, timed_out: bool, out: IO[str], interrupted: bool = False) -> VariantResult:
    wall = time.monotonic() - run.started
    for handle in run.logs:
        handle.close()
    name = run.variant_dir.name
    log = run.variant_dir / "stderr.log"
    if code == 0 and not timed_out and not interrupted:
        steps = write_done(run.variant_dir, code, wall, run.resumed)
        print(f"done   {name}: exit 0 after {wall:.0f} s, {steps} env steps", file=out)
        return VariantResult(name, "finished", code, steps, wall, run.resumed, log)
    status = "interrupted" if interrupted else "failed"
    why = " (timed out)" if timed_out else ""
    print(f"{status:<6} {name}: exit {code}{why} after {wall:.0f} s; log: {log}", file=out)
    steps = env_steps_of(last_checkpoint(run.variant_dir))
    return VariantResult(name, status, code, steps, wall, run.resumed, log)


def print_summary(results: Sequence[VariantResult], out: IO[str] | None = None) -> None:
    """A table of the launch: each variant's status, exit status, env steps, wall time and (failures) log."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    table = Table(title="launch summary", box=box.SIMPLE)
    for column in ("variant", "status", "exit", "env steps", "wall (s)", "log"):
        table.add_column(column, justify="right" if column in ("exit", "env steps", "wall (s)") else "left")
    for r in results:
        status = f"{r.status} (resumed)" if r.resumed and r.status == "finished" else r.status
        table.add_row(
            r.name, status, "-" if r.exit_status is None else str(r.exit_status),
            "-" if r.env_steps is None else f"{r.env_steps:,}",
            "-" if r.wall_time_s is None else f"{r.wall_time_s:.0f}",
            str(r.log) if r.status in ("failed", "interrupted") and r.log else "",
        )
    statuses = ("finished", "skipped", "failed", "interrupted", "pending")
    counts = {s: sum(r.status == s for r in results) for s in statuses}
    Console(file=out or sys.stdout, width=160, no_color=True).print(table)
    print(", ".join(f"{n} {s}" for s, n in counts.items() if n), file=out or sys.stdout)

