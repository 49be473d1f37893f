"""Resuming a finished run: ``fit --ckpt_path <last.ckpt of a run that reached its total_env_steps>``,
or ``--ckpt_path last`` on such a run, with the same budget prints one line saying the run already
reached its budget and how to go on (a larger ``--model.total_env_steps``), and exits 0 before any
env or worker starts: no env is made, the module is never set up, ``last.ckpt`` stays byte-identical
and nothing is written into the run directory. With a larger budget the same command resumes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import gymnasium
import pytest
import torch

from lightning_rl.algos.base import RLModule
from lightning_rl.cli import main

ROOT = Path(__file__).resolve().parents[2]
CARTPOLE = str(ROOT / "configs" / "ppo" / "cartpole.yaml")
QUIET = ["--model.log_interval_steps", "256", "--model.epochs", "2", "--trainer.enable_progress_bar", "false"]


def snapshot(run_dir: Path) -> dict[str, tuple[int, bytes]]:
    """Every file of a run directory: its modification time and bytes."""
    return {str(p): (p.stat().st_mtime_ns, p.read_bytes()) for p in sorted(run_dir.rglob("*")) if p.is_file()}


def finished_line(checkpoint: str) -> str:
    return (f"lightning-rl: {checkpoint} already reached its budget (512 of total_env_steps=512 env steps): "
            "nothing to train; give a larger --model.total_env_steps to train on")


def test_resuming_a_finished_run_exits_0_in_one_line_touching_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    main(["fit", "--config", CARTPOLE, "--model.total_env_steps", "512", *QUIET])
    (run_dir,) = (tmp_path / "runs" / "ppo_cartpole").iterdir()
    last = run_dir / "checkpoints" / "last.ckpt"
    before = snapshot(run_dir)
    capsys.readouterr()

    def no_env(*args, **kwargs):
        raise AssertionError("an env was made")

    def no_setup(self, stage):
        raise AssertionError("the module was set up (envs, workers)")

    with monkeypatch.context() as patch:
        patch.setattr(gymnasium, "make", no_env)
        patch.setattr(gymnasium, "make_vec", no_env)
        patch.setattr(RLModule, "setup", no_setup)
        for ckpt_path in (str(last), "last"):
            with pytest.raises(SystemExit) as exit_info:
                main(["fit", "--config", CARTPOLE, "--model.total_env_steps", "512", *QUIET, "--ckpt_path", ckpt_path])
            assert exit_info.value.code == 0
            captured = capsys.readouterr()
            lines = [line for line in (captured.out + captured.err).splitlines() if line.strip()]
            shown = str(last) if ckpt_path != "last" else str(last.relative_to(tmp_path))
            assert lines == [finished_line(shown)]
            assert snapshot(run_dir) == before  # last.ckpt byte-identical, nothing written
    assert len(list((tmp_path / "runs" / "ppo_cartpole").iterdir())) == 1

    # A larger budget resumes the same run directory.
    main(["fit", "--config", CARTPOLE, "--model.total_env_steps", "768", *QUIET, "--ckpt_path", "last"])
    state = torch.load(last, weights_only=True)
    assert state["lightning_rl"]["train_state"]["env_steps"] == 768


def test_the_command_prints_only_that_line(tmp_path):
    # The installed entry point in its own process: nothing else on either stream (no Lightning lines).
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    command = [sys.executable, "-m", "lightning_rl", "fit", "--config", CARTPOLE, "--model.total_env_steps", "512",
               *QUIET]
    first = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr[-3000:]
    (last,) = tmp_path.glob("runs/ppo_cartpole/*/checkpoints/last.ckpt")
    before = last.read_bytes()
    again = subprocess.run([*command, "--ckpt_path", "last"], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=300)
    assert again.returncode == 0
    assert again.stderr == ""
    assert again.stdout.splitlines() == [finished_line(str(last.relative_to(tmp_path)))]
    assert last.read_bytes() == before


def test_a_checkpoint_of_more_processes_resumed_on_one_counts_its_own_steps(tmp_path, monkeypatch):
    # Counters are per rank: 256 env steps on each of 2 ranks reached a 512 budget there, but one
    # process resuming it continues from rank 0's counters (256 so far), so it trains on.
    monkeypatch.chdir(tmp_path)
    main(["fit", "--config", CARTPOLE, "--model.total_env_steps", "256", *QUIET])
    (last,) = tmp_path.glob("runs/ppo_cartpole/*/checkpoints/last.ckpt")
    state = torch.load(last, weights_only=True)
    assert state["lightning_rl"]["train_state"]["env_steps"] == 256
    state["lightning_rl"]["world_size"] = 2
    torch.save(state, last)
    main(["fit", "--config", CARTPOLE, "--model.total_env_steps", "512", *QUIET, "--ckpt_path", "last"])
    assert torch.load(last, weights_only=True)["lightning_rl"]["train_state"]["env_steps"] == 512
