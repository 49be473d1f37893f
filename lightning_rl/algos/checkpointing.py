"""What an :class:`~lightning_rl.algos.base.RLModule` adds to a Lightning checkpoint, as data only.

Under the ``"lightning_rl"`` key: the format version, the training counters, every RNG state
(python, numpy, torch, CUDA, the minibatch shuffle), a description of the env (id, number of
envs, spaces, algorithm) and the sampler's state (:mod:`lightning_rl.safe_state`). All of it is
tensors and plain containers, so checkpoints load with ``torch.load(weights_only=True)`` and
loading never unpickles anything.

Resuming checks the description against the module being resumed first and refuses a
checkpoint of another env id, env count, space or algorithm with a ``ValueError`` naming the
fields. The files themselves are written by :class:`~lightning_rl.algos.checkpoint_io.RLCheckpointIO`.

A run that stops between two epoch ends (its env-step budget, Ctrl-C, a scheduler's signal) saves
its checkpoints at the end of its last batch, before Lightning's end-of-epoch hooks
(:func:`save_before_stopping`): the checkpoint then holds the state in the middle of an epoch, and
a resumed run finishes that epoch where the uninterrupted run does.
"""

from __future__ import annotations

import os
import random
from typing import Any

import numpy as np
import torch
from pytorch_lightning.utilities import rank_zero_warn

from lightning_rl.algos.checkpoint_io import RLCheckpointIO
from lightning_rl.checkpoint_format import (
    CHECKPOINT_KEY,
    FORMAT_VERSION,
    REPLAY_KEY,
    migrate_config,
    migrate_hyperparameters,
)
from lightning_rl.data.arrays import non_finite_keys
from lightning_rl.safe_state import decode, encode, load_data

__all__ = [
    "CHECKPOINT_KEY", "FORMAT_VERSION", "REPLAY_KEY", "RLCheckpointIO", "check_compatible", "check_resume",
    "describe_run", "load_data", "load_module_state", "migrate_config", "migrate_hyperparameters", "module_state",
    "restore_module_state", "save_before_stopping", "save_module_state",
]

def describe_run(module: Any, env_spaces: Any = None) -> dict[str, Any]:
    """What a checkpoint must match to be resumed by ``module``: algorithm, env id, env count and
    (when known) the spaces, as strings and ints."""
    sampler = module.sampler
    env_id = sampler.env_id if isinstance(sampler.env_id, str) else getattr(sampler.env_id, "__qualname__", "")
    spaces = env_spaces if env_spaces is not None else getattr(module.agent, "env_spaces", None)
    return {
        "algorithm": f"{type(module).__module__}.{type(module).__qualname__}",
        "env_id": env_id,
        "batch_B": int(sampler.batch_spec.B),
        "observation_space": None if spaces is None else repr(spaces.observation),
        "action_space": None if spaces is None else repr(spaces.action),
    }


def check_compatible(stored: dict[str, Any], live: dict[str, Any], source: str = "checkpoint") -> None:
    """Raise ``ValueError`` naming every field where ``stored`` (a checkpoint's
    :func:`describe_run`) and ``live`` differ; fields unknown on either side are skipped."""
    diffs = [
        f"{key}: {source} has {stored[key]!r}, this run has {live[key]!r}"
        for key in live
        if stored.get(key) is not None and live[key] is not None and stored[key] != live[key]
    ]
    if diffs:
        raise ValueError("cannot resume: the checkpoint was written for another run\n  " + "\n  ".join(diffs))


def check_resume(module: Any, ckpt_path: Any) -> None:
    """Refuse to resume ``module`` from ``ckpt_path`` when the checkpoint was written for another
    run (:func:`check_compatible`), before any env worker starts: the spaces come from the agent
    or, before ``setup``, from one env built in this process.

    Raises:
        ValueError: Naming the fields that differ, or the file if it needs unpickling.
    """
    if not ckpt_path or not os.path.isfile(os.fspath(ckpt_path)):
        return
    run = (load_data(ckpt_path).get(CHECKPOINT_KEY) or {}).get("run")
    if run is None:  # lightning_rl 0.1 recorded no description
        return
    spaces = module.agent.env_spaces if module.agent.initialized else _probe_spaces(module.sampler)
    check_compatible(run, describe_run(module, spaces))


def module_state(module: Any) -> dict[str, Any]:
    """The ``"lightning_rl"`` entry of a checkpoint of ``module``."""
    state: dict[str, Any] = {
        "format": FORMAT_VERSION,
        "run": describe_run(module),
        "train_state": module.train_state.state_dict(),
        # Counters (and an off-policy module's replay) are per rank; a resume on another world
        # size says what that means (restore_module_state).
        "world_size": _world_size(module),
        "rng": encode({
            "minibatch_generator": module.minibatch_generator.bit_generator.state,
            "python": random.getstate(),
            "numpy": np.random.get_state(),
        }, "rng"),
        "torch_rng": torch.get_rng_state(),
        "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }
    if getattr(module, "run_config", None):
        # The model's config ({class_path, init_args}, plain data): play <ckpt> and
        # load_from_checkpoint(path) rebuild the module from it.
        state["config"] = module.run_config
    runner = _async_runner(module)
    if runner is not None:
        # The envs live in the sampler process and start new episodes on resume: the
        # counters are stored, the envs' state is not.
        state["async_sampling"] = runner.state_dict()
        state["sampler"] = {"env_steps": state["async_sampling"]["sampler_env_steps"]}
    elif module.checkpoint_sampler_state and module._sampler_ready:
        # Samplers return their state as data already (see SerialSampler.state_dict).
        state["sampler"] = module.sampler.state_dict()
    return state


def _async_runner(module: Any) -> Any:
    setup = getattr(module, "replay_setup", None)
    runner = None if setup is None else setup.async_runner
    return None if runner is None or runner.closed else runner


def save_module_state(module: Any, checkpoint: dict[str, Any]) -> None:
    """``on_save_checkpoint``: add :func:`module_state` and, for :class:`RLCheckpointIO` to move into
    the side file, the replay's state.

    Raises:
        FloatingPointError: If a weight is NaN or infinite (no checkpoint holds one).
    """
    bad = non_finite_keys(checkpoint.get("state_dict", {}))
    if bad:
        raise FloatingPointError(f"refusing to write a checkpoint with non-finite weights: {bad[:5]}")
    runner = _async_runner(module)
    if runner is not None:
        # Async sampling: the sampler stays between two batches until training continues (the
        # dataset's next item), so the replay written below and the counters agree.
        runner.pause()
    checkpoint[CHECKPOINT_KEY] = module_state(module)
    setup = module.replay_setup
    # A weights-only save (best.ckpt: no optimizer state) is for playing and evaluating, not resuming.
    resumable = "optimizer_states" in checkpoint
    if resumable and module.replay is not None and setup is not None and setup.checkpoint_replay:
        checkpoint[REPLAY_KEY] = module.replay.state_dict()


def load_module_state(module: Any, checkpoint: dict[str, Any]) -> None:
    """``on_load_checkpoint``: restore :func:`restore_module_state` and the replay; when the envs
    start new episodes instead of continuing, the replay's newest row becomes an episode boundary
    (docs/concepts/checkpoints.md, 'Which envs continue their episodes').

    Raises:
        ValueError: If the checkpoint is not lightning_rl's, or is of another run.
    """
    if CHECKPOINT_KEY not in checkpoint:
        raise ValueError("checkpoint was not written by a lightning_rl module (no 'lightning_rl' entry)")
    envs_continue = restore_module_state(module, checkpoint[CHECKPOINT_KEY])
    runner = _async_runner(module)
    if runner is not None:
        train_state = module.train_state
        runner.load_state_dict(checkpoint[CHECKPOINT_KEY].get("async_sampling") or {
            "sampler_itr": train_state.itr, "sampler_env_steps": train_state.env_steps})
    if REPLAY_KEY in checkpoint and module.replay is not None:
        module.replay.load_state_dict(checkpoint[REPLAY_KEY])
        if not envs_continue:
            module.replay.mark_boundary()


def save_before_stopping(trainer: Any, module: Any) -> None:
    """Save the checkpoints of a run that stops in the middle of an epoch, at the end of its last batch.

    Lightning ends the epoch of a stopped run early and runs the end-of-epoch hooks there: episode
    statistics close their epoch, ``EarlyStopping`` compares, ``ModelCheckpoint`` saves and the
    loops record a finished epoch. A checkpoint written then would resume on another epoch grid
    than the uninterrupted run's, with state that run never had. So each ``ModelCheckpoint`` saves
    now, through its own end-of-epoch hook (the files it would write at the epoch's end: ``last``,
    and its periodic ones when due), and skips the early epoch end, which comes at the same global
    step. A stop at an epoch's end (``log_interval_steps`` reached) is left to Lightning.

    Args:
        trainer: The Trainer, with ``should_stop`` set.
        module: The :class:`~lightning_rl.algos.base.RLModule` (its iteration count and epoch size).
    """
    if module.train_state.itr % module.iterations_per_epoch == 0:
        return
    for callback in trainer.checkpoint_callbacks:
        callback.on_train_epoch_end(trainer, module)


def _world_size(module: Any) -> int:
    return int(module.trainer.world_size) if module._trainer is not None else 1


def _warn_world_size_change(module: Any, ours: dict[str, Any]) -> None:
    """Say what resuming on another number of processes means (docs/guides/scaling.md, "Resuming on
    another world size")."""
    saved, now, env_steps = ours.get("world_size"), _world_size(module), int(module.train_state.env_steps)
    if saved is None or int(saved) == now:
        return
    replay = " and rank 0's replay" if getattr(module, "replay", None) is not None else ""
    rank_zero_warn(
        f"this checkpoint was written by {saved} processes and resumes on {now}: every rank continues from "
        f"rank 0's counters{replay}, which are per rank, so the run counts {env_steps * now} env steps "
        f"so far (it had collected {env_steps * int(saved)}) and the budget and schedules continue from there"
    )


def restore_module_state(module: Any, ours: dict[str, Any]) -> bool:
    """Restore :func:`module_state` into ``module`` (after checking it matches, see
    :func:`check_compatible`).

    A checkpoint of format 1 (lightning_rl 0.1) keeps its weights, optimizer and counters; its
    pickled part (RNG states, sampler and env state) is not read, with a warning, and the envs
    start new episodes.

    Returns:
        Whether the envs continue where they were saved (False: they start new episodes, and an
        off-policy module must mark the boundary in its replay).
    """
    if "pickled" in ours:
        rank_zero_warn(
            "this checkpoint was written by lightning_rl 0.1, which pickled its RNG and env state; "
            "lightning_rl never unpickles checkpoint contents, so weights, optimizer state and counters "
            "are restored and the envs start new episodes (save it again to get the current format)"
        )
        _initialize_agent(module, None)
        module.train_state.load_state_dict(ours["train_state"])
        return False
    if ours.get("format") != FORMAT_VERSION:
        raise ValueError(
            f"checkpoint format {ours.get('format')!r} is not one this lightning_rl reads "
            f"(format {FORMAT_VERSION}); upgrade lightning_rl"
        )
    check_compatible(ours["run"], describe_run(module))
    _initialize_agent(module, ours["run"])
    module.train_state.load_state_dict(ours["train_state"])
    trainer = module._trainer
    if trainer is not None and trainer.state.fn in ("validate", "test"):
        # An evaluation takes the weights; its eval envs start from the seed, not from where
        # training left its own (which may be other envs, in other numbers).
        return False
    _warn_world_size_change(module, ours)
    rng = decode(ours["rng"])
    module.minibatch_generator.bit_generator.state = rng["minibatch_generator"]
    random.setstate(_as_python_random_state(rng["python"]))
    np.random.set_state(rng["numpy"])
    torch.set_rng_state(ours["torch_rng"])
    if ours["cuda_rng"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(ours["cuda_rng"])
    if module._sampler_ready and "sampler" in ours:
        module.sampler.load_state_dict(ours["sampler"])
    sampler_state = ours.get("sampler", {})
    # The serial and vector samplers store their envs under "envs", the parallel ones per worker.
    return "envs" in sampler_state or "workers" in sampler_state


def _probe_spaces(sampler: Any) -> Any:
    """The spaces of one env built from the sampler's arguments, in this process."""
    from lightning_rl.envs.make import make_env

    env = make_env(sampler.env_id, **sampler.env_kwargs)
    try:
        return env.spaces
    finally:
        env.close()


def _as_python_random_state(state: Any) -> tuple[Any, ...]:
    version, internal, gauss = state
    return int(version), tuple(int(x) for x in internal), gauss


def _initialize_agent(module: Any, run: dict[str, Any] | None) -> None:
    """``load_from_checkpoint`` skips ``setup()``: build the agent's models from the spaces of an
    env made from the sampler's arguments (in this process; no workers start)."""
    agent = module.agent
    if agent.initialized:
        return
    sampler = module.sampler
    spaces = _probe_spaces(sampler)
    if run is not None:
        check_compatible(run, describe_run(module, spaces))
    B = sampler.batch_spec.B
    # Agents that pair envs (the alternating ones) need the env ranks of rank 0.
    agent.initialize(spaces, global_B=B, env_ranks=list(range(B)))
