"""Returns, GAE and n-step targets against hand-computed numbers, numpy/torch parity, dest buffers."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lightning_rl.returns import (
    discount_return,
    discount_return_n_step,
    discount_return_tl,
    generalized_advantage_estimation,
    generalized_advantage_estimation_tl,
    valid_from_done,
    valid_mean,
)

# Shared [T=4, B=2] example, discount = gae_lambda = 0.5 (so discount * gae_lambda = 0.25).
# Env 0 terminates at t=1 (done, no timeout); env 1 is truncated by a time limit at t=2.
REWARD = np.array([[1.0, 1.0], [2.0, 1.0], [3.0, 1.0], [4.0, 1.0]])
VALUE = np.array([[2.0, 4.0], [4.0, 2.0], [2.0, 6.0], [4.0, 2.0]])
DONE = np.array([[0, 0], [1, 0], [0, 1], [0, 0]], dtype=bool)
TIMEOUT = np.array([[0, 0], [0, 0], [0, 1], [0, 0]], dtype=bool)
BOOTSTRAP = np.array([8.0, 4.0])
# V(s') of the observation the truncated step reached (only read where TIMEOUT is True).
TIMEOUT_VALUE = np.array([[0.0, 0.0], [0.0, 0.0], [0.0, 12.0], [0.0, 0.0]])
DISCOUNT = GAE_LAMBDA = 0.5


def test_discount_return_hand_computed():
    # Env 0: G3 = 4 + .5*8 = 8; G2 = 3 + .5*8 = 7; G1 = 2 (done); G0 = 1 + .5*2 = 2.
    # Env 1: G3 = 1 + .5*4 = 3; G2 = 1 (done); G1 = 1 + .5*1 = 1.5; G0 = 1 + .5*1.5 = 1.75.
    expected = np.array([[2.0, 1.75], [2.0, 1.5], [7.0, 1.0], [8.0, 3.0]])
    np.testing.assert_allclose(discount_return(REWARD, DONE, BOOTSTRAP, DISCOUNT), expected)


def test_gae_hand_computed():
    # delta_t = r_t + .5 (1 - d_t) V_{t+1} - V_t,  A_t = delta_t + .25 (1 - d_t) A_{t+1}.
    # Env 0: A3 = 4 + 4 - 4 = 4; A2 = (3 + 2 - 2) + .25*4 = 4; A1 = 2 - 4 = -2 (done);
    #        A0 = (1 + 2 - 2) + .25*(-2) = 0.5.                  R = A + V = [2.5, 2, 6, 8].
    # Env 1: A3 = 1 + 2 - 2 = 1; A2 = 1 - 6 = -5 (done); A1 = (1 + 3 - 2) + .25*(-5) = 0.75;
    #        A0 = (1 + 1 - 4) + .25*0.75 = -1.8125.              R = [2.1875, 2.75, 1, 3].
    advantage, return_ = generalized_advantage_estimation(REWARD, VALUE, DONE, BOOTSTRAP, DISCOUNT, GAE_LAMBDA)
    np.testing.assert_allclose(advantage, [[0.5, -1.8125], [-2.0, 0.75], [4.0, -5.0], [4.0, 1.0]])
    np.testing.assert_allclose(return_, [[2.5, 2.1875], [2.0, 2.75], [6.0, 1.0], [8.0, 3.0]])


def test_gae_tl_approximate_hand_computed():
    # Env 0 has no timeout: unchanged. Env 1, timeout at t=2: A2 := 0 so R2 = V2 = 6;
    # A1 = (1 + .5*6 - 2) + .25*0 = 2; A0 = (1 + .5*2 - 4) + .25*2 = -1.5; A3 = 1 as before.
    advantage, return_ = generalized_advantage_estimation_tl(
        REWARD, VALUE, DONE, BOOTSTRAP, DISCOUNT, GAE_LAMBDA, TIMEOUT
    )
    np.testing.assert_allclose(advantage, [[0.5, -1.5], [-2.0, 2.0], [4.0, 0.0], [4.0, 1.0]])
    np.testing.assert_allclose(return_, [[2.5, 2.5], [2.0, 4.0], [6.0, 6.0], [8.0, 3.0]])


def test_gae_tl_exact_hand_computed():
    # Env 1 with V(s') = 12 at the timeout: A2 = 1 + .5*12 - 6 = 1 (no continuation past the
    # episode end); A1 = (1 + 3 - 2) + .25*1 = 2.25; A0 = (1 + 1 - 4) + .25*2.25 = -1.4375.
    advantage, return_ = generalized_advantage_estimation_tl(
        REWARD, VALUE, DONE, BOOTSTRAP, DISCOUNT, GAE_LAMBDA, TIMEOUT, truncated_value=TIMEOUT_VALUE
    )
    np.testing.assert_allclose(advantage, [[0.5, -1.4375], [-2.0, 2.25], [4.0, 1.0], [4.0, 1.0]])
    np.testing.assert_allclose(return_, [[2.5, 2.5625], [2.0, 4.25], [6.0, 7.0], [8.0, 3.0]])


def test_discount_return_tl_hand_computed():
    # Approximate: env 1 G2 := V2 = 6; G1 = 1 + .5*6 = 4; G0 = 1 + .5*4 = 3.
    approx = discount_return_tl(REWARD, DONE, BOOTSTRAP, DISCOUNT, TIMEOUT, VALUE)
    np.testing.assert_allclose(approx, [[2.0, 3.0], [2.0, 4.0], [7.0, 6.0], [8.0, 3.0]])
    # Exact: G2 = 1 + .5*12 = 7; G1 = 1 + .5*7 = 4.5; G0 = 1 + .5*4.5 = 3.25.
    exact = discount_return_tl(REWARD, DONE, BOOTSTRAP, DISCOUNT, TIMEOUT, truncated_value=TIMEOUT_VALUE)
    np.testing.assert_allclose(exact, [[2.0, 3.25], [2.0, 4.5], [7.0, 7.0], [8.0, 3.0]])


def test_timeout_variants_recover_true_value_of_constant_reward():
    """Reward 1 forever, cut by a time limit: with V = 1/(1-discount) the targets are V everywhere."""
    discount, T = 0.9, 6
    reward = np.ones((T, 1))
    value = np.full((T, 1), 10.0)
    truncated = np.zeros((T, 1), dtype=bool)
    truncated[3] = True
    done = truncated.copy()
    bootstrap = np.array([10.0])
    for return_ in (
        discount_return_tl(reward, done, bootstrap, discount, truncated, value),
        discount_return_tl(reward, done, bootstrap, discount, truncated, truncated_value=value),
        generalized_advantage_estimation_tl(reward, value, done, bootstrap, discount, 0.95, truncated)[1],
        generalized_advantage_estimation_tl(
            reward, value, done, bootstrap, discount, 0.95, truncated, truncated_value=value
        )[1],
    ):
        np.testing.assert_allclose(return_, value)
    # Treating the timeout as terminal underestimates: G3 = 1, G2 = 1.9, ...
    assert discount_return(reward, done, bootstrap, discount)[3, 0] == pytest.approx(1.0)


def test_timeout_without_done_flag_still_cuts_the_episode():
    reward = np.array([1.0, 1.0])
    truncated = np.array([True, False])
    exact = discount_return_tl(
        reward, np.zeros(2, dtype=bool), 0.0, 0.5, truncated, truncated_value=np.array([4.0, 0.0])
    )
    # G1 = 1; G0 = 1 + .5*4 (V(s') only; G1 belongs to the next episode) = 3.
    np.testing.assert_allclose(exact, [3.0, 1.0])


N_STEP_REWARD = np.array([[1.0, 1.0], [2.0, 1.0], [3.0, 1.0], [4.0, 1.0], [5.0, 1.0]])
N_STEP_DONE = np.array([[0, 0], [1, 0], [0, 0], [0, 0], [0, 1]], dtype=bool)


def test_n_step_hand_computed():
    # n = 3, discount 0.5. Env 0 (done at t=1): R0 = 1 + .5*2 = 2 (stops after the done), d=1;
    # R1 = 2, d=1; R2 = 3 + .5*4 + .25*5 = 6.25, d=0.
    # Env 1 (done at t=4): R0 = R1 = R2 = 1 + .5 + .25 = 1.75; done_n = 0, 0, 1.
    return_, done_n = discount_return_n_step(N_STEP_REWARD, N_STEP_DONE, 3, 0.5)
    np.testing.assert_allclose(return_, [[2.0, 1.75], [2.0, 1.75], [6.25, 1.75]])
    assert done_n.dtype == bool
    np.testing.assert_array_equal(done_n, [[True, False], [True, False], [False, True]])


def test_n_step_truncated_hand_computed():
    # The last two steps sum what is left: env 0 R3 = 4 + .5*5 = 6.5, R4 = 5; env 1 R3 = 1.5, R4 = 1.
    return_, done_n = discount_return_n_step(N_STEP_REWARD, N_STEP_DONE.astype(np.float32), 3, 0.5, do_truncated=True)
    np.testing.assert_allclose(return_, [[2.0, 1.75], [2.0, 1.75], [6.25, 1.75], [6.5, 1.5], [5.0, 1.0]])
    assert done_n.dtype == np.float32
    np.testing.assert_array_equal(done_n, [[1, 0], [1, 0], [0, 1], [0, 1], [0, 1]])


def test_n_step_one_is_reward():
    return_, done_n = discount_return_n_step(N_STEP_REWARD, N_STEP_DONE, 1, 0.5)
    np.testing.assert_allclose(return_, N_STEP_REWARD)
    np.testing.assert_array_equal(done_n, N_STEP_DONE)


def test_valid_from_done():
    done = np.array([[0, 0], [1, 0], [0, 1], [1, 0]], dtype=bool)
    expected = np.array([[1, 1], [1, 1], [0, 1], [0, 0]], dtype=np.float32)
    np.testing.assert_array_equal(valid_from_done(done), expected)
    valid = valid_from_done(torch.from_numpy(done))
    assert isinstance(valid, torch.Tensor) and valid.dtype == torch.float32
    np.testing.assert_array_equal(valid.numpy(), expected)


def _random_batch(T=7, B=3, seed=0):
    rng = np.random.default_rng(seed)
    reward = rng.normal(size=(T, B)).astype(np.float32)
    value = rng.normal(size=(T, B)).astype(np.float32)
    done = rng.random((T, B)) < 0.3
    truncated = done & (rng.random((T, B)) < 0.5)
    bootstrap = rng.normal(size=B).astype(np.float32)
    truncated_value = rng.normal(size=(T, B)).astype(np.float32)
    return reward, value, done, truncated, bootstrap, truncated_value


def _all_outputs(reward, value, done, truncated, bootstrap, truncated_value):
    return [
        discount_return(reward, done, bootstrap, 0.9),
        *generalized_advantage_estimation(reward, value, done, bootstrap, 0.9, 0.8),
        discount_return_tl(reward, done, bootstrap, 0.9, truncated, value),
        discount_return_tl(reward, done, bootstrap, 0.9, truncated, truncated_value=truncated_value),
        *generalized_advantage_estimation_tl(reward, value, done, bootstrap, 0.9, 0.8, truncated),
        *generalized_advantage_estimation_tl(
            reward, value, done, bootstrap, 0.9, 0.8, truncated, truncated_value=truncated_value
        ),
        *discount_return_n_step(reward, done, 3, 0.9),
        *discount_return_n_step(reward, done, 3, 0.9, do_truncated=True),
        valid_from_done(done),
    ]


def test_torch_numpy_parity():
    arrays = _random_batch()
    numpy_out = _all_outputs(*arrays)
    torch_out = _all_outputs(*(torch.from_numpy(a) for a in arrays))
    for n, t in zip(numpy_out, torch_out, strict=False):
        assert isinstance(n, np.ndarray) and isinstance(t, torch.Tensor)
        assert n.dtype == t.numpy().dtype
        np.testing.assert_allclose(t.numpy(), n, rtol=1e-6, atol=1e-6)


def test_vectorized_over_trailing_dims_matches_columns():
    reward, value, done, truncated, bootstrap, truncated_value = _random_batch(T=6, B=4, seed=1)
    full = generalized_advantage_estimation_tl(
        reward.reshape(6, 2, 2), value.reshape(6, 2, 2), done.reshape(6, 2, 2), bootstrap.reshape(2, 2),
        0.9, 0.8, truncated.reshape(6, 2, 2),
    )[0].reshape(6, 4)
    for b in range(4):
        column = generalized_advantage_estimation_tl(
            reward[:, b], value[:, b], done[:, b], bootstrap[b], 0.9, 0.8, truncated[:, b]
        )[0]
        np.testing.assert_allclose(full[:, b], column, rtol=1e-6)


def test_mixed_inputs_follow_reward_kind():
    reward, value, done, _, bootstrap, _ = _random_batch()
    out = discount_return(torch.from_numpy(reward), done, bootstrap, 0.9)
    assert isinstance(out, torch.Tensor)
    np.testing.assert_allclose(out.numpy(), discount_return(reward, done, bootstrap, 0.9), rtol=1e-6)
    _, done_n = discount_return_n_step(torch.from_numpy(reward), done, 2, 0.9)
    assert done_n.dtype == torch.bool


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_dest_buffers_written_in_place(kind):
    reward, value, done, truncated, bootstrap, truncated_value = _random_batch()
    if kind == "torch":
        arrays = (reward, value, done, truncated, bootstrap)
        reward, value, done, truncated, bootstrap = (torch.from_numpy(a) for a in arrays)

    def zeros(shape, is_bool=False):
        if kind == "torch":
            return torch.zeros(shape, dtype=torch.bool if is_bool else torch.float32)
        return np.zeros(shape, dtype=bool if is_bool else np.float32)

    big = zeros((3, 7, 3))  # dests may be views into a larger buffer
    return_dest, advantage_dest, gae_return_dest = big[0], big[1], big[2]
    ret = discount_return(reward, done, bootstrap, 0.9, return_dest=return_dest)
    assert ret is return_dest
    np.testing.assert_allclose(np.asarray(big[0]), np.asarray(discount_return(reward, done, bootstrap, 0.9)))
    adv, ret = generalized_advantage_estimation_tl(
        reward, value, done, bootstrap, 0.9, 0.8, truncated, advantage_dest=advantage_dest, return_dest=gae_return_dest
    )
    assert adv is advantage_dest and ret is gae_return_dest
    expected = generalized_advantage_estimation_tl(reward, value, done, bootstrap, 0.9, 0.8, truncated)
    np.testing.assert_allclose(np.asarray(big[1]), np.asarray(expected[0]), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(big[2]), np.asarray(expected[1]), rtol=1e-6)
    ret_dest, done_dest = zeros((5, 3)), zeros((5, 3), is_bool=True)
    ret, done_n = discount_return_n_step(reward, done, 3, 0.9, return_dest=ret_dest, done_n_dest=done_dest)
    assert ret is ret_dest and done_n is done_dest
    expected_ret, expected_done = discount_return_n_step(reward, done, 3, 0.9)
    np.testing.assert_allclose(np.asarray(ret_dest), np.asarray(expected_ret), rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(done_dest), np.asarray(expected_done))


def test_gradients_flow_through_returns():
    reward = torch.tensor([[1.0], [2.0], [3.0]], requires_grad=True)
    value = torch.tensor([[0.5], [0.5], [0.5]], requires_grad=True)
    done = torch.tensor([[False], [False], [False]])
    advantage, return_ = generalized_advantage_estimation(reward, value, done, torch.zeros(1), 0.5, 1.0)
    return_.sum().backward()
    # Return_0 = r0 + .5 r1 + .25 r2, so d(sum of returns)/d r0 = 1, r1 = 1.5, r2 = 1.75.
    np.testing.assert_allclose(reward.grad[:, 0].numpy(), [1.0, 1.5, 1.75])
    # discount_return has the same sums (no values, zero bootstrap): the gradients add up.
    discount_return(reward, done, torch.zeros(1), 0.5).sum().backward()
    np.testing.assert_allclose(reward.grad[:, 0].numpy(), [2.0, 3.0, 3.5])
    # The lambda = 1 return does not depend on the values: R_t = A_t + V_t cancels them.
    np.testing.assert_allclose(value.grad[:, 0].numpy(), [0.0, 0.0, 0.0], atol=1e-7)


def test_bad_input_raises():
    reward, value, done, truncated, bootstrap, _ = _random_batch()
    with pytest.raises(ValueError, match=r"discount must lie in \[0, 1\], got 1.5"):
        discount_return(reward, done, bootstrap, 1.5)
    with pytest.raises(ValueError, match=r"gae_lambda must lie in \[0, 1\], got -0.1"):
        generalized_advantage_estimation(reward, value, done, bootstrap, 0.9, -0.1)
    with pytest.raises(ValueError, match="done of shape"):
        discount_return(reward, done[:-1], bootstrap, 0.9)
    with pytest.raises(ValueError, match="value of shape"):
        generalized_advantage_estimation(reward, value[:, :2], done, bootstrap, 0.9, 0.9)
    with pytest.raises(ValueError, match="bootstrap_value of shape"):
        discount_return(reward, done, np.zeros(5), 0.9)
    with pytest.raises(ValueError, match="return_dest of shape"):
        discount_return(reward, done, bootstrap, 0.9, return_dest=np.zeros((3, 3)))
    with pytest.raises(ValueError, match="n_step must be a positive integer, got 0"):
        discount_return_n_step(reward, done, 0, 0.9)
    with pytest.raises(ValueError, match="n_step=9 exceeds T=7"):
        discount_return_n_step(reward, done, 9, 0.9)
    with pytest.raises(ValueError, match="pass value"):
        discount_return_tl(reward, done, bootstrap, 0.9, truncated)
    with pytest.raises(ValueError, match="truncated of shape"):
        generalized_advantage_estimation_tl(reward, value, done, bootstrap, 0.9, 0.9, truncated[0])


def test_valid_mean_with_mask() -> None:
    x = np.array([[1.0, 4.0], [3.0, 10.0], [5.0, 6.0]])
    valid = np.array([[1, 1], [1, 0], [0, 0]])
    # All dims: (1 + 4 + 3) / 3.
    assert valid_mean(x, valid) == pytest.approx(8 / 3)
    # Over T: column 0 -> (1 + 3) / 2, column 1 -> 4 / 1.
    np.testing.assert_allclose(valid_mean(x, valid, dim=0), [2.0, 4.0])
    # Over B: row 2 has no valid entry and gives 0 (not NaN).
    np.testing.assert_allclose(valid_mean(x, valid, dim=1), [2.5, 3.0, 0.0])
    tx, tv = torch.from_numpy(x), torch.from_numpy(valid).bool()
    assert valid_mean(tx, tv).item() == pytest.approx(8 / 3)
    assert valid_mean(tx, tv, dim=1).tolist() == [2.5, 3.0, 0.0]
    assert valid_mean(tx).item() == pytest.approx(29 / 6)
    assert valid_mean(tx, dim=0).tolist() == [3.0, 20 / 3]
    np.testing.assert_allclose(valid_mean(x, None, dim=1), [2.5, 6.5, 5.5])
