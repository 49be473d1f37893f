"""The algorithm pages (``docs/algorithms/``): each names its own class, and the hyperparameter table
the site builds for it is the class's ``__init__`` as Python reports it.

The tables are generated at build time (``docs/_scripts/algorithm_pages.py``, expanded by the
site's hooks); these tests expand each page's directives as the build does and read the tables
back as a reader sees them, then compare them with ``inspect.signature`` of the class's
``__init__`` (every keyword-only parameter, its default and its annotation) and with defaults
worked out by hand from the papers and rlpyt. The learning-results tables are compared with the
``learning.md`` reports ``benchmarks/learning.py`` wrote next to each CSV.
"""

from __future__ import annotations

import html
import inspect
import re
import sys
from pathlib import Path
from typing import Any

import markdown
import pytest

from lightning_rl import algos

ROOT = Path(__file__).resolve().parents[2]
PAGES = ROOT / "docs" / "algorithms"
sys.path.insert(0, str(ROOT / "docs" / "_scripts"))

import algorithm_pages  # noqa: E402

#: Each page and the class whose hyperparameters it must show (written by hand, not read from the page).
PAGE_CLASS = {
    "a2c.md": "A2C",
    "ppo.md": "PPO",
    "dqn.md": "DQN",
    "c51.md": "CategoricalDQN",
    "r2d1.md": "R2D1",
    "ddpg.md": "DDPG",
    "td3.md": "TD3",
    "sac.md": "SAC",
    "mappo.md": "MultiAgentPPO",
}

#: Defaults worked out from the papers / rlpyt (what each class changes from its base class's).
HAND_DEFAULTS: dict[str, dict[str, Any]] = {
    "A2C": {"gae_lambda": 1.0, "value_loss_coeff": 0.5, "normalize_advantage": False, "linear_lr_schedule": False},
    "PPO": {"ratio_clip": 0.1, "epochs": 4, "gae_lambda": 0.98, "value_loss_coeff": 1.0, "linear_lr_schedule": True},
    "DQN": {"learning_rate": 2.5e-4, "target_update_interval": 312, "delta_clip": 1.0, "min_steps_learn": 50_000},
    "CategoricalDQN": {"learning_rate": 2.5e-4, "double_dqn": False, "replay_ratio": 8.0},
    "R2D1": {"discount": 0.997, "batch_T": 80, "warmup_T": 40, "n_step_return": 5, "delta_clip": None,
             "prioritized_replay": True, "pri_eta": 0.9},
    "DDPG": {"target_update_tau": 0.01, "learning_rate": 1e-4, "q_learning_rate": 1e-3, "policy_update_interval": 1},
    "TD3": {"batch_size": 100, "target_update_tau": 0.005, "policy_update_interval": 2, "target_update_interval": 2},
    "SAC": {"batch_size": 256, "learning_rate": 3e-4, "target_entropy": "auto", "pretrain_uniform": True},
    # PPO's defaults, kept; the team reward unless told otherwise.
    "MultiAgentPPO": {"agent_rewards_key": None, "ratio_clip": 0.1, "epochs": 4, "gae_lambda": 0.98},
}


def rendered_table(page: Path) -> list[dict[str, str]]:
    """The page's hyperparameter table as the site shows it: expanded, rendered by Python-Markdown
    (the site's renderer, with its table and HTML-block extensions) and read back cell by cell."""
    text = algorithm_pages.HYPERPARAMETERS.sub(
        lambda match: algorithm_pages.hyperparameter_table(match["target"]), page.read_text())
    page_html = markdown.markdown(text, extensions=["tables", "md_in_html"])
    for table in re.findall(r"<table>.*?</table>", page_html, flags=re.DOTALL):
        header = [html.unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r"<th[^>]*>(.*?)</th>", table)]
        if header[:3] != ["name", "type", "default"]:
            continue
        rows = []
        for row in re.findall(r"<tr>(.*?)</tr>", table, flags=re.DOTALL)[1:]:
            cells = [html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]
            rows.append(dict(zip(header, cells, strict=True)))
        return rows
    raise AssertionError(f"{page.name} has no hyperparameter table")


def shown_type(cls: type, row: dict[str, str]) -> Any:
    """The type a row shows (``float | None``), evaluated where its declaring class was written."""
    owner = next(k for k in cls.__mro__ if k.__name__ == row["declared in"])
    return eval(row["type"], vars(sys.modules[owner.__module__]))  # noqa: S307 - the page's own table


def test_every_algorithm_page_exists_and_names_its_own_class() -> None:
    assert sorted(p.name for p in PAGES.glob("*.md") if p.name != "index.md") == sorted(PAGE_CLASS)
    for name, cls in PAGE_CLASS.items():
        targets = algorithm_pages.HYPERPARAMETERS.findall((PAGES / name).read_text())
        assert targets == [f"lightning_rl.algos.{cls}"], f"{name}: {targets}"


@pytest.mark.parametrize("page", sorted(PAGE_CLASS))
def test_page_table_is_the_signature_of_the_class(page: str) -> None:
    cls = getattr(algos, PAGE_CLASS[page])
    parameters = [p for p in inspect.signature(cls.__init__).parameters.values() if p.kind is p.KEYWORD_ONLY]
    rows = rendered_table(PAGES / page)
    assert [row["name"] for row in rows] == [p.name for p in parameters]
    for row, parameter in zip(rows, parameters, strict=True):
        assert row["default"] == repr(parameter.default), row
        assert shown_type(cls, row) == parameter.annotation, row
        assert row["meaning"], row
    by_name = {row["name"]: row["default"] for row in rows}
    for name, value in HAND_DEFAULTS[PAGE_CLASS[page]].items():
        assert by_name[name] == repr(value), (page, name)


def test_a_directive_naming_no_class_fails_the_build() -> None:
    with pytest.raises(algorithm_pages.DirectiveError, match="cannot import"):
        algorithm_pages.expand("<!-- hyperparameters: lightning_rl.algos.NoSuchAlgo -->\n")
    with pytest.raises(algorithm_pages.DirectiveError, match="no benchmarks/results"):
        algorithm_pages.expand("<!-- learning-results: nosuchalgo -->\n")


def test_learning_results_match_the_reports_of_benchmarks_learning() -> None:
    # benchmarks/learning.py wrote learning.md (mean +- std per system and point) beside each CSV.
    report = (ROOT / "benchmarks/results/td3_hopper_100k/learning.md").read_text()
    ours = re.search(r"\| lightning_rl \| td3 \| Hopper-v5 \| 100,000 \| ([-\d.]+) \+- ([\d.]+) \| 2 \|", report)
    sb3 = re.search(r"\| sb3 \| td3 \| Hopper-v5 \| 100,000 \| ([-\d.]+) \+- ([\d.]+) \| 2 \|", report)
    assert ours and sb3
    table = algorithm_pages.learning_results("td3")
    row = next(line for line in table.splitlines() if line.startswith("| Hopper-v5 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[:3] == ["Hopper-v5", "100k", "1, 2"]
    for cell, (mean, std) in ((cells[3], ours.groups()), (cells[4], sb3.groups())):
        shown_mean, shown_std = re.match(r"([-\d.]+) ± ([\d.]+) \(", cell).groups()
        assert float(shown_mean) == pytest.approx(float(mean), abs=0.5)
        assert float(shown_std) == pytest.approx(float(std), abs=0.5)
    assert "![td3_hopper_100k: return against env steps](../benchmarks/figures/td3_hopper_100k.png)" in table


def test_several_algorithms_share_one_table_with_an_algorithm_column() -> None:
    table = algorithm_pages.learning_results("r2d1 dqn")
    header, _, *rows = [line for line in table.splitlines() if line.startswith("|")]
    assert header.split("|")[1].strip() == "algorithm"
    assert [row.split("|")[1].strip() for row in rows] == ["R2D1", "DQN"]
    assert "**DQN, CartPoleNoVelocity-v1, 200k env steps**" in table
