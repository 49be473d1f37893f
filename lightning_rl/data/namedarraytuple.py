"""Named tuples of arrays that index, slice and assign across every field at once.

A namedarraytuple is the container for all samples in lightning_rl (rlpyt section 14): each field
holds a numpy array, a torch tensor, a nested namedarraytuple or ``None``, and ``nat[loc]`` applies
``loc`` to every field, so a ``[T, B]`` sample buffer can be written one time step at a time
(``buf[t] = step``) or cut into minibatches (``buf[:, b_idxs]``) without naming its fields.

Two forms exist:

* classes, built by :func:`namedarraytuple` or declared with class syntax::

      class EnvStep(NamedArrayTupleBase):
          observation: Any
          reward: Any

* the schema form, :class:`NamedArrayTupleSchema`, whose instances all share one class and carry
  their type name and fields as data. Nothing has to be importable at module level, so they pickle
  under the ``spawn`` start method even when built dynamically.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, Literal, overload

if TYPE_CHECKING:
    from typing import Self, dataclass_transform

    # The mixin only ever joins a tuple class, so type checkers see it as one.
    _TupleBase = tuple[Any, ...]
else:
    _TupleBase = object

    def dataclass_transform(**_kwargs: Any) -> Any:
        """``typing.dataclass_transform`` is Python 3.11+; only type checkers read it."""
        return lambda cls: cls


__all__ = [
    "AttrDict",
    "NamedArrayTuple",
    "NamedArrayTupleBase",
    "NamedArrayTupleSchema",
    "NamedArrayTupleSchema_like",
    "NamedTuple",
    "NamedTupleSchema",
    "is_namedarraytuple",
    "is_namedarraytuple_class",
    "is_namedtuple",
    "is_namedtuple_class",
    "namedarraytuple",
    "namedarraytuple_like",
]

RESERVED_NAMES = ("get", "items")


def _check_field_names(typename: str, fields: Iterable[str]) -> tuple[str, ...]:
    if isinstance(fields, str):
        fields = fields.replace(",", " ").split()
    fields = tuple(fields)
    for name in fields:
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"{typename}: field name {name!r} is not a valid identifier")
        if name in RESERVED_NAMES or name.startswith("_"):
            raise ValueError(f"{typename}: field name {name!r} is reserved (get, items, leading '_')")
    if len(set(fields)) != len(fields):
        raise ValueError(f"{typename}: duplicate field names in {fields}")
    return fields


class _ArrayIndexing(_TupleBase):
    """Indexing and assignment shared by both namedarraytuple forms.

    Subclasses provide ``_fields`` and ``_new(values)`` (build the same type from values).
    """

    __slots__ = ()

    if TYPE_CHECKING:

        @property
        def _fields(self) -> tuple[str, ...]: ...

        @property
        def _typename(self) -> str: ...

        def _new(self, values: Iterable[Any]) -> Any: ...

    def __getitem__(self, loc: Any) -> Any:
        try:
            return self._new(None if s is None else s[loc] for s in self)
        except IndexError as e:
            for name, s in zip(self._fields, self, strict=True):
                if s is None:
                    continue
                try:
                    _ = s[loc]
                except IndexError:
                    raise IndexError(
                        f"{self._typename}: cannot index field {name!r} (shape "
                        f"{getattr(s, 'shape', '?')}) at {loc!r}"
                    ) from e
            raise

    def __setitem__(self, loc: Any, value: Any) -> None:
        if not (isinstance(value, tuple) and getattr(value, "_fields", None) == self._fields):
            # Not the same structure: broadcast the whole value into every field.
            value = tuple(None if s is None else value for s in self)
        for name, s, v in zip(self._fields, self, value, strict=True):
            if s is None or v is None:
                continue
            try:
                s[loc] = v
            except (ValueError, IndexError, TypeError, RuntimeError) as e:
                raise type(e)(f"{self._typename}: cannot assign field {name!r} at {loc!r}: {e}") from e

    def __contains__(self, key: object) -> bool:
        return key in self._fields

    def get(self, index: int | str) -> Any:
        """Return a field as a plain tuple would (``get(0)``) or by name (``get('x')``)."""
        if isinstance(index, str):
            return tuple.__getitem__(self, self._fields.index(index))
        return tuple.__getitem__(self, index)

    def items(self) -> Iterator[tuple[str, Any]]:
        """Iterate ``(field_name, value)`` pairs in field order."""
        return zip(self._fields, tuple.__iter__(self), strict=True)


_CLASS_CACHE: dict[tuple[str, tuple[str, ...], str], type[Any]] = {}


@overload
def namedarraytuple(
    typename: str,
    field_names: Iterable[str] | str,
    return_namedtuple_cls: Literal[False] = False,
    classname_suffix: bool = False,
    module: str | None = None,
) -> type[Any]: ...


@overload
def namedarraytuple(
    typename: str,
    field_names: Iterable[str] | str,
    return_namedtuple_cls: Literal[True],
    classname_suffix: bool = False,
    module: str | None = None,
) -> tuple[type[Any], type[Any]]: ...


def namedarraytuple(
    typename: str,
    field_names: Iterable[str] | str,
    return_namedtuple_cls: bool = False,
    classname_suffix: bool = False,
    module: str | None = None,
) -> type[Any] | tuple[type[Any], type[Any]]:
    """Build a namedarraytuple class (rlpyt ``namedarraytuple``).

    Args:
        typename: Class name.
        field_names: Field names, as a sequence or a space/comma separated string.
        return_namedtuple_cls: Also return the plain namedtuple base class.
        classname_suffix: Append ``"_nat"`` to the class name (keeps it apart from a namedtuple
            of the same name in one module).
        module: Module the class claims to live in (for pickling); default the caller's.

    Returns:
        The class, or ``(class, namedtuple_class)``.

    Raises:
        ValueError: On invalid, reserved or duplicate field names.
    """
    fields = _check_field_names(typename, field_names)
    if module is None:
        import sys

        module = sys._getframe(1).f_globals.get("__name__", "__main__")
    nt_typename = typename
    if classname_suffix:
        typename = typename + "_nat"
    base = namedtuple(nt_typename, fields)  # type: ignore[misc]  # field names known only at run time

    def _new(self, values):
        return type(self)._make(values)

    ns = {
        "__slots__": (),
        "__module__": module,
        "_typename": typename,
        "_new": _new,
        "__getitem__": _ArrayIndexing.__getitem__,
        "__setitem__": _ArrayIndexing.__setitem__,
        "__contains__": _ArrayIndexing.__contains__,
        "get": _ArrayIndexing.get,
        "items": _ArrayIndexing.items,
        "_is_namedarraytuple": True,
    }
    cls = type(typename, (base,), ns)
    cls.__doc__ = f"{typename}({', '.join(fields)}): a namedarraytuple."
    return (cls, base) if return_namedtuple_cls else cls


_CLASS_BODY_KEYS = frozenset(
    ("__module__", "__qualname__", "__annotations__", "__doc__", "__classcell__", "__static_attributes__",
     "__firstlineno__", "__orig_bases__")
)


@dataclass_transform()
class _NamedArrayTupleMeta(type):
    """Turns ``class X(NamedArrayTupleBase): a: Any`` into ``namedarraytuple('X', ['a'])``."""

    def __new__(mcls, name, bases, namespace):
        if namespace.get("_root", False):
            return super().__new__(mcls, name, bases, namespace)
        fields = list(namespace.get("__annotations__", {}))
        if not fields:
            raise ValueError(f"{name}: a namedarraytuple class needs annotated fields")
        defaults = [f for f in fields if f in namespace]
        if defaults:
            raise ValueError(f"{name}: field {defaults[0]!r} has a default; namedarraytuple fields take none")
        cls = namedarraytuple(name, fields, module=namespace.get("__module__", "__main__"))
        cls.__qualname__ = namespace.get("__qualname__", name)
        if "__doc__" in namespace and namespace["__doc__"]:
            cls.__doc__ = namespace["__doc__"]
        # Methods and properties declared in the class body belong on the built class too.
        for key, value in namespace.items():
            if key not in _CLASS_BODY_KEYS:
                setattr(cls, key, value)
        if "__classcell__" in namespace:
            namespace["__classcell__"].cell_contents = cls
        return cls


if TYPE_CHECKING:
    # Type checkers see a declared class as the namedarraytuple it is built into; at run time the
    # metaclass returns that class, and this base stays a plain object.
    _NatBase = _ArrayIndexing
else:
    _NatBase = object


class NamedArrayTupleBase(_NatBase, metaclass=_NamedArrayTupleMeta):
    """Declare a namedarraytuple with class syntax, so IDEs and type checkers see its fields.

    Examples:
        >>> class Transition(NamedArrayTupleBase):
        ...     observation: Any
        ...     reward: Any
    """

    _root = True

    if TYPE_CHECKING:
        # What the built class (a namedtuple subclass) adds to the indexing of ``_ArrayIndexing``.
        def _replace(self, **kwargs: Any) -> Self: ...

        @classmethod
        def _make(cls, iterable: Iterable[Any]) -> Self: ...

        def _asdict(self) -> dict[str, Any]: ...


def is_namedtuple_class(obj: Any) -> bool:
    """True for namedtuple classes (not namedarraytuple classes). Heuristic."""
    return (
        isinstance(obj, type)
        and issubclass(obj, tuple)
        and hasattr(obj, "_fields")
        and hasattr(obj, "_make")
        and not getattr(obj, "_is_namedarraytuple", False)
    )


def is_namedarraytuple_class(obj: Any) -> bool:
    """True for namedarraytuple classes (not plain namedtuple classes). Heuristic."""
    return isinstance(obj, type) and issubclass(obj, tuple) and getattr(obj, "_is_namedarraytuple", False) is True


def is_namedtuple(obj: Any) -> bool:
    """True for namedtuple instances, including the schema form's :class:`NamedTuple`."""
    if isinstance(obj, NamedTuple):
        return not isinstance(obj, NamedArrayTuple)
    return is_namedtuple_class(type(obj))


def is_namedarraytuple(obj: Any) -> bool:
    """True for namedarraytuple instances, including the schema form's :class:`NamedArrayTuple`."""
    return isinstance(obj, NamedArrayTuple) or is_namedarraytuple_class(type(obj))


def _typename_and_fields(example: Any) -> tuple[str, tuple[str, ...]]:
    if isinstance(example, (NamedTupleSchema, NamedTuple)):
        return example._typename, tuple(example._fields)
    cls = example if isinstance(example, type) else type(example)
    if not hasattr(cls, "_fields"):
        raise TypeError(f"expected a namedtuple-like class or instance, got {cls.__name__}")
    return getattr(cls, "_typename", cls.__name__), tuple(cls._fields)


def namedarraytuple_like(namedtuple_or_class: Any, classname_suffix: bool = False) -> Any:
    """Return the namedarraytuple type matching a namedtuple(-like) class or instance.

    A namedarraytuple class or instance gives its own class; a schema-form input gives a
    :class:`NamedArrayTupleSchema`; a namedtuple gives a class with the same name and fields (one
    per name, fields and module, whose instances pickle even under ``spawn``).
    """
    obj = namedtuple_or_class
    if isinstance(obj, NamedArrayTupleSchema):
        return obj
    if isinstance(obj, NamedArrayTuple):
        return obj._schema
    if isinstance(obj, (NamedTupleSchema, NamedTuple)):
        return NamedArrayTupleSchema(*_typename_and_fields(obj))
    cls: type[Any] = obj if isinstance(obj, type) else type(obj)
    if is_namedarraytuple_class(cls):
        return cls
    if is_namedtuple_class(cls):
        typename = cls.__name__ + ("_nat" if classname_suffix else "")
        return _like_class(typename, tuple(cls._fields), cls.__module__)
    raise TypeError(f"namedarraytuple_like: {cls.__name__} is not a namedtuple or namedarraytuple")


def _like_class(typename: str, fields: tuple[str, ...], module: str) -> type[Any]:
    """One cached class per (name, fields, module), whose instances pickle by structure.

    The class is not reachable under its name in ``module`` (the namedtuple is), so instances
    reduce to this call instead of to a class reference; a spawned process rebuilds the class.
    """
    key = (typename, fields, module)
    cls = _CLASS_CACHE.get(key)
    if cls is None:
        cls = namedarraytuple(typename, fields, module=module)
        cls.__reduce__ = _reduce_like_instance  # type: ignore[assignment]  # becomes a method of cls
        _CLASS_CACHE[key] = cls
    return cls


def _reduce_like_instance(self: Any) -> tuple:
    return (_make_like_instance, (self._typename, self._fields, type(self).__module__, tuple(self)))


def _make_like_instance(typename: str, fields: tuple[str, ...], module: str, values: tuple) -> Any:
    return _like_class(typename, fields, module)._make(values)




class NamedTupleSchema:
    """A namedtuple *type* as data: calling it builds :class:`NamedTuple` instances.

    Args:
        typename: Type name shown in ``repr``.
        fields: Field names.
    """

    _instance_class: type[NamedTuple]  # set below, once NamedTuple exists

    def __init__(self, typename: str, fields: Iterable[str] | str):
        self._typename = typename
        self._fields = _check_field_names(typename, fields)
        self._index = {name: i for i, name in enumerate(self._fields)}

    def __getstate__(self) -> dict[str, Any]:
        # ``_index`` is derived from ``_fields``: pickles carry the fields only, and older
        # pickles (before ``_index`` existed) load the same way.
        return {"_typename": self._typename, "_fields": self._fields}

    def __setstate__(self, state: dict[str, Any]) -> None:
        type(self).__init__(self, state["_typename"], state["_fields"])

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        n = len(self._fields)
        if not kwargs and len(args) == n:
            # Every field given in order: the common case, once per env step for env infos.
            return self._instance_class.__new__(self._instance_class, self, args)
        if len(args) > n:
            raise TypeError(f"{self._typename} takes {n} positional arguments but {len(args)} were given")
        values = list(args) + [None] * (n - len(args))
        given = set(range(len(args)))
        for key, v in kwargs.items():
            if key not in self._fields:
                raise TypeError(f"{self._typename} got an unexpected field {key!r}")
            i = self._fields.index(key)
            if i in given:
                raise TypeError(f"{self._typename} got multiple values for field {key!r}")
            values[i] = v
            given.add(i)
        missing = [f for i, f in enumerate(self._fields) if i not in given]
        if missing:
            raise TypeError(f"{self._typename} missing fields {missing}")
        return self._instance_class.__new__(self._instance_class, self, values)

    def _make(self, iterable: Iterable[Any]) -> Any:
        values = tuple(iterable)
        if len(values) != len(self._fields):
            raise TypeError(f"{self._typename}: expected {len(self._fields)} values, got {len(values)}")
        return self._instance_class.__new__(self._instance_class, self, values)

    def __eq__(self, other: object) -> bool:
        return (
            type(self) is type(other)
            and self._typename == other._typename
            and self._fields == other._fields
        )

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._typename, self._fields))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._typename!r}, {list(self._fields)})"


class NamedTuple(tuple):
    """Instance of a :class:`NamedTupleSchema`: a namedtuple look-alike sharing one class."""

    _schema: NamedTupleSchema

    def __new__(cls, schema: NamedTupleSchema, values: Iterable[Any]):
        self = tuple.__new__(cls, values)
        self._schema = schema
        return self

    @property
    def _fields(self) -> tuple[str, ...]:
        return self._schema._fields

    @property
    def _typename(self) -> str:
        return self._schema._typename

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "_schema":
            raise AttributeError(name)
        try:
            return tuple.__getitem__(self, self._schema._index[name])
        except KeyError:
            raise AttributeError(f"{self._schema._typename} has no field {name!r}") from None

    def __setattr__(self, name: str, value: Any) -> None:
        if name != "_schema":
            raise AttributeError(f"{self._typename}: can't set attribute {name!r}")
        object.__setattr__(self, name, value)

    def _new(self, values: Iterable[Any]) -> Any:
        return type(self)(self._schema, values)

    def _make(self, iterable: Iterable[Any]) -> Any:
        return self._new(iterable)

    def _replace(self, **kwargs: Any) -> Any:
        unknown = set(kwargs) - set(self._fields)
        if unknown:
            raise ValueError(f"{self._typename}: got unexpected field names {sorted(unknown)}")
        return self._new(kwargs.get(f, v) for f, v in zip(self._fields, tuple.__iter__(self), strict=True))

    def _asdict(self) -> dict[str, Any]:
        return dict(zip(self._fields, tuple.__iter__(self), strict=True))

    def __repr__(self) -> str:
        body = ", ".join(f"{f}={v!r}" for f, v in zip(self._fields, tuple.__iter__(self), strict=True))
        return f"{self._typename}({body})"

    def __reduce__(self):
        return (type(self), (self._schema, tuple(self)))

    def __getnewargs__(self):
        return (self._schema, tuple(self))


class NamedArrayTupleSchema(NamedTupleSchema):
    """A namedarraytuple *type* as data (picklable without a module-level class)."""


class NamedArrayTuple(_ArrayIndexing, NamedTuple):
    """Instance of a :class:`NamedArrayTupleSchema`: indexes and assigns across all fields."""

    def __getitem__(self, loc: Any) -> Any:
        return _ArrayIndexing.__getitem__(self, loc)


NamedTupleSchema._instance_class = NamedTuple
NamedArrayTupleSchema._instance_class = NamedArrayTuple


def NamedArrayTupleSchema_like(example: Any) -> NamedArrayTupleSchema:
    """Schema with the name and fields of a namedtuple/namedarraytuple class or instance, or schema."""
    if isinstance(example, NamedArrayTupleSchema):
        return example
    return NamedArrayTupleSchema(*_typename_and_fields(example))


class AttrDict(dict):
    """A dict whose keys are also attributes: ``d["lr"]`` and ``d.lr`` are the same."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.__dict__ = self

    def copy(self) -> AttrDict:
        """Copy nested AttrDicts (unbroken chains of them); other values are shared, not copied."""
        return type(self)({k: v.copy() if isinstance(v, AttrDict) else v for k, v in self.items()})

    def __reduce__(self):
        return (type(self), (dict(self),))
