"""Progress in env steps: a Rich display on a terminal, a plain line every N seconds otherwise, and an
end summary saying why the run stopped, where its checkpoint is and how to play it."""

from __future__ import annotations

import math
import os
import re
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

    Fields: env steps done / ``total_env_steps``, the last ``train/return_mean``, the ETA and what it
    counts to, the best ``eval/return_mean`` so far, env steps per second (since this fit started)
    and the time since the start. The ETA counts to the budget, or to ``max_epochs`` where the
    Trainer stops first; a run with a stop threshold (an ``EarlyStopping`` with
    ``stopping_threshold``, as the main config's return of 475) may stop earlier, which the ETA says
    (``ETA ≤1:05 (200k or return ≥475)``). On a terminal the fields form one Rich line that fits the
    terminal's width, the least needed fields left out first (at 80 columns: env steps, return, ETA
    and its target); when stdout is not a terminal (a cluster job, ``nohup``, a pipe) one plain line
    with every field goes to stdout every ``print_interval_s`` seconds. When fitting ends, a summary
    follows: why it stopped (budget, return threshold, early stopping, interrupt, error, a Trainer
    limit), env steps, wall time (since the process or command started: :attr:`process_start`),
    the best eval return (when the run evaluated), the checkpoint, the command that plays it and,
    after an interrupt, an error or a Trainer limit, the command that resumes it. A fit that fails
    before training starts (a config error) prints no summary.

    The best eval return is taken from every evaluation as it happens (the evaluation callbacks'
    results, else ``eval/return_mean`` after each training batch), not from what was drawn.

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
        self._training = False
        #: ``time.monotonic()`` at the start of the process or command; the summary's wall time counts
        #: from it (the ``lightning-rl`` command sets it; None: from the start of fitting).
        self.process_start: float | None = None
        self._fit_start: float | None = None
        self.best_eval_return: float | None = None
        #: The command line that started this fit (``lightning-rl fit ...``; set by the CLI), for the
        #: summary's resume command of a run outside a run directory.
        self.command: list[str] | None = None
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

    def track_eval(self, trainer: pl.Trainer) -> None:
        """Update :attr:`best_eval_return` from the evaluation callbacks' results (their best, restored
        on resume) and the latest ``eval/return_mean``."""
        values = [getattr(c, "best_return", None) for c in trainer.callbacks]  # type: ignore[attr-defined]
        values += [(getattr(c, "last_metrics", None) or {}).get("eval/return_mean")
                   for c in trainer.callbacks]  # type: ignore[attr-defined]
        values.append(trainer.callback_metrics.get("eval/return_mean"))
        for value in values:
            number = _number(value)
            if number is not None and (self.best_eval_return is None or number > self.best_eval_return):
                self.best_eval_return = number

    def target(self, trainer: pl.Trainer, pl_module: Any) -> tuple[int | None, str]:
        """The env steps the run counts to and what stops it there: the budget, or ``max_epochs``
        where that comes first (None, "" when neither bounds it)."""
        total = pl_module.total_env_steps
        label = "budget" if total is not None else ""
        max_epochs = getattr(trainer, "max_epochs", None)
        try:
            size = int(pl_module.sampler.batch_spec.size)
            per_epoch = int(pl_module.iterations_per_epoch) * size * trainer.world_size
        except (AttributeError, TypeError):
            per_epoch = 0
        if max_epochs is not None and max_epochs > 0 and per_epoch:
            by_epochs = max_epochs * per_epoch
            if total is None or by_epochs < total:
                return by_epochs, "max_epochs"
        return total, label

    def threshold(self, trainer: pl.Trainer) -> str:
        """The stop threshold in words (``return ≥475``), or "" without one."""
        for callback in trainer.callbacks:  # type: ignore[attr-defined]
            value = getattr(callback, "stopping_threshold", None)
            if isinstance(callback, EarlyStopping) and value is not None:
                monitor = str(callback.monitor)
                name = {"train/return_mean": "return", "eval/return_mean": "eval return"}.get(monitor, monitor)
                sign = "≥" if callback.mode == "max" else "≤"
                return f"{name} {sign}{value:g}"
        return ""

    def fields(self, pl_module: Any) -> dict[str, Any]:
        """The displayed values: ``steps``, ``total`` (the budget), ``target`` and ``target_label`` (what
        the ETA counts to), ``threshold``, ``rate`` (env steps/s), ``eta_s``, ``return_mean``,
        ``eval_return`` (the best so far; None where unknown) and ``elapsed_s`` (since fitting started)."""
        trainer = self.trainer
        steps = int(pl_module.global_env_steps)
        elapsed = max(time.monotonic() - self._start_time, 1e-9)
        rate = (steps - self._start_steps) / elapsed
        target, label = self.target(trainer, pl_module)
        eta = (target - steps) / rate if target is not None and rate > 0 else math.inf
        self.track_eval(trainer)
        return {
            "steps": steps, "total": pl_module.total_env_steps, "target": target, "target_label": label,
            "threshold": self.threshold(trainer), "rate": rate, "eta_s": max(eta, 0.0),
            "return_mean": _number(trainer.callback_metrics.get("train/return_mean")),
            "eval_return": self.best_eval_return, "elapsed_s": elapsed,
        }

    def format_line(self, fields: dict[str, Any]) -> str:
        """One plain progress line of :meth:`fields`, every field (for logs: no width limit)."""
        total = fields["total"]
        done = f"{fields['steps']:,}/{total:,} env steps ({100 * fields['steps'] / total:.0f}%)" if total else (
            f"{fields['steps']:,} env steps")
        parts = [done, f"{fields['rate']:,.0f} steps/s", _eta_text(fields, short=False),
                 f"return {_fmt(fields['return_mean'])}", f"best eval {_fmt(fields['eval_return'])}",
                 f"elapsed {format_duration(fields['elapsed_s'])}"]
        return " | ".join(parts)

    def format_fitted(self, fields: dict[str, Any], width: int) -> str:
        """The progress line for a terminal of ``width`` columns: env steps, return and the ETA first;
        the ETA's target, the percentage, the best eval return, the rate and the elapsed time as
        they fit, in that order."""
        total = fields["total"]
        steps = f"{fields['steps']:,}/{total:,} env steps" if total else f"{fields['steps']:,} env steps"
        eta, eta_target = _eta_text(fields, short=True, with_target=False), _eta_target(fields)
        parts: dict[str, str] = {
            "steps": steps, "pct": f"{100 * fields['steps'] / total:.0f}%" if total else "",
            "return": f"return {_fmt(fields['return_mean'])}", "eta": eta, "target": eta_target,
            "eval": f"best eval {_fmt(fields['eval_return'])}" if fields["eval_return"] is not None else "",
            "rate": f"{_short(fields['rate'])}/s", "elapsed": f"elapsed {format_duration(fields['elapsed_s'])}",
        }
        shown = {"steps", "return", "eta"}

        def render(keys: set[str]) -> str:
            head = parts["steps"] + (f" {parts['pct']}" if "pct" in keys and parts["pct"] else "")
            eta_part = parts["eta"] + (f" {parts['target']}" if "target" in keys and parts["target"] else "")
            order = [head, parts["return"], eta_part, *(parts[k] for k in ("eval", "rate", "elapsed") if k in keys)]
            return " | ".join(p for p in order if p)

        for key in ("target", "pct", "eval", "rate", "elapsed"):
            if parts[key] and len(render(shown | {key})) <= width:
                shown.add(key)
        return render(shown)[:width]

    def setup(self, trainer: pl.Trainer, pl_module: Any, stage: str) -> None:
        super().setup(trainer, pl_module, stage)
        self._fit_start = time.monotonic()

    def on_train_start(self, trainer: pl.Trainer, pl_module: Any) -> None:
        self._start_time = self._last_output = time.monotonic()
        self._start_steps = int(pl_module.global_env_steps)
        self._exception = None
        self._summarized = False
        self._training = True
        self.summary = []
        self.track_eval(trainer)
        if not (self._enabled and trainer.is_global_zero and self._use_rich()):
            return
        from rich.console import Console
        from rich.progress import Progress, TextColumn

        # Redrawn from the training loop only (no refresh thread next to forked sampler workers); one
        # text column, cut to the terminal's width by format_fitted, so Rich never crops it.
        console = Console(file=self._stream)
        self._progress = Progress(TextColumn("{task.fields[info]}"), console=console, auto_refresh=False,
                                  transient=False)
        self._progress.start()
        total = pl_module.total_env_steps
        self._task = self._progress.add_task("fit", total=total, completed=self._start_steps, info="starting")
        self._progress.refresh()

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        if not (self._enabled and trainer.is_global_zero):
            return
        self.track_eval(trainer)
        now = time.monotonic()
        if self._progress is not None:
            if now - self._last_output >= self.refresh_interval_s:
                self._redraw(pl_module)
                self._last_output = now
        elif now - self._last_output >= self.print_interval_s:
            print(self.format_line(self.fields(pl_module)), file=self._stream, flush=True)
            self._last_output = now

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: Any) -> None:
        if not trainer.is_global_zero:
            return
        self.track_eval(trainer)  # an evaluation at this epoch's end counts even if nothing is drawn
        if self._progress is not None:
            self._redraw(pl_module)  # shows a new eval return at once

    def _redraw(self, pl_module: Any) -> None:
        fields = self.fields(pl_module)
        width = max(20, self._progress.console.width - 1)
        self._progress.update(self._task, completed=fields["steps"], info=self.format_fitted(fields, width))
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
        if not (self._enabled and trainer.is_global_zero and self._training):
            return  # failed before training started: the error says it all
        self.track_eval(trainer)
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
                # Lightning prints the monitored value in full (480.45001220703125): two decimals say it.
                message = re.sub(r"\d+\.\d{3,}", lambda m: f"{float(m.group()):.2f}", message)
                return f"{kind}: {message}" if message else kind
        if pl_module.budget_reached:
            total, steps = int(pl_module.total_env_steps), int(pl_module.global_env_steps)
            if steps >= total:
                return f"budget: total_env_steps={total:,} reached"
            # A budget that is not a whole number of iterations ends at the last whole one.
            return (f"budget: {steps:,} of total_env_steps={total:,} (one more iteration of "
                    f"{int(pl_module.steps_per_iteration):,} would pass it)")
        return "Trainer limit (max_epochs, max_steps or max_time)"

    def summarize(self, trainer: pl.Trainer, pl_module: Any) -> list[str]:
        """The end summary's lines (the eval line only when the run evaluated)."""
        fields = self.fields(pl_module)
        checkpoint, best = _checkpoint_paths(trainer)
        run_dir = run_dir_of(checkpoint) if checkpoint else None
        target = run_dir if run_dir is not None else checkpoint
        start = self.process_start if self.process_start is not None else self._fit_start
        wall = time.monotonic() - start if start is not None else fields["elapsed_s"]
        reason = self.stop_reason(trainer, pl_module)
        lines = [
            f"stopped: {reason}",
            f"env steps: {fields['steps']:,}" + (f" of {fields['total']:,}" if fields["total"] else ""),
            f"wall time: {format_duration(wall)} ({fields['rate']:,.0f} env steps/s)",
            f"last mean return: {_fmt(fields['return_mean'])}",
        ]
        if self.best_eval_return is not None:
            saved = "" if best is not None else " (no best.ckpt: the evaluation saves none)"
            lines.append(f"best eval return: {_fmt(self.best_eval_return)}{saved}")
        lines.append(f"checkpoint: {checkpoint or 'none saved'}")
        if best is not None:
            lines.append(f"best checkpoint: {best}")
        if target is not None:
            lines.append(f"play it: lightning-rl play {shlex.quote(str(target))}")
        resume = self.resume_command(checkpoint, run_dir)
        if resume is not None and not reason.startswith(("budget", "return threshold", "early stopping")):
            lines.append(f"resume it: {resume}")
        return lines

    def resume_command(self, checkpoint: str | None, run_dir: Any) -> str | None:
        """The command that continues this run from ``checkpoint``: its run's ``config.yaml`` (which
        holds every override) with ``--ckpt_path``; the command that started it with ``--ckpt_path``
        for a run outside a run directory; None without a checkpoint or a known command."""
        if checkpoint is None:
            return None
        if run_dir is not None and (run_dir / "config.yaml").is_file():
            command = ["lightning-rl", "fit", "--config", str(run_dir / "config.yaml")]
        elif self.command is not None:
            command = [*self.command]
            for i, arg in enumerate(command):  # the given --ckpt_path is replaced
                if arg == "--ckpt_path" and i + 1 < len(command):
                    del command[i: i + 2]
                    break
            command = [a for a in command if not a.startswith("--ckpt_path=")]
        else:
            return None
        return shlex.join([*command, "--ckpt_path", str(checkpoint)])


def _short(value: float) -> str:
    """A count in a few characters: ``950``, ``2.1k``, ``200k``, ``1.5M``."""
    for limit, suffix in ((1e6, "M"), (1e3, "k")):
        if value >= limit:
            scaled = value / limit
            return f"{scaled:.1f}{suffix}" if scaled < 10 and scaled != int(scaled) else f"{scaled:.0f}{suffix}"
    return f"{value:.0f}"


def _eta_target(fields: dict[str, Any]) -> str:
    """What the ETA counts to, short: ``(to 200k)``, ``(200k or return ≥475)``, ``(to max_epochs)``."""
    target, label, threshold = fields["target"], fields["target_label"], fields["threshold"]
    if target is None:
        return f"(at {threshold})" if threshold else ""
    where = _short(target) if label == "budget" else f"{label} {_short(target)}"
    return f"({where} or {threshold})" if threshold else f"(to {where})"


def _eta_text(fields: dict[str, Any], short: bool, with_target: bool = True) -> str:
    """``ETA 1:05``, ``ETA ≤1:05`` when a threshold may stop the run first, with what it counts to."""
    bound = "≤" if fields["threshold"] else ""
    eta = f"ETA {bound}{format_duration(fields['eta_s'])}"
    if not with_target:
        return eta
    if short:
        target = _eta_target(fields)
        return f"{eta} {target}" if target else eta
    target, label, threshold = fields["target"], fields["target_label"], fields["threshold"]
    if target is None:
        return f"{eta} (no budget" + (f"; stops at {threshold})" if threshold else ")")
    counted = f"the {target:,}-step budget" if label == "budget" else f"{label} ({target:,} env steps)"
    return f"{eta} (to {counted}" + (f"; stops earlier at {threshold})" if threshold else ")")


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
