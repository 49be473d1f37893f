"""Run directories: ``<root>/runs/<group>/<YYYY-MM-DD_HH-MM-SS>[_<name>]/``, and which run a command picks.

``<root>`` is the Trainer's ``default_root_dir`` (``--trainer.default_root_dir``), the working
directory by default. ``<group>`` is what was trained, ``<algo>_<env>``, from the resolved
algorithm class and env id (``PPO`` on ``Acrobot-v1`` -> ``ppo_acrobot``) whatever config file and
overrides produced them; ``--run_group NAME`` names the group instead. Each ``lightning-rl fit``
without ``--ckpt_path`` gets a new run directory holding LightningCLI's ``config.yaml`` (which
runs the run again), ``run_info.yaml`` (with the run's ``status``), the TensorBoard events,
``checkpoints/`` (``last.ckpt``, ``best.ckpt``) and ``videos/``; a run that fails before its first
checkpoint removes it again.

Which run a command takes (:func:`choose_checkpoint`), said in one line (:func:`choice_line`):

* ``fit --ckpt_path last`` resumes the newest ``last.ckpt`` of the group (of the run named
  ``--run_name`` if given) and keeps writing into its run directory;
* ``play``, ``export``, ``validate`` and ``test`` of a group directory take its newest run that
  finished (budget, threshold or early stopping reached), else its newest run with a checkpoint;
  of a run directory, its ``best.ckpt`` (the best evaluation), else its ``last.ckpt``.

This module imports neither torch nor Lightning: ``play`` and ``export`` choose before they load.
"""

from __future__ import annotations

import datetime
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "RUNS_ROOT", "RUN_DIR_ENV", "RUN_INFO_FILE", "RunChoice", "best_checkpoint", "choice_line", "choose_checkpoint",
    "format_age", "has_checkpoint", "is_named", "new_run_dir", "newest_checkpoint", "read_run_info", "run_dir_of",
    "run_group", "run_status", "runs_root", "update_run_info",
]

#: Where run directories go, relative to the Trainer's ``default_root_dir`` (the working directory by default).
RUNS_ROOT = "runs"
#: Set by the first process of a run, so DDP ranks started later (a new process each) share its directory.
RUN_DIR_ENV = "LIGHTNING_RL_RUN_DIR"
#: A run's own description: code, versions, command line and its ``status``.
RUN_INFO_FILE = "run_info.yaml"
_TIME_FORMAT = "%Y-%m-%d_%H-%M-%S"
#: ``status`` values of ``run_info.yaml``: training, finished (a budget, threshold or Trainer limit
#: ended it), interrupted (Ctrl-C, SIGTERM, SIGUSR1: ``last.ckpt`` saved), failed (an error).
STATUSES = ("running", "finished", "interrupted", "failed")


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_") or "run"


def algorithm_slug(class_path: str) -> str:
    """The algorithm part of a group name: the class name in snake case, acronyms kept whole
    (``lightning_rl.algos.PPO`` -> ``ppo``, ``CategoricalDQN`` -> ``categorical_dqn``,
    ``MultiAgentPPO`` -> ``multi_agent_ppo``)."""
    name = class_path.rsplit(".", 1)[-1]
    words = re.findall(r"[A-Z0-9]+(?![a-z])|[A-Z]?[a-z0-9]+", name)
    return _slug("_".join(words)) if words else _slug(name)


def env_slug(env_id: Any) -> str:
    """The env part of a group name: the env id's last name without its version, lower case
    (``CartPole-v1`` -> ``cartpole``, ``ALE/Pong-v5`` -> ``pong``, ``mpe2.simple_spread_v3`` ->
    ``simple_spread``, ``my_envs:make_maze`` -> ``make_maze``); ``env`` for a non-string id."""
    if not isinstance(env_id, str) or not env_id.strip():
        return "env"
    name = re.split(r"[/:]", env_id.strip())[-1]
    if "." in name and ":" not in env_id:  # a module path: its last part
        name = name.rsplit(".", 1)[-1]
    name = re.sub(r"[-_]v\d+$", "", name)
    return _slug(name)


def run_group(model_config: Any, name: str | None = None) -> str:
    """``<algo>_<env>``: the algorithm class and env id of the resolved ``model`` config
    (``PPO``, ``ALE/Pong-v5`` -> ``ppo_pong``), or ``name`` where the user names the group.

    Args:
        model_config: The resolved ``model`` section (``class_path``/``init_args``), a mapping or namespace.
        name: ``--run_group``: the group's name as given (no path separators).

    Raises:
        ValueError: If ``name`` is empty or holds a path separator.
    """
    if name is not None:
        if not str(name).strip() or os.sep in str(name) or "/" in str(name) or str(name) in (".", ".."):
            raise ValueError(f"run_group must be a folder name (no path separators), got {name!r}")
        return str(name)
    class_path = str(_get(model_config, "class_path") or "model")
    sampler = _get(_get(model_config, "init_args"), "sampler")
    env_id = _get(_get(sampler, "init_args"), "env_id")
    return f"{algorithm_slug(class_path)}_{env_slug(env_id)}"


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


def read_run_info(run_dir: str | os.PathLike) -> dict[str, Any]:
    """``run_info.yaml`` of a run directory as a dict (empty when it has none or it cannot be read)."""
    import yaml

    path = Path(run_dir) / RUN_INFO_FILE
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


def update_run_info(run_dir: str | os.PathLike, **fields: Any) -> None:
    """Set ``fields`` in an existing ``run_info.yaml`` (written whole to a temporary file, then renamed,
    so a reader never sees half of it); nothing happens when the run has no ``run_info.yaml``."""
    import yaml

    path = Path(run_dir) / RUN_INFO_FILE
    if not path.is_file():
        return
    info = {**read_run_info(run_dir), **fields}
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(yaml.safe_dump(info, sort_keys=False))
    os.replace(tmp, path)


def run_status(run_dir: str | os.PathLike) -> str | None:
    """The ``status`` a run recorded (:data:`STATUSES`), None for a run of an older version."""
    status = read_run_info(run_dir).get("status")
    return status if isinstance(status, str) else None


def run_dir_of(path: str | os.PathLike) -> Path | None:
    """The run directory (the one holding ``config.yaml``) of a run directory, a group directory
    (:func:`choose_checkpoint`'s run), or a checkpoint inside a run; None if ``path`` is none of them."""
    path = Path(path)
    if path.is_file():
        for parent in path.parents[:2]:
            if (parent / "config.yaml").is_file():
                return parent
        return None
    if (path / "config.yaml").is_file():
        return path
    chosen = _choose_run(path)
    return chosen[0] if chosen is not None else None


def _choose_run(group_dir: Path) -> tuple[Path, str] | None:
    """The run of a group a command takes, and the rule in words: the newest finished run with a
    checkpoint, else the newest run with a checkpoint, else the newest run."""
    runs = sorted((p.parent for p in group_dir.glob("*/config.yaml")), key=lambda p: p.stat().st_mtime)
    if not runs:
        return None
    with_checkpoint = [r for r in runs if has_checkpoint(r)]
    finished = [r for r in with_checkpoint if run_status(r) == "finished"]
    if finished:
        return finished[-1], f"the newest finished run of {group_dir.name}"
    if with_checkpoint:
        status = run_status(with_checkpoint[-1]) or "of an earlier version"
        return with_checkpoint[-1], f"the newest run of {group_dir.name}, {status} (none finished)"
    return runs[-1], f"the newest run of {group_dir.name} (no checkpoint)"


def best_checkpoint(run_dir: str | os.PathLike) -> Path | None:
    """``best.ckpt`` of a run (the best evaluation), else its ``last.ckpt``, else None."""
    for name in ("best.ckpt", "last.ckpt"):
        path = Path(run_dir) / "checkpoints" / name
        if path.is_file():
            return path
    return None


@dataclass(frozen=True)
class RunChoice:
    """The checkpoint a command takes and why.

    Attributes:
        checkpoint: The ``.ckpt`` file.
        run_dir: Its run directory (the one with ``config.yaml``), None for a checkpoint outside a run.
        rule: How it was chosen, in words (``the newest finished run of ppo_cartpole; best.ckpt``).
    """

    checkpoint: Path
    run_dir: Path | None
    rule: str


def choose_checkpoint(target: str | os.PathLike) -> RunChoice:
    """The checkpoint of ``target``: a ``.ckpt`` as it is; a run directory's ``best.ckpt``, else its
    ``last.ckpt``; a group directory's run by :func:`run_dir_of`'s rule.

    Raises:
        ValueError: If ``target`` does not exist or holds no checkpoint, saying what was looked for.
    """
    path = Path(target)
    if not path.exists():
        raise ValueError(f"{target} does not exist (give a run directory, runs/<algo>_<env> or a .ckpt)")
    if path.is_file():
        return RunChoice(path, run_dir_of(path), "the checkpoint given")
    rules: list[str] = []
    if (path / "config.yaml").is_file():
        run_dir: Path | None = path
    else:
        chosen = _choose_run(path)
        if chosen is None:
            raise ValueError(f"no run in {target}: neither a run directory (config.yaml) nor a group of runs")
        run_dir = chosen[0]
        rules.append(chosen[1])
    assert run_dir is not None
    ckpt = best_checkpoint(run_dir)
    if ckpt is None:
        raise ValueError(f"no checkpoint in {run_dir} (looked for checkpoints/best.ckpt and last.ckpt)")
    rules.append("best.ckpt: its best evaluation" if ckpt.name == "best.ckpt" else "last.ckpt: it has no best.ckpt")
    return RunChoice(ckpt, run_dir, "; ".join(rules))


def format_age(seconds: float) -> str:
    """How long ago, in words: ``just now``, ``40 s ago``, ``3 min ago``, ``2 h ago``, ``5 days ago``."""
    if seconds < 5:
        return "just now"
    for size, unit in ((86400, "days"), (3600, "h"), (60, "min"), (1, "s")):
        if seconds >= size:
            count = int(seconds // size)
            return f"{count} {'day' if unit == 'days' and count == 1 else unit} ago"
    return "just now"


def choice_line(verb: str, checkpoint: str | os.PathLike, env_steps: int | None = None, rule: str | None = None,
                now: float | None = None) -> str:
    """One line saying which checkpoint a command took: ``play: runs/ppo_cartpole/<run>/checkpoints/last.ckpt
    (4,096 env steps, saved 3 min ago; the newest finished run of ppo_cartpole; last.ckpt: it has no best.ckpt)``."""
    path = Path(checkpoint)
    details = []
    if env_steps is not None:
        details.append(f"{env_steps:,} env steps")
    try:
        details.append("saved " + format_age((now if now is not None else time.time()) - path.stat().st_mtime))
    except OSError:
        pass
    text = ", ".join(details)
    if rule:
        text = f"{text}; {rule}" if text else rule
    return f"{verb}: {path}" + (f" ({text})" if text else "")
