"""Row 7: a sampler worker SIGKILLed mid-batch raises ``SamplerWorkerDied`` and leaves nothing behind.

The sampler-level test kills a worker while it is inside ``env.step`` of an outstanding batch;
the ``fit``-level test kills one under ``lightning-rl fit`` and checks the exit status and that
the last checkpoint still loads.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import psutil
import pytest
import torch

from lightning_rl.runs import newest_checkpoint
from lightning_rl.samplers import AlternatingSampler, CpuSampler, GpuSampler, SamplerWorkerDied
from tests.samplers.helpers import ObsAgent, alive, make_hanging_env, parallel_ppo_fit_command, wait_gone

ROOT = Path(__file__).resolve().parents[2]
PARALLEL = [CpuSampler, GpuSampler, AlternatingSampler]


def children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True) if p.pid in alive([p.pid])}


@pytest.mark.parametrize("sampler_cls", PARALLEL)
def test_sigkill_of_a_worker_mid_batch_raises_sampler_worker_died(sampler_cls, tmp_path):
    before = children()
    # Every env hangs in its second step, so the batch is certainly outstanding when the kill comes.
    sampler = sampler_cls(
        make_hanging_env, env_kwargs={"marker_dir": str(tmp_path)}, batch_T=4, batch_B=4, n_workers=2
    )
    sampler.initialize(ObsAgent(alternating=sampler_cls is AlternatingSampler), seed=10)
    pids = sampler.worker_pids
    killed_at: list[float] = []

    def kill_worker_1() -> None:
        # Markers are "<pid>-<seed>": wait until worker 1 sits inside env.step, then kill it.
        deadline = time.monotonic() + 30
        while not any(name.startswith(f"{pids[1]}-") for name in os.listdir(tmp_path)):
            if time.monotonic() > deadline:
                return
            time.sleep(0.02)
        killed_at.append(time.monotonic())
        os.kill(pids[1], signal.SIGKILL)

    killer = threading.Thread(target=kill_worker_1)
    killer.start()
    try:
        with pytest.raises(SamplerWorkerDied) as info:
            sampler.obtain_samples(0)
        raised_at = time.monotonic()
    finally:
        killer.join()
        sampler.shutdown()
    assert killed_at, "worker 1 never reached its hanging step"
    assert raised_at - killed_at[0] < 10
    error = info.value
    assert isinstance(error, RuntimeError)  # what callers caught before SamplerWorkerDied existed
    assert (error.worker, error.pid, error.exitcode, error.signal) == (1, pids[1], -9, "SIGKILL")
    assert error.last_command == "collect (itr 0)"
    assert f"sampler worker 1 ({sampler_cls.__name__}-worker-1, pid {pids[1]}) died unexpectedly" in str(error)
    assert "killed by SIGKILL" in str(error) and "collect (itr 0)" in str(error)
    deadline = time.monotonic() + 5
    while children() - before and time.monotonic() < deadline:
        time.sleep(0.02)
    assert children() - before == set()
    assert alive(pids) == []


def test_sigkill_of_a_worker_during_fit_exits_non_zero_and_keeps_the_last_checkpoint(tmp_path):
    cmd = parallel_ppo_fit_command(ROOT)
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    def last_checkpoint():  # in the run directory, once written
        return newest_checkpoint(tmp_path / "runs" / "ppo_cartpole")

    try:
        deadline = time.monotonic() + 120
        while last_checkpoint() is None and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        last = last_checkpoint()
        assert last is not None, "no checkpoint was written before the kill"
        workers = [p.pid for p in psutil.Process(proc.pid).children(recursive=True)]
        assert len(workers) == 2
        killed_at = time.monotonic()
        os.kill(workers[1], signal.SIGKILL)
        stderr = proc.communicate(timeout=60)[1]
        exited_after = time.monotonic() - killed_at
    finally:
        if proc.poll() is None:
            proc.kill()
    assert exited_after < 10
    assert proc.returncode != 0
    assert re.search(rf"SamplerWorkerDied: sampler worker \d \(CpuSampler-worker-\d, pid {workers[1]}\) died", stderr)
    assert "killed by SIGKILL" in stderr
    wait_gone(workers, timeout=5)
    checkpoint = torch.load(last, weights_only=False, map_location="cpu")
    assert checkpoint["global_step"] > 0
