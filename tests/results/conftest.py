"""Builders of run directories with known scalars, for the results tests.

A run directory here is what ``lightning-rl fit`` and ``lightning-rl launch`` write:
``config.yaml`` (model class path, sampler env id, ``seed_everything``) and TensorBoard event files, inside
``<grid>/<variant>/runs/<group>/<date-time>/`` with the variant's ``variant.yaml`` two levels up.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.summary.writer.record_writer import RecordWriter
from torch.utils.tensorboard import SummaryWriter


def write_config(run_dir: Path, seed: int | None = 0, algo: str = "lightning_rl.algos.PPO",
                 env_id: str = "CartPole-v1") -> None:
    """A ``config.yaml`` holding what the reader looks at (and a trainer section, as real ones do)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    config: dict[str, Any] = {
        "seed_everything": seed,
        "trainer": {"max_epochs": -1},
        "model": {"class_path": algo, "init_args": {"sampler": {"init_args": {"env_id": env_id}}}},
    }
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config))


def write_scalars(run_dir: Path, scalars: dict[str, list[tuple[int, float]]]) -> None:
    """TensorBoard events through torch's ``SummaryWriter``: ``tag -> [(step, value), ...]``."""
    writer = SummaryWriter(log_dir=str(run_dir))
    for tag, points in scalars.items():
        for step, value in points:
            writer.add_scalar(tag, value, global_step=step)
    writer.close()


def write_events_file(path: Path, first_wall_time: float, scalars: list[tuple[str, int, float, float]]) -> None:
    """An event file with every wall time chosen: the file-version event at ``first_wall_time``, then
    ``(tag, step, wall_time, value)`` scalars (what ``SummaryWriter`` writes, with its clock replaced)."""
    with open(path, "wb") as f:
        writer = RecordWriter(f)
        writer.write(Event(wall_time=first_wall_time, file_version="brain.Event:2").SerializeToString())
        for tag, step, wall_time, value in scalars:
            summary = Summary(value=[Summary.Value(tag=tag, simple_value=value)])
            writer.write(Event(wall_time=wall_time, step=step, summary=summary).SerializeToString())
        writer.flush()


def make_run(
    root: Path, variant: dict[str, Any] | None, seed: int | None, scalars: dict[str, list[tuple[int, float]]],
    name: str | None = None, algo: str = "lightning_rl.algos.PPO", env_id: str = "CartPole-v1",
) -> Path:
    """A grid variant ``<root>/<name>/`` (its ``config.yaml`` and ``variant.yaml``, seed included, as the
    launcher writes them) holding one run ``runs/ppo_cartpole/2026-01-01_00-00-00/``; its run directory.

    Without ``variant`` there is no ``variant.yaml``.
    """
    name = name or "_".join(f"{k.rsplit('.', 1)[-1]}_{v}" for k, v in (variant or {}).items()) + f"_seed_{seed}"
    variant_dir = root / name
    write_config(variant_dir, seed, algo, env_id)
    if variant is not None:
        (variant_dir / "variant.yaml").write_text(yaml.safe_dump({**variant, "seed_everything": seed}))
    run_dir = variant_dir / "runs" / "ppo_cartpole" / "2026-01-01_00-00-00"
    write_config(run_dir, seed, algo, env_id)
    (run_dir / "checkpoints").mkdir()
    write_scalars(run_dir, scalars)
    return run_dir
