"""Wall time from process start to a mean return of -200 on Pendulum-v1: SAC here vs Stable-Baselines3.

* ``lightning_rl``: ``lightning-rl fit --config configs/sac/pendulum.yaml`` as shipped (only the
  seed changes), in a fresh process; it stops itself at the threshold (EarlyStopping).
* ``sb3``: Stable-Baselines3's SAC with its defaults (``SAC("MlpPolicy", "Pendulum-v1")``: 256x256
  MLPs, batch 256, lr 3e-4, one update per env step, 100 random steps first), in a fresh process,
  stopped by a callback once its mean return reaches the threshold.

"Mean return" is the mean of the last 100 finished training episodes for both (SB3's
``ep_info_buffer``, our ``train/return_mean``). Both use one torch thread. The time includes
interpreter start and imports. Target: lightning_rl no slower than SB3 (ratio <= 1).

Usage::

    python benchmarks/sac_pendulum.py --seeds 1 2
    python benchmarks/sac_pendulum.py --seeds 1 --sb3-budget 20000     # shorter (SB3 may not get there)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "sac" / "pendulum.yaml"
TARGET = -200.0

SB3_SCRIPT = """
import json, sys
import numpy as np
import torch
torch.set_num_threads(1)
from stable_baselines3 import SAC
from stable_baselines3.common.callbacks import BaseCallback

target, seed, budget = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])


class StopAtTarget(BaseCallback):
    solved = False

    def _on_step(self):
        buf = self.model.ep_info_buffer
        if buf and np.mean([e["r"] for e in buf]) >= target:
            self.solved = True
            return False
        return True


model = SAC("MlpPolicy", "Pendulum-v1", seed=seed, device="cpu", verbose=0)
callback = StopAtTarget()
model.learn(total_timesteps=budget, callback=callback)
buf = model.ep_info_buffer
print(json.dumps({"env_steps": model.num_timesteps, "solved": callback.solved,
                  "return_mean": float(np.mean([e["r"] for e in buf]))}))
"""


def run_lightning_rl(seed: int, budget: int) -> tuple[float, int, bool, float]:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "lightning_rl.cli", "fit", "--config", str(CONFIG), "--seed_everything",
               str(seed), "--trainer.enable_progress_bar", "false", "--model.init_args.total_env_steps", str(budget)]
        start = time.perf_counter()
        subprocess.run(cmd, cwd=tmp, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        elapsed = time.perf_counter() - start
        (last,) = Path(tmp).glob("runs/*/*/checkpoints/last.ckpt")
        state = torch.load(last, map_location="cpu", weights_only=False)
        steps = int(state["lightning_rl"]["train_state"]["env_steps"])
    # The config's EarlyStopping (train/return_mean >= -200) is the only way to stop before the budget.
    solved = steps < budget
    return elapsed, steps, solved, TARGET if solved else float("nan")


def run_sb3(seed: int, budget: int) -> tuple[float, int, bool, float]:
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", SB3_SCRIPT, str(TARGET), str(seed), str(budget)], check=True,
                         capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return elapsed, result["env_steps"], result["solved"], result["return_mean"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--budget", type=int, default=100_000, help="env-step budget of lightning_rl")
    parser.add_argument("--sb3-budget", type=int, default=60_000, help="env-step budget of SB3")
    parser.add_argument("--skip-sb3", action="store_true")
    args = parser.parse_args()
    runs = [("lightning_rl", run_lightning_rl, args.budget)]
    if not args.skip_sb3:
        runs.append(("sb3", run_sb3, args.sb3_budget))
    rows = []
    for seed in args.seeds:
        for name, fn, budget in runs:
            elapsed, steps, solved, score = fn(seed, budget)
            rows.append((name, seed, elapsed, steps, solved))
            print(f"{name:13s} seed {seed}: {elapsed:7.1f} s  {steps:7d} env steps  return_mean "
                  f"{'>= ' if name == 'lightning_rl' and solved else ''}{score:.1f}  solved={solved}", flush=True)
    print(f"\n{'framework':13s} {'mean s':>8s} {'mean env steps':>15s} {'solved':>7s}")
    means = {}
    for name, _, _ in runs:
        r = [row for row in rows if row[0] == name]
        means[name] = float(np.mean([x[2] for x in r]))
        print(f"{name:13s} {means[name]:8.1f} {np.mean([x[3] for x in r]):15.0f} {sum(x[4] for x in r):4d}/{len(r)}")
    if "sb3" in means:
        print(f"\ntime ratio lightning_rl / sb3 = {means['lightning_rl'] / means['sb3']:.2f} (target <= 1; "
              "an unsolved SB3 run makes this an upper bound)")


if __name__ == "__main__":
    main()
