"""Row 11: Ctrl-C and SIGTERM during ``lightning-rl fit`` with a parallel sampler.

Three runs of PPO CartPole with a two-worker ``CpuSampler`` go side by side (to keep the wall
time down); each gets its signal once its first checkpoint exists, so the training loop and
every signal handler are in place:

* ``sigint``: the CLI's ``RunDirectoryCallback`` turns the first Ctrl-C into "save ``last.ckpt``
  and stop", exit status 0 (``lightning_rl/cli.py``'s docstring);
* ``sigint_lightning``: the same callback with ``signals: []``, so Lightning's own handling
  applies: ``KeyboardInterrupt`` wherever the main process is (often waiting on the workers),
  ``on_exception`` hooks, exit status 1;
* ``sigterm``: the same callback saves ``last.ckpt`` at the end of the batch and stops, exit
  status 143 (a scheduler's pre-emption resumes exactly).

Each must exit within 10 s, end its workers before it exits (the sampler was shut down, not
orphaned), print no ``resource_tracker``/``leaked`` warning and leave ``/dev/shm`` as it was.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
import pytorch_lightning as pl
import torch

from tests.samplers.helpers import alive, parallel_ppo_fit_command, wait_gone
from tests.signals import sigint_default_in_child

ROOT = Path(__file__).resolve().parents[2]
# One rollout per epoch, so the first checkpoint (the cue for the signal) comes soon.
COMMAND = parallel_ppo_fit_command(ROOT)
NO_CLI_HANDLER = ["--trainer.callbacks+=lightning_rl.callbacks.RunDirectoryCallback", "--trainer.callbacks.signals=[]"]
RUNS = {
    "sigint": (signal.SIGINT, []),
    "sigint_lightning": (signal.SIGINT, NO_CLI_HANDLER),
    "sigterm": (signal.SIGTERM, []),
}


def last_checkpoint(cwd: Path) -> Path | None:
    """The run's ``last.ckpt`` (in its run directory ``runs/ppo_cartpole/<date-time>/``), None before it exists."""
    return next(cwd.glob("runs/ppo_cartpole/*/checkpoints/last.ckpt"), None)


def shm_entries() -> set[str]:
    return set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, dict[str, Any]]:
    """Start the three runs, signal each once it has checkpointed, and record how each ended."""
    shm_before = shm_entries()
    started: dict[str, dict[str, Any]] = {}
    try:
        for name, (_, extra) in RUNS.items():
            cwd = tmp_path_factory.mktemp(name)
            # stderr to a file: a pipe nobody reads could fill up and stall the run.
            stderr = open(cwd / "stderr.txt", "w")  # noqa: SIM115 - closed below
            # PYTHONFAULTHANDLER: a run that hangs prints its threads' stacks on the SIGABRT below.
            env = {**os.environ, "PYTHONFAULTHANDLER": "1"}
            proc = subprocess.Popen([*COMMAND, *extra], cwd=cwd, stdout=subprocess.DEVNULL, stderr=stderr, env=env,
                                    preexec_fn=sigint_default_in_child)  # also when the test run ignores SIGINT
            started[name] = {"proc": proc, "cwd": cwd, "stderr_file": stderr}
        deadline = time.monotonic() + 180
        waiting = set(started)
        while waiting and time.monotonic() < deadline:
            for name in sorted(waiting):
                run = started[name]
                if run["proc"].poll() is not None:
                    waiting.discard(name)  # ended early: the tests below say how
                elif last_checkpoint(run["cwd"]) is not None:
                    run["workers"] = [p.pid for p in psutil.Process(run["proc"].pid).children(recursive=True)]
                    run["signalled_at"] = time.monotonic()
                    run["proc"].send_signal(RUNS[name][0])
                    waiting.discard(name)
            time.sleep(0.05)
        # Every run's exit time, polled together (waiting for them in turn would charge one run's
        # slow exit to the runs waited for after it).
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and any(r["proc"].poll() is None for r in started.values()):
            for run in started.values():
                if "ended_at" not in run and run["proc"].poll() is not None:
                    run["ended_at"] = time.monotonic()
                    # Before anything else can reap them: a closed sampler has joined its workers.
                    run["alive_at_exit"] = alive(run.get("workers", []))
            time.sleep(0.05)
        for run in started.values():
            if run["proc"].poll() is None:
                run["proc"].send_signal(signal.SIGABRT)  # still running: its stacks go to its stderr file
                run["proc"].wait(timeout=10)
            run.setdefault("ended_at", time.monotonic())
            run.setdefault("alive_at_exit", alive(run.get("workers", [])))
            run["exited_after"] = run["ended_at"] - run.get("signalled_at", run["ended_at"])
            wait_gone(run.get("workers", []), timeout=5)
            run["stderr_file"].close()
            run["stderr"] = (run["cwd"] / "stderr.txt").read_text()
            run["returncode"] = run["proc"].returncode
        for run in started.values():
            run["new_shm"] = shm_entries() - shm_before
    finally:
        for run in started.values():
            if run["proc"].poll() is None:
                run["proc"].kill()
            for pid in alive(run.get("workers", [])):
                os.kill(pid, signal.SIGKILL)
    return started


@pytest.mark.parametrize("name", list(RUNS))
def test_exits_within_10_s_after_closing_its_samplers_and_leaks_nothing(runs, name):
    run = runs[name]
    assert "signalled_at" in run, f"{name} ended before its first checkpoint:\n{run['stderr'][-3000:]}"
    assert len(run["workers"]) == 2
    assert run["exited_after"] < 10, run["stderr"][-6000:]
    assert run["returncode"] >= 0, "killed by the signal instead of handling it"
    assert run["alive_at_exit"] == []
    assert "resource_tracker" not in run["stderr"] and "leaked" not in run["stderr"]
    assert run["new_shm"] == set()


def test_first_sigint_saves_last_checkpoint_and_exits_1(runs):
    # Status 1 as Lightning's own Ctrl-C handling, so 'fit && play' stops there; the checkpoint saved.
    run = runs["sigint"]
    assert run["returncode"] == 1, run["stderr"][-3000:]
    assert "Received SIGINT: saving" in run["stderr"]
    checkpoint = torch.load(last_checkpoint(run["cwd"]), weights_only=True, map_location="cpu")
    assert checkpoint["global_step"] > 0


def test_sigint_under_lightnings_own_handling_exits_1(runs):
    run = runs["sigint_lightning"]
    assert run["returncode"] == 1, run["stderr"][-3000:]
    assert "Detected KeyboardInterrupt, attempting graceful shutdown" in run["stderr"]


def test_sigterm_saves_last_checkpoint_and_exits_143(runs):
    run = runs["sigterm"]
    assert "signalled_at" in run, f"the run ended before its first checkpoint:\n{run['stderr'][-3000:]}"
    assert run["returncode"] == 143, run["stderr"][-3000:]
    assert "Received SIGTERM: saving" in run["stderr"]
    checkpoint = torch.load(last_checkpoint(run["cwd"]), weights_only=True, map_location="cpu")
    assert checkpoint["global_step"] > 0


class FailThenHang(pl.Callback):
    """Fails the first training batch, then never returns from ``on_exception``: a shutdown that hangs."""

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        raise RuntimeError("boom from FailThenHang")

    def on_exception(self, trainer, pl_module, exception):
        time.sleep(600)


def test_a_shutdown_that_hangs_ends_the_process_after_shutdown_timeout_s(tmp_path):
    # RunDirectoryCallback comes first, so its on_exception arms the watchdog before FailThenHang's hangs.
    command = [
        *COMMAND,
        "--trainer.callbacks+=lightning_rl.callbacks.RunDirectoryCallback", "--trainer.callbacks.shutdown_timeout_s=3",
        f"--trainer.callbacks+={__name__}.FailThenHang",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with open(tmp_path / "stderr.txt", "w") as stderr:
        proc = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=stderr, env=env)
        try:
            proc.wait(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
    text = (tmp_path / "stderr.txt").read_text()
    assert proc.returncode == 1, text[-3000:]
    assert "Timeout (0:00:03)!" in text, text[-3000:]  # faulthandler's dump of every thread
    assert "in on_exception" in text and "test_r11_sigint_sigterm.py" in text, text[-3000:]
