"""VectorSampler(backend="ale") env steps per second against the emulator thread count.

``n_workers`` sets ale-py's thread count (default: one per env up to the CPU count; with
``overlap``, ``(CPUs - 1) // 2`` per half). On a machine with many cores the main thread, which
acts and does the bookkeeping, competes with the emulator threads; this script measures, in one
run, raw ``AtariVectorEnv`` stepping and the sampler with a random agent (``VecRand``), with the
policy (``Vector``) and with ``overlap`` (``VecOvl``) for each thread count, so the default can be
chosen from numbers.

Usage::

    python benchmarks/vector_threads.py --batch-B 16 --threads 0 15 12 8 --device cuda
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

from lightning_rl.samplers import VectorSampler

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sampler_throughput as st  # noqa: E402 - the sampler benchmark's cells, from this folder

ENV_ID = "ALE/Pong-v5"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch-B", type=int, default=8)
    parser.add_argument("--batch-T", type=int, default=32)
    parser.add_argument("--threads", nargs="+", type=int, default=[0, 1, 2],
                        help="n_workers values (0: the sampler's default); with overlap, per half")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    st.DEVICE = torch.device(args.device)
    B, T = args.batch_B, args.batch_T
    print(f"Pong x {B}, {len(os.sched_getaffinity(0))} CPUs, policy on {st.DEVICE}, env steps/s")
    print("| n_workers | rawVec | VecRand | Vector | VecOvl |")
    print("|---|---|---|---|---|")
    for n in args.threads:
        workers = None if n == 0 else n
        raw = st.bench_raw_vector(ENV_ID, B, args.seconds, n_workers=workers)
        rand = st.bench_sampler(VectorSampler, ENV_ID, B, T, args.seconds, random_agent=True, n_workers=workers)
        policy = st.bench_sampler(VectorSampler, ENV_ID, B, T, args.seconds, n_workers=workers)
        overlap = st.bench_sampler(VectorSampler, ENV_ID, B, T, args.seconds, n_workers=workers, overlap=True)
        print(f"| {n or 'default'} | {raw:,.0f} | {rand:,.0f} | {policy:,.0f} | {overlap:,.0f} |", flush=True)


if __name__ == "__main__":
    main()
