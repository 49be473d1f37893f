"""Config errors before torch and Lightning import (lightning_rl.config_check): the same lines as the full
parse, no valid config refused, a schema that follows the code."""

from __future__ import annotations

import copy
import io
import json
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from lightning_rl import config_check
from lightning_rl.config_check import check_command_line

ROOT = Path(__file__).resolve().parents[1]
CARTPOLE = str(ROOT / "configs" / "ppo" / "cartpole.yaml")

BAD = [
    ["--model.learning_rat", "0.001"],
    ["--model.init_args.learning_rat", "0.001"],
    ["--model.sampler.env_idd", "X"],
    ["--model.agent.hiden_sizes", "[3]"],
    ["--trainer.max_epoch", "3"],
    ["--seed_everythng", "3"],
    ["--model.epochs", "many"],
    ["--model.total_env_steps", "abc"],
    ["--model.value_clip", "xyz"],
    ["--model.normalize_advantage", "maybe"],
    ["--model.sampler.backend", "foo"],
    ["--model.agent.hidden_sizes", "abc"],
    ["--model.total_env_steps", "-5"],
    ["--model.gae_lambda", "1.5"],
    ["--model.epochs", "0"],
    ["--model", "PPOO"],
    ["--trainer.callbacks+=EvalCallback"],
]


def full_parse_lines(command: str, args: list[str]) -> list[str]:
    """What the full parse (LightningCLI) prints for ``args``: its stderr lines."""
    from lightning_rl.lightning_cli import run

    err = io.StringIO()
    with redirect_stderr(err), redirect_stdout(io.StringIO()):
        try:
            status = run([command, *args])
        except SystemExit as exit_:  # the parser's own exit
            status = exit_.code
    assert status == 2, err.getvalue()
    return err.getvalue().strip().splitlines()


@pytest.mark.parametrize("args", BAD, ids=" ".join)
def test_an_error_says_what_the_full_parse_says(args, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = ["--config", CARTPOLE, *args]
    quick = check_command_line("fit", argv)
    assert quick is not None, "the check found no error"
    assert quick == full_parse_lines("fit", argv)
    assert not (tmp_path / "runs").exists()


def test_a_config_file_key_is_named_with_its_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    typo = tmp_path / "typo.yaml"
    typo.write_text(Path(CARTPOLE).read_text().replace("learning_rate:", "learning_rat:"))
    quick = check_command_line("fit", ["--config", str(typo)])
    assert quick is not None
    assert quick[0] == f"lightning-rl fit: error: unknown key model.learning_rat (in {typo}); did you mean " \
                       "model.learning_rate?"
    assert quick == full_parse_lines("fit", ["--config", str(typo)])


def shipped_configs() -> list[Path]:
    return sorted(p for p in (ROOT / "configs").glob("*/*.yaml") if p.parent.name not in ("grids", "tune"))


@pytest.mark.parametrize("config", shipped_configs(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_shipped_config_is_refused(config):
    for command in ("fit", "validate", "test"):
        assert check_command_line(command, ["--config", str(config)]) is None


@pytest.mark.parametrize("args", [
    ["--model.learning_rate", "3e-4", "--model.sampler.env_id", "Acrobot-v1", "--run_name", "x"],
    ["--model.init_args.total_env_steps", "1000", "--trainer.max_epochs", "3", "--seed_everything", "7"],
    ["--trainer.callbacks+=EvaluationCallback", "--trainer.callbacks.every_n_epochs", "2"],
    ["--model.sampler.eval_n_envs", "8", "--model.value_clip", "null", "--model.agent.hidden_sizes", "[32,32]"],
    ["--model", "A2C"], ["--model.normalize_advantage", "false"], ["--ckpt_path", "last", "--print_config"],
    ["--run_group", "mine", "--trainer.default_root_dir", "somewhere", "--model.sampler.backend", "sync"],
    # Another sampler class: the config's VectorSampler arguments it does not take (backend) are dropped.
    ["--model.init_args.sampler.class_path", "lightning_rl.samplers.CpuSampler", "--model.sampler.n_workers", "2"],
    ["--model.sampler", "{class_path: lightning_rl.samplers.SerialSampler, init_args: {env_id: CartPole-v1}}"],
], ids=" ".join)
def test_valid_command_lines_pass(args):
    assert check_command_line("fit", ["--config", CARTPOLE, *args]) is None


def test_what_the_check_cannot_judge_is_left_to_the_full_parse(tmp_path):
    # A class of the user's, a parameter file, a YAML syntax error: no opinion.
    assert check_command_line("fit", ["--config", CARTPOLE, "--model", "my_module.MyPPO"]) is None
    assert check_command_line("fit", ["--params", "p.py"]) is None
    broken = tmp_path / "broken.yaml"
    broken.write_text("model: [1\n")
    assert check_command_line("fit", ["--config", str(broken)]) is None
    assert check_command_line("play", ["runs/ppo_cartpole"]) is None


def test_a_key_the_schema_lacks_but_the_code_has_is_not_refused(monkeypatch):
    # A schema a few edits behind the code: the key is in PPO's source files, so the check defers.
    schema = copy.deepcopy(config_check._schema())
    del schema["classes"]["lightning_rl.algos.ppo.PPO"]["params"]["value_clip"]
    monkeypatch.setattr(config_check, "_schema", lambda: schema)
    assert check_command_line("fit", ["--config", CARTPOLE, "--model.value_clip", "0.3"]) is None
    assert check_command_line("fit", ["--config", CARTPOLE, "--model.value_clp", "0.3"]) is not None


def test_the_schema_is_current():
    assert json.loads(config_check.SCHEMA_PATH.read_text()) == json.loads(json.dumps(config_check.build_schema())), (
        "run: python -m lightning_rl.config_check --write")


def test_the_check_imports_neither_torch_nor_lightning():
    code = (
        "import sys\n"
        "from lightning_rl.config_check import check_command_line\n"
        f"lines = check_command_line('fit', ['--config', {CARTPOLE!r}, '--model.learning_rat', '1'])\n"
        "assert lines and 'did you mean --model.learning_rate?' in lines[0], lines\n"
        "print(sorted(m for m in ('torch', 'pytorch_lightning', 'lightning_fabric') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert result.stdout.strip() == "[]"
