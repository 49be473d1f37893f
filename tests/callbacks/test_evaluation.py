"""EvaluationCallback: best.ckpt by eval return, hp_metric, eval videos in the run directory and in
TensorBoard, and the headless OpenGL choice for MuJoCo."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import pytorch_lightning as pl
import torch
from pytorch_lightning.loggers import TensorBoardLogger

from lightning_rl.agents import CategoricalPgAgent
from lightning_rl.algos import PPO
from lightning_rl.callbacks import EvaluationCallback
from lightning_rl.samplers import SerialSampler
from lightning_rl.video import choose_gl_backend

ROOT = Path(__file__).resolve().parents[2]


def tiny_ppo() -> PPO:
    return PPO(
        CategoricalPgAgent(hidden_sizes=[16]),
        SerialSampler(env_id="CartPole-v1", batch_T=16, batch_B=2, eval_n_envs=2, eval_max_trajectories=2),
        epochs=1, minibatches=1, total_env_steps=4 * 32, log_interval_steps=32,
    )


class ScriptedReturns(EvaluationCallback):
    """Evaluation whose ``eval/return_mean`` follows a script (the episodes still run)."""

    def __init__(self, returns: list[float], **kwargs) -> None:
        super().__init__(**kwargs)
        self.returns = list(returns)
        self.saved_at: list[int] = []

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        import lightning_rl.callbacks.evaluation as evaluation

        value = self.returns.pop(0)
        real = evaluation.summarize_episodes
        evaluation.summarize_episodes = lambda table, prefix: {**real(table, prefix), "eval/return_mean": value}
        try:
            best = self.best_return
            super().on_train_epoch_end(trainer, pl_module)
            if self.best_return != best:
                self.saved_at.append(pl_module.train_state.env_steps)
        finally:
            evaluation.summarize_episodes = real


def read_scalars(log_dir: Path, tag: str) -> list[tuple[int, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(log_dir), size_guidance={"scalars": 0, "tensors": 0})
    events.Reload()
    return [(e.step, e.value) for e in events.Scalars(tag)] if tag in events.Tags()["scalars"] else []


def test_best_checkpoint_follows_the_best_eval_return_and_hp_metric_is_it(tmp_path):
    pl.seed_everything(0)
    callback = ScriptedReturns([10.0, 30.0, 20.0, 40.0])
    logger = TensorBoardLogger(tmp_path, name="run", version="v", default_hp_metric=False)
    trainer = pl.Trainer(max_epochs=-1, accelerator="cpu", logger=logger, callbacks=[callback],
                         enable_progress_bar=False, enable_model_summary=False, log_every_n_steps=1)
    trainer.fit(tiny_ppo())
    # Saved at 32 (first), 64 (30 > 10) and 128 (40 > 30) env steps, not at 96 (20 < 30).
    assert callback.saved_at == [32, 64, 128]
    best = tmp_path / "run" / "v" / "checkpoints" / "best.ckpt"
    state = torch.load(best, weights_only=True)
    assert state["lightning_rl"]["train_state"]["env_steps"] == 128
    assert "optimizer_states" not in state  # weights only: for play/validate
    # Against env steps, as every scalar: hp_metric is the best return so far.
    assert read_scalars(tmp_path / "run" / "v", "hp_metric") == [(32, 10.0), (64, 30.0), (96, 30.0), (128, 40.0)]
    assert [s for s, _ in read_scalars(tmp_path / "run" / "v", "eval/return_mean")] == [32, 64, 96, 128]


def test_eval_videos_go_to_the_run_directory_and_tensorboard(tmp_path):
    pl.seed_everything(0)
    logger = TensorBoardLogger(tmp_path, name="run", version="v", default_hp_metric=False)
    trainer = pl.Trainer(max_epochs=-1, accelerator="cpu", logger=logger,
                         callbacks=[EvaluationCallback(every_n_epochs=2, video_every_n_epochs=2, save_best=False)],
                         enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(tiny_ppo())
    videos = sorted(p.name for p in (tmp_path / "run" / "v" / "videos").glob("*.mp4"))
    assert videos == ["eval_128-episode-0.mp4", "eval_64-episode-0.mp4"]
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tmp_path / "run" / "v"), size_guidance={"images": 0})
    events.Reload()
    assert [e.step for e in events.Images("eval/video")] == [64, 128]


def test_bad_video_interval_is_rejected():
    with pytest.raises(ValueError, match="video_every_n_epochs"):
        EvaluationCallback(video_every_n_epochs=-1)


def test_gl_backend_is_chosen_only_without_a_display_or_a_choice():
    assert choose_gl_backend({"DISPLAY": ":0"}) is None
    assert choose_gl_backend({"MUJOCO_GL": "osmesa"}) is None
    env: dict[str, str] = {}
    chosen = choose_gl_backend(env)
    assert chosen in ("egl", "osmesa", None)
    if chosen is not None:
        assert env == {"MUJOCO_GL": chosen, "PYOPENGL_PLATFORM": chosen}


def test_headless_mujoco_renders_after_the_cli_chooses_the_backend(tmp_path):
    # A fresh process without a display or MUJOCO_GL, as on a cluster node.
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "MUJOCO_GL",
                                                             "PYOPENGL_PLATFORM")}
    code = ("from lightning_rl.video import choose_gl_backend; import os; b = choose_gl_backend(); "
            "import gymnasium as gym; e = gym.make('HalfCheetah-v5', render_mode='rgb_array'); e.reset(seed=0); "
            "f = e.render(); print(b, f.shape, int(f.max()))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env={**env, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=120)
    if proc.returncode and choose_gl_backend({}) is None:
        pytest.skip("no EGL or OSMesa library on this machine")
    assert proc.returncode == 0, proc.stderr[-2000:]
    backend, *_, peak = proc.stdout.split()
    assert backend in ("egl", "osmesa") and "(480, 480, 3)" in proc.stdout and int(peak) > 0
