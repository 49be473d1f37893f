"""A stand-in for the interpreter the launchers start: it records what it was given (argv, CPUs,
thread counts, PYTHONPATH) in ``seen.json`` and sleeps or exits as ``behaviour.json`` in its working
directory says; SIGINT makes it write ``got_sigint`` and exit 1, as a fit does after saving."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

FAKE = f"""#!{sys.executable}
import json, os, signal, sys, time
from pathlib import Path
def on_sigint(*_):
    Path("got_sigint").write_text("1")
    sys.exit(1)
signal.signal(signal.SIGINT, on_sigint)
behaviour = json.loads(Path("behaviour.json").read_text()) if Path("behaviour.json").exists() else {{}}
Path("seen.json").write_text(json.dumps({{
    "argv": sys.argv[1:], "cpus": sorted(os.sched_getaffinity(0)), "omp": os.environ.get("OMP_NUM_THREADS"),
    "mkl": os.environ.get("MKL_NUM_THREADS"), "pythonpath": os.environ.get("PYTHONPATH", "")}}))
time.sleep(behaviour.get("sleep", 0))
sys.exit(behaviour.get("exit", 0))
"""


@pytest.fixture
def fake_python(tmp_path: Path) -> str:
    path = tmp_path / "fake_python"
    path.write_text(FAKE)
    path.chmod(0o755)
    return str(path)


def variant(grid: Path, name: str, **behaviour: float) -> Path:
    directory = grid / name
    directory.mkdir(parents=True)
    (directory / "config.yaml").write_text("seed_everything: 0\n")
    (directory / "behaviour.json").write_text(json.dumps(behaviour))
    return directory


def seen(directory: Path) -> dict:
    return json.loads((directory / "seen.json").read_text())


