"""Action distributions: categorical, epsilon-greedy and diagonal Gaussian (rlpyt section 9)."""

from lightning_rl.distributions.base import EPS, DiscreteMixin, Distribution
from lightning_rl.distributions.categorical import Categorical, DistInfo
from lightning_rl.distributions.epsilon_greedy import CategoricalEpsilonGreedy, EpsilonGreedy
from lightning_rl.distributions.gaussian import DistInfoStd, Gaussian

__all__ = [
    "EPS",
    "Categorical",
    "CategoricalEpsilonGreedy",
    "DiscreteMixin",
    "DistInfo",
    "DistInfoStd",
    "Distribution",
    "EpsilonGreedy",
    "Gaussian",
]
