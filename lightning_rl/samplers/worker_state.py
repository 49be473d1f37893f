"""The state a parallel sampler's worker holds, as checkpoint data, and its restoration.

A worker owns a slice of the training envs, their collector (observations, previous actions,
unfinished episodes, wait-reset flags), its eval envs, its own numpy/python/torch generators and,
in the CPU sampler, an agent copy that acts (its recurrent state). :func:`worker_state` returns
all of it as plain data (:mod:`lightning_rl.safe_state`), or the names of what cannot be stored;
:func:`load_worker_state` puts it back into a worker built from the same sampler arguments. The
main process moves these between checkpoints and workers
(:meth:`~lightning_rl.samplers.worker.ParallelSamplerBase.state_dict`), so a resumed run continues
every episode exactly, as the serial sampler's does.
"""

from __future__ import annotations

import io
import random
from typing import Any

import numpy as np
import torch

from lightning_rl.safe_state import decode, encode, env_state, load_env_state

__all__ = ["load_worker_state", "state_from_bytes", "state_to_bytes", "worker_state"]


def worker_state(worker: Any) -> dict[str, Any]:
    """``worker``'s state as data: ``{"envs", "collector", "eval_envs", "rng", "torch_rng", "agent"}``,
    or ``{"missing": [...]}`` naming the env attributes that cannot be stored."""
    envs, missing = [], []
    for env in worker.collector.envs:
        layers, env_missing = env_state(env.env)  # the env inside the worker's call-stamping wrapper
        envs.append(layers)
        missing.extend(env_missing)
    if missing:
        return {"missing": sorted(set(missing))}
    state: dict[str, Any] = {
        "envs": envs,
        "collector": encode(worker.collector.state(), "collector"),
        "rng": encode({"numpy": np.random.get_state(), "python": random.getstate()}, "rng"),
        "torch_rng": torch.get_rng_state(),
    }
    if worker.eval_collector is not None:
        eval_states = [env_state(env.env)[0] for env in worker.eval_collector.envs]
        if all(s is not None for s in eval_states):
            state["eval_envs"] = eval_states
    if worker.agent is not None:
        state["agent"] = encode(worker.agent.get_extra_state(), "agent")
    return state


def load_worker_state(worker: Any, state: dict[str, Any]) -> None:
    """Restore :func:`worker_state` into ``worker``.

    Raises:
        ValueError: If the state is for another number of envs or another wrapper chain.
    """
    envs = worker.collector.envs
    if len(state["envs"]) != len(envs):
        raise ValueError(f"the stored worker state holds {len(state['envs'])} envs, this worker has {len(envs)}")
    for env, layers in zip(envs, state["envs"], strict=True):
        load_env_state(env.env, layers)
    worker.collector.load_state(decode(state["collector"]))
    if state.get("eval_envs") is not None and worker.eval_collector is not None:
        for env, layers in zip(worker.eval_collector.envs, state["eval_envs"], strict=False):
            load_env_state(env.env, layers)
    rng = decode(state["rng"])
    np.random.set_state(rng["numpy"])
    version, internal, gauss = rng["python"]
    random.setstate((int(version), tuple(int(x) for x in internal), gauss))
    torch.set_rng_state(state["torch_rng"])
    if state.get("agent") is not None and worker.agent is not None:
        worker.agent.set_extra_state(decode(state["agent"]))


def state_to_bytes(state: dict[str, Any]) -> bytes:
    """:func:`worker_state` as ``torch.save`` bytes, to cross a process boundary as a copy (a queue's
    pickler would send tensors as shared-memory handles, readable only while the sender lives)."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return buffer.getvalue()


def state_from_bytes(data: bytes) -> dict[str, Any]:
    """:func:`state_to_bytes` read back, with ``torch.load``'s ``weights_only`` loader (a worker's
    state is checkpoint data)."""
    return torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
