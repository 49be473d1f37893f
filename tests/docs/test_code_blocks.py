"""The documentation's code blocks run: every page's Python blocks and its marked shell commands.

Each page runs in a fresh directory (a ``configs`` link to the repository's configs) in its own
interpreter (``run_page.py``), the ``lightning-rl`` commands with the tiny budgets their ``run``
directives append. See ``blocks.py`` for the directives.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.blocks import Block, check_marked, read_blocks

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = sorted(p for p in DOCS.rglob("*.md") if "_scripts" not in p.parts)


def runnable(page: Path) -> bool:
    return any(
        b.not_run is None and (b.lang == "python" or b.run is not None or b.before) for b in read_blocks(page)
    )


def test_every_shell_block_is_marked_run_or_not_run() -> None:
    for page in PAGES:
        for block in read_blocks(page):
            check_marked(block)


def test_directives_are_read_as_written(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- before: fit --config c.yaml -->\n"
        "<!-- run: fit --budget 8; play --episodes 1 -->\n"
        "```bash\n"
        "lightning-rl fit --config c.yaml \\\n    --x 1   # comment\n"
        "lightning-rl play runs/a\n"
        "```\n\n"
        "```bash\nlightning-rl fit --config c.yaml\n```\n\n"
        "<!-- not-run: a cluster -->\n```bash\nsbatch job.sh\n```\n"
    )
    marked, unmarked, skipped = read_blocks(page)
    assert marked.before == ["fit --config c.yaml"]
    assert marked.lightning_rl_argvs() == [
        ["fit", "--config", "c.yaml", "--x", "1", "--budget", "8"],
        ["play", "runs/a", "--episodes", "1"],
    ]
    with pytest.raises(ValueError, match="mark the block"):
        check_marked(unmarked)
    assert skipped.not_run == "a cluster"
    check_marked(skipped)
    with pytest.raises(ValueError, match="only lightning-rl commands"):
        Block(page=page, line=1, lang="bash", code="pip install x\n", run="").lightning_rl_argvs()


@pytest.mark.parametrize("page", [p for p in PAGES if runnable(p)], ids=lambda p: str(p.relative_to(DOCS)))
def test_page_code_blocks_run(page: Path, tmp_path: Path) -> None:
    (tmp_path / "configs").symlink_to(ROOT / "configs")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONWARNINGS": "ignore"}
    result = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "docs" / "run_page.py"), str(page)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, f"{page.relative_to(ROOT)}:\n{result.stdout[-4000:]}\n{result.stderr[-6000:]}"
