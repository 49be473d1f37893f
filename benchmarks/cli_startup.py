"""How long ``lightning-rl`` takes to answer: each command's time to its first output, a fit's time to
its first env step, ``play`` and ``export`` of a run, and config errors, beside ``python -c "import
torch"`` and ``python -c "import pytorch_lightning"`` measured in the same run.

Each figure is the median of ``--repeats`` runs (5 by default), each a new process started from here;
a command's time counts from starting its process to the first byte it writes (stdout or stderr). The
fit is ``lightning-rl fit --config configs/ppo/cartpole.yaml`` with a 256-step budget; its time counts
to the moment its sampler first collects (``obtain_samples``: the envs are built and reset, the
first batch of env steps starts), reported by a small wrapper that patches that method and then runs
the same entry point. ``play`` and ``export`` take a run this script trains first (PPO CartPole, 512
env steps). The ratio column divides by the median time of ``import torch``, so figures from
machines of different speeds compare; the two targets are printed last:

* ``play``/``export`` of a run and every config error: at most 1.5x ``import torch``;
* ``fit`` to its first env step: at most ``import pytorch_lightning`` + 1 s.

    python benchmarks/cli_startup.py               # the table and the two targets
    python benchmarks/cli_startup.py --repeats 9
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CARTPOLE = str(ROOT / "configs" / "ppo" / "cartpole.yaml")

COMMANDS: list[list[str]] = [
    ["--version"], ["--help"], ["fit", "--help"], ["validate", "--help"], ["test", "--help"], ["play", "--help"],
    ["check-env", "--help"], ["launch", "--help"], ["results", "--help"], ["tune", "--help"], ["export", "--help"],
]
#: Config errors a user makes, each timed to the error line.
CONFIG_ERRORS: list[list[str]] = [
    ["fit", "--config", CARTPOLE, "--model.learning_rat", "3e-4"],
    ["fit", "--config", CARTPOLE, "--trainer.max_epoch", "3"],
    ["fit", "--config", CARTPOLE, "--model.epochs", "many"],
    ["fit", "--config", CARTPOLE, "--model.total_env_steps", "-5"],
    ["fit", "--config", CARTPOLE, "--model", "PPOO"],
    ["fit", "--config", "no_such_config.yaml"],
]

#: Runs ``lightning-rl fit`` with a marker line on stdout when the sampler first collects.
FIRST_STEP = """
import sys, time
from lightning_rl.samplers.vector import VectorSampler
original = VectorSampler.obtain_samples
def marked(self, *args, **kwargs):
    VectorSampler.obtain_samples = original
    print(f"FIRST_ENV_STEP {time.time():.6f}", flush=True)
    return original(self, *args, **kwargs)
VectorSampler.obtain_samples = marked
from lightning_rl.cli import main
sys.argv = ["lightning-rl", *sys.argv[1:]]
main()
"""


def entry_point() -> list[str]:
    """The installed ``lightning-rl`` script beside this interpreter, else ``python -m lightning_rl``."""
    found = shutil.which("lightning-rl", path=str(Path(sys.executable).parent))
    return [found] if found else [sys.executable, "-m", "lightning_rl"]


def time_to_first_output(command: list[str], cwd: str) -> float:
    """Seconds from starting ``command`` to its first byte on stdout or stderr (it then runs to its end)."""
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert process.stdout is not None
    first = process.stdout.read(1)
    elapsed = time.perf_counter() - start
    process.stdout.read()
    process.wait()
    if not first:
        raise RuntimeError(f"{' '.join(command)} wrote nothing (exit {process.returncode})")
    return elapsed


def time_to_exit(command: list[str], cwd: str) -> float:
    start = time.perf_counter()
    subprocess.run(command, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - start


def train_a_run(cli: list[str], cwd: str) -> str:
    """A short PPO CartPole run in ``cwd`` for play and export to load; its group directory."""
    subprocess.run([*cli, "fit", "--config", CARTPOLE, "--model.total_env_steps", "512", "--model.log_interval_steps",
                    "256", "--trainer.enable_progress_bar", "false"], cwd=cwd, check=True, capture_output=True)
    return str(Path(cwd) / "runs" / "ppo_cartpole")


def time_to_first_env_step(cwd: str) -> float:
    """Seconds from starting ``lightning-rl fit`` to its sampler's first collection."""
    args = ["fit", "--config", CARTPOLE, "--model.total_env_steps", "256", "--model.log_interval_steps", "256",
            "--trainer.enable_progress_bar", "false"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    start = time.time()
    result = subprocess.run([sys.executable, "-c", FIRST_STEP, *args], cwd=cwd, capture_output=True, text=True,
                            env=env, check=True)
    marks = [line.split()[1] for line in result.stdout.splitlines() if line.startswith("FIRST_ENV_STEP ")]
    if not marks:
        raise RuntimeError("the fit never collected: " + result.stderr[-2000:])
    return float(marks[0]) - start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="runs per figure; the median is reported")
    options = parser.parse_args(argv)
    cli = entry_point()
    rows: list[tuple[str, float]] = []
    light: list[float] = []
    with tempfile.TemporaryDirectory(prefix="cli-startup-") as cwd:
        torch_times = [time_to_exit([sys.executable, "-c", "import torch"], cwd) for _ in range(options.repeats)]
        torch_s = statistics.median(torch_times)
        rows.append(('python -c "import torch"', torch_s))
        pl_times = [time_to_exit([sys.executable, "-c", "import pytorch_lightning"], cwd)
                    for _ in range(options.repeats)]
        pl_s = statistics.median(pl_times)
        rows.append(('python -c "import pytorch_lightning"', pl_s))
        for command in COMMANDS:
            times = [time_to_first_output([*cli, *command], cwd) for _ in range(options.repeats)]
            rows.append(("lightning-rl " + " ".join(command), statistics.median(times)))
        group = train_a_run(cli, cwd)
        run_commands = [["play", group, "--episodes", "1"], ["export", group, "--format", "onnx", "--out", "export"]]
        for command in run_commands:
            times = [time_to_first_output([*cli, *command], cwd) for _ in range(options.repeats)]
            light.append(statistics.median(times))
            shown = " ".join(command).replace(group, "runs/ppo_cartpole")
            rows.append((f"lightning-rl {shown}", light[-1]))
        for command in CONFIG_ERRORS:
            times = [time_to_first_output([*cli, *command], cwd) for _ in range(options.repeats)]
            light.append(statistics.median(times))
            shown = " ".join(command).replace(CARTPOLE, "configs/ppo/cartpole.yaml")
            rows.append((f"lightning-rl {shown} (config error)", light[-1]))
        fits = [time_to_first_env_step(cwd) for _ in range(options.repeats)]
        fit_s = statistics.median(fits)
        rows.append(("lightning-rl fit: first env step", fit_s))
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"# {platform.platform()}, Python {platform.python_version()}, {cpus} CPU(s), "
          f"{datetime.date.today().isoformat()}; median of {options.repeats} runs")
    print("| command | seconds | x import torch |\n|---|---:|---:|")
    for name, seconds in rows:
        print(f"| `{name}` | {seconds:.2f} | {seconds / torch_s:.2f} |")
    print()
    print(f"play/export of a run and config errors, the slowest: {max(light) / torch_s:.2f}x import torch "
          "(target: at most 1.50)")
    print(f"fit to its first env step: import pytorch_lightning + {fit_s - pl_s:.2f} s "
          f"({fit_s / pl_s:.2f}x; target: at most + 1.00 s)")


if __name__ == "__main__":
    main()
