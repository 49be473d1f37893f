"""Parameter files: gen_params + cpanel overrides, and `lightning-rl --params FILE --cpanel JSON`."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from lightning_rl.cli import main
from lightning_rl.params import expand_params_args, gen_config, parse_cpanel, to_yaml
from lightning_rl.runs import run_group

ROOT = Path(__file__).resolve().parents[1]
CARTPOLE_PARAMS = str(ROOT / "configs" / "params" / "ppo_cartpole.py")
MUJOCO_PARAMS = str(ROOT / "configs" / "params" / "ppo_mujoco.py")
CARTPOLE_YAML = str(ROOT / "configs" / "ppo" / "cartpole.yaml")
HALFCHEETAH_YAML = str(ROOT / "configs" / "ppo" / "halfcheetah.yaml")


def load_yaml(path: str) -> dict:
    with open(path) as f:
        return yaml.safe_load(f)


@pytest.mark.parametrize("params, config", [(CARTPOLE_PARAMS, CARTPOLE_YAML), (MUJOCO_PARAMS, HALFCHEETAH_YAML)])
def test_defaults_give_the_yaml_config(params, config):
    assert gen_config(params) == load_yaml(config)


def test_cpanel_overrides_and_coupled_values():
    config = gen_config(MUJOCO_PARAMS, '{"lr": 1e-4, "env": "Hopper-v5", "n_envs": 4, "rollouts_per_epoch": 5}')
    init = config["model"]["init_args"]
    assert init["learning_rate"] == 1e-4
    assert init["sampler"]["init_args"]["env_id"] == "Hopper-v5"
    assert init["sampler"]["init_args"]["batch_B"] == 4
    # 4 envs x 256 steps: 16 minibatches of 64, epochs of 5 rollouts.
    assert init["minibatches"] == 16
    assert init["log_interval_steps"] == 4 * 256 * 5
    # Checkpoints go to the run directory, named after the algorithm and env: runs/ppo_hopper/<date-time>/.
    assert config["trainer"]["callbacks"][0]["init_args"].get("dirpath") is None
    assert run_group(config["model"]) == "ppo_hopper"


def test_cpanel_int_for_a_float_becomes_float():
    config = gen_config(CARTPOLE_PARAMS, {"lr": 1, "target_return": 200})
    assert config["model"]["init_args"]["learning_rate"] == 1.0
    assert isinstance(config["model"]["init_args"]["learning_rate"], float)


@pytest.mark.parametrize(
    "cpanel, match",
    [
        ('{"lr": 1e-4', "not valid JSON"),
        ("[1, 2]", "JSON object"),
        ('{"learning_rate": 1e-4}', "unknown key\\(s\\) \\['learning_rate'\\]"),
        ('{"lr": "fast"}', "'lr' must be float"),
        ('{"n_envs": 2.5}', "'n_envs' must be int"),
        ('{"n_envs": true}', "'n_envs' must be int"),
        ('{"minibatch_size": 100}', "minibatch_size=100 must divide"),
    ],
)
def test_bad_cpanel_is_rejected(cpanel, match):
    with pytest.raises(ValueError, match=match):
        gen_config(MUJOCO_PARAMS, cpanel)


def test_bad_parameter_files_are_rejected(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        gen_config(tmp_path / "missing.py")
    no_gen = tmp_path / "no_gen.py"
    no_gen.write_text("CPANEL = {'lr': 1.0}\n")
    with pytest.raises(ValueError, match="no function gen_params"):
        gen_config(no_gen)
    broken = tmp_path / "broken.py"
    broken.write_text("def gen_params(cpanel):\n    return {}\nraise RuntimeError('boom')\n")
    with pytest.raises(ValueError, match="RuntimeError: boom"):
        gen_config(broken)
    not_dict = tmp_path / "not_dict.py"
    not_dict.write_text("def gen_params(cpanel):\n    return [1]\n")
    with pytest.raises(ValueError, match="must return a dict"):
        gen_config(not_dict)
    odd_value = tmp_path / "odd_value.py"
    odd_value.write_text("def gen_params(cpanel):\n    return {'model': {'init_args': {'x': object()}}}\n")
    with pytest.raises(ValueError, match="model.init_args.x is a object"):
        gen_config(odd_value)
    # No CPANEL: every cpanel key is unknown, no cpanel is fine; tuples become lists.
    bare = tmp_path / "bare.py"
    bare.write_text("def gen_params(cpanel):\n    return {'seed_everything': len(cpanel), 'x': (1, 2)}\n")
    assert gen_config(bare) == {"seed_everything": 0, "x": [1, 2]}
    with pytest.raises(ValueError, match="unknown key"):
        gen_config(bare, {"lr": 1.0})


def test_expand_params_args_replaces_the_flags_in_place():
    args = ["fit", "--trainer.max_epochs", "3", f"--params={CARTPOLE_PARAMS}", "--cpanel", '{"lr": 0.5}',
            "--model.init_args.epochs", "2"]
    out = expand_params_args(args)
    assert out[:3] == ["fit", "--trainer.max_epochs", "3"]
    assert out[3] == "--config"
    assert yaml.safe_load(out[4]) == gen_config(CARTPOLE_PARAMS, {"lr": 0.5})
    assert out[5:] == ["--model.init_args.epochs", "2"]
    assert expand_params_args(["fit", "--config", CARTPOLE_YAML]) == ["fit", "--config", CARTPOLE_YAML]
    with pytest.raises(ValueError, match="--cpanel needs --params"):
        expand_params_args(["fit", "--cpanel", "{}"])
    with pytest.raises(ValueError, match="more than once"):
        expand_params_args(["fit", "--params", CARTPOLE_PARAMS, "--params", CARTPOLE_PARAMS])
    with pytest.raises(ValueError, match="expected a value"):
        expand_params_args(["fit", "--params"])
    assert parse_cpanel("  ") == {}
    assert yaml.safe_load(to_yaml({"b": 1, "a": [1.5]})) == {"b": 1, "a": [1.5]}


def print_config(capsys, args: list[str]) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", *args, "--print_config"])
    assert exit_info.value.code == 0
    return capsys.readouterr().out


def test_print_config_of_params_equals_the_yaml_files(capsys):
    assert print_config(capsys, ["--params", CARTPOLE_PARAMS]) == print_config(capsys, ["--config", CARTPOLE_YAML])
    assert print_config(capsys, ["--params", MUJOCO_PARAMS]) == print_config(capsys, ["--config", HALFCHEETAH_YAML])


def test_print_config_shows_cpanel_and_later_overrides(capsys):
    cpanel = '{"lr": 1e-4, "env": "Hopper-v5"}'
    out = print_config(capsys, ["--params", MUJOCO_PARAMS, "--cpanel", cpanel, "--model.init_args.epochs", "3"])
    config = yaml.safe_load(out)
    init = config["model"]["init_args"]
    assert init["learning_rate"] == 1e-4
    assert init["epochs"] == 3
    assert init["sampler"]["init_args"]["env_id"] == "Hopper-v5"
    # Checkpoints go to the run directory, named after the algorithm and env: runs/ppo_hopper/<date-time>/.
    assert config["trainer"]["callbacks"][0]["init_args"].get("dirpath") is None
    assert run_group(config["model"]) == "ppo_hopper"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--params", MUJOCO_PARAMS, "--cpanel", "{lr: 1}"], "--cpanel: not valid JSON"),
        (["--params", MUJOCO_PARAMS, "--cpanel", '{"nope": 1}'], "unknown key(s) ['nope']"),
        (["--params", "no/such/file.py"], "does not exist"),
    ],
)
def test_cli_reports_bad_params_clearly(capsys, args, message):
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", *args, "--print_config"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("lightning-rl fit: error: ")  # one line, naming the command
    assert message in err
