"""The private fast paths (lightning_rl.algos.private_fast_paths) give the same updates as their
public-API twins, bit for bit: the direct update path against Lightning's manual optimization, the
fused Adam call against ``Adam.step``, and whole runs with the fast paths off against on."""

from __future__ import annotations

import functools

import pytest
import pytorch_lightning as pl
import torch

from lightning_rl.agents import SacAgent, Td3Agent
from lightning_rl.algos import PPO, SAC, TD3, private_fast_paths
from lightning_rl.algos.optim import build_optimizer, clip_grad_norm_
from lightning_rl.algos.private_fast_paths import adam_step
from lightning_rl.samplers import SerialSampler
from tests.algos.test_on_policy import cartpole_ppo, make_trainer, params_vector


class CountBackward(pl.Callback):
    """A callback hooked into backward: its presence forces Lightning's path."""

    def __init__(self) -> None:
        self.calls = 0

    def on_after_backward(self, trainer, pl_module) -> None:
        self.calls += 1


def _ppo() -> PPO:
    return cartpole_ppo(total_env_steps=3 * 64, epochs=2, minibatches=2)


def _sac() -> SAC:
    # clip_grad_norm exercises per-optimizer clipping (policy and critics clipped, alpha not).
    return SAC(SacAgent(hidden_sizes=[16], q_hidden_sizes=[16]), SerialSampler("Pendulum-v1", batch_T=16, batch_B=2),
               batch_size=32, replay_ratio=64, min_steps_learn=64, total_env_steps=192, log_interval_steps=64,
               clip_grad_norm=1.0)


def _td3() -> TD3:
    return TD3(Td3Agent(hidden_sizes=[16], q_hidden_sizes=[16]), SerialSampler("Pendulum-v1", batch_T=16, batch_B=2),
               batch_size=32, replay_ratio=64, min_steps_learn=64, total_env_steps=192, log_interval_steps=64,
               clip_grad_norm=1.0)


@pytest.mark.parametrize("make", [_ppo, _sac, _td3], ids=["ppo", "sac", "td3"])
def test_direct_and_lightning_paths_give_identical_weights_and_step_counts(make):
    results, steps = {}, {}
    hooked = CountBackward()
    for name, direct, callbacks in (("direct", True, []), ("lightning", False, []), ("hooked", True, [hooked])):
        pl.seed_everything(0)
        module = make()
        module.direct_updates = direct
        trainer = make_trainer(callbacks=callbacks)
        trainer.fit(module)
        assert module._direct == (name == "direct")
        assert module.train_state.updates > 0
        results[name] = params_vector(module.agent)
        steps[name] = trainer.global_step
    assert hooked.calls > 0  # Lightning's path ran the callback's hook on every backward
    torch.testing.assert_close(results["direct"], results["lightning"], rtol=0, atol=0)
    torch.testing.assert_close(results["hooked"], results["lightning"], rtol=0, atol=0)
    # global_step counts optimizer steps (several per update for SAC and TD3) on both paths.
    assert steps["direct"] == steps["lightning"] == steps["hooked"] > 0


def _grads(seed: int, dtypes=(torch.float32,)) -> list[torch.nn.Parameter]:
    gen = torch.Generator().manual_seed(seed)
    params = []
    for i, shape in enumerate([(64, 4), (64,), (2, 64), (2,), (3, 3)]):
        p = torch.nn.Parameter(torch.zeros(shape, dtype=dtypes[i % len(dtypes)]))
        p.grad = (torch.randn(shape, generator=gen) * 3).to(p.dtype)
        params.append(p)
    params.append(torch.nn.Parameter(torch.zeros(5)))  # no grad: skipped
    return params


@pytest.mark.parametrize("max_norm", [0.5, 1e6], ids=["clipped", "unclipped"])
@pytest.mark.parametrize("dtypes", [(torch.float32,), (torch.float32, torch.float64)], ids=["one-dtype", "mixed"])
def test_fast_grad_clipping_matches_torch_bit_for_bit(max_norm, dtypes):
    ours, theirs = _grads(0, dtypes), _grads(0, dtypes)
    clip_grad_norm_(ours, max_norm)
    torch.nn.utils.clip_grad_norm_(theirs, max_norm)
    for a, b in zip(ours, theirs, strict=False):
        assert (a.grad is None and b.grad is None) or torch.equal(a.grad, b.grad)
    if max_norm < 1:
        total = torch.linalg.vector_norm(torch.cat([p.grad.double().flatten() for p in ours if p.grad is not None]))
        assert float(total) == pytest.approx(max_norm, rel=1e-5)
    clip_grad_norm_([torch.nn.Parameter(torch.zeros(2))], 1.0)  # no gradients at all: nothing to do


def test_ppo_loss_without_diagnostics_gives_the_same_gradients():
    pl.seed_everything(0)
    module = cartpole_ppo(total_env_steps=256)
    module.setup("fit")
    batch = module.make_dataset().collect()
    grads = {}
    for diagnostics in (True, False):
        module.agent.zero_grad(set_to_none=True)
        terms = module.loss(batch, 0.2, diagnostics)
        terms["loss"].backward()
        grads[diagnostics] = torch.cat([p.grad.flatten() for p in module.agent.parameters() if p.grad is not None])
        assert set(terms) == ({"loss", "pi_loss", "value_loss", "entropy", "clip_fraction", "approx_kl"}
                              if diagnostics else {"loss", "pi_loss", "value_loss"})
    assert torch.equal(grads[True], grads[False])


def test_default_optimizer_is_fused_adam_and_any_torch_optimizer_plugs_in():
    params = [torch.nn.Parameter(torch.zeros(3))]
    adam = build_optimizer(None, params, 1e-3, 1e-5)
    assert isinstance(adam, torch.optim.Adam) and adam.defaults["fused"] is True
    assert adam.defaults["eps"] == 1e-5 and adam.defaults["lr"] == 1e-3
    sgd = build_optimizer(functools.partial(torch.optim.SGD, momentum=0.5), params, 0.1)
    assert isinstance(sgd, torch.optim.SGD) and sgd.defaults["lr"] == 0.1 and sgd.defaults["momentum"] == 0.5
    with pytest.raises(ValueError, match="no parameters to optimize"):
        build_optimizer(None, [], 1e-3)
    # A name where a class belongs (the 0.1.0 form): an error that says what to write instead.
    with pytest.raises(ValueError, match=r"optimizer must be a torch optimizer class .* got 'rmsprop'"):
        build_optimizer("rmsprop", params, 1e-3)


@pytest.mark.parametrize(
    ("bad", "expected"),
    [(None, True), (float("nan"), False), (float("inf"), False), (float("-inf"), False)],
)
def test_all_finite_finds_one_bad_value_among_parameters(bad, expected):
    from lightning_rl.algos.optim import all_finite

    tensors = [torch.ones(3, 2), torch.full((4,), -2.0), torch.zeros(())]
    if bad is not None:
        tensors[1][2] = bad  # one element of the middle tensor
    assert all_finite(tensors) is expected
    assert all_finite([]) is True


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_all_finite_finds_one_bad_value_in_any_dtype_written_through_a_view(bad, dtype):
    from lightning_rl.algos.optim import all_finite

    weight = torch.nn.Parameter(torch.ones(4, 3, dtype=dtype))
    tensors = [weight, torch.full((3,), -2.0, dtype=dtype), torch.zeros((), dtype=torch.float16)]
    assert all_finite(tensors) is True
    with torch.no_grad():
        weight.t()[2, 1] = bad  # written through a transposed view: one element, in place
    assert all_finite(tensors) is False


def test_all_finite_counts_a_norm_beyond_the_dtype_as_non_finite():
    from lightning_rl.algos.optim import all_finite

    # Two float32 values of 3e38 sum past float32's largest value, 3.4e38; two of 1e38 do not
    # (their squares would: an L2 norm calls large finite weights non-finite).
    assert all_finite([torch.full((2,), 3e38)]) is False
    assert all_finite([torch.full((2,), 1e38)]) is True
    assert all_finite([torch.full((3,), 1e30), torch.ones(2)]) is True


def test_mean_metrics_averages_rows_per_name_as_floats():
    from lightning_rl.algos.optim import mean_metrics

    rows = [torch.tensor([1.0, 10.0]), torch.tensor([3.0, 20.0]), torch.tensor([5.0, 60.0])]
    # Means by hand: (1 + 3 + 5) / 3 = 3 and (10 + 20 + 60) / 3 = 30.
    assert mean_metrics(["loss", "kl"], rows) == {"train/loss": 3.0, "train/kl": 30.0}
    assert mean_metrics(["loss"], [], prefix="x/") == {}


def test_fast_grad_clipping_spreads_a_nan_norm_as_torch_does():
    ours, theirs = _grads(1), _grads(1)
    for params in (ours, theirs):
        params[2].grad[0, 0] = float("nan")
    clip_grad_norm_(ours, 1e6)  # unclipped by size, but the norm is NaN: every gradient becomes NaN
    torch.nn.utils.clip_grad_norm_(theirs, 1e6)
    for a, b in zip(ours[:-1], theirs[:-1], strict=True):
        assert torch.isnan(a.grad).all()
        torch.testing.assert_close(a.grad, b.grad, rtol=0, atol=0, equal_nan=True)


def _adam_pair(kind: str) -> tuple[torch.optim.Optimizer, torch.optim.Optimizer]:
    """The same optimizer twice over equal parameters; ``kind`` picks the settings."""
    pairs = []
    for _ in range(2):
        gen = torch.Generator().manual_seed(3)
        a = [torch.nn.Parameter(torch.randn(shape, generator=gen)) for shape in [(8, 4), (8,), (2, 8)]]
        b = [torch.nn.Parameter(torch.randn(shape, generator=gen)) for shape in [(5,), (1,)]]
        if kind == "two-groups":
            opt = torch.optim.Adam([{"params": a}, {"params": b, "lr": 0.05}], lr=1e-2, fused=True)
        elif kind == "adamw":
            opt = torch.optim.AdamW(a + b, lr=1e-2, weight_decay=0.1, fused=True)
        else:
            settings = {"plain": {}, "weight-decay": {"weight_decay": 0.1}, "amsgrad": {"amsgrad": True},
                        "maximize": {"maximize": True, "betas": (0.8, 0.9), "eps": 1e-5}}[kind]
            opt = torch.optim.Adam(a + b, lr=1e-2, fused=True, **settings)
        pairs.append(opt)
    return pairs[0], pairs[1]


def _set_grads(opt: torch.optim.Optimizer, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    for group in opt.param_groups:
        for p in group["params"]:
            p.grad = torch.randn(p.shape, generator=gen)


def _opt_tensors(opt: torch.optim.Optimizer) -> list[torch.Tensor]:
    out = []
    for group in opt.param_groups:
        for p in group["params"]:
            out.append(p.detach())
            out.extend(v for _, v in sorted(opt.state[p].items()))
    return out


@pytest.mark.parametrize("kind", ["plain", "weight-decay", "amsgrad", "maximize", "two-groups", "adamw"])
def test_adam_step_matches_torch_adam_step_bit_for_bit(kind):
    ours, theirs = _adam_pair(kind)
    _set_grads(ours, 0)
    _set_grads(theirs, 0)
    assert not adam_step(ours)  # the first step creates the state: the usual path does it
    ours.step()
    theirs.step()
    for i in range(1, 6):
        if i == 3:  # a schedule changing the learning rate between steps
            for opt in (ours, theirs):
                opt.param_groups[0]["lr"] = 3e-3
        _set_grads(ours, i)
        _set_grads(theirs, i)
        assert adam_step(ours)
        theirs.step()
    mine, reference = _opt_tensors(ours), _opt_tensors(theirs)
    assert len(mine) == len(reference) > 10
    for a, b in zip(mine, reference, strict=True):
        assert torch.equal(a, b)
    assert float(ours.state[ours.param_groups[0]["params"][0]]["step"]) == 6.0


def test_adam_step_leaves_everything_alone_where_it_would_differ():
    ours, _ = _adam_pair("two-groups")
    _set_grads(ours, 0)
    ours.step()
    before = [t.clone() for t in _opt_tensors(ours)]
    _set_grads(ours, 1)
    ours.param_groups[1]["params"][1].grad = None  # one parameter without a gradient (torch skips it)
    assert not adam_step(ours)
    assert all(torch.equal(a, b) for a, b in zip(_opt_tensors(ours), before, strict=True))  # no step counted
    _set_grads(ours, 1)
    calls = []
    handle = ours.register_step_pre_hook(lambda opt, args, kwargs: calls.append(1))
    assert not adam_step(ours)  # a hook on the step: the usual path runs it
    handle.remove()
    ours.param_groups[0]["lr"] = torch.tensor(1e-3)
    assert not adam_step(ours)  # a tensor learning rate
    ours.param_groups[0]["lr"] = 1e-3
    assert adam_step(ours)
    params = [torch.nn.Parameter(torch.zeros(3))]
    for opt in (torch.optim.Adam(params, fused=False), torch.optim.SGD(params, lr=0.1)):
        params[0].grad = torch.ones(3)
        opt.step()
        assert not adam_step(opt)


def test_adam_step_keeps_the_lr_schedulers_note_that_the_optimizer_stepped():
    ours, theirs = _adam_pair("plain")
    schedulers = [torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5) for opt in (ours, theirs)]
    for opt in (ours, theirs):
        _set_grads(opt, 0)
        opt.step()
    for i in range(1, 4):
        _set_grads(ours, i)
        _set_grads(theirs, i)
        ours._opt_called = False
        assert adam_step(ours)
        assert ours._opt_called  # what the scheduler's wrapper of step records
        theirs.step()
        for s in schedulers:
            s.step()
    assert ours.param_groups[0]["lr"] == theirs.param_groups[0]["lr"] == pytest.approx(1e-2 / 8)
    assert all(torch.equal(a, b) for a, b in zip(_opt_tensors(ours), _opt_tensors(theirs), strict=True))


@pytest.mark.parametrize("make", [_ppo, _sac], ids=["ppo", "sac"])
def test_runs_with_the_private_fast_paths_off_give_identical_weights(make, monkeypatch):
    results = {}
    for enabled in (True, False):
        monkeypatch.setattr(private_fast_paths, "enabled", enabled)
        pl.seed_everything(0)
        module = make()
        trainer = make_trainer()
        trainer.fit(module)
        results[enabled] = (params_vector(module.agent), module.train_state.updates, trainer.global_step)
    torch.testing.assert_close(results[True][0], results[False][0], rtol=0, atol=0)
    assert results[True][1:] == results[False][1:]


def test_adam_step_does_nothing_with_the_private_fast_paths_off(monkeypatch):
    ours, _ = _adam_pair("plain")
    _set_grads(ours, 0)
    ours.step()  # creates the state
    _set_grads(ours, 1)
    before = [t.clone() for t in _opt_tensors(ours)]
    monkeypatch.setattr(private_fast_paths, "enabled", False)
    assert not adam_step(ours)
    for a, b in zip(before, _opt_tensors(ours), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
