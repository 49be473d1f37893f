"""A small cooperative multi-agent gymnasium env: two agents walking to their targets on a grid.

Multi-agent envs in lightning_rl are ordinary gymnasium envs whose action space is a ``Dict``
keyed by agent name (and whose observation space may be one too). :class:`GymEnvWrapper`
turns the dicts into named tuples with one field per agent, so samplers store one ``[T, B]``
array per agent and :class:`~lightning_rl.agents.MultiAgent` gives each agent its own policy.

The convention, which :class:`~lightning_rl.envs.pettingzoo.PettingZooEnv` follows for any
PettingZoo env:

* action space: ``Dict`` keyed by agent name;
* observation space: either one observation every agent sees whole, or a ``Dict`` with each
  agent's own observation under its name, optionally beside
  :data:`AGENT_MASK_KEY` (``"agent_mask"``: float ``[n_agents]`` in action-space order, 1 for the
  agents acting on this observation; agents at 0 are not stepped and their rows count in no
  loss) and :data:`STATE_KEY` (``"state"``: the global state a centralised critic sees);
* ``info``: ``agent_rewards`` (each agent's reward by name), and with an agent mask also
  ``agent_terminated`` and ``agent_truncated`` (by name: the agent left the episode at this
  step, by termination or by truncation), which per-agent returns and advantages use.

:class:`CoopGridEnv` is registered as ``lightning_rl/CoopGrid-v0`` (20 steps per episode) when
this module is imported, which ``import lightning_rl.envs`` does::

    >>> from lightning_rl.envs import make_env
    >>> env = make_env("lightning_rl/CoopGrid-v0", seed=0)
    >>> env.action_space.names
    ('agent_0', 'agent_1')
"""

from __future__ import annotations

from typing import Any, Literal

import gymnasium
import numpy as np
from gymnasium import spaces

__all__ = ["AGENT_MASK_KEY", "AGENT_REWARDS_KEY", "COOP_GRID_ID", "STATE_KEY", "CoopGridEnv"]

COOP_GRID_ID = "lightning_rl/CoopGrid-v0"
#: Observation field: which agents act on this observation (float 0/1 per agent, action-space order).
AGENT_MASK_KEY = "agent_mask"
#: Observation field: the env's global state, the input of a centralised critic.
STATE_KEY = "state"
#: ``info`` entry with each agent's reward by name.
AGENT_REWARDS_KEY = "agent_rewards"

# Moves of the actions 0..4: stay, up, down, left, right (row, column).
_MOVES = np.array([[0, 0], [-1, 0], [1, 0], [0, -1], [0, 1]], dtype=np.int64)
_COLORS = np.array([[230, 60, 60], [60, 90, 230]], dtype=np.uint8)


class CoopGridEnv(gymnasium.Env):
    """Two agents on a ``size x size`` grid, each with its own target cell, rewarded as a team.

    Every step each agent moves (``Discrete(5)``: stay, up, down, left, right; moves off the
    grid stay put). Agents block each other: two agents moving into the same cell, or swapping
    cells, both stay where they were. Agent ``i`` earns 0.5 per step while it stands on its
    target, plus 0.5 while *both* agents stand on theirs, so the team does best when both walk
    straight to their targets and stay. The env's reward is the sum of the agents' rewards;
    ``info["agent_rewards"]`` holds each agent's own. Episodes never terminate: the registered
    id truncates them after 20 steps. Start cells and (distinct) target cells are drawn from the
    reset seed, so a seeded env replays exactly.

    On the default 5 x 5 grid a random policy scores about 0.8 per episode and walking straight
    to the targets about 30.

    Args:
        size: Grid side length (at least 2).
        observation_mode: ``"per_agent"``: a ``Dict`` with each agent's own view, float32
            ``[6]``: its cell, its target's offset and the other agent's offset, all divided by
            ``size - 1``. ``"shared"``: one float32 ``[8]`` vector of both agents' cells and
            targets (same scale), the same for both agents.
        render_mode: ``"rgb_array"`` (``[8 * size, 8 * size, 3]`` uint8: agents as filled
            squares, targets as outlines in the agent's color) or ``"ansi"`` (text), or None.

    Raises:
        ValueError: On a bad argument, naming it.
    """

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}
    agent_names = ("agent_0", "agent_1")

    def __init__(
        self,
        size: int = 5,
        observation_mode: Literal["per_agent", "shared"] = "per_agent",
        render_mode: str | None = None,
    ) -> None:
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 2:
            raise ValueError(f"CoopGridEnv: size must be an int >= 2, got {size!r}")
        if observation_mode not in ("per_agent", "shared"):
            raise ValueError(f"CoopGridEnv: observation_mode must be 'per_agent' or 'shared', got {observation_mode!r}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            modes = self.metadata["render_modes"]
            raise ValueError(f"CoopGridEnv: render_mode must be one of {modes} or None, got {render_mode!r}")
        self.size = int(size)
        self.observation_mode = observation_mode
        self.render_mode = render_mode
        self.action_space = spaces.Dict({name: spaces.Discrete(len(_MOVES)) for name in self.agent_names})
        if observation_mode == "per_agent":
            view = spaces.Box(-1.0, 1.0, shape=(6,), dtype=np.float32)
            self.observation_space = spaces.Dict({name: view for name in self.agent_names})
        else:
            self.observation_space = spaces.Box(0.0, 1.0, shape=(8,), dtype=np.float32)
        self.positions = np.zeros((2, 2), dtype=np.int64)
        self.targets = np.zeros((2, 2), dtype=np.int64)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        cells = self.size * self.size
        # Two distinct start cells and two distinct target cells (a start may be a target).
        starts = self.np_random.choice(cells, size=2, replace=False)
        goals = self.np_random.choice(cells, size=2, replace=False)
        self.positions = np.stack(np.divmod(starts, self.size), axis=1).astype(np.int64)
        self.targets = np.stack(np.divmod(goals, self.size), axis=1).astype(np.int64)
        return self._observation(), {"agent_rewards": self._agent_rewards()}

    def step(self, action: dict[str, Any]):
        if not isinstance(action, dict) or set(action) != set(self.agent_names):
            raise ValueError(f"CoopGridEnv: action must be a dict with keys {self.agent_names}, got {action!r}")
        moves = np.stack([_MOVES[int(action[name])] for name in self.agent_names])
        proposed = np.clip(self.positions + moves, 0, self.size - 1)
        same_cell = np.array_equal(proposed[0], proposed[1])
        swapped = np.array_equal(proposed[0], self.positions[1]) and np.array_equal(proposed[1], self.positions[0])
        if not (same_cell or swapped):
            self.positions = proposed
        rewards = self._agent_rewards()
        reward = float(sum(rewards.values()))
        return self._observation(), reward, False, False, {"agent_rewards": rewards}

    def _on_target(self) -> np.ndarray:
        return np.all(self.positions == self.targets, axis=1)

    def _agent_rewards(self) -> dict[str, float]:
        on_target = self._on_target()
        team = 0.5 if on_target.all() else 0.0
        return {name: 0.5 * float(on) + team for name, on in zip(self.agent_names, on_target, strict=True)}

    def _observation(self) -> Any:
        scale = np.float32(self.size - 1)
        if self.observation_mode == "shared":
            return (np.concatenate([self.positions.ravel(), self.targets.ravel()]) / scale).astype(np.float32)
        views = {}
        for i, name in enumerate(self.agent_names):
            own, other = self.positions[i], self.positions[1 - i]
            view = np.concatenate([own, self.targets[i] - own, other - own])
            views[name] = (view / scale).astype(np.float32)
        return views

    def render(self) -> Any:
        """The grid as an RGB array or text, as ``render_mode`` says (None without a mode)."""
        if self.render_mode == "ansi":
            rows = [["." for _ in range(self.size)] for _ in range(self.size)]
            for i in range(2):
                r, c = self.targets[i]
                rows[r][c] = "ab"[i]
            for i in range(2):
                r, c = self.positions[i]
                rows[r][c] = "AB"[i]
            return "\n".join("".join(row) for row in rows) + "\n"
        if self.render_mode == "rgb_array":
            cell = 8
            image = np.full((self.size * cell, self.size * cell, 3), 255, dtype=np.uint8)
            for i in range(2):
                r, c = self.targets[i] * cell
                image[r : r + cell, c : c + cell] = _COLORS[i]
                image[r + 2 : r + cell - 2, c + 2 : c + cell - 2] = 255
            for i in range(2):
                r, c = self.positions[i] * cell
                image[r + 1 : r + cell - 1, c + 1 : c + cell - 1] = _COLORS[i]
            return image
        return None


if COOP_GRID_ID not in gymnasium.registry:
    # gymnasium's EnvCreator protocol takes only ``**kwargs``; an env class with named arguments works the same.
    gymnasium.register(COOP_GRID_ID, entry_point=CoopGridEnv, max_episode_steps=20)  # type: ignore[arg-type]
