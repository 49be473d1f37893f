"""Lightning's own cost per training step: PPO updates under the Trainer vs a plain PyTorch loop.

Both run the same PPO update (same model, same optimizer, same rollout: 8 envs x 32 steps of
CartPole, 4 epochs x 4 minibatches) on a pre-collected rollout, so env stepping is out of the
picture and the difference is the framework: Lightning's loop, hooks, logging once per rollout,
our dataset wrapper and callbacks, logging once per rollout as the CLI does by default
(``--log_every_n_steps``). Issue targets: overhead under 10% of a training step; 5% with the
per-rollout logging of issue 17.

Usage::

    python benchmarks/lightning_overhead.py --steps 300
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


class _StepClock(pl.Callback):
    """Timestamps at the end of every training step: differences cover the whole loop iteration."""

    def __init__(self) -> None:
        self.marks: list[float] = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.marks.append(time.perf_counter())


def time_lightning(steps: int, log_every_n_steps: int = 1) -> np.ndarray:
    """Seconds per training step (Lightning loop, hooks, callbacks, logging included), ``[steps - 1]``."""
    module = make_module(steps)
    clock = _StepClock()
    trainer = pl.Trainer(
        max_epochs=1, accelerator="cpu", logger=pl.loggers.CSVLogger("/tmp/lightning_rl_overhead"),
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False, callbacks=[clock],
        log_every_n_steps=log_every_n_steps,
    )
    module.setup("fit")  # collect the rollout before timing
    module.make_dataset()
    trainer.fit(module)
    return np.diff(clock.marks)


def time_plain(steps: int, log_every_n_steps: int = 1) -> np.ndarray:
    """Seconds per training step of the same updates in a plain loop, ``[steps - 1]``."""
    module = make_module(steps)
    module.setup("fit")
    module.make_dataset()
    batch = module.rollout
    agent = module.agent
    # The module's optimizer (fused Adam) and gradient clip, and the same logged diagnostics as
    # the module computes when every rollout is logged (the last epoch's loss terms, entropy, KL
    # and clip fraction, averaged once per rollout): the same work, so the difference is the
    # framework's. With --log_every_n_steps N > 1 the module skips them on N - 1 of N rollouts.
    params = list(agent.parameters_for("model"))
    optimizer = build_optimizer(None, params, module.learning_rate, module.optimizer_eps)
    generator = module.minibatch_generator
    marks = []
    for step in range(steps):
        logged = step % log_every_n_steps == 0
        rows = []
        for epoch in range(module.epochs):
            diagnostics = logged and epoch == module.epochs - 1
            for minibatch in iterate_minibatches(batch, module.minibatches, False, generator):
                terms = module.loss(minibatch, module.ratio_clip, diagnostics=diagnostics)
                optimizer.zero_grad(set_to_none=True)
                terms["loss"].backward()
                clip_grad_norm_(params, module.clip_grad_norm)
                optimizer.step()
                if diagnostics:
                    rows.append(torch.stack([v.detach() for v in terms.values()]))
        if rows:
            torch.stack(rows).mean(0).tolist()
        marks.append(time.perf_counter())
    return np.diff(marks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300, help="training steps (rollouts) per measurement")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--log_every_n_steps", type=int, default=1,
                        help="Trainer(log_every_n_steps): 1 logs once per rollout, the CLI's default")
    args = parser.parse_args()
    torch.set_num_threads(1)
    plain, lightning = [], []
    for _ in range(args.repeats):
        # Alternating, so a noisy neighbour on a shared host slows both about equally.
        plain.append(time_plain(args.steps, args.log_every_n_steps))
        lightning.append(time_lightning(args.steps, args.log_every_n_steps))
    plain_steps, lightning_steps = np.concatenate(plain), np.concatenate(lightning)
    print(f"{len(plain_steps)} training steps of 16 updates each way, {args.repeats} alternating rounds")
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
    print("target: overhead <= 5% of a training step (median)")


if __name__ == "__main__":
    main()
