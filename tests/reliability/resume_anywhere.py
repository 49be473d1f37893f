"""A run cut anywhere and resumed in a new process continues as if it had never stopped.

Rows 1 and 2 cut a run at an epoch's end (:mod:`tests.reliability.exact_resume`). Here an epoch is
:data:`K` sampler iterations and the run is cut in the middle of one, three ways:

* ``budget``: the first run's ``total_env_steps`` ends it after :data:`CUT` iterations; the
  resumed run is given the uninterrupted run's budget;
* ``sigint``: Ctrl-C (a real ``SIGINT`` to the process) after :data:`CUT` iterations; the
  :class:`~lightning_rl.callbacks.RunDirectoryCallback` saves at the end of that batch;
* ``every_n``: the uninterrupted run itself writes a checkpoint every few updates
  (``ModelCheckpoint(every_n_train_steps=...)``), one of them mid-epoch, and that one is resumed.

A *leg* is one ``Trainer.fit`` (:func:`run_leg`). The resumed legs run in a fresh interpreter
(``python -m tests.reliability.resume_anywhere <legs.json>``, one for many legs: each restores
everything from its checkpoint) with another global seed. What is compared, from the live
objects (:func:`state_of`) and the loggers:

* right after the reload: weights, counters, every RNG (python, numpy, torch, the minibatch
  shuffle), the sampler's state (envs, collectors, worker RNGs), the replay (arrays, cursor,
  priorities), target networks, epsilon and ``log_alpha``, equal to the cut run's at its save;
* every loss of every update after the cut, and every metric logged after the cut (episode
  windows and the epoch's statistics included; wall-clock ``perf/`` figures excepted);
* at the end: all of the above and the optimizers, equal to the uninterrupted run's.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import ModelCheckpoint
from pytorch_lightning.loggers.logger import Logger

from lightning_rl.callbacks import RunDirectoryCallback
from tests.algos.test_dqn import assert_same
from tests.reliability.exact_resume import ROOT, as_data, optim_state, rng_state
from tests.signals import default_sigint, sigint_default_in_child

#: Sampler iterations per epoch (``log_interval_steps`` is ``K`` batches).
K = 4
#: Iterations of the uninterrupted run: three epochs.
FULL = 3 * K
#: Where the cut runs stop: in the middle of the second epoch.
CUT = K + K // 2
#: The global seed of every leg in this process, and the resumed leg's (another one: nothing may
#: depend on it).
SEED, CHILD_SEED = 3, 1234
#: Logged keys that are wall-clock figures, not state.
VOLATILE_PREFIXES = ("perf/", "time/")


def state_of(module: Any) -> dict[str, Any]:
    """What the module, its sampler and its replay hold now, as data (copies)."""
    state: dict[str, Any] = {
        "python_rng": list(__import__("random").getstate()[1]),
        "numpy_rng": np.random.get_state()[1],
        "torch_rng": torch.get_rng_state(),
        "minibatch_rng": rng_state(module.minibatch_generator),
        "train_state": {k: getattr(module.train_state, k) for k in
                        ("env_steps", "itr", "updates", "update_credit", "updates_at_sync")},
        "params": module.state_dict(),
        "sampler": module.sampler.state_dict(),
    }
    agent = module.agent
    if hasattr(agent, "target_pairs"):
        state["targets"] = [target.state_dict() for target, _ in agent.target_pairs()]
    if hasattr(agent, "eps_sample"):
        state["epsilon"] = {"eps_sample": agent.eps_sample, "eps_itr": agent._eps_itr}
    if module.replay is not None:
        replay = module.replay
        state["replay"] = replay.state_dict()
        state["replay_counters"] = {"cursor": replay.storage.cursor, "rows_written": replay.storage.rows_written,
                                    "beta": replay.beta}
    return as_data(state)


class MetricsLogger(Logger):
    """Every ``log_metrics`` call: ``(step, {name: value})``, wall-clock figures left out."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[tuple[int, dict[str, float]]] = []

    @property
    def name(self) -> str:
        return "record"

    @property
    def version(self) -> int:
        return 0

    def log_hyperparams(self, params: Any, *args: Any, **kwargs: Any) -> None:
        pass

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        kept = {k: float(v) for k, v in metrics.items() if not k.startswith(VOLATILE_PREFIXES)}
        if kept:
            self.rows.append((int(step if step is not None else -1), kept))


class Recorder(pl.Callback):
    """Each update's losses, the state at each save (by iteration), right after a reload and at the
    end; optionally a real SIGINT after ``sigint_at`` iterations."""

    def __init__(self, sigint_at: int | None) -> None:
        self.sigint_at = sigint_at
        self.losses: list[dict[str, float]] = []
        self.at_save: dict[int, dict[str, Any]] = {}
        self.at_load: dict[str, Any] = {}
        self.final: dict[str, Any] = {}
        self.epoch_ends: list[int] = []

    def setup(self, trainer: pl.Trainer, pl_module: Any, stage: str) -> None:
        # Every loss method the algorithm has (DDPG and TD3: the critic's and the policy's).
        for name in ("loss", "q_loss", "mu_loss"):
            if hasattr(pl_module, name):
                setattr(pl_module, name, self._recording(name, getattr(pl_module, name)))

    def _recording(self, name: str, loss: Any) -> Any:
        def recording_loss(*args: Any, **kwargs: Any) -> dict[str, torch.Tensor]:
            terms = loss(*args, **kwargs)
            self.losses.append({f"{name}.{k}": float(v.detach().double().mean()) for k, v in terms.items()})
            return terms

        return recording_loss

    def on_load_checkpoint(self, trainer: pl.Trainer, pl_module: Any, checkpoint: dict[str, Any]) -> None:
        self.at_load = state_of(pl_module)

    def on_save_checkpoint(self, trainer: pl.Trainer, pl_module: Any, checkpoint: dict[str, Any]) -> None:
        itr = pl_module.train_state.itr
        if itr not in self.at_save:
            self.at_save[itr] = {**state_of(pl_module), **optim_state(trainer, pl_module)}

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        if pl_module.train_state.itr == self.sigint_at:
            os.kill(os.getpid(), signal.SIGINT)

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: Any) -> None:
        self.epoch_ends.append(pl_module.train_state.itr)

    def on_train_end(self, trainer: pl.Trainer, pl_module: Any) -> None:
        self.final = {**state_of(pl_module), **optim_state(trainer, pl_module)}


def run_leg(spec: dict[str, Any]) -> dict[str, Any]:
    """One ``fit`` of ``spec["builder"](**spec["kwargs"])``: checkpoints every epoch (``save_last``)
    into ``spec["dir"]``, optionally every ``spec["every_n"]`` updates into ``<dir>/every``, and a
    SIGINT after ``spec["sigint_at"]`` iterations; resumed from ``spec["ckpt"]`` when given."""
    pl.seed_everything(spec.get("global_seed", SEED))
    module_name, name = spec["builder"].split(":")
    module = getattr(importlib.import_module(module_name), name)(**spec["kwargs"])
    recorder = Recorder(spec.get("sigint_at"))
    logger = MetricsLogger()
    callbacks: list[pl.Callback] = [ModelCheckpoint(dirpath=spec["dir"], save_last=True), recorder,
                                    RunDirectoryCallback()]
    if spec.get("every_n"):
        callbacks.append(ModelCheckpoint(dirpath=Path(spec["dir"]) / "every", every_n_train_steps=spec["every_n"],
                                         save_top_k=-1, filename="{step}"))
    trainer = pl.Trainer(
        max_epochs=-1, accelerator="cpu", logger=logger, enable_progress_bar=False, enable_model_summary=False,
        callbacks=callbacks, deterministic=True, log_every_n_steps=1,
    )
    with default_sigint() if spec.get("sigint_at") else contextlib.nullcontext():  # also in a background test run
        trainer.fit(module, ckpt_path=spec.get("ckpt"))
    return as_data({
        "losses": recorder.losses, "at_save": {str(k): v for k, v in recorder.at_save.items()},
        "at_load": recorder.at_load, "final": recorder.final, "epoch_ends": recorder.epoch_ends,
        "logged": [[step, row] for step, row in logger.rows],
        "interrupted": trainer.interrupted,
    })


def run_legs_in_new_process(specs: list[dict[str, Any]], out_dir: Path) -> list[dict[str, Any]]:
    """:func:`run_leg` of each spec, one after another, in one fresh interpreter (another global
    seed); their reports, or ``{"error": traceback}`` for a leg that raised."""
    out_dir.mkdir(parents=True, exist_ok=True)
    reports = [str(out_dir / f"leg{i}.pt") for i in range(len(specs))]
    spec_path = out_dir / "legs.json"
    spec_path.write_text(json.dumps([{**spec, "global_seed": CHILD_SEED, "report": report}
                                     for spec, report in zip(specs, reports, strict=True)]))
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
    proc = subprocess.run([sys.executable, "-m", "tests.reliability.resume_anywhere", str(spec_path)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=1800, preexec_fn=sigint_default_in_child)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return [torch.load(report, weights_only=True) for report in reports]


def assert_close_rows(full: list[dict[str, float]], resumed: list[dict[str, float]], where: str) -> None:
    """Same rows, same keys, each value equal within 1e-8 (NaN equals NaN)."""
    assert len(full) == len(resumed) > 0, f"{where}: {len(full)} rows != {len(resumed)} rows"
    for i, (a, b) in enumerate(zip(full, resumed, strict=True)):
        assert a.keys() == b.keys(), f"{where}[{i}]: {sorted(a)} != {sorted(b)}"
        for k in a:
            same = (math.isnan(a[k]) and math.isnan(b[k])) or abs(a[k] - b[k]) <= 1e-8
            assert same, f"{where}[{i}].{k}: {a[k]!r} != {b[k]!r}"


def logged_after(report: dict[str, Any], env_steps: int) -> list[dict[str, float]]:
    """The rows a leg logged at x-axis values past ``env_steps``, each tagged with its step."""
    return [{"step": float(step), **row} for step, row in report["logged"] if step > env_steps]


def cut_runs(tmp_path: Path, builder: str, hows: tuple[str, ...], batch: int, **kwargs: Any) -> dict[str, Any]:
    """The uninterrupted run of ``builder(**kwargs)`` and, for each of ``hows`` (``budget``,
    ``sigint``, ``every_n``), the run cut in the middle of an epoch and what resuming it takes.

    Returns:
        ``{"full": report, how: {"cut": report, "resume": spec}}``; run the ``resume`` specs with
        :func:`run_legs_in_new_process`, then check each with :func:`check_resumed`.
    """
    def spec(name: str, total: int, **extra: Any) -> dict[str, Any]:
        return {"builder": builder, "kwargs": {**kwargs, "total_env_steps": total}, "dir": str(tmp_path / name),
                **extra}

    full = run_leg(spec("full", FULL * batch, every_n=1 if "every_n" in hows else None))
    out: dict[str, Any] = {"full": full}
    for how in hows:
        if how == "every_n":
            # The periodic checkpoint written right after iteration CUT's updates.
            ckpt = min((p for p in (tmp_path / "full" / "every").glob("*.ckpt")
                        if torch.load(p, weights_only=True)["lightning_rl"]["train_state"]["itr"] == CUT),
                       key=lambda p: p.stat().st_mtime)
            cut = {"at_save": full["at_save"], "losses": full["losses"]}
        else:
            extra = {"sigint_at": CUT} if how == "sigint" else {}
            cut = run_leg(spec(f"cut_{how}", CUT * batch if how == "budget" else FULL * batch, **extra))
            ckpt = tmp_path / f"cut_{how}" / "last.ckpt"
            # The cut run is the uninterrupted run up to the cut.
            assert_close_rows(full["losses"][: len(cut["losses"])], cut["losses"], f"{how}: losses before the cut")
        assert int(torch.load(ckpt, weights_only=True)["lightning_rl"]["train_state"]["itr"]) == CUT, how
        out[how] = {"cut": cut, "resume": spec(f"resumed_{how}", FULL * batch, ckpt=str(ckpt))}
    return out


def check_resumed(full: dict[str, Any], cut: dict[str, Any], resumed: dict[str, Any], batch: int) -> None:
    """Assert that ``resumed`` (the cut run resumed in a new process) ended as ``full`` did (the
    module docstring says what is compared)."""
    assert "error" not in resumed, resumed.get("error")
    saved = cut["at_save"][str(CUT)]
    # Right after the reload the new process holds what the cut run held at its save.
    assert resumed["at_load"]["train_state"]["itr"] == CUT
    assert_same({k: saved[k] for k in resumed["at_load"]}, resumed["at_load"], "state after reload")
    # Then it does what the uninterrupted run did: the same epochs, updates and logged metrics.
    assert resumed["epoch_ends"] == [itr for itr in full["epoch_ends"] if itr > CUT], resumed["epoch_ends"]
    n_before = len(full["losses"]) - len(resumed["losses"])
    assert n_before >= 0
    assert_close_rows(full["losses"][n_before:], resumed["losses"], "losses after the cut")
    cut_steps = CUT * batch
    assert_close_rows(logged_after(full, cut_steps), logged_after(resumed, cut_steps), "metrics logged after the cut")
    assert_same(full["final"], resumed["final"], "final state")


def _run_specs(path: str) -> None:
    """The child process: every leg of ``path``'s spec list, a report (or the error) each."""
    import traceback

    for spec in json.loads(Path(path).read_text()):
        try:
            report = run_leg(spec)
        except BaseException:  # noqa: BLE001 - the test names the leg that failed
            report = {"error": traceback.format_exc()}
        torch.save(report, spec["report"])


if __name__ == "__main__":
    _run_specs(sys.argv[1])
