"""The shipped LightningCLI configs, for the tests that go through all of them."""

from __future__ import annotations

from pathlib import Path

CONFIG_ROOT = Path(__file__).resolve().parents[1] / "configs"
#: Folders under configs/ whose YAML files are not LightningCLI configs: launch's grid files (a base
#: config and levels) and tune's search spaces.
NOT_CONFIGS = ("grids", "tune")


def shipped_configs() -> list[Path]:
    """Every ``configs/<algo>/<name>.yaml`` that ``lightning-rl fit --config`` takes, sorted."""
    return sorted(p for p in CONFIG_ROOT.glob("*/*.yaml") if p.parent.name not in NOT_CONFIGS)
