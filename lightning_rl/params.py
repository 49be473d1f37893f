"""Parameter files: Python files whose ``gen_params(cpanel)`` returns a LightningCLI config.

digideep keeps every parameter of a run in one Python file, so that values that depend on each
other are computed, not copied by hand (``log_interval_steps`` from the rollout size, checkpoint
folders from the env name, ...). A parameter file here has two parts:

* ``CPANEL``: a dict of the few values worth changing from the command line, with defaults;
* ``gen_params(cpanel) -> dict``: the whole config, shaped like a LightningCLI YAML file
  (``seed_everything``, ``trainer``, ``model: {class_path, init_args}``).

The CLI turns ``--params FILE --cpanel JSON`` into the config that file describes::

    lightning-rl fit --params configs/params/ppo_mujoco.py --cpanel '{"lr": 1e-4, "env": "Hopper-v5"}'
    lightning-rl fit --params configs/params/ppo_mujoco.py --print_config

so everything LightningCLI does with a ``--config`` file (later ``--model.init_args...``
overrides, ``--print_config``, the saved ``config.yaml``) works the same.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

__all__ = ["expand_params_args", "gen_config", "load_params_file", "parse_cpanel", "resolve_cpanel", "to_yaml"]

PARAMS_FLAG = "--params"
CPANEL_FLAG = "--cpanel"


def load_params_file(path: str | Path) -> ModuleType:
    """Import a parameter file by its path.

    Raises:
        ValueError: If the file does not exist, fails to import, or has no callable
            ``gen_params`` or a ``CPANEL`` that is not a dict.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"--params: file {str(path)!r} does not exist")
    spec = importlib.util.spec_from_file_location(f"_lightning_rl_params_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ValueError(f"--params: cannot import {str(path)!r} as a Python file")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as error:
        raise ValueError(f"--params: importing {str(path)!r} failed: {type(error).__name__}: {error}") from error
    if not callable(getattr(module, "gen_params", None)):
        raise ValueError(f"--params: {str(path)!r} defines no function gen_params(cpanel)")
    if not isinstance(getattr(module, "CPANEL", {}), dict):
        raise ValueError(f"--params: CPANEL in {str(path)!r} must be a dict, got {type(module.CPANEL).__name__}")
    return module


def parse_cpanel(text: str | None) -> dict[str, Any]:
    """Parse the ``--cpanel`` JSON object (None or empty: no overrides).

    Raises:
        ValueError: If ``text`` is not JSON or not a JSON object.
    """
    if text is None or not text.strip():
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"--cpanel: not valid JSON ({error.msg} at position {error.pos}): {text!r}") from error
    if not isinstance(value, dict):
        raise ValueError(f"--cpanel: must be a JSON object like '{{\"lr\": 1e-4}}', got {text!r}")
    return value


def _check_type(key: str, default: Any, value: Any) -> Any:
    """``value`` if it has the type of ``default`` (an int where a float is expected becomes float)."""
    if default is None or value is None:
        return value
    if isinstance(default, bool) or isinstance(value, bool):
        ok = isinstance(default, bool) and isinstance(value, bool)
    elif isinstance(default, float):
        ok = isinstance(value, (int, float))
        value = float(value) if ok else value
    elif isinstance(default, (list, tuple)):
        ok = isinstance(value, (list, tuple))
    else:
        ok = isinstance(value, type(default))
    if not ok:
        raise ValueError(
            f"--cpanel: {key!r} must be {type(default).__name__} like its default {default!r}, "
            f"got {type(value).__name__} {value!r}"
        )
    return value


def resolve_cpanel(module: ModuleType, overrides: dict[str, Any]) -> dict[str, Any]:
    """The file's ``CPANEL`` defaults updated with ``overrides``.

    Raises:
        ValueError: If an override names a key that ``CPANEL`` does not have, or its type
            differs from the default's.
    """
    defaults = dict(getattr(module, "CPANEL", {}))
    unknown = sorted(set(overrides) - set(defaults))
    if unknown:
        import difflib

        close = [m for key in unknown for m in difflib.get_close_matches(key, list(defaults), n=1)]
        hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise ValueError(f"--cpanel: unknown key(s) {unknown}{hint} The parameter file's CPANEL has {sorted(defaults)}")
    cpanel = dict(defaults)
    for key, value in overrides.items():
        cpanel[key] = _check_type(key, defaults[key], value)
    return cpanel


def _plain(value: Any, where: str) -> Any:
    """``value`` as YAML-safe data (tuples become lists), or ``ValueError`` naming where it is not."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"gen_params: key {key!r} at {where or 'top level'} must be a str")
            out[key] = _plain(item, f"{where}.{key}" if where else key)
        return out
    if isinstance(value, (list, tuple)):
        return [_plain(item, f"{where}[{i}]") for i, item in enumerate(value)]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise ValueError(
        f"gen_params: {where} is a {type(value).__name__}; use str/int/float/bool/None, lists and dicts "
        "(classes as {'class_path': 'package.Class', 'init_args': {...}})"
    )


def gen_config(path: str | Path, cpanel: dict[str, Any] | str | None = None) -> dict[str, Any]:
    """Run a parameter file's ``gen_params`` with its ``CPANEL`` defaults updated by ``cpanel``.

    Args:
        path: The parameter file.
        cpanel: Overrides, as a dict or JSON text.

    Returns:
        The config dict (plain YAML-safe data).

    Raises:
        ValueError: On a bad file, bad JSON, unknown cpanel keys, or a result that is not a dict
            of plain data.
    """
    module = load_params_file(path)
    overrides = parse_cpanel(cpanel) if cpanel is None or isinstance(cpanel, str) else dict(cpanel)
    params = module.gen_params(resolve_cpanel(module, overrides))
    if not isinstance(params, dict):
        raise ValueError(f"gen_params in {str(path)!r} must return a dict, got {type(params).__name__}")
    return _plain(params, "")


def to_yaml(params: dict[str, Any]) -> str:
    """The config as YAML text (keys in the order ``gen_params`` wrote them)."""
    return yaml.safe_dump(params, sort_keys=False)


def _take_value(argv: list[str], i: int, flag: str) -> tuple[str, int]:
    """The value of ``argv[i]`` (``flag VALUE`` or ``flag=VALUE``) and the index after it."""
    arg = argv[i]
    if arg.startswith(flag + "="):
        return arg[len(flag) + 1 :], i + 1
    if i + 1 >= len(argv):
        raise ValueError(f"{flag}: expected a value after it")
    return argv[i + 1], i + 2


def expand_params_args(argv: list[str]) -> list[str]:
    """Replace ``--params FILE [--cpanel JSON]`` in a command line by ``--config <YAML text>``.

    The config takes the place of ``--params``, so arguments after it still override it, as they
    would a ``--config`` file. A command line without ``--params`` comes back unchanged.

    Raises:
        ValueError: On ``--cpanel`` without ``--params``, either flag given twice or without a
            value, and everything :func:`gen_config` raises.
    """
    out: list[str] = []
    params_at = 0
    path: str | None = None
    cpanel: str | None = None
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == PARAMS_FLAG or arg.startswith(PARAMS_FLAG + "="):
            if path is not None:
                raise ValueError(f"{PARAMS_FLAG}: given more than once")
            path, i = _take_value(argv, i, PARAMS_FLAG)
            params_at = len(out)
        elif arg == CPANEL_FLAG or arg.startswith(CPANEL_FLAG + "="):
            if cpanel is not None:
                raise ValueError(f"{CPANEL_FLAG}: given more than once")
            cpanel, i = _take_value(argv, i, CPANEL_FLAG)
        else:
            out.append(arg)
            i += 1
    if path is None:
        if cpanel is not None:
            raise ValueError(f"{CPANEL_FLAG} needs {PARAMS_FLAG} FILE: it sets values of a parameter file")
        return list(argv)
    out[params_at:params_at] = ["--config", to_yaml(gen_config(path, cpanel))]
    return out
