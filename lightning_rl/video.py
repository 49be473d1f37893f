"""Evaluation videos during training (and, for the commands that import it from here, the headless
OpenGL choice for MuJoCo, :func:`lightning_rl.envs.rendering.choose_gl_backend`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from lightning_rl.envs.rendering import choose_gl_backend

__all__ = ["choose_gl_backend", "record_eval_video"]


def record_eval_video(trainer: Any, pl_module: Any, deterministic: bool) -> Path | None:
    """Play one episode with the current agent on a rendering env, save it as
    ``<log_dir>/videos/eval_<env steps>-episode-0.mp4`` and log it to TensorBoard as ``eval/video``.

    Returns:
        The video file (rank 0), or None on other ranks or when nothing was written.
    """
    if not trainer.is_global_zero:
        return None
    from lightning_rl.play import play_episodes

    folder = Path(trainer.log_dir or trainer.default_root_dir) / "videos"
    steps = int(pl_module.global_env_steps)
    agent = pl_module.agent
    before = set(folder.glob("*.mp4")) if folder.is_dir() else set()
    try:
        play_episodes(pl_module, ckpt_path=None, episodes=1, deterministic=deterministic,
                      video_folder=str(folder), seed=steps, max_steps_per_episode=100_000,
                      name_prefix=f"eval_{steps}")
    finally:
        agent.to_device(pl_module.device)
        agent.train_mode(pl_module.train_state.itr)
    new = sorted(set(folder.glob("*.mp4")) - before)
    if not new:
        return None
    _log_video(trainer, new[-1], steps)
    return new[-1]


def _log_video(trainer: Any, path: Path, step: int) -> None:
    """Add ``path`` to every TensorBoard logger as the animated image ``eval/video`` at ``step`` env steps.

    The GIF is encoded here (imageio): ``SummaryWriter.add_video`` needs moviepy 1's ``moviepy.editor``,
    which moviepy 2 removed, and then logs nothing.
    """
    from pytorch_lightning.loggers import TensorBoardLogger

    loggers = [logger for logger in trainer.loggers if isinstance(logger, TensorBoardLogger)]
    if not loggers:
        return
    import io

    import imageio.v2 as imageio
    from tensorboard.compat.proto.summary_pb2 import Summary  # type: ignore[import-untyped]

    reader = imageio.get_reader(path, "ffmpeg")
    try:
        frames = list(cast(Any, reader).iter_data())  # len(reader) is inf for ffmpeg
    finally:
        reader.close()
    if not frames:
        return
    buffer = io.BytesIO()
    imageio.mimsave(buffer, frames, format="GIF", duration=1000 / 30, loop=0)
    height, width = frames[0].shape[:2]
    image = Summary.Image(height=height, width=width, colorspace=3, encoded_image_string=buffer.getvalue())
    summary = Summary(value=[Summary.Value(tag="eval/video", image=image)])
    for logger in loggers:
        logger.experiment._get_file_writer().add_summary(summary, global_step=step)
