"""Sync vs async sampling at the same replay ratio, in one process per run of this script.

For each case, the shipped config (``configs/<algo>/<env>.yaml``: network, sampler, batch size,
replay ratio, ``min_steps_learn``), trained to a fixed number of updates without evaluation,
checkpoints or logger, once with ``async_sampling: false`` and once with ``true`` (alternating
over ``--repeats``). Reported per mode, over the learning phase (from the first update on):

* env steps/s and updates/s, and the wall time to the fixed number of updates (whole run);
* sync only: the measured sampling and training time per iteration (``sample``, ``train``), and
  the bound overlap could reach, ``max(sample, train)`` per iteration, printed beside the async
  result as the best possible learning-phase time.

Overlap needs a free core for each side: on a shared 2-core machine the bound is optimistic.

Usage::

    python benchmarks/async_throughput.py                         # DQN CartPole and SAC Pendulum
    python benchmarks/async_throughput.py --cases dqn_cartpole dqn_cartpole_rr8 --updates 2560 --repeats 2
    python benchmarks/async_throughput.py --cases dqn_pong --updates 1280
    python benchmarks/async_throughput.py --cases sac_halfcheetah --updates 640
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
import time
from typing import Any

import pytorch_lightning as pl
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: case -> (config, overrides of the algorithm's init_args). ``dqn_cartpole_rr8`` is the shipped
#: CartPole config at a quarter of its replay ratio, so sampling and training cost about the same
#: (the case where overlap pays most; the shipped ratio is training-bound by a factor of about 3).
CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "dqn_cartpole": ("configs/dqn/cartpole.yaml", {}),
    "dqn_cartpole_rr8": ("configs/dqn/cartpole.yaml", {"replay_ratio": 8}),
    "dqn_pong": ("configs/dqn/pong.yaml", {}),
    "sac_pendulum": ("configs/sac/pendulum.yaml", {}),
    "sac_halfcheetah": ("configs/sac/halfcheetah.yaml", {}),
}
SPEEDUP_TARGET = 1.3  # where sample and train cost within a factor of 2 of each other
BOUND_TARGET = 1.1  # async learning phase at most 10% over max(sample, train)


def build(spec: dict[str, Any]) -> Any:
    """An object from a ``class_path``/``init_args`` mapping (nested ones built first)."""
    module_name, name = spec["class_path"].rsplit(".", 1)
    args = {k: build(v) if isinstance(v, dict) and "class_path" in v else v
            for k, v in (spec.get("init_args") or {}).items()}
    return getattr(importlib.import_module(module_name), name)(**args)


class Timer(pl.Callback):
    """Wall time of the whole fit and of its learning phase (from the first update on)."""

    def on_train_start(self, trainer: pl.Trainer, pl_module: Any) -> None:
        self.t0 = time.perf_counter()
        self.learn: tuple[float, int, int, float] | None = None

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module: Any, outputs: Any, batch: Any, idx: int) -> None:
        state = pl_module.train_state
        if self.learn is None and state.updates > 0:
            # The first iteration with updates ends here: the learning phase is measured after it.
            self.learn = (time.perf_counter(), state.env_steps, state.updates, state.sampler_time)

    def on_train_end(self, trainer: pl.Trainer, pl_module: Any) -> None:
        self.t1 = time.perf_counter()


def run(case: str, updates: int, async_sampling: bool, seed: int) -> dict[str, float]:
    config, overrides = CASES[case]
    with open(os.path.join(ROOT, config)) as f:
        model = yaml.safe_load(f)["model"]
    init = model["init_args"]
    init.update(overrides)
    sampler_args = init["sampler"]["init_args"]
    sampler_args.pop("eval_n_envs", None)
    steps = sampler_args["batch_T"] * sampler_args["batch_B"]
    per_iteration = init["replay_ratio"] * steps / init["batch_size"]
    learn_start = max(1, math.ceil(init.get("min_steps_learn", 0) / steps))
    iterations = learn_start - 1 + math.ceil(updates / per_iteration)
    init.update(total_env_steps=iterations * steps, async_sampling=async_sampling, log_interval_steps=10 * steps,
                checkpoint_replay=False)
    pl.seed_everything(seed, verbose=False)
    module = build(model)
    timer = Timer()
    trainer = pl.Trainer(max_epochs=-1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, accelerator="cpu", callbacks=[timer])
    trainer.fit(module)
    state = module.train_state
    assert timer.learn is not None, "no update happened"
    t_learn, env0, upd0, sample0 = timer.learn
    learn_s = timer.t1 - t_learn
    learn_itr = (state.env_steps - env0) / steps
    out = {
        "wall_s": timer.t1 - timer.t0,
        "learn_s": learn_s,
        "env_steps_per_s": (state.env_steps - env0) / learn_s,
        "updates_per_s": (state.updates - upd0) / learn_s,
        "updates": state.updates,
        "learn_itr": learn_itr,
    }
    if async_sampling:
        metrics = module.replay_setup.async_runner.metrics(state.updates)
        out["ratio_min"] = metrics.get("async/replay_ratio_min", math.nan)
        out["ratio_max"] = metrics.get("async/replay_ratio_max", math.nan)
        out["ratio"] = init["replay_ratio"]
        out["sampler_wait_s"] = metrics["async/sampler_wait_s"]
        out["trainer_wait_s"] = metrics["async/trainer_wait_s"]
    else:
        sample = (state.sampler_time - sample0) / learn_itr
        out["sample_s"] = sample
        out["train_s"] = learn_s / learn_itr - sample
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", nargs="+", default=["dqn_cartpole", "sac_pendulum"], choices=sorted(CASES))
    parser.add_argument("--updates", type=int, default=3840, help="updates per run (rounded up to whole iterations)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} CPUs visible; torch threads per the config")
    results: list[tuple[str, dict[str, float], dict[str, float], float]] = []
    for case in args.cases:
        for repeat in range(args.repeats):
            sync = run(case, args.updates, False, args.seed + repeat)
            asyn = run(case, args.updates, True, args.seed + repeat)
            bound = max(sync["sample_s"], sync["train_s"]) * asyn["learn_itr"]
            results.append((case, sync, asyn, bound))
            print(f"\n{case} (repeat {repeat}, {sync['updates']} updates, learning phase {sync['learn_itr']:.0f} "
                  f"iterations)")
            print(f"  sync : sample {1e3 * sync['sample_s']:.1f} ms + train {1e3 * sync['train_s']:.1f} ms per "
                  f"iteration; bound max(sample, train) = {1e3 * max(sync['sample_s'], sync['train_s']):.1f} ms")
            for name, r in (("sync", sync), ("async", asyn)):
                line = (f"  {name:5s}: {r['env_steps_per_s']:8.0f} env steps/s {r['updates_per_s']:8.0f} updates/s  "
                        f"learning phase {r['learn_s']:6.2f} s  whole run {r['wall_s']:6.2f} s")
                if name == "async":
                    line += (f"  | bound {bound:6.2f} s (async/bound {r['learn_s'] / bound:.2f}, speed-up vs sync "
                             f"{sync['learn_s'] / r['learn_s']:.2f}x)  replay ratio over 10-batch windows "
                             f"{r['ratio_min']:.2f}..{r['ratio_max']:.2f} (configured {r['ratio']:g}); waits: "
                             f"sampler {r['sampler_wait_s']:.2f} s, trainer {r['trainer_wait_s']:.2f} s")
                print(line)
    print("\ntargets: async within 10% of the bound everywhere; >= 1.3x sync where sample and train are "
          "within a factor of 2")
    for case, sync, asyn, bound in results:
        balance = max(sync["sample_s"], sync["train_s"]) / min(sync["sample_s"], sync["train_s"])
        speedup, over = sync["learn_s"] / asyn["learn_s"], asyn["learn_s"] / bound
        checks = [f"async/bound {over:.2f} ({'met' if over <= BOUND_TARGET else 'NOT met'})"]
        if balance <= 2:
            checks.append(f"speed-up {speedup:.2f}x ({'met' if speedup >= SPEEDUP_TARGET else 'NOT met'})")
        else:
            allowed = (sync["sample_s"] + sync["train_s"]) / max(sync["sample_s"], sync["train_s"])
            checks.append(f"speed-up {speedup:.2f}x (no 1.3x target: sample/train costs {balance:.1f}x apart; "
                          f"the bound allows {allowed:.2f}x)")
        print(f"  {case:18s} " + "; ".join(checks))


if __name__ == "__main__":
    main()
