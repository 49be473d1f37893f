"""Action distributions: categorical, epsilon-greedy, diagonal Gaussian (rlpyt section 9) and the
factorized multi-discrete and Bernoulli ones of vector actions."""

from lightning_rl.distributions.base import EPS, DiscreteMixin, Distribution
from lightning_rl.distributions.categorical import Categorical, DistInfo
from lightning_rl.distributions.epsilon_greedy import CategoricalEpsilonGreedy, EpsilonGreedy
from lightning_rl.distributions.gaussian import DistInfoStd, Gaussian
from lightning_rl.distributions.multi import Bernoulli, MultiCategorical

__all__ = [
    "EPS",
    "Bernoulli",
    "Categorical",
    "CategoricalEpsilonGreedy",
    "DiscreteMixin",
    "DistInfo",
    "DistInfoStd",
    "Distribution",
    "EpsilonGreedy",
    "Gaussian",
    "MultiCategorical",
]
