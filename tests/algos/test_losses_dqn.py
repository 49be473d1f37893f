"""DQN, C51 and R2D1 losses worked by hand, the networks they take targets from, and DQN's
update schedule (target updates, priorities).

Every expected value is computed with the arithmetic written out in the test (plain floats and
``math``), never by calling the library. Each test's docstring names the wrong lines it catches.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from lightning_rl.agents import AgentInputs
from lightning_rl.algos import CategoricalDQN
from lightning_rl.algos.categorical_dqn import categorical_dqn_loss, project_distribution
from lightning_rl.algos.dqn import dqn_loss
from lightning_rl.algos.off_policy import SoftTargetUpdate
from lightning_rl.algos.r2d1 import inv_value_rescale, r2d1_loss, sequence_priority, value_rescale
from lightning_rl.data.buffers import buffer_func
from lightning_rl.replays import SamplesFromReplay
from tests.algos.test_categorical_dqn import uniform_c51
from tests.algos.test_dqn import linear_dqn, tiny_batch


def t(values, dtype=torch.float32) -> torch.Tensor:
    return torch.tensor(values, dtype=dtype)


def b(values) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.bool)


def approx(x: float):
    return pytest.approx(x, rel=1e-5, abs=1e-6)


def close(actual: torch.Tensor, expected: list) -> None:
    torch.testing.assert_close(actual.detach(), t(expected), rtol=1e-5, atol=1e-6)


# ----- DQN: the pure loss -----


def dqn_rows():
    """Three transitions, two actions.

    row  Q(s, .)      a  Q(s,a)  Q_target(s_n, .)  Q(s_n, .) (online)  R_n   done_n  gamma^k
    0    (1, 2)       1  2       (1, 4)            (3, 0)              1.0   no      0.9
    1    (0.25, -1)   0  0.25    (2, 0)            (0, 1)              0.5   no      0.81 (k = 2)
    2    (3, 0)       0  3       (-1, 5)           (2, 1)              2.5   yes     0.9
    """
    return dict(
        q=t([[1.0, 2.0], [0.25, -1.0], [3.0, 0.0]]).requires_grad_(),
        action=torch.tensor([1, 0, 0]),
        next_target_q=t([[1.0, 4.0], [2.0, 0.0], [-1.0, 5.0]]),
        return_=t([1.0, 0.5, 2.5]),
        done_n=b([False, False, True]),
        discount_n=t([0.9, 0.81, 0.9]),
    )


# DQN: the target net picks and values: max = 4, 2, (5, not used: done).
#   y = 1 + 0.9 * 4 = 4.6;  0.5 + 0.81 * 2 = 2.12;  2.5 (terminated)
#   delta = y - Q(s, a) = 2.6, 1.87, -0.5
PLAIN_Y = [4.6, 2.12, 2.5]


def test_dqn_plain_target_huber_loss_and_terms_by_hand():
    """Catches: done mask dropped, discount_n ignored, the online net's argmax with no online
    net given, Huber replaced by the squared error, the sign of delta in ``td_abs``."""
    loss, terms = dqn_loss(**dqn_rows())
    # Huber(1): |d| - 0.5 beyond 1, else d^2 / 2: 2.1, 1.37, 0.125.
    assert float(loss.detach()) == approx((2.1 + 1.37 + 0.125) / 3)
    close(terms["q"], [2.0, 0.25, 3.0])
    close(terms["target"], PLAIN_Y)
    close(terms["td_abs"], [2.6, 1.87, 0.5])
    assert loss.requires_grad and not terms["target"].requires_grad and not terms["q"].requires_grad


@pytest.mark.parametrize(
    "delta_clip, per_row",
    [
        (None, [0.5 * 2.6**2, 0.5 * 1.87**2, 0.5 * 0.5**2]),  # 3.38, 1.74845, 0.125
        (2.0, [2.0 * (2.6 - 1.0), 0.5 * 1.87**2, 0.5 * 0.5**2]),  # 3.2: |d| > 2 is linear with slope 2
        (0.25, [0.25 * (2.6 - 0.125), 0.25 * (1.87 - 0.125), 0.25 * (0.5 - 0.125)]),
    ],
)
def test_dqn_squared_and_huber_threshold_by_hand(delta_clip, per_row):
    """Catches: ``delta_clip`` not passed to the Huber loss, the squared error's 0.5."""
    loss, terms = dqn_loss(**dqn_rows(), delta_clip=delta_clip)
    assert float(loss.detach()) == approx(sum(per_row) / 3)
    close(terms["td_abs"], [2.6, 1.87, 0.5])


def test_dqn_importance_weights_by_hand():
    """Catches: ``is_weights`` ignored."""
    loss, _ = dqn_loss(**dqn_rows(), is_weights=t([1.0, 0.5, 2.0]))
    assert float(loss.detach()) == approx((1.0 * 2.1 + 0.5 * 1.37 + 2.0 * 0.125) / 3)


def test_dqn_double_target_by_hand():
    """Catches: the online net's choice ignored (double DQN = plain), or the online net's value
    used instead of the target net's."""
    # The online net picks argmax (3, 0) = 0 and (0, 1) = 1; the target net values them: 1 and 0.
    #   y = 1 + 0.9 * 1 = 1.9;  0.5 + 0.81 * 0 = 0.5;  2.5 (terminated)
    #   delta = -0.1, 0.25, -0.5 (all below the Huber threshold: d^2 / 2)
    loss, terms = dqn_loss(**dqn_rows(), next_online_q=t([[3.0, 0.0], [0.0, 1.0], [2.0, 1.0]]))
    close(terms["target"], [1.9, 0.5, 2.5])
    close(terms["td_abs"], [0.1, 0.25, 0.5])
    assert float(loss.detach()) == approx((0.005 + 0.03125 + 0.125) / 3)


def test_dqn_loss_gradient_descends_towards_the_target():
    """Catches: a flipped TD error sign (the step would move Q(s, a) away from y)."""
    rows = dqn_rows()
    q = rows["q"]
    loss, _ = dqn_loss(**rows, delta_clip=None)
    (grad,) = torch.autograd.grad(loss, q)
    # d/dQ(s,a) of mean(0.5 (y - Q)^2) = -(y - Q) / 3 at the taken actions, 0 elsewhere.
    close(grad, [[0.0, -2.6 / 3], [-1.87 / 3, 0.0], [0.5 / 3, 0.0]])


# ----- DQN.loss: which network gives the targets -----


def test_dqn_module_takes_targets_from_the_target_network():
    """Catches: ``DQN.loss`` using the online network for the bootstrap values (``self.agent(``
    instead of ``self.agent.target(``), or the target net as double DQN's chooser."""
    # linear_dqn: online Q(s) = (s2, s3), target Q(s) = (s0, s1). Bootstrap states:
    #   s_n = (1, 3, 5, 2): target (1, 3), online (5, 2)
    #   s_n = (7, 7, 7, 7): terminated
    #   s_n = (2, -1, 0, 4): target (2, -1), online (0, 4); a 2-step window cut by a timeout (0.81)
    module = linear_dqn()
    close(module.loss(tiny_batch())["target"], [0.5 + 0.9 * 3.0, 1.0, 0.25 + 0.81 * 2.0])
    # Double DQN: the online net picks (0, -, 1), the target net values them (1, -, -1).
    module = linear_dqn(double_dqn=True)
    close(module.loss(tiny_batch())["target"], [0.5 + 0.9 * 1.0, 1.0, 0.25 + 0.81 * -1.0])


def test_dqn_module_timeout_bootstraps_and_termination_does_not():
    """Catches: the done mask dropped, or the timeout row treated as terminated."""
    module = linear_dqn()
    batch = tiny_batch()
    y = module.loss(batch)["target"]
    # Row 1 terminated (done_n): its target is the return alone although Q_target(s_n) = 7.
    assert float(y[1]) == 1.0
    # Row 2 was cut by a time-out (timeout_n, not done_n): it bootstraps with gamma^2.
    assert bool(batch.truncated_n[2]) and not bool(batch.done_n[2])
    assert float(y[2]) == approx(0.25 + 0.81 * 2.0)


def test_dqn_module_weights_losses_only_with_prioritized_replay():
    """Catches: ``DQN.loss`` passing ``is_weights`` without prioritized replay, or not with it."""
    # Q(s, a) = (1, 2, 1), y = (3.2, 1, 1.87): delta = 2.2, -1, 0.87 -> Huber 1.7, 0.5, 0.37845.
    weights = [1.0, 0.5, 0.25]
    plain = linear_dqn().loss(tiny_batch(weights))["loss"]
    assert float(plain.detach()) == approx((1.7 + 0.5 + 0.37845) / 3)
    weighted = linear_dqn(prioritized_replay=True).loss(tiny_batch(weights))["loss"]
    assert float(weighted.detach()) == approx((1.7 + 0.5 * 0.5 + 0.25 * 0.37845) / 3)


# ----- DQN.training_step: target updates and priorities -----


class DirectOptimizer:
    """Stands in for a ``LightningOptimizer`` on the direct update path (no Trainer); records
    ``module.train_state.updates`` at each of its steps."""

    def __init__(self, optimizer: torch.optim.Optimizer, module) -> None:
        self.optimizer, self.module = optimizer, module
        self.steps: list[int] = []

    def _on_before_step(self) -> None:
        self.steps.append(self.module.train_state.updates)

    def _on_after_step(self) -> None:
        pass

    @property
    def param_groups(self):
        return self.optimizer.param_groups


class RecordingTargetUpdate:
    """Wraps a module's ``SoftTargetUpdate``: records the update count and tau of each call."""

    def __init__(self, module, inner: SoftTargetUpdate) -> None:
        self.module, self.inner, self.calls = module, inner, []

    def __call__(self, agent, tau: float) -> None:
        self.calls.append((self.module.train_state.updates, tau))
        self.inner(agent, tau)


def without_trainer(module, *optimizers: torch.optim.Optimizer) -> list[DirectOptimizer]:
    """Let ``module.training_step`` run without a Trainer: direct updates, no logging."""
    wrapped = [DirectOptimizer(o, module) for o in optimizers]
    module._direct = True
    module.optimizers = lambda: wrapped[0] if len(wrapped) == 1 else wrapped
    module.logging_due = lambda: False
    module.log_step_metrics = lambda metrics: None
    module.soft_target_update = RecordingTargetUpdate(module, module.soft_target_update)
    return wrapped


def stacked(batch, K: int):
    """``K`` copies of a replay batch on a leading dim, as the replay dataset yields them."""
    return buffer_func(batch, lambda x: torch.stack([x] * K))


class RecordingReplay:
    def __init__(self) -> None:
        self.calls = []

    def update_batch_priorities(self, idxs, priorities) -> None:
        self.calls.append((idxs.clone(), priorities.clone()))


def test_dqn_training_step_updates_the_target_every_interval_and_sends_priorities():
    """Catches: a target update after every update (interval ignored), priorities without the
    1e-6 floor, priorities of the wrong samples."""
    module = linear_dqn(target_update_interval=2, target_update_tau=1.0, prioritized_replay=True)
    (opt,) = without_trainer(module, torch.optim.SGD(module.agent.parameters_for("model"), lr=0.01))
    replay = RecordingReplay()
    module.replay_setup.replay = replay
    td_abs = []
    loss_fn = module.loss

    def recording_loss(batch):
        terms = loss_fn(batch)
        td_abs.append(terms["td_abs"])
        return terms

    module.loss = recording_loss
    module.training_step(stacked(tiny_batch(), 5), 0)
    assert module.train_state.updates == 5 and len(opt.steps) == 5
    # Updates 2 and 4 of 5 move the target (a copy, tau = 1).
    assert module.soft_target_update.calls == [(2, 1.0), (4, 1.0)]
    # After update 4 the target equals the online weights of that moment: not the final ones.
    online = torch.cat([p.detach().flatten() for p in module.agent.model.parameters()])
    target = torch.cat([p.detach().flatten() for p in module.agent.target_model.parameters()])
    assert not torch.equal(online, target)
    # One call with all 5 * 3 priorities: |delta| + 1e-6, in the order of the stacked idxs.
    ((idxs, priorities),) = replay.calls
    assert idxs.tolist() == [0, 1, 2] * 5
    expected = torch.cat(td_abs) + 1e-6
    assert torch.equal(priorities, expected)
    assert not torch.equal(priorities, torch.cat(td_abs))  # the 1e-6 shows at these magnitudes


def test_soft_target_update_moves_the_target_by_tau_towards_the_online_network():
    """Catches: ``lerp`` by ``1 - tau`` (the target would jump most of the way), a copy instead
    of a soft step, integer buffers not copied."""

    class Net(nn.Module):
        def __init__(self, w: list[float], bias: float, count: int) -> None:
            super().__init__()
            self.linear = nn.Linear(2, 1)
            with torch.no_grad():
                self.linear.weight.copy_(t([w]))
                self.linear.bias.fill_(bias)
            self.register_buffer("count", torch.tensor(count))

    target, online = Net([1.0, 2.0], 0.0, 3), Net([5.0, -2.0], 4.0, 7)

    class Agent:
        def target_pairs(self):
            return [(target, online)]

    update = SoftTargetUpdate()
    update(Agent(), 0.25)
    # target + 0.25 * (online - target): (1 + 0.25 * 4, 2 + 0.25 * -4) = (2, 1); bias 0 + 0.25 * 4 = 1.
    close(target.linear.weight, [[2.0, 1.0]])
    close(target.linear.bias, [1.0])
    assert int(target.count) == 7
    close(online.linear.weight, [[5.0, -2.0]])  # the online net is untouched
    update(Agent(), 0.5)
    close(target.linear.weight, [[3.5, -0.5]])  # (2 + 0.5 * 3, 1 + 0.5 * -3)
    update(Agent(), 1.0)
    close(target.linear.weight, [[5.0, -2.0]])


# ----- C51 -----

Z3 = t([-1.0, 0.0, 1.0])  # V_min = -1, V_max = 1, dz = 1


def test_c51_projection_by_hand_with_clipping_and_a_terminated_row():
    """Catches: the projection weight's sign, the ``/ dz``, the clip to [V_min, V_max] dropped,
    the bootstrap not scaling the atoms."""
    # Row 0: R 0.5, bootstrap 0.5: Tz = 0.5 + 0.5 * (-1, 0, 1) = (0, 0.5, 1).
    #   0.2 at 0 -> atom 0;  0.3 at 0.5 -> 0.15 to atom 0, 0.15 to atom 1;  0.5 at 1 -> atom 1.
    #   m = (0, 0.2 + 0.15, 0.15 + 0.5) = (0, 0.35, 0.65)
    # Row 1: R 1.5, bootstrap 0.9: Tz = (0.6, 1.5, 2.4) -> clipped to (0.6, 1, 1).
    #   0.6 at 0.6 -> 0.4 * 0.6 = 0.24 to atom 0, 0.6 * 0.6 = 0.36 to atom 1;  0.3 + 0.1 at 1.
    #   m = (0, 0.24, 0.36 + 0.4) = (0, 0.24, 0.76)
    # Row 2: R -1.2, bootstrap 0.5: Tz = (-1.7, -1.2, -0.7) -> clipped to (-1, -1, -0.7).
    #   0.5 + 0.25 at -1;  0.25 at -0.7 -> 0.7 * 0.25 = 0.175 to atom -1, 0.3 * 0.25 = 0.075 to 0.
    #   m = (0.75 + 0.175, 0.075, 0) = (0.925, 0.075, 0)
    # Row 3: terminated (bootstrap 0), R 0.25: all mass at 0.25: 0.75 to atom 0, 0.25 to atom 1.
    p_next = t([[0.2, 0.3, 0.5], [0.6, 0.3, 0.1], [0.5, 0.25, 0.25], [0.1, 0.1, 0.8]])
    m = project_distribution(p_next, t([0.5, 1.5, -1.2, 0.25]), t([0.5, 0.9, 0.5, 0.0]), Z3)
    close(m, [[0.0, 0.35, 0.65], [0.0, 0.24, 0.76], [0.925, 0.075, 0.0], [0.0, 0.75, 0.25]])


def test_c51_projection_on_wider_atoms_by_hand():
    """Catches: ``dz`` taken as 1 regardless of the atoms' spacing."""
    z = t([-2.0, 0.0, 2.0])  # dz = 2
    # R 1, bootstrap 0.5: Tz = (0, 1, 2). 0.5 at 0 -> atom 0;  0.3 at 1 -> half to 0, half to 2;
    # 0.2 at 2 -> atom 2.  m = (0, 0.5 + 0.15, 0.15 + 0.2)
    m = project_distribution(t([[0.5, 0.3, 0.2]]), t([1.0]), t([0.5]), z)
    close(m, [[0.0, 0.65, 0.35]])


def c51_rows():
    """Two transitions, two actions, atoms (-1, 0, 1).

    Row 0: the target net's distributions at s_n are a0 (0.2, 0.3, 0.5) (Q = 0.3) and
    a1 (0.5, 0.4, 0.1) (Q = -0.4): it picks a0. R 0.5, gamma^k 0.5.
    Row 1: terminated, R 0.25 (gamma^k 0.9 must not count).
    Online p(s, a) at the taken actions: row 0 (a = 1) (0.1, 0.4, 0.5); row 1 (a = 0) (0.5, 0.2, 0.3).
    """
    third = [1 / 3] * 3
    return dict(
        p=t([[third, [0.1, 0.4, 0.5]], [[0.5, 0.2, 0.3], third]]).requires_grad_(),
        action=torch.tensor([1, 0]),
        next_target_p=t([[[0.2, 0.3, 0.5], [0.5, 0.4, 0.1]], [[0.1, 0.1, 0.8], [0.6, 0.3, 0.1]]]),
        return_=t([0.5, 0.25]),
        done_n=b([False, True]),
        discount_n=t([0.5, 0.9]),
        z=Z3,
    )


def test_c51_cross_entropy_kl_and_q_by_hand():
    """Catches: the bootstrap mask (a terminated row bootstrapping), the cross-entropy's sign,
    ``is_weights`` ignored, the KL priority, Q = sum p z."""
    # m: row 0 (0, 0.35, 0.65) (projection test, row 0); row 1 all at 0.25: (0, 0.75, 0.25).
    ce0 = -(0.35 * math.log(0.4) + 0.65 * math.log(0.5))
    ce1 = -(0.75 * math.log(0.2) + 0.25 * math.log(0.3))
    loss, terms = categorical_dqn_loss(**c51_rows())
    assert float(loss.detach()) == approx((ce0 + ce1) / 2)
    kl0 = 0.35 * math.log(0.35 / 0.4) + 0.65 * math.log(0.65 / 0.5)
    kl1 = 0.75 * math.log(0.75 / 0.2) + 0.25 * math.log(0.25 / 0.3)
    close(terms["kl"], [kl0, kl1])
    close(terms["q"], [-0.1 + 0.5, -0.5 + 0.3])
    weighted, _ = categorical_dqn_loss(**c51_rows(), is_weights=t([2.0, 0.5]))
    assert float(weighted.detach()) == approx((2.0 * ce0 + 0.5 * ce1) / 2)


def test_c51_double_dqn_by_hand():
    """Catches: the online net's choice ignored."""
    # Online at s_n, row 0: a0 (0.6, 0.2, 0.2) (Q -0.4), a1 (0.1, 0.2, 0.7) (Q 0.6): picks a1, whose
    # target distribution (0.5, 0.4, 0.1) at Tz = (0, 0.5, 1) projects to (0, 0.5 + 0.2, 0.2 + 0.1).
    online = t([[[0.6, 0.2, 0.2], [0.1, 0.2, 0.7]], [[1 / 3] * 3, [1 / 3] * 3]])
    loss, terms = categorical_dqn_loss(**c51_rows(), next_online_p=online)
    ce0 = -(0.7 * math.log(0.4) + 0.3 * math.log(0.5))
    ce1 = -(0.75 * math.log(0.2) + 0.25 * math.log(0.3))
    assert float(loss.detach()) == approx((ce0 + ce1) / 2)


def test_c51_step_moves_the_predicted_distribution_towards_the_target():
    """Catches: the cross-entropy's sign (a step would move p away from m)."""
    logits = nn.Parameter(torch.zeros(1, 1, 3))
    opt = torch.optim.SGD([logits], lr=1.0)
    # Target m = (0, 0.75, 0.25) (terminated, R 0.25).
    args = dict(action=torch.tensor([0]), next_target_p=t([[[1 / 3] * 3]]), return_=t([0.25]), done_n=b([True]),
                discount_n=t([0.9]), z=Z3)
    before = categorical_dqn_loss(torch.softmax(logits, -1), **args)[1]["kl"]
    loss, _ = categorical_dqn_loss(torch.softmax(logits, -1), **args)
    loss.backward()
    opt.step()
    after = categorical_dqn_loss(torch.softmax(logits.detach(), -1), **args)[1]["kl"]
    assert float(after) < float(before)
    p = torch.softmax(logits.detach(), -1)[0, 0]
    assert p[1] > 1 / 3 and p[0] < 1 / 3


def c51_fixed_networks(double_dqn: bool = False):
    """A C51 whose online and target networks return fixed distributions (by input)."""
    module = uniform_c51(double_dqn=double_dqn)
    third = [1 / 3] * 3
    at_s = t([[third, [0.1, 0.4, 0.5]]])
    online_at_next = t([[[0.6, 0.2, 0.2], [0.1, 0.2, 0.7]]])  # online Q: (-0.4, 0.6): picks a1
    target_at_next = t([[[0.2, 0.3, 0.5], [0.5, 0.4, 0.1]]])  # target Q: (0.3, -0.4): picks a0
    module.agent.forward = lambda obs, *rest: at_s if float(obs[0, 0]) == 0.0 else online_at_next
    module.agent.target = lambda obs, *rest: target_at_next
    zeros = torch.zeros(1)
    batch = SamplesFromReplay(
        agent_inputs=AgentInputs(torch.zeros(1, 4), zeros.long(), zeros), action=torch.tensor([1]), return_=t([0.5]),
        done=b([False]), done_n=b([False]), truncated_n=b([False]), discount_n=t([0.5]),
        target_inputs=AgentInputs(torch.ones(1, 4), zeros.long(), zeros), idxs=torch.arange(1), is_weights=t([1.0]),
    )
    return module, batch


@pytest.mark.parametrize("double_dqn, m", [(False, (0.0, 0.35, 0.65)), (True, (0.0, 0.7, 0.3))])
def test_c51_module_takes_the_bootstrap_distribution_from_the_target_network(double_dqn, m):
    """Catches: ``CategoricalDQN.loss`` bootstrapping from the online network, or choosing with
    the target network under double DQN."""
    module, batch = c51_fixed_networks(double_dqn)
    assert isinstance(module, CategoricalDQN)
    # Online p(s, a=1) = (0.1, 0.4, 0.5); the projected target m as in the hand tests above.
    ce = -(m[1] * math.log(0.4) + m[2] * math.log(0.5))
    assert float(module.loss(batch)["loss"].detach()) == approx(ce)


# ----- R2D1: value rescaling -----


@pytest.mark.parametrize(
    "x, eps, hx",
    [
        (3.0, 1e-3, (2.0 - 1.0) + 1e-3 * 3.0),  # sqrt(4) - 1 + eps x = 1.003
        (-8.0, 1e-3, -(3.0 - 1.0) - 1e-3 * 8.0),  # -(sqrt(9) - 1) + eps x = -2.008
        (0.21, 0.1, (1.1 - 1.0) + 0.1 * 0.21),  # sqrt(1.21) - 1 + 0.021 = 0.121
        (-0.21, 0.1, -0.121),
        (24.0, 0.0, 4.0),  # sqrt(25) - 1
        (0.0, 0.5, 0.0),
    ],
)
def test_value_rescale_and_its_inverse_at_hand_computed_points(x, eps, hx):
    """Catches: the sign of ``eps x``, the ``+ 1`` inside the sqrt, any wrong term of the inverse."""
    assert float(value_rescale(t([x]), eps)) == pytest.approx(hx, rel=1e-6, abs=1e-7)
    assert float(inv_value_rescale(t([hx]), eps)) == pytest.approx(x, rel=1e-5, abs=1e-6)


# ----- R2D1: the sequence loss -----


def r2d1_rows(**overrides):
    """Two sequences (columns), batch_T = 3 training rows + n = 1, two actions, eps = 0.

    Column 0: no episode end; row 2 is a truncated step (n_steps 0: no stored next state).
      row 0: a 0, Q 0.5, R -1,  gamma 0.5, bootstrap row 1: Q_target (2, 1) -> 2 -> h^-1(2) = 8
      row 1: a 1, Q 1.0, R 6.5, gamma 0.5, bootstrap row 2: Q_target (1, 0) -> 1 -> h^-1(1) = 3
      row 2: a 0, Q 3.0, n_steps 0 (masked)
    Column 1: terminates at row 0; rows 1 and 2 belong to the next episode (masked).
      row 0: a 1, Q -0.5, R 3, done_n: no bootstrap (Q_target at row 1 would give 4 -> 24)
      row 1: a 0, Q 2.0, R 0, bootstrap row 2: Q_target 0 (masked)
    """
    q = t([
        [[0.5, 0.0], [0.0, -0.5]],
        [[0.0, 1.0], [2.0, 0.0]],
        [[3.0, 0.0], [0.0, 0.0]],
        [[0.0, 0.0], [0.0, 0.0]],
    ]).requires_grad_()
    target_q = t([
        [[0.0, 0.0], [0.0, 0.0]],
        [[2.0, 1.0], [4.0, 0.0]],
        [[1.0, 0.0], [0.0, 0.0]],
        [[0.0, 0.0], [0.0, 0.0]],
    ])
    rows = dict(
        q=q, target_q=target_q,
        action=torch.tensor([[0, 1], [1, 0], [0, 0]]),
        return_=t([[-1.0, 3.0], [6.5, 0.0], [0.0, 0.0], [0.0, 0.0]]),
        done=b([[False, True], [False, False], [False, False], [False, False]]),
        done_n=b([[False, True], [False, False], [False, False], [False, False]]),
        discount_n=t([[0.5, 0.5], [0.5, 0.5], [1.0, 0.5], [0.5, 0.5]]),
        n_steps=torch.tensor([[1, 1], [1, 1], [0, 1], [1, 1]]),
        batch_T=3, double_dqn=False, value_scale_eps=0.0, pri_eta=0.9,
    )
    rows.update(overrides)
    return rows


# h(x) = sign(x) (sqrt(|x| + 1) - 1) at eps = 0:
#   column 0, row 0: y = h(-1 + 0.5 * 8) = h(3) = 1;  delta = 1 - 0.5 = 0.5
#   column 0, row 1: y = h(6.5 + 0.5 * 3) = h(8) = 2;  delta = 2 - 1.0 = 1.0
#   column 1, row 0: y = h(3) = 1 (terminated);        delta = 1 - (-0.5) = 1.5
# Masked: column 0 row 2 (delta = h(0 + 1 * 3) - 3 = -2), column 1 rows 1 (delta -2) and 2.


def test_r2d1_loss_mask_and_priorities_by_hand():
    """Catches: the done mask, the valid mask (rows after a done, n_steps == 0 rows), ``h`` or
    ``h^-1`` dropped from the target, the eta mix of the priority swapped or unmasked."""
    loss, terms = r2d1_loss(**r2d1_rows())
    # Mean of 0.5 delta^2 over the 3 valid rows.
    assert float(loss.detach()) == approx((0.5 * 0.5**2 + 0.5 * 1.0**2 + 0.5 * 1.5**2) / 3)
    # Priorities: eta * max + (1 - eta) * mean of |delta| over each column's valid rows.
    close(terms["priority"], [0.9 * 1.0 + 0.1 * (0.5 + 1.0) / 2, 1.5])
    close(terms["td_abs"], [(0.5 + 1.0) / 2, 1.5])
    close(terms["q"], [(0.5 + 1.0) / 2, -0.5])
    close(terms["valid_fraction"], [2 / 3, 1 / 3])


def test_r2d1_huber_and_importance_weights_by_hand():
    """Catches: ``delta_clip`` ignored (loss or priority), ``is_weights`` ignored."""
    loss, terms = r2d1_loss(**r2d1_rows(delta_clip=1.0, is_weights=t([1.0, 2.0])))
    # Huber(1): 0.125, 0.5 for column 0; 1.5 - 0.5 = 1.0 for column 1, weighted by 2.
    assert float(loss.detach()) == approx((0.125 + 0.5 + 2.0 * 1.0) / 3)
    # Priorities from |delta| clipped at 1: column 0 (0.5, 1.0) -> 0.975; column 1: 1.
    close(terms["priority"], [0.975, 1.0])


def test_r2d1_double_dqn_by_hand():
    """Catches: the online network's choice ignored under double DQN."""
    loss, terms = r2d1_loss(**r2d1_rows(double_dqn=True))
    # Column 0 row 0: online Q at row 1 is (0, 1): picks a 1, Q_target = 1 -> h^-1(1) = 3:
    #   y = h(-1 + 0.5 * 3) = h(0.5) = sqrt(1.5) - 1.
    # Column 0 row 1: online Q at row 2 is (3, 0): picks a 0 as the target net does: y = 2.
    d00 = (math.sqrt(1.5) - 1.0) - 0.5
    assert float(loss.detach()) == approx((0.5 * d00**2 + 0.5 * 1.0**2 + 0.5 * 1.5**2) / 3)
    close(terms["td_abs"], [(abs(d00) + 1.0) / 2, 1.5])


def test_r2d1_loss_with_eps_matches_a_reference_written_here():
    """Catches: ``value_scale_eps`` not passed to ``h`` or ``h^-1`` inside the loss."""
    eps = 0.1

    def h(x: float) -> float:
        return math.copysign(math.sqrt(abs(x) + 1) - 1, x) + eps * x

    def h_inv(y: float) -> float:
        # Solve eps u^2 + u - (1 + eps + |y|) = 0 for u = sqrt(|x| + 1) > 0.
        c = 1 + eps + abs(y)
        u = (-1 + math.sqrt(1 + 4 * eps * c)) / (2 * eps)
        return math.copysign(u * u - 1, y)

    assert h_inv(h(3.0)) == pytest.approx(3.0)
    d = [h(-1 + 0.5 * h_inv(2.0)) - 0.5, h(6.5 + 0.5 * h_inv(1.0)) - 1.0, h(3.0) + 0.5]
    loss, terms = r2d1_loss(**r2d1_rows(value_scale_eps=eps))
    assert float(loss.detach()) == approx(sum(0.5 * x * x for x in d) / 3)
    close(terms["td_abs"], [(abs(d[0]) + abs(d[1])) / 2, abs(d[2])])


def test_r2d1_step_descends_towards_the_target():
    """Catches: a flipped TD error (the gradient would push Q away from y)."""
    rows = r2d1_rows()
    loss, _ = r2d1_loss(**rows)
    (grad,) = torch.autograd.grad(loss, rows["q"])
    # d/dQ of sum(0.5 delta^2) / 3 = -delta / 3 at the valid taken actions; 0 elsewhere.
    expected = torch.zeros(4, 2, 2)
    expected[0, 0, 0], expected[1, 0, 1], expected[0, 1, 1] = -0.5 / 3, -1.0 / 3, -1.5 / 3
    torch.testing.assert_close(grad, expected)


def test_sequence_priority_by_hand():
    """Catches: eta weighting the mean instead of the max, the mask dropped from the max or the
    mean, ``delta_clip`` ignored."""
    td_abs = t([[1.0, 4.0], [3.0, 9.0], [2.0, 1.0]])
    valid = t([[1.0, 1.0], [1.0, 0.0], [0.0, 1.0]])
    # Column 0: valid (1, 3): max 3, mean 2 -> 0.25 * 3 + 0.75 * 2 = 2.25.
    # Column 1: valid (4, 1) (the 9 is masked): max 4, mean 2.5 -> 0.25 * 4 + 0.75 * 2.5 = 2.875.
    close(sequence_priority(td_abs, valid, 0.25), [2.25, 2.875])
    # Clipped at 2: column 0 (1, 2) -> 0.5 + 1.125; column 1 (2, 1) -> 0.5 + 1.125.
    close(sequence_priority(td_abs, valid, 0.25, delta_clip=2.0), [1.625, 1.625])
    close(sequence_priority(td_abs, valid, 1.0), [3.0, 4.0])
    close(sequence_priority(td_abs, valid, 0.0), [2.0, 2.5])
