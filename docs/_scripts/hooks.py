"""MkDocs hooks of the site (mkdocs.yml ``hooks:``).

- A line ``<!-- table: benchmarks/results/measured/NAME.csv -->`` in a page becomes that CSV as a
  Markdown table, so each measured number is written once, in the CSV the figure is drawn from.
- The algorithm pages' ``<!-- hyperparameters: CLASS -->`` and ``<!-- learning-results: ALGO -->``
  lines become the class's hyperparameter table and the algorithm's measured learning results
  (``algorithm_pages.py``).
- The site's name carries ``lightning_rl.__version__``.
- Every API page is checked after it is rendered: each public name of its package has an entry
  (an anchor ``lightning_rl.<package>.<name>``), and each class's rendered signature lists every
  parameter of its ``__init__`` as Python reports it (``inspect.signature``). A name or a parameter
  missing from the page fails the build.
"""

from __future__ import annotations

import ast
import csv
import html
import importlib
import inspect
import re
import sys
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).parent))

import algorithm_pages  # noqa: E402
import api_names  # noqa: E402

TABLE = re.compile(r"^<!-- table: (?P<path>\S+\.csv) -->$", re.MULTILINE)
TAG = re.compile(r"<[^>]+>")


def version() -> str:
    tree = ast.parse((ROOT / "lightning_rl" / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "__version__":
            return str(ast.literal_eval(node.value))
    raise PluginError("lightning_rl/__init__.py has no __version__")


def on_config(config: Any, **kwargs: Any) -> Any:
    config.site_name = f"lightning_rl {version()}"
    return config


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
            raise PluginError(f"{page.file.src_path}: table {match['path']} does not exist")
        return csv_to_markdown(path)

    markdown = TABLE.sub(replace, markdown)
    try:
        return algorithm_pages.expand(markdown)
    except algorithm_pages.DirectiveError as error:
        raise PluginError(f"{page.file.src_path}: {error}") from error


def rendered_signature(page_html: str, identifier: str) -> str | None:
    """The text of the signature rendered under the heading ``identifier`` (None: no entry)."""
    start = page_html.find(f'id="{identifier}"')
    if start < 0:
        return None
    begin = page_html.find("doc-signature", start)
    end = page_html.find("</code></pre>", begin)
    if begin < 0 or end < 0:
        return ""
    return html.unescape(TAG.sub("", page_html[begin:end]))


def check_api_page(entry: api_names.ApiEntry, page_html: str) -> list[str]:
    problems = []
    module = importlib.import_module(entry.module)
    for name in entry.names:
        identifier = f"{entry.module}.{name}"
        signature = rendered_signature(page_html, identifier)
        if signature is None:
            problems.append(f"{identifier} has no entry")
            continue
        obj = getattr(module, name)
        # Classes whose __init__ is lightning_rl's own (not torch's, not a tuple's).
        if not inspect.isclass(obj) or not getattr(obj.__init__, "__module__", "").startswith("lightning_rl"):
            continue
        try:
            parameters = list(inspect.signature(obj.__init__).parameters)[1:]
        except (TypeError, ValueError):
            continue
        missing = [p for p in parameters if not re.search(rf"\b{re.escape(p)}\b", signature)]
        if missing:
            problems.append(f"{identifier}: the signature on the page lacks __init__ parameters {missing}")
    return problems


def on_post_page(output: str, page: Any, config: Any, **kwargs: Any) -> str:
    src = page.file.src_uri
    if src.startswith("reference/") and src != "reference/index.md":
        entries = {f"reference/{e.page}.md": e for e in api_names.api_entries(ROOT)}
        problems = check_api_page(entries[src], output)
        if problems:
            raise PluginError(f"{src}: " + "; ".join(problems))
    return output
