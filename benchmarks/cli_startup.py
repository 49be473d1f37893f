"""How long ``lightning-rl`` takes to answer: each command's time to its first output, and a fit's time
to its first env step, beside ``python -c "import torch"`` measured in the same run.

Each figure is the median of ``--repeats`` runs (5 by default), each a new process started from here;
a command's time counts from starting its process to the first byte it writes (stdout or stderr). The
fit is ``lightning-rl fit --config configs/ppo/cartpole.yaml`` with a 256-step budget; its time counts
to the moment its sampler first collects (``obtain_samples``: the envs are built and reset, the
first batch of env steps starts), reported by a small wrapper that patches that method and then runs
the same entry point. The ratio column divides by the median time of ``import torch``, so figures
from machines of different speeds compare.

    python benchmarks/cli_startup.py               # the table
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
    with tempfile.TemporaryDirectory(prefix="cli-startup-") as cwd:
        torch_times = [time_to_exit([sys.executable, "-c", "import torch"], cwd) for _ in range(options.repeats)]
        torch_s = statistics.median(torch_times)
        rows.append(('python -c "import torch"', torch_s))
        for command in COMMANDS:
            times = [time_to_first_output([*cli, *command], cwd) for _ in range(options.repeats)]
            rows.append(("lightning-rl " + " ".join(command), statistics.median(times)))
        fits = [time_to_first_env_step(cwd) for _ in range(options.repeats)]
        rows.append(("lightning-rl fit: first env step", statistics.median(fits)))
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"# {platform.platform()}, Python {platform.python_version()}, {cpus} CPU(s), "
          f"{datetime.date.today().isoformat()}; median of {options.repeats} runs")
    print("| command | seconds | x import torch |\n|---|---:|---:|")
    for name, seconds in rows:
        print(f"| `{name}` | {seconds:.2f} | {seconds / torch_s:.2f} |")


if __name__ == "__main__":
    main()
