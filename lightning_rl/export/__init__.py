"""``lightning-rl export``: a trained agent's deterministic policy as TorchScript or ONNX.

Examples::

    lightning-rl export runs/ppo_cartpole --format onnx               # the newest run's best.ckpt (else last.ckpt)
    lightning-rl export runs/ppo_cartpole/<date-time>/checkpoints/last.ckpt --format torchscript onnx --out policy/

What is written (into ``--out``; by default ``export/<checkpoint name>/`` in the run directory):

* ``policy.pt`` (TorchScript, ``torch.jit.trace``) and/or ``policy.onnx`` (``torch.onnx.export`` with
  ``dynamo=True``): one input ``observation`` ``[batch, *obs_shape]`` in the env's dtype (uint8 frames
  stay uint8; float64 becomes float32, as the agents take it) and one output ``action``: ``[batch]``
  int64 for a discrete action space, ``[batch, A]`` float32 for a continuous one. The batch dim is
  dynamic. The graph is the agent's evaluation-mode action with exploration off: the argmax of the
  policy's probabilities (PPO/A2C) or of the Q-values (DQN; C51: of the atoms' means), the Gaussian
  mean (PPO/A2C), ``mu`` (DDPG, TD3) and ``tanh(mean)`` (SAC) scaled to the action bounds. Running
  observation normalisation (``normalize_observation``) and the uint8-to-float scaling of frames are
  inside it. Continuous PPO/A2C actions are not clipped, as the agent's are not (the env adapter
  clips what it applies).
* ``policy.safetensors``: the exported module's weights and buffers (``safetensors.torch``).
* ``spaces.yaml``: the observation and action spaces (gymnasium's terms: type, shape, dtype,
  low/high, n), the input and output of the exported graph, and where it came from.

Every file is loaded back (``torch.jit.load``, ``onnx.checker`` + onnxruntime, ``safetensors``) and
its actions compared with the agent's own deterministic actions before the command reports success.
Recurrent agents (R2D1, PG agents with ``lstm_size``), multi-agent and dict/tuple observations are
refused with the reason: their policy needs an LSTM state or several inputs, which this exporter does
not write. Needs the ``export`` extra (``onnx``, ``onnxruntime``, ``onnxscript``, ``safetensors``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lightning_rl.export.cli import main
    from lightning_rl.export.exporter import (
        FORMATS,
        DeterministicPolicy,
        export_agent,
        load_agent,
        policy_of,
        reference_actions,
        resolve_checkpoint,
    )

#: Each public name and the module that defines it, imported on first use: the command line
#: (:mod:`lightning_rl.export.cli`) answers ``--help`` without importing torch.
_LAZY: dict[str, str] = {
    "FORMATS": "lightning_rl.export.exporter",
    "DeterministicPolicy": "lightning_rl.export.exporter",
    "export_agent": "lightning_rl.export.exporter",
    "load_agent": "lightning_rl.export.exporter",
    "main": "lightning_rl.export.cli",
    "policy_of": "lightning_rl.export.exporter",
    "reference_actions": "lightning_rl.export.exporter",
    "resolve_checkpoint": "lightning_rl.export.exporter",
}

__all__ = [
    "FORMATS", "DeterministicPolicy", "export_agent", "load_agent", "main", "policy_of", "reference_actions",
    "resolve_checkpoint",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
