from __future__ import annotations

import pytest
import torch

from lightning_rl.models import LstmCore, R2d1MlpModel, RnnState


def test_lstm_core_zero_state_is_default_and_shapes():
    torch.manual_seed(0)
    core = LstmCore(5, action_size=3, lstm_size=4, num_layers=2)
    T, B = 3, 2
    feats = torch.randn(T * B, 5)
    action = torch.randint(0, 3, (T, B))
    reward = torch.randn(T, B)
    out, state = core(feats, action, reward, None, T, B)
    assert out.shape == (T * B, 4)
    assert state.h.shape == state.c.shape == (2, B, 4)
    zeros = RnnState(torch.zeros(2, B, 4), torch.zeros(2, B, 4))
    out0, _ = core(feats, action, reward, zeros, T, B)
    torch.testing.assert_close(out, out0)


def test_lstm_core_inputs_one_hot_action_and_reward():
    core = LstmCore(2, action_size=3, lstm_size=4)
    assert core.lstm.input_size == 2 + 3 + 1
    feats = torch.randn(1, 2)
    x = torch.cat([feats, torch.tensor([[0.0, 0.0, 1.0, 0.5]])], dim=-1).view(1, 1, -1)
    expected, _ = core.lstm(x)
    out, _ = core(feats, torch.tensor([2]), torch.tensor([0.5]), None, 1, 1)
    torch.testing.assert_close(out, expected.view(1, 4))


def test_lstm_core_continuous_action():
    core = LstmCore(2, action_size=2, lstm_size=3, discrete_action=False)
    feats, action, reward = torch.randn(4, 2), torch.randn(4, 2), torch.randn(4)
    expected, _ = core.lstm(torch.cat([feats, action, reward[:, None]], -1).view(2, 2, -1))
    out, _ = core(feats, action.view(2, 2, 2), reward.view(2, 2), None, 2, 2)
    torch.testing.assert_close(out, expected.reshape(4, 3))


def test_lstm_core_accepts_noncontiguous_and_unbatched_state():
    core = LstmCore(2, 2, 3)
    stored = torch.randn(4, 1, 3)  # [B, num_layers, H] as a replay might store it
    state = RnnState(stored.transpose(0, 1), stored.transpose(0, 1))
    out, _ = core(torch.randn(4, 2), torch.zeros(4, dtype=torch.long), torch.zeros(4), state, 1, 4)
    assert out.shape == (4, 3)
    h = torch.randn(1, 3)
    out1, s1 = core(torch.ones(1, 2), torch.zeros(1, dtype=torch.long), torch.zeros(1), (h, h), 1, 1)
    out2, s2 = core(torch.ones(1, 2), torch.zeros(1, dtype=torch.long), torch.zeros(1), (h[:, None], h[:, None]), 1, 1)
    torch.testing.assert_close(out1, out2)
    assert s1.h.shape == (1, 1, 3)


def test_lstm_core_bad_state_and_sizes():
    core = LstmCore(2, 2, 3)
    bad = RnnState(torch.zeros(1, 5, 3), torch.zeros(1, 5, 3))
    with pytest.raises(ValueError, match="init_rnn_state"):
        core(torch.randn(4, 2), torch.zeros(4, dtype=torch.long), torch.zeros(4), bad, 1, 4)
    with pytest.raises(ValueError, match="lstm_size"):
        LstmCore(2, 2, 0)
    with pytest.raises(ValueError, match="num_layers"):
        LstmCore(2, 2, 3, num_layers=0)


def test_recurrent_model_zero_state_matches_none():
    model = R2d1MlpModel((3,), 2, [4], lstm_size=5, head_size=4)
    assert model.rnn_state_shape == (1, 5)
    state = model.zero_rnn_state(2)
    assert state.h.shape == (1, 2, 5) and not state.h.any()
    obs, action, reward = torch.randn(2, 3), torch.tensor([0, 1]), torch.zeros(2)
    q_none, _ = model(obs, action, reward, None)
    q_zero, _ = model(obs, action, reward, state)
    torch.testing.assert_close(q_none, q_zero)


def lstm_input_of(core: LstmCore, feats: torch.Tensor, encoded_action: list[list[float]], reward: list[float]):
    """What ``core.lstm`` returns for one step of ``[features, encoded_action, reward]`` rows."""
    x = torch.cat([feats, torch.tensor(encoded_action), torch.tensor(reward)[:, None]], dim=-1)
    return core.lstm(x.view(1, len(reward), -1))[0].view(len(reward), -1)


def test_lstm_core_multi_discrete_action_enters_as_one_one_hot_per_dim():
    torch.manual_seed(0)
    core = LstmCore(2, action_size=(3, 4), lstm_size=4)
    assert core.lstm.input_size == 2 + (3 + 4) + 1
    feats = torch.randn(3, 2)
    prev_action = torch.tensor([[2, 1], [0, 3], [1, 0]])  # zero-based per dim
    encoded = [
        [0, 0, 1, 0, 1, 0, 0],  # dim 0 = 2 of 3, dim 1 = 1 of 4
        [1, 0, 0, 0, 0, 0, 1],  # dim 0 = 0, dim 1 = 3
        [0, 1, 0, 1, 0, 0, 0],  # dim 0 = 1, dim 1 = 0
    ]
    expected = lstm_input_of(core, feats, encoded, [0.5, -1.0, 0.0])
    out, _ = core(feats, prev_action, torch.tensor([0.5, -1.0, 0.0]), None, 1, 3)
    torch.testing.assert_close(out, expected)


def test_lstm_core_multi_binary_action_enters_as_bits():
    torch.manual_seed(0)
    core = LstmCore(2, action_size=(2, 2, 2), lstm_size=4)
    assert core.lstm.input_size == 2 + 3 + 1  # one float per bit, not a two-class one-hot
    feats = torch.randn(2, 2)
    prev_action = torch.tensor([[1, 0, 1], [0, 1, 1]])
    expected = lstm_input_of(core, feats, [[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]], [1.0, 0.0])
    out, _ = core(feats, prev_action, torch.tensor([1.0, 0.0]), None, 1, 2)
    torch.testing.assert_close(out, expected)


def test_lstm_core_vector_action_over_time_keeps_each_step_its_own_action():
    # [T, B, D] actions are flattened time-major, as the features are.
    torch.manual_seed(0)
    core = LstmCore(1, action_size=(2, 3), lstm_size=3)
    T, B = 2, 2
    feats = torch.zeros(T * B, 1)
    prev_action = torch.tensor([[[0, 2], [1, 0]], [[1, 1], [0, 0]]])
    x = torch.tensor(
        [
            [[0.0, 1, 0, 0, 0, 1, 0.0], [0.0, 0, 1, 1, 0, 0, 0.0]],
            [[0.0, 0, 1, 0, 1, 0, 0.0], [0.0, 1, 0, 1, 0, 0, 0.0]],
        ]
    )  # [feature 0, one-hot over 2, one-hot over 3, reward 0]
    expected, (h, _) = core.lstm(x)
    out, state = core(feats, prev_action, torch.zeros(T, B), None, T, B)
    torch.testing.assert_close(out, expected.reshape(T * B, 3))
    torch.testing.assert_close(state.h, h)


def test_lstm_core_vector_action_keeps_the_scalar_parameters():
    # Only the LSTM's input width follows the action encoding: same keys, no saved extras.
    keys = ["lstm.weight_ih_l0", "lstm.weight_hh_l0", "lstm.bias_ih_l0", "lstm.bias_hh_l0"]
    assert list(LstmCore(5, 7, 4).state_dict()) == keys
    assert list(LstmCore(5, (3, 4), 4).state_dict()) == keys
    assert LstmCore(5, 7, 4).lstm.weight_ih_l0.shape == LstmCore(5, (3, 4), 4).lstm.weight_ih_l0.shape == (16, 13)


def test_lstm_core_bad_vector_action_sizes():
    with pytest.raises(ValueError, match=r"action_size must be a non-empty sequence of positive ints, got \(3, 0\)"):
        LstmCore(2, (3, 0), 4)
    with pytest.raises(ValueError, match=r"action_size must be a non-empty sequence"):
        LstmCore(2, (), 4)
    with pytest.raises(ValueError, match=r"action_size=\(3, 4\) is a sequence .* needs discrete_action=True"):
        LstmCore(2, (3, 4), 4, discrete_action=False)
    with pytest.raises(ValueError, match="action_size must be a positive int, got 0"):
        LstmCore(2, 0, 4)
