"""Errors of the parallel samplers' worker processes (docs/guides/reliability.md, 'Error types').

Every failure of a worker reaches the main process as a :class:`SamplerWorkerError`, a
``RuntimeError``, so code written against the older plain ``RuntimeError`` still catches it:

* :class:`SamplerWorkerDied`: the worker process ended without reporting (``SIGKILL``, the OOM
  killer, a segfault in an emulator).
* :class:`SamplerStepTimeout`: an env's ``step()`` or ``reset()`` ran past the sampler's
  ``step_timeout``; also a ``TimeoutError``.
* An exception raised in the worker (by an env, the agent or an env factory) is raised again in
  the main process as an instance of its original type, e.g. a ``ValueError`` that is also a
  :class:`SamplerWorkerError` (see :func:`remote_exception`).

After any of them the sampler is shut down; using it again raises :class:`SamplerClosedError`.
"""

from __future__ import annotations

import pickle
from typing import Any

__all__ = [
    "SamplerClosedError",
    "SamplerStepTimeout",
    "SamplerWorkerDied",
    "SamplerWorkerError",
    "remote_exception",
]


class SamplerWorkerError(RuntimeError):
    """A worker process of a parallel sampler failed; the sampler has been shut down.

    Attributes:
        worker: Index of the worker.
        pid: Its process id.
        worker_name: Its process name (``CpuSampler-worker-1``).
        last_command: The last command the main process sent (``"collect (itr 3)"``,
            ``"evaluate (itr 3)"``, ``"start"`` while the workers build their envs).
        env: Index of the env the worker was calling (into ``[batch_B]`` for training envs,
            ``[eval_n_envs]`` for eval envs), or None if it was not inside an env call.
        env_kind: ``"training"`` or ``"eval"`` (None with ``env``).
        env_call: What it was calling: ``"step"``, ``"reset"`` or ``"construction"``.
        remote_type: Qualified name of the exception raised in the worker (None unless one was).
        remote_traceback: The worker's formatted traceback of that exception.
    """

    worker: int | None = None
    pid: int | None = None
    worker_name: str | None = None
    last_command: str | None = None
    env: int | None = None
    env_kind: str | None = None
    env_call: str | None = None
    remote_type: str | None = None
    remote_traceback: str | None = None


class SamplerWorkerDied(SamplerWorkerError):
    """A worker process ended without reporting an error.

    Attributes:
        exitcode: The process's exit code; negative: killed by signal ``-exitcode``.
        signal: Name of that signal (``"SIGKILL"``), or None.
    """

    exitcode: int | None = None
    signal: str | None = None


class SamplerStepTimeout(SamplerWorkerError, TimeoutError):
    """An env's ``step()`` or ``reset()`` in a worker did not return within ``step_timeout``.

    Attributes:
        timeout: The sampler's ``step_timeout`` in seconds.
    """

    timeout: float | None = None


class SamplerClosedError(RuntimeError):
    """The sampler was shut down (by ``shutdown()`` or after a worker failed) and cannot sample."""


def describe(error: BaseException, **attributes: Any) -> BaseException:
    """Set the :class:`SamplerWorkerError` attributes on ``error``; return it."""
    for name, value in attributes.items():
        setattr(error, name, value)
    return error


def pickled_type(error: BaseException) -> bytes | None:
    """``type(error)`` pickled by reference, or None if its class cannot be found by name
    (defined in a function, or in a module the main process may not have)."""
    try:
        return pickle.dumps(type(error))
    except Exception:  # noqa: BLE001 - any pickling failure means "send the name only"
        return None


def remote_exception(type_name: str, type_bytes: bytes | None, message: str) -> BaseException:
    """An exception to raise in the main process for one raised in a worker.

    When the worker's exception class can be found by name, is an ``Exception`` (not
    ``KeyboardInterrupt``, ``SystemExit``, ``StopIteration``: those would change the main
    process's control flow) and can be built from one message, the result is an instance of a
    subclass of both that class and :class:`SamplerWorkerError`: ``except ValueError`` and
    ``except RuntimeError`` both catch a worker's ``ValueError``. Otherwise it is a
    :class:`SamplerWorkerError` subclass named after the worker's class.

    Args:
        type_name: Qualified name of the worker's exception class (``"builtins.ValueError"``).
        type_bytes: The class pickled by reference (:func:`pickled_type`), or None.
        message: The message of the new exception.
    """
    cls: Any = None
    if type_bytes is not None:
        try:
            cls = pickle.loads(type_bytes)
        except Exception:  # noqa: BLE001 - the class may not import here; fall back to its name
            cls = None
    if (
        isinstance(cls, type)
        and issubclass(cls, Exception)
        and not issubclass(cls, (StopIteration, StopAsyncIteration))
    ):
        if issubclass(cls, SamplerWorkerError):
            combined: type[BaseException] | None = cls
        else:
            combined = _with_worker_error(cls)
        if combined is not None:
            try:
                return combined(message)
            except Exception:  # noqa: BLE001 - a constructor that takes no single message
                pass
    return _named_worker_error(type_name.rsplit(".", 1)[-1])(message)


# One class per worker exception class, so ``type(e)`` is the same for every error of that class.
_COMBINED: dict[type, type[BaseException] | None] = {}
_STAND_INS: dict[str, type[SamplerWorkerError]] = {}


def _message(self: BaseException) -> str:
    """The message it was built with: ``KeyError``'s own ``str()`` would show the message's
    ``repr``, the worker's traceback on one line with its newlines escaped."""
    if len(self.args) == 1 and isinstance(self.args[0], str):
        return self.args[0]
    return BaseException.__str__(self)


def _with_worker_error(cls: type[Exception]) -> type[BaseException] | None:
    """``cls`` and :class:`SamplerWorkerError` in one class, shown under ``cls``'s own name in
    tracebacks; None if Python cannot combine them."""
    if cls in _COMBINED:
        return _COMBINED[cls]
    namespace = {
        "__module__": cls.__module__,
        "__qualname__": cls.__qualname__,
        "__doc__": f"{cls.__qualname__} raised in a sampler worker (also a SamplerWorkerError).",
        # Pickles (e.g. to another process) as the original class with the same message.
        "__reduce__": lambda self: (cls, self.args),
        "__str__": _message,
    }
    combined: type[BaseException] | None
    try:
        combined = type(cls.__name__, (cls, SamplerWorkerError), namespace)
    except TypeError:  # incompatible instance layouts, or a final class
        combined = None
    _COMBINED[cls] = combined
    return combined


def _named_worker_error(name: str) -> type[SamplerWorkerError]:
    """A :class:`SamplerWorkerError` subclass called ``name``, standing in for a worker's class."""
    if name in _STAND_INS:
        return _STAND_INS[name]
    doc = f"Stands in for {name}, raised in a sampler worker, whose class could not be rebuilt here."
    namespace = {
        "__module__": __name__,
        "__doc__": doc,
        # Not findable by name in this module: pickles as a plain SamplerWorkerError.
        "__reduce__": lambda self: (SamplerWorkerError, self.args),
    }
    _STAND_INS[name] = type(name, (SamplerWorkerError,), namespace)
    return _STAND_INS[name]
