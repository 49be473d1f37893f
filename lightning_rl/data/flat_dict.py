"""Flat, unix-path views of nested trajectory data (digideep ``data_helpers``).

digideep keeps a trajectory as one level of ``'/path/to/leaf'`` keys, for example
``'/agents/<name>/actions'`` with shape ``[B, T, ...]``. The helpers here convert nested dicts to
that form and back, assemble such dicts step by step from per-step dicts whose keys may come and
go (missing steps are filled with ``None``-like placeholders), and view a namedarraytuple sample
tree as a flat dict of its arrays (and rebuild it) without copying.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lightning_rl.data.namedarraytuple import NamedTuple

__all__ = [
    "complete_dict_of_list",
    "convert_time_to_batch_major",
    "dict_of_lists_to_list_of_dicts",
    "extract_keywise",
    "flat_dict_to_nat",
    "flatten_dict",
    "join_keys",
    "list_of_dicts_to_flattened_dict_of_lists",
    "nat_to_flat_dict",
    "nonify",
    "unflatten_dict",
    "update_dict_of_lists",
]


def join_keys(key1: str, key2: str, sep: str = "/") -> str:
    """Join two path parts with exactly one ``sep`` between them.

    Examples:
        >>> join_keys("/agent1", "artifacts")
        '/agent1/artifacts'
        >>> join_keys("", "a")
        '/a'
    """
    return key1.rstrip(sep) + sep + key2.lstrip(sep)


def flatten_dict(dic: dict, sep: str = "/", prefix: str = "") -> dict[str, Any]:
    """Flatten nested dicts into one level of unix-style path keys.

    Args:
        dic: Nested dict; any non-dict value is a leaf.
        sep: Path separator.
        prefix: Path prepended to every key.

    Returns:
        ``{path: leaf}`` in depth-first key order.

    Examples:
        >>> flatten_dict({"a": 1, "b": {"c": 1, "d": {"e": 2, "f": 3}}})
        {'/a': 1, '/b/c': 1, '/b/d/e': 2, '/b/d/f': 3}
    """
    flat: dict[str, Any] = {}
    for key, value in dic.items():
        path = join_keys(prefix, key, sep)
        if isinstance(value, dict):
            flat.update(flatten_dict(value, sep=sep, prefix=path))
        else:
            flat[path] = value
    return flat


def unflatten_dict(dic: dict[str, Any], sep: str = "/") -> dict:
    """Rebuild nested dicts from unix-style path keys (inverse of :func:`flatten_dict`).

    Raises:
        ValueError: If a key does not start with ``sep``, or a path runs through a leaf.

    Examples:
        >>> unflatten_dict({"/a": 1, "/b/c": 1, "/b/d/e": 2, "/b/d/f": 3})
        {'a': 1, 'b': {'c': 1, 'd': {'e': 2, 'f': 3}}}
    """
    nested: dict = {}
    for path, value in dic.items():
        if not path.startswith(sep):
            raise ValueError(f"unflatten_dict: key {path!r} must start with sep={sep!r}")
        *parents, leaf = path[len(sep) :].split(sep)
        node = nested
        for part in parents:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ValueError(f"unflatten_dict: key {path!r} runs through the leaf at {part!r}")
        node[leaf] = value
    return nested


def nonify(element: Any) -> Any:
    """A placeholder with the structure of ``element`` and no data.

    Lists and tuples keep their type and length with every item replaced recursively, numpy arrays
    become NaN arrays of the same shape (floating dtype kept, else float64), anything else becomes
    ``None``.

    Raises:
        ValueError: If ``element`` contains a dict.

    Examples:
        >>> nonify([(1, 2, 3), (1, 2, 4, 5, [-1, -2])])
        [(None, None, None), (None, None, None, None, [None, None])]
    """
    if isinstance(element, dict):
        raise ValueError(f"nonify: element must not contain dicts, got {element!r}")
    if isinstance(element, (list, tuple)):
        return type(element)(nonify(e) for e in element)
    if isinstance(element, np.ndarray):
        dtype = element.dtype if np.issubdtype(element.dtype, np.floating) else np.float64
        return np.full(element.shape, np.nan, dtype=dtype)
    return None


def update_dict_of_lists(dic: dict[str, list], item: dict[str, Any], index: int = 0) -> dict[str, list]:
    """Append one step ``item`` to the per-key lists of ``dic``, in place.

    A key first seen at step ``index`` gets ``index`` placeholders (:func:`nonify` of its value)
    before its value. Keys missing from ``item`` are not padded here; see
    :func:`complete_dict_of_list`. One level of keys only (flatten nested items first).

    Args:
        dic: ``{key: list of per-step values}``, modified in place.
        item: ``{key: value}`` for the current step.
        index: The current step (the number of steps already in ``dic``).

    Returns:
        ``dic``.

    Examples:
        >>> dic = {"a": [1, 2, 3], "c": [[-1, -2], [-3, -4]]}
        >>> update_dict_of_lists(dic, {"a": 4, "b": [1, 2]}, index=3)
        {'a': [1, 2, 3, 4], 'c': [[-1, -2], [-3, -4]], 'b': [[None, None], [None, None], [None, None], [1, 2]]}
    """
    if index < 0:
        raise ValueError(f"update_dict_of_lists: index must be >= 0, got {index}")
    for key, value in item.items():
        if key not in dic:
            # One placeholder object per step, so later in-place edits of one step stay local.
            dic[key] = [nonify(value) for _ in range(index)]
        dic[key].append(value)
    return dic


def complete_dict_of_list(dic: dict[str, list], length: int) -> dict[str, list]:
    """Pad every list in ``dic`` to ``length`` with placeholders shaped like its last value, in place.

    Args:
        dic: ``{key: list of per-step values}``.
        length: Target number of steps; longer lists are left as they are.

    Returns:
        ``dic``.

    Raises:
        ValueError: If ``dic`` is not a dict or a value is not a list.

    Examples:
        >>> dic = {"a": [1, 2, 3, 4], "c": [[-1, -2], [-3, -4]]}
        >>> complete_dict_of_list(dic, 4)
        {'a': [1, 2, 3, 4], 'c': [[-1, -2], [-3, -4], [None, None], [None, None]]}
    """
    if not isinstance(dic, dict):
        raise ValueError(f"complete_dict_of_list: dic must be a dict, got {type(dic).__name__}")
    for key, values in dic.items():
        if not isinstance(values, list):
            raise ValueError(f"complete_dict_of_list: dic[{key!r}] must be a list, got {type(values).__name__}")
        last = values[-1] if values else None
        values.extend(nonify(last) for _ in range(length - len(values)))
    return dic


def convert_time_to_batch_major(episode: dict[str, Any]) -> dict[str, np.ndarray]:
    """Swap the time and batch dims of every entry: ``[T, B, ...]`` to float32 ``[B, T, ...]``.

    The result owns its memory (a copy), so it can outlive the buffers it came from.

    Raises:
        ValueError: If an entry has fewer than two dims.

    Examples:
        >>> out = convert_time_to_batch_major({"key1": [[[1], [2]], [[3], [4]], [[5], [6]]]})
        >>> out["key1"][:, :, 0]
        array([[1., 3., 5.],
               [2., 4., 6.]], dtype=float32)
    """
    batch_major = {}
    for key, value in episode.items():
        array = np.array(value, dtype=np.float32)
        if array.ndim < 2:
            raise ValueError(
                f"convert_time_to_batch_major: episode[{key!r}] has shape {array.shape}; needs [T, B, ...]"
            )
        batch_major[key] = np.ascontiguousarray(array.swapaxes(0, 1))
    return batch_major


def extract_keywise(dic: dict[str, dict], key: Any) -> dict[str, Any]:
    """Pick ``key`` from each first-level entry: ``{name: dic[name][key]}``.

    Examples:
        >>> dic = {"agent1": {"a": [1, 2], "b": {"c": 2}}, "agent2": {"a": [3, 4], "b": {"c": 9}}}
        >>> extract_keywise(dic, "a")
        {'agent1': [1, 2], 'agent2': [3, 4]}
    """
    return {name: entry[key] for name, entry in dic.items()}


def dict_of_lists_to_list_of_dicts(dic: dict[str, Any], num: int) -> list[dict[str, Any]]:
    """Split ``{key: per-worker values}`` into ``num`` dicts ``{key: value of worker i}``.

    Used to hand each of ``num`` workers its own actions. One level of keys only.

    Raises:
        ValueError: If ``num`` is negative or larger than some entry.

    Examples:
        >>> dict_of_lists_to_list_of_dicts({"a1": ([1, 2], [3, 4]), "a2": ([9], [8])}, 2)
        [{'a1': [1, 2], 'a2': [9]}, {'a1': [3, 4], 'a2': [8]}]
    """
    if num < 0:
        raise ValueError(f"dict_of_lists_to_list_of_dicts: num must be >= 0, got {num}")
    for key, values in dic.items():
        if len(values) < num:
            raise ValueError(f"dict_of_lists_to_list_of_dicts: num={num} but dic[{key!r}] has {len(values)} entries")
    return [{key: values[i] for key, values in dic.items()} for i in range(num)]


def list_of_dicts_to_flattened_dict_of_lists(List: list[dict] | dict, length: int) -> dict[str, list]:
    """Collect per-step nested dicts into ``{path: list over steps}``, every list ``length`` long.

    Steps that lack a key get placeholders (:func:`nonify`), both before the key first appears and
    after it stops. A dict input is assumed to be converted already and returned as it is.

    Args:
        List: One (nested) dict per step (argument name as in digideep).
        length: Number of steps in the result.

    Returns:
        The flattened dict of lists.

    Examples:
        >>> steps = [{"a": {"f": [1, 2]}, "info": [10, 20]}, {"a": {"f": [3, 4]}, "step": [80, 90]}]
        >>> list_of_dicts_to_flattened_dict_of_lists(steps, 2)
        {'/a/f': [[1, 2], [3, 4]], '/info': [[10, 20], [None, None]], '/step': [[None, None], [80, 90]]}
    """
    if isinstance(List, dict):
        return List
    collected: dict[str, list] = {}
    for index, step in enumerate(List):
        update_dict_of_lists(collected, flatten_dict(step), index=index)
    # Padding happens only after all steps: a key may first appear at any step.
    return complete_dict_of_list(collected, length)


def _is_struct(x: Any) -> bool:
    return isinstance(x, NamedTuple) or (isinstance(x, tuple) and hasattr(type(x), "_fields"))


def nat_to_flat_dict(nat: Any, prefix: str = "") -> dict[str, Any]:
    """View a (nested) namedarraytuple as ``{'/field/subfield': leaf}``, without copying.

    Leaves are the very array/tensor objects of ``nat``, so writes through the dict land in the
    buffer. ``None`` fields are left out. Plain namedtuples nest the same way.

    Args:
        nat: A namedarraytuple or namedtuple (either form), e.g. a ``[T, B]`` sample buffer.
        prefix: Path under which to place the fields, e.g. ``'/agents/a'``.

    Returns:
        The flat dict, in field order.

    Raises:
        ValueError: If ``nat`` is not a namedtuple-like structure.

    Examples:
        >>> from lightning_rl.data import namedarraytuple
        >>> Step = namedarraytuple("Step", ["obs", "info"])
        >>> Info = namedarraytuple("Info", ["truncated"])
        >>> sorted(nat_to_flat_dict(Step(np.zeros(2), Info(np.zeros(2)))))
        ['/info/truncated', '/obs']
    """
    if not _is_struct(nat):
        raise ValueError(f"nat_to_flat_dict: nat must be a namedtuple or namedarraytuple, got {type(nat).__name__}")
    flat: dict[str, Any] = {}
    for name, value in zip(nat._fields, tuple.__iter__(nat), strict=True):
        path = join_keys(prefix, name)
        if value is None:
            continue
        if _is_struct(value):
            flat.update(nat_to_flat_dict(value, prefix=path))
        else:
            flat[path] = value
    return flat


def _rebuild(like: Any, values: list[Any]) -> Any:
    if isinstance(like, NamedTuple):
        return like._new(values)
    return type(like)._make(values)


def flat_dict_to_nat(flat: dict[str, Any], like: Any, prefix: str = "") -> Any:
    """Rebuild the structure of ``like`` from a flat dict (inverse of :func:`nat_to_flat_dict`).

    Args:
        flat: ``{'/field/subfield': leaf}``; keys outside ``prefix`` are ignored.
        like: An instance with the wanted (nested) structure; its leaf values are not used, and
            its ``None`` fields stay ``None``.
        prefix: The prefix used when flattening.

    Returns:
        An instance of ``like``'s type(s) holding the leaves of ``flat`` (not copies).

    Raises:
        ValueError: If a non-None field of ``like`` has no key, or a key under ``prefix`` matches
            no field.
    """
    if not _is_struct(like):
        raise ValueError(f"flat_dict_to_nat: like must be a namedtuple or namedarraytuple, got {type(like).__name__}")
    used: set[str] = set()

    def build(node: Any, path: str) -> Any:
        values: list[Any] = []
        for name, value in zip(node._fields, tuple.__iter__(node), strict=True):
            key = join_keys(path, name)
            if value is None:
                values.append(None)
            elif _is_struct(value):
                values.append(build(value, key))
            elif key in flat:
                values.append(flat[key])
                used.add(key)
            else:
                raise ValueError(f"flat_dict_to_nat: flat has no key {key!r} for field {name!r}")
        return _rebuild(node, values)

    result = build(like, prefix)
    root = prefix.rstrip("/") + "/"
    unknown = sorted(k for k in flat if k.startswith(root) and k not in used)
    if unknown:
        raise ValueError(f"flat_dict_to_nat: keys {unknown} match no field of {type(like).__name__}")
    return result
