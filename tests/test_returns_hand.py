"""Returns and GAE with ``discount != gae_lambda``, against numbers worked out by hand.

``tests/test_returns.py`` uses ``discount = gae_lambda = 0.5``, where a swap of the two factors
cannot show. Here ``discount = 0.5`` and ``gae_lambda = 0.8`` (``discount * gae_lambda = 0.4``),
so every factor of the recursions is distinguishable; ``.ci/mutation_check.py`` relies on these
tests to kill its mutants of :mod:`lightning_rl.returns`.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lightning_rl.returns import (
    discount_return,
    discount_return_tl,
    generalized_advantage_estimation,
    generalized_advantage_estimation_tl,
)

DISCOUNT, LAMBDA = 0.5, 0.8  # discount * lambda = 0.4
REWARD = np.array([1.0, 2.0, 3.0, 4.0])
VALUE = np.array([2.0, 1.0, 3.0, 2.0])
DONE = np.array([False, True, False, False])  # the episode terminates after step 1
BOOTSTRAP = 6.0


def test_gae_discount_differs_from_lambda():
    # delta_t = r_t + .5 (1 - d_t) V_{t+1} - V_t,  A_t = delta_t + .4 (1 - d_t) A_{t+1},  V_4 = 6.
    # t=3: delta = 4 + .5*6 - 2 = 5;             A3 = 5.
    # t=2: delta = 3 + .5*2 - 3 = 1;             A2 = 1 + .4*5 = 3.
    # t=1: done, delta = 2 - 1 = 1;              A1 = 1.
    # t=0: delta = 1 + .5*1 - 2 = -0.5;          A0 = -0.5 + .4*1 = -0.1.
    # R = A + V = [1.9, 2, 6, 7].
    advantage, return_ = generalized_advantage_estimation(REWARD, VALUE, DONE, BOOTSTRAP, DISCOUNT, LAMBDA)
    np.testing.assert_allclose(advantage, [-0.1, 1.0, 3.0, 5.0], atol=1e-12)
    np.testing.assert_allclose(return_, [1.9, 2.0, 6.0, 7.0], atol=1e-12)


def test_gae_lambda_zero_is_one_step_td_error_and_one_is_discounted_return_minus_value():
    # lambda = 0: A_t = delta_t = [-0.5, 1, 1, 5] (values from the test above).
    advantage, _ = generalized_advantage_estimation(REWARD, VALUE, DONE, BOOTSTRAP, DISCOUNT, 0.0)
    np.testing.assert_allclose(advantage, [-0.5, 1.0, 1.0, 5.0], atol=1e-12)
    # lambda = 1: R_t = G_t, the discounted return: G3 = 4 + .5*6 = 7, G2 = 3 + .5*7 = 6.5,
    # G1 = 2 (done), G0 = 1 + .5*2 = 2.
    advantage, return_ = generalized_advantage_estimation(REWARD, VALUE, DONE, BOOTSTRAP, DISCOUNT, 1.0)
    np.testing.assert_allclose(return_, [2.0, 2.0, 6.5, 7.0], atol=1e-12)
    np.testing.assert_allclose(advantage, [0.0, 1.0, 3.5, 5.0], atol=1e-12)


def test_discount_return_with_bootstrap():
    # G3 = 4 + .5*6 = 7, G2 = 3 + .5*7 = 6.5, G1 = 2 (done), G0 = 1 + .5*2 = 2.
    np.testing.assert_allclose(discount_return(REWARD, DONE, BOOTSTRAP, DISCOUNT), [2.0, 2.0, 6.5, 7.0])
    # Without a done the whole batch is one episode: G1 = 2 + .5*6.5 = 5.25, G0 = 1 + .5*5.25 = 3.625.
    no_done = np.zeros(4, dtype=bool)
    np.testing.assert_allclose(discount_return(REWARD, no_done, BOOTSTRAP, DISCOUNT), [3.625, 5.25, 6.5, 7.0])


def test_gae_tl_approximate_form_zeroes_the_timeout_step_and_bootstraps_before_it():
    # Step 1 is truncated (done and timeout). A1 := 0 (R1 = V1 = 1); step 0 bootstraps from V1:
    # A0 = (1 + .5*1 - 2) + .4*0 = -0.5. Steps 2, 3 as before: A = [-0.5, 0, 3, 5].
    truncated = np.array([False, True, False, False])
    advantage, return_ = generalized_advantage_estimation_tl(
        REWARD, VALUE, DONE, BOOTSTRAP, DISCOUNT, LAMBDA, truncated
    )
    np.testing.assert_allclose(advantage, [-0.5, 0.0, 3.0, 5.0], atol=1e-12)
    np.testing.assert_allclose(return_, [1.5, 1.0, 6.0, 7.0], atol=1e-12)


def test_gae_tl_exact_form_bootstraps_from_timeout_value():
    # Step 1 truncated with V(s') = 10: delta1 = 2 + .5*10 - 1 = 6, A1 = 6 (no continuation);
    # A0 = (1 + .5*1 - 2) + .4*6 = 1.9; steps 2, 3 as before.
    truncated = np.array([False, True, False, False])
    truncated_value = np.array([0.0, 10.0, 0.0, 0.0])
    advantage, return_ = generalized_advantage_estimation_tl(
        REWARD, VALUE, DONE, BOOTSTRAP, DISCOUNT, LAMBDA, truncated, truncated_value=truncated_value
    )
    np.testing.assert_allclose(advantage, [1.9, 6.0, 3.0, 5.0], atol=1e-12)
    np.testing.assert_allclose(return_, [3.9, 7.0, 6.0, 7.0], atol=1e-12)


def test_gae_tl_exact_form_timeout_without_done_flag_still_cuts_the_episode():
    # done is False at the timeout: the timeout alone must end the episode.
    # t=1: delta1 = 1 + .5*0 - 3 = -2, A1 = -2.
    # t=0: timeout, V(s') = 4: delta0 = 1 + .5*4 - 2 = 1, A0 = 1 (A1 belongs to the next episode).
    advantage, return_ = generalized_advantage_estimation_tl(
        np.array([1.0, 1.0]), np.array([2.0, 3.0]), np.array([False, False]), 0.0, 0.5, 0.5,
        np.array([True, False]), truncated_value=np.array([4.0, 0.0]),
    )
    np.testing.assert_allclose(advantage, [1.0, -2.0])
    np.testing.assert_allclose(return_, [3.0, 1.0])


def test_discount_return_tl_forms():
    truncated = np.array([False, True, False, False])
    # Approximate: G1 := V1 = 1, G0 = 1 + .5*1 = 1.5; G2 = 6.5, G3 = 7 as without timeout.
    approx = discount_return_tl(REWARD, DONE, BOOTSTRAP, DISCOUNT, truncated, VALUE)
    np.testing.assert_allclose(approx, [1.5, 1.0, 6.5, 7.0])
    # Exact with V(s') = 10 at step 1: G1 = 2 + .5*10 = 7, G0 = 1 + .5*7 = 4.5.
    exact = discount_return_tl(
        REWARD, DONE, BOOTSTRAP, DISCOUNT, truncated, truncated_value=np.array([0.0, 10.0, 0.0, 0.0])
    )
    np.testing.assert_allclose(exact, [4.5, 7.0, 6.5, 7.0])


def _gae_reference(reward, value, done, bootstrap, discount, lam):
    """Plain double loop over envs and time, straight from the paper's definition."""
    T, B = reward.shape
    advantage = np.zeros((T, B))
    for b in range(B):
        next_value, next_adv = float(bootstrap[b]), 0.0
        for t in range(T - 1, -1, -1):
            mask = 0.0 if done[t, b] else 1.0
            delta = float(reward[t, b]) + discount * mask * next_value - float(value[t, b])
            next_adv = delta + discount * lam * mask * next_adv
            advantage[t, b] = next_adv
            next_value = float(value[t, b])
    return advantage, advantage + value


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_gae_matches_plain_loop_reference_on_random_batch(kind):
    rng = np.random.default_rng(7)
    T, B = 9, 3
    reward, value = rng.normal(size=(T, B)), rng.normal(size=(T, B))
    done = rng.random((T, B)) < 0.25
    bootstrap = rng.normal(size=B)
    expected_adv, expected_ret = _gae_reference(reward, value, done, bootstrap, 0.9, 0.7)
    args = (reward, value, done, bootstrap)
    if kind == "torch":
        args = tuple(torch.from_numpy(np.asarray(a)) for a in args)
    advantage, return_ = generalized_advantage_estimation(*args, 0.9, 0.7)
    np.testing.assert_allclose(np.asarray(advantage), expected_adv, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(np.asarray(return_), expected_ret, rtol=1e-10, atol=1e-10)
