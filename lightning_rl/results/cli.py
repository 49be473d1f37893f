"""``lightning-rl results <dir>``: a table per (algorithm, env) of the runs under a directory, across seeds.

Examples::

    lightning-rl results grids/ppo_lr                       # a table per (algo, env): every run, then every variant
    lightning-rl results runs --metric train/return_mean    # another scalar (no fallback then)
    lightning-rl results grids/ppo_lr --plot curves.png     # + learning curves (needs the `plot` extra)
    lightning-rl results grids/ppo_lr --format markdown > results.md    # or csv

Per run (one row per run, named by its run directory): the seed, the final value of the metric (its last
logged point), the best value, the env steps (the last logged step of any scalar: the x-axis is env steps)
and the wall time (the run's own record, as ``fit``'s summary says it). Per variant: the number of runs
and of distinct seeds, the mean and the IQM of the final values, and a stratified percentile
bootstrap confidence interval of the IQM (:mod:`lightning_rl.results.stats`, rliable's definitions). Runs
and variants are found as :mod:`lightning_rl.results.reader` describes. The default metric is
``eval/return_mean`` (the evaluation callback's); a run that logged none uses ``train/return_mean`` (the
mean return of recent training episodes), marked ``*`` and named in a note, and a run that logged
neither is listed with ``-``: every run found is in its table.
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import io
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lightning_rl.results import stats
from lightning_rl.results.reader import Run, read_runs
from lightning_rl.results.summary import RunRow, Summary, Table, VariantRow

DEFAULT_METRIC = "eval/return_mean"
FALLBACK_METRIC = "train/return_mean"
FORMATS = ("table", "csv", "markdown")
PROG = "lightning-rl results"


def _sort_value(value: Any) -> tuple[int, Any]:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return (1, str(value))
    return (0, float(value))


def _variant_key(run: Run) -> tuple[Any, ...]:
    """Sort key of a run's variant: its keys and values in order, numbers numerically."""
    if not run.variant:
        return ((1, run.variant_label),)
    return tuple((key, _sort_value(value)) for key, value in sorted(run.variant.items()))


def _seed_key(row: RunRow) -> tuple[int, int, str]:
    seed = row.run.seed
    return (0, seed, str(row.run.path)) if seed is not None else (1, 0, str(row.run.path))


def summarize(
    runs: Sequence[Run],
    metric: str = DEFAULT_METRIC,
    fallback: str | None = FALLBACK_METRIC,
    confidence: float = 0.95,
    reps: int = 2000,
    seed: int = 0,
) -> Summary:
    """Group runs by (algorithm, env) and variant and aggregate the final values of ``metric``.

    Every run is a row of its table: one that did not log ``metric`` reports ``fallback`` instead
    (marked in the tables, named in a note), one that logged neither has no values (``-``, left out
    of the aggregates, named in a note).

    Args:
        runs: Runs read by :func:`~lightning_rl.results.reader.read_runs`.
        metric: The scalar tag to report.
        fallback: Used instead of ``metric`` for each run that did not log ``metric``; None: no fallback.
        confidence: Confidence level of the IQM intervals, in (0, 1).
        reps: Bootstrap replicates per interval.
        seed: Seed of the bootstrap generator (the same runs give the same table).

    Returns:
        The tables and notes.

    Raises:
        ValueError: If no run logged ``metric`` (or ``fallback``), naming the tags that were logged; or if
            ``confidence`` or ``reps`` is out of range.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if reps < 1:
        raise ValueError(f"reps must be >= 1, got {reps}")
    notes: list[str] = []
    by_task: dict[tuple[str, str], list[Run]] = {}
    for run in runs:
        by_task.setdefault((run.algo, run.env), []).append(run)
    tables: list[Table] = []
    for (algo, env), task_runs in sorted(by_task.items()):
        name = f"{algo} {env}"
        rows = [_row(run, metric, fallback) for run in task_runs]
        if not any(row.metric for row in rows):
            continue
        used = metric if any(row.metric == metric for row in rows) else rows[0].metric
        fell_back = [row for row in rows if row.metric and row.metric != used]
        if fell_back:
            paths = ", ".join(str(row.run.path) for row in fell_back)
            notes.append(f"{name}: {len(fell_back)} run(s) without {used} show {fallback} instead (marked *): {paths}")
        elif used != metric:
            notes.append(f"{name}: no run logged {metric}; final and best are {used} instead")
        empty = [row for row in rows if not row.metric]
        if empty:
            paths = ", ".join(str(row.run.path) for row in empty)
            wanted = metric if fallback is None else f"{metric} or {fallback}"
            notes.append(f"{name}: {len(empty)} run(s) logged no {wanted} (shown with -): {paths}")
        table = Table(algo=algo, env=env, metric=used)
        by_variant: dict[tuple[Any, ...], list[RunRow]] = {}
        for row in rows:
            by_variant.setdefault(_variant_key(row.run), []).append(row)
        for _key, variant_rows in sorted(by_variant.items()):
            variant_rows.sort(key=_seed_key)
            table.runs.extend(variant_rows)
            table.variants.append(_aggregate(name, variant_rows, confidence, reps, seed, notes))
        tables.append(table)
    if not tables:
        logged = sorted({tag for run in runs for tag in run.scalars})
        wanted = metric if fallback is None else f"{metric} (nor {fallback})"
        shown = ", ".join(logged[:20]) + (", ..." if len(logged) > 20 else "") if logged else "none"
        raise ValueError(f"no run logged {wanted}; the runs logged: {shown}")
    return Summary(tables=tables, notes=notes, confidence=confidence)


def _has(run: Run, tag: str) -> bool:
    return tag in run.scalars and len(run.scalars[tag].values) > 0


def _row(run: Run, metric: str, fallback: str | None) -> RunRow:
    """A run's row: ``metric`` where it logged it, else ``fallback``, else no values."""
    for tag in (metric, fallback):
        if tag is not None and _has(run, tag):
            values = run.scalars[tag].values
            return RunRow(run=run, final=float(values[-1]), best=float(values.max()), metric=tag)
    return RunRow(run=run, final=math.nan, best=math.nan, metric="")


def _aggregate(
    name: str, rows: list[RunRow], confidence: float, reps: int, seed: int, notes: list[str]
) -> VariantRow:
    label = rows[0].run.variant_label
    seeds = [row.run.seed for row in rows]
    rows = [row for row in rows if row.metric]
    if not rows:
        return VariantRow(label=label, seeds=seeds, mean=math.nan, iqm=math.nan, ci=None)
    finals = np.array([row.final for row in rows])
    if len({row.metric for row in rows}) > 1:
        notes.append(f"{name}, {label}: the aggregates mix {' and '.join(sorted({row.metric for row in rows}))}")
    if len(rows) == 1:
        notes.append(f"{name}, {label}: a single seed; no confidence interval")
    known = [s for s in seeds if s is not None]
    if len(set(known)) < len(known):
        notes.append(f"{name}, {label}: several runs share a seed ({', '.join(str(s) for s in known)})")
    ends = {row.run.env_steps for row in rows}
    if len(ends) > 1:
        low = min(e for e in ends if e is not None) if any(e is not None for e in ends) else 0
        high = max(e for e in ends if e is not None) if any(e is not None for e in ends) else 0
        notes.append(
            f"{name}, {label}: runs end at different env steps ({low:,} to {high:,}); final values are each "
            "run's last point, curves are plotted up to the shortest run"
        )
    return VariantRow(
        label=label, seeds=seeds, mean=stats.mean(finals), iqm=stats.iqm(finals),
        ci=stats.bootstrap_ci(finals, "iqm", confidence=confidence, reps=reps, seed=seed),
    )


def format_number(value: float | None) -> str:
    """A return for a table: two decimals, ``-`` for None or NaN."""
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value:.2f}"


def format_duration(seconds: float | None) -> str:
    """``12.3 s`` below a minute, else ``H:MM:SS``; ``-`` when unknown."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    if seconds < 60:
        return f"{seconds:.1f} s"
    whole = int(round(seconds))
    return f"{whole // 3600}:{whole % 3600 // 60:02d}:{whole % 60:02d}"


def _ci_text(ci: tuple[float, float] | None) -> str:
    return f"[{format_number(ci[0])}, {format_number(ci[1])}]" if ci is not None else "n/a (1 seed)"


def _title(table: Table) -> str:
    return f"{table.algo} {table.env}: {table.metric}"


RUN_COLUMNS = ("variant", "run", "seed", "final", "best", "env steps", "wall time")


def _variant_columns(confidence: float) -> tuple[str, ...]:
    return ("variant", "runs", "seeds", "mean", "IQM", f"IQM {100 * confidence:g}% CI")


def _run_cells(row: RunRow, table: Table) -> list[str]:
    steps = row.run.env_steps
    mark = " *" if row.metric and row.metric != table.metric else ""
    return [
        row.run.variant_label, row.run.path.name, "-" if row.run.seed is None else str(row.run.seed),
        format_number(row.final) + mark, format_number(row.best) + mark, "-" if steps is None else f"{steps:,}",
        format_duration(row.run.wall_time_s),
    ]


def _variant_cells(row: VariantRow) -> list[str]:
    distinct = len({s for s in row.seeds if s is not None}) + sum(s is None for s in row.seeds)
    return [row.label, str(len(row.seeds)), str(distinct), format_number(row.mean), format_number(row.iqm),
            _ci_text(row.ci)]


def _plain_table(header: Sequence[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=True)]
    # Text left-aligned, numbers right-aligned, as a reader scans them.
    lines = []
    for cells in [list(header), *rows]:
        pairs = enumerate(zip(cells, widths, strict=True))
        parts = [cell.ljust(width) if i == 0 else cell.rjust(width) for i, (cell, width) in pairs]
        lines.append("  ".join(parts).rstrip())
    return lines


def format_text(summary: Summary) -> str:
    """The tables as aligned plain text, then the notes (``note: ...``)."""
    lines: list[str] = []
    for table in summary.tables:
        lines.append(_title(table))
        lines.extend(_plain_table(RUN_COLUMNS, [_run_cells(row, table) for row in table.runs]))
        lines.append("")
        lines.extend(_plain_table(_variant_columns(summary.confidence), [_variant_cells(v) for v in table.variants]))
        lines.append("")
    lines.extend(f"note: {note}" for note in summary.notes)
    return "\n".join(lines).rstrip() + "\n"


def _markdown_table(header: Sequence[str], rows: list[list[str]]) -> list[str]:
    rule = "|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|"
    lines = ["| " + " | ".join(header) + " |", rule]
    lines.extend("| " + " | ".join(cells) + " |" for cells in rows)
    return lines


def format_markdown(summary: Summary) -> str:
    """The tables in Markdown (a heading per (algorithm, env)), then the notes as a list."""
    lines: list[str] = []
    for table in summary.tables:
        lines.extend([f"### {_title(table)}", ""])
        lines.extend(_markdown_table(RUN_COLUMNS, [_run_cells(row, table) for row in table.runs]))
        lines.append("")
        lines.extend(_markdown_table(_variant_columns(summary.confidence),
                                     [_variant_cells(v) for v in table.variants]))
        lines.append("")
    if summary.notes:
        lines.extend(f"- note: {note}" for note in summary.notes)
    return "\n".join(lines).rstrip() + "\n"


CSV_COLUMNS = (
    "algo", "env", "metric", "kind", "variant", "seed", "seeds", "final", "best", "env_steps", "wall_time_s",
    "mean", "iqm", "ci_low", "ci_high", "path",
)


def format_csv(summary: Summary) -> str:
    """One CSV: a ``kind=run`` row per run and a ``kind=variant`` row per variant, full precision;
    cells that do not apply are empty."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for table in summary.tables:
        common = {"algo": table.algo, "env": table.env, "metric": table.metric}
        for row in table.runs:
            writer.writerow({
                **common, "metric": row.metric, "kind": "run", "variant": row.run.variant_label,
                "seed": "" if row.run.seed is None else row.run.seed, "final": repr(row.final),
                "best": repr(row.best), "env_steps": "" if row.run.env_steps is None else row.run.env_steps,
                "wall_time_s": "" if row.run.wall_time_s is None else repr(row.run.wall_time_s),
                "path": str(row.run.path),
            })
        for variant in table.variants:
            writer.writerow({
                **common, "kind": "variant", "variant": variant.label,
                "seeds": " ".join("-" if s is None else str(s) for s in variant.seeds),
                "mean": repr(variant.mean), "iqm": repr(variant.iqm),
                "ci_low": "" if variant.ci is None else repr(variant.ci[0]),
                "ci_high": "" if variant.ci is None else repr(variant.ci[1]),
            })
    return buffer.getvalue()


def print_rich(summary: Summary, file: Any = None) -> None:
    """The tables as Rich tables (for a terminal), then the notes.

    Args:
        summary: What to print.
        file: Where to print; default stdout.
    """
    from rich.console import Console
    from rich.table import Table as RichTable

    console = Console(file=file)
    for table in summary.tables:
        runs = RichTable(title=_title(table), title_justify="left")
        for i, column in enumerate(RUN_COLUMNS):
            runs.add_column(column, justify="left" if i == 0 else "right")
        for row in table.runs:
            runs.add_row(*_run_cells(row, table))
        console.print(runs)
        variants = RichTable()
        for i, column in enumerate(_variant_columns(summary.confidence)):
            variants.add_column(column, justify="left" if i == 0 else "right")
        for variant in table.variants:
            variants.add_row(*_variant_cells(variant))
        console.print(variants)
    for note in summary.notes:
        console.print(f"note: {note}", markup=False, highlight=False)


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``lightning-rl results``."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="A table per (algorithm, env) of the runs under a directory: final and best return per "
        "seed, then per variant the mean, the IQM and its bootstrap confidence interval across seeds.",
    )
    parser.add_argument("dir", help="a directory tree holding runs (a grid, runs/, one run directory)")
    parser.add_argument(
        "--metric", default=None,
        help=f"scalar tag to report; default {DEFAULT_METRIC}, or {FALLBACK_METRIC} for each run that did not "
        "evaluate (marked *)",
    )
    parser.add_argument("--plot", default=None, metavar="OUT.png",
                        help="also write learning curves to this PNG (needs the plot extra: matplotlib)")
    parser.add_argument("--format", default="table", choices=FORMATS,
                        help="table (default): Rich on a terminal, plain text otherwise; csv and markdown for files")
    parser.add_argument("--confidence", type=float, default=0.95,
                        help="confidence level of the IQM intervals (default 0.95)")
    parser.add_argument("--reps", type=int, default=2000, help="bootstrap replicates per interval (default 2000)")
    return parser


def _error(message: str) -> int:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return 2


def main(argv: list[str]) -> int:
    """Run ``lightning-rl results`` with ``argv`` (the arguments after ``results``); the exit status.

    Bad input (no directory, no runs, no run with the metric, a ``--plot`` path that is not ``.png``,
    matplotlib missing for ``--plot``) is reported as ``lightning-rl results: error: ...`` with status 2.
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # --help (0) or a usage error (2), already printed by argparse
        return int(exit_.code or 0)
    if args.plot is not None:
        if Path(args.plot).suffix.lower() != ".png":
            return _error(f"--plot writes a PNG file; got {args.plot!r} (give a path ending in .png)")
        if importlib.util.find_spec("matplotlib") is None:
            return _error("--plot needs matplotlib, which is not installed: pip install 'lightning-rl[plot]'")
    metric = args.metric if args.metric is not None else DEFAULT_METRIC
    fallback = FALLBACK_METRIC if args.metric is None else None
    try:
        runs = read_runs(args.dir)
        summary = summarize(runs, metric=metric, fallback=fallback, confidence=args.confidence, reps=args.reps)
    except ValueError as error:
        return _error(str(error))
    # CSV keeps stdout machine-readable: notes and the plot's path go to stderr there.
    side = sys.stderr if args.format == "csv" else sys.stdout
    if args.format == "csv":
        sys.stdout.write(format_csv(summary))
        for note in summary.notes:
            print(f"note: {note}", file=sys.stderr)
    elif args.format == "markdown":
        sys.stdout.write(format_markdown(summary))
    elif sys.stdout.isatty():
        print_rich(summary)
    else:
        sys.stdout.write(format_text(summary))
    if args.plot is not None:
        from lightning_rl.results.plot import plot_summary

        try:
            plot_summary(summary, args.plot, confidence=args.confidence)
        except ValueError as error:
            return _error(str(error))
        print(f"wrote {args.plot}", file=side)
    return 0
