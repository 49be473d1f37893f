"""Replay throughput: lightning_rl replays next to Stable-Baselines3's ``ReplayBuffer``.

Measures, from a full buffer, the latency of ``sample_batch`` (uniform and prioritized, and
prioritized sample + ``update_batch_priorities``), the latency of appending one step, and the
bytes held per stored transition, for two shapes:

* Atari: uint8 ``[4, 84, 84]`` stacked frames, batch 32, frame replay (one frame stored per
  step) with 3-step returns. SB3 stores whole stacks, so it runs with
  ``optimize_memory_usage=True`` (no separate next observation) and, when its stacks (28 KB
  each) do not fit in half the free memory, with a smaller capacity (printed).
* MuJoCo: float32 17-d observations, 6-d actions, batch 256, 1-step returns.

Uniform and prioritized replay share one storage (the composition makes that a shallow copy
with another index sampler), so one fill serves both, and every measurement runs in
alternating blocks with the others: a busy machine slows them alike and the ratios hold.

Targets: Atari frame replay <= 7.2 KB per transition; uniform sampling at batch 32
from a full buffer no slower than SB3; prioritized sample + update within 3x of uniform.

Usage::

    python benchmarks/replay_throughput.py              # 1M capacity
    python benchmarks/replay_throughput.py --size 200000 --batches 500

SB3 is the optional ``bench`` extra (``pip install lightning-rl[bench]``); without it its rows
are skipped.
"""

from __future__ import annotations

import argparse
import copy
import gc
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import psutil
import torch

from lightning_rl.data import namedarraytuple
from lightning_rl.replays import ReplayBuffer, UniformIndex

Transition = namedarraytuple("Transition", ["observation", "action", "reward", "done", "truncated"])
CHUNK = 1000  # steps per append while filling
SHAPES = {  # batch size, n-step, approximate bytes per transition of ours and of SB3 (for sizing)
    "atari": (32, 3, 7.1e3, 4 * 84 * 84 + 16),
    "mujoco": (256, 1, 120, 300),
}


def interleaved_us(fns: dict[str, Callable[[], Any]], calls: int, blocks: int = 10) -> dict[str, float]:
    """Median over ``blocks`` of the mean microseconds per call, the functions taking turns."""
    for fn in fns.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    per_block = max(1, calls // blocks)
    for _ in range(blocks):
        for name, fn in fns.items():
            start = time.perf_counter()
            for _ in range(per_block):
                fn()
            times[name].append((time.perf_counter() - start) / per_block * 1e6)
    return {name: statistics.median(t) for name, t in times.items()}


def make_chunk(shape: str, rng: np.random.Generator) -> Any:
    """``CHUNK`` steps of one env as ``[CHUNK, 1]`` samples; episodes about 1000 steps long."""
    if shape == "atari":
        obs = rng.integers(0, 255, (CHUNK, 1, 4, 84, 84), dtype=np.uint8)
        action = rng.integers(0, 6, (CHUNK, 1))
    else:
        obs = rng.standard_normal((CHUNK, 1, 17)).astype(np.float32)
        action = rng.uniform(-1, 1, (CHUNK, 1, 6)).astype(np.float32)
    done = rng.random((CHUNK, 1)) < 1e-3
    truncated = done & (rng.random((CHUNK, 1)) < 0.5)
    return Transition(obs, action, rng.standard_normal((CHUNK, 1)).astype(np.float32), done, truncated)


def build_ours(shape: str, chunk: Any, size: int) -> tuple[ReplayBuffer, ReplayBuffer, float]:
    """A full prioritized replay, a uniform view of the same storage, and the fill seconds."""
    _, n_step, _, _ = SHAPES[shape]
    replay = ReplayBuffer(
        chunk[0, 0], size=size, B=1, n_step_return=n_step, prioritized=True,
        frame_stack=4 if shape == "atari" else None,
    )
    start = time.perf_counter()
    for _ in range(-(-size // CHUNK) + 1):
        replay.append_samples(chunk)
    fill_s = time.perf_counter() - start
    uniform = copy.copy(replay)
    uniform.sampler = UniformIndex(replay.storage, replay.sampler.min_age, exclude_truncated=True, rng=replay.rng)
    return replay, uniform, fill_s


def build_sb3(shape: str, chunk: Any, size: int) -> Any:
    """A full SB3 ``ReplayBuffer`` (arrays written directly: a million ``add`` calls take minutes)."""
    import gymnasium as gym
    from stable_baselines3.common.buffers import ReplayBuffer as SB3ReplayBuffer

    atari = shape == "atari"
    if atari:
        obs_space = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
        act_space = gym.spaces.Discrete(6)
    else:
        obs_space = gym.spaces.Box(-np.inf, np.inf, (17,), np.float32)
        act_space = gym.spaces.Box(-1, 1, (6,), np.float32)
    kwargs: dict[str, Any] = dict(device="cpu", n_envs=1, optimize_memory_usage=atari)
    if atari:
        kwargs["handle_timeout_termination"] = False  # SB3 cannot combine it with the option
    buf = SB3ReplayBuffer(size, obs_space, act_space, **kwargs)
    for start in range(0, size, CHUNK):
        n = min(size, start + CHUNK) - start
        buf.observations[start : start + n] = chunk.observation[:n]
        if not atari:
            buf.next_observations[start : start + n] = chunk.observation[:n]
        buf.actions[start : start + n] = chunk.action[:n].reshape(n, 1, -1)
        buf.rewards[start : start + n] = chunk.reward[:n]
        buf.dones[start : start + n] = chunk.done[:n]
    buf.full, buf.pos = True, 0
    return buf


def sb3_nbytes(buf: Any) -> int:
    names = ("observations", "next_observations", "actions", "rewards", "dones", "timeouts")
    return sum(getattr(buf, n).nbytes for n in names if getattr(buf, n, None) is not None)


def fit_size(size: int, bytes_per: float, what: str) -> int:
    """Largest capacity <= ``size`` using at most half the memory available now (shared machine)."""
    avail = psutil.virtual_memory().available
    fit = int(0.5 * avail / bytes_per) // CHUNK * CHUNK
    if fit < size:
        print(f"  {what}: {size:,} x {bytes_per / 1e3:.1f} KB does not fit in half of {avail / 1e9:.1f} GB "
              f"available; using capacity {fit:,}")
        return fit
    return size


def bench_shape(shape: str, size: int, calls: int, rng: np.random.Generator) -> list[dict]:
    batch, _, ours_bytes, sb3_bytes = SHAPES[shape]
    print(f"{shape}: batch {batch}")
    chunk = make_chunk(shape, rng)
    replay, uniform, fill_s = build_ours(shape, chunk, fit_size(size, ours_bytes, f"lightning_rl {shape}"))
    try:
        import stable_baselines3  # noqa: F401

        sb3 = build_sb3(shape, chunk, fit_size(size, sb3_bytes, f"SB3 {shape}"))
    except ImportError:
        print(f"  (stable_baselines3 not installed: SB3 {shape} rows skipped; pip install lightning-rl[bench])")
        sb3 = None
    priorities = rng.random(batch)

    def sample_update() -> None:
        b = replay.sample_batch(batch)
        replay.update_batch_priorities(b.idxs, priorities)

    fns = {
        "uniform": lambda: uniform.sample_batch(batch),
        "prioritized": lambda: replay.sample_batch(batch),
        "sample_update": sample_update,
    }
    if sb3 is not None:
        fns["sb3"] = lambda: sb3.sample(batch)
    sample = interleaved_us(fns, calls)
    # Appends last: the uniform view's appends leave the sum tree stale, so nothing samples after.
    one = chunk[:1]
    appends = {
        "prioritized": lambda: replay.append_samples(one),
        "uniform": lambda: uniform.append_samples(one),
    }
    if sb3 is not None:
        obs1, act1 = chunk.observation[0], chunk.action[0].reshape(1, -1)
        rew1, done1, infos = chunk.reward[0], chunk.done[0].astype(np.float32), [{}]
        appends["sb3"] = lambda: sb3.add(obs1, obs1, act1, rew1, done1, infos)
    append = interleaved_us(appends, calls)
    storage_bytes = replay.storage.nbytes / replay.size
    rows = [
        dict(shape=shape, batch=batch, lib="lightning_rl", kind="uniform", size=replay.size, bytes=storage_bytes,
             append=append["uniform"], sample=sample["uniform"], fill_s=fill_s),
        dict(shape=shape, batch=batch, lib="lightning_rl", kind="prioritized", size=replay.size,
             bytes=replay.nbytes / replay.size, append=append["prioritized"], sample=sample["prioritized"],
             sample_update=sample["sample_update"], fill_s=fill_s),
    ]
    if sb3 is not None:
        rows.append(dict(shape=shape, batch=batch, lib="SB3", kind="uniform", size=sb3.buffer_size,
                         bytes=sb3_nbytes(sb3) / sb3.buffer_size, append=append["sb3"], sample=sample["sb3"]))
    del replay, uniform, sb3
    gc.collect()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=1_000_000, help="replay capacity (transitions)")
    parser.add_argument("--batches", type=int, default=1000, help="timed calls per measurement")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--torch-threads", type=int, default=1,
        help="torch intra-op threads (SB3 copies batches with torch; with several threads on a busy "
        "machine its latency swings by 10-100x)",
    )
    args = parser.parse_args()
    torch.set_num_threads(args.torch_threads)
    rng = np.random.default_rng(args.seed)
    print(
        f"CPU threads: {psutil.cpu_count()}, torch threads: {torch.get_num_threads()}, load average: "
        f"{', '.join(f'{x:.1f}' for x in psutil.getloadavg())}, memory available: "
        f"{psutil.virtual_memory().available / 1e9:.1f} GB"
    )
    rows = [row for shape in SHAPES for row in bench_shape(shape, args.size, args.batches, rng)]
    header = (
        f"{'shape':7s} {'batch':>5s} {'library':13s} {'sampler':11s} {'capacity':>10s} {'bytes/trans':>11s} "
        f"{'append 1 (us)':>13s} {'sample (us)':>11s} {'sample+update (us)':>18s} {'fill (s)':>8s}"
    )
    print()
    print(header)
    print("-" * len(header))
    for r in rows:
        su = f"{r['sample_update']:.1f}" if "sample_update" in r else "-"
        fill = f"{r['fill_s']:.1f}" if "fill_s" in r else "-"
        print(
            f"{r['shape']:7s} {r['batch']:5d} {r['lib']:13s} {r['kind']:11s} {r['size']:10,d} {r['bytes']:11.1f} "
            f"{r['append']:13.1f} {r['sample']:11.1f} {su:>18s} {fill:>8s}"
        )
    print()
    for shape in SHAPES:
        by = {(r["lib"], r["kind"]): r for r in rows if r["shape"] == shape}
        uni, pri = by[("lightning_rl", "uniform")], by[("lightning_rl", "prioritized")]
        sb3 = by.get(("SB3", "uniform"))
        if shape == "atari":
            print(
                f"atari bytes/transition: {pri['bytes']:.0f} prioritized, {uni['bytes']:.0f} uniform "
                "(target <= 7200)"
            )
        if sb3 is not None:
            print(
                f"{shape} uniform sample latency: ours {uni['sample']:.1f} us, SB3 {sb3['sample']:.1f} us "
                f"(SB3 / ours = {sb3['sample'] / uni['sample']:.2f}; SB3 capacity {sb3['size']:,})"
            )
        ratio = pri["sample_update"] / uni["sample"]
        print(f"{shape} prioritized sample+update / uniform sample: {ratio:.2f}x (target <= 3)")


if __name__ == "__main__":
    main()
