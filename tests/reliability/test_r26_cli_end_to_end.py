"""Row 26: the installed ``lightning-rl`` command end to end, each subcommand its own process.

``fit -c configs/ppo/cartpole.yaml`` with a 512-env-step budget (2 sampler iterations of 8 envs
x 32 steps, one epoch each), then ``validate`` and ``test`` and ``play --video_folder`` with the
run's ``last.ckpt``, then a resume to 1024 env steps with ``--ckpt_path``. Every command must exit
0; the run directory keeps the resolved ``config.yaml``; ``play`` writes a non-empty ``.mp4``
(gymnasium's ``RecordVideo``, encoded with the installed moviepy/imageio-ffmpeg) holding one
frame per step plus the reset frame; the resumed run starts from the checkpoint's counters
(read inside the run by :class:`RecordStart`) and ends with twice the first run's env steps,
iterations and optimizer steps. ``tests/test_cli.py`` runs the same commands in-process.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import pytorch_lightning as pl
import torch
import yaml

ROOT = Path(__file__).resolve().parents[2]
CARTPOLE = str(ROOT / "configs" / "ppo" / "cartpole.yaml")
QUIET = ["--model.init_args.log_interval_steps", "256", "--model.init_args.epochs", "2",
         "--trainer.enable_progress_bar", "false"]
EVAL = ["--model.init_args.sampler.init_args.eval_n_envs", "2",
        "--model.init_args.sampler.init_args.eval_max_trajectories", "2"]


def last_of(cwd: Path) -> Path:
    """The ``last.ckpt`` of the only run directory under ``cwd``."""
    (last,) = cwd.glob("runs/ppo_cartpole/*/checkpoints/last.ckpt")
    return last


class RecordStart(pl.Callback):
    """Writes the counters a fit starts from to ``start_counters.json`` (in the run's cwd)."""

    def on_train_start(self, trainer: pl.Trainer, pl_module: Any) -> None:
        counters = {"global_step": trainer.global_step, **pl_module.train_state.state_dict()}
        Path("start_counters.json").write_text(json.dumps(counters))


def entry_point() -> str:
    """The ``lightning-rl`` console script installed with this Python."""
    found = shutil.which("lightning-rl", path=str(Path(sys.executable).parent)) or shutil.which("lightning-rl")
    if found is None:
        pytest.fail("the lightning-rl console script is not installed (pip install -e .)")
    return found


def cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    # PYTHONPATH: the resumed fit loads RecordStart from this module.
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=str(ROOT))
    proc = subprocess.run([entry_point(), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{args[0]} exited {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    return proc


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory of one fit of 512 env steps."""
    path = tmp_path_factory.mktemp("fit")
    cli(["fit", "-c", CARTPOLE, "--model.init_args.total_env_steps", "512", *QUIET], path)
    return path


def counters(ckpt: Path) -> dict[str, Any]:
    state = torch.load(ckpt, weights_only=True)
    return {"global_step": state["global_step"], **state["lightning_rl"]["train_state"]}


def test_fit_saves_the_resolved_config_and_a_checkpoint(run_dir):
    configs = list(run_dir.glob("runs/ppo_cartpole/*/config.yaml"))
    assert len(configs) == 1
    config = yaml.safe_load(configs[0].read_text())
    assert config["model"]["class_path"] == "lightning_rl.algos.PPO"
    assert config["model"]["init_args"]["total_env_steps"] == 512  # the command line's value
    assert counters(last_of(run_dir))["env_steps"] == 512


@pytest.mark.parametrize("subcommand", ["validate", "test"])
def test_validate_and_test_evaluate_the_runs_checkpoint(run_dir, subcommand):
    proc = cli([subcommand, "-c", CARTPOLE, "--ckpt_path", str(last_of(run_dir)), *EVAL,
                "--trainer.enable_progress_bar", "false"], run_dir)
    # One table of the evaluation's episodes: its title, then a row per episode and their mean.
    title = "validate:" if subcommand == "validate" else "test (held-out seeds):"
    assert f"{title} 2 eval episodes, deterministic actions" in proc.stdout, proc.stdout[-2000:]
    assert "│    mean │" in proc.stdout


def test_play_records_a_non_empty_video(run_dir):
    videos = run_dir / "videos"
    proc = cli(["play", "-c", CARTPOLE, "--ckpt_path", str(last_of(run_dir)), "--episodes", "1",
                "--video_folder", str(videos)], run_dir)
    length = int(re.search(r"episode 0: return [-\d.]+ length (\d+)", proc.stdout).group(1))
    (video,) = videos.glob("*.mp4")
    assert video.stat().st_size > 0
    import imageio.v2 as imageio

    reader = imageio.get_reader(video, "ffmpeg")
    try:
        # The reset frame, then one per step; gymnasium's RecordVideo (moviepy, ffmpeg) may drop the
        # last one: plain CartPole episodes of 8, 9 and 10 steps gave 9, 10 and 10 frames.
        assert length <= reader.count_frames() <= length + 1
    finally:
        reader.close()


def test_resume_continues_the_step_count(run_dir, tmp_path):
    # Another cwd, so the resumed run writes its own checkpoints and leaves run_dir's as they are.
    first = counters(last_of(run_dir))
    cli(["fit", "-c", CARTPOLE, "--model.init_args.total_env_steps", "1024", *QUIET, "--ckpt_path",
         str(last_of(run_dir)), "--trainer.callbacks+=tests.reliability.test_r26_cli_end_to_end.RecordStart"], tmp_path)
    start = json.loads((tmp_path / "start_counters.json").read_text())
    assert (start["global_step"], start["env_steps"], start["itr"]) == (first["global_step"], 512, 2)
    final = counters(last_of(tmp_path))
    # The same schedule again: twice the env steps, iterations and optimizer steps.
    assert (final["env_steps"], final["itr"]) == (1024, 4)
    assert final["global_step"] == 2 * first["global_step"] > 0
    assert final["updates"] == 2 * first["updates"]
