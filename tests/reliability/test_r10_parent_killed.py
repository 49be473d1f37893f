"""Row 10: SIGKILL of the trainer while its workers sleep inside ``env.step`` ends every worker
within 5 s.

The child process builds one sampler in its main thread (workers armed with Linux's parent-death
signal) and one in another thread (workers watch their parent from a thread), then blocks in both
samplers' ``obtain_samples`` while every env sleeps forever in its second step.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.samplers.helpers import alive, wait_for_markers, wait_gone

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(
    """
    import sys, threading
    from lightning_rl.samplers import CpuSampler, GpuSampler
    from tests.samplers.helpers import ObsAgent, make_hanging_env

    def build(cls):
        sampler = cls(make_hanging_env, env_kwargs={"marker_dir": sys.argv[1]}, batch_T=4, batch_B=2, n_workers=2)
        sampler.initialize(ObsAgent(), seed=0)
        return sampler

    in_main = build(CpuSampler)
    built = []
    thread = threading.Thread(target=lambda: (built.append(build(GpuSampler)), built[0].obtain_samples(0)))
    thread.start()
    while not built:
        thread.join(0.01)
    print(*in_main.worker_pids, *built[0].worker_pids, flush=True)
    in_main.obtain_samples(0)
    """
)


@pytest.mark.timeout(120)
def test_sigkill_of_the_trainer_ends_workers_busy_in_env_step(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(tmp_path)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    pids: list[int] = []
    try:
        assert proc.stdout is not None
        pids = [int(p) for p in proc.stdout.readline().split()]
        assert len(pids) == 4, proc.stderr.read() if proc.stderr else ""
        # One marker per env, written when the env starts its never-ending step.
        markers = wait_for_markers(tmp_path, 4)
        assert {int(name.split("-")[0]) for name in markers} == set(pids)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        wait_gone(pids, timeout=5)
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in alive(pids):  # never leave a hung worker behind, even when the test fails
            os.kill(pid, signal.SIGKILL)
