"""Videos of the agent: the headless OpenGL choice for MuJoCo, and evaluation videos during training."""

from __future__ import annotations

import ctypes.util
import os
from pathlib import Path
from typing import Any, cast

__all__ = ["choose_gl_backend", "quiet_sdl", "record_eval_video"]


def choose_gl_backend(environ: dict[str, str] | Any = None) -> str | None:
    """Pick MuJoCo's OpenGL backend on a machine without a display, before ``mujoco`` is imported.

    With ``MUJOCO_GL`` already set, or a ``DISPLAY``/``WAYLAND_DISPLAY`` present, nothing changes
    (glfw needs a display). Otherwise ``MUJOCO_GL`` becomes ``egl`` when libEGL is installed (GPU
    or Mesa's software EGL), else ``osmesa`` when libOSMesa is; ``PYOPENGL_PLATFORM`` follows it.

    Args:
        environ: The environment to read and update; default ``os.environ``.

    Returns:
        The backend set, or None when nothing was changed.
    """
    env = os.environ if environ is None else environ
    if env.get("MUJOCO_GL") or env.get("DISPLAY") or env.get("WAYLAND_DISPLAY"):
        return None
    for backend, library in (("egl", "EGL"), ("osmesa", "OSMesa")):
        if ctypes.util.find_library(library):
            env["MUJOCO_GL"] = backend
            env.setdefault("PYOPENGL_PLATFORM", backend)
            return backend
    return None


def quiet_sdl(environ: dict[str, str] | Any = None) -> None:
    """SDL's dummy drivers where nothing else was chosen: audio always (an agent plays no sound), video
    on a machine without a display. pygame, which draws gymnasium's classic-control envs, otherwise
    prints ``XDG_RUNTIME_DIR is invalid`` and ALSA errors on stderr when it starts.

    Args:
        environ: The environment to read and update; default ``os.environ``.
    """
    env = os.environ if environ is None else environ
    env.setdefault("SDL_AUDIODRIVER", "dummy")
    if not (env.get("DISPLAY") or env.get("WAYLAND_DISPLAY")):
        env.setdefault("SDL_VIDEODRIVER", "dummy")


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
