"""The generated parts of the algorithm pages (``docs/algorithms/``), expanded by ``hooks.py``.

Two directives, each an HTML comment alone on its line (invisible if a page is read unbuilt):

- ``<!-- hyperparameters: lightning_rl.algos.PPO -->`` becomes the class's hyperparameter table,
  ``lightning_rl.algos.hparams.markdown_table(cls)``: every hyperparameter with its type, default,
  meaning and declaring class, from the declarations the class's ``__init__`` is built from, so
  a page's table is the code's at every build (in a ``div.hyperparameters``, whose column widths
  ``docs/algorithms/algorithms.css`` sets).
- ``<!-- learning-results: ppo -->`` (or several names, ``r2d1 dqn``) becomes a table of every
  learning measurement of those algorithms under ``benchmarks/results/<cell>/learning.csv``
  (written by ``benchmarks/learning.py``): per cell the last env-step point, each system's mean
  +- sample standard deviation over seeds (each seed's value in brackets) and mean wall time,
  then the cell's figure (drawn from the same CSV by ``figures.py`` as
  ``benchmarks/figures/<cell>.png``).

A directive naming an unknown class or an algorithm without measurements fails the build.
"""

from __future__ import annotations

import csv
import importlib
import re
import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

HYPERPARAMETERS = re.compile(r"^<!-- hyperparameters: (?P<target>[\w.]+) -->$", re.MULTILINE)
LEARNING_RESULTS = re.compile(r"^<!-- learning-results: (?P<algorithms>\w+(?: \w+)*) -->$", re.MULTILINE)
CODE_SPAN = re.compile(r"`[^`\n]*`")
SYSTEMS = {"lightning_rl": "lightning_rl", "sb3": "Stable-Baselines3"}


class DirectiveError(ValueError):
    """A directive that cannot be expanded (the build turns it into a ``PluginError``)."""


def resolve(target: str) -> type:
    """The class ``module.Name`` names (``lightning_rl.algos.PPO``)."""
    module_name, _, name = target.rpartition(".")
    try:
        value = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError, ValueError) as error:
        raise DirectiveError(f"hyperparameters: cannot import {target!r}: {error}") from error
    if not isinstance(value, type):
        raise DirectiveError(f"hyperparameters: {target!r} is not a class")
    return value


def hyperparameter_table(target: str) -> str:
    """The Markdown table of the class ``target``'s hyperparameters (``markdown_table``)."""
    from lightning_rl.algos.hparams import hyperparameters, markdown_table

    cls = resolve(target)
    if not hyperparameters(cls):
        raise DirectiveError(f"hyperparameters: {target!r} declares no hyperparameters")
    # markdown_table escapes the pipe of a union type (`float \| None`) as GitHub's tables need;
    # Python-Markdown's tables never split a cell inside a code span and would show the backslash.
    table = CODE_SPAN.sub(lambda span: span.group().replace("\\|", "|"), markdown_table(cls))
    # In a div of its own, for the column widths of algorithms.css.
    return f'<div class="hyperparameters" markdown>\n\n{table}\n\n</div>'


@dataclass(frozen=True)
class Cell:
    """The last env-step point of one ``learning.csv``: per system, each seed's return and wall time."""

    name: str
    env: str
    env_steps: int
    returns: dict[str, dict[int, float]]
    walls: dict[str, dict[int, float]]


#: The algorithm SB3's runs of a cell are filed under, where it is not ours: PettingZoo's SB3 recipe
#: trains one shared PPO beside our multi-agent PPOs.
SB3_COUNTERPART = {"mappo": "ppo", "ippo": "ppo"}


def read_cells(algorithm: str, root: Path = ROOT) -> list[Cell]:
    """Every ``benchmarks/results/<cell>/learning.csv`` in which lightning_rl ran ``algorithm``, at
    its last env-step point, with the SB3 runs of the same cell (a ``sb3*`` system running
    ``algorithm`` or its :data:`SB3_COUNTERPART`) beside it as ``sb3``."""
    counterpart = SB3_COUNTERPART.get(algorithm, algorithm)
    cells = []
    for path in sorted((root / "benchmarks" / "results").glob("*/learning.csv")):
        with path.open() as fh:
            # Multi-agent reports add a row per agent beside the team's: the team's count.
            rows = [row for row in csv.DictReader(fh) if row.get("agent", "team") == "team"]
        ours = [row for row in rows if row["system"] == "lightning_rl" and row["algorithm"] == algorithm]
        if not ours:
            continue
        theirs = [row for row in rows if row["system"].startswith("sb3") and row["algorithm"] == counterpart]
        last = max(int(row["env_steps"]) for row in ours)
        returns: dict[str, dict[int, float]] = defaultdict(dict)
        walls: dict[str, dict[int, float]] = defaultdict(dict)
        for row in ours + theirs:
            if int(row["env_steps"]) == last:
                system = "sb3" if row["system"].startswith("sb3") else row["system"]
                returns[system][int(row["seed"])] = float(row["return"])
                walls[system][int(row["seed"])] = float(row["wall_seconds"])
        cells.append(Cell(path.parent.name, ours[0]["env"], last, dict(returns), dict(walls)))
    return cells


def number(value: float) -> str:
    """A return as the pages print it: no decimals from 100 on, one below."""
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.1f}"


def summary(returns: dict[int, float]) -> str:
    """``mean +- std (seed values)`` over seeds (sample standard deviation, as benchmarks/learning.py);
    one seed's value alone."""
    values = [returns[seed] for seed in sorted(returns)]
    if len(values) == 1:
        return number(values[0])
    spread = statistics.stdev(values) if len(values) > 1 else 0.0
    seeds = ", ".join(number(v) for v in values)
    return f"{number(statistics.mean(values))} ± {number(spread)} ({seeds})"


def steps(env_steps: int) -> str:
    """An env-step count as the pages print it: 1M, 200k, 1,500."""
    if env_steps % 1_000_000 == 0:
        return f"{env_steps // 1_000_000}M"
    if env_steps % 1_000 == 0:
        return f"{env_steps // 1_000}k"
    return f"{env_steps:,}"


def learning_results(algorithms: str, root: Path = ROOT) -> str:
    """The table of the learning measurements of ``algorithms`` (names separated by spaces) and
    their figures (see the module docstring); with several, an algorithm column leads."""
    names = algorithms.split()
    cells = [(name, cell) for name in names for cell in read_cells(name, root)]
    missing = [name for name in names if not any(n == name for n, _ in cells)]
    if missing:
        raise DirectiveError(f"learning-results: no benchmarks/results/*/learning.csv has algorithm {missing[0]!r}")
    several = len(names) > 1
    header = ["env", "env steps", "seeds", "lightning_rl", "Stable-Baselines3", "wall s, ours / SB3"]
    header = ["algorithm", *header] if several else header
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name, cell in cells:
        ours = cell.returns.get("lightning_rl", {})
        theirs = cell.returns.get("sb3", {})
        seeds = sorted(set(ours) | set(theirs))
        walls = [
            f"{statistics.mean(cell.walls[system].values()):.0f}" if system in cell.walls else "-"
            for system in SYSTEMS
        ]
        row = [cell.env, steps(cell.env_steps), ", ".join(map(str, seeds)), summary(ours) if ours else "-",
               summary(theirs) if theirs else "no run", " / ".join(walls)]
        lines.append("| " + " | ".join([name.upper(), *row] if several else row) + " |")
    figures: dict[str, list[str]] = defaultdict(list)  # one figure per cell, however many algorithms it holds
    for name, cell in cells:
        figures[cell.name].append(name.upper())
    for name, cell in cells:
        if cell.name not in figures:
            continue
        title = f"{' and '.join(figures.pop(cell.name))}, {cell.env}" if several else cell.env
        lines += [
            "",
            f"**{title}, {steps(cell.env_steps)} env steps** (`benchmarks/results/{cell.name}/`):",
            "",
            f"![{cell.name}: return against env steps](../benchmarks/figures/{cell.name}.png)",
        ]
    return "\n".join(lines)


def expand(markdown: str, root: Path = ROOT) -> str:
    """``markdown`` with both directives replaced (raises :class:`DirectiveError` on a bad one)."""
    markdown = HYPERPARAMETERS.sub(lambda match: hyperparameter_table(match["target"]), markdown)
    return LEARNING_RESULTS.sub(lambda match: learning_results(match["algorithms"], root), markdown)
