"""The local launcher: pinning and thread counts, resume and skip rules, failures, timeouts and stops.

Most tests run a stand-in for the interpreter (``FAKE``): it records what it was given and behaves as
``behaviour.json`` in its variant directory says. The last test launches a real 2-variant grid.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest
import torch
import yaml

from lightning_rl.cli import main
from lightning_rl.launch.affinity import Slot, machine_cpus
from lightning_rl.launch.local import grid_lock, launch_local, print_summary
from tests.launch.conftest import seen, variant

ROOT = Path(__file__).resolve().parents[2]

def two_slots() -> list[Slot]:
    cpus = machine_cpus()
    return [Slot(0, (cpus[0],), 1, None), Slot(1, (cpus[-1],), 1, None)]


def test_each_run_is_pinned_to_its_slot_with_as_many_threads_as_cores(tmp_path: Path, fake_python: str) -> None:
    a, b = variant(tmp_path, "a"), variant(tmp_path, "b")
    slots = two_slots()
    results, stopped = launch_local([a, b], slots, python=fake_python)
    assert stopped is None
    assert [r.status for r in results] == ["finished", "finished"]
    assert seen(a)["cpus"] == list(slots[0].cpus) and seen(b)["cpus"] == list(slots[1].cpus)
    assert (seen(a)["omp"], seen(a)["mkl"]) == ("1", "1")
    assert seen(a)["argv"] == ["-m", "lightning_rl.cli", "fit", "--config", "config.yaml"]
    # The child imports this checkout, whatever its working directory.
    assert seen(a)["pythonpath"].split(os.pathsep)[0] == str(ROOT)
    assert yaml.safe_load((a / "done").read_text())["exit_status"] == 0


def test_done_variants_are_skipped_and_checkpointed_ones_resume(tmp_path: Path, fake_python: str) -> None:
    done, resumable, stale = variant(tmp_path, "done"), variant(tmp_path, "resumable"), variant(tmp_path, "stale")
    (done / "done").write_text("exit_status: 0\nenv_steps: 5\nwall_time_s: 1.0\n")
    checkpoints = resumable / "runs" / "config" / "2026-01-01_00-00-00" / "checkpoints"
    checkpoints.mkdir(parents=True)
    torch.save({"lightning_rl": {"train_state": {"env_steps": 77}}}, checkpoints / "last.ckpt")
    (stale / "runs" / "config" / "2026-01-01_00-00-00").mkdir(parents=True)  # died before its first checkpoint

    results, _ = launch_local([done, resumable, stale], two_slots(), parallel=1, python=fake_python)

    assert [r.status for r in results] == ["skipped", "finished", "finished"]
    assert not (done / "seen.json").exists()
    assert seen(resumable)["argv"][-2:] == ["--ckpt_path", "last"]
    assert yaml.safe_load((resumable / "done").read_text())["env_steps"] == 77
    assert "--ckpt_path" not in seen(stale)["argv"]
    assert not (stale / "runs").exists()  # nothing to resume there: the new run is the variant's only one


def test_a_failed_run_does_not_stop_the_grid_and_is_reported_with_its_log(
    tmp_path: Path, fake_python: str, capsys: pytest.CaptureFixture[str]
) -> None:
    dirs = [variant(tmp_path, "a"), variant(tmp_path, "b", exit=3), variant(tmp_path, "c")]
    results, _ = launch_local(dirs, two_slots(), parallel=1, python=fake_python)
    assert [(r.status, r.exit_status) for r in results] == [("finished", 0), ("failed", 3), ("finished", 0)]
    assert not (dirs[1] / "done").exists()
    assert results[1].log == dirs[1] / "stderr.log"
    print_summary(results)
    out = capsys.readouterr().out
    assert str(dirs[1] / "stderr.log") in out and "2 finished, 1 failed" in out


def test_a_run_past_its_timeout_is_stopped_and_counts_as_failed(tmp_path: Path, fake_python: str) -> None:
    slow = variant(tmp_path, "slow", sleep=60)
    results, _ = launch_local([slow], two_slots(), python=fake_python, run_timeout_s=1.0, stop_grace_s=10.0)
    assert (results[0].status, results[0].exit_status) == ("failed", 1)
    assert (slow / "got_sigint").exists()  # asked to save first, as after Ctrl-C


def test_sigterm_on_the_launcher_stops_every_child_and_leaves_them_resumable(
    tmp_path: Path, fake_python: str
) -> None:
    dirs = [variant(tmp_path, "a", sleep=60), variant(tmp_path, "b", sleep=60), variant(tmp_path, "c")]

    def terminate_once_both_run() -> None:
        deadline = time.monotonic() + 30
        while not all((d / "seen.json").exists() for d in dirs[:2]) and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGTERM)

    killer = threading.Thread(target=terminate_once_both_run)
    killer.start()
    before = signal.getsignal(signal.SIGTERM)
    results, stopped = launch_local(dirs, two_slots(), python=fake_python, stop_grace_s=10.0)
    killer.join(timeout=30)
    assert stopped == signal.SIGTERM
    assert [r.status for r in results] == ["interrupted", "interrupted", "pending"]
    assert all((d / "got_sigint").exists() and not (d / "done").exists() for d in dirs[:2])
    assert not (dirs[2] / "seen.json").exists()  # nothing new starts once stopping
    assert signal.getsignal(signal.SIGTERM) is before


def test_parallel_beyond_the_slots_and_a_second_launcher_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="parallel=3: the affinity gives 2 slot"):
        launch_local([], two_slots(), parallel=3)
    with grid_lock(tmp_path):
        with pytest.raises(ValueError, match=f"another launcher is running the grid .*pid {os.getpid()}"), \
                grid_lock(tmp_path):
            pass


def test_a_real_grid_finishes_then_a_relaunch_resumes_only_the_unfinished_variant(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "grid.yaml").write_text(yaml.safe_dump({
        "base": str(ROOT / "configs" / "ppo" / "cartpole.yaml"),
        "overrides": {"model.init_args.total_env_steps": 128, "model.init_args.log_interval_steps": 64,
                      "model.init_args.epochs": 1, "model.init_args.sampler.init_args.batch_T": 16,
                      "model.init_args.sampler.init_args.batch_B": 2},
        "levels": [{"seed_everything": [0, 1]}],
    }))
    with pytest.raises(SystemExit) as first:
        main(["launch", "grid.yaml", "--grid_dir", "g"])
    assert first.value.code == 0
    seed0, seed1 = tmp_path / "g" / "seed_0", tmp_path / "g" / "seed_1"
    for directory in (seed0, seed1):
        assert yaml.safe_load((directory / "done").read_text())["env_steps"] == 128
        (run,) = list(directory.glob("runs/ppo_cartpole/*"))  # the contract's <variant>/runs/<group>/<date-time>/
        assert (run / "config.yaml").is_file() and (run / "checkpoints" / "last.ckpt").is_file()
        assert list(run.glob("events.out.tfevents.*"))

    (seed1 / "done").unlink()  # as if it had been killed after its last checkpoint, before the marker
    with pytest.raises(SystemExit) as second:
        main(["launch", "grid.yaml", "--grid_dir", "g"])
    assert second.value.code == 0
    assert (seed0 / "stdout.log").read_text().count("=== ") == 1  # not run again
    # Its run had reached the budget: the resume says so and trains nothing; the variant is done again.
    assert "already reached its budget (128 of total_env_steps=128" in (seed1 / "stdout.log").read_text()
    assert yaml.safe_load((seed1 / "done").read_text())["resumed"] is True
    assert len(list(seed1.glob("runs/ppo_cartpole/*"))) == 1  # continued in its run directory
