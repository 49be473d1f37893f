"""DDPG, TD3 and SAC losses worked by hand, their bootstrap factors, the direction of their steps
and their update schedules (delayed actor, target updates).

Every expected value is computed with the arithmetic written out in the test (plain floats and
``math``), never by calling the library. Each test's docstring names the wrong lines it catches.
"""

from __future__ import annotations

import math

import pytest
import torch

from lightning_rl.agents import AgentInputs, DdpgAgent, SacAgent, Td3Agent
from lightning_rl.algos.ddpg import ddpg_mu_loss, ddpg_q_loss
from lightning_rl.algos.qpg_common import critic_loss, min_over, n_step_target, split_updates
from lightning_rl.algos.sac import sac_loss
from lightning_rl.envs import make_env
from lightning_rl.replays import SamplesFromReplay
from tests.algos.test_ddpg import pendulum_ddpg
from tests.algos.test_losses_dqn import stacked, without_trainer
from tests.algos.test_sac import end_of_episode_batch, pendulum_sac
from tests.algos.test_td3 import constant_output, pendulum_td3

SMALL = dict(hidden_sizes=[8], q_hidden_sizes=[8])


def t(values) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float32)


def approx(x: float):
    return pytest.approx(x, rel=1e-5, abs=1e-6)


def close(actual: torch.Tensor, expected: list) -> None:
    torch.testing.assert_close(actual.detach(), t(expected), rtol=1e-5, atol=1e-6)


def value(x: torch.Tensor) -> float:
    return float(x.detach())


def initialized(module):
    module.agent.initialize(make_env("Pendulum-v1").spaces)
    return module


# ----- split_updates: the bootstrap factor -----


def four_endings_batch() -> SamplesFromReplay:
    """``[K=2, N=4]``: a plain step, a termination, a time-out, and both at once.

    row  return  done_n  timeout_n  discount_n
    0    1.0     no      no         0.9
    1    2.0     yes     no         0.81
    2    -1.0    no      yes        0.729
    3    0.5     yes     yes        0.9
    The second batch (k = 1) has returns times 10 and discount 0.5 everywhere.
    """
    obs = torch.zeros(4, 3)
    zeros = torch.zeros(4)

    def batch(returns, discount):
        return SamplesFromReplay(
            agent_inputs=AgentInputs(obs, zeros[:, None], zeros),
            action=t([[2.0], [-2.0], [1.0], [0.0]]),  # env scale: Pendulum's [-2, 2]
            return_=t(returns),
            done=torch.tensor([False, True, False, True]),
            done_n=torch.tensor([False, True, False, True]),
            truncated_n=torch.tensor([False, False, True, True]),
            discount_n=t(discount),
            target_inputs=AgentInputs(obs + 1, zeros[:, None], zeros),
            idxs=torch.arange(4),
            is_weights=torch.ones(4),
        )

    first = batch([1.0, 2.0, -1.0, 0.5], [0.9, 0.81, 0.729, 0.9])
    second = batch([10.0, 20.0, -10.0, 5.0], [0.5] * 4)
    return SamplesFromReplay(*[
        AgentInputs(*[torch.stack([a, b]) for a, b in zip(x, y, strict=True)]) if isinstance(x, AgentInputs)
        else torch.stack([x, y])
        for x, y in zip(first, second, strict=True)
    ])


@pytest.mark.parametrize(
    "bootstrap_timelimit, bootstrap",
    [
        (True, ([0.9, 0.0, 0.729, 0.0], [0.5, 0.0, 0.5, 0.0])),  # only terminations cut
        (False, ([0.9, 0.0, 0.0, 0.0], [0.5, 0.0, 0.0, 0.0])),  # time-outs cut too
    ],
)
def test_split_updates_bootstrap_factor_by_hand(bootstrap_timelimit, bootstrap):
    """Catches: time-outs treated as terminations (or never cutting without
    ``bootstrap_timelimit``), terminations bootstrapping, ``reward_scale`` ignored, actions not
    brought to network scale, batches in the wrong order."""
    agent = DdpgAgent(**SMALL)
    agent.initialize(make_env("Pendulum-v1").spaces)
    first, second = split_updates(agent, four_endings_batch(), 3.0, bootstrap_timelimit)
    close(first.bootstrap, bootstrap[0])
    close(second.bootstrap, bootstrap[1])
    close(first.return_, [3.0, 6.0, -3.0, 1.5])  # reward_scale 3
    close(second.return_, [30.0, 60.0, -30.0, 15.0])
    close(first.action, [[1.0], [-1.0], [0.5], [0.0]])  # [-2, 2] -> [-1, 1]
    close(first.next_inputs.observation, [[1.0] * 3] * 4)
    close(first.inputs.observation, [[0.0] * 3] * 4)


def test_split_updates_with_reward_scale_one_keeps_returns():
    agent = DdpgAgent(**SMALL)
    agent.initialize(make_env("Pendulum-v1").spaces)
    first, _ = split_updates(agent, four_endings_batch(), 1.0, True)
    close(first.return_, [1.0, 2.0, -1.0, 0.5])


# ----- the shared helpers -----


def test_n_step_target_min_over_and_critic_loss_by_hand():
    """Catches: the sign of the bootstrap term, the clip, max instead of min, the 0.5 of the
    critic loss, a critic left out of the sum."""
    close(n_step_target(t([1.0, 2.0]), t([0.5, 0.0]), t([4.0, 9.0]), None), [3.0, 2.0])
    close(n_step_target(t([1.0, -2.0]), t([0.5, 0.5]), t([4.0, -9.0]), 2.5), [2.5, -2.5])  # 3 and -6.5 clipped
    close(min_over((t([1.0, 5.0]), t([2.0, -1.0]))), [1.0, -1.0])
    close(min_over((t([1.0, 5.0]),)), [1.0, 5.0])
    # 0.5 * mean((3 - 1)^2, (2 - 2)^2) + 0.5 * mean((3 - 0)^2, (2 - 4)^2) = 1 + 3.25
    assert value(critic_loss((t([1.0, 2.0]), t([0.0, 4.0])), t([3.0, 2.0]))) == approx(1.0 + 3.25)


# ----- DDPG -----


def test_ddpg_critic_loss_by_hand():
    """Catches: no bootstrap on termination (via the bootstrap factor), the target's sign,
    ``q_target_clip`` ignored, the 0.5 factor."""
    q = t([1.0, 2.0, -1.0]).requires_grad_()
    # y = 1 + 0.9 * 2 = 2.8;  0.5 + 0 * 10 = 0.5 (terminated);  2 + 0.81 * -1 = 1.19
    loss, terms = ddpg_q_loss((q,), t([1.0, 0.5, 2.0]), t([0.9, 0.0, 0.81]), (t([2.0, 10.0, -1.0]),))
    close(terms["target"], [2.8, 0.5, 1.19])
    assert value(loss) == approx(0.5 * (1.8**2 + 1.5**2 + 2.19**2) / 3)
    assert value(terms["q_mean"]) == approx((1.0 + 2.0 - 1.0) / 3)
    assert not terms["target"].requires_grad
    # Clipped to +-1: y = 1, 0.5, 1.
    loss, terms = ddpg_q_loss((q,), t([1.0, 0.5, 2.0]), t([0.9, 0.0, 0.81]), (t([2.0, 10.0, -1.0]),),
                              q_target_clip=1.0)
    close(terms["target"], [1.0, 0.5, 1.0])
    assert value(loss) == approx(0.5 * (0.0 + 1.5**2 + 2.0**2) / 3)


def test_td3_critic_loss_takes_the_smaller_target_critic_by_hand():
    """Catches: max instead of min over the target critics, the second critic's loss dropped."""
    q1, q2 = t([1.0, 2.0]).requires_grad_(), t([0.0, 3.0]).requires_grad_()
    # min(Q'_1, Q'_2) = min(4, 2) = 2, min(1, 5) = 1;  y = 1 + 0.5 * 2 = 2;  2 + 0 = 2 (terminated).
    loss, terms = ddpg_q_loss((q1, q2), t([1.0, 2.0]), t([0.5, 0.0]), (t([4.0, 1.0]), t([2.0, 5.0])))
    close(terms["target"], [2.0, 2.0])
    # 0.5 * mean(1, 0) + 0.5 * mean(4, 1)
    assert value(loss) == approx(0.5 * 0.5 + 0.5 * 2.5)
    assert value(terms["q_mean"]) == approx(1.5)  # the first critic's
    g1, g2 = torch.autograd.grad(loss, (q1, q2))
    close(g1, [-(2.0 - 1.0) / 2, 0.0])  # d/dQ of 0.5 mean((y - Q)^2) = -(y - Q) / N
    close(g2, [-(2.0 - 0.0) / 2, -(2.0 - 3.0) / 2])


def test_ddpg_mu_loss_sign_and_direction():
    """Catches: ``+mean(Q)`` (the policy would descend Q)."""
    assert value(ddpg_mu_loss(t([1.0, 3.0]))) == approx(-2.0)
    # Q(s, a) = -(a - 1)^2: a step on the policy loss moves a towards 1.
    a = torch.nn.Parameter(t([0.0]))
    opt = torch.optim.SGD([a], lr=0.1)
    ddpg_mu_loss(-(a - 1.0) ** 2).backward()
    opt.step()
    assert float(a.detach()) == pytest.approx(0.2)  # 0 - 0.1 * d/da (a - 1)^2 = 0 - 0.1 * (-2)


def test_ddpg_module_targets_come_from_the_target_critic():
    """Catches: ``DDPG.q_loss`` bootstrapping from the online critic."""
    torch.manual_seed(0)
    module = initialized(pendulum_ddpg(agent=DdpgAgent(**SMALL)))
    constant_output(module.agent.target_q_model, 3.0)
    constant_output(module.agent.q_model, 5.0)
    (mb,) = split_updates(module.agent, end_of_episode_batch(), 1.0, True)
    # Returns 1, gamma^n 0.9: bootstrapped, time-out (bootstraps), terminated.
    close(module.q_loss(mb)["target"], [1.0 + 0.9 * 3.0, 1.0 + 0.9 * 3.0, 1.0])


def test_td3_module_targets_take_the_smaller_target_critic():
    """Catches: ``Td3Agent``/TD3 using max (or one critic) for the target."""
    torch.manual_seed(0)
    module = initialized(pendulum_td3(agent=Td3Agent(**SMALL)))
    constant_output(module.agent.target_q_model, 4.0)
    constant_output(module.agent.target_q2_model, -2.0)
    constant_output(module.agent.q_model, 10.0)
    (mb,) = split_updates(module.agent, end_of_episode_batch(), 1.0, False)
    # Without bootstrap_timelimit the time-out row does not bootstrap either.
    close(module.q_loss(mb)["target"], [1.0 + 0.9 * -2.0, 1.0, 1.0])


def test_td3_policy_every_policy_interval_and_targets_every_target_interval():
    """Catches: the delayed actor's interval ignored (a policy step every update), the target
    update interval ignored. Runs ``DDPG.training_step`` directly on 7 replay batches."""
    torch.manual_seed(0)
    module = initialized(pendulum_td3(agent=Td3Agent(**SMALL), policy_update_interval=2, target_update_interval=3,
                                      target_update_tau=0.5))
    mu_opt, q_opt = without_trainer(module, *module.configure_optimizers())
    mu_before = [p.detach().clone() for p in module.agent.model.parameters()]
    module.training_step(stacked(end_of_episode_batch()[0], 7), 0)
    assert module.train_state.updates == 7
    # The updates counted when each optimizer stepped: the critic's step is the one counted (after it).
    assert q_opt.steps == [0, 1, 2, 3, 4, 5, 6]
    assert mu_opt.steps == [2, 4, 6]
    assert module.soft_target_update.calls == [(3, 0.5), (6, 0.5)]
    assert any(not torch.equal(a, p) for a, p in zip(mu_before, module.agent.model.parameters(), strict=True))


def test_ddpg_default_intervals_update_everything_every_step():
    torch.manual_seed(0)
    module = initialized(pendulum_ddpg(agent=DdpgAgent(**SMALL)))
    mu_opt, q_opt = without_trainer(module, *module.configure_optimizers())
    module.training_step(stacked(end_of_episode_batch()[0], 3), 0)
    assert q_opt.steps == [0, 1, 2] and mu_opt.steps == [1, 2, 3]
    assert module.soft_target_update.calls == [(1, 0.01), (2, 0.01), (3, 0.01)]


# ----- SAC -----


def sac_rows(**overrides):
    """Two transitions; row 1 terminated (bootstrap 0). alpha = 0.5.

    row  Q1   Q2   R    bootstrap  Q'_1  Q'_2  log pi'  log pi(a~|s)  Q1(s,a~)  Q2(s,a~)
    0    1.0  1.5  1.0  0.9        2.0   1.0   -0.5     -1.0          3.0       2.0
    1    2.0  1.0  0.5  0.0        3.0   4.0   1.0      0.5           1.0       4.0
    """
    rows = dict(
        q1=t([1.0, 2.0]).requires_grad_(), q2=t([1.5, 1.0]).requires_grad_(),
        return_=t([1.0, 0.5]), bootstrap=t([0.9, 0.0]),
        next_target_q1=t([2.0, 3.0]), next_target_q2=t([1.0, 4.0]), next_log_pi=t([-0.5, 1.0]),
        log_pi=t([-1.0, 0.5]).requires_grad_(), q1_pi=t([3.0, 1.0]).requires_grad_(),
        q2_pi=t([2.0, 4.0]).requires_grad_(), log_alpha=torch.tensor(math.log(0.5), requires_grad=True),
        target_entropy=-1.0,
    )
    rows.update(overrides)
    return rows


# y_0 = 1 + 0.9 * (min(2, 1) - 0.5 * (-0.5)) = 1 + 0.9 * 1.25 = 2.125;  y_1 = 0.5 (terminated)
SAC_Y = [2.125, 0.5]
SAC_Q_LOSS = 0.5 * ((2.125 - 1.0) ** 2 + (0.5 - 2.0) ** 2) / 2 + 0.5 * ((2.125 - 1.5) ** 2 + (0.5 - 1.0) ** 2) / 2
# mean(alpha * log pi - min(Q1, Q2)) = mean(0.5 * -1 - 2, 0.5 * 0.5 - 1)
SAC_PI_LOSS = ((0.5 * -1.0 - 2.0) + (0.5 * 0.5 - 1.0)) / 2
SAC_ENTROPY = -(-1.0 + 0.5) / 2  # 0.25
SAC_ALPHA_LOSS = math.log(0.5) * (SAC_ENTROPY - (-1.0))  # log alpha * (H - target)


def test_sac_losses_and_terms_by_hand():
    """Catches: the entropy term's sign in the target (``+ alpha log pi'``), max instead of min
    (target or policy loss), the policy loss's sign, the alpha loss's sign, the critic loss's
    0.5."""
    loss, terms = sac_loss(**sac_rows())
    close(terms["target"], SAC_Y)
    assert value(terms["q_loss"]) == approx(SAC_Q_LOSS)
    assert value(terms["pi_loss"]) == approx(SAC_PI_LOSS)
    assert value(terms["entropy"]) == approx(SAC_ENTROPY)
    assert value(terms["alpha_loss"]) == approx(SAC_ALPHA_LOSS)
    assert value(terms["alpha"]) == approx(0.5)
    assert value(terms["q_mean"]) == approx(1.5)
    assert value(loss) == approx(SAC_Q_LOSS + SAC_PI_LOSS + SAC_ALPHA_LOSS)


def test_sac_fixed_alpha_and_target_clip_by_hand():
    """Catches: an alpha loss without ``learn_alpha``, ``q_target_clip`` ignored."""
    loss, terms = sac_loss(**sac_rows(), learn_alpha=False, q_target_clip=2.0)
    assert value(terms["alpha_loss"]) == 0.0
    close(terms["target"], [2.0, 0.5])  # 2.125 clipped
    q_loss = 0.5 * ((2.0 - 1.0) ** 2 + 1.5**2) / 2 + 0.5 * ((2.0 - 1.5) ** 2 + 0.5**2) / 2
    assert value(loss) == approx(q_loss + SAC_PI_LOSS)


def test_sac_gradients_by_hand():
    """Catches: alpha not detached in the critic/policy losses (log_alpha's gradient would pick
    up alpha * mean(log pi)), max instead of min in the policy loss."""
    rows = sac_rows()
    loss, _ = sac_loss(**rows)
    g_alpha, g_log_pi, g_q1_pi, g_q2_pi = torch.autograd.grad(
        loss, (rows["log_alpha"], rows["log_pi"], rows["q1_pi"], rows["q2_pi"]))
    assert float(g_alpha) == approx(SAC_ENTROPY - (-1.0))  # = 1.25: the alpha loss only
    close(g_log_pi, [0.5 / 2, 0.5 / 2])  # alpha / N
    close(g_q1_pi, [0.0, -1.0 / 2])  # the smaller critic gets -1 / N: Q2 on row 0, Q1 on row 1
    close(g_q2_pi, [-1.0 / 2, 0.0])


@pytest.mark.parametrize("log_pi, rises", [(2.0, True), (-1.0, False)])
def test_sac_alpha_rises_below_the_target_entropy_and_falls_above(log_pi, rises):
    """Catches: the alpha loss's sign. Entropy = -log pi: -2 (below the target -1) or 1 (above)."""
    log_alpha = torch.nn.Parameter(torch.tensor(0.0))
    opt = torch.optim.SGD([log_alpha], lr=0.1)
    _, terms = sac_loss(**sac_rows(log_pi=t([log_pi, log_pi]), log_alpha=log_alpha))
    terms["alpha_loss"].backward()
    opt.step()
    # d alpha_loss / d log_alpha = H - target: -2 + 1 = -1 (step +0.1) or 1 + 1 = 2 (step -0.2).
    assert float(log_alpha.detach()) == pytest.approx(0.1 if rises else -0.2)


def test_sac_policy_step_raises_the_smaller_critic_value():
    """Catches: the policy loss's sign on Q (a step would lower min Q)."""
    a = torch.nn.Parameter(t([0.0]))
    opt = torch.optim.SGD([a], lr=0.1)
    # Q1 = 2 a + 1, Q2 = 3 a + 5: min is Q1 near 0, growing with a; log pi held at 0.
    loss, _ = sac_loss(**sac_rows(log_pi=t([0.0]), q1_pi=2 * a + 1, q2_pi=3 * a + 5, q1=t([0.0]), q2=t([0.0]),
                                  return_=t([0.0]), bootstrap=t([0.0]), next_target_q1=t([0.0]),
                                  next_target_q2=t([0.0]), next_log_pi=t([0.0])))
    loss.backward()
    opt.step()
    assert float(a.detach()) == pytest.approx(0.2)


def test_sac_module_targets_come_from_the_target_critics():
    """Catches: ``SAC.loss`` bootstrapping from the online critics."""
    torch.manual_seed(0)
    module = initialized(pendulum_sac(agent=SacAgent(**SMALL), fixed_alpha=1e-8))
    constant_output(module.agent.target_q1_model, 3.0)
    constant_output(module.agent.target_q2_model, 4.0)
    constant_output(module.agent.q1_model, -7.0)
    constant_output(module.agent.q2_model, -9.0)
    (mb,) = split_updates(module.agent, end_of_episode_batch(), 1.0, True)
    # alpha ~ 0: y = R + 0.9 * min(3, 4) for the bootstrapped and time-out rows, R when terminated.
    torch.testing.assert_close(module.loss(mb)["target"], t([1.0 + 2.7, 1.0 + 2.7, 1.0]), atol=1e-4, rtol=0)


def test_sac_training_step_moves_targets_every_interval():
    """Catches: SAC's target update interval ignored."""
    torch.manual_seed(0)
    module = initialized(pendulum_sac(agent=SacAgent(**SMALL), target_update_interval=2, target_update_tau=0.1))
    optimizers = without_trainer(module, *module.configure_optimizers())
    module.training_step(stacked(end_of_episode_batch()[0], 5), 0)
    assert module.train_state.updates == 5
    assert [o.steps for o in optimizers] == [[0, 1, 2, 3, 4]] * 3  # counted after the step
    assert module.soft_target_update.calls == [(2, 0.1), (4, 0.1)]
