"""Checkpoint state as data only: plain containers and tensors that ``torch.load(weights_only=True)`` reads.

A checkpoint must never need unpickling to resume (an unpickled file can run any code). Everything
lightning_rl puts in a checkpoint besides the weights (RNG states, the serial sampler's envs, the
collector's buffers) therefore goes through :func:`encode`, which turns numpy arrays, numpy
generators and deques into tagged dicts of tensors and ints, and refuses anything else;
:func:`decode` turns them back. Nothing in a decoded state names a class to build.

Envs hold their state in attributes spread over a wrapper chain. :func:`env_state` walks the
chain (``env.env.env...``) and keeps, per layer, every attribute :func:`encode` can store, plus
the parts with a known recipe: the RNG of each action/observation space, MuJoCo's full
integration state (``mj_getState``) and objects with ``get_state``/``set_state`` (such as
:class:`~lightning_rl.envs.AtariEnv`, whose emulator state is bytes). A vector env holding its
copies in a list (gymnasium's ``SyncVectorEnv``) stores each copy's chain the same way, beside
its own arrays (autoreset flags, last observations). Configuration that is rebuilt
with the env (spaces' bounds, ``EnvSpec``, models, renderers, callables) is skipped. Any other
attribute makes the state incomplete; :func:`env_state` then says which, and the sampler stores
no env state at all, so a resumed run restarts its envs at an explicit episode boundary rather
than continuing from a half-restored env.
"""

from __future__ import annotations

import collections
import functools
import os
import pickle
import types
import zipfile
from typing import Any

import numpy as np
import torch

__all__ = ["UnsafeStateError", "copy_into", "decode", "encode", "env_state", "load_data", "load_env_state"]

# numpy bit generators a stored state may name; anything else is refused on decode.
_BIT_GENERATORS = {"PCG64": np.random.PCG64, "PCG64DXSM": np.random.PCG64DXSM, "MT19937": np.random.MT19937,
                   "Philox": np.random.Philox, "SFC64": np.random.SFC64}
_TAG = "__lightning_rl__"
# Constructor arguments that gymnasium keeps for copying an env: configuration, not state.
_CONFIG_ATTRS = {"env", "_saved_kwargs", "_ezpickle_args", "_ezpickle_kwargs", "spec", "_cached_spec", "metadata",
                 "_metadata", "render_mode", "model", "mujoco_renderer", "_info_filter", "_kwargs", "_action_bounds"}


class UnsafeStateError(TypeError):
    """A value cannot be stored as plain data (see :func:`encode`)."""


def encode(value: Any, where: str = "state") -> Any:
    """``value`` as plain containers and tensors (``torch.load(weights_only=True)`` reads it).

    Handles None, bool, int, float, str, bytes, tensors, numpy arrays and scalars, numpy
    ``Generator``/``RandomState``, and tuples, lists, deques and str-keyed dicts of these.

    Args:
        value: What to store.
        where: Its name, for the error message.

    Raises:
        UnsafeStateError: Naming the first value (by path) that has another type.
    """
    if value is None or isinstance(value, (bool, int, float, str, torch.Tensor)) and not isinstance(value, np.generic):
        # (numpy's float64 is a float: it is stored tagged below, as every numpy scalar)
        return value
    if isinstance(value, bytes):
        return {_TAG: "bytes", "data": torch.frombuffer(bytearray(value), dtype=torch.uint8)}
    if isinstance(value, (np.ndarray, np.generic)):
        array = np.asarray(value)
        if array.dtype.kind not in "biuf":
            raise UnsafeStateError(f"{where}: numpy dtype {array.dtype} cannot be stored as data")
        return {_TAG: "ndarray", "data": torch.from_numpy(array.copy()), "scalar": isinstance(value, np.generic)}
    if isinstance(value, np.random.Generator):
        return {_TAG: "generator", "state": value.bit_generator.state}
    if isinstance(value, np.random.RandomState):
        return {_TAG: "random_state", "state": encode(value.get_state(legacy=False), where)}
    if isinstance(value, collections.deque):
        return {_TAG: "deque", "items": [encode(v, f"{where}[{i}]") for i, v in enumerate(value)],
                "maxlen": value.maxlen}
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        # Named tuples (namedarraytuples, EnvInfo) come back as plain dicts: see copy_into.
        items = {f: encode(v, f"{where}.{f}") for f, v in zip(value._fields, value, strict=True)}
        return {_TAG: "fields", "items": items}
    if isinstance(value, tuple):
        return tuple(encode(v, f"{where}[{i}]") for i, v in enumerate(value))
    if isinstance(value, list):
        return [encode(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        if _TAG in value:
            raise UnsafeStateError(f"{where}: the key {_TAG!r} is reserved")
        return {k: encode(v, f"{where}.{k}") for k, v in value.items()}
    raise UnsafeStateError(f"{where}: a {type(value).__module__}.{type(value).__qualname__} cannot be stored as data")


def decode(value: Any) -> Any:
    """The inverse of :func:`encode` (numpy values come back as numpy, generators as generators).

    Raises:
        ValueError: If a tagged entry is malformed or names an unknown bit generator.
    """
    if isinstance(value, tuple):
        return tuple(decode(v) for v in value)
    if isinstance(value, list):
        return [decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    tag = value.get(_TAG)
    if tag is None:
        return {k: decode(v) for k, v in value.items()}
    if tag == "bytes":
        return value["data"].numpy().tobytes()
    if tag == "ndarray":
        array = value["data"].numpy().copy()
        return array[()] if value["scalar"] else array
    if tag == "generator":
        return _generator(value["state"])
    if tag == "random_state":
        rs = np.random.RandomState()
        rs.set_state(decode(value["state"]))
        return rs
    if tag == "fields":
        return {k: decode(v) for k, v in value["items"].items()}
    if tag == "deque":
        return collections.deque((decode(v) for v in value["items"]), maxlen=value["maxlen"])
    raise ValueError(f"unknown stored value tag {tag!r}")


def copy_into(dst: Any, src: Any, where: str = "state") -> None:
    """Copy a decoded (named) tuple of arrays into the live one ``dst``, leaf by leaf, in place.

    Raises:
        ValueError: If the fields or shapes differ (names the leaf).
    """
    if hasattr(dst, "_fields"):
        if not isinstance(src, dict) or set(src) != set(dst._fields):
            raise ValueError(f"{where}: stored fields {sorted(src) if isinstance(src, dict) else src!r} "
                             f"differ from {sorted(dst._fields)}")
        for field in dst._fields:
            copy_into(getattr(dst, field), src[field], f"{where}.{field}")
    elif dst is None:
        if src is not None:
            raise ValueError(f"{where}: stored a value where this buffer has none")
    else:
        src = np.asarray(src)
        if src.shape != np.shape(dst):
            raise ValueError(f"{where}: stored shape {src.shape} differs from {np.shape(dst)}")
        dst[...] = src


def _generator(state: dict[str, Any]) -> np.random.Generator:
    name = state.get("bit_generator") if isinstance(state, dict) else None
    if name not in _BIT_GENERATORS:
        raise ValueError(f"stored generator names an unknown bit generator {name!r}")
    bit_generator = _BIT_GENERATORS[name]()
    bit_generator.state = state
    return np.random.Generator(bit_generator)


def _layers(env: Any) -> list[Any]:
    """The wrapper chain, outermost first, following ``.env``."""
    layers, seen = [env], {id(env)}
    while isinstance(getattr(layers[-1], "__dict__", None), dict):
        inner = vars(layers[-1]).get("env")
        if inner is None or id(inner) in seen or not hasattr(inner, "step"):
            break
        layers.append(inner)
        seen.add(id(inner))
    return layers


def _is_config(value: Any) -> bool:
    """Values rebuilt with the env: callables, classes, modules, gymnasium's autoreset modes,
    objects of the MuJoCo and gymnasium types that hold configuration (models, renderers, specs),
    and lists of these (a vector env's env factories)."""
    from gymnasium.vector import AutoresetMode

    if isinstance(value, (type, types.ModuleType, types.FunctionType, types.MethodType, types.BuiltinFunctionType,
                          functools.partial, AutoresetMode)):
        return True
    if isinstance(value, (list, tuple)) and value and all(_is_config(v) for v in value):
        return True
    module = type(value).__module__ or ""
    return module.startswith(("mujoco", "gymnasium.envs.registration"))


def _sub_envs(layer: Any) -> list[Any] | None:
    """The copies of a vector env that keeps them as Python envs (``SyncVectorEnv.envs``), else None."""
    import gymnasium

    envs = vars(layer).get("envs")
    if isinstance(layer, gymnasium.vector.VectorEnv) and isinstance(envs, list) and envs:
        if all(hasattr(e, "step") and hasattr(e, "reset") for e in envs):
            return envs
    return None


def _space_rng(space: Any) -> Any:
    rng = getattr(space, "_np_random", None)
    if rng is None:
        rng = getattr(space, "_rng", None)
    return rng if isinstance(rng, np.random.Generator) else None


def env_state(env: Any) -> tuple[list[dict[str, Any]] | None, list[str]]:
    """The stored state of ``env`` and all its wrappers, or None when part of it cannot be stored.

    Returns:
        ``(layers, missing)``: per layer (outermost first) a dict with its class name and
        encoded attributes, and the ``"<Class>.<attribute>"`` names that could not be stored. When
        ``missing`` is not empty, ``layers`` is None: a partial env state would resume an env
        that is neither the saved one nor a fresh one.
    """
    layers: list[dict[str, Any]] = []
    missing: list[str] = []
    for layer in _layers(env):
        name = type(layer).__qualname__
        entry: dict[str, Any] = {"class": name, "attrs": {}, "spaces": {}}
        if hasattr(layer, "get_state") and hasattr(layer, "set_state"):
            try:
                entry["custom"] = encode(layer.get_state(), f"{name}.get_state()")
            except UnsafeStateError as e:
                missing.append(str(e))
            layers.append(entry)
            continue
        sub_envs = _sub_envs(layer)
        if sub_envs is not None:
            entry["sub_envs"] = []
            for i, sub in enumerate(sub_envs):
                sub_layers, sub_missing = env_state(sub)
                missing.extend(f"{name}.envs[{i}]: {m}" for m in sub_missing)
                entry["sub_envs"].append(sub_layers)
        for attr, value in vars(layer).items():
            if attr in _CONFIG_ATTRS or value is None and attr == "env" or sub_envs is not None and attr == "envs":
                continue
            if _is_space(value):
                rng = _space_rng(value)
                entry["spaces"][attr] = None if rng is None else encode(rng)
                continue
            if _is_mujoco_data(value):
                entry["mujoco"] = encode(_mujoco_state(layer))
                continue
            try:
                entry["attrs"][attr] = encode(value, f"{name}.{attr}")
            except UnsafeStateError:
                if not _is_config(value):
                    missing.append(f"{name}.{attr} ({type(value).__qualname__})")
        layers.append(entry)
    return (None if missing else layers), missing


def load_env_state(env: Any, layers: list[dict[str, Any]]) -> None:
    """Restore :func:`env_state` into ``env``, an env built from the same id and arguments.

    Only attributes the live env (or its class) already has are set, and only to plain data.

    Raises:
        ValueError: If the wrapper chain differs from the stored one (names the layer).
    """
    live = _layers(env)
    if [type(x).__qualname__ for x in live] != [entry["class"] for entry in layers]:
        raise ValueError(
            "stored env state is for the wrapper chain "
            f"{[entry['class'] for entry in layers]}, this env has {[type(x).__qualname__ for x in live]}"
        )
    for layer, entry in zip(live, layers, strict=True):
        if "custom" in entry:
            layer.set_state(decode(entry["custom"]))
            continue
        if "sub_envs" in entry:
            sub_envs = _sub_envs(layer)
            if sub_envs is None or len(sub_envs) != len(entry["sub_envs"]):
                raise ValueError(
                    f"stored env state holds {len(entry['sub_envs'])} copies in {entry['class']}, this env has "
                    f"{0 if sub_envs is None else len(sub_envs)}"
                )
            for sub, sub_layers in zip(sub_envs, entry["sub_envs"], strict=True):
                load_env_state(sub, sub_layers)
        own = vars(layer)
        for attr, value in entry["attrs"].items():
            if attr not in own and not hasattr(type(layer), attr):
                raise ValueError(f"stored env state sets {entry['class']}.{attr}, which this env does not have")
            own[attr] = decode(value)
        for attr, rng in entry["spaces"].items():
            space = own.get(attr)
            if rng is not None and space is not None:
                _set_space_rng(space, decode(rng))
        if "mujoco" in entry:
            _set_mujoco_state(layer, decode(entry["mujoco"]))


def _is_space(value: Any) -> bool:
    import gymnasium

    from lightning_rl.spaces.base import Space

    return isinstance(value, (gymnasium.spaces.Space, Space))


def _set_space_rng(space: Any, rng: np.random.Generator) -> None:
    if hasattr(space, "_np_random"):
        space._np_random = rng
    else:
        space._rng = rng


def _is_mujoco_data(value: Any) -> bool:
    return type(value).__module__.startswith("mujoco") and type(value).__name__ == "MjData"


def _mujoco_state(layer: Any) -> np.ndarray:
    import mujoco

    spec = mujoco.mjtState.mjSTATE_INTEGRATION
    state = np.empty(mujoco.mj_stateSize(layer.model, spec))
    mujoco.mj_getState(layer.model, layer.data, state, spec)
    return state


def _set_mujoco_state(layer: Any, state: np.ndarray) -> None:
    import mujoco

    mujoco.mj_setState(layer.model, layer.data, state, mujoco.mjtState.mjSTATE_INTEGRATION)
    mujoco.mj_forward(layer.model, layer.data)


def load_data(path: str | os.PathLike[str], map_location: Any = "cpu") -> Any:
    """``torch.load(path, weights_only=True)``; a file holding anything but tensors and plain
    containers is refused with a ``ValueError`` naming it, and nothing in it runs."""
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except Exception as error:
        if os.path.isfile(path) and not zipfile.is_zipfile(path):
            # torch.save has written zip archives since torch 1.6; a file that fails to load and is
            # none is not a checkpoint (a text file, a truncated download, another tool's format).
            raise ValueError(
                f"{os.fspath(path)} is not a checkpoint (torch.save writes a zip archive; this file is none)"
            ) from None
        if not isinstance(error, pickle.UnpicklingError):
            raise
        raise ValueError(
            f"refusing to load {os.fspath(path)}: it holds Python objects that loading would have to "
            f"unpickle (running code the file names); lightning_rl reads checkpoints as data only. "
            f"Loader said: {str(error).splitlines()[0]}"
        ) from None
