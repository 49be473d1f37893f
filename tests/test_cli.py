"""The `lightning-rl` command as a user runs it: fit, resume, validate, test, play, print_config, DDP; the
instant help and version, failed runs that leave no trace, evaluation without flags, errors in a few
lines, run directories a person controls, and the Python entry (from_config)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import pytorch_lightning as pl
import torch

from lightning_rl.cli import main

ROOT = Path(__file__).resolve().parents[1]
CARTPOLE = str(ROOT / "configs" / "ppo" / "cartpole.yaml")
QUIET = ["--model.init_args.log_interval_steps", "256", "--model.init_args.epochs", "2",
         "--trainer.enable_progress_bar", "false"]
SMALL = ["--model.init_args.total_env_steps", "512", *QUIET]


@pytest.fixture()
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


EVAL = ["--model.init_args.sampler.init_args.eval_n_envs", "2",
        "--model.init_args.sampler.init_args.eval_max_trajectories", "3"]


def only_run_dir(root: Path, group: str = "ppo_cartpole") -> Path:
    (run_dir,) = (root / "runs" / group).iterdir()
    return run_dir


def test_fit_resume_validate_and_play(in_tmp, capsys):
    main(["fit", "--config", CARTPOLE, *SMALL])
    run_dir = only_run_dir(in_tmp)
    last = run_dir / "checkpoints" / "last.ckpt"
    state = torch.load(last, weights_only=True)
    assert state["lightning_rl"]["train_state"]["env_steps"] == 512
    assert (run_dir / "config.yaml").is_file() and (run_dir / "run_info.yaml").is_file()
    assert list(run_dir.glob("events.out.tfevents.*"))  # TensorBoard, in the run directory

    # Resume with a larger budget: continues from 512 env steps, in the same run directory.
    main(["fit", "--config", CARTPOLE, "--model.init_args.total_env_steps", "1024", *QUIET, "--ckpt_path", "last"])
    assert only_run_dir(in_tmp) == run_dir
    state = torch.load(last, weights_only=True)
    assert state["lightning_rl"]["train_state"]["env_steps"] == 1024

    main(["validate", "--config", CARTPOLE, "--ckpt_path", str(last), *EVAL, "--trainer.enable_progress_bar", "false"])
    out = capsys.readouterr().out
    assert "validate: 3 eval episodes, deterministic actions" in out
    assert "eval/return_mean" not in out  # one table: ours, not Lightning's as well

    videos = in_tmp / "videos"
    main(["play", "--config", CARTPOLE, "--ckpt_path", str(last), "--episodes", "1", "--video_folder", str(videos)])
    out = capsys.readouterr().out
    assert "episode 0: return" in out
    assert list(videos.glob("*.mp4"))

    # The run's own saved config.yaml plays as it is (it records fit's weights_only option).
    main(["play", "--config", str(run_dir / "config.yaml"), "--ckpt_path", str(last), "--episodes", "1"])
    assert "episode 0: return" in capsys.readouterr().out


@pytest.fixture()
def fresh_run(in_tmp, capsys) -> Path:
    """A fresh run directory of 512 env steps (PPO CartPole, written in a new cwd)."""
    main(["fit", "--config", CARTPOLE, *SMALL])
    capsys.readouterr()
    return only_run_dir(in_tmp)


def episode_rows(out: str) -> dict[int, float]:
    """``{episode: return}`` of the table that validate/test print."""
    import re

    return {int(m.group(1)): float(m.group(2)) for m in re.finditer(r"│\s+(\d+) │\s+([-\d.]+) │", out)}


def test_validate_prints_a_table_of_eval_episode_returns(fresh_run, capsys):
    main(["validate", "--config", CARTPOLE, "--ckpt_path", "last", *EVAL, "--trainer.enable_progress_bar", "false"])
    out = capsys.readouterr().out
    assert "validate: 3 eval episodes" in out
    rows = episode_rows(out)
    assert sorted(rows) == [0, 1, 2]
    assert f"{sum(rows.values()) / 3:.2f}" in out  # the mean row


def test_test_evaluates_on_held_out_seeds(fresh_run, capsys):
    main(["validate", "--config", CARTPOLE, "--ckpt_path", "last", *EVAL, "--trainer.enable_progress_bar", "false"])
    validated = episode_rows(capsys.readouterr().out)
    main(["test", "--config", CARTPOLE, "--ckpt_path", "last", *EVAL, "--trainer.enable_progress_bar", "false"])
    out = capsys.readouterr().out
    assert "test (held-out seeds): 3 eval episodes" in out
    tested = episode_rows(out)
    assert sorted(tested) == [0, 1, 2]
    # Other env seeds: other episodes (validate twice gives the same ones, the seeds being fixed).
    assert tested != validated


def test_predict_is_not_a_command(in_tmp, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["predict", "--config", CARTPOLE])
    assert exit_info.value.code == 2


def test_play_a_run_directory_without_restating_the_config(fresh_run, capsys):
    main(["play", str(fresh_run), "--episodes", "2"])
    out = capsys.readouterr().out
    assert "episode 1: return" in out and "mean return" in out
    # The group directory plays its newest run.
    main(["play", str(fresh_run.parent), "--episodes", "1"])
    assert "episode 0: return" in capsys.readouterr().out


def test_play_a_checkpoint_alone_with_the_config_it_carries(fresh_run, in_tmp, capsys):
    elsewhere = in_tmp / "copied.ckpt"
    elsewhere.write_bytes((fresh_run / "checkpoints" / "last.ckpt").read_bytes())
    main(["play", str(elsewhere), "--episodes", "1"])
    assert "episode 0: return" in capsys.readouterr().out


def test_load_from_checkpoint_needs_only_the_path(fresh_run):
    from lightning_rl.algos import PPO

    path = fresh_run / "checkpoints" / "last.ckpt"
    module = PPO.load_from_checkpoint(path)
    state = torch.load(path, weights_only=True)
    assert module.train_state.env_steps == 512
    assert module.sampler.env_id == "CartPole-v1"
    for key, value in state["state_dict"].items():
        if isinstance(value, torch.Tensor):
            assert torch.equal(module.state_dict()[key], value), key


def test_optimizer_and_lr_scheduler_flags_reach_the_module(in_tmp):
    from lightning_rl.algos.base import RLModule
    from lightning_rl.cli import RLCLI, RLTrainer

    args = ["--config", CARTPOLE, *SMALL, "--model.init_args.linear_lr_schedule", "false",
            "--optimizer", "RMSprop", "--optimizer.alpha", "0.9",
            "--lr_scheduler", "StepLR", "--lr_scheduler.step_size", "1", "--lr_scheduler.gamma", "0.5"]
    cli = RLCLI(RLModule, trainer_class=RLTrainer, subclass_mode_model=True, args=["fit", *args])
    module = cli.model
    (optimizer,) = [o.optimizer for o in [module.optimizers()]]
    assert isinstance(optimizer, torch.optim.RMSprop)
    assert optimizer.defaults["alpha"] == 0.9
    # The module's learning_rate is the lr; StepLR halved it once per sampler iteration (2 iterations).
    assert optimizer.param_groups[0]["lr"] == pytest.approx(module.learning_rate * 0.25)


def test_help_lists_every_command_with_one_line_and_the_parameter_file_route(in_tmp, capsys):
    from lightning_rl.cli import COMMANDS

    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "--params FILE" in out and "--cpanel JSON" in out
    commands = ["fit", "validate", "test", "play", "check-env", "launch", "results", "tune", "export"]
    assert sorted(COMMANDS) == sorted(commands)
    listed = [line.split()[0] for line in out.splitlines() if line.startswith("  ") and line.split()[0] in commands]
    assert listed == commands  # each once, on a line of its own


def test_print_config_shows_the_resolved_module(in_tmp, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--config", CARTPOLE, "--print_config"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "lightning_rl.algos.PPO" in out
    assert "CartPole-v1" in out


def test_bad_config_value_is_reported(in_tmp, capsys):
    with pytest.raises(SystemExit):
        main(["fit", "--config", CARTPOLE, "--model.init_args.epochs", "not-a-number"])
    assert "epochs" in capsys.readouterr().err


def test_negative_batch_size_is_rejected(in_tmp):
    with pytest.raises((ValueError, SystemExit)):
        main(["fit", "--config", CARTPOLE, "--model.init_args.sampler.init_args.batch_B", "-4", *SMALL])


def test_ddp_on_cpu_two_ranks(in_tmp):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    cmd = [
        sys.executable, "-m", "lightning_rl.cli", "fit", "--config", CARTPOLE, *SMALL,
        "--trainer.strategy", "ddp", "--trainer.devices", "2", "--trainer.accelerator", "cpu",
        "--trainer.callbacks+=lightning_rl.callbacks.ThroughputCallback",
        "--model.init_args.agent.init_args.normalize_observation", "true",
    ]
    proc = subprocess.run(cmd, cwd=in_tmp, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    state = torch.load(only_run_dir(in_tmp) / "checkpoints" / "last.ckpt", weights_only=True)
    # Each rank collected its share: 2 ranks x 256 env steps per rank reach the 512 budget.
    assert state["lightning_rl"]["train_state"]["env_steps"] == 256
    # Observation statistics merged across ranks: both ranks' 256 observations each.
    assert float(state["state_dict"]["agent.model.encoder.obs_rms.count"]) == 512


def test_play_multiagent_env_without_checkpoint(in_tmp, capsys):
    config = str(ROOT / "configs" / "ppo" / "multiagent_coopgrid.yaml")
    main(["play", "--config", config, "--episodes", "2"])
    out = capsys.readouterr().out
    assert "episode 1: return" in out
    assert "length 20" in out  # CoopGrid episodes last 20 steps



# -- an instant CLI ---------------------------------------------------------------------------------------------

HEAVY = ("torch", "pytorch_lightning", "lightning")
FRESH = f"""
import sys
from lightning_rl.cli import main
try:
    main(sys.argv[1:])
    status = 0
except SystemExit as stop:
    status = stop.code or 0
print("HEAVY=" + ",".join(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)
sys.exit(status)
"""


def run_fresh(args: list[str], cwd: Path) -> tuple[int, str, str, list[str]]:
    """``lightning-rl <args>`` in a new interpreter: its status, stdout, stderr (without the report line)
    and which of torch / Lightning it imported."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", FRESH, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env=env)
    err, _, heavy = proc.stderr.rpartition("HEAVY=")
    return proc.returncode, proc.stdout, err, [m for m in heavy.strip().split(",") if m]


@pytest.mark.parametrize("args", [
    ["--version"], ["--help"], ["fit", "--help"], ["validate", "--help"], ["test", "--help"], ["play", "--help"],
    ["check-env", "--help"], ["launch", "--help"], ["results", "--help"], ["tune", "--help"], ["export", "--help"],
], ids=" ".join)
def test_version_and_every_help_answer_without_importing_torch_or_lightning(args, tmp_path):
    status, out, err, heavy = run_fresh(args, tmp_path)
    assert status == 0, err
    assert heavy == []
    assert out.strip() and err == ""
    if args == ["--version"]:
        import lightning_rl

        assert out == f"lightning-rl {lightning_rl.__version__}\n"
    else:
        assert out.startswith("usage: lightning-rl")


def test_fit_help_is_short_and_names_the_short_override_forms_and_the_full_reference(tmp_path):
    _, out, _, _ = run_fresh(["fit", "--help"], tmp_path)
    assert len(out.splitlines()) <= 40  # LightningCLI's own fit --help is over 500 lines
    for text in ("--config FILE", "--ckpt_path last|FILE", "--run_name NAME", "--model.learning_rate",
                 "--model.sampler.env_id", "--trainer.default_root_dir", "--help all", "--model.help PPO"):
        assert text in out, text


def test_help_all_is_lightning_clis_full_reference(in_tmp, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--help", "all"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "--trainer.max_epochs" in out and "--trainer.callbacks" in out and len(out.splitlines()) > 200


def test_python_dash_m_runs_the_command(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "lightning_rl", "--version"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 0 and proc.stdout.startswith("lightning-rl ")


def test_an_unknown_command_names_the_closest(in_tmp, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["fitt", "--config", CARTPOLE])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.startswith("lightning-rl: error: unknown command 'fitt' (did you mean fit?)")


def test_export_parser_offers_the_exporters_formats():
    from lightning_rl.export.cli import FORMAT_NAMES
    from lightning_rl.export.exporter import FORMATS

    assert sorted(FORMAT_NAMES) == sorted(FORMATS)


# -- failure leaves no trace ------------------------------------------------------------------------------------

def test_a_missing_ckpt_path_exits_2_in_one_line_before_anything_is_imported_or_created(tmp_path):
    status, out, err, heavy = run_fresh(["fit", "--config", CARTPOLE, "--ckpt_path", "nothere.ckpt"], tmp_path)
    assert status == 2
    assert err.splitlines() == [
        "lightning-rl fit: error: --ckpt_path nothere.ckpt: no such file; give a .ckpt file (or last, for the "
        "newest run)"]
    assert heavy == [] and out == ""
    assert list(tmp_path.iterdir()) == []


def error_lines(err: str) -> list[str]:
    """The command's own error lines (from ``lightning-rl <command>: error:`` on; Lightning's info lines before it
    are left out)."""
    lines = err.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("lightning-rl ") and " error: " in line)
    return lines[first:]


def test_a_run_that_fails_before_its_first_checkpoint_leaves_no_run_directory(in_tmp, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--config", CARTPOLE, *SMALL, "--model.sampler.env_id", "CartPol-v1"])
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    lines = error_lines(captured.err)
    assert lines[0].startswith("lightning-rl fit: error: make_env: gymnasium cannot make env_id='CartPol-v1'")
    assert "Did you mean: `CartPole`" in lines[0]
    assert lines[1:] == ["  --verbose shows the traceback"]
    assert "Traceback" not in captured.err and "stopped:" not in captured.out  # no summary of a run never started
    assert not (in_tmp / "runs").exists()
    # A later run is the newest: nothing of the failed one is in the way.
    main(["fit", "--config", CARTPOLE, *SMALL])
    assert len(list((in_tmp / "runs" / "ppo_cartpole").iterdir())) == 1


class RaiseInEpoch(pl.Callback):
    """Raises ``RuntimeError("boom")`` as epoch ``epoch`` (counted from 0) starts."""

    def __init__(self, epoch: int = 1) -> None:
        self.epoch = epoch

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        if trainer.current_epoch == self.epoch:
            raise RuntimeError("boom")


def test_a_run_that_fails_after_its_first_checkpoint_keeps_its_run_directory(in_tmp, capsys):
    # One sampler iteration per epoch: last.ckpt at the end of epoch 0, the error as epoch 1 starts.
    with pytest.raises(RuntimeError, match="boom"):
        main(["fit", "--config", CARTPOLE, *SMALL, f"--trainer.callbacks+={__name__}.RaiseInEpoch"])
    run_dir = only_run_dir(in_tmp)
    assert env_steps(run_dir / "checkpoints" / "last.ckpt") == 256


def test_play_of_a_group_picks_the_newest_run_with_a_checkpoint(fresh_run, capsys):
    from lightning_rl.runs import run_dir_of

    killed = fresh_run.parent / "2099-01-01_00-00-00"  # newer, killed before its first checkpoint
    (killed / "checkpoints").mkdir(parents=True)
    (killed / "config.yaml").write_text((fresh_run / "config.yaml").read_text())
    assert run_dir_of(fresh_run.parent) == fresh_run
    main(["play", str(fresh_run.parent), "--episodes", "1"])
    assert "episode 0: return" in capsys.readouterr().out


# -- evaluation out of the box ----------------------------------------------------------------------------------

@pytest.mark.parametrize("command", ["validate", "test"])
def test_validate_and_test_without_eval_envs_evaluate_with_defaults_say_so_and_write_nothing(
    command, fresh_run, in_tmp, capsys
):
    (in_tmp / "config.yaml").write_text("a file of the user's\n")
    before = sorted((str(p), p.stat().st_mtime_ns) for p in in_tmp.rglob("*"))
    main([command, "--config", CARTPOLE, "--ckpt_path", "last", "--trainer.enable_progress_bar", "false"])
    out = capsys.readouterr().out
    assert (f"{command}: evaluating on 4 envs, 10 episodes (defaults: eval_n_envs=4, eval_max_trajectories=10; "
            "set them with --model.sampler.eval_n_envs and --model.sampler.eval_max_trajectories)") in out
    assert sorted(episode_rows(out)) == list(range(10))
    assert sorted((str(p), p.stat().st_mtime_ns) for p in in_tmp.rglob("*")) == before  # nothing written


# -- errors in a few lines --------------------------------------------------------------------------------------

@pytest.mark.parametrize(("args", "first"), [
    (["--model.learning_rat", "0.001"], "unknown key --model.learning_rat; did you mean --model.learning_rate?"),
    (["--model.init_args.learning_rat", "0.001"],
     "unknown key --model.learning_rat; did you mean --model.learning_rate?"),
    (["--model.sampler.env_idd", "X"], "unknown key --model.sampler.env_idd; did you mean --model.sampler.env_id?"),
    (["--trainer.max_epoch", "3"], "unknown key --trainer.max_epoch; did you mean --trainer.max_epochs?"),
    (["--seed_everythng", "3"], "unknown key --seed_everythng; did you mean --seed_everything?"),
    (["--model.epochs", "many"], "--model.epochs: expected an int, got 'many'"),
    # Optional values (int | None, float | None): the union's own type and the value given.
    (["--model.total_env_steps", "abc"], "--model.total_env_steps: expected an int, got 'abc'"),
    (["--model.value_clip", "xyz"], "--model.value_clip: expected a number, got 'xyz'"),
    (["--model.sampler.backend", "foo"],
     "--model.sampler.backend: expected one of auto, gymnasium, ale, envpool, sync, async, got 'foo'"),
    (["--model.total_env_steps", "-5"], "total_env_steps must be > 0, got -5"),
    (["--model", "PPOO"], "--model: 'PPOO' is not a class or config file; did you mean PPO?"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_a_config_error_is_a_line_or_two_naming_the_key_the_value_and_the_fix(args, first, in_tmp, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--config", CARTPOLE, *args])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    lines = error_lines(err)
    assert lines[0] == f"lightning-rl fit: error: {first}"
    assert len(lines) <= 3
    for noise in ("usage:", "Namespace(", "Given value", "Subtypes", "Traceback"):
        assert noise not in err
    assert not (in_tmp / "runs").exists()


def test_verbose_shows_the_parsers_full_message(in_tmp, capsys):
    with pytest.raises(SystemExit):
        main(["fit", "--config", CARTPOLE, "--model.learning_rat", "0.001", "--verbose"])
    err = capsys.readouterr().err
    assert "Option 'learning_rat' is not accepted" in err and "usage:" in err


def test_a_yaml_file_error_names_the_file_key_and_line(in_tmp, capsys):
    text = Path(CARTPOLE).read_text()
    typo = in_tmp / "typo.yaml"
    typo.write_text(text.replace("learning_rate:", "learning_rat:"))
    with pytest.raises(SystemExit):
        main(["fit", "--config", str(typo)])
    assert error_lines(capsys.readouterr().err)[0] == (
        f"lightning-rl fit: error: unknown key model.learning_rat (in {typo}); did you mean model.learning_rate?")
    broken = in_tmp / "broken.yaml"
    broken.write_text(text.replace("    epochs: 20", "    epochs: [20"))
    line = text.splitlines().index("    epochs: 20") + 1  # where the unclosed [ opens
    with pytest.raises(SystemExit):
        main(["fit", "--config", str(broken)])
    first = error_lines(capsys.readouterr().err)[0]
    assert first.startswith(f"lightning-rl fit: error: config {broken}: YAML syntax error at line {line}, column 13")


def test_a_parameter_file_error_names_the_file(in_tmp, capsys):
    params = in_tmp / "params.py"
    params.write_text(
        "import yaml\n"
        f"BASE = yaml.safe_load(open({CARTPOLE!r}))\n"
        "CPANEL = {'lr': 0.001}\n"
        "def gen_params(cpanel):\n"
        "    BASE['model']['init_args']['learning_rat'] = cpanel['lr']\n"
        "    return BASE\n"
    )
    with pytest.raises(SystemExit):
        main(["fit", "--params", str(params)])
    assert error_lines(capsys.readouterr().err)[0] == (
        f"lightning-rl fit: error: unknown key model.learning_rat (in {params}); did you mean model.learning_rate?")
    with pytest.raises(SystemExit):
        main(["fit", "--params", str(params), "--cpanel", '{"lrr": 0.1}'])
    assert error_lines(capsys.readouterr().err)[0].startswith(
        "lightning-rl fit: error: --cpanel: unknown key(s) ['lrr']; did you mean 'lr'?")


# -- runs a person controls -------------------------------------------------------------------------------------

def env_steps(checkpoint: Path) -> int:
    return int(torch.load(checkpoint, weights_only=True)["lightning_rl"]["train_state"]["env_steps"])


def test_ckpt_path_last_with_run_name_resumes_that_run(in_tmp, capsys):
    main(["fit", "--config", CARTPOLE, *SMALL, "--run_name", "first"])
    main(["fit", "--config", CARTPOLE, *SMALL, "--run_name", "second"])  # the newest
    main(["fit", "--config", CARTPOLE, "--model.total_env_steps", "768", *QUIET, "--ckpt_path", "last",
          "--run_name", "first"])
    group = in_tmp / "runs" / "ppo_cartpole"
    (first,) = group.glob("*_first")
    (second,) = group.glob("*_second")
    assert env_steps(first / "checkpoints" / "last.ckpt") == 768
    assert env_steps(second / "checkpoints" / "last.ckpt") == 512
    assert len(list(group.iterdir())) == 2  # resumed in place: no third run directory
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--config", CARTPOLE, *SMALL, "--ckpt_path", "last", "--run_name", "third"])
    assert exit_info.value.code == 2
    assert "no run named third" in capsys.readouterr().err


def test_default_root_dir_places_the_run_directories(in_tmp):
    main(["fit", "--config", CARTPOLE, *SMALL, "--trainer.default_root_dir", "experiments"])
    assert not (in_tmp / "runs").exists()
    (run_dir,) = (in_tmp / "experiments" / "runs" / "ppo_cartpole").iterdir()
    main(["fit", "--config", CARTPOLE, "--model.total_env_steps", "768", *QUIET, "--ckpt_path", "last",
          "--trainer.default_root_dir", "experiments"])
    assert env_steps(run_dir / "checkpoints" / "last.ckpt") == 768


# -- Python ------------------------------------------------------------------------------------------------------

def test_from_config_builds_the_module_and_trainer_that_fit_would_train(in_tmp):
    import lightning_rl

    module, trainer = lightning_rl.from_config(
        CARTPOLE, {"model.sampler.batch_B": 4, "trainer.enable_progress_bar": False, "run_name": "py"},
        total_env_steps=256, log_interval_steps=128, epochs=1,
    )
    assert module.sampler.batch_spec.B == 4 and module.total_env_steps == 256 and module.epochs == 1
    trainer.fit(module)
    (run_dir,) = (in_tmp / "runs" / "ppo_cartpole").glob("*_py")
    assert env_steps(run_dir / "checkpoints" / "last.ckpt") == 256
    assert (run_dir / "config.yaml").is_file()
    with pytest.raises(ValueError, match="did you mean --model.learning_rate"):
        lightning_rl.from_config(CARTPOLE, {"model.learning_rat": 0.1})
