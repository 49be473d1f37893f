"""Training counters shared by a LightningModule and its dataset, and checkpointed with it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class TrainState:
    """Where a run stands, in the units RL users think in.

    Attributes:
        env_steps: Environment steps collected on this rank.
        itr: Sampler iterations (rollouts or off-policy collection steps) on this rank.
        updates: Gradient updates applied.
        sampler_time: Seconds spent collecting (for throughput statistics).
        update_credit: Fractional updates owed by the replay ratio, carried to the next iteration.
        updates_at_sync: ``updates`` when the weights were last published to the sampler.
        new_traj_infos: Episodes completed since the callbacks last read them (not checkpointed).
    """

    env_steps: int = 0
    itr: int = 0
    updates: int = 0
    sampler_time: float = 0.0
    update_credit: float = 0.0
    updates_at_sync: int = 0
    new_traj_infos: list[Any] = field(default_factory=list)

    def record_rollout(self, n_env_steps: int, traj_infos: list[Any]) -> None:
        """Count one sampler iteration of ``n_env_steps`` and keep its finished episodes."""
        self.env_steps += n_env_steps
        self.itr += 1
        self.new_traj_infos.extend(traj_infos)

    def take_owed_updates(self, updates_per_iteration: float, min_steps_learn: int) -> int:
        """The whole number of updates the replay ratio owes for the iteration just recorded.

        None before ``min_steps_learn`` env steps; from then on ``updates_per_iteration`` an
        iteration, the fraction left over carried in :attr:`update_credit` to the next one.
        """
        if self.env_steps < min_steps_learn:
            return 0
        self.update_credit += updates_per_iteration
        n_updates = int(self.update_credit)
        self.update_credit -= n_updates
        return n_updates

    def pop_traj_infos(self) -> list[Any]:
        """Return and forget the episodes completed since the last call."""
        out, self.new_traj_infos = self.new_traj_infos, []
        return out

    def state_dict(self) -> dict[str, Any]:
        return {
            "env_steps": self.env_steps,
            "itr": self.itr,
            "updates": self.updates,
            "sampler_time": self.sampler_time,
            "update_credit": self.update_credit,
            "updates_at_sync": self.updates_at_sync,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.env_steps = int(state["env_steps"])
        self.itr = int(state["itr"])
        self.updates = int(state["updates"])
        self.sampler_time = float(state.get("sampler_time", 0.0))
        self.update_credit = float(state.get("update_credit", 0.0))
        self.updates_at_sync = int(state.get("updates_at_sync", 0))
