"""``OnPolicyDataset.process_samples``: GAE targets, timeout mask and advantage normalisation by hand.

A one-env rollout of four steps, ``discount = 0.5``, ``gae_lambda = 0.8`` (product 0.4). The
sampler is not needed: ``process_samples`` is fed a stand-in for the sampler's buffer.
``.ci/mutation_check.py`` relies on these tests to kill its mutants of
:mod:`lightning_rl.datasets.on_policy`.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from lightning_rl.datasets.on_policy import OnPolicyDataset
from lightning_rl.distributions import DistInfo

REWARD = [1.0, 2.0, 3.0, 4.0]
VALUE = [2.0, 1.0, 3.0, 2.0]
BOOTSTRAP = 6.0


def _samples(done, truncated):
    """The fields of the sampler's ``Samples`` buffer that ``process_samples`` reads, ``[T=4, B=1]``."""
    col = lambda x, dtype=np.float32: np.asarray(x, dtype=dtype)[:, None]  # noqa: E731
    env = SimpleNamespace(
        reward=col(REWARD), done=col(done, bool), truncated=col(truncated, bool),
        observation=np.arange(4, dtype=np.float32).reshape(4, 1, 1), prev_reward=np.zeros((4, 1), np.float32),
    )
    agent = SimpleNamespace(
        agent_info=SimpleNamespace(value=col(VALUE), dist_info=DistInfo(prob=np.full((4, 1, 2), 0.5, np.float32))),
        bootstrap_value=np.array([BOOTSTRAP], np.float32),
        action=np.zeros((4, 1), np.int64),
        prev_action=np.zeros((4, 1), np.int64),
    )
    return SimpleNamespace(env=env, agent=agent)


def _process(done, truncated, normalize_advantage):
    dataset = OnPolicyDataset(
        sampler=None, agent=None, state=None, iterations_per_epoch=1,
        discount=0.5, gae_lambda=0.8, normalize_advantage=normalize_advantage,
    )
    batch = dataset.process_samples(_samples(done, truncated))
    return batch.advantage[:, 0].numpy(), batch.return_[:, 0].numpy(), batch.valid[:, 0].numpy()


def test_gae_targets_use_gae_lambda():
    # Termination after step 1, no timeout. delta_t = r_t + .5 (1 - d_t) V_{t+1} - V_t:
    # A3 = 4 + .5*6 - 2 = 5; A2 = (3 + .5*2 - 3) + .4*5 = 3; A1 = 2 - 1 = 1 (done);
    # A0 = (1 + .5*1 - 2) + .4*1 = -0.1.  Returns R = A + V = [1.9, 2, 6, 7].
    advantage, return_, valid = _process([0, 1, 0, 0], [0, 0, 0, 0], normalize_advantage=False)
    np.testing.assert_allclose(advantage, [-0.1, 1.0, 3.0, 5.0], atol=1e-6)
    np.testing.assert_allclose(return_, [1.9, 2.0, 6.0, 7.0], atol=1e-6)
    np.testing.assert_array_equal(valid, [1.0, 1.0, 1.0, 1.0])


def test_timeout_step_is_masked_and_bootstrapped_through():
    # Step 1 truncated (done and timeout): A1 := 0, R1 = V1 = 1; step 0 bootstraps from V1:
    # A0 = (1 + .5*1 - 2) + .4*0 = -0.5.  A = [-0.5, 0, 3, 5], R = [1.5, 1, 6, 7].
    advantage, return_, valid = _process([0, 1, 0, 0], [0, 1, 0, 0], normalize_advantage=False)
    np.testing.assert_allclose(advantage, [-0.5, 0.0, 3.0, 5.0], atol=1e-6)
    np.testing.assert_allclose(return_, [1.5, 1.0, 6.0, 7.0], atol=1e-6)
    np.testing.assert_array_equal(valid, [1.0, 0.0, 1.0, 1.0])


def test_advantages_standardized_over_valid_steps_only():
    # Raw A = [-0.5, 0, 3, 5] as above; the valid steps 0, 2, 3 give mean (-0.5 + 3 + 5) / 3 = 2.5
    # and (population) std sqrt(((-3)^2 + 0.5^2 + 2.5^2) / 3) = sqrt(15.5 / 3). Every step,
    # the masked one included, is standardized with these; returns keep the raw advantages.
    advantage, return_, valid = _process([0, 1, 0, 0], [0, 1, 0, 0], normalize_advantage=True)
    std = np.sqrt(15.5 / 3)
    np.testing.assert_allclose(advantage, [-3.0 / std, -2.5 / std, 0.5 / std, 2.5 / std], rtol=1e-5)
    np.testing.assert_allclose(return_, [1.5, 1.0, 6.0, 7.0], atol=1e-6)
    np.testing.assert_array_equal(valid, [1.0, 0.0, 1.0, 1.0])
    assert advantage[valid > 0].mean() == pytest.approx(0.0, abs=1e-6)
    assert advantage[valid > 0].std() == pytest.approx(1.0, rel=1e-5)


def test_rollout_without_a_valid_step_keeps_finite_zero_advantages():
    # Every step truncated: nothing to standardize over. The advantages stay the timeout form's
    # zeros instead of becoming NaN (mean and std of an empty selection).
    with np.errstate(all="raise"):
        advantage, _, valid = _process([1, 1, 1, 1], [1, 1, 1, 1], normalize_advantage=True)
    np.testing.assert_array_equal(valid, [0.0, 0.0, 0.0, 0.0])
    np.testing.assert_array_equal(advantage, [0.0, 0.0, 0.0, 0.0])
