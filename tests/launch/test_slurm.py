"""The grid through submitit: a job array and one job per variant on submitit's local executor, and the
requeue on preemption (the missing-extra error: test_cli.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from lightning_rl.launch.slurm import VariantJob, submit_grid, wait_for
from tests.launch.conftest import seen, variant


def test_a_job_array_on_submitits_local_executor_runs_every_variant_once(tmp_path: Path, fake_python: str) -> None:
    dirs = [variant(tmp_path / "grid", "a"), variant(tmp_path / "grid", "b")]
    jobs = submit_grid(dirs, tmp_path / "submitit", cluster="local", time_min=5, cpus_per_task=3, array=True,
                       python=fake_python)
    assert len(jobs) == 2
    outcomes = wait_for(jobs, timeout_s=120, poll_s=0.2)
    assert all("'status': 'finished'" in outcome for _, outcome in outcomes), outcomes
    for directory in dirs:
        assert seen(directory)["argv"] == ["-m", "lightning_rl.cli", "fit", "--config", "config.yaml"]
        assert seen(directory)["omp"] == "3"  # the job's CPUs
        assert yaml.safe_load((directory / "done").read_text())["exit_status"] == 0
    # Submitting again: nothing left to run.
    assert submit_grid(dirs, tmp_path / "submitit", cluster="local", python=fake_python) == []


def test_one_job_per_variant_and_a_failing_run_fails_its_job_naming_the_log(tmp_path: Path, fake_python: str) -> None:
    good, bad = variant(tmp_path / "grid", "good"), variant(tmp_path / "grid", "bad", exit=2)
    jobs = submit_grid([good, bad], tmp_path / "submitit", cluster="local", array=False, python=fake_python)
    outcomes = dict(wait_for(jobs, timeout_s=120, poll_s=0.2))
    assert "'status': 'finished'" in outcomes[jobs[0].job_id]
    assert "bad: exit status 2; log: " in outcomes[jobs[1].job_id]
    assert (good / "done").exists() and not (bad / "done").exists()


def test_preemption_asks_the_run_to_save_and_requeues_the_same_variant(tmp_path: Path) -> None:
    job = VariantJob(threads=2, timeout_s=60)
    # A stand-in run that exits 0 on SIGUSR1, as a fit does after saving last.ckpt.
    job._process = subprocess.Popen([sys.executable, "-c", (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGUSR1, lambda *_: sys.exit(0))\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n")], stdout=subprocess.PIPE)
    assert job._process.stdout is not None and job._process.stdout.readline() == b"ready\n"
    delayed = job.checkpoint(str(tmp_path))
    assert job._process.returncode == 0  # it got SIGUSR1, not a kill
    assert delayed.args == (str(tmp_path),)
    assert (delayed.function.threads, delayed.function.timeout_s) == (2, 60)


def test_bad_submission_parameters_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cpus_per_task must be at least 1"):
        submit_grid([tmp_path], tmp_path, cpus_per_task=0)
    with pytest.raises(ValueError, match="cluster must be 'slurm', 'local' or 'debug'"):
        submit_grid([tmp_path], tmp_path, cluster="pbs")
