"""MultiAgent: one sub-agent per agent name, parameter sharing, and the sampler's per-agent buffers."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lightning_rl.agents import SHARED_AGENT_KEY, CategoricalPgAgent, GaussianPgAgent, MultiAgent
from lightning_rl.data import buffer_from_example
from lightning_rl.data.namedarraytuple import NamedArrayTupleSchema
from lightning_rl.envs import COOP_GRID_ID, make_env
from lightning_rl.samplers import SerialSampler
from lightning_rl.spaces import FloatBox

NAMES = ("agent_0", "agent_1")


def coop_spaces(**env_kwargs):
    return make_env(COOP_GRID_ID, **env_kwargs).spaces


def zero_actions(spaces, B: int):
    """``[B]`` null actions of every agent, as the sampler's step buffer holds them."""
    return buffer_from_example(spaces.action.null_value(), B)


def inputs(spaces, B: int = 3, same_views: bool = False):
    """Random per-agent observations (a namedarraytuple like the sampler's), zero previous actions and rewards."""
    rng = np.random.default_rng(0)
    observation = buffer_from_example(spaces.observation.null_value(), B)
    for name in NAMES:
        getattr(observation, name)[:] = rng.uniform(-1, 1, size=(B, 6))
    if same_views:
        observation.agent_1[:] = observation.agent_0
    return observation, zero_actions(spaces, B), np.zeros(B, dtype=np.float32)


def n_params(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def test_a_template_is_copied_into_independent_sub_agents():
    torch.manual_seed(0)
    agent = MultiAgent(CategoricalPgAgent(hidden_sizes=(16,)))
    spaces = coop_spaces()
    agent.initialize(spaces)
    assert agent.agent_names == NAMES and agent.initialized
    a0, a1 = agent.sub_agent("agent_0"), agent.sub_agent("agent_1")
    assert a0 is not a1
    assert n_params(agent) == n_params(a0) + n_params(a1)
    assert not torch.equal(next(a0.parameters()), next(a1.parameters()))
    step = agent.step(*inputs(spaces))
    assert step.action._fields == NAMES and step.agent_info._fields == NAMES
    assert step.action.agent_0.shape == (3,) and step.action.agent_0.dtype == torch.long
    assert step.agent_info.agent_1.dist_info.prob.shape == (3, 5)
    value = agent.value(*inputs(spaces))
    assert value._fields == NAMES and value.agent_0.shape == (3,)
    assert set(agent.learners()) == set(NAMES)


def test_parameter_sharing_keeps_one_set_of_parameters():
    agent = MultiAgent(CategoricalPgAgent(hidden_sizes=(16,)), share_parameters=True, agent_id=False)
    spaces = coop_spaces()
    agent.initialize(spaces)
    shared = agent.sub_agent("agent_0")
    assert shared is agent.sub_agent("agent_1") is agent.agents[SHARED_AGENT_KEY]
    assert list(agent.agents) == [SHARED_AGENT_KEY]
    single = CategoricalPgAgent(hidden_sizes=(16,))
    single.initialize(agent.agent_spaces(spaces)["agent_0"])
    assert n_params(agent) == n_params(shared) == n_params(single)
    assert len(agent.parameters_for("model")) == len(list(shared.parameters()))
    assert all(k.startswith(("_extra_state", f"agents.{SHARED_AGENT_KEY}.")) for k in agent.state_dict())
    assert agent.learners() == {SHARED_AGENT_KEY: list(NAMES)}
    # Same view -> same policy output for both agents: one network acts for both.
    step = agent.step(*inputs(spaces, same_views=True))
    torch.testing.assert_close(step.agent_info.agent_0.dist_info.prob, step.agent_info.agent_1.dist_info.prob)


def test_shared_step_stacks_agents_in_one_forward_pass_with_the_same_results():
    torch.manual_seed(0)
    agent = MultiAgent(CategoricalPgAgent(hidden_sizes=(16,)), share_parameters=True, agent_id=False)
    spaces = coop_spaces()
    agent.initialize(spaces)
    observation, prev_action, prev_reward = inputs(spaces)
    calls = []
    shared = agent.sub_agent("agent_0")
    handle = shared.model.register_forward_hook(lambda m, args, out: calls.append(args[0].shape[0]))
    values = agent.value(observation, prev_action, prev_reward)
    handle.remove()
    assert calls == [2 * 3]
    for name in NAMES:
        alone = shared.value(getattr(observation, name), getattr(prev_action, name), prev_reward)
        torch.testing.assert_close(getattr(values, name), alone)


def test_shared_recurrent_state_has_a_row_per_agent_and_env_and_resets_per_env():
    agent = MultiAgent(CategoricalPgAgent(hidden_sizes=(8,), lstm_size=4), share_parameters=True)
    spaces = coop_spaces()
    agent.initialize(spaces)
    agent.sample_mode(0)
    B = 3
    agent.step(*inputs(spaces, B))
    step = agent.step(*inputs(spaces, B))
    assert step.agent_info.agent_0.prev_rnn_state.h.shape == (B, 1, 4)
    state = agent.sub_agent("agent_0").prev_rnn_state
    assert state.h.shape == (1, 2 * B, 4)
    before = state.h.clone()
    agent.reset_one(1)
    zeroed = [1, B + 1]
    assert torch.all(state.h[:, zeroed] == 0)
    kept = [0, 2, B, B + 2]
    torch.testing.assert_close(state.h[:, kept], before[:, kept])


def test_dict_of_agents_uses_them_by_name_and_rejects_other_names():
    a0, a1 = CategoricalPgAgent(hidden_sizes=(8,)), CategoricalPgAgent(hidden_sizes=(4,))
    agent = MultiAgent({"agent_1": a1, "agent_0": a0})
    agent.initialize(coop_spaces())
    assert agent.sub_agent("agent_0") is a0 and agent.sub_agent("agent_1") is a1
    bad = MultiAgent({"alice": CategoricalPgAgent(), "agent_1": CategoricalPgAgent()})
    with pytest.raises(ValueError, match=r"agent names \['agent_1', 'alice'\] do not match .*'agent_0', 'agent_1'"):
        bad.initialize(coop_spaces())
    with pytest.raises(ValueError, match="unknown agent name 'alice'"):
        agent.sub_agent("alice")


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: MultiAgent({"agent_0": CategoricalPgAgent()}, share_parameters=True), "share_parameters"),
        (lambda: MultiAgent({}), "empty"),
        (lambda: MultiAgent({"agent_0": torch.nn.Linear(1, 1)}), "BaseAgent"),
        (lambda: MultiAgent("CategoricalPgAgent"), "BaseAgent"),
    ],
)
def test_bad_arguments_fail_at_construction(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_single_agent_action_space_is_rejected():
    with pytest.raises(ValueError, match="dict action space"):
        MultiAgent(CategoricalPgAgent()).initialize(make_env("CartPole-v1").spaces)


def test_mixed_recurrent_and_feed_forward_sub_agents_are_rejected():
    with pytest.raises(ValueError, match=r"\['agent_0'\] are recurrent"):
        MultiAgent({"agent_0": CategoricalPgAgent(lstm_size=4), "agent_1": CategoricalPgAgent()})


def test_sharing_needs_the_same_spaces_for_every_agent():
    from lightning_rl.envs import EnvSpaces
    from lightning_rl.spaces import Composite, IntBox

    spaces = coop_spaces()
    action = spaces.action
    wider = Composite([action.spaces[0], IntBox(0, 7)], action.NamedTupleCls, keys=action.keys)
    with pytest.raises(ValueError, match="same observation and action spaces"):
        MultiAgent(CategoricalPgAgent(), share_parameters=True).initialize(EnvSpaces(spaces.observation, wider))


def test_sub_agent_checks_its_own_action_space():
    with pytest.raises(ValueError, match="continuous action space"):
        MultiAgent(GaussianPgAgent()).initialize(coop_spaces())


def test_shared_observation_goes_whole_to_every_agent():
    agent = MultiAgent(CategoricalPgAgent(hidden_sizes=(8,)))
    spaces = coop_spaces(observation_mode="shared")
    agent.initialize(spaces)
    assert not agent.per_agent_observation
    assert agent.sub_agent("agent_1").env_spaces.observation == FloatBox(0.0, 1.0, shape=(8,))
    step = agent.step(np.zeros((2, 8), dtype=np.float32), zero_actions(spaces, 2), np.zeros(2, dtype=np.float32))
    assert step.action.agent_1.shape == (2,)


def test_modes_and_deterministic_acting_reach_the_sub_agents():
    agent = MultiAgent(CategoricalPgAgent(hidden_sizes=(8,)))
    spaces = coop_spaces()
    agent.initialize(spaces)
    agent.eval_mode(0)
    assert {sub.mode for sub in agent.agents.values()} == {"eval"}
    agent.eval_deterministic = True
    step = agent.step(*inputs(spaces))
    for name in NAMES:
        prob = getattr(step.agent_info, name).dist_info.prob
        torch.testing.assert_close(getattr(step.action, name), prob.argmax(-1))
    agent.sample_mode(1)
    assert {sub.mode for sub in agent.agents.values()} == {"sample"}


@pytest.mark.parametrize("share", [False, True])
def test_sampler_keeps_one_buffer_field_per_agent(share):
    agent = MultiAgent(CategoricalPgAgent(hidden_sizes=(8,)), share_parameters=share)
    sampler = SerialSampler(COOP_GRID_ID, batch_T=6, batch_B=2)
    sampler.initialize(agent, seed=0, bootstrap_value=True)
    samples, _ = sampler.obtain_samples(0)
    assert samples.agent.action._fields == NAMES
    assert samples.agent.action.agent_1.shape == (6, 2)
    assert samples.agent.agent_info.agent_0.value.shape == (6, 2)
    assert samples.agent.bootstrap_value._fields == NAMES
    sb = sampler.step_buffer
    value = agent.value(sb.observation, sb.prev_action, sb.prev_reward)
    for name in NAMES:
        np.testing.assert_allclose(getattr(samples.agent.bootstrap_value, name), getattr(value, name).numpy())
    # The env received each agent's own action: agent_0's observed cell moved as its action says.
    moves = np.array([[0, 0], [-1, 0], [1, 0], [0, -1], [0, 1]]) / 4
    obs = samples.env.observation.agent_0
    for t in range(5):
        if not samples.env.done[t].any():
            cell_change = obs[t + 1, :, :2] - obs[t, :, :2]
            expected = moves[samples.agent.action.agent_0[t]]
            blocked_or_wall = ~np.all(np.isclose(cell_change, expected), axis=1)
            assert np.all(np.isclose(cell_change[blocked_or_wall], 0))


def test_a_shared_policy_tells_alike_agents_apart_by_a_one_hot():
    torch.manual_seed(0)
    agent = MultiAgent(CategoricalPgAgent(hidden_sizes=(16,)), share_parameters=True)
    spaces = coop_spaces()
    agent.initialize(spaces)
    shared = agent.sub_agent("agent_0")
    assert shared.env_spaces.observation.shape == (6 + 2,)
    observation, prev_action, prev_reward = inputs(spaces, same_views=True)
    values = agent.value(observation, prev_action, prev_reward)
    for i, name in enumerate(NAMES):
        onehot = np.zeros((3, 2), dtype=np.float32)
        onehot[:, i] = 1
        with_id = np.concatenate([getattr(observation, name), onehot], 1)
        by_hand = shared.value(with_id, prev_action.agent_0, prev_reward)
        torch.testing.assert_close(getattr(values, name), by_hand)
    assert not torch.allclose(values.agent_0, values.agent_1)  # same view, told apart by the one-hot


def test_policy_mapping_groups_agents_by_pattern():
    from lightning_rl.envs import EnvSpaces
    from lightning_rl.spaces import Composite

    base = coop_spaces()
    names = ("adversary_0", "agent_0", "agent_1")
    fields = base.action.spaces[0]
    action = Composite([fields] * 3, NamedArrayTupleSchema("Act", names), keys=names)
    observation = Composite([base.observation.spaces[0]] * 3, NamedArrayTupleSchema("Obs", names), keys=names)
    agent = MultiAgent(CategoricalPgAgent(hidden_sizes=(8,)), policy_mapping={"adversary_*": "adv", "agent_*": "good"})
    agent.initialize(EnvSpaces(observation, action))
    assert agent.learners() == {"adv": ["adversary_0"], "good": ["agent_0", "agent_1"]}
    assert agent.sub_agent("agent_1") is agent.sub_agent("agent_0") is not agent.sub_agent("adversary_0")
    assert agent.onehot_index == {"agent_0": 0, "agent_1": 1}  # only the policy with two agents
    assert agent.sub_agent("adversary_0").env_spaces.observation.shape == (6,)
    with pytest.raises(ValueError, match="agent 'agent_0' matches no pattern"):
        unmapped = MultiAgent(CategoricalPgAgent(), policy_mapping={"adversary_*": "adv"})
        unmapped.initialize(EnvSpaces(observation, action))
    with pytest.raises(ValueError, match="policy_mapping"):
        MultiAgent(CategoricalPgAgent(), share_parameters=True, policy_mapping={"*": "all"})


def test_centralised_critic_sees_every_agents_observation():
    torch.manual_seed(0)
    agent = MultiAgent(CategoricalPgAgent(hidden_sizes=(8,)), critic="centralized", critic_hidden_sizes=(4,))
    spaces = coop_spaces()
    agent.initialize(spaces)
    assert set(agent.critics) == set(NAMES)  # one critic per policy; CoopGrid has no state(): both views
    assert agent.critics["agent_1"].model[0].in_features == 12
    observation, prev_action, prev_reward = inputs(spaces)
    step = agent.step(observation, prev_action, prev_reward)
    both = torch.as_tensor(np.concatenate([observation.agent_0, observation.agent_1], 1))
    for name in NAMES:
        by_hand = agent.critics[name](both).squeeze(-1)
        torch.testing.assert_close(getattr(step.agent_info, name).value, by_hand)
        torch.testing.assert_close(getattr(agent.value(observation, prev_action, prev_reward), name), by_hand)
    # The critics' parameters train with their policies (one optimizer group per policy).
    trained = {id(p) for p in agent.parameters_for("model/agent_0")}
    assert {id(p) for p in agent.critics["agent_0"].parameters()} <= trained
