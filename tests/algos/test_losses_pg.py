"""PPO and A2C losses worked by hand, and the direction of their gradient steps.

Every expected value below is computed with the arithmetic written out in the test (plain floats
and ``math``), never by calling the library. Each test's docstring names the wrong lines it
catches.
"""

from __future__ import annotations

import math

import pytest
import torch

from lightning_rl.agents import CategoricalPgAgent
from lightning_rl.algos import A2C, PPO
from lightning_rl.algos.a2c import a2c_loss
from lightning_rl.algos.ppo import ppo_loss
from lightning_rl.datasets.on_policy import OnPolicyBatch
from lightning_rl.distributions import DistInfo
from lightning_rl.envs import make_env
from lightning_rl.samplers import SerialSampler


def t(values) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float32)


def approx(x: float):
    return pytest.approx(x, rel=1e-5, abs=1e-6)


def as_floats(terms: dict[str, torch.Tensor]) -> dict[str, float]:
    return {k: float(v.detach()) for k, v in terms.items()}


# ----- PPO: hand-worked -----


def test_ppo_clipped_surrogate_both_sides_value_half_and_entropy_by_hand():
    """Catches: min -> max, swapped clamp bounds, +eps on the lower bound, dropped 0.5 of the
    value loss, value_loss_coeff ignored, entropy bonus added instead of subtracted, entropy
    coefficient ignored."""
    # eps = 0.2: the clip range is [0.8, 1.2].
    #   row  r    A    r*A    clip(r)*A      min
    #   0    1.5  +2   3.0    1.2*2 = 2.4    2.4   (A > 0, r > 1+eps: the clip binds)
    #   1    0.5  -1   -0.5   0.8*-1 = -0.8  -0.8  (A < 0, r < 1-eps: the clip binds)
    #   2    0.5  +3   1.5    0.8*3 = 2.4    1.5   (A > 0, r < 1-eps: unclipped side)
    #   3    1.5  -1   -1.5   1.2*-1 = -1.2  -1.5  (A < 0, r > 1+eps: unclipped side)
    ratio, advantage = t([1.5, 0.5, 0.5, 1.5]), t([2.0, -1.0, 3.0, -1.0])
    pi_loss = -(2.4 - 0.8 + 1.5 - 1.5) / 4  # = -0.4
    # Value: (R - V)^2 = (1, 0, 1, 4), mean 1.5; coefficient 0.5 times the 0.5 factor.
    value, return_ = t([1.0, 2.0, 0.0, -1.0]), t([2.0, 2.0, 1.0, 1.0])
    value_loss = 0.5 * 0.5 * (1 + 0 + 1 + 4) / 4  # = 0.375
    # Entropy mean (0.5 + 1 + 1.5 + 1) / 4 = 1, subtracted with coefficient 0.1.
    entropy = t([0.5, 1.0, 1.5, 1.0])
    loss, terms = ppo_loss(ratio, advantage, value, return_, entropy, ratio_clip=0.2, value_loss_coeff=0.5,
                           entropy_loss_coeff=0.1)
    got = as_floats(terms)
    assert got["pi_loss"] == approx(pi_loss)
    assert got["value_loss"] == approx(value_loss)
    assert got["entropy"] == approx(1.0)
    assert got["clip_fraction"] == approx(1.0)  # every |r - 1| = 0.5 > 0.2
    assert float(loss) == approx(pi_loss + value_loss - 0.1 * 1.0)  # = -0.125
    assert set(terms) == {"pi_loss", "value_loss", "entropy", "clip_fraction"}


def test_ppo_value_clip_by_hand():
    """Catches: max -> min of the two value errors, the clipped value's sign or its clamp."""
    # value_clip 0.5:
    #   row  V     V_old  R    V - V_old -> clipped   V_clip  (R-V)^2  (R-V_clip)^2  max
    #   0    1.0   0.0    2.0  1.0 -> 0.5              0.5     1.0      2.25          2.25
    #   1    2.0   2.2    2.0  -0.2 (inside)           2.0     0.0      0.0           0.0
    #   2    0.0   0.2    1.0  -0.2 (inside)           0.0     1.0      1.0           1.0
    #   3    -1.0  0.0    1.0  -1.0 -> -0.5            -0.5    4.0      2.25          4.0
    value, old_value, return_ = t([1.0, 2.0, 0.0, -1.0]), t([0.0, 2.2, 0.2, 0.0]), t([2.0, 2.0, 1.0, 1.0])
    ratio, advantage = t([1.0, 1.0, 1.0, 1.0]), t([1.0, 2.0, 3.0, -2.0])
    loss, terms = ppo_loss(ratio, advantage, value, return_, None, ratio_clip=0.1, value_loss_coeff=1.0,
                           entropy_loss_coeff=0.0, old_value=old_value, value_clip=0.5)
    value_loss = 1.0 * 0.5 * (2.25 + 0.0 + 1.0 + 4.0) / 4  # = 0.90625
    pi_loss = -(1.0 + 2.0 + 3.0 - 2.0) / 4  # r = 1: the plain surrogate
    got = as_floats(terms)
    assert got["value_loss"] == approx(value_loss)
    assert got["pi_loss"] == approx(pi_loss)
    assert "entropy" not in terms
    assert float(loss) == approx(pi_loss + value_loss)
    # Without value_clip the same rows give the plain error (1 + 0 + 1 + 4) / 4.
    _, plain = ppo_loss(ratio, advantage, value, return_, None, ratio_clip=0.1, value_loss_coeff=1.0,
                        entropy_loss_coeff=0.0)
    assert float(plain["value_loss"]) == approx(0.5 * 6.0 / 4)
    with pytest.raises(ValueError, match="old_value"):
        ppo_loss(ratio, advantage, value, return_, None, ratio_clip=0.1, value_loss_coeff=1.0,
                 entropy_loss_coeff=0.0, value_clip=0.5)


def test_ppo_valid_mask_by_hand():
    """Catches: the valid mask dropped from the surrogate, the value loss, the entropy or the
    clip fraction."""
    # eps 0.2; row 1 is masked (its r = 3 would bind the clip and dominate every mean).
    #   row  r    A     min(r*A, clip(r)*A)   valid
    #   0    1.1  1.0   1.1                   1
    #   1    3.0  5.0   1.2*5 = 6.0           0
    #   2    0.9  -2.0  -1.8                  1
    ratio, advantage, valid = t([1.1, 3.0, 0.9]), t([1.0, 5.0, -2.0]), t([1.0, 0.0, 1.0])
    value, return_ = t([0.0, 0.0, 0.0]), t([1.0, 10.0, 3.0])
    entropy = t([0.2, 9.0, 0.4])
    loss, terms = ppo_loss(ratio, advantage, value, return_, entropy, valid, ratio_clip=0.2, value_loss_coeff=1.0,
                           entropy_loss_coeff=0.01)
    pi_loss = -(1.1 - 1.8) / 2  # = 0.35
    value_loss = 0.5 * (1.0 + 9.0) / 2  # = 2.5
    mean_entropy = (0.2 + 0.4) / 2  # = 0.3
    got = as_floats(terms)
    assert got["pi_loss"] == approx(pi_loss)
    assert got["value_loss"] == approx(value_loss)
    assert got["entropy"] == approx(mean_entropy)
    assert got["clip_fraction"] == approx(0.0)  # only the masked row is outside [0.8, 1.2]
    assert float(loss) == approx(pi_loss + value_loss - 0.01 * mean_entropy)  # = 2.847


# ----- PPO: direction of a step -----


def softmax_step(loss_of_logits, logits: list[float], lr: float = 0.5) -> tuple[torch.Tensor, torch.Tensor]:
    """Probabilities before and after one SGD step on ``loss_of_logits(logits)``."""
    param = torch.nn.Parameter(t(logits))
    before = torch.softmax(param.detach(), -1)
    opt = torch.optim.SGD([param], lr=lr)
    loss_of_logits(param).backward()
    opt.step()
    return before, torch.softmax(param.detach(), -1)


def entropy_of(p: torch.Tensor) -> float:
    return float(-(p * p.log()).sum())


def test_ppo_step_raises_the_positive_advantage_action_and_lowers_the_negative_one():
    """Catches: the surrogate's sign (gradient ascent on the loss)."""
    actions, advantage = torch.tensor([0, 1]), t([1.0, -1.0])

    def loss(logits):
        p = torch.softmax(logits, -1)
        ratio = p[actions] / p[actions].detach()
        return ppo_loss(ratio, advantage, t([0.0, 0.0]), t([0.0, 0.0]), None, ratio_clip=0.2, value_loss_coeff=1.0,
                        entropy_loss_coeff=0.0)[0]

    before, after = softmax_step(loss, [0.0, 0.5, -0.5])
    assert after[0] > before[0]
    assert after[1] < before[1]


def test_ppo_positive_entropy_coefficient_raises_entropy():
    """Catches: the entropy bonus added to the loss instead of subtracted."""

    def loss(logits):
        p = torch.softmax(logits, -1)
        ratio = p[:1] / p[:1].detach()
        entropy = -(p * p.log()).sum()[None]
        return ppo_loss(ratio, t([0.0]), t([0.0]), t([0.0]), entropy, ratio_clip=0.2, value_loss_coeff=1.0,
                        entropy_loss_coeff=0.1)[0]

    before, after = softmax_step(loss, [2.0, 0.0, -1.0])
    assert entropy_of(after) > entropy_of(before)


def test_ppo_clip_zeroes_the_gradient_only_where_it_binds():
    """Catches: min -> max (the gradient then flows where it must not), swapped clamp bounds."""
    # eps 0.2, N = 5: d pi_loss / d r = -A / 5 where the plain surrogate is the min, else 0.
    ratio = torch.tensor([1.5, 0.5, 1.5, 0.5, 1.1], requires_grad=True)
    advantage = t([1.0, -1.0, -1.0, 1.0, 2.0])
    _, terms = ppo_loss(ratio, advantage, t([0.0] * 5), t([0.0] * 5), None, ratio_clip=0.2, value_loss_coeff=1.0,
                        entropy_loss_coeff=0.0)
    (grad,) = torch.autograd.grad(terms["pi_loss"], ratio)
    # Rows 0 (A > 0, r > 1.2) and 1 (A < 0, r < 0.8): the clip binds, no gradient.
    # Rows 2 (A < 0, r > 1.2) and 3 (A > 0, r < 0.8): the unclipped side; row 4 inside.
    torch.testing.assert_close(grad, t([0.0, 0.0, 1.0 / 5, -1.0 / 5, -2.0 / 5]))


# ----- PPO.loss: the module's wiring -----


def pg_module(cls, **kwargs):
    sampler = SerialSampler(env_id="CartPole-v1", batch_T=2, batch_B=2)
    agent = CategoricalPgAgent(hidden_sizes=[])
    settings = dict(minibatches=1, linear_lr_schedule=False) if cls is PPO else {}
    settings.update(kwargs)
    module = cls(agent, sampler, **settings)
    agent.initialize(make_env("CartPole-v1").spaces)
    return module


def two_action_batch(new_p0: list[float], old_p0: list[float], **fields) -> tuple[OnPolicyBatch, DistInfo]:
    """Four samples, all of action 0, of a two-action policy: old and new ``P(action 0)``."""
    old = t([[p, 1 - p] for p in old_p0])
    new = t([[p, 1 - p] for p in new_p0])
    batch = OnPolicyBatch(
        agent_inputs=None, action=torch.zeros(4, dtype=torch.long), return_=fields["return_"],
        advantage=fields["advantage"], valid=fields.get("valid"), old_dist_info=DistInfo(prob=old),
        old_value=fields.get("old_value"), init_rnn_state=None,
    )
    return batch, DistInfo(prob=new)


def binary_entropy(p: float) -> float:
    return -(p * math.log(p) + (1 - p) * math.log(1 - p))


def test_ppo_module_loss_uses_new_over_old_and_the_new_entropy():
    """Catches: the ratio inverted (old / new), the old policy's entropy, a wrong ``ratio_clip``,
    ``valid`` or coefficient passed on by ``PPO.loss``."""
    module = pg_module(PPO, ratio_clip=0.5, value_loss_coeff=2.0, entropy_loss_coeff=0.1)
    # P(a=0): old (0.4, 0.5, 0.8, 0.4) -> new (0.6, 0.25, 0.2, 0.5): r = (1.5, 0.5, 0.25, 1.25).
    batch, new_info = two_action_batch(
        [0.6, 0.25, 0.2, 0.5], [0.4, 0.5, 0.8, 0.4], advantage=t([1.0, -1.0, 1.0, 2.0]),
        return_=t([1.0, 0.0, 0.0, 0.0]),
        valid=t([1.0, 1.0, 1.0, 0.0]),
    )
    value = t([0.0, 0.0, 0.0, 7.0])
    module.policy_forward = lambda b, agent=None: (new_info, value)
    terms = module.loss(batch, ratio_clip=0.3)
    # eps = 0.3 (the argument, not the module's 0.5): clip range [0.7, 1.3]; row 3 masked.
    #   row 0: r 1.5, A +1: min(1.5, 1.3) = 1.3;  row 1: r 0.5, A -1: min(-0.5, -0.7) = -0.7
    #   row 2: r 0.25, A +1: min(0.25, 0.7) = 0.25
    pi_loss = -(1.3 - 0.7 + 0.25) / 3
    value_loss = 2.0 * 0.5 * (1.0 + 0.0 + 0.0) / 3
    mean_entropy = (binary_entropy(0.6) + binary_entropy(0.25) + binary_entropy(0.2)) / 3
    got = as_floats(terms)
    assert got["pi_loss"] == approx(pi_loss)
    assert got["value_loss"] == approx(value_loss)
    assert got["entropy"] == approx(mean_entropy)
    assert got["loss"] == approx(pi_loss + value_loss - 0.1 * mean_entropy)
    assert got["clip_fraction"] == approx(1.0)
    # KL(old || new) of the valid rows, by hand.
    kl = [o * math.log(o / n) + (1 - o) * math.log((1 - o) / (1 - n)) for o, n in ((0.4, 0.6), (0.5, 0.25), (0.8, 0.2))]
    assert got["approx_kl"] == approx(sum(kl) / 3)


def test_ppo_module_loss_passes_value_clip_and_old_value():
    """Catches: ``PPO.loss`` not passing ``old_value``/``value_clip`` on."""
    module = pg_module(PPO, value_clip=0.5, value_loss_coeff=1.0, entropy_loss_coeff=0.0)
    batch, new_info = two_action_batch(
        [0.5] * 4, [0.5] * 4, advantage=t([0.0] * 4), return_=t([2.0, 2.0, 1.0, 1.0]),
        old_value=t([0.0, 2.2, 0.2, 0.0]),
    )
    module.policy_forward = lambda b, agent=None: (new_info, t([1.0, 2.0, 0.0, -1.0]))
    terms = module.loss(batch, ratio_clip=0.2, diagnostics=False)
    # The rows of test_ppo_value_clip_by_hand: max errors (2.25, 0, 1, 4).
    assert float(terms["value_loss"]) == approx(0.5 * 7.25 / 4)
    assert "entropy" not in terms and "approx_kl" not in terms


# ----- A2C -----


def test_a2c_loss_by_hand():
    """Catches: the policy-gradient sign, the entropy sign, the 0.5 and the coefficients."""
    log_prob = t([math.log(0.5), math.log(0.25), math.log(0.8)])
    advantage = t([1.0, -2.0, 0.5])
    value, return_ = t([0.0, 1.0, 2.0]), t([1.0, -1.0, 2.0])
    entropy = t([0.6, 0.3, 0.9])
    loss, terms = a2c_loss(log_prob, advantage, value, return_, entropy, value_loss_coeff=0.5, entropy_loss_coeff=0.2)
    pi_loss = -(math.log(0.5) * 1.0 + math.log(0.25) * -2.0 + math.log(0.8) * 0.5) / 3
    value_loss = 0.5 * 0.5 * (1.0 + 4.0 + 0.0) / 3
    mean_entropy = (0.6 + 0.3 + 0.9) / 3
    got = as_floats(terms)
    assert got["pi_loss"] == approx(pi_loss)
    assert got["value_loss"] == approx(value_loss)
    assert got["entropy"] == approx(mean_entropy)
    assert float(loss) == approx(pi_loss + value_loss - 0.2 * mean_entropy)


def test_a2c_valid_mask_by_hand():
    """Catches: the valid mask dropped from any of the three terms."""
    log_prob = t([math.log(0.5), math.log(0.1), math.log(0.25)])
    advantage, valid = t([2.0, 100.0, 1.0]), t([1.0, 0.0, 1.0])
    value, return_ = t([0.0, 0.0, 1.0]), t([3.0, 50.0, 0.0])
    entropy = t([0.5, 10.0, 0.7])
    loss, terms = a2c_loss(log_prob, advantage, value, return_, entropy, valid, value_loss_coeff=1.0,
                           entropy_loss_coeff=0.5)
    pi_loss = -(math.log(0.5) * 2.0 + math.log(0.25) * 1.0) / 2
    value_loss = 0.5 * (9.0 + 1.0) / 2
    mean_entropy = (0.5 + 0.7) / 2
    got = as_floats(terms)
    assert got["pi_loss"] == approx(pi_loss)
    assert got["value_loss"] == approx(value_loss)
    assert got["entropy"] == approx(mean_entropy)
    assert float(loss) == approx(pi_loss + value_loss - 0.5 * mean_entropy)


def test_a2c_step_raises_the_positive_advantage_action_and_lowers_the_negative_one():
    """Catches: the policy-gradient sign."""
    actions, advantage = torch.tensor([0, 1]), t([1.0, -1.0])

    def loss(logits):
        log_p = torch.log_softmax(logits, -1)[actions]
        return a2c_loss(log_p, advantage, t([0.0, 0.0]), t([0.0, 0.0]), t([0.0, 0.0]), value_loss_coeff=1.0,
                        entropy_loss_coeff=0.0)[0]

    before, after = softmax_step(loss, [0.0, 0.5, -0.5])
    assert after[0] > before[0]
    assert after[1] < before[1]


def test_a2c_positive_entropy_coefficient_raises_entropy():
    """Catches: the entropy bonus added to the loss instead of subtracted."""

    def loss(logits):
        p = torch.softmax(logits, -1)
        entropy = -(p * p.log()).sum()[None]
        return a2c_loss(p[:1].log(), t([0.0]), t([0.0]), t([0.0]), entropy, value_loss_coeff=1.0,
                        entropy_loss_coeff=0.1)[0]

    before, after = softmax_step(loss, [2.0, 0.0, -1.0])
    assert entropy_of(after) > entropy_of(before)


def test_a2c_module_loss_uses_the_new_policy():
    """Catches: ``A2C.loss`` taking log-likelihoods or entropy of the old policy, or dropping
    ``valid``."""
    module = pg_module(A2C, value_loss_coeff=0.5, entropy_loss_coeff=0.1)
    batch, new_info = two_action_batch(
        [0.6, 0.25, 0.2, 0.5], [0.4, 0.5, 0.8, 0.4], advantage=t([1.0, -1.0, 2.0, 9.0]),
        return_=t([1.0, 0.0, 0.0, 0.0]),
        valid=t([1.0, 1.0, 1.0, 0.0]),
    )
    module.policy_forward = lambda b, agent=None: (new_info, t([0.0, 0.0, 2.0, 7.0]))
    terms = module.loss(batch)
    pi_loss = -(math.log(0.6) * 1.0 + math.log(0.25) * -1.0 + math.log(0.2) * 2.0) / 3
    value_loss = 0.5 * 0.5 * (1.0 + 0.0 + 4.0) / 3
    mean_entropy = (binary_entropy(0.6) + binary_entropy(0.25) + binary_entropy(0.2)) / 3
    got = as_floats(terms)
    assert got["pi_loss"] == approx(pi_loss)
    assert got["value_loss"] == approx(value_loss)
    assert got["entropy"] == approx(mean_entropy)
    assert got["loss"] == approx(pi_loss + value_loss - 0.1 * mean_entropy)
