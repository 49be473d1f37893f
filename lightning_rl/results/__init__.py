"""Results across runs and seeds: read a directory tree of runs, tabulate, aggregate (mean, IQM, bootstrap
confidence intervals) and plot learning curves; ``lightning-rl results <dir>`` on the command line.

Example::

    from lightning_rl.results import read_runs, summarize, format_text, plot_summary

    summary = summarize(read_runs("grids/ppo_lr"))
    print(format_text(summary))
    plot_summary(summary, "curves.png")   # needs matplotlib (the `plot` extra)
"""

from __future__ import annotations

from lightning_rl.results.cli import Summary, format_csv, format_markdown, format_text, summarize
from lightning_rl.results.plot import plot_summary
from lightning_rl.results.reader import Curve, Run, find_run_dirs, read_run, read_runs
from lightning_rl.results.stats import bootstrap_ci, curve_band, iqm, mean

__all__ = [
    "Curve", "Run", "Summary", "bootstrap_ci", "curve_band", "find_run_dirs", "format_csv", "format_markdown",
    "format_text", "iqm", "mean", "plot_summary", "read_run", "read_runs", "summarize",
]

