"""``lightning-rl launch``: bad input exits 2 with ``lightning-rl launch: error: ...``; --dry_run writes only."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from lightning_rl.cli import main

ROOT = Path(__file__).resolve().parents[2]
CARTPOLE = str(ROOT / "configs" / "ppo" / "cartpole.yaml")


def launch(tmp_path: Path, grid: dict, *args: str) -> int:
    (tmp_path / "grid.yaml").write_text(yaml.safe_dump(grid))
    with pytest.raises(SystemExit) as stop:
        main(["launch", str(tmp_path / "grid.yaml"), "--grid_dir", str(tmp_path / "g"), *args])
    return int(stop.value.code)


@pytest.mark.parametrize(("grid", "args", "message"), [
    ({"base": CARTPOLE, "levels": [{"model.init_args.lerning_rate": [0.1]}]}, [],
     "unknown config key 'model.init_args.lerning_rate'.*close keys: model.init_args.learning_rate"),
    ({"base": CARTPOLE, "levels": [{"seed_everything": [0, 1], "model.init_args.learning_rate": [0.1]}]}, [],
     "the keys of one grid level zip, so their lists need the same length"),
    ({"base": "nowhere.yaml", "levels": [{"seed_everything": [0]}]}, [], "base config nowhere.yaml .* does not exist"),
    ({"base": CARTPOLE, "levels": [{"seed_everything": [0]}], "level": []}, [], r"unknown fields \['level'\]"),
    ({"base": CARTPOLE, "levels": [{"seed_everything": [0]}]}, ["--cpu_per_run", "4096"],
     "cpu_per_run=4096 asks for more cores than the machine has"),
    ({"base": CARTPOLE, "levels": [{"seed_everything": [0]}]}, ["--parallel", "4096"], "--parallel 4096: the affinity"),
])
def test_bad_input_exits_2_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str], grid: dict, args: list[str],
                                     message: str) -> None:
    assert launch(tmp_path, grid, *args) == 2
    err = capsys.readouterr().err
    assert err.startswith("lightning-rl launch: error: ")
    assert __import__("re").search(message, err), err


def test_dry_run_writes_the_variants_and_runs_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    grid = {"base": CARTPOLE, "levels": [{"model.init_args.learning_rate": [0.001, 0.002]}]}
    assert launch(tmp_path, grid, "--dry_run") == 0
    assert sorted(p.name for p in (tmp_path / "g").iterdir() if p.is_dir()) == ["lr_0.001", "lr_0.002"]
    assert not list((tmp_path / "g").glob("*/runs")) and not list((tmp_path / "g").glob("*/stdout.log"))
    assert "slot 0: cpus" in capsys.readouterr().out


def test_slurm_without_submitit_names_the_extra(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "submitit", None)  # as if not installed
    monkeypatch.delitem(sys.modules, "lightning_rl.launch.slurm", raising=False)
    assert launch(tmp_path, {"base": CARTPOLE, "levels": [{"seed_everything": [0]}]}, "--slurm") == 2
    assert "pip install 'lightning-rl[slurm]'" in capsys.readouterr().err
