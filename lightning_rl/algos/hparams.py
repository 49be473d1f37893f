"""Hyperparameters, each declared once: name, type, default, one line of meaning, a check.

A hyperparameter is a class attribute of an algorithm, declared in the lowest class all its users
share::

    class PPO(OnPolicyAlgorithm):
        ratio_clip: float = hparam(0.1, "Clip range epsilon of the likelihood ratio.", check=POSITIVE)
        gae_lambda = 0.98  # declared by OnPolicyAlgorithm; PPO changes only its default

For every subclass :class:`~lightning_rl.algos.base.RLModule` builds from these declarations a
flat, typed, keyword-only ``__init__(self, agent, sampler, *, <name>=<default>, ...)`` with an
``Args:`` docstring (:func:`install_init`), which ``inspect.signature``, LightningCLI/jsonargparse
(``--help``, ``--print_config``, unknown keys refused), ``save_hyperparameters`` and the docs
read. A class that writes its own ``__init__`` keeps it. :func:`hyperparameters` lists them for
the docs' tables.
"""

from __future__ import annotations

import inspect
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = [
    "FRACTION",
    "INT_AT_LEAST_0",
    "INT_AT_LEAST_1",
    "NON_NEGATIVE",
    "POSITIVE",
    "TAU",
    "Check",
    "HParam",
    "Hyperparameter",
    "bind",
    "declared",
    "hparam",
    "hyperparameters",
    "install_init",
    "markdown_table",
]

_T = TypeVar("_T")


@dataclass(frozen=True)
class Check:
    """A test of one value and what it says when the value fails it: ``"<name> must be <text>,
    got <value>"``. ``None`` always passes (it means "off" wherever a hyperparameter allows it).

    Args:
        test: True for a good value.
        text: What a good value is, e.g. ``"> 0"`` or ``"in [0, 1]"``.
        to_int: Give integral floats back as ints (``4.0`` -> ``4``).
    """

    test: Callable[[Any], bool]
    text: str
    to_int: bool = False

    def __call__(self, name: str, value: Any) -> Any:
        if value is None:
            return value
        try:
            good = bool(self.test(value))
        except (TypeError, ValueError):
            good = False
        if not good:
            raise ValueError(f"{name} must be {self.text}, got {value!r}")
        return int(value) if self.to_int else value


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _int_at_least(low: int) -> Check:
    return Check(lambda v: not isinstance(v, bool) and int(v) == v and v >= low, f"an int >= {low}", to_int=True)


POSITIVE = Check(lambda v: _number(v) and v > 0, "> 0")
NON_NEGATIVE = Check(lambda v: _number(v) and v >= 0, ">= 0")
FRACTION = Check(lambda v: _number(v) and 0.0 <= v <= 1.0, "in [0, 1]")
TAU = Check(lambda v: _number(v) and 0.0 < v <= 1.0, "in (0, 1]")
INT_AT_LEAST_0 = _int_at_least(0)
INT_AT_LEAST_1 = _int_at_least(1)


class HParam:
    """One declared hyperparameter (what :func:`hparam` puts in a class body)."""

    __slots__ = ("annotation", "check", "default", "meaning", "name", "owner", "type_text")

    def __init__(self, default: Any, meaning: str, check: Check | None) -> None:
        self.default = default
        self.meaning = meaning
        self.check = check
        self.name = ""
        self.owner: type = object
        self.annotation: Any = inspect.Parameter.empty
        #: The annotation as written (``"float | None"``), for tables.
        self.type_text = ""

    def with_default(self, default: Any) -> HParam:
        copy = HParam(default, self.meaning, self.check)
        copy.name, copy.owner, copy.annotation, copy.type_text = self.name, self.owner, self.annotation, self.type_text
        return copy


def hparam(default: _T, meaning: str, *, check: Check | None = None) -> _T:
    """Declare a hyperparameter in a class body: ``name: type = hparam(default, meaning, check=...)``.

    Args:
        default: Its default (a subclass changes it by a plain assignment, ``name = value``).
        meaning: One line: what it does (the ``Args:`` entry, ``--help`` and the docs' table).
        check: Raises ``ValueError`` naming the parameter and a bad value (None: no check).
    """
    return HParam(default, meaning, check)  # type: ignore[return-value]  # a declaration, read by declared()


#: The hyperparameters each class body declares (read once: the body's attributes become the defaults).
_DECLARED: dict[type, dict[str, HParam]] = {}
#: Every class's full table, once built.
_TABLES: dict[type, dict[str, HParam]] = {}


def declared(cls: type) -> dict[str, HParam]:
    """``cls``'s hyperparameters by name with ``cls``'s defaults: its own first, then each base class's.

    Raises:
        TypeError: If a class declares a name a base class declared already (change its default
            by assignment instead), or puts a method or property on a hyperparameter's name.
    """
    table = _TABLES.get(cls)
    if table is not None:
        return table
    table = {}
    for klass in reversed(cls.__mro__):
        own = _declarations(klass)
        for name, spec in own.items():
            if name in table:
                raise TypeError(f"{klass.__name__}.{name}: already declared by {table[name].owner.__name__}; "
                                f"change its default by assignment ({name} = {spec.default!r})")
            table[name] = spec
        for name, value in vars(klass).items():
            if name in table and name not in own:
                if callable(value) or isinstance(value, (property, staticmethod, classmethod)):
                    raise TypeError(f"{klass.__name__}.{name} hides the hyperparameter {name}")
                table[name] = table[name].with_default(value)
    # The class's own hyperparameters first, then each base class's (their declaration order).
    table = dict(sorted(table.items(), key=lambda item: cls.__mro__.index(item[1].owner)))
    _TABLES[cls] = table
    return table


def _declarations(klass: type) -> dict[str, HParam]:
    own = _DECLARED.get(klass)
    if own is None:
        own = {}
        annotations = klass.__dict__.get("__annotations__", {})
        for name, value in list(vars(klass).items()):
            if isinstance(value, HParam):
                value.name, value.owner = name, klass
                written = annotations.get(name, inspect.Parameter.empty)
                value.annotation = _annotation(klass, name, written)
                value.type_text = written if isinstance(written, str) else _type_name(value.annotation)
                own[name] = value
                setattr(klass, name, value.default)
        _DECLARED[klass] = own
    return own


def _annotation(klass: type, name: str, annotation: Any) -> Any:
    """The annotation as a type (a string one evaluated in its module, as ``get_type_hints`` does)."""
    if not isinstance(annotation, str):
        return annotation
    module = sys.modules.get(klass.__module__)  # None for a class made by exec() in a namespace of its own
    namespace = dict(vars(module)) if module is not None else {}
    try:
        return eval(annotation, namespace, dict(vars(klass)))  # noqa: S307  (the class's own source)
    except Exception as error:
        raise TypeError(f"{klass.__name__}.{name}: cannot evaluate its annotation {annotation!r}: {error}") from error


def bind(cls: type, given: dict[str, Any]) -> dict[str, Any]:
    """Every hyperparameter of ``cls``: the ``given`` values, checked, and the defaults for the rest.

    Raises:
        TypeError: On a name ``cls`` does not declare (as Python does for an unknown keyword).
        ValueError: From a value's check, naming the parameter and the value.
    """
    table = declared(cls)
    unknown = sorted(set(given) - set(table))
    if unknown:
        raise TypeError(f"{cls.__name__}() got unexpected keyword arguments {unknown}; "
                        f"its hyperparameters are {sorted(table)}")
    values = {}
    for name, spec in table.items():
        value = given.get(name, spec.default)
        values[name] = spec.check(name, value) if spec.check is not None else value
    return values


def signature(cls: type) -> inspect.Signature:
    """``(self, agent, sampler, *, <every hyperparameter>=<default>)``, typed."""
    from lightning_rl.agents.base import BaseAgent
    from lightning_rl.samplers.base import BaseSampler

    kinds = inspect.Parameter
    params = [
        kinds("self", kinds.POSITIONAL_OR_KEYWORD),
        kinds("agent", kinds.POSITIONAL_OR_KEYWORD, annotation=_attribute_type(cls, "agent", BaseAgent)),
        kinds("sampler", kinds.POSITIONAL_OR_KEYWORD, annotation=BaseSampler),
    ]
    params += [kinds(n, kinds.KEYWORD_ONLY, default=p.default, annotation=p.annotation)
               for n, p in declared(cls).items()]
    return inspect.Signature(params, return_annotation=None)


def _attribute_type(cls: type, name: str, fallback: type) -> Any:
    for klass in cls.__mro__:
        annotation = klass.__dict__.get("__annotations__", {}).get(name)
        if annotation is not None:
            try:
                return _annotation(klass, name, annotation)
            except TypeError:
                return fallback
    return fallback


def docstring(cls: type) -> str:
    """The ``Args:`` section of ``cls``'s ``__init__``, from the one-line meanings."""
    lines = ["Args:",
             "    agent: The acting policy (``class_path``/``init_args``); its models are built in ``setup()``.",
             "    sampler: Collects ``[T, B]`` batches (serial, vector, CPU or GPU sampler). Holds the env id."]
    lines += [f"    {name}: {spec.meaning}" for name, spec in declared(cls).items()]
    return "\n".join(lines)


def install_init(cls: type, root: type) -> None:
    """Give ``cls`` the flat ``__init__`` of its hyperparameters (unless its body defines one).

    The method passes everything on to the next ``__init__`` up the MRO (in the end ``root``'s,
    :class:`~lightning_rl.algos.base.RLModule`'s, which binds, checks and saves the values).
    """
    if "__init__" in cls.__dict__:
        return
    init = _forwarding_init(cls, root)
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__signature__ = signature(cls)  # type: ignore[attr-defined]
    init.__doc__ = f"Build a {cls.__name__} ({len(declared(cls))} hyperparameters, keyword-only).\n\n{docstring(cls)}"
    cls.__init__ = init  # type: ignore[misc]


def _forwarding_init(owner: Any, root: type) -> Callable[..., None]:
    # Lightning's save_hyperparameters walks up the __init__ frames that hold a ``__class__`` (the
    # cell of ``super()``) and reads their arguments as ``__class__.__init__``'s: ``root``'s
    # (self, agent, sampler, **hparams) fits this frame, so a hand-written ``__init__`` further up
    # the call chain (a subclass's own) still has its arguments saved.
    __class__ = root

    def __init__(self: Any, agent: Any, sampler: Any, **hparams: Any) -> None:
        if __class__ is not root:  # (never: the reference keeps the cell in this frame)
            raise TypeError(f"{owner.__name__}.__init__ lost its root class")
        super(owner, self).__init__(agent, sampler, **hparams)

    return __init__


@dataclass(frozen=True)
class Hyperparameter:
    """One row of an algorithm's hyperparameter table (:func:`hyperparameters`)."""

    name: str
    type: str
    default: Any
    meaning: str
    declared_in: str


def hyperparameters(cls: type) -> list[Hyperparameter]:
    """``cls``'s hyperparameters, its own first, then each base class's, for docs and tools."""
    return [
        Hyperparameter(name, spec.type_text, spec.default, spec.meaning, spec.owner.__name__)
        for name, spec in declared(cls).items()
    ]


def _type_name(annotation: Any) -> str:
    if annotation is inspect.Parameter.empty:
        return ""
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "").replace("NoneType", "None")


def markdown_table(cls: type) -> str:
    """``cls``'s :func:`hyperparameters` as a Markdown table (name, type, default, meaning, declared in)."""
    lines = ["| name | type | default | meaning | declared in |", "| --- | --- | --- | --- | --- |"]
    for row in hyperparameters(cls):
        kind = row.type.replace("|", "\\|")
        lines.append(f"| `{row.name}` | `{kind}` | `{row.default!r}` | {row.meaning} | `{row.declared_in}` |")
    return "\n".join(lines)
