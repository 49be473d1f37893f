"""BenchMARL's MAPPO on mpe2's simple_spread_v3, reported as ``benchmarks/learning.py`` reports.

BenchMARL (TorchRL) is not a dependency of lightning_rl: it pulls torchrl, tensordict and Hydra,
and without the torch pin its resolver replaces torch with a CUDA build. Run this script from an
environment of its own::

    python -m venv --system-site-packages bm && bm/bin/pip install "torch==2.13.0" benchmarl mpe2
    bm/bin/python benchmarks/benchmarl_mappo.py --seeds 1 2 3 --budget 100000 --out benchmarl.csv

BenchMARL 1.5's PettingZoo tasks look envs up through ``pettingzoo.utils.all_modules``, which
imports ``pettingzoo.mpe``; PettingZoo 1.25 moved MPE into the ``mpe2`` package and left an
``ImportError`` there. This script gives that lookup the ``mpe2`` module (the env our config and
PettingZoo's SB3 recipe train) before BenchMARL imports it; nothing else of BenchMARL changes.

The settings are BenchMARL's own defaults (``base_experiment.yaml``, ``mappo.yaml``: a shared
policy and a centralised critic, lr 5e-5, 6,000 frames per batch from 10 envs, 45 minibatch
iterations of 400), with the env as our shipped config has it (``max_cycles=25``, ``N=3``,
discrete actions), evaluation and checkpoints off. One frame is one parallel step of the env,
as our env step. The return is the team return (every agent's reward summed over an episode), the
mean of the last 20 finished episodes, at every ``--log_every`` env steps.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
import types
from collections import deque
from pathlib import Path

from benchmarl.experiment.callback import Callback  # this script runs where BenchMARL is installed


def use_mpe2() -> None:
    """Give torchrl's PettingZoo lookup the mpe2 module (see the module docstring)."""
    import mpe2.simple_spread_v3

    shim = types.ModuleType("pettingzoo.utils.all_modules")
    shim.all_environments = {"mpe/simple_spread_v3": mpe2.simple_spread_v3}  # type: ignore[attr-defined]
    sys.modules["pettingzoo.utils.all_modules"] = shim


class TeamReturns(Callback):
    """The team return of every finished episode, and the mean of the last 20 at each point."""

    def __init__(self, log_every: int) -> None:
        super().__init__()
        self.log_every = log_every
        self.last: deque[float] = deque(maxlen=20)
        self.frames = 0
        self.next_point = log_every
        self.points: list[tuple[int, float, float]] = []
        self.start = time.perf_counter()

    def on_batch_collected(self, batch) -> None:  # noqa: ANN001 - a TensorDict
        # [envs, steps] -> [steps, envs], so that episodes end in time order.
        done = batch.get(("next", "done")).squeeze(-1).transpose(0, 1).reshape(-1)
        # Each agent's episode reward at the episode's last step ([..., agents, 1]), summed over the agents.
        episode = batch.get(("next", "agent", "episode_reward")).squeeze(-1).sum(-1).transpose(0, 1).reshape(-1)
        self.last.extend(episode[done].tolist())
        self.frames += done.shape[0]
        while self.frames >= self.next_point and self.last:
            mean = sum(self.last) / len(self.last)
            self.points.append((self.next_point, mean, time.perf_counter() - self.start))
            self.next_point += self.log_every


def run(seed: int, budget: int, log_every: int) -> list[tuple[int, float, float]]:
    """One seed: ``(env_steps, team return, wall seconds)`` at every ``log_every`` env steps."""
    import torch
    from benchmarl.algorithms import MappoConfig
    from benchmarl.environments import PettingZooTask
    from benchmarl.experiment import Experiment, ExperimentConfig
    from benchmarl.models.mlp import MlpConfig

    torch.set_num_threads(1)
    experiment_config = ExperimentConfig.get_from_yaml()
    experiment_config.max_n_frames = budget
    experiment_config.prefer_continuous_actions = False
    experiment_config.evaluation = False
    experiment_config.render = False
    experiment_config.loggers = []
    experiment_config.checkpoint_at_end = False
    experiment_config.create_json = False
    experiment_config.save_folder = str(Path("benchmarl_runs").absolute())
    Path(experiment_config.save_folder).mkdir(exist_ok=True)
    task = PettingZooTask.SIMPLE_SPREAD.get_from_yaml()
    task.config.update({"max_cycles": 25, "N": 3})

    callback = TeamReturns(log_every)
    experiment = Experiment(
        task=task, algorithm_config=MappoConfig.get_from_yaml(), model_config=MlpConfig.get_from_yaml(),
        critic_model_config=MlpConfig.get_from_yaml(), seed=seed, config=experiment_config,
        callbacks=[callback],
    )
    experiment.run()
    return callback.points


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--budget", type=int, default=100_000, help="env steps (BenchMARL's frames)")
    parser.add_argument("--log_every", type=int, default=10_000)
    parser.add_argument("--out", default="benchmarl_mappo.csv", help="rows in benchmarks/learning.py's CSV format")
    args = parser.parse_args()
    use_mpe2()
    with open(args.out, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["system", "algorithm", "env", "seed", "env_steps", "return", "wall_seconds", "agent"])
        for seed in args.seeds:
            for steps, value, wall in run(seed, args.budget, args.log_every):
                writer.writerow(["benchmarl", "mappo", "simple_spread_v3", seed, steps, value, wall, "team"])
                print(f"seed {seed} env steps {steps:,}: team return {value:.1f} ({wall:.0f} s)", flush=True)
            fh.flush()


if __name__ == "__main__":
    main()
