"""The export of ``lightning-rl export`` (:mod:`lightning_rl.export`, whose docstring says what is written)."""

from __future__ import annotations

import argparse
import logging
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

from lightning_rl.export.policy import (
    DeterministicPolicy,
    input_dtype,
    policy_of,
    reference_actions,
    sample_observations,
)
from lightning_rl.models.normalization import RunningMeanStdModel

__all__ = [
    "FORMATS", "OPTIONAL_PACKAGES", "DeterministicPolicy", "default_out_dir", "export_agent", "load_agent", "policy_of",
    "reference_actions", "resolve_checkpoint",
]

#: ``--format`` -> file suffix.
FORMATS = {"torchscript": "pt", "onnx": "onnx"}
#: The packages of the ``export`` extra, imported only when a command needs them.
OPTIONAL_PACKAGES = ("onnx", "onnxruntime", "onnxscript", "safetensors")
#: Continuous actions of a written file must match the module's within this (discrete ones exactly).
ATOL = 1e-5


def _check_actions(name: str, got: np.ndarray, expected: np.ndarray) -> None:
    discrete = np.issubdtype(expected.dtype, np.integer)
    same = got.shape == expected.shape and (
        np.array_equal(got, expected) if discrete else bool(np.allclose(got, expected, rtol=0.0, atol=ATOL))
    )
    if not same:
        raise RuntimeError(
            f"{name} does not reproduce the agent's actions (shape {got.shape} vs {expected.shape}; "
            f"{'exactly' if discrete else f'atol {ATOL}'}): the file was written but is not trustworthy"
        )


def _torchscript(policy: DeterministicPolicy, example: torch.Tensor, path: Path) -> Any:
    with warnings.catch_warnings():
        # torch 2.13 marks torch.jit deprecated (for torch.export); TorchScript is still what libtorch
        # and older runtimes load, and the format this command was asked for.
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        traced = torch.jit.trace(policy, example, check_trace=False)
        torch.jit.save(traced, str(path))
        loaded = torch.jit.load(str(path))
    return lambda x: loaded(torch.from_numpy(x)).numpy()


def _onnx(policy: DeterministicPolicy, example: torch.Tensor, path: Path) -> Any:
    import onnx
    import onnxruntime

    onnx_logger = logging.getLogger("torch.onnx")
    level = onnx_logger.level
    onnx_logger.setLevel(logging.ERROR)  # "torchvision is not installed" notes, irrelevant here
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                policy, (example,), str(path), dynamo=True, external_data=False, verbose=False,
                input_names=["observation"], output_names=["action"],
                dynamic_shapes=({0: torch.export.Dim("batch")},),
            )
    finally:
        onnx_logger.setLevel(level)
    onnx.checker.check_model(str(path))
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return lambda x: session.run(["action"], {"observation": x})[0]


def _space_dict(space: Any) -> dict[str, Any]:
    """A space in gymnasium's terms: Box (inclusive bounds; a scalar when uniform) or Discrete."""
    from lightning_rl.spaces import IntBox

    def bound(a: Any) -> Any:
        a = np.asarray(a)
        flat = a.reshape(-1)
        value = flat[0] if flat.size and np.all(flat == flat[0]) else a
        return value.tolist() if isinstance(value, np.ndarray) else value.item()

    dtype = str(np.dtype(space.dtype))
    if isinstance(space, IntBox) and space.shape == ():
        return {"type": "Discrete", "n": int(space.n), "start": int(space.low), "dtype": dtype}
    high = np.asarray(space.high) - 1 if isinstance(space, IntBox) else space.high  # IntBox's high is exclusive
    return {"type": "Box", "shape": list(space.shape), "dtype": dtype, "low": bound(space.low), "high": bound(high)}


def export_agent(
    agent: Any, out_dir: str | Path, formats: list[str], name: str = "policy", source: dict[str, Any] | None = None,
) -> dict[str, Path]:
    """Write ``agent``'s deterministic policy in ``formats`` plus ``<name>.safetensors`` and
    ``spaces.yaml`` into ``out_dir``, each loaded back and checked against :func:`reference_actions`.

    Args:
        agent: An initialized feed-forward agent (see :func:`policy_of`).
        out_dir: Created if missing; files already there are replaced.
        formats: Keys of :data:`FORMATS`.
        name: File stem of the policy and weights files.
        source: What to record in ``spaces.yaml`` about where the policy came from.

    Returns:
        ``{"torchscript" | "onnx" | "safetensors" | "spaces": path}`` of what was written.

    Raises:
        ValueError: For an unknown format, a bad ``name`` or an agent :func:`policy_of` refuses.
        RuntimeError: If a written file does not reproduce the agent's actions.
    """
    bad = [f for f in formats if f not in FORMATS]
    if bad or not formats:
        raise ValueError(f"format {bad or formats} is not one of {sorted(FORMATS)}")
    # Every optional package first, so that a missing one stops the export before any file is written.
    from safetensors.torch import load_file, save_file

    if "onnx" in formats:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
        import onnxscript  # noqa: F401  (torch.onnx's dynamo exporter needs it)
    if not name or "/" in name or name in (".", ".."):
        raise ValueError(f"name={name!r} must be a plain file stem")
    policy, meaning = policy_of(agent)
    spaces = agent.env_spaces
    example = torch.from_numpy(sample_observations(spaces.observation, 2, seed=1))
    check = sample_observations(spaces.observation, 8, seed=2)
    expected = reference_actions(agent, check)
    _check_actions("the exported module", policy(torch.from_numpy(check)).numpy(), expected)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    for fmt in dict.fromkeys(formats):
        path = out / f"{name}.{FORMATS[fmt]}"
        run = _torchscript(policy, example, path) if fmt == "torchscript" else _onnx(policy, example, path)
        for rows in (check[:1], check):  # batch 1 and 8: the exported batch dim must be dynamic
            _check_actions(str(path), np.asarray(run(np.ascontiguousarray(rows))), expected[: len(rows)])
        written[fmt] = path
    state = {k: v.detach().clone().contiguous() for k, v in policy.state_dict().items()}
    weights = out / f"{name}.safetensors"
    save_file(state, str(weights), metadata={"agent": type(agent).__name__, "kind": policy.kind})
    loaded = load_file(str(weights))
    if loaded.keys() != state.keys() or not all(torch.equal(loaded[k], v) for k, v in state.items()):
        raise RuntimeError(f"{weights} does not load back to the policy's weights")
    written["safetensors"] = weights
    action_shape = ["batch", *spaces.action.shape]
    info = {
        "observation": _space_dict(spaces.observation),
        "action": _space_dict(spaces.action),
        "policy": {
            "agent": f"{type(agent).__module__}.{type(agent).__qualname__}",
            "action": meaning,
            "observation_normalization": any(isinstance(m, RunningMeanStdModel) for m in policy.modules()),
            "input": {"name": "observation", "shape": ["batch", *spaces.observation.shape],
                      "dtype": str(input_dtype(spaces.observation))},
            "output": {"name": "action", "shape": action_shape, "dtype": str(expected.dtype)},
            "files": {k: v.name for k, v in written.items()},
        },
        "source": source or {},
    }
    written["spaces"] = out / "spaces.yaml"
    written["spaces"].write_text(yaml.safe_dump(info, sort_keys=False))
    return written


def resolve_checkpoint(target: str) -> Path:
    """The checkpoint of ``target``: the file itself, or a run's (or a group's newest run's)
    ``best.ckpt``, else its ``last.ckpt``.

    Raises:
        ValueError: If ``target`` does not exist or holds no run with a checkpoint.
    """
    from lightning_rl.runs import best_checkpoint, run_dir_of

    path = Path(target)
    if not path.exists():
        raise ValueError(f"{target} does not exist (give a .ckpt, a run directory or runs/<algo>_<env>)")
    if path.is_file():
        return path
    run_dir = run_dir_of(path)
    ckpt = best_checkpoint(run_dir) if run_dir is not None else None
    if ckpt is None:
        raise ValueError(f"no checkpoint in {target} (looked for <run>/checkpoints/best.ckpt and last.ckpt)")
    return ckpt


def load_agent(ckpt: Path) -> tuple[Any, dict[str, Any]]:
    """The agent of a lightning_rl checkpoint, rebuilt from the config it carries (read as data only),
    and a description of the run for ``spaces.yaml``.

    Raises:
        ValueError: If the file needs unpickling, was not written by lightning_rl, carries no config,
            or its config does not build a module here.
    """
    from lightning_rl.algos.base import RLModule
    from lightning_rl.algos.checkpointing import CHECKPOINT_KEY, load_data
    from lightning_rl.algos.loading import module_from_config

    data = load_data(ckpt)  # names a file that is no torch.save archive, refuses one that needs unpickling
    ours = data.get(CHECKPOINT_KEY) if isinstance(data, dict) else None
    if not isinstance(ours, dict) or "state_dict" not in data:
        raise ValueError(f"{ckpt} was not written by a lightning_rl run (no '{CHECKPOINT_KEY}' entry)")
    config = ours.get("config")
    if not config:
        raise ValueError(f"{ckpt} carries no model config (an older lightning_rl checkpoint); export needs it")
    try:
        module = module_from_config(RLModule, config, data, "cpu")
    except (ValueError, TypeError, KeyError, argparse.ArgumentError) as error:
        lines = " ".join(line.strip() for line in str(error).strip().splitlines()[:6])
        raise ValueError(f"cannot rebuild the module of {ckpt} from the config it carries: {lines}") from None
    run = ours.get("run") or {}
    source = {
        "checkpoint": str(ckpt),
        "algorithm": run.get("algorithm"),
        "env_id": run.get("env_id"),
        "env_steps": int((ours.get("train_state") or {}).get("env_steps", 0)),
    }
    return module.agent, source


def default_out_dir(ckpt: Path) -> Path:
    """``<run>/export/<checkpoint name>/`` for a checkpoint in a run directory, else
    ``<checkpoint name>_export/`` beside the checkpoint."""
    from lightning_rl.runs import run_dir_of

    run_dir = run_dir_of(ckpt)
    return run_dir / "export" / ckpt.stem if run_dir is not None else ckpt.parent / f"{ckpt.stem}_export"
