"""A lightweight section profiler behind Lightning's ``Profiler`` interface (digideep ``Profiler``).

Sections are named like paths: ``"sampler"`` holds ``"sampler/obtain"`` and ``"sampler/targets"``,
and the summary prints them as a tree with totals, counts and means. Code profiles through
Lightning's own context, ``with self.trainer.profiler.profile("sampler/obtain"):``, which is a
no-op ``PassThroughProfiler`` unless the Trainer was given a profiler, so the sections cost about
a microsecond each when profiling is off::

    trainer = pl.Trainer(profiler=SectionProfiler())          # or in YAML:
    # trainer:
    #   profiler: lightning_rl.profiler.SectionProfiler

Used on its own it is a context factory as well: ``with profiler("sampler/step"): ...``.

Lightning profiles each hook as well (``[Callback]...``, ``[Strategy]...``); those are left out of
the report unless ``lightning_actions=True``, except the ones named in ``aliases``: by default
the strategy's ``training_step`` is recorded as ``"learner"``, so the report always compares
sampler and learner time. The module's own sections (``"learner/update"``) nest under it.
"""

from __future__ import annotations

import math
import os
import re
import time
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

from pytorch_lightning.profilers import Profiler

__all__ = ["DEFAULT_ALIASES", "SectionProfiler", "SectionStats"]

#: Lightning action names (``*`` matches any text) recorded under a section name of ours.
DEFAULT_ALIASES: dict[str, str] = {"[Strategy]*.training_step": "learner"}

#: Actions Lightning profiles that are not bracketed hook names.
_LIGHTNING_LOOP_ACTIONS = frozenset({"run_training_epoch", "run_training_batch", "optimizer_step", "save_checkpoint"})


@dataclass
class SectionStats:
    """Timing of one section over all its runs.

    Attributes:
        count: Completed runs.
        total: Seconds summed over the runs.
        min: Shortest run in seconds (``inf`` before the first run).
        max: Longest run in seconds.
    """

    count: int = 0
    total: float = 0.0
    min: float = math.inf
    max: float = 0.0

    @property
    def mean(self) -> float:
        """Mean seconds per run (0 before the first run)."""
        return self.total / self.count if self.count else 0.0

    def add(self, duration: float) -> None:
        """Record one run of ``duration`` seconds."""
        self.count += 1
        self.total += duration
        self.min = min(self.min, duration)
        self.max = max(self.max, duration)


class SectionProfiler(Profiler):
    """Totals, counts and means of named, nested code sections, with a sampler vs learner line.

    Args:
        dirpath: Directory of ``filename`` (default: the Trainer's log dir).
        filename: Write the report to ``<dirpath>/<stage>-<filename>.txt`` instead of the log.
        aliases: ``{Lightning action name: section name}``, where ``*`` in the action name matches
            any text; default :data:`DEFAULT_ALIASES`. ``{}`` records only sections opened by name.
        lightning_actions: Also record every other action Lightning profiles (its hooks).

    Raises:
        ValueError: From :meth:`start` if a section is already running, from :meth:`stop` if it
            is not.
    """

    def __init__(
        self,
        dirpath: str | Path | None = None,
        filename: str | None = None,
        aliases: dict[str, str] | None = None,
        lightning_actions: bool = False,
    ) -> None:
        super().__init__(dirpath=dirpath, filename=filename)
        self.aliases = dict(DEFAULT_ALIASES if aliases is None else aliases)
        self._alias_patterns = [
            (re.compile(".*".join(re.escape(part) for part in pattern.split("*")) + r"\Z"), section)
            for pattern, section in self.aliases.items()
        ]
        self.lightning_actions = lightning_actions
        self.sections: dict[str, SectionStats] = {}
        self._running: dict[str, float] = {}
        # Lightning calls start/stop dozens of times per batch: resolve each name once.
        self._resolved: dict[str, str | None] = {}
        self.start_time = time.perf_counter()

    def __call__(self, name: str) -> AbstractContextManager[str]:
        """``with profiler("sampler/step"):`` times the block as section ``name``."""
        return self.profile(name)

    def _section(self, action_name: str) -> str | None:
        if action_name not in self._resolved:
            section: str | None = action_name
            for pattern, alias in self._alias_patterns:
                if pattern.match(action_name):
                    section = alias
                    break
            else:
                lightning = action_name.startswith("[") or action_name in _LIGHTNING_LOOP_ACTIONS
                if lightning and not self.lightning_actions:
                    section = None
            self._resolved[action_name] = section
        return self._resolved[action_name]

    def start(self, action_name: str) -> None:
        """Start timing ``action_name`` (a no-op for Lightning actions that are not recorded)."""
        section = self._section(action_name)
        if section is None:
            return
        if section in self._running:
            raise ValueError(f"action_name={action_name!r}: section {section!r} is already running")
        self._running[section] = time.perf_counter()

    def stop(self, action_name: str) -> None:
        """Stop timing ``action_name`` and add the run to its section."""
        end = time.perf_counter()
        section = self._section(action_name)
        if section is None:
            return
        if section not in self._running:
            raise ValueError(f"action_name={action_name!r}: section {section!r} was never started")
        self.sections.setdefault(section, SectionStats()).add(end - self._running.pop(section))

    def setup(self, stage: str, local_rank: int | None = None, log_dir: str | None = None) -> None:
        """Lightning's set-up at the start of a stage; the wall clock starts here if nothing ran yet."""
        super().setup(stage, local_rank=local_rank, log_dir=log_dir)
        if not self.sections and not self._running:
            self.start_time = time.perf_counter()

    def reset(self) -> None:
        """Forget all recorded runs and restart the wall clock."""
        self.sections.clear()
        self._running.clear()
        self.start_time = time.perf_counter()

    def wall_time(self) -> float:
        """Seconds since construction or the last :meth:`reset`."""
        return time.perf_counter() - self.start_time

    def report(self) -> dict[str, dict[str, float]]:
        """Per section: ``total``, ``count``, ``mean``, ``min``, ``max`` and ``fraction`` of wall time.

        Sections are in tree order (each parent right before its children).
        """
        wall = max(self.wall_time(), 1e-12)
        return {
            name: {
                "total": s.total,
                "count": float(s.count),
                "mean": s.mean,
                "min": s.min,
                "max": s.max,
                "fraction": s.total / wall,
            }
            for name, s in sorted(self.sections.items(), key=lambda item: item[0].split("/"))
        }

    def summary(self) -> str:
        """The report as a table: sections indented by depth, share of parent and of wall time."""
        wall = self.wall_time()
        stage = f"{self._stage.upper()} " if self._stage is not None else ""
        lines = [f"{stage}Section profiler report (wall time {wall:.3f} s)"]
        if not self.sections:
            return lines[0] + os.linesep + "no sections recorded" + os.linesep
        rows = [("section", "total s", "count", "mean ms", "% parent", "% wall")]
        for name, stats in self.report().items():
            parts = name.split("/")
            parent = self.sections.get("/".join(parts[:-1])) if len(parts) > 1 else None
            of_parent = f"{100 * stats['total'] / parent.total:.1f}" if parent and parent.total > 0 else "-"
            # Indent under each recorded ancestor; a section whose parent never ran keeps its full name.
            depth = sum("/".join(parts[:i]) in self.sections for i in range(1, len(parts)))
            rows.append(
                (
                    "  " * depth + (parts[-1] if parent is not None else name),
                    f"{stats['total']:.4f}",
                    str(int(stats["count"])),
                    f"{1000 * stats['mean']:.3f}",
                    of_parent,
                    f"{100 * stats['fraction']:.1f}",
                )
            )
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        for row in rows:
            cells = [row[0].ljust(widths[0])]
            cells += [cell.rjust(width) for cell, width in zip(row[1:], widths[1:], strict=True)]
            lines.append("  ".join(cells))
        lines.append(self._split_line(wall))
        return os.linesep.join(lines) + os.linesep

    def _split_line(self, wall: float) -> str:
        parts = []
        for name in ("sampler", "learner"):
            total = self.sections[name].total if name in self.sections else 0.0
            parts.append(f"{name} {total:.3f} s ({100 * total / max(wall, 1e-12):.1f}%)")
        return "time split: " + ", ".join(parts) + " of wall time"
