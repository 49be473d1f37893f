"""What a reader reads to follow PPO's update, from ``configs/ppo/cartpole.yaml`` to the loss.

Not a speed figure: the cost of understanding. The path below is the one a reader takes who knows
PyTorch, Lightning and the PPO paper and wants to see what the shipped CartPole config trains:

* the YAML, whole;
* the class its ``class_path`` names and each lightning_rl class above it: their hyperparameter
  declarations and the methods that run when it trains (``training_step`` and what it calls, the
  Lightning hooks that build the optimizer, the data loader and the dataset, the checks after each
  iteration);
* how the dataset turns a collected rollout into a batch (GAE, advantage normalization,
  minibatches);
* the agent's training forward pass as far as the distribution's likelihood ratio, entropy and KL.

Each definition read counts whole, docstring and decorators included, once. The update path
includes its finite checks and update counting (``optimize``). Taken by their names and
docstrings instead of followed (:data:`NOT_FOLLOWED` lists each, by kind):

* the network's layers: the agent's model is an MLP that ``hidden_sizes`` names and its class
  docstring describes (``--network`` adds those definitions);
* the sampler side: env stepping (``SamplerDataset.obtain`` and below) and publishing weights to
  the sampler;
* helpers that move, convert or validate data without computing anything the update uses
  (devices, dtypes, leading dims, tree maps over named tuples, input shape checks, the agent's
  parameter lists), and the Lightning plumbing that hands items over unchanged;
* bookkeeping: env-step counts, the budget, seeding, logging, profiling and checkpointing;
* the declaration mechanism (``hparam``, ``bind``): read as a declaration, as one reads a
  dataclass field; and lazy package imports;
* the private fast path (``private_fast_paths`` and the check that enables it): the public branch
  beside it is read; a test shows both give the same update bit for bit.

``--trace`` runs a few PPO iterations from the YAML, with the private fast paths off, and records
every lightning_rl definition that runs from the module's and the dataset's hooks, down to the
first one that is not followed (what that one calls is not read either). It prints the listed
methods that did not run and each definition that ran but is not read, with its kind from
:data:`NOT_FOLLOWED`; a listed method that did not run, or one without a kind, makes the exit
status 1.

Usage::

    python benchmarks/reading_path.py            # the path: files, definitions, lines
    python benchmarks/reading_path.py --network  # with the network's definitions added
    python benchmarks/reading_path.py --trace    # check the list against a run
"""

from __future__ import annotations

import argparse
import ast
import collections
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIG = "configs/ppo/cartpole.yaml"

#: (file, definitions) in reading order. ``Name``: a whole function or class; ``Class.method``: one
#: method; ``Class:declarations``: the class body's assignments (the hyperparameter declarations).
PATH: list[tuple[str, list[str]]] = [
    (CONFIG, []),
    ("lightning_rl/algos/ppo.py", ["PPO", "ppo_loss", "check_minibatches"]),
    ("lightning_rl/algos/on_policy.py", ["OnPolicyAlgorithm"]),
    ("lightning_rl/algos/base.py", [
        "RLModule:declarations", "RLModule.__init__", "RLModule.check_hyperparameters", "RLModule.__post_init__",
        "RLModule.setup",
        "RLModule.initialize_sampler", "RLModule.train_dataloader", "RLModule.configure_optimizers",
        "RLModule.build_optimizer", "RLModule.with_lr_schedulers", "RLModule.on_train_start",
        "RLModule.on_train_batch_start", "RLModule.apply_lr_schedule", "RLModule.schedule_factor",
        "RLModule.optimizer_list", "RLModule.optimize", "RLModule.logging_due", "RLModule.end_of_iteration",
        "RLModule.check_finite_parameters", "EndOfIteration",
    ]),
    ("lightning_rl/algos/optim.py", [
        "build_optimizer", "with_lr_schedulers", "update_step", "mean_metrics", "check_finite_parameters",
        "all_finite",
    ]),
    ("lightning_rl/datasets/on_policy.py", ["OnPolicyBatch", "OnPolicyDataset", "check_finite", "iterate_minibatches"]),
    ("lightning_rl/returns.py", ["generalized_advantage_estimation_tl", "_gae_core", "valid_mean"]),
    ("lightning_rl/agents/pg.py", [
        "PgAgentBase.recurrent", "PgAgentBase.forward", "CategoricalPgAgent.make_dist_info",
    ]),
    ("lightning_rl/distributions/categorical.py", [
        "Categorical.likelihood_ratio", "Categorical.entropy", "Categorical.kl",
    ]),
]

#: The network of ``CategoricalPgAgent(hidden_sizes=[64, 64])`` on a vector observation (``--network``).
NETWORK: list[tuple[str, list[str]]] = [
    ("lightning_rl/models/pg.py", ["CategoricalPgMlpModel", "CategoricalPgHead"]),
    ("lightning_rl/models/base.py", ["FeedForwardModel", "VectorEncoder"]),
    ("lightning_rl/models/blocks.py", ["MlpModel"]),
]


#: What runs on the path but is taken by its name and docstring: ``{kind: ["file::qualified name
#: prefix", ...]}`` ("file/" for a whole package, "file" for a whole module).
NOT_FOLLOWED: dict[str, list[str]] = {
    "network": ["lightning_rl/models/", "lightning_rl/agents/pg.py::PgAgentBase.update_obs_rms"],
    "sampler side": [
        "lightning_rl/samplers/", "lightning_rl/datasets/base.py::SamplerDataset",
        "lightning_rl/agents/base.py::BaseAgent.sync_shared_memory",
    ],
    "moves, converts or validates data": [
        "lightning_rl/data/", "lightning_rl/algos/data_loader.py",
        "lightning_rl/agents/base.py::BaseAgent.device", "lightning_rl/agents/base.py::BaseAgent.to_agent_inputs",
        "lightning_rl/agents/base.py::_input_to", "lightning_rl/agents/base.py::BaseAgent._apply",
        "lightning_rl/agents/base.py::BaseAgent.to_device", "lightning_rl/agents/base.py::BaseAgent.parameters_for",
        "lightning_rl/agents/base.py::BaseAgent.trainable_modules",
        "lightning_rl/agents/pg.py::CategoricalPgAgent.to_agent_inputs",
        "lightning_rl/algos/base.py::RLModule.float_parameters",
        "lightning_rl/returns.py::_prepare", "lightning_rl/returns.py::_is_torch", "lightning_rl/returns.py::_to_kind",
        "lightning_rl/returns.py::_output", "lightning_rl/returns.py::_maximum",
    ],
    "bookkeeping": [
        "lightning_rl/algos/base.py::RLModule.budget_reached", "lightning_rl/algos/base.py::RLModule.global_env_steps",
        "lightning_rl/algos/base.py::RLModule.iterations_per_epoch",
        "lightning_rl/algos/base.py::RLModule.steps_per_iteration", "lightning_rl/algos/base.py::RLModule._base_seed",
        "lightning_rl/algos/checkpointing.py", "lightning_rl/algos/checkpoint_io.py", "lightning_rl/datasets/state.py",
        "lightning_rl/algos/base.py::RLModule.log_step_metrics", "lightning_rl/algos/base.py::RLModule.profiler",
    ],
    "declaration mechanism, lazy imports": [
        "lightning_rl/algos/hparams.py", "lightning_rl/__init__.py", "lightning_rl/lazy.py",
    ],
    "private fast path": [
        "lightning_rl/algos/private_fast_paths.py", "lightning_rl/algos/optim.py::direct_updates_safe",
        "lightning_rl/algos/base.py::RLModule.direct_updates_safe",
    ],
}


def kind_of(file: str, qualname: str) -> str | None:
    """The :data:`NOT_FOLLOWED` kind of a definition, or None."""
    for kind, patterns in NOT_FOLLOWED.items():
        for pattern in patterns:
            where, _, prefix = pattern.partition("::")
            in_file = file.startswith(where) if where.endswith("/") else file == where
            if in_file and (not prefix or qualname == prefix or qualname.startswith(prefix + ".")):
                return kind
    return None


def definition_spans(path: Path) -> dict[str, tuple[int, int]]:
    """``{qualified name: (first line, last line)}`` of every def and class, decorators included,
    plus ``Class:declarations`` entries whose span is the number of lines of the body's assignments."""
    tree = ast.parse(path.read_text())
    spans: dict[str, tuple[int, int]] = {}

    def walk(nodes: list[ast.stmt], prefix: str) -> None:
        for node in nodes:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                first = min([node.lineno] + [d.lineno for d in node.decorator_list])
                spans[prefix + node.name] = (first, node.end_lineno or node.lineno)
                if isinstance(node, ast.ClassDef):
                    walk(node.body, prefix + node.name + ".")
                    assigned = sum(
                        (s.end_lineno or s.lineno) - s.lineno + 1
                        for s in node.body if isinstance(s, (ast.Assign, ast.AnnAssign))
                    )
                    spans[prefix + node.name + ":declarations"] = (1, assigned)

    walk(tree.body, "")
    return spans


def count(path_list: list[tuple[str, list[str]]]) -> tuple[int, list[tuple[str, int, list[str]]]]:
    """Total lines and ``(file, lines, definitions)`` rows; raises if a listed definition is gone."""
    rows = []
    for file, names in path_list:
        path = ROOT / file
        if not names:
            rows.append((file, len(path.read_text().splitlines()), ["(whole file)"]))
            continue
        spans = definition_spans(path)
        missing = [n for n in names if n not in spans]
        if missing:
            raise SystemExit(f"{file}: no definition named {missing}: update the path in {Path(__file__).name}")
        counted = [n for n in names if not any(n.startswith(o + ".") for o in names if o != n)]
        lines = sum(spans[n][1] - spans[n][0] + 1 for n in counted)
        rows.append((file, lines, names))
    return sum(r[1] for r in rows), rows


def trace() -> dict[str, set[str]]:
    """``{file: qualified names}`` of the lightning_rl definitions that run from the module's and
    the dataset's hooks in a short PPO run from the YAML (private fast paths off)."""
    sys.path.insert(0, str(ROOT))
    import lightning_rl
    from lightning_rl.algos import private_fast_paths
    from lightning_rl.algos.base import RLModule
    from lightning_rl.datasets.base import SamplerDataset
    from lightning_rl.lightning_cli import from_config

    package = os.path.dirname(lightning_rl.__file__)
    hooks = {"__init__", "setup", "configure_optimizers", "train_dataloader", "on_train_start",
             "on_train_batch_start", "training_step", "end_of_iteration", "collect"}
    seen: dict[str, set[str]] = collections.defaultdict(set)
    stack: list[bool] = []

    def profile(frame, event, arg):  # noqa: ANN001, ANN202 (sys.setprofile's signature)
        if event == "call":
            code = frame.f_code
            on_path = bool(stack and stack[-1])
            if not on_path and code.co_name in hooks and code.co_filename.startswith(package):
                on_path = isinstance(frame.f_locals.get("self"), (RLModule, SamplerDataset))
            ours = code.co_filename.startswith(package) and "<" not in code.co_qualname
            if on_path and ours:
                file = os.path.relpath(code.co_filename, ROOT)
                seen[file].add(code.co_qualname)
                # A reader who takes a call by its docstring does not read what it calls.
                on_path = kind_of(file, code.co_qualname) is None
            stack.append(on_path)
        elif event == "return" and stack:
            stack.pop()

    fast_paths = private_fast_paths.enabled
    private_fast_paths.enabled = False  # the public branch, which the path reads
    cwd, run_dir = os.getcwd(), tempfile.TemporaryDirectory(prefix="reading_path_")
    sys.setprofile(profile)
    try:
        # The fit writes its config and run info into the working directory: a temporary one.
        os.chdir(run_dir.name)
        module, trainer = from_config(
            ROOT / CONFIG,
            {"trainer.logger": False, "trainer.enable_checkpointing": False, "trainer.enable_progress_bar": False,
             "trainer.enable_model_summary": False, "trainer.callbacks": []},
            total_env_steps=3 * 256,
        )
        trainer.fit(module)
    finally:
        sys.setprofile(None)
        private_fast_paths.enabled = fast_paths
        os.chdir(cwd)
        run_dir.cleanup()
    return seen


def ran_and_read(seen: dict[str, set[str]], root: Path = ROOT) -> tuple[int, dict[str, int]]:
    """The path as the run gives it, without the list: every definition that ran and has no
    :data:`NOT_FOLLOWED` kind, the declarations of their classes, and the YAML. Lines in all and per
    file (a nested definition counts with its enclosing one)."""
    per_file: dict[str, int] = {CONFIG: len((root / CONFIG).read_text().splitlines())}
    for file, names in seen.items():
        spans = definition_spans(root / file)
        read = {q for q in names if kind_of(file, q) is None and q in spans}
        outer = {q for q in read if not any(q.startswith(o + ".") for o in read if o != q)}
        classes = {q.rsplit(".", 1)[0] for q in outer if "." in q}
        lines = sum(spans[q][1] - spans[q][0] + 1 for q in outer)
        lines += sum(spans[c + ":declarations"][1] for c in classes if c + ":declarations" in spans)
        if lines:
            per_file[file] = lines
    return sum(per_file.values()), per_file


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--network", action="store_true", help="add the network's definitions to the path")
    parser.add_argument("--trace", action="store_true", help="check the list against a short training run")
    args = parser.parse_args()
    path_list = PATH + (NETWORK if args.network else [])
    total, rows = count(path_list)
    for file, lines, names in rows:
        print(f"{file:45s} {lines:4d}  {', '.join(names)}")
    print(f"\nPPO reading path{' with the network' if args.network else ''}: {len(rows)} files, {total} lines")
    if not args.trace:
        return
    seen = trace()
    ran = {(f, q) for f, qs in seen.items() for q in qs}
    read = {(f, n.split(":")[0]) for f, names in path_list for n in names}
    whole = {(f, n) for f, names in path_list for n in names if "." not in n and ":" not in n}
    not_run = sorted((f, n) for f, n in read if "." in n and (f, n) not in ran)
    print("\nListed methods that did not run:", "none" if not not_run else "")
    for f, n in not_run:
        print(f"  {f}: {n}")
    by_kind: dict[str, list[str]] = collections.defaultdict(list)
    for f, q in sorted(ran):
        if (f, q) in read or any(ff == f and (q == w or q.startswith(w + ".")) for ff, w in whole):
            continue
        by_kind[kind_of(f, q) or "NO KIND (a rule is missing)"].append(f"{f}::{q}")
    print("\nRan on the path, taken by name and docstring:")
    for kind, names in by_kind.items():
        print(f"  {kind}:")
        for name in names:
            print(f"    {name}")
    total, per_file = ran_and_read(seen)
    print(f"\nThe same rules applied to the run alone (no list, no whole classes): {len(per_file)} files, "
          f"{total} lines")
    for file, lines in per_file.items():
        print(f"  {file:45s} {lines:4d}")
    if not_run or "NO KIND (a rule is missing)" in by_kind:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
