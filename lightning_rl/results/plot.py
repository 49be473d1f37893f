"""Learning curves of a results summary as a PNG: one subplot per (algorithm, env), one line per variant.

Each line is the mean across the variant's seeds against env steps, with a percentile bootstrap band
(:func:`~lightning_rl.results.stats.curve_band`) where there are two seeds or more. Seeds' curves are
interpolated linearly onto a common grid: the union of their logged steps from the latest first step to
the earliest last step, so a mean never mixes a seed's real points with another seed's extrapolation.

Needs matplotlib (the ``plot`` extra), imported when a plot is made; the figure is drawn without pyplot
(no GUI backend, no global figure state).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from lightning_rl.results import stats
from lightning_rl.results.summary import RunRow, Summary

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def common_grid(rows: list[RunRow], metric: str) -> tuple[np.ndarray, np.ndarray] | None:
    """The seeds' curves of ``metric`` on a common env-step grid (module docstring).

    Returns:
        ``(steps [G], values [seeds, G])``; None if the seeds' step ranges do not overlap.
    """
    curves = [row.run.scalars[metric] for row in rows]
    low = max(int(curve.steps[0]) for curve in curves)
    high = min(int(curve.steps[-1]) for curve in curves)
    if low > high:
        return None
    union = np.unique(np.concatenate([curve.steps for curve in curves]))
    grid = union[(union >= low) & (union <= high)]
    values = np.stack([np.interp(grid, curve.steps, curve.values) for curve in curves])
    return grid, values


def make_figure(summary: Summary, confidence: float = 0.95, reps: int = 1000, seed: int = 0) -> Figure:
    """The learning curves of ``summary`` as a matplotlib ``Figure`` (not shown, not saved).

    Args:
        summary: From :func:`~lightning_rl.results.cli.summarize`; each table's ``metric`` is plotted.
        confidence: Coverage of the bands.
        reps: Bootstrap replicates per band.
        seed: Seed of the bootstrap generator.

    Raises:
        ValueError: If ``summary`` has no table.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if not summary.tables:
        raise ValueError("nothing to plot: the summary has no table")
    count = len(summary.tables)
    columns = min(count, 3)
    rows_count = math.ceil(count / columns)
    figure = Figure(figsize=(5.5 * columns, 4.0 * rows_count), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(rows_count, columns, squeeze=False).ravel()
    for ax, table in zip(axes, summary.tables, strict=False):
        by_label: dict[str, list[RunRow]] = {}
        for row in table.runs:
            if row.metric == table.metric:  # the curves of one scalar (runs marked * or - have none of it)
                by_label.setdefault(row.run.variant_label, []).append(row)
        for label, variant_rows in by_label.items():
            grid = common_grid(variant_rows, table.metric)
            if grid is None:
                continue
            steps, values = grid
            center, low, high = stats.curve_band(values, confidence=confidence, reps=reps, seed=seed)
            seeds = f"{len(variant_rows)} seed" + ("s" if len(variant_rows) > 1 else "")
            (line,) = ax.plot(steps, center, label=f"{label} ({seeds})")
            if len(variant_rows) > 1:
                ax.fill_between(steps, low, high, color=line.get_color(), alpha=0.2, linewidth=0)
        ax.set_title(f"{table.algo} {table.env}")
        ax.set_xlabel("env steps")
        ax.set_ylabel(table.metric)
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize="small")
    for ax in axes[count:]:
        ax.set_visible(False)
    figure.suptitle(f"mean across seeds, {100 * confidence:g}% bootstrap band")
    return figure


def plot_summary(
    summary: Summary, path: str | os.PathLike, confidence: float = 0.95, reps: int = 1000, seed: int = 0
) -> Path:
    """Write the learning curves of ``summary`` (:func:`make_figure`) to ``path`` as a PNG.

    Args:
        summary: From :func:`~lightning_rl.results.cli.summarize`.
        path: The PNG to write (parent directories are created).
        confidence: Coverage of the bands.
        reps: Bootstrap replicates per band.
        seed: Seed of the bootstrap generator.

    Returns:
        The path written.

    Raises:
        ValueError: If ``summary`` has no table.
    """
    figure = make_figure(summary, confidence=confidence, reps=reps, seed=seed)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="png", dpi=100)
    return path
