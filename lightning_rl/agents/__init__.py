"""Agents: the acting side of an algorithm (rlpyt sections 1.3, 2.2, 3 and 4).

An agent is an ``nn.Module`` that builds its networks from the env's spaces, selects actions
for the sampler (``step``) and runs the training forward passes of its algorithm.
"""

from lightning_rl.agents.base import (
    AgentInputs,
    AgentStep,
    BaseAgent,
    as_numpy_action,
    check_continuous_action_space,
    check_discrete_action_space,
    check_observation_space,
    is_image_space,
    make_target_model,
)
from lightning_rl.agents.dqn import (
    AlternatingR2d1Agent,
    CatDqnAgent,
    CatDqnAgentInfo,
    DqnAgent,
    DqnAgentInfo,
    R2d1Agent,
    R2d1AgentInfo,
)
from lightning_rl.agents.epsilon import EpsilonGreedyAgentMixin, log_spaced_epsilons
from lightning_rl.agents.multiagent import SHARED_AGENT_KEY, MultiAgent
from lightning_rl.agents.pg import (
    AgentInfo,
    AgentInfoRnn,
    AlternatingCategoricalPgAgent,
    AlternatingGaussianPgAgent,
    CategoricalPgAgent,
    GaussianPgAgent,
    PgAgentBase,
)
from lightning_rl.agents.qpg import DdpgAgent, DdpgAgentInfo, QpgAgentBase, SacAgent, SacAgentInfo, Td3Agent
from lightning_rl.agents.recurrent import (
    AlternatingRecurrentAgentMixin,
    RecurrentAgentMixin,
    rnn_state_from_samples,
    rnn_state_to_samples,
)

__all__ = [
    "AgentInfo",
    "AgentInfoRnn",
    "AgentInputs",
    "AgentStep",
    "AlternatingCategoricalPgAgent",
    "AlternatingGaussianPgAgent",
    "AlternatingR2d1Agent",
    "AlternatingRecurrentAgentMixin",
    "BaseAgent",
    "CatDqnAgent",
    "CatDqnAgentInfo",
    "CategoricalPgAgent",
    "DdpgAgent",
    "DdpgAgentInfo",
    "DqnAgent",
    "DqnAgentInfo",
    "EpsilonGreedyAgentMixin",
    "GaussianPgAgent",
    "MultiAgent",
    "PgAgentBase",
    "QpgAgentBase",
    "R2d1Agent",
    "R2d1AgentInfo",
    "RecurrentAgentMixin",
    "SHARED_AGENT_KEY",
    "SacAgent",
    "SacAgentInfo",
    "Td3Agent",
    "as_numpy_action",
    "check_continuous_action_space",
    "check_discrete_action_space",
    "check_observation_space",
    "is_image_space",
    "log_spaced_epsilons",
    "make_target_model",
    "rnn_state_from_samples",
    "rnn_state_to_samples",
]
