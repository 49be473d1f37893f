"""One version: ``lightning_rl.__version__`` is the changelog's newest release heading."""

from __future__ import annotations

import re
from pathlib import Path

import lightning_rl

ROOT = Path(__file__).resolve().parents[2]


def test_version_is_the_changelog_newest_heading() -> None:
    headings = re.findall(r"^## \[(\d+\.\d+\.\d+)\]", (ROOT / "CHANGELOG.md").read_text(), flags=re.MULTILINE)
    assert headings, "CHANGELOG.md has no '## [x.y.z]' heading"
    assert lightning_rl.__version__ == headings[0]
    # Newest first: each heading's version is above the next one's.
    versions = [tuple(int(x) for x in h.split(".")) for h in headings]
    assert versions == sorted(versions, reverse=True)
