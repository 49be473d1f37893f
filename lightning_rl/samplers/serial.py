"""The serial sampler: envs, agent and collection loop all in the calling process (rlpyt 6.1)."""

from __future__ import annotations

from typing import Any, Literal

from pytorch_lightning.utilities import rank_zero_warn

from lightning_rl.safe_state import decode, encode, env_state, load_env_state
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
    next to the agent's forward pass. Its :meth:`state_dict` holds the envs' state and the
    collector's as plain data, so a resumed run continues exactly where it stopped (gymnasium
    classic control and MuJoCo, :class:`~lightning_rl.envs.AtariEnv`; see
    :mod:`lightning_rl.safe_state`).

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
        """Counters, the envs' state and the collector's (observations, previous actions and
        rewards, unfinished TrajInfos, wait-reset flags), all as plain data
        (:mod:`lightning_rl.safe_state`).

        When some env holds state that cannot be stored as data, no env state is stored:
        ``env_state_missing`` names the attributes, and a resumed run restarts its envs at a new
        episode (:meth:`load_state_dict`). The agent's recurrent state is the agent's own.
        """
        state = super().state_dict()
        if not self.initialized:
            return state
        envs, missing = [], []
        for env in self.train_collector.envs:
            layers, env_missing = env_state(env)
            envs.append(layers)
            missing.extend(env_missing)
        if missing:
            state["env_state_missing"] = sorted(set(missing))
            return state
        state["envs"] = envs
        state["collector"] = encode(self.train_collector.state(), "collector")
        if self.eval_collector is not None:
            eval_states = [env_state(env)[0] for env in self.eval_collector.envs]
            if all(s is not None for s in eval_states):
                state["eval_envs"] = eval_states
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` into an initialized sampler built with the same arguments.

        Without stored env state the envs are reset instead (a new episode in every env), with a
        warning naming what could not be stored.

        Raises:
            ValueError: If the sampler is not initialized or the state has another env count or
                wrapper chain.
        """
        super().load_state_dict(state)
        if "envs" not in state:
            if state.get("env_state_missing"):
                rank_zero_warn(
                    f"SerialSampler: the checkpoint holds no env state ({', '.join(state['env_state_missing'])} "
                    "cannot be stored as data); the envs start new episodes"
                )
                self.restart_envs()
            return
        if not self.initialized:
            raise ValueError("SerialSampler.load_state_dict: call initialize() before loading env state")
        envs = state["envs"]
        if len(envs) != self.batch_spec.B:
            raise ValueError(
                f"SerialSampler.load_state_dict: the state holds {len(envs)} envs, "
                f"this sampler has batch_B={self.batch_spec.B}"
            )
        for env, layers in zip(self.train_collector.envs, envs, strict=True):
            load_env_state(env, layers)
        self.train_collector.load_state(decode(state["collector"]))
        eval_states = state.get("eval_envs")
        if eval_states is not None and self.eval_collector is not None:
            # Another number of eval envs than the checkpoint's: they start from their seeds.
            if len(eval_states) == len(self.eval_collector.envs):
                for env, layers in zip(self.eval_collector.envs, eval_states, strict=True):
                    load_env_state(env, layers)

    def restart_envs(self) -> None:
        """Reset every training env (new episodes, unfinished TrajInfos dropped)."""
        self.train_collector.start_envs()
        self.agent.reset()
