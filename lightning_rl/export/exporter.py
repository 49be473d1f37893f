"""The export of ``lightning-rl export`` (:mod:`lightning_rl.export`, whose docstring says what is written)."""


from __future__ import annotations

import logging
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

from lightning_rl.export.policy import (
    STATE_INPUTS,
    STATE_OUTPUTS,
    DeterministicPolicy,
    ObservationLeaf,
    input_dtype,
    leaf_arrays,
    observation_leaves,
    policy_of,
    reference_actions,
    reference_rollout,
    sample_observations,
)
from lightning_rl.export.targets import PolicyTarget, policy_targets
from lightning_rl.models.normalization import RunningMeanStdModel
from lightning_rl.runs import RunChoice

__all__ = [
    "FORMATS", "OPTIONAL_PACKAGES", "DeterministicPolicy", "PolicyTarget", "default_out_dir", "export_agent",
    "load_agent", "policy_of", "policy_targets", "reference_actions", "reference_rollout", "resolve_checkpoint",
]

#: ``--format`` -> file suffix.
FORMATS = {"torchscript": "pt", "onnx": "onnx"}
#: The packages of the ``export`` extra, imported only when a command needs them.
OPTIONAL_PACKAGES = ("onnx", "onnxruntime", "onnxscript", "safetensors")
#: Continuous actions of a written file must match the module's within this (discrete ones exactly).
ATOL = 1e-5
#: A recurrent file's next state must match the agent's within these: the cell state sums over
#: steps and grows, so its float32 rounding differences grow with it.
STATE_RTOL = 1e-4
STATE_ATOL = 1e-4
#: The check's observations: feed-forward policies one step of 8 rows; recurrent ones a rollout of
#: ``ROLLOUT_STEPS`` steps of ``ROLLOUT_ENVS`` envs, their state carried.
CHECK_ROWS = 8
ROLLOUT_STEPS = 5
ROLLOUT_ENVS = 4

Runner = Callable[[list[np.ndarray]], list[np.ndarray]]


def _check_actions(
    name: str, got: np.ndarray, expected: np.ndarray, where: str = "", what: str = "actions", rtol: float = 0.0,
    atol: float = ATOL,
) -> None:
    discrete = np.issubdtype(expected.dtype, np.integer)
    same = got.shape == expected.shape and (
        np.array_equal(got, expected) if discrete else bool(np.allclose(got, expected, rtol=rtol, atol=atol))
    )
    if not same:
        if not discrete and got.shape == expected.shape:
            where += f"; largest difference {np.abs(got - expected).max():.2g}"
        tolerance = "exactly" if discrete else f"atol {atol}" + (f", rtol {rtol}" if rtol else "")
        raise RuntimeError(
            f"{name} does not reproduce the agent's {what}{where} (shape {got.shape} vs {expected.shape}; "
            f"{tolerance}): the file was written but is not trustworthy"
        )


@dataclass
class _Export:
    """One policy being exported: its module, graph signature and the rows it is checked on."""

    target: PolicyTarget
    policy: DeterministicPolicy
    meaning: str
    leaves: list[ObservationLeaf]
    stem: str
    state_shape: tuple[int, int] | None  # (layers, hidden) of a recurrent policy
    observations: list[list[np.ndarray]]  # per step: the observation leaves [rows, ...]
    rewards: list[np.ndarray]  # per step: previous rewards [rows]
    expected: list[np.ndarray]  # per step: the agent's actions [rows, ...]
    states: list[Any]  # per step: the agent's next state (h, c) [N, rows, H] of a recurrent policy

    @property
    def input_names(self) -> list[str]:
        names = [leaf.name for leaf in self.leaves]
        return [*names, *STATE_INPUTS] if self.policy.recurrent else names

    @property
    def output_names(self) -> list[str]:
        return list(STATE_OUTPUTS) if self.policy.recurrent else ["action"]

    def example(self) -> tuple[torch.Tensor, ...]:
        """Inputs of batch 2 to trace and export with (a dynamic dim needs a size above 1)."""
        space = self.target.agent.env_spaces.observation
        leaves = [torch.from_numpy(a) for a in leaf_arrays(sample_observations(space, 2, seed=1), self.leaves)]
        if not self.policy.recurrent:
            return tuple(leaves)
        action = self.expected[0]
        previous = (torch.zeros((2, *action.shape[1:]), dtype=torch.from_numpy(action).dtype), torch.zeros(2))
        if self.state_shape is None:  # what _state_shape runs the network on
            return (*leaves, *previous)
        layers, hidden = self.state_shape
        state = torch.zeros(layers, 2, hidden)
        return (*leaves, *previous, state, state.clone())

    def check(self, label: str, run: Runner) -> None:
        """``run`` reproduces the agent's actions on the first row and on all rows."""
        for rows in (slice(0, 1), slice(None)):
            if self.state_shape is None:
                for observation, expected in zip(self.observations, self.expected, strict=True):
                    got = run([np.ascontiguousarray(a[rows]) for a in observation])[0]
                    _check_actions(label, np.asarray(got), expected[rows])
                continue
            first = self.expected[0][rows]
            layers, hidden = self.state_shape
            h = c = np.zeros((layers, len(first), hidden), dtype=np.float32)
            prev_action = np.zeros_like(first)
            for t, (observation, reward, expected) in enumerate(
                zip(self.observations, self.rewards, self.expected, strict=True)
            ):
                inputs = [np.ascontiguousarray(a[rows]) for a in observation]
                action, h, c = run([*inputs, prev_action, np.ascontiguousarray(reward[rows]), h, c])
                where = f" at step {t} of a {len(self.expected)}-step rollout of {len(first)} env(s), state carried"
                _check_actions(label, np.asarray(action), expected[rows], where)
                if self.states[t] is not None:  # the next state too: it decides later actions
                    for got, own, part in zip((h, c), self.states[t], ("h", "c"), strict=True):
                        _check_actions(label, np.asarray(got), own[:, rows], where, f"next LSTM state ({part})",
                                       STATE_RTOL, STATE_ATOL)
                prev_action = np.asarray(action)


def _torchscript(export: _Export, path: Path) -> Runner:
    with warnings.catch_warnings():
        # torch 2.13 marks torch.jit deprecated (for torch.export); TorchScript is still what libtorch
        # and older runtimes load, and the format this command was asked for.
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        traced = torch.jit.trace(export.policy, export.example(), check_trace=False)
        torch.jit.save(traced, str(path))
        loaded = torch.jit.load(str(path))

    def run(inputs: list[np.ndarray]) -> list[np.ndarray]:
        out = loaded(*(torch.from_numpy(x) for x in inputs))
        return [t.numpy() for t in out] if isinstance(out, tuple) else [out.numpy()]

    return run


def _onnx(export: _Export, path: Path) -> Runner:
    import onnx
    import onnxruntime

    batch = torch.export.Dim("batch")
    # The state's batch dim is its second ([layers, batch, hidden]); every other input's is its first.
    shapes = [{1: batch} if n in ("rnn_state_h", "rnn_state_c") else {0: batch} for n in export.input_names]
    onnx_logger = logging.getLogger("torch.onnx")
    level = onnx_logger.level
    onnx_logger.setLevel(logging.ERROR)  # "torchvision is not installed" notes, irrelevant here
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                export.policy, export.example(), str(path), dynamo=True, external_data=False, verbose=False,
                input_names=export.input_names, output_names=export.output_names,
                dynamic_shapes=(tuple(shapes),),  # one entry for forward's *inputs
            )
    finally:
        onnx_logger.setLevel(level)
    onnx.checker.check_model(str(path))
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = export.input_names

    def run(inputs: list[np.ndarray]) -> list[np.ndarray]:
        return list(session.run(export.output_names, dict(zip(names, inputs, strict=True))))

    return run


def _module_runner(policy: DeterministicPolicy) -> Runner:
    def run(inputs: list[np.ndarray]) -> list[np.ndarray]:
        out = policy(*(torch.from_numpy(x) for x in inputs))
        return [t.numpy() for t in out] if isinstance(out, tuple) else [out.numpy()]

    return run


def _space_dict(space: Any, action: bool = False) -> dict[str, Any]:
    """A space in gymnasium's terms: Box (inclusive bounds; a scalar when uniform), Discrete, Dict,
    Tuple, and for actions MultiDiscrete and MultiBinary (a 1-D integer box, as the agents read one)."""
    from lightning_rl.spaces import Composite, IntBox

    def bound(a: Any) -> Any:
        a = np.asarray(a)
        flat = a.reshape(-1)
        value = flat[0] if flat.size and np.all(flat == flat[0]) else a
        return value.tolist() if isinstance(value, np.ndarray) else value.item()

    if isinstance(space, Composite):
        subs = [_space_dict(sub, action) for sub in space.spaces]
        if space.keys is None:
            return {"type": "Tuple", "spaces": subs}
        return {"type": "Dict", "spaces": {str(k): sub for k, sub in zip(space.keys, subs, strict=True)}}
    dtype = str(np.dtype(space.dtype))
    if isinstance(space, IntBox) and space.shape == ():
        return {"type": "Discrete", "n": int(space.n), "start": int(space.low), "dtype": dtype}
    if isinstance(space, IntBox) and action and len(space.shape) == 1:
        low = np.broadcast_to(space.low, space.shape)
        high = np.broadcast_to(space.high, space.shape)
        if np.all(low == 0) and np.all(high == 2):
            return {"type": "MultiBinary", "n": int(space.shape[0]), "dtype": dtype}
        return {"type": "MultiDiscrete", "nvec": (high - low).tolist(), "start": low.tolist(), "dtype": dtype}
    high = np.asarray(space.high) - 1 if isinstance(space, IntBox) else space.high  # IntBox's high is exclusive
    return {"type": "Box", "shape": list(space.shape), "dtype": dtype, "low": bound(space.low), "high": bound(high)}


def _state_shape(policy: DeterministicPolicy, example: tuple[torch.Tensor, ...]) -> tuple[int, int]:
    """``(layers, hidden)`` of a recurrent network's LSTM state, from the network or one step of it."""
    model: Any = policy.model
    shape = getattr(model, "rnn_state_shape", None)
    if shape is None:
        observation = example[0] if policy.observation_tree is None else example[: policy.n_observations]
        with torch.no_grad():
            *_, state = model(observation, example[policy.n_observations], example[policy.n_observations + 1])
        if not isinstance(state, tuple) or len(state) != 2 or tuple.__getitem__(state, 0).ndim != 3:
            raise ValueError(
                f"{type(model).__name__}'s recurrent state is not an LSTM (h, c) pair of [layers, batch, hidden] "
                "tensors, the state an exported recurrent policy carries"
            )
        h = tuple.__getitem__(state, 0)
        shape = (h.shape[0], h.shape[-1])
    return int(shape[0]), int(shape[1])


def _check_data(agent: Any, recurrent: bool) -> tuple[list[Any], np.ndarray, list[Any], list[dict[str | None, Any]]]:
    """Observations, previous rewards and the agent's own actions and states to check every file
    against: one step of :data:`CHECK_ROWS` rows, or a rollout for recurrent policies."""
    steps, B = (ROLLOUT_STEPS, ROLLOUT_ENVS) if recurrent else (1, CHECK_ROWS)
    space = agent.env_spaces.observation
    sampled = sample_observations(space, steps * B, seed=2)
    from lightning_rl.data.buffers import buffer_func

    observations = [buffer_func(sampled, lambda a, t=t: a[t * B : (t + 1) * B]) for t in range(steps)]
    rewards = np.random.default_rng(3).normal(size=(steps, B)).astype(np.float32)
    rewards[0] = 0.0  # an episode's start
    states: list[dict[str | None, Any]] = []
    return observations, rewards, reference_rollout(agent, observations, rewards, states), states


def _plan(agent: Any, name: str) -> list[_Export]:
    """The policies of ``agent`` to write, with the data each is checked on (nothing written yet)."""
    targets = policy_targets(agent)
    built = [(target, *policy_of(target.agent)) for target in targets]
    observations, rewards, expected, states = _check_data(agent, any(policy.recurrent for _, policy, _ in built))
    plans = []
    for target, policy, meaning in built:
        leaves = observation_leaves(target.agent.env_spaces.observation)
        plan = _Export(
            target, policy, meaning, leaves, name if target.key is None else f"{name}.{target.key}", None,
            [leaf_arrays(target.observation_rows(o), leaves) for o in observations],
            [target.reward_rows(r) for r in rewards],
            [np.asarray(target.action_rows(a)) for a in expected],
            [step[target.key] for step in states],
        )
        if policy.recurrent:
            plan.state_shape = _state_shape(policy, plan.example())
        plans.append(plan)
    return plans


class _PlainDumper(yaml.SafeDumper):
    """``yaml.safe_dump`` without anchors and aliases: a shape written once per input that has it."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _qualname(obj: Any) -> str:
    return f"{type(obj).__module__}.{type(obj).__qualname__}"


def _policy_info(plan: _Export, files: dict[str, Path]) -> dict[str, Any]:
    """``spaces.yaml``'s description of one exported policy: what it computes, its graph's
    signature, a recurrent policy's state, and its files."""
    policy = plan.policy
    action = plan.expected[0]
    action_io = {"name": "action", "shape": ["batch", *action.shape[1:]], "dtype": str(action.dtype)}
    info: dict[str, Any] = {"agent": _qualname(plan.target.agent)}
    if plan.target.agent_names:
        info["acts_for"] = list(plan.target.agent_names)
    if plan.target.agent_index:
        # The shared policy tells agents apart by a one-hot appended to each one's observation.
        info["agent_id"] = {"appended_to": plan.leaves[0].name, "size": len(plan.target.agent_names),
                            "index": dict(plan.target.agent_index)}
    info["action"] = plan.meaning
    info["observation_normalization"] = any(isinstance(m, RunningMeanStdModel) for m in policy.modules())
    inputs = [{"name": leaf.name, "shape": ["batch", *leaf.space.shape], "dtype": str(input_dtype(leaf.space))}
              for leaf in plan.leaves]
    if not policy.recurrent and policy.observation_tree is None:  # one input, one output, as ever
        info["input"], info["output"] = inputs[0], action_io
    else:
        outputs = [action_io]
        if plan.state_shape is not None:
            layers, hidden = plan.state_shape
            state = [layers, "batch", hidden]
            inputs += [
                {**action_io, "name": "prev_action"},
                {"name": "prev_reward", "shape": ["batch"], "dtype": "float32"},
                {"name": "rnn_state_h", "shape": state, "dtype": "float32"},
                {"name": "rnn_state_c", "shape": state, "dtype": "float32"},
            ]
            outputs += [{"name": "next_rnn_state_h", "shape": state, "dtype": "float32"},
                        {"name": "next_rnn_state_c", "shape": state, "dtype": "float32"}]
        info["inputs"], info["outputs"] = inputs, outputs
        if plan.state_shape is not None:
            info["recurrent"] = {
                "layers": plan.state_shape[0],
                "hidden_size": plan.state_shape[1],
                # As the samplers start an episode: zero state, no previous action (0) and reward (0).
                "episode_start": {"rnn_state_h": 0.0, "rnn_state_c": 0.0, "prev_action": 0, "prev_reward": 0.0},
                "next_step": {"rnn_state_h": "next_rnn_state_h", "rnn_state_c": "next_rnn_state_c",
                              "prev_action": "action", "prev_reward": "the env's reward for action"},
            }
    info["files"] = {k: v.name for k, v in files.items()}
    return info


def export_agent(
    agent: Any, out_dir: str | Path, formats: list[str], name: str = "policy", source: dict[str, Any] | None = None,
) -> dict[str, Path]:
    """Write ``agent``'s deterministic policy (one per learner of a ``MultiAgent``) in ``formats``
    plus weights (safetensors) and ``spaces.yaml`` into ``out_dir``, each file loaded back and
    checked against the agent's own deterministic actions (:func:`reference_rollout`).

    Args:
        agent: An initialized agent (see :func:`policy_of` and :func:`policy_targets`).
        out_dir: Created if missing; files already there are replaced.
        formats: Keys of :data:`FORMATS`.
        name: File stem of the policy and weights files: ``<name>.pt``, or ``<name>.<agent>.pt``
            per sub-agent of a ``MultiAgent`` (``<name>.shared.pt`` with shared parameters).
        source: What to record in ``spaces.yaml`` about where the policy came from.

    Returns:
        ``{"torchscript" | "onnx" | "safetensors": path, "spaces": path}`` of what was written; for a
        ``MultiAgent`` the policy files' keys end in ``.<agent>`` (``torchscript.agent_0``).

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
    plans = _plan(agent, name)
    for plan in plans:
        plan.check("the exported module", _module_runner(plan.policy))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    infos: dict[str | None, dict[str, Any]] = {}
    for plan in plans:
        files: dict[str, Path] = {}
        for fmt in dict.fromkeys(formats):
            path = out / f"{plan.stem}.{FORMATS[fmt]}"
            plan.check(str(path), _torchscript(plan, path) if fmt == "torchscript" else _onnx(plan, path))
            files[fmt] = path
        state = {k: v.detach().clone().contiguous() for k, v in plan.policy.state_dict().items()}
        weights = out / f"{plan.stem}.safetensors"
        save_file(state, str(weights), metadata={"agent": type(plan.target.agent).__name__, "kind": plan.policy.kind})
        loaded = load_file(str(weights))
        if loaded.keys() != state.keys() or not all(torch.equal(loaded[k], v) for k, v in state.items()):
            raise RuntimeError(f"{weights} does not load back to the policy's weights")
        files["safetensors"] = weights
        suffix = "" if plan.target.key is None else f".{plan.target.key}"
        written.update({f"{k}{suffix}": v for k, v in files.items()})
        infos[plan.target.key] = _policy_info(plan, files)
    spaces = agent.env_spaces
    info: dict[str, Any] = {"observation": _space_dict(spaces.observation), "action": _space_dict(spaces.action, True)}
    if plans[0].target.key is None:
        info["policy"] = infos[None]
    else:
        shared = bool(getattr(agent, "share_parameters", False))
        info["policy"] = {"agent": _qualname(agent), "share_parameters": shared}
        info["agents"] = {
            agent_name: {
                "observation": _space_dict(plan.target.agent.env_spaces.observation),
                "action": _space_dict(plan.target.agent.env_spaces.action, True),
                "policy": infos[plan.target.key],
            }
            for plan in plans
            for agent_name in plan.target.agent_names
        }
    info["source"] = source or {}
    written["spaces"] = out / "spaces.yaml"
    written["spaces"].write_text(yaml.dump(info, Dumper=_PlainDumper, sort_keys=False))
    return written


def resolve_checkpoint(target: str) -> RunChoice:
    """The checkpoint of ``target`` and how it was chosen: the file itself, or a run's (or a group's
    run, :func:`lightning_rl.runs.choose_checkpoint`) ``best.ckpt``, else its ``last.ckpt``.

    Raises:
        ValueError: If ``target`` does not exist or holds no run with a checkpoint.
    """
    from lightning_rl.runs import choose_checkpoint

    return choose_checkpoint(target)


def load_agent(ckpt: Path | RunChoice) -> tuple[Any, dict[str, Any]]:
    """The agent of a lightning_rl checkpoint, rebuilt from the config it carries (read as data only,
    without Lightning: :func:`lightning_rl.policy.policy_from_checkpoint`), and a description of the
    run for ``spaces.yaml``.

    Raises:
        ValueError: If the file needs unpickling, was not written by lightning_rl, carries no config,
            or its config does not build an agent here.
    """
    from lightning_rl.policy import policy_from_checkpoint
    from lightning_rl.runs import RunChoice, run_dir_of

    choice = ckpt if isinstance(ckpt, RunChoice) else RunChoice(Path(ckpt), run_dir_of(ckpt), "the checkpoint given")
    try:
        policy = policy_from_checkpoint(choice, "cpu")
    except ValueError as error:
        raise ValueError(f"cannot rebuild the agent of {choice.checkpoint}: {error}") from None
    source = {
        "checkpoint": str(choice.checkpoint),
        "algorithm": policy.algorithm,
        "env_id": policy.env_id if isinstance(policy.env_id, str) else getattr(policy.env_id, "__qualname__", ""),
        "env_steps": int(policy.env_steps or 0),
    }
    return policy.agent, source


def default_out_dir(ckpt: Path) -> Path:
    """``<run>/export/<checkpoint name>/`` for a checkpoint in a run directory, else
    ``<checkpoint name>_export/`` beside the checkpoint."""
    from lightning_rl.runs import run_dir_of

    run_dir = run_dir_of(ckpt)
    return run_dir / "export" / ckpt.stem if run_dir is not None else ckpt.parent / f"{ckpt.stem}_export"

