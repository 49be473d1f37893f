"""Search spaces over dotted LightningCLI config keys, read from YAML, and overrides applied to configs.

A space file names the keys to search (``params``) and, optionally, keys set to one value in every
trial (``fixed``: a tuning budget, evaluation envs), each by its dotted path in the config, written
as on the command line (``model.learning_rate``) or in the long form (``model.init_args.learning_rate``)::

    params:
      model.learning_rate: {type: float, low: 1.0e-4, high: 3.0e-3, log: true}
      model.epochs: {type: int, low: 4, high: 20, step: 4}
      model.gae_lambda: {type: categorical, choices: [0.8, 0.9, 0.95]}
      model.agent.hidden_sizes: {type: categorical, choices: [[64, 64], [128, 128]]}
    fixed:
      model.total_env_steps: 30000

The three kinds map one to one onto Optuna's ``suggest_float``, ``suggest_int`` and
``suggest_categorical``. Optuna stores only ``None``, bool, int, float and str choices, so a space
whose choices include lists or mappings hands them to Optuna as JSON text and decodes the text
again (:meth:`SearchSpace.decode`).
"""

from __future__ import annotations

import copy
import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml

from lightning_rl.config_tree import set_dotted

__all__ = [
    "Categorical", "FloatRange", "IntRange", "SearchSpace", "Suggester", "apply_overrides", "load_space", "parse_space",
    "set_dotted",
]

#: A dotted key: identifier-like parts (list positions as numbers) joined by dots.
_KEY = re.compile(r"^[A-Za-z0-9_+\-]+(\.[A-Za-z0-9_+\-]+)*$")
_SCALARS = (type(None), bool, int, float, str)


class Suggester(Protocol):
    """The part of ``optuna.trial.Trial`` that a space samples through (a fake in tests)."""

    def suggest_float(self, name: str, low: float, high: float, *, step: float | None = None,
                      log: bool = False) -> float: ...

    def suggest_int(self, name: str, low: int, high: int, *, step: int = 1, log: bool = False) -> int: ...

    def suggest_categorical(self, name: str, choices: Any) -> Any: ...


@dataclass(frozen=True)
class FloatRange:
    """A float in ``[low, high]``, uniform or (``log``) log-uniform, optionally on a grid of ``step``."""

    low: float
    high: float
    log: bool = False
    step: float | None = None

    def suggest(self, trial: Suggester, name: str) -> float:
        return trial.suggest_float(name, self.low, self.high, step=self.step, log=self.log)

    def first(self) -> float:
        return self.low


@dataclass(frozen=True)
class IntRange:
    """An int in ``[low, high]`` on a grid of ``step``, or log-uniform (``log``, step 1)."""

    low: int
    high: int
    step: int = 1
    log: bool = False

    def suggest(self, trial: Suggester, name: str) -> int:
        return trial.suggest_int(name, self.low, self.high, step=self.step, log=self.log)

    def first(self) -> int:
        return self.low


@dataclass(frozen=True)
class Categorical:
    """One of ``choices``; lists and mappings among them travel through Optuna as JSON text."""

    choices: tuple[Any, ...]
    encoded: bool = False

    def suggest(self, trial: Suggester, name: str) -> Any:
        if self.encoded:
            return json.loads(trial.suggest_categorical(name, [json.dumps(c) for c in self.choices]))
        return trial.suggest_categorical(name, list(self.choices))

    def first(self) -> Any:
        return copy.deepcopy(self.choices[0])


Distribution = FloatRange | IntRange | Categorical


@dataclass(frozen=True)
class SearchSpace:
    """What a tuning study samples (``params``) and sets in every trial (``fixed``), by dotted key."""

    params: dict[str, Distribution]
    fixed: dict[str, Any] = field(default_factory=dict)

    def suggest(self, trial: Suggester) -> dict[str, Any]:
        """One value per searched key, drawn through ``trial`` (decoded: lists stay lists)."""
        return {key: dist.suggest(trial, key) for key, dist in self.params.items()}

    def first(self) -> dict[str, Any]:
        """One valid value per searched key (each range's ``low``, each first choice), to check a config."""
        return {key: dist.first() for key, dist in self.params.items()}

    def decode(self, params: dict[str, Any]) -> dict[str, Any]:
        """Optuna's stored ``params`` of a trial as config values (JSON text of list choices decoded)."""
        decoded = {}
        for key, value in params.items():
            dist = self.params.get(key)
            encoded = isinstance(dist, Categorical) and dist.encoded and isinstance(value, str)
            decoded[key] = json.loads(value) if encoded else value
        return decoded


def _number(key: str, name: str, value: Any, integer: bool) -> Any:
    """``value`` as an int (``integer``) or float, or a ValueError naming ``key`` and ``name``."""
    if isinstance(value, str) and not integer:
        try:  # YAML 1.1 reads 1e-4 (no dot) as text; LightningCLI accepts it as a float, so do we.
            value = float(value)
        except ValueError:
            pass
    if integer:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"space: {key}: {name} must be an int for type int, got {value!r}")
        return value
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"space: {key}: {name} must be a finite number, got {value!r}")
    return float(value)


_FIELDS = {"float": {"low", "high", "log", "step"}, "int": {"low", "high", "log", "step"}, "categorical": {"choices"}}


def parse_distribution(key: str, spec: Any) -> Distribution:
    """One ``params`` entry (``{type: float|int|categorical, ...}``) as a distribution.

    Raises:
        ValueError: Naming ``key`` and the bad field or value, and what is allowed.
    """
    if not isinstance(spec, dict):
        raise ValueError(
            f"space: {key}: expected a mapping such as {{type: float, low: 0.0001, high: 0.01, log: true}}, "
            f"got {spec!r}"
        )
    kind = spec.get("type")
    if kind not in _FIELDS:
        raise ValueError(f"space: {key}: type must be one of float, int, categorical, got {kind!r}")
    unknown = sorted(set(spec) - _FIELDS[kind] - {"type"})
    if unknown:
        raise ValueError(f"space: {key}: unknown field(s) {unknown} for type {kind}; allowed: {sorted(_FIELDS[kind])}")
    if kind == "categorical":
        choices = spec.get("choices")
        if not isinstance(choices, list) or not choices:
            raise ValueError(f"space: {key}: choices must be a non-empty list, got {choices!r}")
        texts = [json.dumps(c, sort_keys=True) for c in choices]
        if len(set(texts)) != len(texts):
            raise ValueError(f"space: {key}: choices must differ from each other, got {choices!r}")
        return Categorical(tuple(choices), encoded=not all(isinstance(c, _SCALARS) for c in choices))
    for name in ("low", "high"):
        if name not in spec:
            raise ValueError(f"space: {key}: type {kind} needs low and high, {name} is missing")
    log = spec.get("log", False)
    if not isinstance(log, bool):
        raise ValueError(f"space: {key}: log must be true or false, got {log!r}")
    integer = kind == "int"
    low, high = _number(key, "low", spec["low"], integer), _number(key, "high", spec["high"], integer)
    if low > high:
        raise ValueError(f"space: {key}: low must be <= high, got low={low} high={high}")
    if log and low <= 0:
        raise ValueError(f"space: {key}: log: true needs low > 0, got low={low}")
    step = spec.get("step")
    if step is not None:
        step = _number(key, "step", step, integer)
        if step <= 0:
            raise ValueError(f"space: {key}: step must be > 0, got {step}")
        if log and step != 1:
            # Optuna samples a log scale without a grid (an int grid of 1 is every int).
            raise ValueError(f"space: {key}: step and log: true cannot be combined (drop one)")
    if integer:
        return IntRange(int(low), int(high), step=int(step) if step is not None else 1, log=log)
    return FloatRange(low, high, log=log, step=None if step is None or log else step)


def _check_key(key: Any, section: str) -> str:
    if not isinstance(key, str) or not _KEY.match(key):
        raise ValueError(
            f"space: {section}: {key!r} is not a dotted config key (parts of letters, digits, '_', '-' joined "
            "by dots, e.g. model.learning_rate)"
        )
    return key


def parse_space(data: Any) -> SearchSpace:
    """A search space from the mapping a space file holds (module docstring).

    Raises:
        ValueError: If the mapping, a key, a distribution or a fixed value is not allowed (named).
    """
    if not isinstance(data, dict):
        raise ValueError(f"space: expected a mapping with params (and optionally fixed), got {type(data).__name__}")
    unknown = sorted(set(data) - {"params", "fixed"})
    if unknown:
        raise ValueError(f"space: unknown top-level key(s) {unknown}; allowed: params, fixed")
    params = data.get("params")
    if not isinstance(params, dict) or not params:
        raise ValueError("space: params must be a non-empty mapping of dotted config keys to distributions")
    fixed = data.get("fixed") or {}
    if not isinstance(fixed, dict):
        raise ValueError(f"space: fixed must be a mapping of dotted config keys to values, got {fixed!r}")
    both = sorted(set(params) & set(fixed))
    if both:
        raise ValueError(f"space: {both} both searched (params) and fixed; keep each key in one of them")
    return SearchSpace(
        params={_check_key(k, "params"): parse_distribution(k, v) for k, v in params.items()},
        fixed={_check_key(k, "fixed"): v for k, v in fixed.items()},
    )


def load_space(path: str | os.PathLike) -> SearchSpace:
    """The search space in the YAML file ``path``.

    Raises:
        ValueError: If the file is missing, is not YAML, or holds a space :func:`parse_space` rejects.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"space: {path} is not a file")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        raise ValueError(f"space: {path} is not valid YAML: {error}") from error
    return parse_space(data)


def apply_overrides(config: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``config`` with each dotted key of ``overrides`` set, short (``model.learning_rate``) or
    long (``model.init_args.learning_rate``) (:func:`lightning_rl.config_tree.set_dotted`)."""
    result = copy.deepcopy(config)
    for key, value in overrides.items():
        set_dotted(result, key, value)
    return result
