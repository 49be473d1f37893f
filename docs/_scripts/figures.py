"""The benchmark pages' figures, drawn from the CSVs under ``benchmarks/results/`` at each build.

- ``benchmarks/results/<cell>/learning.csv`` (written by ``benchmarks/learning.py``): one figure per
  cell, the return against env steps, one colour per system: the mean over seeds as a line, each
  seed as a thin line.
- ``benchmarks/results/measured/<table>.csv`` (the measured tables of the benchmark pages, one CSV
  each, with the command, machine and date in ``benchmarks/results/measured/README.md``): one bar
  chart per table, the CSV's first column as the groups and the columns named in ``BARS`` as bars.
"""

from __future__ import annotations

import csv
import io
import re
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLOURS = {"lightning_rl": "#5e35b1", "sb3": "#ef6c00", "lightning_rl mappo": "#5e35b1",
           "lightning_rl ippo": "#00897b", "sb3_supersuit": "#ef6c00", "sb3_supersuit ppo": "#ef6c00"}

# Bar charts of the measured tables: CSV name -> (title, x label, label columns, bar columns).
BARS: dict[str, tuple[str, str, list[str], list[str]]] = {
    "sampler_throughput_2core": (
        "Samplers, 2-core CPU (2026-11-24, slow host)", "env steps/s", ["env", "B"],
        ["raw", "AsyncVectorEnv", "Serial", "Cpu", "Gpu", "Alternating", "NoOverlapAlt"],
    ),
    "pong8_runs": (
        "Pong x 8, 2-core CPU, medians of three 3 s rounds (2026-11-24)", "env steps/s", ["run"],
        ["raw", "AsyncVectorEnv", "Serial", "Cpu", "Gpu", "Alternating", "NoOverlapAlt"],
    ),
    "pong8_vector_backends": (
        "Pong x 8 with the CNN policy on a 2-core CPU (2026-11-25)", "env steps/s", ["system"], ["env steps/s"],
    ),
    "sampler_throughput_h100": (
        "Pong with the policy on an H100, 16 vCPUs (2026-11-26)", "env steps/s", ["B"],
        ["`AsyncVectorEnv`", "`Serial`", "`Cpu`", "`Gpu`", "`Alternating`", "raw `AtariVectorEnv`",
         "`VectorSampler` random agent", "+ policy", "+ `overlap`"],
    ),
    "ppo_cartpole_time_to_475": (
        "PPO CartPole-v1: seconds to a mean return of 475, 8 seeds (2026-11-26)", "seconds (mean over seeds)",
        ["system"], ["mean s"],
    ),
    "dqn_cartpole_time_to_475": (
        "DQN CartPole-v1: seconds to an eval mean of 475", "seconds (mean over seeds)", ["system"], ["mean s"],
    ),
    "sac_updates": (
        "SAC HalfCheetah-v5 updates (256x256 MLPs, batch 256, 2-core CPU)", "updates/s", ["system"], ["updates/s"],
    ),
    "replay_sample": (
        "Replay sampling, 1M capacity (2-core CPU)", "microseconds per batch", ["shape", "buffer"], ["sample (µs)"],
    ),
    "async_throughput": (
        "Off-policy learning phase: synchronous vs asynchronous sampling (2026-11-25)", "seconds", ["case"],
        ["sync learning phase", "async learning phase", "bound `max(sample, train)`"],
    ),
}

NUMBER = re.compile(r"-?[0-9][0-9,]*(?:\.[0-9]+)?")


def number(cell: str) -> float:
    """The first number in a table cell (``"2,101 (another run)"`` -> 2101.0); 0 for none."""
    match = NUMBER.search(cell.replace("**", ""))
    return float(match.group().replace(",", "")) if match else 0.0


def _png(fig: plt.Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    return buffer.getvalue()


def learning_figure(csv_path: Path) -> bytes:
    """Return against env steps for every (system, seed) of one ``learning.csv``."""
    curves: dict[tuple[str, int], list[tuple[int, float]]] = defaultdict(list)
    title = ""
    with csv_path.open() as fh:
        rows = [r for r in csv.DictReader(fh) if r.get("agent", "team") == "team"]  # multi-agent: team returns
    algorithms = sorted({row["algorithm"] for row in rows})
    for row in rows:
        # Several algorithms of one system (MAPPO and IPPO) are told apart by name.
        system = row["system"] if len(algorithms) == 1 else f"{row['system']} {row['algorithm']}"
        curves[(system, int(row["seed"]))].append((int(row["env_steps"]), float(row["return"])))
        title = f"{'/'.join(a.upper() for a in algorithms)} {row['env']}"
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    systems = sorted({system for system, _ in curves})
    for system in systems:
        colour = COLOURS.get(system, "#455a64")
        seeds = sorted(seed for s, seed in curves if s == system)
        by_step: dict[int, list[float]] = defaultdict(list)
        for seed in seeds:
            points = sorted(curves[(system, seed)])
            ax.plot([p[0] for p in points], [p[1] for p in points], color=colour, alpha=0.3, linewidth=0.8)
            for step, value in points:
                by_step[step].append(value)
        steps = sorted(s for s, values in by_step.items() if len(values) == len(seeds))
        means = [sum(by_step[s]) / len(by_step[s]) for s in steps]
        ax.plot(steps, means, color=colour, linewidth=2, label=f"{system} (mean of {len(seeds)} seeds)")
    ax.set_title(title)
    ax.set_xlabel("env steps")
    ax.set_ylabel("mean return of the last 20 episodes")
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    return _png(fig)


def bar_figure(csv_path: Path, title: str, xlabel: str, label_columns: list[str], columns: list[str]) -> bytes:
    """Horizontal grouped bars: one group per CSV row, one bar per named column."""
    with csv_path.open() as fh:
        rows = list(csv.DictReader(fh))
    labels = [" ".join(row[c] for c in label_columns).replace("`", "") for row in rows]
    height = 0.8 / len(columns)
    fig, ax = plt.subplots(figsize=(7.0, 0.8 + 0.22 * len(rows) * max(len(columns), 2)))
    for i, column in enumerate(columns):
        values = [number(row[column]) for row in rows]
        positions = [r + i * height for r in range(len(rows))]
        ax.barh(positions, values, height=height * 0.9, label=column.replace("`", ""))
    ax.set_yticks([r + height * (len(columns) - 1) / 2 for r in range(len(rows))], labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    ax.set_title(title, fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    if len(columns) > 1:
        ax.legend(fontsize=7, loc="best")
    return _png(fig)


def draw_all(root: Path) -> Iterator[tuple[str, bytes]]:
    """(name, PNG bytes) for every figure of the benchmark pages."""
    results = Path(root) / "benchmarks" / "results"
    for csv_path in sorted(results.glob("*/learning.csv")):
        yield csv_path.parent.name, learning_figure(csv_path)
    for name, (title, xlabel, label_columns, columns) in BARS.items():
        yield name, bar_figure(results / "measured" / f"{name}.csv", title, xlabel, label_columns, columns)
