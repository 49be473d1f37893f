"""Run directories: ``<root>/runs/<algo>_<env>/<YYYY-MM-DD_HH-MM-SS>[_<name>]/``.

``<root>`` is the Trainer's ``default_root_dir`` (``--trainer.default_root_dir``), the working
directory by default. Each ``lightning-rl fit`` without ``--ckpt_path last`` gets a new run directory
holding LightningCLI's ``config.yaml``, ``run_info.yaml``, the TensorBoard events, ``checkpoints/``
(``last.ckpt``, ``best.ckpt``) and ``videos/``; a run that fails before its first checkpoint removes
it again. ``--ckpt_path last`` resumes the newest ``last.ckpt`` of the same group (``<algo>_<env>``,
named after the config file), of the run named ``--run_name`` if given, and keeps writing into its
run directory; ``lightning-rl play runs/ppo_cartpole`` plays the newest run of a group that has a
checkpoint.
"""

from __future__ import annotations

import datetime
import os
import re
from pathlib import Path
from typing import Any

__all__ = [
    "RUNS_ROOT", "RUN_DIR_ENV", "best_checkpoint", "has_checkpoint", "is_named", "newest_checkpoint", "new_run_dir",
    "run_dir_of", "run_group", "runs_root",
]

#: Where run directories go, relative to the Trainer's ``default_root_dir`` (the working directory by default).
RUNS_ROOT = "runs"
#: Set by the first process of a run, so DDP ranks started later (a new process each) share its directory.
RUN_DIR_ENV = "LIGHTNING_RL_RUN_DIR"
_TIME_FORMAT = "%Y-%m-%d_%H-%M-%S"


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_") or "run"


def run_group(config_paths: list[str], model_config: Any) -> str:
    """``<algo>_<env>``: the config file's folder and name (``configs/ppo/cartpole.yaml`` -> ``ppo_cartpole``),
    else the algorithm class and env id of ``model_config`` (``PPO``, ``ALE/Pong-v5`` -> ``ppo_pong``).

    Args:
        config_paths: The ``--config`` files given, in order (the last one names the group).
        model_config: The resolved ``model`` section (``class_path``/``init_args``), a mapping or namespace.
    """
    if config_paths:
        path = Path(str(config_paths[-1]))
        return _slug(f"{path.parent.name}_{path.stem}")
    class_path = str(_get(model_config, "class_path") or "model")
    sampler = _get(_get(model_config, "init_args"), "sampler")
    env_id = _get(_get(sampler, "init_args"), "env_id")
    env = re.sub(r"-v\d+$", "", str(env_id).rsplit("/", 1)[-1]) if isinstance(env_id, str) else "env"
    return _slug(f"{class_path.rsplit('.', 1)[-1]}_{env}")


def _get(obj: Any, key: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj.get(key)
    return getattr(obj, key, None)


def new_run_dir(group: str, name: str | None = None, root: str | os.PathLike = RUNS_ROOT) -> Path:
    """A run directory path that does not exist yet: ``<root>/<group>/<date-time>[_<name>]``
    (``-2``, ``-3``, ... appended when two runs start within the same second). Not created.

    Raises:
        ValueError: If ``name`` holds a path separator.
    """
    if name is not None and (os.sep in name or "/" in name):
        raise ValueError(f"run_name must not contain a path separator, got {name!r}")
    stamp = datetime.datetime.now().strftime(_TIME_FORMAT)
    base = f"{stamp}_{name}" if name else stamp
    group_dir = Path(root) / group
    candidate, n = group_dir / base, 1
    while candidate.exists():
        n += 1
        candidate = group_dir / f"{base}-{n}"
    return candidate


def runs_root(default_root_dir: str | os.PathLike | None = None) -> Path:
    """Where run directories go: ``<default_root_dir>/runs`` (``runs`` in the working directory for None)."""
    return Path(default_root_dir) / RUNS_ROOT if default_root_dir else Path(RUNS_ROOT)


def is_named(run_dir: str | os.PathLike, name: str) -> bool:
    """Whether ``run_dir`` is a run directory named ``name`` (``<date-time>_<name>``, or ``-2``, ``-3``, ...
    after it for runs started within the same second)."""
    pattern = r"\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d_" + re.escape(name) + r"(-\d+)?"
    return re.fullmatch(pattern, Path(run_dir).name) is not None


def newest_checkpoint(
    group_dir: str | os.PathLike, pattern: str = "last*.ckpt", run_name: str | None = None
) -> Path | None:
    """The most recently written ``pattern`` file in ``<group_dir>/*/checkpoints`` (of the runs named
    ``run_name`` only, if given); None if there is none."""
    found = [p for p in Path(group_dir).glob(f"*/checkpoints/{pattern}") if not p.name.endswith(".tmp")]
    if run_name is not None:
        found = [p for p in found if is_named(p.parent.parent, run_name)]
    return max(found, key=lambda p: p.stat().st_mtime) if found else None


def has_checkpoint(run_dir: str | os.PathLike) -> bool:
    """Whether a run directory holds a checkpoint (a run that failed before its first one holds none)."""
    return any(p.suffix == ".ckpt" for p in (Path(run_dir) / "checkpoints").glob("*.ckpt"))


def run_dir_of(path: str | os.PathLike) -> Path | None:
    """The run directory (the one holding ``config.yaml``) of a run directory, a group directory (its newest
    run with a checkpoint, else its newest run), or a checkpoint inside a run; None if ``path`` is none of them."""
    path = Path(path)
    if path.is_file():
        for parent in path.parents[:2]:
            if (parent / "config.yaml").is_file():
                return parent
        return None
    if (path / "config.yaml").is_file():
        return path
    runs = [p.parent for p in path.glob("*/config.yaml")]
    runs = [r for r in runs if has_checkpoint(r)] or runs
    return max(runs, key=lambda p: p.stat().st_mtime) if runs else None


def best_checkpoint(run_dir: str | os.PathLike) -> Path | None:
    """``best.ckpt`` of a run (the best evaluation), else its ``last.ckpt``, else None."""
    for name in ("best.ckpt", "last.ckpt"):
        path = Path(run_dir) / "checkpoints" / name
        if path.is_file():
            return path
    return None
