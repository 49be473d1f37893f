"""Lightning's own cost per training step: PPO updates under the Trainer vs a plain PyTorch loop.

Both run the same PPO update (same model, same optimizer, same rollout: 8 envs x 32 steps of
CartPole, 4 epochs x 4 minibatches) on a pre-collected rollout, so env stepping is out of the
picture and the difference is the framework: Lightning's loop, hooks, logging once per rollout,
our dataset wrapper and callbacks, logging once per rollout as the CLI does by default
(``--log_every_n_steps``). Targets: overhead under 10% of a training step; 5% with logging
once per rollout.

By default (``--mode interleaved``) one fit runs both: after every Lightning training step a
callback runs one step of the plain loop on its own copy of the model, timed apart, so each
Lightning step has a plain step a few milliseconds away and a shared host's drift hits both
alike; the figure to read is the median of the paired differences. ``--mode rounds`` times
whole plain and Lightning runs one after the other instead. Both clocks are printed: wall time
and this thread's CPU time.

Two plain loops (``--plain``, both by default): ``torch``, the loop as written by hand
(``optimizer.zero_grad()``, ``optimizer.step()``), and ``direct``, the same loop making
lightning_rl's update calls (:func:`~lightning_rl.algos.private_fast_paths.adam_step`), which leaves only the
framework around the updates as the difference.

Usage::

    python benchmarks/lightning_overhead.py --steps 200 --repeats 5
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator

import numpy as np
import pytorch_lightning as pl
import torch
from torch.utils.data import IterableDataset

from lightning_rl.agents import CategoricalPgAgent
from lightning_rl.algos import PPO
from lightning_rl.algos.optim import build_optimizer, clip_grad_norm_
from lightning_rl.algos.private_fast_paths import adam_step
from lightning_rl.datasets.on_policy import OnPolicyBatch, iterate_minibatches
from lightning_rl.samplers import SerialSampler


class _FixedRollouts(IterableDataset):
    """Yields one pre-collected rollout ``steps`` times."""

    def __init__(self, batch: OnPolicyBatch, steps: int) -> None:
        self.batch, self.steps = batch, steps

    def __len__(self) -> int:
        return self.steps

    def __iter__(self) -> Iterator[OnPolicyBatch]:
        for _ in range(self.steps):
            yield self.batch


class FixedDataPPO(PPO):
    """PPO whose dataset replays one rollout, to time the update path alone."""

    steps = 100
    rollout: OnPolicyBatch | None = None

    def make_dataset(self) -> IterableDataset:
        if self.rollout is None:
            self.rollout = super().make_dataset().collect()
        return _FixedRollouts(self.rollout, self.steps)


def make_module(steps: int) -> FixedDataPPO:
    pl.seed_everything(0, verbose=False)
    module = FixedDataPPO(
        CategoricalPgAgent(hidden_sizes=[64, 64]),
        SerialSampler(env_id="CartPole-v1", batch_T=32, batch_B=8),
        epochs=4, minibatches=4, linear_lr_schedule=False, total_env_steps=10**9, log_interval_steps=256 * steps,
    )
    module.steps = steps
    return module


class PlainLoop:
    """The same updates in a plain PyTorch loop, one training step per :meth:`step`.

    The module's optimizer (fused Adam) and gradient clip, and the same logged diagnostics as the
    module computes when every rollout is logged (the last epoch's loss terms, entropy, KL and
    clip fraction, averaged once per rollout): the same work, so the difference is the
    framework's. With ``log_every_n_steps`` N > 1 the module skips them on N - 1 of N rollouts.

    ``update``: "torch" steps as one writes it by hand (``optimizer.zero_grad()``, ``backward``,
    clip, ``optimizer.step()``); "direct" makes the same calls as lightning_rl's direct update
    path (gradients set to None, :func:`~lightning_rl.algos.private_fast_paths.adam_step`), so that only the
    framework around the updates differs.
    """

    def __init__(self, steps: int, log_every_n_steps: int = 1, update: str = "torch") -> None:
        self.module = make_module(steps)
        self.update = update
        self.module.setup("fit")
        self.module.make_dataset()
        self.params = list(self.module.agent.parameters_for("model"))
        self.optimizer = build_optimizer(None, self.params, self.module.learning_rate, self.module.optimizer_eps)
        self.log_every_n_steps = log_every_n_steps
        self.steps_done = 0

    def step(self) -> None:
        module, optimizer = self.module, self.optimizer
        logged = self.steps_done % self.log_every_n_steps == 0
        rows = []
        for epoch in range(module.epochs):
            diagnostics = logged and epoch == module.epochs - 1
            for minibatch in iterate_minibatches(module.rollout, module.minibatches, False, module.minibatch_generator):
                terms = module.loss(minibatch, module.ratio_clip, diagnostics=diagnostics)
                if self.update == "torch":
                    optimizer.zero_grad(set_to_none=True)
                else:
                    for p in self.params:
                        p.grad = None
                terms["loss"].backward()
                clip_grad_norm_(self.params, module.clip_grad_norm)
                if self.update == "torch" or not adam_step(optimizer):
                    optimizer.step()
                if diagnostics:
                    rows.append(torch.stack([v.detach() for v in terms.values()]))
        if rows:
            torch.stack(rows).mean(0).tolist()
        self.steps_done += 1


def _now() -> tuple[float, float]:
    """Wall-clock seconds and this thread's CPU seconds. The CPU clock leaves out the time the
    thread waits while another process runs; torch runs on this thread alone
    (``set_num_threads(1)``), so it still counts all of the update's work."""
    return time.perf_counter(), time.thread_time()


class _StepClock(pl.Callback):
    """Timestamps at the end of every training step: differences cover the whole loop iteration.

    With ``plain``, one plain-loop step runs right after each Lightning step, timed on its own
    and left out of the Lightning step's interval: each Lightning step then has a plain step
    next to it in time, so a host that speeds up or slows down affects both alike.
    """

    def __init__(self, plains: dict[str, PlainLoop] | None = None) -> None:
        self.plains = plains or {}
        self.lightning: list[tuple[float, float]] = []
        self.plain_times: dict[str, list[tuple[float, float]]] = {name: [] for name in self.plains}
        self._last: tuple[float, float] | None = None

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        now = _now()
        if self._last is not None:
            self.lightning.append((now[0] - self._last[0], now[1] - self._last[1]))
        for name, plain in self.plains.items():
            plain.step()
            after = _now()
            self.plain_times[name].append((after[0] - now[0], after[1] - now[1]))
            now = after
        self._last = now


def time_lightning(steps: int, log_every_n_steps: int = 1, plains: dict[str, PlainLoop] | None = None) -> _StepClock:
    """Time ``steps`` training steps under ``Trainer.fit`` (Lightning loop, hooks, callbacks and
    logging included; wall and CPU seconds in the returned clock), with a step of each of
    ``plains`` after each one."""
    module = make_module(steps)
    clock = _StepClock(plains)
    trainer = pl.Trainer(
        max_epochs=1, accelerator="cpu", logger=pl.loggers.CSVLogger("/tmp/lightning_rl_overhead"),
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False, callbacks=[clock],
        log_every_n_steps=log_every_n_steps,
    )
    module.setup("fit")  # collect the rollout before timing
    module.make_dataset()
    trainer.fit(module)
    return clock


def time_plain(steps: int, log_every_n_steps: int = 1, update: str = "torch") -> np.ndarray:
    """Wall and CPU seconds per training step of the same updates in a plain loop, ``[steps - 1, 2]``."""
    loop = PlainLoop(steps, log_every_n_steps, update)
    marks = []
    for _ in range(steps):
        loop.step()
        marks.append(_now())
    return np.diff(np.array(marks), axis=0)


def report(clock: str, plain: list[np.ndarray], lightning: list[np.ndarray]) -> None:
    """Print the overhead of ``lightning`` over ``plain`` (seconds per step, one array per round)."""
    plain_steps, lightning_steps = np.concatenate(plain), np.concatenate(lightning)
    # Per-step statistics: the median and lower quartile are robust to bursts of interference
    # from other tenants of a shared host, which the mean of a whole run is not.
    for name, stat in (("median", np.median), ("25th percentile", lambda x: np.percentile(x, 25)),
                       ("mean", np.mean)):
        p, q = stat(plain_steps), stat(lightning_steps)
        print(f"[{name}] plain {p * 1e3:6.2f} ms   lightning_rl + PL {q * 1e3:6.2f} ms   "
              f"overhead {(q - p) * 1e3:5.2f} ms = {100 * (q - p) / q:5.1f}% of a training step")
    # Paired by round: each round's plain and Lightning runs are adjacent in time, so a host that
    # slows down for a minute shifts both; the median over rounds of the per-round overhead is
    # the figure to compare across code versions.
    per_round = sorted(100 * (np.median(q) - np.median(p)) / np.median(q)
                       for p, q in zip(plain, lightning, strict=True))
    print(f"[per round] overhead median {np.median(per_round):5.1f}% of a training step over {len(per_round)} rounds "
          f"(range {per_round[0]:.1f}% to {per_round[-1]:.1f}%)")


#: The plain loops each Lightning step is compared with (``PlainLoop(update=...)``).
PLAIN_UPDATES = {"torch": "plain loop as written by hand (optimizer.zero_grad / step)",
                 "direct": "plain loop making lightning_rl's update calls (only the framework differs)"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300, help="training steps (rollouts) per measurement")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--log_every_n_steps", type=int, default=1,
                        help="Trainer(log_every_n_steps): 1 logs once per rollout, the CLI's default")
    parser.add_argument("--mode", choices=("interleaved", "rounds"), default="interleaved",
                        help="interleaved: plain steps after every Lightning step, in one fit (the pairs are "
                             "milliseconds apart); rounds: whole plain and Lightning runs one after the other")
    parser.add_argument("--plain", nargs="+", choices=tuple(PLAIN_UPDATES), default=list(PLAIN_UPDATES),
                        help="plain loops to compare with: torch (as written by hand) and/or direct "
                             "(lightning_rl's own update calls)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    plain: dict[str, list[np.ndarray]] = {name: [] for name in args.plain}
    lightning: list[np.ndarray] = []
    for _ in range(args.repeats):
        if args.mode == "interleaved":
            loops = {name: PlainLoop(args.steps, args.log_every_n_steps, name) for name in args.plain}
            clock = time_lightning(args.steps, args.log_every_n_steps, loops)
            lightning.append(np.array(clock.lightning))
            for name in args.plain:  # the plain steps that ran right after each timed Lightning step
                plain[name].append(np.array(clock.plain_times[name][1:]))
        else:
            # Alternating, so a noisy neighbour on a shared host slows both about equally.
            for name in args.plain:
                plain[name].append(time_plain(args.steps, args.log_every_n_steps, name))
            lightning.append(np.array(time_lightning(args.steps, args.log_every_n_steps).lightning))
    print(f"{sum(len(q) for q in lightning)} training steps of 16 updates each way, {args.repeats} "
          f"{'interleaved runs' if args.mode == 'interleaved' else 'alternating rounds'}")
    for name in args.plain:
        print(f"==== against the {PLAIN_UPDATES[name]}: --plain {name}")
        for clock_name, column in (("wall clock", 0), ("CPU clock (this thread)", 1)):
            print(f"-- {clock_name}")
            report(clock_name, [p[:, column] for p in plain[name]], [q[:, column] for q in lightning])
            if args.mode == "interleaved":
                # Each Lightning step minus the plain step next to it: host drift cancels within a pair.
                diffs = np.concatenate([q[:, column] - p[:, column]
                                        for p, q in zip(plain[name], lightning, strict=True)])
                whole = np.median(np.concatenate([q[:, column] for q in lightning]))
                print(f"[paired] overhead median {np.median(diffs) * 1e3:5.2f} ms = "
                      f"{100 * np.median(diffs) / whole:5.1f}% of a training step")
    print("target: overhead <= 5% of a training step (median)")


if __name__ == "__main__":
    main()
