"""Learning quality side by side: a shipped config and Stable-Baselines3 at the same budget.

Each cell is one shipped config (``configs/<algo>/<env>.yaml``) and the same algorithm in SB3 with
the hyperparameters read from that config (network sizes and activations, learning rate and its
linear decay, batch, n-steps, epochs, gamma, GAE lambda, clip range, entropy and value
coefficients, gradient clip, observation normalisation, replay size and ratio, random steps
first, tau, target noise). Runs go one at a time on this machine, each with one torch thread.

For both systems the return at an env-step point is the mean return of the last 20 training
episodes finished by then (stochastic policy, as both log it). Output, under ``--out``:

* ``learning.csv``: ``system, algorithm, env, seed, env_steps, return, wall_seconds`` at every
  ``--points`` fraction of the budget;
* ``learning.md``: mean +- std over seeds per system and point;
* ``learning.png`` (with matplotlib, the ``plot`` extra): mean curve and std band per system.

Usage::

    pip install -e ".[bench,plot]"
    python benchmarks/learning.py --cell ppo-halfcheetah --budget 200000 --seeds 1 2
    python benchmarks/learning.py --cell sac-hopper --budget 100000 --seeds 1 2 --systems lightning_rl
    python benchmarks/learning.py --cell ppo-halfcheetah --budget 50000 --seeds 1 \\
        --override model.init_args.agent.init_args.model.init_args.mu_nonlinearity=null

``--merge a/learning.csv b/learning.csv --out c`` writes one report of runs made apart (for example
ours and SB3's in two processes at once, one core each).

Multi-agent cells (PettingZoo envs, ``MultiAgentPPO``): one env step is one parallel step of the
whole env; the return is the team return (the sum of all agents' rewards over an episode), and
rows with ``agent=<name>`` give each agent's own return beside the ``team`` rows. Their SB3 side
is PettingZoo's tutorial recipe, ``--systems sb3_supersuit`` (``benchmarks/pettingzoo_sb3.py``:
SuperSuit parameter sharing + SB3 PPO with the tutorial's settings, not the config's). Example::

    python benchmarks/learning.py --cell mappo-simple_spread --budget 500000 --seeds 1 2 3 \
        --systems lightning_rl sb3_supersuit --out benchmarks/results/pettingzoo_simple_spread

``--override key=value`` (a dotted path into the YAML file, a YAML value) changes our side only,
for ablations; SB3 always gets the shipped config's values.
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

ROOT = Path(__file__).resolve().parents[1]
WINDOW = 20  # episodes in the reported mean return

CELLS = {
    "ppo-halfcheetah": "configs/ppo/halfcheetah.yaml",
    "ppo-hopper": "configs/ppo/halfcheetah.yaml:Hopper-v5",
    "sac-halfcheetah": "configs/sac/halfcheetah.yaml",
    "sac-hopper": "configs/sac/hopper.yaml",
    "td3-halfcheetah": "configs/td3/halfcheetah.yaml",
    "td3-hopper": "configs/td3/halfcheetah.yaml:Hopper-v5",
    # The memory comparison (lightning_rl only: SB3 has no R2D1).
    "r2d1-cartpole_pomdp": "configs/r2d1/cartpole_pomdp.yaml",
    "dqn-cartpole_pomdp": "configs/dqn/cartpole_pomdp.yaml",
    # Atari on CPU: the first steps of the shipped 10M-step schedule (--schedule_budget 10000000).
    "ppo-pong": "configs/ppo/pong.yaml",
    "dqn-pong": "configs/dqn/pong.yaml",
    # PettingZoo (mpe2): MAPPO as shipped, and IPPO (the same config with per-agent critics).
    "mappo-simple_spread": "configs/ppo/simple_spread.yaml",
    "ippo-simple_spread": "configs/ppo/simple_spread.yaml",
    "mappo-simple_adversary": "configs/ppo/simple_adversary.yaml",
    "ippo-simple_adversary": "configs/ppo/simple_adversary.yaml",
    # The algorithm pages' small cells: A2C and DDPG beside SB3's, C51 alone (SB3 has no C51).
    "a2c-cartpole": "configs/a2c/cartpole.yaml",
    "ddpg-pendulum": "configs/ddpg/pendulum.yaml",
    "c51-cartpole": "configs/categorical_dqn/cartpole.yaml",
}
#: Changes a cell makes to its config (dotted keys, as ``--override``).
CELL_OVERRIDES = {
    "ippo-simple_spread": ["model.init_args.agent.init_args.critic=local"],
    "ippo-simple_adversary": ["model.init_args.agent.init_args.critic=local"],
}


@dataclass
class Curve:
    """Finished training episodes of one run: env steps at the end of each, and its return
    (multi-agent runs: the team return, and ``agents``: each agent's own curve by name)."""

    steps: list[int]
    returns: list[float]
    wall: list[float]
    agents: dict[str, Curve] | None = None

    def at(self, env_steps: int) -> tuple[float, float]:
        """(mean return of the last ``WINDOW`` episodes finished by ``env_steps``, wall seconds then)."""
        done = [i for i, s in enumerate(self.steps) if s <= env_steps]
        if not done:
            return math.nan, math.nan
        last = done[-WINDOW:]
        return float(np.mean([self.returns[i] for i in last])), self.wall[done[-1]]


def load_cell(cell: str) -> tuple[dict[str, Any], str]:
    """The cell's config (as a dict) and env id (an ``:EnvId`` suffix replaces the config's)."""
    path, _, env_id = CELLS[cell].partition(":")
    config = yaml.safe_load((ROOT / path).read_text())
    sampler = config["model"]["init_args"]["sampler"]["init_args"]
    if env_id:
        sampler["env_id"] = env_id
    return config, sampler["env_id"]


# ----- lightning_rl -----


def run_lightning_rl(
    cell: str, seed: int, budget: int, overrides: list[str], schedule_budget: int | None = None
) -> Curve:
    import tempfile

    import pytorch_lightning as pl

    from lightning_rl.algos.base import RLModule
    from lightning_rl.cli import RLCLI, RLTrainer

    config, env_id = load_cell(cell)
    for item in CELL_OVERRIDES.get(cell, []) + overrides:
        key, _, value = item.partition("=")
        *parents, last = key.split(".")
        node = config
        for part in parents:
            node = node[part]
        node[last] = yaml.safe_load(value)
    config_file = tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False)
    with config_file:
        yaml.safe_dump(config, config_file)
    args = [
        "--config", config_file.name,
        "--seed_everything", str(seed),
        "--model.init_args.total_env_steps", str(schedule_budget or budget),
        "--trainer.logger", "false",
        "--trainer.enable_progress_bar", "false",
        "--trainer.enable_checkpointing", "false",
        "--trainer.callbacks", "[]",
    ]
    cli = RLCLI(RLModule, trainer_class=RLTrainer, subclass_mode_model=True, run=False, args=args)
    curve = Curve([], [], [])
    start = time.perf_counter()

    class Record(pl.Callback):
        # Runs before the module's EpisodeStatsCallback pops the episodes: only peeks.
        def on_train_batch_end(self, trainer: Any, pl_module: Any, *args: Any) -> None:
            now = time.perf_counter() - start
            for info in pl_module.train_state.new_traj_infos:
                curve.steps.append(pl_module.train_state.env_steps)
                curve.returns.append(float(info.Return))
                curve.wall.append(now)
                for name, value in info.get("AgentReturns", {}).items():
                    agents = curve.agents = curve.agents or {}
                    agent = agents.setdefault(name, Curve([], [], []))
                    agent.steps.append(pl_module.train_state.env_steps)
                    agent.returns.append(float(value))
                    agent.wall.append(now)
            if pl_module.train_state.env_steps >= budget:  # before a longer schedule's end
                trainer.should_stop = True

    trainer = pl.Trainer(max_epochs=-1, accelerator="cpu", logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, callbacks=[Record()])
    trainer.fit(cli.model)
    return curve


# ----- Stable-Baselines3 -----


def _linear(value: float, decay: bool) -> float | Callable[[float], float]:
    return (lambda f: value * f) if decay else value


def _activation(name: str | None) -> type[torch.nn.Module]:
    return {"torch.nn.Tanh": torch.nn.Tanh, "torch.nn.ReLU": torch.nn.ReLU, None: torch.nn.Tanh}[name]


def run_sb3(cell: str, seed: int, budget: int) -> Curve:
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    config, env_id = load_cell(cell)
    algo = config["model"]["init_args"]
    agent = algo["agent"]["init_args"]
    sampler = algo["sampler"]["init_args"]
    curve = Curve([], [], [])
    start = time.perf_counter()

    class Record(BaseCallback):
        def _on_step(self) -> bool:
            for info in self.locals["infos"]:
                if "episode" in info:
                    curve.steps.append(self.num_timesteps)
                    curve.returns.append(float(info["episode"]["r"]))
                    curve.wall.append(time.perf_counter() - start)
            return True

    name = config["model"]["class_path"].rsplit(".", 1)[-1]
    if name not in ("PPO", "A2C", "SAC", "TD3", "DDPG"):
        raise ValueError(f"--systems sb3: cell {cell!r} ({name}) has no SB3 counterpart here; run lightning_rl alone")
    B, T = sampler["batch_B"], sampler["batch_T"]
    env = make_vec_env(env_id, n_envs=B, seed=seed)
    if name == "PPO":
        from stable_baselines3 import PPO

        model_args = agent.get("model", {}).get("init_args", agent)
        if model_args.get("normalize_observation"):
            env = VecNormalize(env, norm_obs=True, norm_reward=False, clip_obs=10.0)
        hidden = list(model_args.get("hidden_sizes", [64, 64]))
        decay = bool(algo.get("linear_lr_schedule"))
        model = PPO(
            "MlpPolicy", env, n_steps=T, batch_size=T * B // algo["minibatches"], n_epochs=algo["epochs"],
            learning_rate=_linear(algo["learning_rate"], decay), clip_range=_linear(algo["ratio_clip"], decay),
            gamma=algo["discount"], gae_lambda=algo["gae_lambda"], ent_coef=algo["entropy_loss_coeff"],
            vf_coef=algo["value_loss_coeff"], max_grad_norm=algo["clip_grad_norm"], seed=seed, device="cpu",
            policy_kwargs=dict(net_arch=dict(pi=hidden, vf=hidden),
                               activation_fn=_activation(model_args.get("hidden_nonlinearity")),
                               log_std_init=model_args.get("init_log_std", 0.0),
                               ortho_init=model_args.get("orthogonal_init", True)),
        )
    elif name == "A2C":
        from stable_baselines3 import A2C

        hidden = list(agent.get("hidden_sizes", [64, 64]))
        optimizer = algo.get("optimizer") or {}
        rmsprop = optimizer.get("class_path") == "torch.optim.RMSprop"
        decay = bool(algo.get("linear_lr_schedule"))
        model = A2C(
            "MlpPolicy", env, n_steps=T, learning_rate=_linear(algo["learning_rate"], decay),
            gamma=algo["discount"], gae_lambda=algo["gae_lambda"], ent_coef=algo["entropy_loss_coeff"],
            vf_coef=algo["value_loss_coeff"], max_grad_norm=algo["clip_grad_norm"], use_rms_prop=rmsprop,
            rms_prop_eps=optimizer.get("init_args", {}).get("eps", 1e-5),
            normalize_advantage=bool(algo.get("normalize_advantage", False)), seed=seed, device="cpu",
            policy_kwargs=dict(net_arch=dict(pi=hidden, vf=hidden)),
        )
    else:
        from stable_baselines3 import DDPG, SAC, TD3
        from stable_baselines3.common.noise import NormalActionNoise

        common = dict(
            buffer_size=algo["replay_size"], learning_starts=algo["min_steps_learn"], batch_size=algo["batch_size"],
            tau=algo["target_update_tau"], gamma=algo["discount"], train_freq=T,
            gradient_steps=max(1, round(T * B * algo["replay_ratio"] / algo["batch_size"])),
            seed=seed, device="cpu",
        )
        if name == "SAC":
            model = SAC("MlpPolicy", env, learning_rate=algo["learning_rate"], ent_coef="auto",
                        policy_kwargs=dict(net_arch=dict(pi=list(agent["hidden_sizes"]),
                                                         qf=list(agent["q_hidden_sizes"]))), **common)
        elif name == "DDPG":
            if algo.get("q_learning_rate", algo["learning_rate"]) != algo["learning_rate"]:
                raise ValueError("SB3's DDPG has one learning rate; the config's q_learning_rate differs")
            n_actions = env.action_space.shape[0]
            model = DDPG("MlpPolicy", env, learning_rate=algo["learning_rate"], n_steps=algo.get("n_step_return", 1),
                         action_noise=NormalActionNoise(np.zeros(n_actions), agent["action_std"] * np.ones(n_actions)),
                         policy_kwargs=dict(net_arch=dict(pi=list(agent["hidden_sizes"]),
                                                          qf=list(agent["q_hidden_sizes"]))), **common)
        else:
            n_actions = env.action_space.shape[0]
            model = TD3("MlpPolicy", env, learning_rate=algo["learning_rate"],
                        action_noise=NormalActionNoise(np.zeros(n_actions), agent["action_std"] * np.ones(n_actions)),
                        policy_delay=algo["policy_update_interval"], target_policy_noise=agent["target_noise_std"],
                        target_noise_clip=agent["target_noise_clip"],
                        policy_kwargs=dict(net_arch=dict(pi=list(agent["hidden_sizes"]),
                                                         qf=list(agent["q_hidden_sizes"]))), **common)
    model.learn(total_timesteps=budget, callback=Record())
    return curve


# ----- report -----


def run_sb3_supersuit(cell: str, seed: int, budget: int) -> Curve:
    """PettingZoo's SuperSuit + SB3 recipe on the cell's env (``benchmarks/pettingzoo_sb3.py``)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import pettingzoo_sb3

    config, env_id = load_cell(cell)
    env_kwargs = config["model"]["init_args"]["sampler"]["init_args"].get("env_kwargs") or {}
    curves = pettingzoo_sb3.run(env_id, seed, budget, copies=8, n_steps=2048, env_kwargs=env_kwargs)

    def curve(points: list[tuple[int, float, float]]) -> Curve:
        return Curve([p[0] for p in points], [p[1] for p in points], [p[2] for p in points])

    team = curve(curves.pop("team"))
    team.agents = {name: curve(points) for name, points in curves.items()}
    return team


def read_rows(paths: list[Path]) -> list[dict[str, Any]]:
    """The rows of ``learning.csv`` files, typed as :func:`write_reports` writes them (files
    without an ``agent`` column hold team returns)."""
    rows: list[dict[str, Any]] = []
    for path in paths:
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                rows.append(dict(system=row["system"], algorithm=row["algorithm"], env=row["env"],
                                 seed=int(row["seed"]),
                                 env_steps=int(row["env_steps"]), **{"return": float(row["return"])},
                                 wall_seconds=float(row["wall_seconds"]), agent=row.get("agent") or "team"))
    return rows


def write_reports(rows: list[dict[str, Any]], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "learning.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    lines = ["| system | algorithm | env | env steps | return (mean +- std) | seeds | wall s (mean) |",
             "|---|---|---|---|---|---|---|"]
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    agent_rows = [r for r in rows if r.get("agent", "team") != "team"]
    rows = [r for r in rows if r.get("agent", "team") == "team"]
    for row in rows:
        groups.setdefault((row["system"], row["algorithm"], row["env"], row["env_steps"]), []).append(row)
    for (system, algorithm, env, steps), group in sorted(groups.items(), key=lambda kv: (kv[0][1:], kv[0][0])):
        returns = [r["return"] for r in group if not math.isnan(r["return"])]
        walls = [r["wall_seconds"] for r in group if not math.isnan(r["wall_seconds"])]
        spread = statistics.stdev(returns) if len(returns) > 1 else 0.0
        mean = statistics.mean(returns) if returns else math.nan
        lines.append(f"| {system} | {algorithm} | {env} | {steps:,} | {mean:.1f} +- {spread:.1f} | "
                     f"{len(returns)} | {statistics.mean(walls) if walls else math.nan:.0f} |")
    if agent_rows:
        # Each agent's own return at the last point, per system (mixed and competitive envs).
        last = max(r["env_steps"] for r in agent_rows)
        lines += ["", f"Each agent's own return at {last:,} env steps (mean +- std over seeds):", "",
                  "| system | algorithm | agent | return |", "|---|---|---|---|"]
        by_agent: dict[tuple[str, str, str], list[float]] = {}
        for r in agent_rows:
            if r["env_steps"] == last and not math.isnan(r["return"]):
                by_agent.setdefault((r["system"], r["algorithm"], r["agent"]), []).append(r["return"])
        for (system, algorithm, agent), values in sorted(by_agent.items()):
            spread = statistics.stdev(values) if len(values) > 1 else 0.0
            lines.append(f"| {system} | {algorithm} | {agent} | {statistics.mean(values):.1f} +- {spread:.1f} |")
    (out / "learning.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed (pip install -e '.[plot]'): no learning.png", file=sys.stderr)
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    # One curve per system and algorithm (MAPPO and IPPO of one system side by side).
    for key in sorted({(r["system"], r["algorithm"]) for r in rows}):
        mine = [r for r in rows if (r["system"], r["algorithm"]) == key]
        points = sorted({r["env_steps"] for r in mine})
        by_point = [[r["return"] for r in mine if r["env_steps"] == p] for p in points]
        mean = np.array([np.nanmean(v) for v in by_point])
        std = np.array([np.nanstd(v) for v in by_point])
        label = key[0] if len({r["algorithm"] for r in rows}) == 1 else f"{key[0]} {key[1]}"
        ax.plot(points, mean, label=label)
        ax.fill_between(points, mean - std, mean + std, alpha=0.2)
    ax.set_xlabel("env steps")
    ax.set_ylabel(f"mean return of the last {WINDOW} episodes")
    ax.set_title(f"{'/'.join(sorted({r['algorithm'] for r in rows}))} on {rows[0]['env']}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "learning.png", dpi=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cell", choices=sorted(CELLS))
    parser.add_argument("--budget", type=int, help="env steps per run")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--systems", nargs="+", choices=["lightning_rl", "sb3", "sb3_supersuit"],
                        default=["lightning_rl", "sb3"])
    parser.add_argument("--points", type=int, default=10, help="report points, evenly spaced over the budget")
    parser.add_argument("--override", action="append", default=[], help="key=value for our side only")
    parser.add_argument("--schedule_budget", type=int, default=None,
                        help="our side: total_env_steps of the schedules (LR decay) when the run stops at --budget "
                             "earlier, e.g. the first 200k steps of a 10M-step Atari config")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    parser.add_argument("--merge", type=Path, nargs="+", default=None,
                        help="learning.csv files of runs made apart (e.g. one process per system): write one "
                             "report of all their rows to --out, running nothing")
    args = parser.parse_args()
    if args.merge:
        write_reports(read_rows(args.merge), args.out)
        return
    if args.cell is None or args.budget is None:
        parser.error("--cell and --budget are required (unless --merge)")
    torch.set_num_threads(1)
    algorithm, _, _ = args.cell.partition("-")
    _, env_id = load_cell(args.cell)
    points = [args.budget * (i + 1) // args.points for i in range(args.points)]
    rows = []
    for seed in args.seeds:
        for system in args.systems:
            if system == "lightning_rl":
                curve = run_lightning_rl(args.cell, seed, args.budget, args.override, args.schedule_budget)
            elif system == "sb3_supersuit":
                curve = run_sb3_supersuit(args.cell, seed, args.budget)
            else:
                curve = run_sb3(args.cell, seed, args.budget)
            env_name = env_id.rsplit(".", 1)[-1]
            for agent, agent_curve in [("team", curve), *sorted((curve.agents or {}).items())]:
                for p in points:
                    ret, wall = agent_curve.at(p)
                    rows.append(dict(system=system, algorithm=algorithm, env=env_name, seed=seed, env_steps=p,
                                     **{"return": ret}, wall_seconds=wall, agent=agent))
            final, wall = curve.at(args.budget)
            print(f"{system:13s} {args.cell} seed {seed}: return {final:8.1f} at {args.budget:,} env steps, "
                  f"{wall:6.0f} s, {len(curve.returns)} episodes", flush=True)
    write_reports(rows, args.out)


if __name__ == "__main__":
    main()
