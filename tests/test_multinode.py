"""Multi-node training on Lightning's own multi-node support, tested on one machine.

Two "nodes" of one process each start on localhost with ``torchrun --nnodes 2 --node-rank {0,1}``
(``python -m torch.distributed.run``, gloo, rendezvous on 127.0.0.1), each in its own working
directory as two machines would be, and train the shipped DQN CartPole config with a small budget
under ``--trainer.strategy ddp --trainer.num_nodes 2``. Checked:

* each rank's sampler seeds its env with its own seed: the first observation in each rank's replay
  is the reset observation of a gymnasium CartPole seeded ``seed_everything + rank`` (computed here
  with gymnasium itself);
* after the updates the parameters are equal on both ranks (and changed since the start);
* logged metrics are reduced across ranks: both ranks end with the same ``callback_metrics``;
* only rank 0 writes checkpoints and logs: node 1's directory stays empty;
* prioritized replay keeps its priorities per rank: each rank's sum tree holds priorities for its
  own 1,024 transitions at most, and the two trees differ;
* the checkpoint resumes on a different world size (one process): the documented result for
  per-rank replays and counters (docs/guides/scaling.md, "Resuming on another world size"): the
  resumed run gets rank 0's replay and rank 0's counters, so its global env-step count restarts
  from one rank's share and a warning says so.

Every process runs with a hard timeout in its own process group, so a hang fails the test instead
of hanging CI.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pytest
import pytorch_lightning as pl
import torch

ROOT = Path(__file__).resolve().parents[1]
CONFIG = str(ROOT / "configs" / "dqn" / "cartpole.yaml")
SEED = 1  # configs/dqn/cartpole.yaml's seed_everything
#: 2 ranks x 4 iterations of 256 env steps; 32 updates of batch 64 per iteration from 512 env steps on;
#: prioritized replay, whose priorities stay per rank (docs/guides/replay-buffers.md, "Under DDP").
SMALL = [
    "--model.init_args.total_env_steps", "2048", "--model.init_args.log_interval_steps", "512",
    "--model.init_args.min_steps_learn", "512", "--model.init_args.replay_ratio", "8",
    "--model.init_args.prioritized_replay", "true",
    "--trainer.enable_progress_bar", "false",
]  # fmt: skip
TIMEOUT_S = 240


class Record(pl.Callback):
    """Writes what this rank saw to ``<out_dir>/<tag>_rank<r>.json``: counters, the replay, the
    parameters and the logged metrics at the start and at the end of training."""

    def __init__(self, out_dir: str, tag: str = "fit") -> None:
        self.out_dir = out_dir
        self.tag = tag
        self.start: dict[str, Any] = {}

    @staticmethod
    def _state(pl_module: Any) -> dict[str, Any]:
        replay = pl_module.replay
        tree = replay.sampler.tree
        return {
            "env_steps": int(pl_module.train_state.env_steps),
            "global_env_steps": int(pl_module.global_env_steps),
            "replay_n_stored": None if replay is None else int(replay.n_stored),
            "priority_total": float(tree.total),
            "prioritized_slots": int((tree.leaves > 0).sum()),
            "params": torch.cat([p.detach().flatten() for p in pl_module.parameters()]).double().tolist(),
        }

    def on_train_start(self, trainer: pl.Trainer, pl_module: Any) -> None:
        self.start = self._state(pl_module)

    def on_train_end(self, trainer: pl.Trainer, pl_module: Any) -> None:
        replay = pl_module.replay
        out = {
            "rank": trainer.global_rank,
            "world_size": trainer.world_size,
            "num_nodes": trainer.num_nodes,
            "start": self.start,
            "end": self._state(pl_module),
            "first_observation": replay.storage.buffers["observation"][0, 0].tolist(),
            "metrics": {k: float(v) for k, v in trainer.callback_metrics.items()},
        }
        Path(self.out_dir, f"{self.tag}_rank{trainer.global_rank}.json").write_text(json.dumps(out))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def record_args(out_dir: Path, tag: str) -> list[str]:
    return [
        f"--trainer.callbacks+={__name__}.Record",
        f"--trainer.callbacks.out_dir={out_dir}", f"--trainer.callbacks.tag={tag}",
    ]  # fmt: skip


def finish(procs: list[subprocess.Popen], logs: list[Path]) -> list[str]:
    """Wait for every process (killing the group of any still running at the timeout); their output."""
    try:
        for proc in procs:
            proc.wait(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pass
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    return [log.read_text() for log in logs]


def start(cmd: list[str], cwd: Path, log: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    with open(log, "w") as out:
        return subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory) -> dict[str, Any]:
    """The two-node run, then its checkpoint resumed by one process."""
    base = tmp_path_factory.mktemp("multinode")
    out = base / "records"
    out.mkdir()
    nodes = [base / "node0", base / "node1"]
    port = free_port()
    procs, logs = [], []
    for rank, cwd in enumerate(nodes):
        cwd.mkdir()
        cmd = [
            sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "1",
            "--node-rank", str(rank), "--master-addr", "127.0.0.1", "--master-port", str(port),
            "-m", "lightning_rl.cli", "fit", "--config", CONFIG, *SMALL,
            "--trainer.strategy", "ddp", "--trainer.num_nodes", "2", "--trainer.devices", "1",
            "--trainer.accelerator", "cpu", *record_args(out, "fit"),
        ]  # fmt: skip
        logs.append(base / f"node{rank}.log")
        procs.append(start(cmd, cwd, logs[-1]))
    texts = finish(procs, logs)
    for proc, text in zip(procs, texts, strict=True):
        assert proc.returncode == 0, text[-4000:]
    ckpts = list(nodes[0].glob("runs/dqn_cartpole/*/checkpoints/last.ckpt"))
    assert len(ckpts) == 1, texts[0][-3000:]
    written = {str(node): sorted(p.relative_to(node).as_posix() for p in node.rglob("*")) for node in nodes}
    resume_log = base / "resume.log"
    cmd = [
        sys.executable, "-m", "lightning_rl.cli", "fit", "--config", CONFIG, *SMALL,
        "--ckpt_path", str(ckpts[0]), *record_args(out, "resume"),
    ]  # fmt: skip
    resume = start(cmd, nodes[0], resume_log)
    (resume_text,) = finish([resume], [resume_log])
    assert resume.returncode == 0, resume_text[-4000:]
    records = {p.stem: json.loads(p.read_text()) for p in out.glob("*.json")}
    return {"nodes": nodes, "written": written, "records": records, "logs": texts, "resume_log": resume_text}


def test_two_nodes_form_one_world_of_two_ranks(two_nodes):
    records = two_nodes["records"]
    assert sorted(records) == ["fit_rank0", "fit_rank1", "resume_rank0"]
    for rank in (0, 1):
        assert records[f"fit_rank{rank}"]["world_size"] == 2
        assert records[f"fit_rank{rank}"]["num_nodes"] == 2
        # Each rank's own share of the 2048-step budget: 4 iterations of 256 steps.
        assert records[f"fit_rank{rank}"]["end"]["env_steps"] == 1024
        assert records[f"fit_rank{rank}"]["end"]["global_env_steps"] == 2048


def test_each_rank_samples_with_its_own_seed(two_nodes):
    records = two_nodes["records"]
    for rank in (0, 1):
        expected, _ = gymnasium.make("CartPole-v1").reset(seed=SEED + rank)
        np.testing.assert_array_equal(np.float32(records[f"fit_rank{rank}"]["first_observation"]), expected)
    assert records["fit_rank0"]["first_observation"] != records["fit_rank1"]["first_observation"]


def test_parameters_are_equal_on_both_ranks_after_updates(two_nodes):
    rank0, rank1 = two_nodes["records"]["fit_rank0"], two_nodes["records"]["fit_rank1"]
    assert rank0["start"]["params"] == rank1["start"]["params"]  # DDP broadcasts rank 0's initial weights
    assert rank0["end"]["params"] == rank1["end"]["params"]
    assert rank0["end"]["params"] != rank0["start"]["params"]  # the updates happened


def test_metrics_are_reduced_across_ranks(two_nodes):
    rank0, rank1 = two_nodes["records"]["fit_rank0"], two_nodes["records"]["fit_rank1"]
    # perf/* measure each rank's own process (ThroughputCallback) and stay per rank.
    metrics0 = {k: v for k, v in rank0["metrics"].items() if not k.startswith("perf/")}
    metrics1 = {k: v for k, v in rank1["metrics"].items() if not k.startswith("perf/")}
    assert {"eval/return_mean", "train/return_mean", "train/loss"} <= set(metrics0)
    assert metrics0 == metrics1
    # Both ranks' evaluation episodes: 10 eval envs each, the first 10 episodes to end on each rank.
    assert metrics0["eval/episodes"] == 20


def test_only_rank_0_writes_checkpoints_and_logs(two_nodes):
    node0, node1 = (str(node) for node in two_nodes["nodes"])
    assert two_nodes["written"][node1] == []
    run_dirs = {p for p in two_nodes["written"][node0] if p.count("/") == 2}
    assert len(run_dirs) == 1
    (run_dir,) = run_dirs
    names = {p.removeprefix(run_dir + "/") for p in two_nodes["written"][node0] if p.startswith(run_dir + "/")}
    assert {"config.yaml", "checkpoints/last.ckpt"} <= names
    assert any(n.startswith("events.out.tfevents.") for n in names)


def test_prioritized_replay_priorities_stay_per_rank(two_nodes):
    rank0, rank1 = two_nodes["records"]["fit_rank0"]["end"], two_nodes["records"]["fit_rank1"]["end"]
    for end in (rank0, rank1):
        # Only this rank's transitions have priorities (the newest n_step_return - 1 = 2 rows wait
        # for their n-step targets), in a tree of this rank's capacity.
        assert 0 < end["prioritized_slots"] <= end["replay_n_stored"] == 1024
    assert rank0["priority_total"] != rank1["priority_total"]


def test_a_two_rank_checkpoint_resumes_on_one_process_with_rank_0s_replay_and_counters(two_nodes):
    records = two_nodes["records"]
    resumed, rank0 = records["resume_rank0"], records["fit_rank0"]
    assert resumed["world_size"] == 1
    # Rank 0's replay (1024 transitions of its own env) and rank 0's per-rank counter.
    assert rank0["end"]["replay_n_stored"] == 1024
    assert resumed["start"]["replay_n_stored"] == 1024
    assert resumed["first_observation"] == rank0["first_observation"]
    assert resumed["start"]["env_steps"] == 1024
    assert resumed["start"]["params"] == rank0["end"]["params"]
    assert resumed["start"]["priority_total"] == rank0["end"]["priority_total"]  # rank 0's sum tree
    # One rank now: 1024 global env steps at the start, so 4 more iterations reach the 2048 budget.
    assert resumed["start"]["global_env_steps"] == 1024
    assert resumed["end"]["global_env_steps"] == 2048
    assert "written by 2 processes" in two_nodes["resume_log"]
