"""Per-trajectory statistics that samplers accumulate step by step (rlpyt ``TrajInfo``).

A collector makes one ``TrajInfo`` per env, calls :meth:`TrajInfo.step` after every env step and
:meth:`TrajInfo.terminate` when the trajectory ends, then hands the finished object to the
logging callbacks. Public statistics are the CamelCase keys; keys with a leading underscore are
internal bookkeeping that loggers skip (rlpyt convention). Samplers take the class to use as
``traj_info_cls`` and its keyword arguments (e.g. the algorithm's ``discount``).
"""

from __future__ import annotations

from typing import Any

from lightning_rl.data.namedarraytuple import AttrDict

__all__ = ["AtariTrajInfo", "MultiAgentTrajInfo", "TrajInfo"]


class TrajInfo(AttrDict):
    """Length, return, count of nonzero rewards and discounted return of one trajectory.

    Args:
        discount: Discount factor for ``DiscountedReturn = sum_t discount**t * reward_t``.

    Examples:
        >>> info = TrajInfo(discount=0.5)
        >>> for r in (1.0, 0.0, 2.0):
        ...     info.step(None, None, r, False, None, None)
        >>> info.DiscountedReturn
        1.5
    """

    def __init__(self, discount: float = 0.99) -> None:
        super().__init__()
        self.Length = 0
        self.Return = 0.0
        self.NonzeroRewards = 0
        self.DiscountedReturn = 0.0
        self._discount = float(discount)
        self._cur_discount = 1.0

    def step(
        self,
        observation: Any,
        action: Any,
        reward: Any,
        done: Any,
        agent_info: Any,
        env_info: Any,
    ) -> None:
        """Account one env step (``reward`` is a scalar: float, numpy or one-element tensor)."""
        reward = float(reward)
        self.Length += 1
        self.Return += reward
        self.NonzeroRewards += reward != 0
        self.DiscountedReturn += self._cur_discount * reward
        self._cur_discount *= self._discount

    def terminate(self, observation: Any) -> TrajInfo:
        """Close the trajectory (nothing left to compute here) and return ``self``."""
        return self

    def copy(self) -> TrajInfo:
        """A copy with the same statistics and discount state."""
        new = type(self).__new__(type(self))
        AttrDict.__init__(new, self)
        return new

    def __reduce__(self):
        # AttrDict rebuilds from a positional dict, which this __init__ would take as ``discount``.
        return (_rebuild_traj_info, (type(self), dict(self)))


def _rebuild_traj_info(cls: type[TrajInfo], state: dict[str, Any]) -> TrajInfo:
    new = cls.__new__(cls)
    AttrDict.__init__(new, state)
    return new


class AtariTrajInfo(TrajInfo):
    """:class:`TrajInfo` plus ``GameScore``: the sum of ``env_info.game_score``, the raw game
    score before reward clipping."""

    def __init__(self, discount: float = 0.99) -> None:
        super().__init__(discount=discount)
        self.GameScore = 0.0

    def step(
        self,
        observation: Any,
        action: Any,
        reward: Any,
        done: Any,
        agent_info: Any,
        env_info: Any,
    ) -> None:
        """Account one env step; ``env_info`` must have a ``game_score`` field."""
        super().step(observation, action, reward, done, agent_info, env_info)
        self.GameScore += float(env_info.game_score)


class MultiAgentTrajInfo(TrajInfo):
    """:class:`TrajInfo` plus ``AgentReturns``: each agent's return by name, summed from the env's
    ``env_info.agent_rewards`` (the multi-agent convention of :mod:`lightning_rl.envs.multiagent`);
    empty for an env without it. ``Return`` stays the env's reward summed (the team return).

    Args:
        discount: Discount factor of ``DiscountedReturn`` (see :class:`TrajInfo`).
    """

    def __init__(self, discount: float = 0.99) -> None:
        super().__init__(discount=discount)
        self.AgentReturns: dict[str, float] = {}

    def step(
        self,
        observation: Any,
        action: Any,
        reward: Any,
        done: Any,
        agent_info: Any,
        env_info: Any,
    ) -> None:
        """Account one env step and each agent's reward."""
        super().step(observation, action, reward, done, agent_info, env_info)
        rewards = getattr(env_info, "agent_rewards", None)
        if rewards is not None:
            returns = self.AgentReturns
            for name, value in zip(rewards._fields, rewards, strict=True):
                returns[name] = returns.get(name, 0.0) + float(value)

    def copy(self) -> MultiAgentTrajInfo:
        new = type(self).__new__(type(self))
        AttrDict.__init__(new, self)
        new.AgentReturns = dict(self.AgentReturns)
        return new
