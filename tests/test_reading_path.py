"""``benchmarks/reading_path.py``: what a reader reads to follow PPO's update stays within 10 files
and 900 definition lines, the counter counts as worked out by hand, and the listed path is the one
a training run takes (every definition that runs on it is read or has a stated reason not to be)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "reading_path.py"
_spec = importlib.util.spec_from_file_location("reading_path", SCRIPT)
assert _spec is not None and _spec.loader is not None
reading_path = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(reading_path)

SOURCE = '''\
"""Module docstring: not a definition."""
import functools


@functools.cache
def helper(x):
    """Two lines of docstring
    and two of body."""
    y = x + 1
    return y


class Algo:
    """A class."""

    rate: float = 0.1
    steps = (
        1,
        2,
    )

    def step(self):
        return self.rate

    @property
    def size(self):
        return 3
'''


def test_count_by_hand(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "m.py").write_text(SOURCE)
    (tmp_path / "c.yaml").write_text("a: 1\nb: 2\n")
    monkeypatch.setattr(reading_path, "ROOT", tmp_path)
    spans = reading_path.definition_spans(tmp_path / "m.py")
    # helper: the decorator's line 5 to `return y` on line 10.
    assert spans["helper"] == (5, 10)
    # Algo: lines 13-27; step 22-23; size with its decorator 25-27; the body's assignments are
    # one line (rate) and four (steps).
    assert spans["Algo"] == (13, 27) and spans["Algo.step"] == (22, 23) and spans["Algo.size"] == (25, 27)
    assert spans["Algo:declarations"] == (1, 5)
    total, rows = reading_path.count([("c.yaml", []), ("m.py", ["helper", "Algo.step", "Algo:declarations"])])
    assert [(f, n) for f, n, _ in rows] == [("c.yaml", 2), ("m.py", 6 + 2 + 5)]
    assert total == 15
    # A whole class counts once, not again for its methods.
    assert reading_path.count([("m.py", ["Algo", "Algo.step", "Algo.size"])])[0] == 15
    with pytest.raises(SystemExit, match="no definition named"):
        reading_path.count([("m.py", ["gone"])])


def test_ppo_reading_path_within_10_files_and_900_lines() -> None:
    total, rows = reading_path.count(reading_path.PATH)
    assert len(rows) <= 10, [r[0] for r in rows]
    assert total <= 900, rows
    assert rows[0][0] == "configs/ppo/cartpole.yaml" and rows[1][0] == "lightning_rl/algos/ppo.py"


def test_not_followed_kinds() -> None:
    assert reading_path.kind_of("lightning_rl/models/pg.py", "CategoricalPgHead.forward") == "network"
    assert reading_path.kind_of("lightning_rl/algos/base.py", "RLModule.budget_reached") == "bookkeeping"
    # A prefix names a definition and what it holds, not every name that starts with its letters.
    assert reading_path.kind_of("lightning_rl/algos/base.py", "RLModule.budget_reached_twice") is None
    assert reading_path.kind_of("lightning_rl/algos/base.py", "RLModule.optimize") is None


def test_the_listed_path_is_the_one_a_run_takes() -> None:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--trace"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "Listed methods that did not run: none" in result.stdout
    assert "NO KIND" not in result.stdout


def test_the_architecture_page_lists_the_path_in_order() -> None:
    # The docs' table of files to open is the measured path, row for row.
    page = (ROOT / "docs" / "concepts" / "architecture.md").read_text()
    section = page.split("## Reading PPO's update", 1)[1]
    rows = [line.split("|")[1].strip().strip("`") for line in section.splitlines() if line.startswith("| `")]
    # After the YAML the page drops the package's directory from each path.
    assert [rows[0]] + ["lightning_rl/" + row for row in rows[1:]] == [file for file, _ in reading_path.PATH]
