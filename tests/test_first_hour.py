"""The first hour one step off the documented path, walked as a user walks it: each command a new
``lightning-rl`` process in a temporary directory, its output read as a person reads it.

Another env than the config's, a run's own ``config.yaml``, one eval flag alone, ``validate`` of a run,
an exception in the user's env, Ctrl-C at the start and in the middle, ``results`` of runs of one seed.
The runs are tiny (512-4,096 env steps); the module shares them.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.signals import sigint_default_in_child

ROOT = Path(__file__).resolve().parents[1]
CARTPOLE = "configs/ppo/cartpole.yaml"
QUIET = ["--model.log_interval_steps", "256", "--model.epochs", "1", "--trainer.enable_progress_bar", "false"]
#: Lines no command may print: Lightning's device report and its restore notices, warnings.
NOISE = ("GPU available", "TPU available", "Restoring states", "Loaded model weights", "Warning", "warn(")

BAD_ENV = '''
import gymnasium as gym
import numpy as np


class BadEnv(gym.Env):
    """Fails at its N-th reset or step."""

    observation_space = gym.spaces.Box(-1, 1, (3,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, fail_reset_at=None, fail_step_at=None):
        self.fail_reset_at, self.fail_step_at = fail_reset_at, fail_step_at
        self.resets = self.steps = self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.resets += 1
        if self.fail_reset_at is not None and self.resets >= self.fail_reset_at:
            raise RuntimeError(f"injected reset failure at reset {self.resets}")
        self.t = 0
        return np.zeros(3, np.float32), {}

    def step(self, action):
        self.steps += 1
        if self.fail_step_at is not None and self.steps >= self.fail_step_at:
            raise KeyError(f"injected step failure at step {self.steps}")
        self.t += 1
        return np.zeros(3, np.float32), 1.0, self.t >= 10, False, {}


gym.register("BadEnv-v0", entry_point=BadEnv)
'''


def line_of(text: str) -> int:
    """The line of ``myenvs.py`` (:data:`BAD_ENV`) that holds ``text``."""
    return next(i for i, line in enumerate(BAD_ENV.splitlines(), start=1) if text in line)


def cli(args: list[str], cwd: Path, check: int | None = 0, timeout: float = 300) -> subprocess.CompletedProcess:
    """``lightning-rl ARGS`` in ``cwd``, a process of its own; its exit status must be ``check`` (None: any)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(cwd), str(ROOT)])}
    proc = subprocess.run([sys.executable, "-m", "lightning_rl", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)
    if check is not None:
        assert proc.returncode == check, f"{args}: exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    for noise in NOISE:
        assert noise not in proc.stdout + proc.stderr, f"{args} printed {noise!r}:\n{proc.stderr[-2000:]}"
    return proc


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    """A user's working directory: the shipped configs, and two finished runs: PPO on Acrobot (the CartPole
    config with another env) and PPO on CartPole, evaluated on 2 envs."""
    cwd = tmp_path_factory.mktemp("home")
    (cwd / "configs").symlink_to(ROOT / "configs")
    (cwd / "myenvs.py").write_text(BAD_ENV)
    cli(["fit", "--config", CARTPOLE, "--model.sampler.env_id", "Acrobot-v1", "--model.total_env_steps", "512",
         *QUIET], cwd)
    cli(["fit", "--config", CARTPOLE, "--model.total_env_steps", "512", *QUIET,
         "--trainer.callbacks+=EvaluationCallback", "--model.sampler.eval_n_envs", "2"], cwd)
    return cwd


def only_run(home: Path, group: str) -> Path:
    (run,) = [p for p in (home / "runs" / group).iterdir() if (p / "config.yaml").is_file()]
    return run


def test_another_env_is_its_own_group_and_resume_finds_the_configs_run(home):
    acrobot, cartpole = only_run(home, "ppo_acrobot"), only_run(home, "ppo_cartpole")
    assert yaml.safe_load((acrobot / "run_info.yaml").read_text())["status"] == "finished"
    out = cli(["fit", "--config", CARTPOLE, "--model.total_env_steps", "768", *QUIET, "--ckpt_path", "last"],
              home).stdout
    # Resumes the CartPole run, saying which, in place; the Acrobot run is not touched.
    assert re.search(rf"^resuming: runs/ppo_cartpole/{cartpole.name}/checkpoints/last.ckpt \(512 env steps, saved "
                     r".* ago; the newest last.ckpt of ppo_cartpole\)$", out, re.MULTILINE), out
    assert only_run(home, "ppo_cartpole") == cartpole
    assert "env_id: Acrobot-v1" in (acrobot / "config.yaml").read_text()


def test_play_and_export_say_which_run_and_checkpoint(home):
    out = cli(["play", "runs/ppo_acrobot", "--episodes", "1"], home).stdout.splitlines()
    run = only_run(home, "ppo_acrobot").name
    assert re.fullmatch(rf"play: runs/ppo_acrobot/{run}/checkpoints/last.ckpt \(512 env steps, saved .* ago; the "
                        r"newest finished run of ppo_acrobot; last.ckpt: it has no best.ckpt\)", out[0]), out[0]
    assert out[1].startswith("episode 0: return -")
    exported = cli(["export", "runs/ppo_cartpole", "--format", "onnx", "--out", "exported"], home).stdout
    assert re.search(r"^export: runs/ppo_cartpole/.*/checkpoints/best.ckpt \(\d[\d,]* env steps, saved .* ago; the "
                     r"newest finished run of ppo_cartpole; best.ckpt: its best evaluation\)$", exported, re.MULTILINE)


def test_play_of_a_run_imports_no_lightning(home):
    code = ("import sys; from lightning_rl.cli import main; main(['play', 'runs/ppo_acrobot', '--episodes', '1']); "
            "print('LOADED', sorted(m for m in ('pytorch_lightning', 'lightning_fabric', 'jsonargparse') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=home, capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout
    # jsonargparse builds the agent from its config; Lightning is never imported.
    assert "LOADED ['jsonargparse']" in out


def table_episodes(out: str) -> int:
    return len(re.findall(r"^│ +\d+ │", out, re.MULTILINE))


def test_validate_takes_a_run_and_each_eval_flag_alone(home):
    # The run evaluated on 2 eval envs; validate starts its own (4 by default) from the seed.
    out = cli(["validate", "--config", CARTPOLE, "--ckpt_path", "last"], home).stdout
    assert "validate: evaluating on 4 envs, 10 episodes (defaults: eval_n_envs=4, eval_max_trajectories=10;" in out
    assert out.count("┏") == 1 and table_episodes(out) == 10  # one table
    assert "validate: 10 eval episodes, deterministic actions" in out
    out = cli(["validate", "runs/ppo_cartpole", "--model.sampler.eval_max_trajectories", "3"], home).stdout
    assert out.startswith("validate: runs/ppo_cartpole/")
    assert "evaluating on 4 envs, 3 episodes (defaults: eval_n_envs=4;" in out and table_episodes(out) == 3
    out = cli(["test", "runs/ppo_cartpole", "--model.sampler.eval_n_envs", "8", "--deterministic", "false"],
              home).stdout
    assert "evaluating on 8 envs, 10 episodes (defaults: eval_max_trajectories=10;" in out
    assert "test (held-out seeds): 10 eval episodes, sampled actions" in out
    ckpt = next((home / "runs" / "ppo_acrobot").glob("*/checkpoints/last.ckpt"))
    out = cli(["validate", "--ckpt_path", str(ckpt.relative_to(home)), "--model.sampler.eval_max_trajectories", "2"],
              home).stdout
    assert out.startswith("validate: runs/ppo_acrobot/") and table_episodes(out) == 2
    out = cli(["validate", "--config", CARTPOLE, "--model.sampler.eval_max_trajectories", "2"], home).stdout
    assert out.startswith("validate: no checkpoint given: evaluating the untrained agent")
    err = cli(["validate"], home, check=2).stderr
    assert err.startswith("lightning-rl validate: error: which run? give a run directory")


def test_a_runs_config_yaml_runs_it_again_and_resumes_it(home):
    run = only_run(home, "ppo_cartpole")
    config = run / "config.yaml"
    assert yaml.safe_load(config.read_text())["ckpt_path"] is None  # after a resume too
    before = set((home / "runs" / "ppo_cartpole").iterdir())
    cli(["fit", "--config", str(config.relative_to(home)), "--model.total_env_steps", "512",
         "--trainer.enable_progress_bar", "false"], home)
    new = set((home / "runs" / "ppo_cartpole").iterdir()) - before  # a new run, in the algorithm's group
    assert len(new) == 1 and sorted(p.name for p in (home / "runs").iterdir()) == ["ppo_acrobot", "ppo_cartpole"]
    (new_run,) = new
    out = cli(["fit", "--config", str(config.relative_to(home)), "--model.total_env_steps", "1024",
               "--trainer.enable_progress_bar", "false", "--ckpt_path", "last"], home).stdout
    assert f"resuming: runs/ppo_cartpole/{new_run.name}/checkpoints/last.ckpt (512 env steps" in out


def test_an_exception_in_the_users_env_says_where_in_four_lines(home):
    env = ["--model.sampler.env_id", "myenvs:BadEnv-v0", "--model.sampler.backend", "sync"]
    proc = cli(["fit", "--config", CARTPOLE, *env, "--model.sampler.env_kwargs", "{fail_reset_at: 4}", *QUIET],
               home, check=1)
    lines = proc.stderr.strip().splitlines()
    assert lines[-3:] == [
        "lightning-rl fit: error: RuntimeError: injected reset failure at reset 4",
        f"  at myenvs.py:{line_of('raise RuntimeError')} in reset",
        "  --verbose shows the traceback",
    ], proc.stderr
    proc = cli(["fit", "--config", CARTPOLE, *env, "--model.sampler.env_kwargs", "{fail_step_at: 100}",
                "--model.total_env_steps", "4096", *QUIET], home, check=1)
    lines = proc.stderr.strip().splitlines()
    assert "Traceback" not in proc.stderr and len([line for line in lines if not line.startswith("Seed")]) <= 4
    assert lines[-3].startswith("lightning-rl fit: error: KeyError: ")
    assert "injected step failure at step 100" in lines[-3]
    assert lines[-2] == f"  at myenvs.py:{line_of('raise KeyError')} in step"
    log = home / lines[-1].removeprefix("  the whole traceback: ")
    assert log.name == "error.log" and "Traceback" in log.read_text() and "myenvs.py" in log.read_text()
    info = yaml.safe_load((log.parent / "run_info.yaml").read_text())
    assert info["status"] == "failed" and info["error"].startswith("KeyError")


def start(args: list[str], cwd: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, "-m", "lightning_rl", *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=sigint_default_in_child)


def test_ctrl_c_is_quiet_at_the_start_and_prints_the_resume_command_later(home, tmp_path):
    (tmp_path / "configs").symlink_to(ROOT / "configs")
    early = start(["fit", "--config", CARTPOLE], tmp_path)
    time.sleep(0.5)  # importing torch
    early.send_signal(signal.SIGINT)
    out, err = early.communicate(timeout=60)
    assert early.returncode == 130 and err.strip().splitlines()[-1] == "lightning-rl fit: interrupted", err
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 2
    assert not (tmp_path / "runs").exists()

    proc = start(["fit", "--config", CARTPOLE, "--model.total_env_steps", "4096", *QUIET[:4],
                  "--trainer.enable_progress_bar", "false"], tmp_path)
    deadline = time.monotonic() + 120
    while not list(tmp_path.glob("runs/ppo_cartpole/*/checkpoints/last.ckpt")) and time.monotonic() < deadline:
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    # No summary without a progress bar; the run directory records the interrupt.
    (run,) = (tmp_path / "runs" / "ppo_cartpole").iterdir()
    assert yaml.safe_load((run / "run_info.yaml").read_text())["status"] == "interrupted"

    proc = start(["fit", "--config", CARTPOLE, "--model.total_env_steps", "4096", *QUIET[:4]], tmp_path)
    while len(list(tmp_path.glob("runs/ppo_cartpole/*/checkpoints/last.ckpt"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    resume = [line for line in out.splitlines() if line.startswith("resume it: ")]
    assert len(resume) == 1, out
    command = shlex.split(resume[0].removeprefix("resume it: "))
    assert command[:3] == ["lightning-rl", "fit", "--config"] and command[4] == "--ckpt_path"
    resumed = cli([*command[1:], "--trainer.enable_progress_bar", "false"], tmp_path).stdout
    assert resumed.startswith(f"resuming: {command[5]}")
    assert yaml.safe_load((Path(tmp_path) / Path(command[3]).parent / "run_info.yaml").read_text())["status"] == \
        "finished"


def test_results_name_each_run_and_count_seeds_and_runs(home):
    out = cli(["results", "runs/ppo_cartpole"], home).stdout
    runs = sorted(p.name for p in (home / "runs" / "ppo_cartpole").iterdir() if (p / "config.yaml").is_file())
    rows = [line.split() for line in out.splitlines() if line.startswith("ppo_cartpole ")]
    assert sorted(row[1] for row in rows[:-1]) == runs  # one row per run, named by its directory
    assert rows[-1][:3] == ["ppo_cartpole", str(len(runs)), "1"]  # runs, distinct seeds
    for run in runs:
        recorded = yaml.safe_load((home / "runs" / "ppo_cartpole" / run / "run_info.yaml").read_text())["wall_time_s"]
        row = next(r for r in rows if r[1] == run)
        assert row[-2:] == [f"{recorded:.1f}", "s"]  # the run's own wall time, as its summary said it


def test_check_env_of_a_gymnasium_env_gives_no_advice_about_its_own_spaces(home):
    assert cli(["check-env", "CartPole-v1"], home).stdout == "CartPole-v1: passes the env contract checks\n"


def test_a_test_that_signals_passes_when_the_suite_runs_in_the_background(tmp_path):
    # A shell's background job starts with SIGINT ignored, and so does every process it starts.
    test = "tests/callbacks/test_progress.py::test_summary_names_an_interrupt"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test], cwd=ROOT,
                          capture_output=True, text=True, timeout=300,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    assert proc.returncode == 0, proc.stdout[-3000:]


def test_make_test_passes_one_quiet_flag(tmp_path):
    dry = subprocess.run(["make", "-n", "test", "PYTEST_ARGS=-q tests/test_returns.py"], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    line = next(line for line in dry.splitlines() if "pytest" in line)
    assert line.split().count("-q") == 1, line



@pytest.mark.parametrize("command", ["fit", "validate", "test", "play", "check-env", "launch", "results", "tune",
                                     "export"])
def test_every_help_reads_as_plain_text(command, capsys):
    from lightning_rl.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    assert "``" not in capsys.readouterr().out  # reST markup is for the docs site, not a terminal
