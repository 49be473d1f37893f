"""A failure in a few lines: the exception's type and message and where in the user's own code it was
raised (an env, a callback, a model, a parameter file), instead of a traceback through Lightning,
gymnasium and torch. The ``lightning-rl`` command prints these lines and keeps the whole traceback
in the run directory's ``error.log``; ``--verbose`` prints the traceback instead.

A frame is the user's when its file lies outside this package, the Python standard library and
installed packages (``site-packages``); an exception raised in a sampler's worker process carries its
traceback as text (:class:`~lightning_rl.samplers.errors.SamplerWorkerError`), which is read the same
way. This module imports nothing of the package.
"""

from __future__ import annotations

import os
import re
import sysconfig
import traceback
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Frame", "error_lines", "format_traceback", "is_user_file", "user_frame"]

_PACKAGE_DIR = str(Path(__file__).resolve().parent)
_LIBRARY_DIRS = tuple(
    str(Path(p).resolve()) for p in {sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib", "purelib",
                                                                          "platlib")} if p
)
#: A frame line of a formatted traceback: ``  File "path", line N, in name``.
_FRAME_LINE = re.compile(r'^\s*File "([^"]+)", line (\d+), in (.+)$')


@dataclass(frozen=True)
class Frame:
    """Where code raised: a file, a line and the function."""

    filename: str
    lineno: int
    name: str

    def __str__(self) -> str:
        return f"{_short_path(self.filename)}:{self.lineno} in {self.name}"


def _short_path(filename: str) -> str:
    """The path relative to the working directory when it lies under it."""
    try:
        relative = os.path.relpath(filename)
    except ValueError:  # another drive (Windows)
        return filename
    return filename if relative.startswith("..") else relative


def is_user_file(filename: str) -> bool:
    """Whether a traceback's file is the user's: not this package, the standard library, an installed
    package or Python's own (``<frozen ...>``, ``<string>``)."""
    if filename.startswith("<"):
        return False
    path = str(Path(filename).resolve())
    if path.startswith(_PACKAGE_DIR + os.sep):
        return False
    if "site-packages" in path.split(os.sep) or "dist-packages" in path.split(os.sep):
        return False
    return not any(path.startswith(d + os.sep) for d in _LIBRARY_DIRS)


def _chain(error: BaseException) -> list[BaseException]:
    """``error`` and the exceptions it was raised from or during, innermost cause last."""
    seen: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)
    return seen


def _frames(error: BaseException) -> list[Frame]:
    """The frames of ``error``'s chain, outermost first, the innermost cause's last (with the frames of
    a worker's traceback text where an exception came from a sampler worker)."""
    frames: list[Frame] = []
    for exc in reversed(_chain(error)):
        frames += [Frame(f.filename, f.lineno or 0, f.name) for f in traceback.extract_tb(exc.__traceback__)]
    for exc in _chain(error):
        remote = getattr(exc, "remote_traceback", None)
        if isinstance(remote, str):
            for line in remote.splitlines():
                match = _FRAME_LINE.match(line)
                if match:
                    frames.append(Frame(match.group(1), int(match.group(2)), match.group(3).strip()))
    return frames


def user_frame(error: BaseException) -> Frame | None:
    """The innermost frame of the user's own code in ``error``'s traceback (its causes and a worker's
    traceback included), None when the error was raised outside it."""
    for frame in reversed(_frames(error)):
        if is_user_file(frame.filename):
            return frame
    return None


def raised_in_package(error: BaseException) -> bool:
    """Whether the innermost frame of ``error`` itself is this package's (a check of lightning_rl's
    raised it, as opposed to the user's code or a library)."""
    frames = traceback.extract_tb(error.__traceback__)
    return bool(frames) and str(Path(frames[-1].filename).resolve()).startswith(_PACKAGE_DIR + os.sep)


def _type_name(error: BaseException) -> str:
    return type(error).__name__


def error_lines(error: BaseException, log: str | None = None, verbose_hint: bool = True) -> list[str]:
    """At most four lines about ``error``: ``<Type>: <message>``, where in the user's code it was
    raised, and where the whole traceback is (``log``) or how to see it.

    Args:
        error: The exception.
        log: The file holding the whole traceback (the run directory's ``error.log``), if written.
        verbose_hint: Say that ``--verbose`` prints the traceback when there is no ``log``.
    """
    message = str(error).strip().splitlines()
    head = f"{_type_name(error)}: {message[0]}" if message else _type_name(error)
    lines = [head]
    if len(message) > 1:
        lines.append("  " + message[1].strip() + (" ..." if len(message) > 2 else ""))
    frame = user_frame(error)
    if frame is not None:
        lines.append(f"  at {frame}")
    if log is not None:
        lines.append(f"  the whole traceback: {_short_path(log)}")
    elif verbose_hint:
        lines.append("  --verbose shows the traceback")
    return lines[:4]


def format_traceback(error: BaseException) -> str:
    """The whole traceback of ``error`` (its causes and a worker's traceback text included), as Python
    prints it."""
    text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    for exc in _chain(error):
        remote = getattr(exc, "remote_traceback", None)
        if isinstance(remote, str) and remote.strip():
            text += "\nIn the sampler worker:\n" + remote.rstrip() + "\n"
    return text
