"""MkDocs hooks of the site (mkdocs.yml ``hooks:``).

A line ``<!-- table: benchmarks/results/measured/NAME.csv -->`` in a page becomes that CSV as a
Markdown table, so each measured number is written once, in the CSV the figure is drawn from.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
TABLE = re.compile(r"^<!-- table: (?P<path>\S+\.csv) -->$", re.MULTILINE)


def csv_to_markdown(path: Path) -> str:
    with path.open() as fh:
        rows = list(csv.reader(fh))
    header, body = rows[0], rows[1:]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in body]
    return "\n".join(lines)


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    def replace(match: re.Match[str]) -> str:
        path = ROOT / match["path"]
        if not path.is_file():
            raise FileNotFoundError(f"{page.file.src_path}: table {match['path']} does not exist")
        return csv_to_markdown(path)

    return TABLE.sub(replace, markdown)
