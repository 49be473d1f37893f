"""What rows 1 and 2 share: a fit in one go against the same fit cut in two, its second half in a
new process, with every piece of state either side holds captured for comparison.

A *leg* is one ``Trainer.fit`` (:func:`fit_leg`). A :class:`Recorder` callback captures, from the
live objects and never from a checkpoint file, what the run holds:

* ``losses``: every term of every update's ``module.loss(...)`` (float64), and ``logged``: the
  ``train/*loss*`` metrics of each iteration;
* ``at_save[itr]``: the live state (:func:`live_state`) when a checkpoint is written after ``itr``
  sampler iterations; after a resume, ``at_load``: the module's, sampler's and replay's state
  (:func:`run_state`) as soon as the checkpoint restored it, and ``at_start``: the optimizers'
  (:func:`optim_state`) at ``on_train_start``; ``final``: the live state at ``on_train_end``;
* ``next_idxs``: the ``idxs`` of one replay batch drawn after everything else (off-policy).

:func:`resume_matches_uninterrupted_run` runs the legs and compares them. The resumed leg runs
as ``python -m tests.reliability.exact_resume <module:builder> ...`` and writes its report with
``torch.save``; reports hold tensors and plain containers only and are read back with
``weights_only=True``.
"""

from __future__ import annotations

import importlib
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import ModelCheckpoint

from tests.algos.test_dqn import assert_same
from tests.algos.test_on_policy import make_trainer

ROOT = Path(__file__).resolve().parents[2]
#: The seed the module is built with (its ``seed`` argument) in every leg.
SEED = 3
#: The global seed of the resumed process: another one, so nothing there may depend on it.
CHILD_GLOBAL_SEED = 1234
#: Train-state fields that count (``sampler_time`` is wall-clock seconds, not state).
COUNTERS = ("env_steps", "itr", "updates", "update_credit", "updates_at_sync")


def as_data(value: Any) -> Any:
    """``value`` with numpy arrays and scalars as tensors and tuples as lists (for ``torch.save``
    and ``weights_only=True`` loading)."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, np.ndarray):
        return torch.from_numpy(value.copy())
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {str(k): as_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [as_data(v) for v in value]
    return value


def rng_state(generator: Any) -> Any:
    """The bit-generator state of a numpy ``Generator`` (None for None)."""
    return None if generator is None else generator.bit_generator.state


def env_snapshot(env: Any) -> dict[str, Any]:
    """An env's state, read from its wrapper chain: physics, step counter, every RNG."""
    layers = [env]
    while getattr(layers[-1], "env", None) is not None:
        layers.append(layers[-1].env)
    inner = layers[-1]
    elapsed = [layer._elapsed_steps for layer in layers if hasattr(layer, "_elapsed_steps")]
    return {
        "physics": np.asarray(inner.state, dtype=np.float64),
        "elapsed_steps": elapsed[0],
        # Private attributes: reading the public ``np_random`` of an unseeded space would seed it.
        "np_random": rng_state(inner._np_random),
        "action_space_rng": rng_state(inner.action_space._np_random),
        "wrapper_action_space_rng": rng_state(env.action_space._rng),
        "wrapper": {k: getattr(env, k) for k in ("_next_seed", "_seed_pending")},
    }


def run_state(module: Any) -> dict[str, Any]:
    """What the module, its sampler and its replay hold now (everything a checkpoint restores
    before the optimizers), from the live objects."""
    collector = module.sampler.train_collector
    step_buffer = collector.step_buffer
    state: dict[str, Any] = {
        "python_rng": random.getstate(),
        "numpy_rng": np.random.get_state(),
        "torch_rng": torch.get_rng_state(),
        "minibatch_rng": rng_state(module.minibatch_generator),
        "train_state": {k: getattr(module.train_state, k) for k in COUNTERS},
        "sampler_env_steps": module.sampler.env_steps,
        "params": module.state_dict(),
        "envs": [env_snapshot(env) for env in collector.envs],
        "step_buffer": {f: np.array(v) for f, v in zip(step_buffer._fields, step_buffer, strict=True) if v is not None},
        "traj_infos": [dict(t) for t in collector.traj_infos],
    }
    agent = module.agent
    if hasattr(agent, "target_pairs"):
        state["targets"] = [target.state_dict() for target, _ in agent.target_pairs()]
    if hasattr(agent, "eps_sample"):
        state["epsilon"] = {"eps_sample": agent.eps_sample, "epsilon": agent.epsilon, "eps_itr": agent._eps_itr}
    if hasattr(module, "log_alpha"):
        state["log_alpha"] = module.log_alpha
    if module.replay is not None:
        replay = module.replay
        state["replay"] = replay.state_dict()
        state["replay_counters"] = {"cursor": replay.storage.cursor, "rows_written": replay.storage.rows_written,
                                    "full": replay.n_stored == replay.size, "beta": replay.beta}
    return as_data(state)  # copies: state dicts hold the live tensors


def optim_state(trainer: pl.Trainer, module: Any) -> dict[str, Any]:
    """The optimizers, learning rates, schedulers and ``global_step`` now."""
    optimizers = module.optimizers()
    optimizers = optimizers if isinstance(optimizers, list) else [optimizers]
    schedulers = module.lr_schedulers()
    schedulers = [] if schedulers is None else schedulers if isinstance(schedulers, list) else [schedulers]
    return as_data({
        "global_step": trainer.global_step,
        "optimizers": [o.state_dict() for o in optimizers],
        "lr": [[group["lr"] for group in o.param_groups] for o in optimizers],
        "lr_schedulers": [s.state_dict() for s in schedulers],
    })


def live_state(trainer: pl.Trainer, module: Any) -> dict[str, Any]:
    """:func:`run_state` and :func:`optim_state` together."""
    return {**run_state(module), **optim_state(trainer, module)}


class Recorder(pl.Callback):
    """Losses per update and the live state at each save, right after a checkpoint is restored
    (``at_load``: before the optimizers are; ``at_start``: the optimizers, at ``on_train_start``)
    and at the end.

    ``at_start`` holds no RNG state: Lightning creates the dataloader iterator (one draw from the
    torch generator) before ``on_train_start``, and an uninterrupted run makes that draw after the
    save, at the start of the next epoch.
    """

    def __init__(self, next_batch_size: int = 0) -> None:
        self.next_batch_size = next_batch_size
        self.losses: list[dict[str, float]] = []
        self.logged: list[dict[str, float]] = []
        self.at_save: dict[int, dict[str, Any]] = {}
        self.at_load: dict[str, Any] = {}
        self.at_start: dict[str, Any] = {}
        self.final: dict[str, Any] = {}
        self.next_idxs: torch.Tensor | None = None

    def setup(self, trainer: pl.Trainer, pl_module: Any, stage: str) -> None:
        loss = pl_module.loss

        def recording_loss(*args: Any, **kwargs: Any) -> dict[str, torch.Tensor]:
            terms = loss(*args, **kwargs)
            self.losses.append({k: float(v.detach().double()) for k, v in terms.items() if v.ndim == 0})
            return terms

        pl_module.loss = recording_loss

    def on_load_checkpoint(self, trainer: pl.Trainer, pl_module: Any, checkpoint: dict[str, Any]) -> None:
        # Called after the module restored its part (weights, counters, RNG, envs, replay).
        self.at_load = run_state(pl_module)

    def on_train_start(self, trainer: pl.Trainer, pl_module: Any) -> None:
        self.at_start = {"train_state": run_state(pl_module)["train_state"], **optim_state(trainer, pl_module)}

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        metrics = trainer.callback_metrics
        self.logged.append({k: float(v) for k, v in sorted(metrics.items()) if k.startswith("train/") and "loss" in k})
        # Nothing in training draws from the action spaces (agents draw from torch), and
        # Pendulum's np_random only at a reset: one draw each per iteration, as a wrapper or a
        # random agent would, so that a resume that did not restore them shows.
        for env in pl_module.sampler.train_collector.envs:
            env.action_space.sample()
            env.env.unwrapped.action_space.sample()
            env.env.unwrapped.np_random.random()

    def on_save_checkpoint(self, trainer: pl.Trainer, pl_module: Any, checkpoint: dict[str, Any]) -> None:
        # save_last and the periodic checkpoint of one iteration: the state is taken once.
        itr = pl_module.train_state.itr
        if itr not in self.at_save:
            self.at_save[itr] = live_state(trainer, pl_module)

    def on_train_end(self, trainer: pl.Trainer, pl_module: Any) -> None:
        self.final = live_state(trainer, pl_module)
        if self.next_batch_size:  # after the capture: drawing advances the replay's generator
            self.next_idxs = pl_module.replay.sample_batch(self.next_batch_size).idxs.clone()

    def report(self) -> dict[str, Any]:
        return as_data({
            "losses": self.losses, "logged": self.logged, "at_save": {str(k): v for k, v in self.at_save.items()},
            "at_load": self.at_load, "at_start": self.at_start, "final": self.final, "next_idxs": self.next_idxs,
        })


def load_builder(path: str) -> Callable[[], Any]:
    """``"package.module:function"`` to the function."""
    module_name, name = path.split(":")
    return getattr(importlib.import_module(module_name), name)


def fit_leg(
    builder: str, max_epochs: int, dirpath: Path, ckpt_path: Path | None = None, global_seed: int = SEED,
    next_batch_size: int = 0,
) -> dict[str, Any]:
    """One ``fit`` of ``builder()``'s module (an epoch is one sampler iteration), checkpointing
    every epoch into ``dirpath`` (``save_last``); the :class:`Recorder`'s report."""
    pl.seed_everything(global_seed)
    module = load_builder(builder)()
    recorder = Recorder(next_batch_size)
    checkpoint = ModelCheckpoint(dirpath=dirpath, save_last=True, save_top_k=-1)
    trainer = make_trainer(max_epochs=max_epochs, callbacks=[checkpoint, recorder], deterministic=True)
    trainer.fit(module, ckpt_path=None if ckpt_path is None else str(ckpt_path))
    return recorder.report()


def resume_in_new_process(
    builder: str, max_epochs: int, dirpath: Path, ckpt_path: Path, report_path: Path, next_batch_size: int = 0
) -> tuple[dict[str, Any], float]:
    """:func:`fit_leg` resumed from ``ckpt_path`` in a fresh Python process; its report and wall time."""
    cmd = [sys.executable, "-m", "tests.reliability.exact_resume", builder, str(max_epochs), str(dirpath),
           str(ckpt_path), str(report_path), str(next_batch_size)]
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    wall = time.monotonic() - start
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return torch.load(report_path, weights_only=True), wall


def keep_determinism_flag() -> Iterator[None]:
    """Undo what ``Trainer(deterministic=True)`` sets process-wide, for the tests that follow."""
    before = torch.are_deterministic_algorithms_enabled()
    cublas = os.environ.get("CUBLAS_WORKSPACE_CONFIG")
    yield
    torch.use_deterministic_algorithms(before)
    if cublas is None:
        os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)
    else:
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = cublas


def assert_losses_match(full: list[dict[str, float]], resumed: list[dict[str, float]], where: str) -> None:
    """Same terms, same count, each within 1e-8 (row 1's tolerance for logged losses)."""
    assert len(full) == len(resumed) > 0, f"{where}: {len(full)} != {len(resumed)}"
    for i, (a, b) in enumerate(zip(full, resumed, strict=True)):
        assert a.keys() == b.keys(), f"{where}[{i}]"
        for k in a:
            assert abs(a[k] - b[k]) <= 1e-8, f"{where}[{i}].{k}: {a[k]!r} != {b[k]!r}"


#: What :func:`optim_state` captures (restored after the module's own part).
OPTIM_KEYS = {"global_step", "optimizers", "lr", "lr_schedulers"}


def resume_matches_uninterrupted_run(
    tmp_path: Path, builder: str, n: int, next_batch_size: int = 0
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], float]:
    """Run ``builder()``'s module 2n iterations in one go (here), and n (here) then n more resumed
    in a new process; assert the resumed run matches the uninterrupted one everywhere.

    Returns:
        The reports of the full, first-half and resumed legs, and the resumed leg's wall time.
    """
    full = fit_leg(builder, 2 * n, tmp_path / "full", next_batch_size=next_batch_size)
    part = fit_leg(builder, n, tmp_path / "part")
    resumed, wall = resume_in_new_process(builder, 2 * n, tmp_path / "resumed", tmp_path / "part" / "last.ckpt",
                                          tmp_path / "resumed.pt", next_batch_size)
    # Two runs up to n are the same run (else nothing below could tell a resume bug from noise).
    saved = full["at_save"][str(n)]
    assert_same(part["at_save"][str(n)], saved, "first n iterations")
    # Right after the reload the new process holds what the uninterrupted run held at the save:
    # weights, counters, every RNG, the envs (and replay); once restored, the optimizers too.
    assert set(resumed["at_load"]) == set(saved) - OPTIM_KEYS
    assert set(resumed["at_start"]) == OPTIM_KEYS | {"train_state"}
    assert resumed["at_load"]["train_state"]["itr"] == n
    assert_same({k: saved[k] for k in resumed["at_load"]}, resumed["at_load"], "state after reload")
    assert_same({k: saved[k] for k in resumed["at_start"]}, resumed["at_start"], "optimizers after reload")
    # Then it does the same: the same losses update by update, the same logged losses, the same
    # end state and final checkpoint.
    before = len(part["losses"])
    assert len(full["losses"]) == before + len(resumed["losses"])
    assert_losses_match(full["losses"][before:], resumed["losses"], "update losses")
    assert any(resumed["logged"])
    assert_losses_match(full["logged"][n:], resumed["logged"], "logged losses")
    assert_same(full["final"], resumed["final"], "final state")
    assert_final_checkpoints_match(tmp_path / "full", tmp_path / "resumed", tmp_path / "part", "replay" in saved)
    return full, part, resumed, wall


#: ``lightning_rl`` entries that differ by construction: the pair token naming the replay side
#: file is random, ``sampler_time`` is wall-clock seconds.
VOLATILE = {"replay_file", "replay_pair", "sampler_time"}


def without_volatile(entry: Any) -> Any:
    if isinstance(entry, dict):
        return {k: without_volatile(v) for k, v in entry.items() if k not in VOLATILE}
    return entry


def assert_final_checkpoints_match(full_dir: Path, resumed_dir: Path, part_dir: Path, replay: bool) -> None:
    """The two runs' ``last.ckpt`` (read as data only): ``state_dict``, ``loops``,
    ``lr_schedulers``, optimizer states, step and epoch, and the ``lightning_rl`` entry (RNG,
    counters, env state) equal; so are their replay side files (off-policy, ``replay``).
    ``part_dir`` holds the checkpoint the resume started from."""
    full, resumed, part = (torch.load(d / "last.ckpt", weights_only=True) for d in (full_dir, resumed_dir, part_dir))
    # The envs' state is in it (else a resume starts new episodes and the replay marks a boundary).
    assert "envs" in part["lightning_rl"]["sampler"], part["lightning_rl"]["sampler"].get("env_state_missing")
    for key in ("state_dict", "loops", "lr_schedulers", "optimizer_states", "global_step", "epoch"):
        assert key in full, key
        assert_same(full[key], resumed[key], f"checkpoint[{key!r}]")
    assert_same(without_volatile(full["lightning_rl"]), without_volatile(resumed["lightning_rl"]), "lightning_rl")
    sides = [sorted(d.glob("last.ckpt.replay-*")) for d in (full_dir, resumed_dir)]
    assert len(sides[0]) == len(sides[1]) == int(replay)
    if replay:
        full_replay, resumed_replay = (torch.load(s[0], weights_only=True)["replay"] for s in sides)
        assert_same(full_replay, resumed_replay, "replay side file")


if __name__ == "__main__":
    _builder, _epochs, _dirpath, _ckpt, _report, _next = sys.argv[1:7]
    torch.save(fit_leg(_builder, int(_epochs), Path(_dirpath), Path(_ckpt), global_seed=CHILD_GLOBAL_SEED,
                       next_batch_size=int(_next)), _report)
