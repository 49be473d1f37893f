"""A Lightning callback that reports each evaluation to an Optuna trial and stops a pruned trial.

Optuna's own Lightning callback lives in ``optuna-integration`` and reads a logged metric at
validation end; here evaluation happens in :class:`~lightning_rl.callbacks.EvaluationCallback` at
train-epoch ends, and the step Optuna compares across trials must be env steps (epochs, updates
and batches differ between configs of one study). So this callback reads the evaluation
callback's result directly, right after it ran.
"""

from __future__ import annotations

from typing import Any, Protocol

import pytorch_lightning as pl

from lightning_rl.callbacks.evaluation import EvaluationCallback

__all__ = ["PruningCallback", "TrialLike"]


class TrialLike(Protocol):
    """The part of ``optuna.trial.Trial`` the callback uses (so a test can hand it a fake)."""

    def report(self, value: float, step: int) -> None: ...

    def should_prune(self) -> bool: ...


class PruningCallback(pl.Callback):
    """After each evaluation, ``trial.report(eval/return_mean, step=env steps)``; if the trial's
    pruner then says to prune, stop the trainer at the end of this epoch and set :attr:`pruned_at`.

    The caller turns a pruned fit into ``optuna.TrialPruned`` once ``fit`` has returned (raising
    inside a hook would make Lightning treat the run as crashed). It must come after the
    :class:`EvaluationCallback` in the trainer's callbacks, so it sees this epoch's evaluation.

    Args:
        trial: The Optuna trial (anything with ``report`` and ``should_prune``).
        monitor: The evaluation metric reported.

    Attributes:
        reported: ``(env_steps, value)`` per evaluation reported so far.
        pruned_at: Env steps of the evaluation after which the trial was pruned; None if it was not.
    """

    def __init__(self, trial: TrialLike, monitor: str = "eval/return_mean") -> None:
        self.trial = trial
        self.monitor = monitor
        self.reported: list[tuple[int, float]] = []
        self.pruned_at: int | None = None
        self._evaluation: EvaluationCallback | None = None
        self._seen: dict[str, float] | None = None

    def setup(self, trainer: pl.Trainer, pl_module: Any, stage: str) -> None:
        """Find the evaluation callback this one reads.

        Raises:
            ValueError: If the trainer has no :class:`EvaluationCallback`, or has it after this callback.
        """
        callbacks: list[pl.Callback] = list(trainer.callbacks)  # type: ignore[attr-defined]
        evaluations = [i for i, c in enumerate(callbacks) if isinstance(c, EvaluationCallback)]
        if not evaluations:
            raise ValueError(
                "PruningCallback needs an EvaluationCallback in trainer.callbacks (lightning_rl.callbacks."
                "EvaluationCallback)"
            )
        mine = next(i for i, c in enumerate(callbacks) if c is self)
        if evaluations[0] > mine:
            raise ValueError("PruningCallback must come after the EvaluationCallback in trainer.callbacks")
        evaluation = callbacks[evaluations[0]]
        assert isinstance(evaluation, EvaluationCallback)
        self._evaluation = evaluation

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: Any) -> None:
        evaluation = self._evaluation
        # EvaluationCallback replaces last_metrics with a new dict at each evaluation it runs.
        if evaluation is None or not evaluation.last_metrics or evaluation.last_metrics is self._seen:
            return
        self._seen = evaluation.last_metrics
        if self.monitor not in evaluation.last_metrics:
            known = sorted(evaluation.last_metrics)
            raise ValueError(f"PruningCallback: monitor {self.monitor!r} is not one of {known}")
        value, step = float(evaluation.last_metrics[self.monitor]), int(pl_module.global_env_steps)
        self.reported.append((step, value))
        self.trial.report(value, step)
        if self.trial.should_prune():
            self.pruned_at = step
            trainer.should_stop = True
