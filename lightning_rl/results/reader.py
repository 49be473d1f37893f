"""Find runs under any directory tree and read their logged scalars.

A *run* is a directory holding ``config.yaml`` (LightningCLI's resolved config) and TensorBoard event files
(``events.out.tfevents.*``) or a Lightning ``CSVLogger`` file (``metrics.csv``). This covers the run
directories ``runs/<algo>_<env>/<date-time>/`` of ``lightning-rl fit`` wherever they are, in particular
inside a grid: ``<grid_dir>/<variant_name>/runs/<group>/<date-time>/`` (what ``lightning-rl launch`` writes;
docs/guides/experiments.md, 'Grids').

* Its *variant* is the mapping in the nearest ``variant.yaml`` among the run directory and its ancestors,
  without the seed key ``seed_everything``; without a ``variant.yaml`` it is the run group (the run
  directory's parent's name, ``ppo_cartpole``).
* Its *seed* is ``seed_everything`` of its ``config.yaml``.
* Its algorithm and env are the model's class name and the sampler's ``env_id`` in ``config.yaml``.

Scalars are read with TensorBoard's ``EventAccumulator``, one event file at a time: a run resumed with
``--ckpt_path last`` writes a second file into the same directory, and a later file replaces the earlier
file's points from its own first step on (TensorBoard's purge rule), so a resumed run reads as one curve.
"""

from __future__ import annotations

import csv
import datetime
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from lightning_rl.runs import read_run_info

CONFIG_FILE = "config.yaml"
VARIANT_FILE = "variant.yaml"
RUN_INFO_FILE = "run_info.yaml"
CSV_FILE = "metrics.csv"
EVENT_PREFIX = "events.out.tfevents."
SEED_KEY = "seed_everything"
#: Directories never searched for runs (a run's own checkpoints and videos, hidden directories).
SKIPPED_DIRS = frozenset({"checkpoints", "videos", "__pycache__"})


@dataclass
class Curve:
    """One scalar's logged points, sorted by step.

    Args:
        steps: ``[N]`` int64 logger steps (env steps for lightning_rl runs).
        values: ``[N]`` float64 values.
    """

    steps: np.ndarray
    values: np.ndarray


@dataclass
class Run:
    """A run directory's identity and logged scalars (see the module docstring).

    Args:
        path: The run directory.
        algo: The model's class name (``PPO``), or ``?`` if ``config.yaml`` names none.
        env: The sampler's env id (``CartPole-v1``), or ``?``.
        group: The run group (the run directory's parent's name).
        variant: The variant's dotted keys and values, seed excluded; empty without ``variant.yaml``.
        variant_label: A readable name of the variant (:func:`variant_label`), the group without one.
        seed: ``seed_everything`` of ``config.yaml``; None if it is not an int.
        scalars: Tag -> curve.
        wall_time_s: Seconds the run ran: ``run_info.yaml``'s ``wall_time_s`` (its processes' time
            from start to end, as ``fit``'s summary says it), else the sum over its event files of
            the last minus the first event time (for CSV logs ``metrics.csv``'s modification time
            minus ``run_info.yaml``'s ``started_at``); None when unknown.
        source: ``"tensorboard"`` or ``"csv"``.
    """

    path: Path
    algo: str
    env: str
    group: str
    variant: dict[str, Any]
    variant_label: str
    seed: int | None
    scalars: dict[str, Curve] = field(default_factory=dict)
    wall_time_s: float | None = None
    source: str = "tensorboard"

    @property
    def env_steps(self) -> int | None:
        """The last logged step over all scalars (env steps: the logger's x-axis); None without scalars."""
        last = [int(curve.steps[-1]) for curve in self.scalars.values() if len(curve.steps)]
        return max(last) if last else None


def _event_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.name.startswith(EVENT_PREFIX) and p.is_file())


def is_run_dir(directory: str | os.PathLike) -> bool:
    """Whether ``directory`` holds ``config.yaml`` and TensorBoard event files or ``metrics.csv``."""
    directory = Path(directory)
    if not (directory / CONFIG_FILE).is_file():
        return False
    return (directory / CSV_FILE).is_file() or bool(_event_files(directory))


def find_run_dirs(root: str | os.PathLike) -> list[Path]:
    """Every run directory under ``root`` (``root`` itself included), sorted by path.

    Raises:
        ValueError: If ``root`` is not a directory.
    """
    root = Path(root)
    if not root.is_dir():
        raise ValueError(f"{root} is not a directory")
    found: list[Path] = []
    for current, dirs, _files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS and not d.startswith("."))
        if is_run_dir(current):
            found.append(Path(current))
    return sorted(found)


def _load_yaml(path: Path) -> Any:
    with open(path) as f:
        return yaml.safe_load(f)


def _get(mapping: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(mapping, dict):
            return None
        mapping = mapping.get(key)
    return mapping


def _format_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def variant_label(variant: dict[str, Any]) -> str:
    """``key=value`` pairs of a variant joined by ``, ``, each key shortened to its last dotted part
    unless another key of the variant ends the same way (``learning_rate=0.001, batch_T=64``)."""
    last_parts = [key.rsplit(".", 1)[-1] for key in variant]
    names = [short if last_parts.count(short) == 1 else key for key, short in zip(variant, last_parts, strict=True)]
    return ", ".join(f"{name}={_format_value(value)}" for name, value in zip(names, variant.values(), strict=True))


def find_variant(run_dir: str | os.PathLike) -> tuple[dict[str, Any], Path] | None:
    """The nearest ``variant.yaml`` among ``run_dir`` and its ancestors, without ``seed_everything``,
    and its path; None if there is none.

    Raises:
        ValueError: If that ``variant.yaml`` is not a mapping of dotted keys to values.
    """
    run_dir = Path(run_dir).resolve()
    for directory in (run_dir, *run_dir.parents):
        path = directory / VARIANT_FILE
        if path.is_file():
            content = _load_yaml(path)
            if content is None:
                content = {}
            if not isinstance(content, dict) or not all(isinstance(k, str) for k in content):
                raise ValueError(f"{path}: a variant must be a mapping of dotted config keys to values")
            return {k: v for k, v in content.items() if k != SEED_KEY}, path
    return None


def _merge(points: dict[str, dict[int, tuple[float, float]]], tag: str, new: list[tuple[int, float, float]]) -> None:
    """Add one file's ``(step, wall_time, value)`` points of ``tag``; they replace the earlier files'
    points from their first step on (a resumed run re-logs from its checkpoint's step)."""
    if not new:
        return
    old = points.setdefault(tag, {})
    first = min(step for step, _, _ in new)
    for step in [s for s in old if s >= first]:
        del old[step]
    for step, wall_time, value in new:
        old[step] = (wall_time, value)


def started_at(run_dir: str | os.PathLike) -> float | None:
    """``started_at`` of the run's ``run_info.yaml`` as a POSIX timestamp; None without it."""
    path = Path(run_dir) / RUN_INFO_FILE
    if not path.is_file():
        return None
    started = _get(_load_yaml(path), "started_at")
    if isinstance(started, datetime.datetime):  # YAML reads an unquoted timestamp as a datetime
        return started.timestamp()
    if not isinstance(started, str):
        return None
    try:
        return datetime.datetime.fromisoformat(started).timestamp()
    except ValueError:
        return None


def read_tensorboard(run_dir: str | os.PathLike) -> tuple[dict[str, Curve], float | None]:
    """Scalars of the TensorBoard event files in ``run_dir`` and the wall time they span.

    Returns:
        ``(scalars, wall_time_s)``: tag -> curve, and the sum over event files of the last scalar's wall
        time minus the file's first event's (the latest file's start taken from ``run_info.yaml`` where
        that is earlier); None without event files.
    """
    from tensorboard.backend.event_processing.event_accumulator import (  # type: ignore[import-untyped]
        EventAccumulator,
    )

    files = []
    for path in _event_files(Path(run_dir)):
        # Images, histograms and tensors are parsed but not kept: only scalars are read.
        accumulator = EventAccumulator(
            str(path), size_guidance={"scalars": 0, "images": 1, "audio": 1, "histograms": 1, "tensors": 1},
        )
        accumulator.Reload()
        try:
            first_event = accumulator.FirstEventTimestamp()
        except ValueError:  # an empty file (a run killed as it started)
            continue
        files.append((first_event, accumulator))
    points: dict[str, dict[int, tuple[float, float]]] = {}
    segments: list[list[float]] = []  # [first event, last scalar] wall times of each file
    for first_event, accumulator in sorted(files, key=lambda item: item[0]):
        last_event = first_event
        for tag in accumulator.Tags()["scalars"]:
            events = accumulator.Scalars(tag)
            _merge(points, tag, [(int(e.step), float(e.wall_time), float(e.value)) for e in events])
            last_event = max([last_event, *(float(e.wall_time) for e in events)])
        segments.append([first_event, last_event])
    # The logger's file starts after the envs are built; run_info.yaml's started_at (whole seconds, rewritten
    # by every resume) is the start of the latest segment, where it falls after the previous one's end.
    started = started_at(run_dir)
    if segments and started is not None and (len(segments) == 1 or started > segments[-2][1]):
        segments[-1][0] = min(segments[-1][0], started)
    wall_time = sum(last - first for first, last in segments) if segments else None
    scalars = {tag: _curve(by_step) for tag, by_step in points.items() if by_step}
    return scalars, wall_time


def _curve(by_step: dict[int, tuple[float, float]]) -> Curve:
    steps = np.array(sorted(by_step), dtype=np.int64)
    return Curve(steps=steps, values=np.array([by_step[s][1] for s in steps], dtype=np.float64))


def read_csv(run_dir: str | os.PathLike) -> tuple[dict[str, Curve], float | None]:
    """Scalars of a Lightning ``CSVLogger``'s ``metrics.csv`` in ``run_dir`` and the run's wall time.

    Rows without a ``step`` and empty cells are skipped; the wall time is the file's modification time
    minus ``run_info.yaml``'s ``started_at`` (None without it).
    """
    path = Path(run_dir) / CSV_FILE
    points: dict[str, dict[int, tuple[float, float]]] = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            step_text = row.get("step")
            if not step_text:
                continue
            step = int(float(step_text))
            for tag, text in row.items():
                if tag in ("step", "epoch") or tag is None or not text:
                    continue
                try:
                    value = float(text)
                except ValueError:
                    continue
                points.setdefault(tag, {})[step] = (0.0, value)
    scalars = {tag: _curve(by_step) for tag, by_step in points.items() if by_step}
    started = started_at(run_dir)
    wall_time = max(0.0, path.stat().st_mtime - started) if started is not None else None
    return scalars, wall_time


def read_run(run_dir: str | os.PathLike) -> Run:
    """Read one run directory (module docstring): identity from ``config.yaml`` and ``variant.yaml``,
    scalars from TensorBoard event files (else ``metrics.csv``).

    Raises:
        ValueError: If ``run_dir`` is not a run directory, or its ``config.yaml`` or variant file is not
            a YAML mapping.
    """
    run_dir = Path(run_dir)
    if not is_run_dir(run_dir):
        raise ValueError(f"{run_dir} is not a run directory (config.yaml and TensorBoard events or metrics.csv)")
    config = _load_yaml(run_dir / CONFIG_FILE)
    if not isinstance(config, dict):
        raise ValueError(f"{run_dir / CONFIG_FILE}: not a YAML mapping")
    class_path = _get(config, "model", "class_path")
    algo = str(class_path).rsplit(".", 1)[-1] if class_path else "?"
    env_id = _get(config, "model", "init_args", "sampler", "init_args", "env_id")
    env = str(env_id) if env_id else "?"
    seed = config.get(SEED_KEY)
    seed = seed if isinstance(seed, int) and not isinstance(seed, bool) else None
    group = run_dir.resolve().parent.name
    found = find_variant(run_dir)
    variant = found[0] if found is not None else {}
    label = variant_label(variant) if variant else group
    if _event_files(run_dir):
        scalars, wall_time = read_tensorboard(run_dir)
        source = "tensorboard"
    else:
        scalars, wall_time = read_csv(run_dir)
        source = "csv"
    recorded = read_run_info(run_dir).get("wall_time_s")
    if isinstance(recorded, (int, float)) and not isinstance(recorded, bool):
        # What the run's own processes measured, as the end summary of fit says it.
        wall_time = float(recorded)
    return Run(
        path=run_dir, algo=algo, env=env, group=group, variant=variant, variant_label=label, seed=seed,
        scalars=scalars, wall_time_s=wall_time, source=source,
    )


def read_runs(root: str | os.PathLike) -> list[Run]:
    """Every run under ``root`` (:func:`find_run_dirs`), read.

    Raises:
        ValueError: If ``root`` is not a directory or holds no run.
    """
    run_dirs = find_run_dirs(root)
    if not run_dirs:
        raise ValueError(
            f"no runs under {root}: a run is a directory holding {CONFIG_FILE} and TensorBoard event files "
            f"({EVENT_PREFIX}*) or {CSV_FILE}"
        )
    return [read_run(path) for path in run_dirs]
