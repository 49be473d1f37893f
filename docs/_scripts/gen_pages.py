"""Pages made while the site builds (run by the mkdocs-gen-files plugin, see mkdocs.yml).

- ``reference/<package>.md``: one API page per package of lightning_rl, one entry per name of the
  package's ``__all__`` (read from the source, so a name added to ``__all__`` gets its entry at
  the next build), rendered by mkdocstrings from the signatures and docstrings;
  ``reference/index.md`` lists the packages.
- ``guides/error-messages.md``: every error message of the package (``error_messages.py``).
- ``notebooks/*.ipynb``: the notebooks of ``notebooks/``, as they are (with the outputs they were
  saved with), rendered by mkdocs-jupyter.
- ``benchmarks/figures/*.png``: the figures of the benchmark pages, drawn from the CSVs under
  ``benchmarks/results/`` (see ``figures.py``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import mkdocs_gen_files

sys.path.insert(0, str(Path(__file__).parent))

import api_names  # noqa: E402
import error_messages  # noqa: E402
import figures  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def write_api_pages() -> None:
    rows = []
    for entry in api_names.api_entries(ROOT):
        lines = [
            f"# `{entry.module}`",
            "",
            f"::: {entry.module}",
            "    options:",
            "      show_root_heading: false",
            "      show_root_toc_entry: false",
            "      members: false",
            "",
        ]
        if entry.module == "lightning_rl.algos":
            lines += ["Each algorithm has a page with its loss as maths, its hyperparameters, shipped configs and",
                      "measured results: [Algorithms](../algorithms/index.md).", ""]
        if entry.summary_table:
            lines += ["| name | kind |", "|---|---|"]
            lines += [f"| [`{name}`](#{entry.module}.{name}) | {kind} |" for name, kind in entry.kinds.items()]
            lines.append("")
        for name in entry.names:
            lines += [f"::: {entry.module}.{name}", ""]
        with mkdocs_gen_files.open(f"reference/{entry.page}.md", "w") as fh:
            fh.write("\n".join(lines))
        rows.append(f"| [`{entry.module}`]({entry.page}.md) | {len(entry.names)} | {entry.summary} |")
    index = [
        "# API reference",
        "",
        "One page per package: every name in the package's `__all__`, with its signature (types",
        "included) and its docstring, generated from the code at each build. The packages import one",
        "way: `data -> spaces, envs -> models, distributions -> agents -> samplers, replays, returns",
        "-> datasets -> algos -> cli`.",
        "",
        "| package | public names | what it holds |",
        "|---|---|---|",
        *rows,
        "",
    ]
    with mkdocs_gen_files.open("reference/index.md", "w") as fh:
        fh.write("\n".join(index))


def copy_notebooks() -> None:
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        with mkdocs_gen_files.open(f"notebooks/{notebook.name}", "wb") as fh:
            fh.write(notebook.read_bytes())


def draw_figures() -> None:
    for name, png in figures.draw_all(ROOT):
        with mkdocs_gen_files.open(f"benchmarks/figures/{name}.png", "wb") as fh:
            fh.write(png)


write_api_pages()
with mkdocs_gen_files.open("guides/error-messages.md", "w") as fh:
    fh.write(error_messages.page(ROOT))
copy_notebooks()
draw_figures()
