"""What lightning_rl keeps in a checkpoint file, read without Lightning: the entry's name, the format
version, the model config in today's form and the checks a file must pass before anything is built
from it. ``play``, ``export`` and :func:`lightning_rl.load_policy` read checkpoints through here, so
they start without importing Lightning; resuming (:mod:`lightning_rl.algos.checkpointing`) reads the
same entry.
"""

from __future__ import annotations

import os
import re
from typing import Any

from lightning_rl.safe_state import load_data

__all__ = [
    "CHECKPOINT_KEY", "FORMAT_VERSION", "REPLAY_KEY", "checkpoint_env_steps", "migrate_config",
    "migrate_hyperparameters", "read_checkpoint",
]

#: The module's entry in a Lightning checkpoint.
CHECKPOINT_KEY = "lightning_rl"
#: Where a module puts its replay's state for the checkpoint IO to move into the side file.
REPLAY_KEY = "lightning_rl_replay"
#: 1: lightning_rl 0.1 (Python objects pickled into a bytes entry); 2: data only.
FORMAT_VERSION = 2

#: How an older lightning_rl wrote a class into a checkpoint's config: the text of the class object.
_CLASS_TEXT = re.compile(r"^<class '([A-Za-z_][\w.]*)'>$")


def migrate_hyperparameters(hparams: dict[str, Any]) -> dict[str, Any]:
    """Hyperparameters saved by an older lightning_rl, in today's form (a copy).

    ``optimizer`` was a name (``"adam"`` or ``"rmsprop"``) before any torch optimizer could be given
    by class path: ``"adam"`` is today's default (None) and ``"rmsprop"`` the same RMSprop
    (``alpha`` 0.99, ``eps`` = ``optimizer_eps``) as a class path.
    """
    hparams = dict(hparams)
    optimizer = hparams.get("optimizer")
    if optimizer == "adam":
        hparams["optimizer"] = None
    elif optimizer == "rmsprop":
        eps = float(hparams.get("optimizer_eps", 1e-5))
        hparams["optimizer"] = {"class_path": "torch.optim.RMSprop", "init_args": {"alpha": 0.99, "eps": eps}}
    return hparams


def migrate_config(config: Any) -> Any:
    """A checkpoint's model config (``{class_path, init_args}``) in today's form (a copy).

    lightning_rl 0.2.0 before its release wrote class-valued arguments as the text of the class
    (``"<class 'torch.nn.modules.activation.Tanh'>"``): that becomes the class's import path. Each
    ``init_args`` goes through :func:`migrate_hyperparameters`.

    Raises:
        ValueError: For a callable stored as its text (``"<function f at 0x...>"``), which names
            nothing to import: give the argument again (``--model.init_args...``) or re-save the
            checkpoint with this version.
    """
    if isinstance(config, dict):
        out = {k: migrate_config(v) for k, v in config.items()}
        if isinstance(out.get("init_args"), dict):
            out["init_args"] = migrate_hyperparameters(out["init_args"])
        return out
    if isinstance(config, list):
        return [migrate_config(v) for v in config]
    if isinstance(config, str):
        match = _CLASS_TEXT.match(config)
        if match:
            return match.group(1)
        if config.startswith(("<function ", "<bound method ", "<built-in function ")):
            raise ValueError(
                f"the checkpoint's config holds a callable as text ({config!r}), which names nothing to import; "
                "pass that argument again, or save the checkpoint again with this lightning_rl"
            )
    return config


def read_checkpoint(path: str | os.PathLike[str], need_config: bool = True) -> dict[str, Any]:
    """A lightning_rl checkpoint read as data only (nothing in it runs), checked to be one.

    Args:
        path: The ``.ckpt`` file.
        need_config: Require the model config the CLI saves with every checkpoint (rebuilding the
            module or agent needs it).

    Raises:
        ValueError: If the file is not a checkpoint, needs unpickling, was not written by
            lightning_rl, or (``need_config``) carries no config.
    """
    data = load_data(path)
    ours = data.get(CHECKPOINT_KEY) if isinstance(data, dict) else None
    if not isinstance(ours, dict) or "state_dict" not in data:
        raise ValueError(f"{os.fspath(path)} was not written by a lightning_rl run (no '{CHECKPOINT_KEY}' entry)")
    if need_config and not ours.get("config"):
        raise ValueError(f"{os.fspath(path)} carries no model config (an older lightning_rl checkpoint); give "
                         "--config with it")
    return data


def checkpoint_env_steps(data: dict[str, Any]) -> int | None:
    """The env steps a checkpoint's run had collected over all its processes (None where unknown)."""
    ours = data.get(CHECKPOINT_KEY) or {}
    steps = (ours.get("train_state") or {}).get("env_steps")
    if steps is None:
        return None
    return int(steps) * int(ours.get("world_size") or 1)
