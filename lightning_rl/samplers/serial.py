"""The serial sampler: envs, agent and collection loop all in the calling process (rlpyt 6.1)."""

from __future__ import annotations

import pickle
from typing import Any, Literal

from lightning_rl.samplers.base import BaseSampler, Samples, set_agent_mode
from lightning_rl.samplers.collectors import (
    EvalCollector,
    ResetCollector,
    WaitResetCollector,
    collect_batch,
    evaluate_envs,
)

__all__ = ["SerialSampler", "make_collector"]


def make_collector(
    kind: str, envs: list[Any], step_buffer: Any, samples: Samples, traj_info_factory: Any
) -> ResetCollector:
    """The training collector named by the sampler's ``collector`` argument."""
    cls = WaitResetCollector if kind == "wait_reset" else ResetCollector
    return cls(envs, step_buffer, samples, traj_info_factory)


class SerialSampler(BaseSampler):
    """All ``batch_B`` envs stepped one after another in this process; one ``agent.step`` per
    time step for all of them.

    Easiest to debug (``breakpoint()`` works anywhere) and fast enough when env steps are cheap
    next to the agent's forward pass. Its :meth:`state_dict` holds the pickled envs and the
    collector's state, so a resumed run continues exactly where it stopped (for envs whose
    pickle keeps their state: gymnasium classic control, :class:`~lightning_rl.envs.AtariEnv`).

    Takes the arguments of :class:`~lightning_rl.samplers.base.BaseSampler` (``n_workers`` and
    ``cpu_affinity`` are ignored).
    """

    def _start(self) -> None:
        T, B = self.batch_spec
        envs = [self.make_env(b) for b in range(B)]
        assert self.samples is not None  # allocated by initialize() before _start()
        self.train_collector = make_collector(
            self.collector, envs, self.step_buffer, self.samples, self.traj_info_factory
        )
        self.train_collector.start_envs(self.max_decorrelation_steps, [self.decorrelation_rng(b) for b in range(B)])
        self.agent.reset()
        self.eval_collector = None
        if self.eval_n_envs:
            eval_envs = [self.make_env(i, evaluation=True) for i in range(self.eval_n_envs)]
            assert self.eval_step_buffer is not None
            self.eval_collector = EvalCollector(eval_envs, self.eval_step_buffer, self.traj_info_factory)

    def obtain_samples(
        self, itr: int, agent_mode: Literal["sample", "eval"] = "sample", reset_envs: bool = False
    ) -> tuple[Samples, list[Any]]:
        self._check_ready("obtain_samples")
        assert self.samples is not None
        set_agent_mode(self.agent, itr, agent_mode)
        if reset_envs:
            self.train_collector.start_envs()
            self.agent.reset()
        completed = collect_batch(
            self.agent, self.train_collector, self.step_buffer, self.samples, self.bootstrap_value
        )
        self.env_steps += self.batch_spec.size
        return self.samples, completed

    def evaluate_agent(self, itr: int) -> list[Any]:
        self._check_can_evaluate()
        assert self.eval_collector is not None
        self.agent.eval_mode(itr)
        self.agent.reset()
        completed = evaluate_envs(self.agent, self.eval_collector, self.eval_max_steps, self.eval_max_trajectories)
        return completed[: self.eval_max_trajectories]

    def shutdown(self) -> None:
        self._closed = True
        for c in (getattr(self, "train_collector", None), getattr(self, "eval_collector", None)):
            if c is not None:
                for env in c.envs:
                    env.close()
                c.envs = []

    def state_dict(self) -> dict[str, Any]:
        """Counters, the pickled envs and the collector state (observations, previous actions
        and rewards, unfinished TrajInfos, wait-reset flags).

        The agent's recurrent state is the agent's own (its ``state_dict``).

        Raises:
            ValueError: If an env cannot be pickled.
        """
        state = super().state_dict()
        if not self.initialized:
            return state
        try:
            state["envs"] = pickle.dumps(self.train_collector.envs)
            state["eval_envs"] = pickle.dumps(self.eval_collector.envs) if self.eval_collector is not None else None
        except Exception as e:  # noqa: BLE001 - pickling errors come as many types
            raise ValueError(
                f"SerialSampler.state_dict: the envs of env_id={self.env_id!r} cannot be pickled ({e}); "
                "checkpoint without the sampler state"
            ) from e
        state["collector"] = pickle.dumps(self.train_collector.state())
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` into an initialized sampler (same arguments).

        Raises:
            ValueError: If the sampler is not initialized or the state has another env count.
        """
        super().load_state_dict(state)
        if "envs" not in state:
            return
        if not self.initialized:
            raise ValueError("SerialSampler.load_state_dict: call initialize() before loading env state")
        envs = pickle.loads(state["envs"])
        if len(envs) != self.batch_spec.B:
            raise ValueError(
                f"SerialSampler.load_state_dict: the state holds {len(envs)} envs, "
                f"this sampler has batch_B={self.batch_spec.B}"
            )
        for env in self.train_collector.envs:
            env.close()
        self.train_collector.envs = envs
        self.train_collector.load_state(pickle.loads(state["collector"]))
        if state.get("eval_envs") is not None and self.eval_collector is not None:
            for env in self.eval_collector.envs:
                env.close()
            self.eval_collector.envs = pickle.loads(state["eval_envs"])
