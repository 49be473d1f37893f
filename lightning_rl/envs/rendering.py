"""The headless OpenGL choice for MuJoCo's rendering envs (``play``, videos)."""

from __future__ import annotations

import ctypes.util
import os
from typing import Any

__all__ = ["choose_gl_backend"]


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
