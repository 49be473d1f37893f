"""The API reference covers every public name, and its build check catches a missing one."""

from __future__ import annotations

import importlib
import inspect
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "_scripts"))

import api_names  # noqa: E402
import hooks  # noqa: E402


def nav_pages(nav: list) -> set[str]:
    pages: set[str] = set()
    for item in nav:
        if isinstance(item, str):
            pages.add(item)
        elif isinstance(item, dict):
            for value in item.values():
                pages |= nav_pages(value) if isinstance(value, list) else {value}
    return pages


def test_every_package_with_public_names_has_an_api_page_in_the_nav() -> None:
    entries = api_names.api_entries(ROOT)
    packages = {p.name for p in (ROOT / "lightning_rl").iterdir() if (p / "__init__.py").is_file()}
    with_all = {p for p in packages if hasattr(importlib.import_module(f"lightning_rl.{p}"), "__all__")}
    assert with_all <= {e.page for e in entries}
    nav = nav_pages(yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"])
    assert {f"reference/{e.page}.md" for e in entries} <= nav


def test_the_names_read_from_the_source_are_the_runtime_all() -> None:
    # A name added to __all__ in a way the source reader misses would get no API entry.
    for entry in api_names.api_entries(ROOT):
        assert entry.names == list(importlib.import_module(entry.module).__all__), entry.module


def test_build_check_names_a_missing_entry_and_a_missing_parameter() -> None:
    from lightning_rl.algos import PPO

    parameters = list(inspect.signature(PPO.__init__).parameters)[1:]
    shown = ", ".join(p for p in parameters if p != "entropy_loss_coeff")
    page = (
        '<h2 id="lightning_rl.algos.PPO" class="doc doc-heading">PPO</h2>'
        f'<div class="doc-signature highlight"><pre><code>PPO({shown})</code></pre></div>'
    )
    entry = api_names.ApiEntry("lightning_rl.algos", "algos", "", "", ["PPO", "A2C"])
    problems = hooks.check_api_page(entry, page)
    assert problems == [
        "lightning_rl.algos.PPO: the signature on the page lacks __init__ parameters ['entropy_loss_coeff']",
        "lightning_rl.algos.A2C has no entry",
    ]
    complete = page.replace(f"PPO({shown})", f"PPO({', '.join(parameters)})")
    assert hooks.check_api_page(api_names.ApiEntry("lightning_rl.algos", "algos", "", "", ["PPO"]), complete) == []
