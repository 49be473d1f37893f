"""How much code a reader follows from ``configs/ppo/cartpole.yaml`` to PPO's loss.

Traces one PPO update as a reader would follow it: the module built from the YAML by the CLI,
one collected rollout turned into GAE targets (``OnPolicyDataset.process_samples``), and one
``training_step`` (minibatches, the agent's forward pass, the distribution, ``ppo_loss``, the
optimizer step). Env stepping and the sampler's collection loop are not part of an update and
are left out, as are Lightning's own files. Prints every ``lightning_rl`` function that ran, by
file, with its length in lines (definition to last line), and the totals: files and lines.

Usage::

    python benchmarks/ppo_update_path.py
"""

from __future__ import annotations

import inspect
import sys
from collections import defaultdict
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = str(ROOT / "lightning_rl")


class Tracer:
    """Records the code objects of ``lightning_rl`` that run while it is active."""

    def __init__(self) -> None:
        self.codes: set[CodeType] = set()

    def __call__(self, frame: FrameType, event: str, arg: Any) -> Any:
        if event == "call" and frame.f_code.co_filename.startswith(PACKAGE):
            self.codes.add(frame.f_code)
        return None

    def __enter__(self) -> Tracer:
        sys.setprofile(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        sys.setprofile(None)


def code_lines(code: CodeType) -> int:
    """Lines of the function (or class body / module) a code object belongs to."""
    try:
        lines, _ = inspect.getsourcelines(code)
    except (OSError, TypeError):
        return 0
    return len(lines)


def main() -> None:
    import pytorch_lightning as pl

    from lightning_rl.algos.base import RLModule
    from lightning_rl.cli import RLCLI, RLTrainer

    config = str(ROOT / "configs" / "ppo" / "cartpole.yaml")
    tracer = Tracer()
    with tracer:
        cli = RLCLI(RLModule, trainer_class=RLTrainer, subclass_mode_model=True, run=False,
                    args=["--config", config, "--trainer.logger", "false", "--trainer.enable_progress_bar", "false"])
    module = cli.model
    from lightning_rl.datasets.on_policy import OnPolicyDataset

    def traced(cls: Any, name: str) -> Any:
        original = getattr(cls, name)

        def run(self: Any, *args: Any, **kwargs: Any) -> Any:
            with tracer:
                return original(self, *args, **kwargs)

        setattr(cls, name, run)
        return original

    # The rollout's targets, the optimizer and one training_step; collection itself untraced.
    originals = [(cls, name, traced(cls, name)) for cls, name in (
        (OnPolicyDataset, "process_samples"), (type(module), "configure_optimizers"),
        (type(module), "training_step"))]
    try:
        trainer = pl.Trainer(max_epochs=1, limit_train_batches=1, logger=False, enable_checkpointing=False,
                             enable_progress_bar=False, enable_model_summary=False, accelerator="cpu")
        trainer.fit(module)
    finally:
        for cls, name, original in originals:
            setattr(cls, name, original)

    by_file: dict[str, list[tuple[int, str, int]]] = defaultdict(list)
    for code in tracer.codes:
        by_file[code.co_filename].append((code.co_firstlineno, code.co_qualname, code_lines(code)))
    # Nested code objects (comprehensions, lambdas, inner functions) lie inside their function.
    total = 0
    config_lines = len(Path(config).read_text().splitlines())
    print(f"configs/ppo/cartpole.yaml: {config_lines} lines")
    for filename in sorted(by_file):
        spans = sorted(by_file[filename])
        covered: list[tuple[int, int]] = []
        for first, _, n in spans:
            last = first + max(n, 1) - 1
            if covered and first <= covered[-1][1]:
                covered[-1] = (covered[-1][0], max(covered[-1][1], last))
            else:
                covered.append((first, last))
        lines = sum(b - a + 1 for a, b in covered)
        total += lines
        names = ", ".join(sorted({q for _, q, _ in spans if "<" not in q}))
        print(f"{Path(filename).relative_to(ROOT)}: {lines} lines ({names})")
    print(f"total: {len(by_file) + 1} files (with the YAML), {total + config_lines} lines")


if __name__ == "__main__":
    main()
