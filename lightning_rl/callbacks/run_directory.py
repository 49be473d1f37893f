"""What a run directory holds, and a checkpoint on SIGINT/SIGUSR1/SIGTERM so a run can be stopped and resumed.

A run's log dir (``trainer.log_dir``, e.g. ``lightning_logs/version_3``) ends up with:

* ``config.yaml``: the resolved config, written by LightningCLI's ``SaveConfigCallback`` (also for
  ``--params`` files, which the CLI turns into a config first);
* ``run_info.yaml``: the package version, a hash of the ``lightning_rl`` source files, the git
  commit when the package sits in a git checkout, library versions, the command line and the
  run's ``status``: ``running`` while it trains, then ``finished`` (a budget, threshold or Trainer
  limit ended it), ``interrupted`` (a signal; ``last.ckpt`` saved) or ``failed`` (with the error),
  which ``play``, ``export``, ``validate`` and ``test`` of a group of runs read to prefer a finished run,
  and ``wall_time_s``, the seconds the run's processes took (``lightning-rl results`` reports it);
* the logger's files, and the checkpoints (in the ``ModelCheckpoint`` dirpath when the config
  names one, else ``checkpoints/``);
* ``error.log``: the whole traceback of a run that failed while training.

On SIGINT (Ctrl-C), SIGUSR1 (what cluster schedulers send ahead of a time limit) or SIGTERM (a
scheduler's pre-emption, ``kill``) the run saves ``<checkpoint dir>/last.ckpt`` at the end of the
current batch and stops cleanly, so ``lightning-rl fit --config ... --ckpt_path last`` continues it
exactly. A ``ModelCheckpoint(save_last=True)`` writing that file saves it, through the module's
stop in the middle of an epoch (the checkpoint then holds the state at the batch's end, before
Lightning ends the epoch early); without one this callback saves it. A second Ctrl-C while waiting
for the batch to end interrupts at once, as Ctrl-C does without this callback. ``last.ckpt`` stays
the one newest state: a ``ModelCheckpoint(save_last=True)`` in the same directory is told of the
file this callback wrote (and, after a resume, of the ``last.ckpt`` it resumed), so it writes over
it instead of starting a ``last-v1.ckpt`` beside it.

When fitting fails or is interrupted (Lightning's own Ctrl-C handling, an error), the
``lightning-rl`` process gives its shutdown ``shutdown_timeout_s`` seconds: a shutdown stuck past
that (a lock the interrupt left held, a writer thread that never drains) prints every thread's
stack to stderr and ends the process with status 1, instead of hanging a cluster job.
"""

from __future__ import annotations

import datetime
import faulthandler
import hashlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from importlib import metadata
from pathlib import Path
from types import FrameType
from typing import Any

import pytorch_lightning as pl
import yaml
from pytorch_lightning.callbacks import ModelCheckpoint
from pytorch_lightning.utilities import rank_zero_info
from pytorch_lightning.utilities.exceptions import SIGTERMException

import lightning_rl
from lightning_rl.runs import RUN_INFO_FILE, read_run_info, update_run_info

LAST_CHECKPOINT = "last.ckpt"
#: A failed run's whole traceback, in its log dir.
ERROR_LOG = "error.log"


def code_hash(root: str | Path | None = None) -> str:
    """SHA-256 over the relative paths and contents of the ``.py`` files under ``root``.

    Args:
        root: Package directory; default: the installed ``lightning_rl`` package.

    Returns:
        ``"sha256:<hex digest>"``; it changes with any edit to any source file.
    """
    root = Path(root) if root is not None else Path(lightning_rl.__file__).parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return "sha256:" + digest.hexdigest()


def git_commit(path: str | Path | None = None) -> str | None:
    """The commit checked out where ``path`` (default: the package) lives; None outside git."""
    path = Path(path) if path is not None else Path(lightning_rl.__file__).parent
    try:
        result = subprocess.run(
            ["git", "-C", str(path), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            # A read-only query: do not take git's optional index lock.
            env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = result.stdout.strip()
    return commit if result.returncode == 0 and commit else None


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def run_info() -> dict[str, Any]:
    """What identifies the code and environment of a run (the content of ``run_info.yaml``)."""
    return {
        "lightning_rl_version": lightning_rl.__version__,
        "code_hash": code_hash(),
        "git_commit": git_commit(),
        "python": sys.version.split()[0],
        "torch": _version("torch"),
        "pytorch_lightning": _version("pytorch-lightning"),
        "gymnasium": _version("gymnasium"),
        "numpy": _version("numpy"),
        "command": list(sys.argv),
        "cwd": os.getcwd(),
        "hostname": socket.gethostname(),
        "pid": os.getpid(),
        "started_at": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
    }


class RunDirectoryCallback(pl.Callback):
    """Writes ``run_info.yaml`` into the log dir and checkpoints on SIGINT/SIGUSR1 (module docstring).

    Signal handlers are installed when fitting starts, in the main thread of every rank, and the
    previous handlers are restored when fitting ends (before that, a signal does what it did
    without this callback; a signal the process ignores stays ignored). When training starts the
    callback takes back any of its signals a handler registered since (Lightning's own SIGTERM
    handler, which would stop the run at the next epoch end without this save). A signal only
    sets a flag; at the next training batch end every rank (the flag is reduced over DDP ranks)
    saves the checkpoint with ``trainer.save_checkpoint`` and the trainer stops. The CLI then
    exits with status 1 after a SIGINT (as Lightning's own Ctrl-C handling does, so
    ``fit && play`` stops there), 143 after a SIGTERM (the shell's status for it) and 0 after
    another signal (SIGUSR1: a scheduler's warning before a time limit). A SIGTERM left to
    Lightning (``signals`` without it) raises its ``SIGTERMException``; this callback gives it the
    same status 143.

    Args:
        signals: Names of the signals that save and stop (``SIGINT``, ``SIGUSR1``, ``SIGTERM``,
            ...); empty: no signal handling.
        dirpath: Where ``last.ckpt`` goes; default: the first ``ModelCheckpoint``'s dirpath, else
            ``<log_dir>/checkpoints``. ``--ckpt_path last`` finds it in the ModelCheckpoint dir.
        write_run_info: Write ``run_info.yaml`` into the log dir (global rank 0).
        shutdown_timeout_s: Seconds a failing or interrupted fit may take to shut down before the
            process prints its threads' stacks and exits with status 1; None: no limit. The
            ``lightning-rl`` command sets it for its own process when left None; a program calling
            ``fit`` itself opts in here, since the exit ends its interpreter too.

    Raises:
        ValueError: If a name in ``signals`` is not a signal of this platform.
    """

    def __init__(
        self,
        signals: list[str] | tuple[str, ...] = ("SIGINT", "SIGUSR1", "SIGTERM"),
        dirpath: str | None = None,
        write_run_info: bool = True,
        shutdown_timeout_s: float | None = None,
    ) -> None:
        self.signals: list[signal.Signals] = []
        for name in signals:
            if not isinstance(getattr(signal, str(name), None), signal.Signals):
                raise ValueError(f"signals: {name!r} is not a signal name on this platform (e.g. 'SIGUSR1')")
            self.signals.append(getattr(signal, name))
        self.dirpath = dirpath
        self.write_run_info = write_run_info
        self.received: signal.Signals | None = None
        self.checkpoint_path: str | None = None
        self._saved = False
        self._previous: dict[signal.Signals, Any] = {}
        #: The log dir whose ``run_info.yaml`` this callback wrote (its status is updated at the end).
        self._run_info_dir: str | None = None
        #: ``time.monotonic()`` at the start of the process or command (the ``lightning-rl`` command
        #: sets it; None: the start of fitting): ``run_info.yaml``'s ``wall_time_s`` counts from it, as
        #: the end summary's wall time does.
        self.process_start: float | None = None
        #: The ``error.log`` this callback wrote when fitting failed (None otherwise).
        self.error_log: str | None = None
        self._started = 0.0
        self._earlier_wall_s = 0.0
        if shutdown_timeout_s is not None and not shutdown_timeout_s > 0:
            raise ValueError(f"shutdown_timeout_s: {shutdown_timeout_s!r} must be > 0 seconds, or None for no limit")
        self.shutdown_timeout_s = shutdown_timeout_s

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        sig = signal.Signals(signum)
        if self.received is not None and sig == signal.SIGINT:
            # A second Ctrl-C: the user does not want to wait for the batch to end.
            previous = self._previous.get(sig)
            if callable(previous):
                previous(signum, frame)
                return
            raise KeyboardInterrupt
        if self.received is None:
            self.received = sig

    def _install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # signal.signal works in the main thread only
        for sig in self.signals:
            previous = signal.getsignal(sig)
            if previous is signal.SIG_IGN:
                continue  # whoever started the process chose to ignore it (nohup, background jobs)
            self._previous[sig] = previous
            signal.signal(sig, self._handle)

    def _take_back(self) -> None:
        """Put this callback's handler back on each signal another handler took after :meth:`_install`.

        Lightning registers its own SIGTERM handler after ``on_fit_start``: a notifier that makes
        the loops raise ``SIGTERMException`` at the next batch or epoch end, and then calls the
        handler it found (this one). A SIGTERM landing between an epoch's checkpoint and the fit
        loop's check would stop the run there without this callback's save. Lightning puts its
        saved handlers (this callback's) back in its own teardown; :meth:`_restore` then puts back
        the ones from before fitting.
        """
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in self._previous:
            if signal.getsignal(sig) != self._handle:
                signal.signal(sig, self._handle)

    def _restore(self) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous if previous is not None else signal.SIG_DFL)
        self._previous = {}

    def _checkpoint_dir(self, trainer: pl.Trainer) -> str:
        if self.dirpath is not None:
            return self.dirpath
        checkpoint = trainer.checkpoint_callback
        dirpath = getattr(checkpoint, "dirpath", None) if checkpoint is not None else None
        if dirpath:
            return str(dirpath)
        return os.path.join(trainer.log_dir or trainer.default_root_dir, "checkpoints")

    def on_fit_start(self, trainer: pl.Trainer, pl_module: Any) -> None:
        self.received = None
        self._saved = False
        self._install()
        # log_dir broadcasts under DDP: every rank asks for it.
        log_dir = trainer.log_dir
        self.checkpoint_path = os.path.join(self._checkpoint_dir(trainer), LAST_CHECKPOINT)
        self._started = self.process_start if self.process_start is not None else time.monotonic()
        if self.write_run_info and trainer.is_global_zero and log_dir is not None:
            os.makedirs(log_dir, exist_ok=True)
            # A resumed run adds this process's time to the earlier processes' (results' wall time).
            self._earlier_wall_s = float(read_run_info(log_dir).get("wall_time_s") or 0.0)
            info = {**run_info(), "world_size": trainer.world_size, "log_dir": os.path.abspath(log_dir),
                    "status": "running"}
            with open(os.path.join(log_dir, RUN_INFO_FILE), "w") as f:
                yaml.safe_dump(info, f, sort_keys=False)
            self._run_info_dir = log_dir

    def _record_end(self, trainer: pl.Trainer, pl_module: Any, status: str, error: str | None = None) -> None:
        """Write how the run ended into ``run_info.yaml`` (global rank 0, once per fit)."""
        if self._run_info_dir is None or not trainer.is_global_zero:
            return
        fields: dict[str, Any] = {
            "status": status, "ended_at": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "wall_time_s": round(self._earlier_wall_s + time.monotonic() - self._started, 3),
        }
        steps = getattr(pl_module, "global_env_steps", None)
        if steps is not None:
            fields["env_steps"] = int(steps)
        if error is not None:
            fields["error"] = error
        try:
            update_run_info(self._run_info_dir, **fields)
        except OSError:
            pass  # a status is a convenience for choosing runs; never let it fail the run
        self._run_info_dir = None

    def _claim_last(self, trainer: pl.Trainer) -> None:
        """Tell each ``ModelCheckpoint`` whose next save writes this callback's ``last.ckpt`` that the file
        is its own, so it writes over it instead of beside it (``last-v1.ckpt``): ``save_last=True``'s
        ``last_model_path``, and ``filename="last"`` (rlpyt's "last" snapshot mode)'s ``best_model_path``."""
        if self.checkpoint_path is None:
            return
        target = os.path.abspath(self.checkpoint_path)
        for callback in trainer.checkpoint_callbacks:
            if not isinstance(callback, ModelCheckpoint) or callback.dirpath is None:
                continue
            directory = str(callback.dirpath)
            if callback.save_last:
                name = callback.CHECKPOINT_NAME_LAST + callback.FILE_EXTENSION
                if os.path.abspath(os.path.join(directory, name)) == target:
                    callback.last_model_path = self.checkpoint_path
            if callback.filename == "last" and callback.monitor is None and callback.save_top_k == 1:
                if os.path.abspath(os.path.join(directory, "last" + callback.FILE_EXTENSION)) == target:
                    callback.best_model_path = self.checkpoint_path

    def on_train_start(self, trainer: pl.Trainer, pl_module: Any) -> None:
        self._take_back()
        # After a resume the ModelCheckpoint's state may not name the last.ckpt it left (one written
        # by this callback, or by an older version): it would write last-v1.ckpt beside it.
        if self.checkpoint_path is not None and os.path.isfile(self.checkpoint_path):
            self._claim_last(trainer)

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        if self._saved:
            return  # stopping already (Trainer(min_epochs=...) can keep it going a while)
        requested = self.received is not None
        if trainer.world_size > 1:
            # All ranks must save together (save_checkpoint has a barrier): stop if any rank got it.
            requested = trainer.strategy.reduce_boolean_decision(requested, all=False)
        if not requested:
            return
        name = self.received.name if self.received is not None else "a signal on another rank"
        rank_zero_info(f"Received {name}: saving {self.checkpoint_path} and stopping.")
        assert self.checkpoint_path is not None  # set by on_fit_start
        self._claim_last(trainer)  # the ModelCheckpoint's next save writes over this file (its state says so)
        self._saved = True
        trainer.should_stop = True
        if not self._written_by_a_model_checkpoint(trainer):
            trainer.save_checkpoint(self.checkpoint_path, weights_only=False)

    def _written_by_a_model_checkpoint(self, trainer: pl.Trainer) -> bool:
        """Whether a ``ModelCheckpoint(save_last=True)`` writes :attr:`checkpoint_path`: a module that
        stops mid-epoch saves through it at this batch's end, else the epoch's end (now) does."""
        target = os.path.abspath(str(self.checkpoint_path))
        for callback in trainer.checkpoint_callbacks:
            if isinstance(callback, ModelCheckpoint) and callback.save_last and callback.dirpath is not None:
                name = callback.CHECKPOINT_NAME_LAST + callback.FILE_EXTENSION
                if os.path.abspath(os.path.join(str(callback.dirpath), name)) == target:
                    return True
        return False

    def on_fit_end(self, trainer: pl.Trainer, pl_module: Any) -> None:
        self._restore()
        self._record_end(trainer, pl_module, "interrupted" if self.received is not None else "finished")

    def on_exception(self, trainer: pl.Trainer, pl_module: Any, exception: BaseException) -> None:
        if isinstance(exception, SIGTERMException) and exception.code is None:
            exception.code = 128 + signal.SIGTERM  # the shell's status for a SIGTERM-ended process
        if isinstance(exception, (KeyboardInterrupt, SIGTERMException)):
            self._record_end(trainer, pl_module, "interrupted")
        else:
            self._write_error_log(trainer, exception)
            self._record_end(trainer, pl_module, "failed", f"{type(exception).__name__}: {exception}")

    def _write_error_log(self, trainer: pl.Trainer, exception: BaseException) -> None:
        """The whole traceback into ``<log dir>/error.log`` (global rank 0), where the command's short
        error lines point (:mod:`lightning_rl.error_report`)."""
        if self._run_info_dir is None or not trainer.is_global_zero:
            return
        from lightning_rl.error_report import format_traceback

        path = os.path.join(self._run_info_dir, ERROR_LOG)
        try:
            with open(path, "w") as f:
                f.write(format_traceback(exception))
        except OSError:
            return
        self.error_log = path
        if self.shutdown_timeout_s is not None:
            # Armed from here on: Lightning's teardown, the loggers' last flush and the interpreter's
            # exit (atexit hooks, worker joins) all run after this hook.
            faulthandler.dump_traceback_later(self.shutdown_timeout_s, exit=True)

    @property
    def exit_code(self) -> int:
        """The status the CLI exits with after this fit: 1 if a SIGINT stopped it, 143 a SIGTERM, else 0."""
        return {signal.SIGINT: 1, signal.SIGTERM: 128 + signal.SIGTERM}.get(self.received, 0)  # type: ignore[arg-type]

    def teardown(self, trainer: pl.Trainer, pl_module: Any, stage: str) -> None:
        # on_fit_end does not run when fitting fails; never leave our handlers behind.
        self._restore()
