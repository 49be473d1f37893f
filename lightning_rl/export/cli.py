"""``lightning-rl export``'s command line; the export itself is :mod:`lightning_rl.export.exporter`,
imported once the arguments are read (``export --help`` imports neither torch nor Lightning)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

__all__ = ["build_parser", "main"]

#: ``--format`` choices (the keys of :data:`lightning_rl.export.exporter.FORMATS`).
FORMAT_NAMES = ("onnx", "torchscript")


def build_parser() -> argparse.ArgumentParser:
    """The options of ``lightning-rl export``."""
    parser = argparse.ArgumentParser(
        prog="lightning-rl export",
        description="Write a trained agent's deterministic policy as TorchScript and/or ONNX, plus its weights "
        "(safetensors) and spaces.yaml; every file is loaded back and checked against the agent's actions.",
    )
    parser.add_argument("target", help="a .ckpt, a run directory (its best.ckpt, else last.ckpt) or a run group")
    parser.add_argument("--format", nargs="+", required=True, choices=FORMAT_NAMES, help="one or both")
    parser.add_argument("--out", default=None, help="output directory (default: <run>/export/<checkpoint name>)")
    parser.add_argument("--name", default="policy", help="file stem of the policy and weights files")
    return parser


def main(argv: list[str]) -> int:
    """``lightning-rl export <ckpt | run_dir> --format torchscript|onnx [...] [--out DIR] [--name NAME]``.

    Returns:
        0 on success; 2 for bad input (reported as ``lightning-rl export: error: ...``); 1 if a
        written file does not reproduce the agent's actions.
    """
    options = build_parser().parse_args(argv)
    import yaml

    from lightning_rl.export.exporter import (
        OPTIONAL_PACKAGES,
        default_out_dir,
        export_agent,
        load_agent,
        resolve_checkpoint,
    )
    from lightning_rl.runs import choice_line

    try:
        choice = resolve_checkpoint(options.target)
        ckpt = choice.checkpoint
        agent, source = load_agent(choice)
        print(choice_line("export", ckpt, source["env_steps"], choice.rule), flush=True)
        out = Path(options.out) if options.out else default_out_dir(ckpt)
        written = export_agent(agent, out, options.format, name=options.name, source=source)
    except ValueError as error:
        print(f"lightning-rl export: error: {error}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as error:
        if error.name not in OPTIONAL_PACKAGES:
            raise
        print(f"lightning-rl export: error: {error.name} is not installed: pip install 'lightning-rl[export]'",
              file=sys.stderr)
        return 2
    except RuntimeError as error:
        print(f"lightning-rl export: error: {error}", file=sys.stderr)
        return 1
    info = yaml.safe_load(written["spaces"].read_text())
    print(f"exported {ckpt} ({source['algorithm']}, {source['env_id']}, {source['env_steps']:,} env steps)")
    if "agents" in info:
        shared = " (shared parameters)" if info["policy"]["share_parameters"] else ""
        print(f"  {type(agent).__name__}{shared}: agents {', '.join(info['agents'])}")
        described, seen = [], set()
        for agent_name, entry in info["agents"].items():
            files = tuple(entry["policy"]["files"].values())
            if files not in seen:  # a shared policy once
                seen.add(files)
                described.append(("shared: " if shared else f"{agent_name}: ", entry["policy"]))
    else:
        described = [("", info["policy"])]
    for label, policy in described:
        _print_policy(label, policy)
    checks = {"torchscript": "torch.jit.load", "onnx": "onnx.checker + onnxruntime"}
    for key, path in written.items():
        kind = key.split(".", 1)[0]
        note = f"loaded with {checks[kind]}, matches the agent's actions" if kind in checks else "loaded back"
        print(f"  {path}  ({note})")
    return 0


def _print_policy(label: str, policy: dict[str, Any]) -> None:
    """Two lines on one exported policy: what it computes and its graph's signature."""
    agent = policy["agent"].rsplit(".", 1)[1]
    print(f"  {label}{agent}: action = {policy['action']}; observation normalisation: "
          f"{'inside the graph' if policy['observation_normalization'] else 'none in this agent'}")
    inputs, outputs = policy.get("inputs", [policy.get("input")]), policy.get("outputs", [policy.get("output")])

    def signature(ios: list[dict[str, Any]]) -> str:
        return ", ".join(f"{io['name']} {io['shape']} {io['dtype']}" for io in ios)

    plural = "s" if len(inputs) > 1 else ""
    print(f"  input{plural} {signature(inputs)} -> output{'s' if len(outputs) > 1 else ''} {signature(outputs)}")
    if "recurrent" in policy:
        print("  recurrent: an episode starts from zeros (state, prev_action, prev_reward); feed next_rnn_state_h/c, "
              "the action and the env's reward back at each step")
