"""What ``lightning-rl results`` computes: the rows and tables of a summary (the text, CSV and Markdown
formats in :mod:`lightning_rl.results.cli` and the plot in :mod:`lightning_rl.results.plot` read them)."""

from __future__ import annotations

from dataclasses import dataclass, field

from lightning_rl.results.reader import Run

__all__ = ["RunRow", "Summary", "Table", "VariantRow"]


@dataclass
class RunRow:
    """One run's line of a table.

    Args:
        run: The run read.
        final: The metric's last logged value (NaN when the run logged neither metric nor fallback).
        best: The metric's largest value (NaN likewise).
        metric: The scalar ``final`` and ``best`` come from (the table's, or the fallback); "" for none.
    """

    run: Run
    final: float
    best: float
    metric: str = ""


@dataclass
class VariantRow:
    """One variant's aggregate over its seeds.

    Args:
        label: The variant's name (:func:`~lightning_rl.results.reader.variant_label`).
        seeds: The seeds of its runs, in table order (None where a config has no int seed).
        mean: Mean of the runs' final values.
        iqm: Interquartile mean of the runs' final values.
        ci: Bootstrap confidence interval of the IQM; None with a single run.
    """

    label: str
    seeds: list[int | None]
    mean: float
    iqm: float
    ci: tuple[float, float] | None


@dataclass
class Table:
    """The results of one (algorithm, env).

    Args:
        algo: The model's class name.
        env: The env id.
        metric: The scalar the values are taken from (the fallback where the requested one was not logged).
        runs: One row per run, grouped by variant, sorted by seed.
        variants: One row per variant.
    """

    algo: str
    env: str
    metric: str
    runs: list[RunRow] = field(default_factory=list)
    variants: list[VariantRow] = field(default_factory=list)


@dataclass
class Summary:
    """Tables and the notes on what was left out or approximated.

    Args:
        tables: One per (algorithm, env), sorted.
        notes: Plain sentences (missing metrics, fallbacks, single seeds, runs of different lengths).
        confidence: The confidence level of the intervals.
    """

    tables: list[Table]
    notes: list[str]
    confidence: float
