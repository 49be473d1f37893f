"""Variants of a LightningCLI config: rlpyt's ``VariantLevel`` / ``make_variants`` on dotted config keys.

A *level* sets one or more dotted keys together, written as on the command line
(``model.learning_rate``, short for ``model.init_args.learning_rate``; both forms work): its keys zip,
so a level with two keys of three values each gives three settings. Levels multiply, in order (the
first level varies slowest), as rlpyt's ``make_variants`` crosses them. Each variant gets a readable,
filesystem-safe, unique directory name built from its values (``lr_0.001-seed_1``).

:func:`write_variants` turns them into a grid directory, the contract shared with the launcher and
``lightning-rl results``::

    <grid_dir>/<variant_name>/config.yaml    # the complete config: `lightning-rl fit --config config.yaml` runs it
    <grid_dir>/<variant_name>/variant.yaml   # the dotted keys this variant sets, seed included

A grid file (``configs/grids/*.yaml``) names a base config, the levels, optional overrides shared
by every variant and optional short names for the directory names::

    base: ../ppo/cartpole.yaml            # relative to the grid file
    overrides: {model.total_env_steps: 50000}
    levels:
      - model.learning_rate: [0.0003, 0.001]
      - seed_everything: [0, 1]
    names: {model.learning_rate: lr}

A level may also be written as rlpyt writes it: ``{keys: [...], values: [[...], ...], dir_names: [...]}``.
"""

from __future__ import annotations

import contextlib
import copy
import difflib
import io
import itertools
import json
import math
import re
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from lightning_rl.config_tree import dotted_keys, long_key, set_dotted

__all__ = [
    "SEED_KEY", "Grid", "Variant", "VariantLevel", "dotted_keys", "load_grid", "make_variants", "resolve_config",
    "set_dotted", "write_variants",
]

#: The config key of the run's seed (LightningCLI's ``seed_everything``).
SEED_KEY = "seed_everything"
#: Short names of common keys in directory names (the key's last part otherwise).
DEFAULT_NAMES = {"learning_rate": "lr", SEED_KEY: "seed"}
_MAX_NAME = 120
_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")


@dataclass(frozen=True)
class VariantLevel:
    """One level of a grid (rlpyt's ``VariantLevel``): ``keys`` set together, one tuple of values per setting.

    Args:
        keys: Dotted config keys, short (``model.learning_rate``) or long (``model.init_args.learning_rate``).
        values: One sequence per setting, its positions matching ``keys`` (each combination written out).
        dir_names: One directory-name part per setting; default: built from the values.

    Raises:
        ValueError: If there are no keys or settings, a setting's length differs from the number of
            keys, a key repeats, or ``dir_names`` has another length than ``values``.
    """

    keys: tuple[str, ...]
    values: tuple[tuple[Any, ...], ...]
    dir_names: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "keys", tuple(self.keys))
        object.__setattr__(self, "values", tuple(tuple(v) for v in self.values))
        if self.dir_names is not None:
            object.__setattr__(self, "dir_names", tuple(str(n) for n in self.dir_names))
        if not self.keys:
            raise ValueError("VariantLevel: keys is empty; give at least one dotted config key")
        if len(set(self.keys)) != len(self.keys):
            raise ValueError(f"VariantLevel: a key repeats in {list(self.keys)}")
        if not self.values:
            raise ValueError(f"VariantLevel {list(self.keys)}: values is empty; give at least one setting")
        for setting in self.values:
            if len(setting) != len(self.keys):
                raise ValueError(
                    f"VariantLevel {list(self.keys)}: the setting {list(setting)} has {len(setting)} values "
                    f"for {len(self.keys)} keys"
                )
        if self.dir_names is not None and len(self.dir_names) != len(self.values):
            raise ValueError(
                f"VariantLevel {list(self.keys)}: {len(self.dir_names)} dir_names for {len(self.values)} settings"
            )

    @classmethod
    def zip(cls, mapping: Mapping[str, Sequence[Any]], dir_names: Sequence[str] | None = None) -> VariantLevel:
        """A level from ``{key: [values]}``: the keys zip, so every list must have the same length.

        Raises:
            ValueError: If a value is not a list, or the lists differ in length (naming each key's length).
        """
        if not mapping:
            raise ValueError("a grid level is empty; give {dotted.key: [values, ...]}")
        for key, values in mapping.items():
            if not isinstance(values, (list, tuple)):
                raise ValueError(f"grid level key {key!r}: expected a list of values, got {values!r}")
        lengths = {key: len(values) for key, values in mapping.items()}
        if len(set(lengths.values())) > 1:
            raise ValueError(
                f"the keys of one grid level zip, so their lists need the same length; got {lengths} "
                "(put keys that should multiply in separate levels)"
            )
        settings = tuple(zip(*mapping.values(), strict=True))
        return cls(tuple(mapping), settings, None if dir_names is None else tuple(dir_names))


@dataclass(frozen=True)
class Variant:
    """One combination of a grid: its directory name and the dotted keys it sets (in level order)."""

    name: str
    overrides: dict[str, Any] = field(default_factory=dict)


def _short_names(keys: Sequence[str], names: Mapping[str, str]) -> dict[str, str]:
    """A short name per key: ``names``, else :data:`DEFAULT_NAMES`, else the key's last part (more
    parts where two keys would share one)."""
    short: dict[str, str] = {}
    for key in keys:
        last = key.rsplit(".", 1)[-1]
        short[key] = names.get(key) or DEFAULT_NAMES.get(last, last)
    counts = {s: list(short.values()).count(s) for s in short.values()}
    for key in keys:
        if counts[short[key]] > 1 and key not in names:
            parts = [p for p in key.split(".") if p != "init_args"]
            short[key] = ".".join(parts[-2:])
    return short


def _value_text(value: Any) -> str:
    """A value as a directory-name part: numbers as Python writes them, a class path as its class name."""
    if isinstance(value, bool) or value is None:
        return str(value).lower()
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else str(value)
    if isinstance(value, (list, tuple)):
        return "x".join(_value_text(v) for v in value)
    if isinstance(value, dict):
        if "class_path" in value:
            return _value_text(value["class_path"])
        return "_".join(f"{k}_{_value_text(v)}" for k, v in value.items())
    text = str(value)
    if re.fullmatch(r"[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)+", text):  # a class path: its class name
        return text.rsplit(".", 1)[-1]
    return text


def _safe(text: str) -> str:
    safe = _UNSAFE.sub("_", text).strip("._-") or "variant"
    return safe[:_MAX_NAME]


def make_variants(*levels: VariantLevel, names: Mapping[str, str] | None = None) -> list[Variant]:
    """Cross ``levels`` in order (rlpyt's ``make_variants``): every setting of one level with every
    setting of the next, the first level varying slowest.

    Args:
        levels: The grid's levels.
        names: Short names of keys for the directory names (``{"model.learning_rate": "lr"}``).

    Returns:
        The variants, each named ``<short>_<value>[-<short>_<value>...]`` (a level's ``dir_names`` in place of
        its part where given), unique: names that would collide get ``-2``, ``-3``, ... in order.

    Raises:
        ValueError: If no level is given, a key appears in two levels, or two variants set the same values.
    """
    if not levels:
        raise ValueError("make_variants: give at least one VariantLevel")
    all_keys = [key for level in levels for key in level.keys]
    repeated = sorted({key for key in all_keys if all_keys.count(key) > 1})
    if repeated:
        raise ValueError(f"grid keys appear in more than one level: {repeated} (a key belongs to one level)")
    short = _short_names(all_keys, dict(names or {}))
    variants: list[Variant] = []
    for combo in itertools.product(*(range(len(level.values)) for level in levels)):
        overrides: dict[str, Any] = {}
        parts: list[str] = []
        for level, i in zip(levels, combo, strict=True):
            setting = level.values[i]
            overrides.update(zip(level.keys, setting, strict=True))
            if level.dir_names is not None:
                parts.append(level.dir_names[i])
            else:
                parts.extend(f"{short[k]}_{_value_text(v)}" for k, v in zip(level.keys, setting, strict=True))
        variants.append(Variant(_safe("-".join(parts)), overrides))
    settings = [json.dumps(variant.overrides, sort_keys=True, default=str) for variant in variants]
    duplicates = sorted({s for s in settings if settings.count(s) > 1})
    if duplicates:
        raise ValueError(f"the grid holds the same variant more than once: {duplicates[0]}")
    counts: dict[str, int] = {}
    unique: list[Variant] = []
    for variant in variants:
        counts[variant.name] = counts.get(variant.name, 0) + 1
        name = variant.name if counts[variant.name] == 1 else f"{variant.name}-{counts[variant.name]}"
        unique.append(Variant(name, variant.overrides))
    return unique


@dataclass(frozen=True)
class Grid:
    """A grid file, read: the base config, the variants and the overrides every variant shares."""

    base: Path
    variants: list[Variant]
    overrides: dict[str, Any]
    grid_dir: Path | None = None


def load_grid(path: str | Path) -> Grid:
    """Read a grid YAML file (see the module docstring).

    Raises:
        ValueError: If the file is not a mapping with ``base`` and ``levels``, names an unknown field,
            its base config does not exist, or a level is malformed.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"grid file {path} does not exist")
    data = yaml.safe_load(path.read_text())
    allowed = {"base", "levels", "overrides", "names", "grid_dir"}
    if not isinstance(data, dict) or "base" not in data or "levels" not in data:
        raise ValueError(f"grid file {path}: expected a mapping with 'base' (a config) and 'levels' (a list)")
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise ValueError(f"grid file {path}: unknown fields {unknown}; allowed: {sorted(allowed)}")
    base = (path.parent / str(data["base"])).resolve()
    if not base.is_file():
        raise ValueError(f"grid file {path}: base config {data['base']} ({base}) does not exist")
    raw_levels = data["levels"]
    if not isinstance(raw_levels, list) or not raw_levels:
        raise ValueError(f"grid file {path}: 'levels' must be a non-empty list of levels")
    levels = [_level_from_yaml(level, i) for i, level in enumerate(raw_levels)]
    overrides = data.get("overrides") or {}
    names = data.get("names") or {}
    if not isinstance(overrides, dict) or not isinstance(names, dict):
        raise ValueError(f"grid file {path}: 'overrides' and 'names' must be mappings of dotted keys")
    level_keys = {key for level in levels for key in level.keys}
    both = sorted(level_keys & set(overrides))
    if both:
        raise ValueError(f"grid file {path}: keys both in a level and in overrides: {both}")
    grid_dir = Path(data["grid_dir"]) if data.get("grid_dir") else None
    return Grid(base, make_variants(*levels, names=names), dict(overrides), grid_dir)


def _level_from_yaml(level: Any, index: int) -> VariantLevel:
    if isinstance(level, dict) and set(level) <= {"keys", "values", "dir_names"} and {"keys", "values"} <= set(level):
        return VariantLevel(tuple(level["keys"]), tuple(level["values"]), level.get("dir_names"))
    if not isinstance(level, dict):
        raise ValueError(f"grid level {index}: expected a mapping {{dotted.key: [values]}}, got {level!r}")
    return VariantLevel.zip(level)


def _unknown_key_error(key: str, known: Sequence[str], base: Path) -> ValueError:
    close = difflib.get_close_matches(key, known, n=3, cutoff=0.85)  # shared dotted prefixes score high
    last = key.rsplit(".", 1)[-1]
    close += [k for k in known if k.rsplit(".", 1)[-1] == last and k not in close][:5]
    hint = f"; close keys: {', '.join(close)}" if close else ""
    return ValueError(f"unknown config key {key!r}: not in {base.name}'s parsed config{hint}")


def resolve_config(config: str | Path) -> str:
    """The complete config that ``lightning-rl fit --config <config>`` runs, as LightningCLI prints it
    (``--print_config``): every default written out, so the file runs alone and says everything.

    Raises:
        ValueError: With LightningCLI's message, if the config does not parse (a bad value or key).
    """
    from lightning_rl.cli import main

    out, err = io.StringIO(), io.StringIO()
    argv = sys.argv
    # Given as sys.argv, so LightningCLI does not warn about arguments of the launcher's own command line.
    sys.argv = [argv[0], "fit", "--config", str(config), "--print_config"]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main()
    except SystemExit as stop:
        if stop.code not in (0, None):
            lines = err.getvalue().strip().splitlines()
            errors = [line for line in lines if "error:" in line]  # the first of fit's few error lines
            raise ValueError((errors or lines or [f"{config} does not parse"])[0]) from None
    finally:
        sys.argv = argv
    return out.getvalue()


def write_variants(
    base: str | Path, variants: Sequence[Variant], grid_dir: str | Path, overrides: Mapping[str, Any] | None = None,
) -> list[Path]:
    """Write one directory per variant under ``grid_dir``: ``config.yaml`` (the base config with the
    shared ``overrides`` and the variant's own, resolved as :func:`resolve_config` does) and
    ``variant.yaml`` (the variant's dotted keys and values, seed included).

    An existing variant directory is kept when its ``config.yaml`` is the one this grid writes, so a
    launch resumes; any other ``config.yaml`` there is refused rather than mixed with this grid's runs.

    Args:
        base: The base config file.
        variants: From :func:`make_variants` (or :func:`load_grid`).
        grid_dir: Where the variant directories go.
        overrides: Dotted keys set in every variant (not part of the variant names), e.g. a smaller budget.

    Returns:
        The variant directories, in the order of ``variants``.

    Raises:
        ValueError: If a key is not in the base config's parsed tree (naming the close keys), a value
            does not parse, or a variant directory holds another config.
    """
    base = Path(base).resolve()
    tree = yaml.safe_load(resolve_config(base))
    known = list(dotted_keys(tree))
    shared = dict(overrides or {})
    for key in [*shared, *(k for v in variants for k in v.overrides)]:
        if long_key(tree, key) not in known:  # short keys (model.learning_rate) as on the command line
            raise _unknown_key_error(key, known, base)
    grid_dir = Path(grid_dir)
    grid_dir.mkdir(parents=True, exist_ok=True)
    written: list[tuple[Path, str, Variant]] = []
    with tempfile.TemporaryDirectory(prefix="variant-") as scratch:
        for variant in variants:
            merged = copy.deepcopy(tree)
            for key, value in {**shared, **variant.overrides}.items():
                set_dotted(merged, key, value, create=False)
            draft = Path(scratch) / "config.yaml"
            draft.write_text(yaml.safe_dump(merged, sort_keys=False))
            try:
                text = resolve_config(draft)
            except ValueError as error:
                raise ValueError(f"variant {variant.name}: {error}") from None
            written.append((grid_dir / variant.name, text, variant))
    for directory, text, variant in written:
        config = directory / "config.yaml"
        if config.is_file() and config.read_text() != text:
            raise ValueError(
                f"{config} holds another config than this grid writes for {variant.name}; "
                "give another grid directory (--grid_dir) or move the old one away"
            )
    for directory, text, variant in written:
        directory.mkdir(exist_ok=True)
        (directory / "config.yaml").write_text(text)
        values = dict(variant.overrides)
        values.setdefault(SEED_KEY, yaml.safe_load(text).get(SEED_KEY))  # the contract: the seed is always there
        (directory / "variant.yaml").write_text(yaml.safe_dump(values, sort_keys=False))
    return [directory for directory, _, _ in written]
