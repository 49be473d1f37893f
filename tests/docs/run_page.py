"""Run the code blocks of one documentation page (see ``blocks.py``), in the current directory.

Usage: ``python tests/docs/run_page.py docs/guides/own-env.md`` from a scratch directory holding
a ``configs`` link to the repository's configs. Exits non-zero naming the first block that failed.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from blocks import SHELL, check_marked, read_blocks  # noqa: E402


def run_lightning_rl(argv: list[str], where: str) -> None:
    print(f"$ lightning-rl {shlex.join(argv)}    ({where})", flush=True)
    started = time.perf_counter()
    if "ddp" in argv:
        # Lightning's DDP launcher starts its other ranks by running this process's command line
        # again, so a DDP command runs as its own process.
        status = subprocess.call([str(Path(sys.executable).parent / "lightning-rl"), *argv])
    else:
        from lightning_rl.cli import main

        try:
            main(argv)
            status = 0
        except SystemExit as exit_:
            status = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    if status != 0:
        raise SystemExit(f"{where}: lightning-rl {shlex.join(argv)} exited with status {status}")
    print(f"  ok in {time.perf_counter() - started:.1f} s", flush=True)


def main(page: Path) -> None:
    namespace: dict[str, object] = {"__name__": "__docs__"}
    for block in read_blocks(page):
        check_marked(block)
        if block.not_run is not None:
            continue
        for command in block.before:
            run_lightning_rl(shlex.split(command), f"{block.where} (before)")
        if block.lang == "python":
            print(f"python block ({block.where})", flush=True)
            exec(compile(block.code, block.where, "exec"), namespace)
        elif block.lang == "yaml":
            yaml.safe_load(block.code)
        elif block.lang in SHELL and block.run is not None:
            for argv in block.lightning_rl_argvs():
                run_lightning_rl(argv, block.where)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
