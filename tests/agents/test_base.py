"""BaseAgent: shared memory with forked workers, device/dtype moves, trainable groups, inputs."""

from __future__ import annotations

import copy
import multiprocessing as mp
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

from lightning_rl.agents import CategoricalPgAgent, DqnAgent

from .conftest import batch


def _first_param(agent: Any) -> torch.Tensor:
    return next(agent.model.parameters())


def _child_reports(agent: Any, conn: Any) -> None:
    conn.recv()
    conn.send(float(_first_param(agent).detach().reshape(-1)[0]))
    conn.close()


def _value_seen_by_forked_child(agent: Any, change_in_parent: Callable[[], None]) -> float:
    """Fork a child holding ``agent``, apply ``change_in_parent`` afterwards, return what the child reads."""
    ctx = mp.get_context("fork")
    parent_conn, child_conn = ctx.Pipe()
    proc = ctx.Process(target=_child_reports, args=(agent, child_conn), daemon=True)
    proc.start()
    try:
        change_in_parent()
        parent_conn.send("read")
        assert parent_conn.poll(60), "child did not answer"
        return parent_conn.recv()
    finally:
        proc.join(10)


def _fill_first_param(module: torch.nn.Module, value: float) -> None:
    with torch.no_grad():
        next(module.parameters()).fill_(value)


def test_forked_child_sees_parameter_change_with_shared_memory(cartpole_spaces):
    agent = CategoricalPgAgent(hidden_sizes=(8,))
    agent.initialize(cartpole_spaces, share_memory=True)
    assert agent.shared_model is agent.model
    assert all(p.is_shared() for p in agent.model.parameters())
    seen = _value_seen_by_forked_child(agent, lambda: _fill_first_param(agent.model, 3.5))
    assert seen == 3.5


def test_forked_child_keeps_old_parameters_without_shared_memory(cartpole_spaces):
    agent = CategoricalPgAgent(hidden_sizes=(8,))
    agent.initialize(cartpole_spaces, share_memory=False)
    before = float(_first_param(agent).detach().reshape(-1)[0])
    seen = _value_seen_by_forked_child(agent, lambda: _fill_first_param(agent.model, 3.5))
    assert seen == before != 3.5


def test_to_device_cpu_keeps_sharing(cartpole_spaces):
    agent = DqnAgent(hidden_sizes=(8,))
    agent.initialize(cartpole_spaces, share_memory=True)
    agent.to_device("cpu")
    assert agent.model is agent.shared_model
    assert all(p.is_shared() for p in agent.model.parameters())
    seen = _value_seen_by_forked_child(agent, lambda: _fill_first_param(agent.model, -1.25))
    assert seen == -1.25


def test_sync_shared_memory_copies_a_separate_training_model(cartpole_spaces):
    agent = DqnAgent(hidden_sizes=(8,))
    agent.initialize(cartpole_spaces, share_memory=True)

    def train_on_a_copy() -> None:
        # As after a move to a GPU: the training model is a private copy of the shared one.
        agent.model = copy.deepcopy(agent.model)
        _fill_first_param(agent.model, 0.75)
        assert float(next(agent.shared_model.parameters()).detach().reshape(-1)[0]) != 0.75
        agent.sync_shared_memory()

    seen = _value_seen_by_forked_child(agent, train_on_a_copy)
    assert seen == 0.75
    for p_shared, p_train in zip(agent.shared_model.parameters(), agent.model.parameters(), strict=False):
        torch.testing.assert_close(p_shared, p_train)
        assert p_shared.is_shared()


def test_a_dtype_or_device_move_gives_training_its_own_copy(cartpole_spaces):
    agent = DqnAgent(hidden_sizes=(8,))
    agent.initialize(cartpole_spaces, share_memory=True)
    shared = agent.shared_model
    # .double() goes through nn.Module._apply like Lightning's .to("cuda").
    agent.double()
    assert agent.model is not shared and agent.shared_model is shared
    assert _first_param(agent).dtype == torch.float64
    assert next(shared.parameters()).dtype == torch.float32 and next(shared.parameters()).is_shared()
    assert next(agent.target_model.parameters()).dtype == torch.float64
    _fill_first_param(agent.model, 2.0)
    agent.sync_shared_memory()
    assert float(next(shared.parameters()).detach().reshape(-1)[0]) == 2.0


def test_parameters_for_excludes_target_networks(cartpole_spaces):
    agent = DqnAgent(hidden_sizes=(8,))
    agent.initialize(cartpole_spaces)
    model_ids = {id(p) for p in agent.model.parameters()}
    assert {id(p) for p in agent.parameters_for("model")} == model_ids
    assert {id(p) for p in agent.parameters_for()} == model_ids
    assert all(not p.requires_grad for p in agent.target_model.parameters())
    # Targets are still registered: they are in the state_dict and follow moves.
    assert any(k.startswith("target_model.") for k in agent.state_dict())
    with pytest.raises(ValueError, match="unknown group 'q'"):
        agent.parameters_for("q")


def test_inputs_become_float32_tensors_and_frames_stay_uint8(cartpole_spaces, image_spaces):
    agent = DqnAgent(hidden_sizes=(8,))
    agent.initialize(cartpole_spaces)
    inputs = agent.to_agent_inputs(np.zeros((2, 4)), np.zeros(2, dtype=np.int64), np.zeros(2))
    assert inputs.observation.dtype == torch.float32 and inputs.prev_reward.dtype == torch.float32
    assert inputs.prev_action.dtype == torch.int64
    frames = agent.to_agent_inputs(*batch(image_spaces, 2))
    assert frames.observation.dtype == torch.uint8


def test_step_outputs_live_on_cpu_and_accept_tensors(cartpole_spaces):
    agent = DqnAgent(hidden_sizes=(8,))
    agent.initialize(cartpole_spaces)
    obs, prev_action, prev_reward = (torch.as_tensor(x) for x in batch(cartpole_spaces, 3))
    step = agent.step(obs, prev_action, prev_reward)
    assert step.action.device.type == "cpu" and step.agent_info.q.device.type == "cpu"
    assert step.action.shape == (3,)


def test_inputs_are_zero_copy_views_and_python_scalars_convert(cartpole_spaces):
    agent = DqnAgent(hidden_sizes=(8,))
    agent.initialize(cartpole_spaces)
    obs = np.arange(8, dtype=np.float32).reshape(2, 4)
    inputs = agent.to_agent_inputs(obs, np.zeros(2, dtype=np.int64), 0.5)
    assert inputs.observation.data_ptr() == obs.ctypes.data  # float32 arrays are not copied
    assert inputs.prev_reward.dtype == torch.float32 and float(inputs.prev_reward) == 0.5
    assert agent.to_agent_inputs(obs, None, None).prev_action is None


def test_device_follows_moves_and_model_replacement(cartpole_spaces):
    agent = DqnAgent(hidden_sizes=(8,))
    assert agent.device == torch.device("cpu")  # before initialize
    agent.initialize(cartpole_spaces)
    assert agent.device == torch.device("cpu")
    agent.to(torch.float64)  # a move through _apply drops the cached lookup
    assert agent.device == torch.device("cpu") and next(agent.model.parameters()).dtype == torch.float64
    agent.model = torch.nn.Linear(4, 2, device="meta")  # a replaced model is looked up again
    assert agent.device == torch.device("meta")


def test_initialize_ends_with_finish_initialize_once_the_model_exists(cartpole_spaces):
    from torch import nn

    from lightning_rl.agents.base import BaseAgent

    class Probe(BaseAgent):
        def make_model(self, env_spaces: Any) -> nn.Module:
            return nn.Linear(4, 2)

        def finish_initialize(self, env_spaces: Any) -> None:
            super().finish_initialize(env_spaces)
            self.seen = (env_spaces, self.model is not None, self.global_B, self.env_ranks)

    agent = Probe()
    agent.initialize(cartpole_spaces, global_B=6, env_ranks=[4, 5])
    assert agent.seen == (cartpole_spaces, True, 6, [4, 5])
    # Every call reaches it (a sampler re-initializes its agent for shared memory), keeping the model.
    model = agent.model
    agent.seen = None
    agent.initialize(cartpole_spaces, share_memory=True, global_B=6, env_ranks=[4, 5])
    assert agent.seen == (cartpole_spaces, True, 6, [4, 5]) and agent.model is model
