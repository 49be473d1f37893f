"""Env steps per second of every sampler, next to gymnasium's AsyncVectorEnv and raw stepping.

For each env (CartPole-v1, HalfCheetah-v5, Atari Pong with lightning_rl's AtariEnv
preprocessing) and each batch size ``B``, one table row gives:

* ``raw``: one env stepped with random actions in this process, no agent: the per-core ceiling
  (the ``x cores`` column multiplies it by the CPUs available);
* ``AsyncVec``: ``gymnasium.vector.AsyncVectorEnv`` over ``B`` copies of the same env, with the
  same agent forward pass for all ``B`` envs at every step;
* one column per sampler (``T x B`` batches, agent acting as in training);
* the vector-env backend (``--vector``, Atari Pong and CartPole): ``rawVec`` steps the
  vector env itself (ale-py's ``AtariVectorEnv`` or gymnasium's ``CartPoleVectorEnv``) with random
  actions, ``rawEnvPool`` EnvPool's (Pong, when ``envpool`` is installed), ``VecRand`` is
  :class:`~lightning_rl.samplers.VectorSampler` with a random agent (no forward pass), ``Vector``
  the same with the policy, ``VecOvl`` with ``overlap=True`` (Atari: two halves take turns, the
  policy acting for one while the other steps), ``VecPool`` the EnvPool backend with the policy.
  ``ceil`` is the policy-in-the-loop ceiling from the measured costs:
  ``B / (t_env + t_policy)`` when stepping and inference take turns (as they do here), and
  ``B / max(t_env, t_policy)`` in brackets if they overlapped perfectly on 2 cores. The summary
  gives ``VecOvl`` against the all-cores ceiling ``cores / (1 / raw + t_policy / B)``.

``--device cuda`` puts the policy on the GPU wherever the main process acts (Serial, Gpu,
Alternating, the vector columns and AsyncVec; CpuSampler's workers act on their CPU copy, as in
training) and adds the GPU target's summary line (Pong x 16: ``Vector`` / ``VecOvl`` at
least 2x the best existing sampler).

Run ``python benchmarks/sampler_throughput.py --quick`` for a short run (B = 2, 8). Numbers on
a shared or busy machine are noisy; compare columns of one run only, and use ``--rounds 3`` (each
cell measured three times, raw stepping before and after every round, medians reported).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import Any

import gymnasium
import numpy as np
import torch

from lightning_rl.agents import CategoricalPgAgent, GaussianPgAgent
from lightning_rl.agents.base import AgentStep
from lightning_rl.envs import AtariEnv, make_env
from lightning_rl.envs.make import atari_game_from_id, is_atari_id
from lightning_rl.samplers import (
    AlternatingSampler,
    CpuSampler,
    GpuSampler,
    NoOverlapAlternatingSampler,
    SerialSampler,
    VectorSampler,
)

SAMPLERS = {
    "Serial": SerialSampler,
    "Cpu": CpuSampler,
    "Gpu": GpuSampler,
    "Alternating": AlternatingSampler,
    "NoOverlapAlt": NoOverlapAlternatingSampler,
}
ENVS = {"cartpole": "CartPole-v1", "halfcheetah": "HalfCheetah-v5", "pong": "ALE/Pong-v5"}


def make_agent(env_id: str) -> Any:
    """The agent benchmarked with ``env_id``: categorical PG (MLP or Atari conv) or Gaussian PG."""
    if env_id.startswith("HalfCheetah"):
        return GaussianPgAgent(hidden_sizes=(64, 64))
    return CategoricalPgAgent(hidden_sizes=(64, 64))


class AtariGymnasiumEnv(gymnasium.Env):
    """lightning_rl's :class:`AtariEnv` behind the gymnasium API, for ``AsyncVectorEnv``."""

    def __init__(self, game: str) -> None:
        self.env = AtariEnv(game=game)
        self.observation_space = gymnasium.spaces.Box(0, 255, self.env.observation_space.shape, np.uint8)
        self.action_space = gymnasium.spaces.Discrete(int(self.env.action_space.n))

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self.env.seed(seed)
        return self.env.reset(), {}

    def step(self, action: Any):
        o, r, d, info = self.env.step(action)
        return o, r, d and not info.truncated, bool(info.truncated), {}


class RandomPgAgent(CategoricalPgAgent):
    """Uniform random actions without a forward pass: the sampler's own cost, no policy."""

    def step(self, observation: Any, prev_action: Any, prev_reward: Any) -> AgentStep:
        n = len(observation)
        return AgentStep(torch.randint(0, int(self.env_spaces.action.n), (n,)), None)


def vector_backend(env_id: str) -> str | None:
    """The VectorSampler backend benchmarked for ``env_id`` (None: no vector env)."""
    if is_atari_id(env_id):
        return "ale"
    spec = gymnasium.spec(env_id)
    return "gymnasium" if spec.vector_entry_point is not None else None


def bench_raw_vector(env_id: str, B: int, seconds: float, envpool: bool = False, n_workers: int | None = None
                     ) -> float:
    """Random actions through the vector env (ale-py, gymnasium entry point or EnvPool), no agent;
    ``n_workers``: ale-py's thread count as the sampler's argument sets it (None: its default)."""
    if envpool:
        import envpool as ep

        venv = ep.make_gymnasium(env_id.split("/")[-1], num_envs=B, repeat_action_probability=0.0)
    else:
        sampler = VectorSampler(env_id, batch_B=B, backend=vector_backend(env_id), n_workers=n_workers)  # type: ignore[arg-type]
        venv, _ = sampler.make_vector_env(B, {"repeat_action_probability": 0.0} if is_atari_id(env_id) else {})
    venv.reset(seed=0)
    n_actions = int(venv.single_action_space.n)
    rng = np.random.default_rng(0)
    actions = [rng.integers(0, n_actions, B) for _ in range(64)]

    def run() -> int:
        for a in actions:
            venv.step(a)
        return 64 * B

    try:
        return timed(run, seconds)
    finally:
        venv.close()


#: Where the policy acts in the main process (``--device``).
DEVICE = torch.device("cpu")


def bench_policy_cost(env_id: str, B: int, seconds: float) -> float:
    """Seconds per ``agent.step`` on ``B`` observations (the shipped model, torch threads 1), on
    ``DEVICE`` (inputs from NumPy and actions back to the CPU, as in sampling)."""
    env = make_env(env_id, seed=0)
    obs = np.stack([env.reset()] * B)
    agent = make_agent(env_id)
    agent.initialize(env.spaces)
    agent.to_device(DEVICE)
    agent.sample_mode(0)
    prev_action = np.zeros(B, dtype=np.int64)
    prev_reward = np.zeros(B, dtype=np.float32)

    def run() -> int:
        for _ in range(20):
            agent.step(obs, prev_action, prev_reward)
        return 20

    return 1.0 / timed(run, seconds)


def gymnasium_factory(env_id: str) -> Callable[[], gymnasium.Env]:
    if is_atari_id(env_id):
        game = atari_game_from_id(env_id)
        return lambda: AtariGymnasiumEnv(game)
    return lambda: gymnasium.make(env_id)


def timed(step: Callable[[], int], seconds: float) -> float:
    """Call ``step`` (returns env steps done) after one warm-up call until ``seconds`` pass; steps/s."""
    step()
    n, start = 0, time.perf_counter()
    while True:
        n += step()
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return n / elapsed


def bench_raw(env_id: str, seconds: float) -> float:
    env = make_env(env_id, seed=0)
    env.reset()
    space = env.action_space

    def run() -> int:
        for _ in range(200):
            if env.step(space.sample()).done:
                env.reset()
        return 200

    rate = timed(run, seconds)
    env.close()
    return rate


def bench_sampler(cls: type, env_id: str, B: int, T: int, seconds: float, random_agent: bool = False,
                  **extra: Any) -> float:
    kwargs: dict[str, Any] = {"backend": vector_backend(env_id)} | extra if cls is VectorSampler else {}
    if is_atari_id(env_id):
        kwargs["env_kwargs"] = {"repeat_action_probability": 0.0}  # as the shipped Pong configs
    sampler = cls(env_id, batch_T=T, batch_B=B, **kwargs)
    try:
        agent = RandomPgAgent() if random_agent else make_agent(env_id)
        sampler.initialize(agent, seed=0)
        if not random_agent and not getattr(sampler, "workers_act", False):
            agent.to_device(DEVICE)  # as Lightning's setup does after the sampler's initialize
        itrs = iter(range(10**9))

        def run() -> int:
            sampler.obtain_samples(next(itrs))
            return T * B

        return timed(run, seconds)
    finally:
        sampler.shutdown()


def bench_async_vector(env_id: str, B: int, T: int, seconds: float) -> float:
    spaces = make_env(env_id).spaces
    agent = make_agent(env_id)
    agent.initialize(spaces)
    agent.to_device(DEVICE)
    agent.sample_mode(0)
    envs = gymnasium.vector.AsyncVectorEnv([gymnasium_factory(env_id)] * B)
    try:
        obs, _ = envs.reset(seed=0)
        prev_action = np.zeros((B,) + tuple(spaces.action.shape), dtype=spaces.action.dtype)
        prev_reward = np.zeros(B, dtype=np.float32)

        def run() -> int:
            nonlocal obs, prev_action, prev_reward
            for _ in range(T):
                action = agent.step(obs, prev_action, prev_reward).action.numpy()
                obs, reward, terminated, truncated, _ = envs.step(action)
                done = terminated | truncated
                prev_action = np.where(done.reshape((B,) + (1,) * (action.ndim - 1)), 0, action)
                prev_reward = np.where(done, 0.0, reward).astype(np.float32)
            return T * B

        return timed(run, seconds)
    finally:
        envs.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", nargs="+", default=list(ENVS), choices=list(ENVS))
    parser.add_argument("--batch-B", nargs="+", type=int, default=[2, 8, 16])
    parser.add_argument("--samplers", nargs="+", default=list(SAMPLERS), choices=list(SAMPLERS))
    parser.add_argument("--batch-T", type=int, default=64, help="time steps per batch (Atari: half)")
    parser.add_argument("--seconds", type=float, default=3.0, help="measuring time per cell")
    parser.add_argument("--no-async", action="store_true", help="skip the AsyncVectorEnv column")
    parser.add_argument("--rounds", type=int, default=1, help="measure every cell this many times (medians)")
    parser.add_argument("--quick", action="store_true", help="B = 2, 8 and 1.5 s per cell")
    parser.add_argument("--vector", action="store_true", help="add the vector-env backend columns")
    parser.add_argument("--device", default="cpu", help="where the main process's policy acts (cpu, cuda)")
    args = parser.parse_args(argv)
    global DEVICE
    DEVICE = torch.device(args.device)
    if DEVICE.type == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch sees no CUDA device")
    if args.quick:
        args.batch_B = [b for b in args.batch_B if b <= 8]
        args.seconds = min(args.seconds, 1.5)
    torch.set_num_threads(1)
    n_cpus = len(os.sched_getaffinity(0))
    vector_columns = ["rawVec", "rawEnvPool", "VecRand", "Vector", "VecOvl", "VecPool", "ceil"] if args.vector else []
    columns = ["env", "B", "raw", f"raw x{n_cpus}"] + ([] if args.no_async else ["AsyncVec"]) + args.samplers
    columns += vector_columns
    rows: list[list[str]] = []
    summary: list[str] = []
    where = torch.cuda.get_device_name(DEVICE) if DEVICE.type == "cuda" else "CPU"
    print(f"env steps/s; {n_cpus} CPUs, torch threads 1 in the main process, policy on {where} "
          f"(CpuSampler's workers: CPU), {args.seconds:.1f} s per cell")
    for name in args.envs:
        env_id = ENVS[name]
        T = max(1, args.batch_T // 2) if is_atari_id(env_id) else args.batch_T
        for B in args.batch_B:
            # Raw stepping before and after every round, and the median over rounds: on a shared
            # host the ceiling drifts by 10-20% within minutes.
            raws: list[float] = [bench_raw(env_id, args.seconds)]
            trials: dict[str, list[float]] = {}
            for _ in range(args.rounds):
                if not args.no_async:
                    trials.setdefault("AsyncVec", []).append(bench_async_vector(env_id, B, T, args.seconds))
                for s in args.samplers:
                    cls = SAMPLERS[s]
                    if not (issubclass(cls, AlternatingSampler) and B % 2):
                        trials.setdefault(s, []).append(bench_sampler(cls, env_id, B, T, args.seconds))
                if args.vector and vector_backend(env_id) is not None:
                    trials.setdefault("rawVec", []).append(bench_raw_vector(env_id, B, args.seconds))
                    if is_atari_id(env_id) and _has_envpool():
                        trials.setdefault("rawEnvPool", []).append(bench_raw_vector(env_id, B, args.seconds, True))
                    trials.setdefault("VecRand", []).append(
                        bench_sampler(VectorSampler, env_id, B, T, args.seconds, random_agent=True))
                    trials.setdefault("Vector", []).append(bench_sampler(VectorSampler, env_id, B, T, args.seconds))
                    if _has_envpool():
                        trials.setdefault("VecPool", []).append(
                            bench_sampler(VectorSampler, env_id, B, T, args.seconds, backend="envpool"))
                    if is_atari_id(env_id) and B % 2 == 0:
                        trials.setdefault("VecOvl", []).append(
                            bench_sampler(VectorSampler, env_id, B, T, args.seconds, overlap=True))
                    trials.setdefault("policy_s", []).append(bench_policy_cost(env_id, B, args.seconds))
                raws.append(bench_raw(env_id, args.seconds))
            raw = float(np.median(raws))
            cells = {k: float(np.median(v)) for k, v in trials.items()}
            policy_s = cells.pop("policy_s", None)
            ceiling = None
            if policy_s is not None:
                t_env = B / cells["rawVec"]
                ceiling = (B / (t_env + policy_s), B / max(t_env, policy_s))
            row = [name, str(B), f"{raw:,.0f}", f"{raw * n_cpus:,.0f}"]
            row += [f"{cells[c]:,.0f}" if c in cells else "-" for c in columns[4:] if c != "ceil"]
            if args.vector:
                row.append("-" if ceiling is None else f"{ceiling[0]:,.0f} ({ceiling[1]:,.0f})")
            rows.append(row)
            print("  " + " | ".join(row), flush=True)
            if "Vector" in cells and ceiling is not None:
                existing = {s: v for s, v in cells.items() if s in SAMPLERS}
                best_existing = max(existing.values()) if existing else float("nan")
                summary.append(
                    f"  {name} B={B}: VecRand = {cells['VecRand'] / cells['rawVec']:.0%} of raw vector stepping and "
                    f"{cells['VecRand'] / best_existing:.2f}x the best existing sampler; Vector (policy) = "
                    f"{cells['Vector'] / best_existing:.2f}x the best existing sampler, {cells['Vector'] / ceiling[0]:.0%} "
                    f"of the take-turns ceiling, {cells['Vector'] / ceiling[1]:.0%} of the overlap ceiling"
                )
            if "VecOvl" in cells and policy_s is not None:
                # Every core busy: one env step's CPU (single-env raw stepping) plus one agent
                # step's share of a forward pass, spread over the cores.
                cores = n_cpus / (1 / raw + policy_s / B)
                summary.append(
                    f"  {name} B={B}: VecOvl (overlap=True, policy) = {cells['VecOvl'] / best_existing:.2f}x the best "
                    f"existing sampler, {cells['VecOvl'] / cells['Vector']:.2f}x Vector, {cells['VecOvl'] / cores:.0%} "
                    f"of the {n_cpus}-core ceiling {cores:,.0f}"
                )
            if DEVICE.type == "cuda" and "Vector" in cells:
                existing = {s: v for s, v in cells.items() if s in SAMPLERS}
                best = max(existing, key=existing.get)
                fastest = max(("Vector", "VecOvl"), key=lambda c: cells.get(c, 0.0))
                summary.append(
                    f"  {name} B={B}, policy on the GPU: {fastest} = {cells[fastest]:,.0f} env steps/s = "
                    f"{cells[fastest] / existing[best]:.2f}x the best existing sampler ({best}, "
                    f"{existing[best]:,.0f}); target >= 2x"
                )
            parallel = {s: v for s, v in cells.items() if s in SAMPLERS and s != "Serial"}
            if parallel:
                best = max(parallel, key=parallel.get)
                line = f"  {name} B={B}: best parallel sampler {best} = {parallel[best] / raw:.0%} of raw stepping"
                if "AsyncVec" in cells:
                    line += f", {parallel[best] / cells['AsyncVec']:.2f}x AsyncVectorEnv"
                summary.append(line)
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(columns)]
    print()
    print("| " + " | ".join(c.ljust(w) for c, w in zip(columns, widths)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        print("| " + " | ".join(v.rjust(w) for v, w in zip(r, widths)) + " |")
    print()
    print("\n".join(summary))
    print("targets (Atari, B=8): >= 85% of raw stepping, >= 1.2x AsyncVectorEnv")


def _has_envpool() -> bool:
    try:
        import envpool  # noqa: F401
    except ImportError:
        return False
    return True


if __name__ == "__main__":
    main()
