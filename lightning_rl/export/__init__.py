"""``lightning-rl export``: a trained agent's deterministic policy as TorchScript or ONNX.

Examples::

    lightning-rl export runs/ppo_cartpole --format onnx               # the newest run's best.ckpt (else last.ckpt)
    lightning-rl export runs/ppo_cartpole/<date-time>/checkpoints/last.ckpt --format torchscript onnx --out policy/

What is written (into ``--out``; by default ``export/<checkpoint name>/`` in the run directory):

* ``policy.pt`` (TorchScript, ``torch.jit.trace``) and/or ``policy.onnx`` (``torch.onnx.export`` with
  ``dynamo=True``). A feed-forward agent with an array observation gives one input ``observation``
  ``[batch, *obs_shape]`` in the env's dtype (uint8 frames stay uint8; float64 becomes float32, as
  the agents take it) and one output ``action``: ``[batch]`` int64 for a discrete action space,
  ``[batch, D]`` int64 for MultiDiscrete (the space's own values) and MultiBinary (bits),
  ``[batch, A]`` float32 for a continuous one. A dict or tuple observation gives one input per leaf
  instead, named by its dotted key (``camera``, ``robot.joints``; a tuple's fields by position).
  A recurrent agent (R2D1, PG agents with ``lstm_size``) also takes ``prev_action``
  ``[batch(, D or A)]`` (the dtype of ``action``), ``prev_reward`` ``[batch]`` float32 and the LSTM
  state ``rnn_state_h``, ``rnn_state_c`` ``[layers, batch, hidden]``, and returns ``action``,
  ``next_rnn_state_h``, ``next_rnn_state_c``: an episode starts from zeros (state, previous action
  and reward), and each step feeds back the next state, the action and the env's reward. The batch
  dim is dynamic. The graph is the agent's evaluation-mode action with exploration off: the argmax
  of the policy's probabilities (PPO/A2C; each dim's for MultiDiscrete, the bits above 1/2 for
  MultiBinary) or of the Q-values (DQN, R2D1; C51: of the atoms' means), the Gaussian mean
  (PPO/A2C), ``mu`` (DDPG, TD3) and ``tanh(mean)`` (SAC) scaled to the action bounds. Running
  observation normalisation (``normalize_observation``) and the uint8-to-float scaling of frames
  are inside it. Continuous PPO/A2C actions are not clipped, as the agent's are not (the env
  adapter clips what it applies).
* A multi-agent agent (:class:`~lightning_rl.agents.MultiAgent`) gives one policy per sub-agent,
  ``<name>.<agent>.pt``/``.onnx``/``.safetensors`` (``policy.agent_0.pt``), each taking its agent's
  observation; with shared parameters one policy, ``<name>.shared.*``, that every agent calls with
  its own observation (and its own state, if recurrent).
* ``<name>.safetensors``: the exported module's weights and buffers (``safetensors.torch``).
* ``spaces.yaml``: the observation and action spaces (gymnasium's terms: type, shape, dtype,
  low/high, n, nvec, spaces), the inputs and outputs of the exported graph, a recurrent policy's
  state and how an episode starts, and where it came from; for a multi-agent agent one entry per
  agent under ``agents``.

Every file is loaded back (``torch.jit.load``, ``onnx.checker`` + onnxruntime, ``safetensors``) and
its actions compared with the agent's own deterministic actions before the command reports success:
on 8 observations at batch sizes 1 and 8, or, for a recurrent policy, over a 5-step rollout of 4
envs (and of 1) with the state carried through the file, its next state compared with the agent's
own at every step. Needs the ``export`` extra (``onnx``,
``onnxruntime``, ``onnxscript``, ``safetensors``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lightning_rl.lazy import lazy_attributes

if TYPE_CHECKING:
    from lightning_rl.export.cli import main
    from lightning_rl.export.exporter import (
        FORMATS,
        DeterministicPolicy,
        export_agent,
        load_agent,
        policy_of,
        reference_actions,
        reference_rollout,
        resolve_checkpoint,
    )
    from lightning_rl.export.targets import PolicyTarget, policy_targets

#: Each public name and the module that defines it, imported on first use: the command line
#: (:mod:`lightning_rl.export.cli`) answers ``--help`` without importing torch.
_LAZY: dict[str, str] = {
    "FORMATS": "lightning_rl.export.exporter",
    "PolicyTarget": "lightning_rl.export.targets",
    "policy_targets": "lightning_rl.export.targets",
    "reference_rollout": "lightning_rl.export.exporter",
    "DeterministicPolicy": "lightning_rl.export.exporter",
    "export_agent": "lightning_rl.export.exporter",
    "load_agent": "lightning_rl.export.exporter",
    "main": "lightning_rl.export.cli",
    "policy_of": "lightning_rl.export.exporter",
    "reference_actions": "lightning_rl.export.exporter",
    "resolve_checkpoint": "lightning_rl.export.exporter",
}

__all__ = [
    "FORMATS", "DeterministicPolicy", "PolicyTarget", "export_agent", "load_agent", "main", "policy_of",
    "policy_targets", "reference_actions", "reference_rollout", "resolve_checkpoint",
]

__getattr__, __dir__ = lazy_attributes(__name__, _LAZY)
