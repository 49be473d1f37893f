"""Progress in env steps: a Rich display on a terminal, a plain line every N seconds otherwise, and an
end summary saying why the run stopped, where its checkpoint is and how to play it."""

from __future__ import annotations

import math
import os
import shlex
import signal
import sys
import time
from typing import Any, TextIO

import pytorch_lightning as pl
from pytorch_lightning.callbacks import EarlyStopping
from pytorch_lightning.callbacks.early_stopping import EarlyStoppingReason
from pytorch_lightning.callbacks.progress.progress_bar import ProgressBar

from lightning_rl.runs import run_dir_of

__all__ = ["RLProgressBar", "format_duration"]


def format_duration(seconds: float) -> str:
    """``h:mm:ss`` (``m:ss`` under an hour); ``?`` for an unknown or infinite duration."""
    if not math.isfinite(seconds) or seconds < 0:
        return "?"
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


class RLProgressBar(ProgressBar):
    """Training progress in env steps, as the ``lightning-rl`` CLI shows it (added unless the config
    has a progress bar or sets ``enable_progress_bar: false``).

    Fields: env steps done / ``total_env_steps``, env steps per second (since this fit started), ETA,
    the last ``train/return_mean`` and the last ``eval/return_mean``. On a terminal they form a Rich
    progress bar; when stdout is not a terminal (a cluster job, ``nohup``, a pipe) one plain line goes
    to stdout every ``print_interval_s`` seconds. When fitting ends, a summary follows: why it stopped
    (budget, return threshold, early stopping, interrupt, error, a Trainer limit), env steps, wall
    time, the best eval return, the checkpoint and the command that plays it.

    Args:
        print_interval_s: Seconds between plain lines when stdout is not a terminal (0: one line per
            sampler iteration).
        refresh_interval_s: Seconds between redraws of the Rich display.
        rich: Force the Rich display (True) or plain lines (False); None: Rich when stdout is a terminal.

    Raises:
        ValueError: If ``print_interval_s`` or ``refresh_interval_s`` is negative.
    """

    def __init__(
        self, print_interval_s: float = 30.0, refresh_interval_s: float = 0.25, rich: bool | None = None
    ) -> None:
        super().__init__()
        if print_interval_s < 0:
            raise ValueError(f"print_interval_s must be >= 0, got {print_interval_s}")
        if refresh_interval_s < 0:
            raise ValueError(f"refresh_interval_s must be >= 0, got {refresh_interval_s}")
        self.print_interval_s = print_interval_s
        self.refresh_interval_s = refresh_interval_s
        self.rich = rich
        self._enabled = True
        self._progress: Any = None
        self._task: Any = None
        self._start_time = 0.0
        self._start_steps = 0
        self._last_output = 0.0
        self._exception: BaseException | None = None
        self._summarized = False
        self.best_eval_return: float | None = None
        #: The summary's lines once fitting ended (also printed).
        self.summary: list[str] = []

    def disable(self) -> None:
        self._enabled = False

    def enable(self) -> None:
        self._enabled = True

    @property
    def is_enabled(self) -> bool:
        return self._enabled

    @property
    def _stream(self) -> TextIO:
        return sys.stdout

    def _use_rich(self) -> bool:
        if self.rich is not None:
            return self.rich
        return self._stream.isatty() and os.environ.get("TERM") != "dumb"

    def fields(self, pl_module: Any) -> dict[str, Any]:
        """The displayed values: ``steps``, ``total``, ``rate`` (env steps/s), ``eta_s``, ``return_mean``,
        ``eval_return`` (None where unknown) and ``elapsed_s``."""
        steps = int(pl_module.global_env_steps)
        total = pl_module.total_env_steps
        elapsed = max(time.monotonic() - self._start_time, 1e-9)
        rate = (steps - self._start_steps) / elapsed
        eta = (total - steps) / rate if total is not None and rate > 0 else math.inf
        metrics = self.trainer.callback_metrics
        eval_return = _number(metrics.get("eval/return_mean"))
        if eval_return is not None:
            self.best_eval_return = max(eval_return, self.best_eval_return or -math.inf)
        return {
            "steps": steps, "total": total, "rate": rate, "eta_s": max(eta, 0.0),
            "return_mean": _number(metrics.get("train/return_mean")), "eval_return": eval_return,
            "elapsed_s": elapsed,
        }

    def format_line(self, fields: dict[str, Any]) -> str:
        """One plain progress line of :meth:`fields`."""
        total = fields["total"]
        done = f"{fields['steps']:,}/{total:,} env steps ({100 * fields['steps'] / total:.0f}%)" if total else (
            f"{fields['steps']:,} env steps")
        parts = [done, f"{fields['rate']:,.0f} steps/s", f"ETA {format_duration(fields['eta_s'])}",
                 f"return {_fmt(fields['return_mean'])}", f"eval {_fmt(fields['eval_return'])}",
                 f"elapsed {format_duration(fields['elapsed_s'])}"]
        return " | ".join(parts)

    def on_train_start(self, trainer: pl.Trainer, pl_module: Any) -> None:
        self._start_time = self._last_output = time.monotonic()
        self._start_steps = int(pl_module.global_env_steps)
        self._exception = None
        self._summarized = False
        self.summary = []
        if not (self._enabled and trainer.is_global_zero and self._use_rich()):
            return
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn

        # Redrawn from the training loop only (no refresh thread next to forked sampler workers).
        self._progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.fields[info]}"),
            console=Console(file=self._stream), auto_refresh=False, transient=False,
        )
        self._progress.start()
        total = pl_module.total_env_steps
        self._task = self._progress.add_task("fit", total=total, completed=self._start_steps, info="starting")
        self._progress.refresh()

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        if not (self._enabled and trainer.is_global_zero):
            return
        now = time.monotonic()
        if self._progress is not None:
            if now - self._last_output >= self.refresh_interval_s:
                self._redraw(pl_module)
                self._last_output = now
        elif now - self._last_output >= self.print_interval_s:
            print(self.format_line(self.fields(pl_module)), file=self._stream, flush=True)
            self._last_output = now

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: Any) -> None:
        if self._progress is not None and trainer.is_global_zero:
            self._redraw(pl_module)  # shows a new eval return at once

    def _redraw(self, pl_module: Any) -> None:
        fields = self.fields(pl_module)
        info = self.format_line(fields)
        self._progress.update(self._task, completed=fields["steps"], info=info)
        self._progress.refresh()

    def on_exception(self, trainer: pl.Trainer, pl_module: Any, exception: BaseException) -> None:
        self._exception = exception
        self._finish(trainer, pl_module)

    def on_fit_end(self, trainer: pl.Trainer, pl_module: Any) -> None:
        self._finish(trainer, pl_module)

    def _finish(self, trainer: pl.Trainer, pl_module: Any) -> None:
        if self._summarized or trainer.state.fn != "fit":
            return
        self._summarized = True
        if self._progress is not None:
            self._redraw(pl_module)
            self._progress.stop()
            self._progress = None
        if not (self._enabled and trainer.is_global_zero):
            return
        self.summary = self.summarize(trainer, pl_module)
        print("\n".join(self.summary), file=self._stream, flush=True)

    def stop_reason(self, trainer: pl.Trainer, pl_module: Any) -> str:
        """Why fitting ended, in words."""
        exception = self._exception
        if isinstance(exception, KeyboardInterrupt):
            return "interrupted (Ctrl-C)"
        if exception is not None and type(exception).__name__ == "SIGTERMException":
            return "interrupted (SIGTERM)"
        if exception is not None:
            return f"error: {type(exception).__name__}: {exception}"
        for callback in trainer.callbacks:  # type: ignore[attr-defined]
            received = getattr(callback, "received", None)
            if isinstance(received, signal.Signals):
                return f"interrupted ({received.name})"
        for callback in trainer.callbacks:  # type: ignore[attr-defined]
            if isinstance(callback, EarlyStopping) and callback.stopping_reason != EarlyStoppingReason.NOT_STOPPED:
                kind = ("return threshold" if callback.stopping_reason == EarlyStoppingReason.STOPPING_THRESHOLD
                        else "early stopping")
                # Lightning's message ends with what it does about it ("Signaling Trainer to stop.").
                message = (callback.stopping_reason_message or "").split(". Signaling")[0].strip().rstrip(".")
                return f"{kind}: {message}" if message else kind
        if pl_module.budget_reached:
            return f"budget: total_env_steps={pl_module.total_env_steps:,} reached"
        return "Trainer limit (max_epochs, max_steps or max_time)"

    def summarize(self, trainer: pl.Trainer, pl_module: Any) -> list[str]:
        """The end summary's lines."""
        fields = self.fields(pl_module)
        checkpoint, best = _checkpoint_paths(trainer)
        run_dir = run_dir_of(checkpoint) if checkpoint else None
        target = run_dir if run_dir is not None else checkpoint
        lines = [
            f"stopped: {self.stop_reason(trainer, pl_module)}",
            f"env steps: {fields['steps']:,}" + (f" of {fields['total']:,}" if fields["total"] else ""),
            f"wall time: {format_duration(fields['elapsed_s'])} ({fields['rate']:,.0f} env steps/s)",
            f"last mean return: {_fmt(fields['return_mean'])}",
            f"best eval return: {_fmt(self.best_eval_return)}",
            f"checkpoint: {checkpoint or 'none saved'}",
        ]
        if best is not None:
            lines.append(f"best checkpoint: {best}")
        if target is not None:
            lines.append(f"play it: lightning-rl play {shlex.quote(str(target))}")
        return lines


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _checkpoint_paths(trainer: pl.Trainer) -> tuple[str | None, str | None]:
    """The newest ``last.ckpt`` written (else the best), and the eval callback's ``best.ckpt`` (or None)."""
    best = next((str(p) for c in trainer.callbacks  # type: ignore[attr-defined]
                 if (p := getattr(c, "best_checkpoint_path", None)) and os.path.isfile(p)), None)
    candidates: list[str] = [str(p) for c in trainer.checkpoint_callbacks if (p := getattr(c, "last_model_path", ""))]
    candidates += [p for c in trainer.callbacks  # type: ignore[attr-defined]
                   if isinstance(p := getattr(c, "checkpoint_path", None), str)]
    last = next((p for p in candidates if os.path.isfile(p)), None)
    return (last or best), best
