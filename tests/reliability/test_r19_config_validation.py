"""Row 19: a bad config fails fast with a message naming the key, before any env or worker
exists; and ``--print_config`` output loads back as the identical config (round trip), class
paths for optimizers, schedulers and models included."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from lightning_rl.cli import main
from tests.shipped import shipped_configs

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = [str(p) for p in shipped_configs()]


def print_config(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", *args, "--print_config"])
    assert exit_info.value.code in (0, None)
    return capsys.readouterr().out


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: "/".join(Path(p).parts[-2:]))
def test_print_config_round_trips(config, tmp_path, capsys):
    first = print_config(capsys, "--config", config)
    (tmp_path / "printed.yaml").write_text(first)
    assert print_config(capsys, "--config", str(tmp_path / "printed.yaml")) == first


def test_round_trip_keeps_an_optimizer_a_scheduler_and_a_model_given_by_class_path(tmp_path, capsys):
    extra = [
        "--model.init_args.linear_lr_schedule", "false",
        "--model.init_args.optimizer", json.dumps({"class_path": "torch.optim.SGD", "init_args": {"momentum": 0.9}}),
        "--model.init_args.lr_scheduler", json.dumps({"class_path": "torch.optim.lr_scheduler.StepLR",
                                                      "init_args": {"step_size": 10}}),
        "--model.init_args.agent.init_args.model",
        json.dumps({"class_path": "lightning_rl.models.CategoricalPgMlpModel", "init_args": {"hidden_sizes": [8]}}),
    ]
    first = print_config(capsys, "--config", str(ROOT / "configs" / "ppo" / "cartpole.yaml"), *extra)
    assert "torch.optim.SGD" in first and "momentum: 0.9" in first and "step_size: 10" in first
    (tmp_path / "printed.yaml").write_text(first)
    assert print_config(capsys, "--config", str(tmp_path / "printed.yaml")) == first


@pytest.mark.parametrize(("override", "named"), [
    (["--model.init_args.discount", "1.5"], "discount"),
    (["--model.init_args.minibatches", "7"], "minibatches=7 must divide batch_T \\* batch_B = 256"),
    (["--model.init_args.no_such_key", "1"], "no_such_key"),
    (["--model.init_args.epochs", "many"], "epochs"),
])
def test_a_bad_value_or_key_exits_2_fast_naming_it(override, named, capsys):
    start = time.perf_counter()
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--config", str(ROOT / "configs" / "ppo" / "cartpole.yaml"), *override])
    assert exit_info.value.code == 2
    assert time.perf_counter() - start < 5.0
    err = capsys.readouterr().err
    assert re.search(named, err), err
