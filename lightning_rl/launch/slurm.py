"""A grid on Slurm through ``submitit`` (the ``slurm`` extra): one job per variant, or one job array.

Each job runs :class:`VariantJob` on one variant directory: the same rules as the local launcher
(a ``done`` variant is skipped, a run with ``last.ckpt`` continues with ``--ckpt_path last``,
stdout/stderr appended to the variant's logs, a ``done`` marker on success). Slurm pins the job to
its CPUs and GPUs; the job gives the run as many torch/OpenMP/MKL threads as it has CPUs. On a
time limit or preemption submitit calls :meth:`VariantJob.checkpoint`: the run is told to save
(SIGUSR1: ``last.ckpt``) and the job is requeued, so it continues where it stopped.

``cluster="local"`` runs the same jobs through submitit's local executor (subprocesses on this
machine), which is how the tests run them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import submitit

from lightning_rl.launch.local import DONE, child_environment, fit_command, write_done

__all__ = ["VariantJob", "submit_grid", "wait_for"]

#: Seconds a run gets to save ``last.ckpt`` after SIGUSR1 before the job is requeued anyway.
SAVE_GRACE_S = 90.0


class VariantJob:
    """The callable a submitit job runs: one variant to its end (picklable, as submitit needs).

    Args:
        threads: torch/OpenMP/MKL threads of the run (Slurm's ``SLURM_CPUS_PER_TASK`` wins where set).
        timeout_s: The longest a run may take (the job's time limit); the wait on it ends there.
        python: The interpreter that runs ``lightning_rl.cli``.
    """

    def __init__(self, threads: int = 1, timeout_s: float = 24 * 3600.0, python: str = sys.executable) -> None:
        self.threads = threads
        self.timeout_s = timeout_s
        self.python = python
        self._process: subprocess.Popen[bytes] | None = None
        self._checkpointing = False

    def __getstate__(self) -> dict[str, Any]:
        return {"threads": self.threads, "timeout_s": self.timeout_s, "python": self.python}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)  # type: ignore[misc]

    def __call__(self, variant_dir: str) -> dict[str, Any]:
        """Run (or continue) the variant in ``variant_dir``; its summary.

        Raises:
            RuntimeError: If the run exits with a non-zero status or outlives ``timeout_s`` (naming its log).
        """
        directory = Path(variant_dir)
        if (directory / DONE).is_file():
            return {"variant": directory.name, "status": "skipped"}
        command, resumed = fit_command(directory, self.python)
        threads = os.environ.get("SLURM_CPUS_PER_TASK", str(self.threads))
        env = child_environment({"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads})
        started = time.monotonic()
        with open(directory / "stdout.log", "a") as stdout, open(directory / "stderr.log", "a") as stderr:
            for log in (stdout, stderr):
                log.write(f"=== submitit job {os.environ.get('SLURM_JOB_ID', os.getpid())}: {' '.join(command[1:])}\n")
                log.flush()
            self._process = subprocess.Popen(
                command, cwd=directory, stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL, env=env
            )
            try:
                code = self._process.wait(timeout=self.timeout_s)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(timeout=SAVE_GRACE_S)
                raise RuntimeError(
                    f"{directory.name}: still running after {self.timeout_s:.0f} s; log: {directory / 'stderr.log'}"
                ) from None
        wall = time.monotonic() - started
        if self._checkpointing:  # stopped to be requeued: not finished
            return {"variant": directory.name, "status": "requeued"}
        if code != 0:
            raise RuntimeError(f"{directory.name}: exit status {code}; log: {directory / 'stderr.log'}")
        steps = write_done(directory, code, wall, resumed)
        return {"variant": directory.name, "status": "finished", "env_steps": steps, "wall_time_s": wall,
                "resumed": resumed}

    def checkpoint(self, variant_dir: str) -> submitit.helpers.DelayedSubmission:
        """submitit's hook on a time limit or preemption: the run saves ``last.ckpt`` (SIGUSR1) and the
        job is requeued with the same variant, which then continues from it."""
        self._checkpointing = True
        process = self._process
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGUSR1)
            try:
                process.wait(timeout=SAVE_GRACE_S)
            except subprocess.TimeoutExpired:
                process.kill()
        return submitit.helpers.DelayedSubmission(VariantJob(self.threads, self.timeout_s, self.python), variant_dir)


def submit_grid(
    variant_dirs: Sequence[Path],
    folder: str | Path,
    *,
    cluster: str = "slurm",
    partition: str | None = None,
    time_min: int = 60,
    cpus_per_task: int = 1,
    gpus_per_task: int = 0,
    mem_gb: float | None = None,
    array: bool = True,
    array_parallelism: int | None = None,
    name: str = "lightning-rl",
    python: str = sys.executable,
) -> list[submitit.Job[Any]]:
    """Submit the variants that are not ``done`` through a submitit ``AutoExecutor``.

    Args:
        variant_dirs: Variant directories (each with ``config.yaml``).
        folder: submitit's folder for its job files and logs.
        cluster: ``slurm``, or ``local`` / ``debug`` to run the jobs on this machine through submitit.
        partition: Slurm partition (``--partition``).
        time_min: Time limit per job in minutes.
        cpus_per_task: CPUs per job (and the run's thread count).
        gpus_per_task: GPUs per job.
        mem_gb: Memory per job in GB (None: the cluster's default).
        array: One job array (``executor.map_array``); False: one job per variant.
        array_parallelism: The most array tasks running at once (Slurm's ``%N``).
        name: The jobs' name.
        python: The interpreter the jobs run ``lightning_rl.cli`` with (the same path on the nodes).

    Returns:
        The submitted jobs, in the order of the variants left to run.

    Raises:
        ValueError: If a count is below its minimum or ``cluster`` is not one submitit knows.
    """
    for label, value, least in (("time_min", time_min, 1), ("cpus_per_task", cpus_per_task, 1),
                                ("gpus_per_task", gpus_per_task, 0), ("array_parallelism", array_parallelism or 1, 1)):
        if value < least:
            raise ValueError(f"{label} must be at least {least}, got {value}")
    if cluster not in ("slurm", "local", "debug"):
        raise ValueError(f"cluster must be 'slurm', 'local' or 'debug', got {cluster!r}")
    todo = [str(Path(d).resolve()) for d in variant_dirs if not (Path(d) / DONE).is_file()]
    if not todo:
        return []
    executor = submitit.AutoExecutor(folder=str(folder), cluster=cluster)
    parameters: dict[str, Any] = {
        "timeout_min": time_min, "cpus_per_task": cpus_per_task, "gpus_per_node": gpus_per_task, "name": name,
        "slurm_partition": partition, "slurm_array_parallelism": array_parallelism,
    }
    if mem_gb is not None:
        parameters["mem_gb"] = mem_gb
    executor.update_parameters(**parameters)
    job = VariantJob(threads=cpus_per_task, timeout_s=time_min * 60.0, python=python)
    if array:
        return list(executor.map_array(job, todo))
    return [executor.submit(job, d) for d in todo]


def wait_for(jobs: Sequence[submitit.Job[Any]], timeout_s: float, poll_s: float = 1.0) -> list[tuple[str, str]]:
    """Wait for ``jobs`` (at most ``timeout_s``); each job's state and its result or error.

    Raises:
        TimeoutError: If a job is still running after ``timeout_s`` (naming it).
    """
    deadline = time.monotonic() + timeout_s
    while not all(job.done() for job in jobs):
        if time.monotonic() > deadline:
            waiting = [job.job_id for job in jobs if not job.done()]
            raise TimeoutError(f"jobs still running after {timeout_s:.0f} s: {waiting}")
        time.sleep(poll_s)
    outcomes = []
    for job in jobs:
        error = job.exception()
        outcomes.append((job.job_id, f"failed: {error}" if error is not None else str(job.result())))
    return outcomes
