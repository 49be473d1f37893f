from __future__ import annotations

import math
from collections import OrderedDict

import pytest
import torch
from torch import nn

from lightning_rl.models import (
    Conv2dHeadModel,
    Conv2dModel,
    DistributionalDuelingHeadModel,
    DistributionalHeadModel,
    DuelingHeadModel,
    MlpModel,
    ScaleGrad,
    conv2d_output_shape,
    init_orthogonal_,
    make_q_head,
    scale_grad,
    strip_ddp_state_dict,
    update_state_dict,
)


def test_mlp_layers_and_output_size():
    mlp = MlpModel(4, [8, 6], 3, nonlinearity=nn.Tanh)
    linears = [m for m in mlp.modules() if isinstance(m, nn.Linear)]
    assert [(m.in_features, m.out_features) for m in linears] == [(4, 8), (8, 6), (6, 3)]
    assert sum(isinstance(m, nn.Tanh) for m in mlp.modules()) == 2
    assert mlp.output_size == 3
    assert mlp(torch.zeros(5, 4)).shape == (5, 3)


def test_mlp_without_output_layer_ends_on_nonlinearity():
    mlp = MlpModel(4, 7)
    assert mlp.output_size == 7
    assert (mlp(torch.randn(10, 4)) >= 0).all()  # ReLU last


def test_mlp_linear_and_identity():
    linear = MlpModel(3, [], 2)
    assert len([m for m in linear.modules() if isinstance(m, nn.Linear)]) == 1
    identity = MlpModel(3, None)
    x = torch.randn(2, 3)
    assert identity.output_size == 3
    assert torch.equal(identity(x), x)


def test_mlp_bad_sizes():
    with pytest.raises(ValueError, match="hidden_sizes"):
        MlpModel(3, [4, 0])
    with pytest.raises(ValueError, match="input_size"):
        MlpModel(0, [4])


@pytest.mark.parametrize(
    "h, w, kernel, stride, padding, dilation",
    [
        (84, 84, 8, 4, 0, 1),
        (20, 20, 4, 2, 1, 1),
        (10, 10, 3, 1, 1, 1),
        (17, 23, 5, 3, 2, 2),
        (9, 7, (3, 2), (2, 1), (1, 0), 1),
    ],
)
def test_conv2d_output_shape_matches_conv(h, w, kernel, stride, padding, dilation):
    conv = nn.Conv2d(1, 1, kernel, stride=stride, padding=padding, dilation=dilation)
    out = conv(torch.zeros(1, 1, h, w))
    assert conv2d_output_shape(h, w, kernel, stride, padding, dilation) == tuple(out.shape[2:])


def test_conv2d_output_shape_nature_by_hand():
    # 84 -> (84 - 8) / 4 + 1 = 20 -> (20 - 4) / 2 + 1 = 9 -> (9 - 3) + 1 = 7: the Nature DQN's 7x7.
    h = w = 84
    for k, s in ((8, 4), (4, 2), (3, 1)):
        h, w = conv2d_output_shape(h, w, k, s)
    assert (h, w) == (7, 7)


@pytest.mark.parametrize("use_maxpool", [False, True])
def test_conv2d_model_out_shape(use_maxpool):
    conv = Conv2dModel(4, [32, 64, 64], [8, 4, 3], [4, 2, 1], [0, 1, 1], use_maxpool=use_maxpool)
    out = conv(torch.zeros(2, 4, 84, 84))
    assert tuple(out.shape[1:]) == conv.conv_out_shape(84, 84)
    assert conv.conv_out_size(84, 84) == math.prod(out.shape[1:])
    strides = [m.stride for m in conv.modules() if isinstance(m, nn.Conv2d)]
    assert strides == ([(1, 1)] * 3 if use_maxpool else [(4, 4), (2, 2), (1, 1)])
    assert sum(isinstance(m, nn.MaxPool2d) for m in conv.modules()) == (2 if use_maxpool else 0)


def test_conv2d_model_mismatched_lengths():
    with pytest.raises(ValueError, match="equal lengths"):
        Conv2dModel(3, [16, 32], [8], [4, 2])


def test_conv2d_head_model():
    model = Conv2dHeadModel((3, 20, 20), [8], [4], [2], hidden_sizes=[16], output_size=5)
    assert model.output_size == 5
    assert model(torch.zeros(7, 3, 20, 20)).shape == (7, 5)
    assert model.head.model[0].in_features == 8 * 9 * 9
    with pytest.raises(ValueError, match="image_shape"):
        Conv2dHeadModel((20, 20), [8], [4], [2], hidden_sizes=None)


def test_scale_grad_scales_gradient_not_value():
    x = torch.tensor([1.0, -2.0, 3.0], requires_grad=True)
    y = ScaleGrad.apply(x, 0.25)
    assert torch.equal(y, x.detach())
    (y * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert torch.equal(x.grad, torch.tensor([0.25, 0.5, 0.75]))


def test_scale_grad_one_is_identity():
    x = torch.ones(2)
    assert scale_grad(x, 1.0) is x


def test_dueling_head_math():
    head = DuelingHeadModel(3, [4], 2)
    x = torch.randn(5, 3)
    value = head.value(x)  # [5, 1]
    advantage = head.advantage_out(head.advantage_hidden(x)) + head.advantage_bias  # [5, 2]
    expected = value + advantage - advantage.mean(dim=1, keepdim=True)
    q = head(x)
    assert q.shape == (5, 2)
    torch.testing.assert_close(q, expected)
    torch.testing.assert_close(head.advantage(x), advantage)
    # Q - V averages to zero over actions.
    torch.testing.assert_close((q - value).mean(dim=1), torch.zeros(5), atol=1e-6, rtol=0)


def test_dueling_head_by_hand():
    head = DuelingHeadModel(1, None, 3, grad_scale=1.0)
    with torch.no_grad():
        head.advantage_out.weight.copy_(torch.tensor([[1.0], [2.0], [6.0]]))
        head.advantage_bias.fill_(10.0)
        head.value.model[0].weight.fill_(0.5)
        head.value.model[0].bias.fill_(1.0)
    # x = 2: A = (12, 14, 22), mean 16; V = 2; Q = V + A - mean A = (-2, 0, 8).
    assert torch.equal(head(torch.tensor([[2.0]])), torch.tensor([[-2.0, 0.0, 8.0]]))


def test_dueling_head_gradient_scale_reaches_input():
    torch.manual_seed(0)
    head = DuelingHeadModel(3, [4], 2, grad_scale=0.5)
    plain = DuelingHeadModel(3, [4], 2, grad_scale=1.0)
    plain.load_state_dict(head.state_dict())
    grads = []
    for model in (head, plain):
        x = torch.randn(5, 3, generator=torch.Generator().manual_seed(1), requires_grad=True)
        model(x).sum().backward()
        grads.append(x.grad)
    torch.testing.assert_close(grads[0], 0.5 * grads[1])


def test_distributional_head_shape():
    head = DistributionalHeadModel(6, [8], 3, 11)
    assert head(torch.randn(4, 6)).shape == (4, 3, 11)


def test_distributional_dueling_head_math():
    head = DistributionalDuelingHeadModel(6, [8], 3, 5)
    x = torch.randn(4, 6)
    value = head.value(x).view(4, 1, 5)
    advantage = head.advantage_out(head.advantage_hidden(x)).view(4, 3, 5) + head.advantage_bias
    expected = value + advantage - advantage.mean(dim=1, keepdim=True)
    logits = head(x)
    assert logits.shape == (4, 3, 5)
    torch.testing.assert_close(logits, expected)
    torch.testing.assert_close(head.advantage(x), advantage)
    # Softmax over atoms of the logits is a distribution per action.
    torch.testing.assert_close(torch.softmax(logits, -1).sum(-1), torch.ones(4, 3))


@pytest.mark.parametrize(
    "dueling, n_atoms, cls, shape",
    [
        (False, None, MlpModel, (2, 4)),
        (True, None, DuelingHeadModel, (2, 4)),
        (False, 7, DistributionalHeadModel, (2, 4, 7)),
        (True, 7, DistributionalDuelingHeadModel, (2, 4, 7)),
    ],
)
def test_make_q_head(dueling, n_atoms, cls, shape):
    head = make_q_head(5, [6], 4, dueling, n_atoms)
    assert type(head) is cls
    assert head(torch.zeros(2, 5)).shape == shape


def test_head_bad_sizes():
    with pytest.raises(ValueError, match="n_atoms"):
        DistributionalDuelingHeadModel(3, [4], 2, 0)
    with pytest.raises(ValueError, match="output_size"):
        DuelingHeadModel(3, [4], 0)


def _pair():
    torch.manual_seed(0)
    return nn.Linear(3, 2), nn.Linear(3, 2)


def test_update_state_dict_soft_by_hand():
    target = nn.Linear(2, 1)
    source = nn.Linear(2, 1)
    with torch.no_grad():
        target.weight.copy_(torch.tensor([[1.0, 2.0]]))
        target.bias.fill_(4.0)
        source.weight.copy_(torch.tensor([[3.0, -2.0]]))
        source.bias.fill_(0.0)
    weight = target.weight
    update_state_dict(target, source.state_dict(), tau=0.5)
    # 0.5 * new + 0.5 * old.
    assert torch.equal(target.weight.detach(), torch.tensor([[2.0, 0.0]]))
    assert torch.equal(target.bias.detach(), torch.tensor([2.0]))
    assert target.weight is weight  # in place
    update_state_dict(target, source.state_dict(), tau=0.25)
    # 0.25 * (3, -2) + 0.75 * (2, 0) = (2.25, -0.5); 0.25 * 0 + 0.75 * 2 = 1.5.
    torch.testing.assert_close(target.weight.detach(), torch.tensor([[2.25, -0.5]]))
    torch.testing.assert_close(target.bias.detach(), torch.tensor([1.5]))


def test_update_state_dict_hard_copy_and_zero():
    target, source = _pair()
    before = {k: v.clone() for k, v in target.state_dict().items()}
    update_state_dict(target, source.state_dict(), tau=0.0)
    for k, v in target.state_dict().items():
        assert torch.equal(v, before[k])
    update_state_dict(target, source.state_dict())
    for k, v in target.state_dict().items():
        assert torch.equal(v, source.state_dict()[k])


def test_update_state_dict_strips_ddp_and_compile_prefixes():
    target, source = _pair()
    expected = {k: 0.5 * source.state_dict()[k] + 0.5 * v for k, v in target.state_dict().items()}
    ddp = OrderedDict(("module._orig_mod." + k, v) for k, v in source.state_dict().items())
    update_state_dict(target, ddp, tau=0.5)
    for k, v in target.state_dict().items():
        torch.testing.assert_close(v, expected[k])
    prefixed = OrderedDict(("module." + k, v) for k, v in source.state_dict().items())
    update_state_dict(target, prefixed, tau=1.0)
    for k, v in target.state_dict().items():
        assert torch.equal(v, source.state_dict()[k])


def test_update_state_dict_copies_integer_buffers():
    target, source = nn.BatchNorm1d(2), nn.BatchNorm1d(2)
    source.train()
    source(torch.randn(8, 2))
    expected_mean = 0.5 * source.running_mean + 0.5 * target.running_mean
    update_state_dict(target, source.state_dict(), tau=0.5)
    assert target.num_batches_tracked.item() == 1
    torch.testing.assert_close(target.running_mean, expected_mean)


def test_strip_ddp_state_dict_keeps_partial_module_names():
    sd = {"module.a": 1, "b._orig_mod.c": 2}
    assert strip_ddp_state_dict(sd) == {"module.a": 1, "b.c": 2}
    assert strip_ddp_state_dict({"module.a": 1, "module.b": 2}) == {"a": 1, "b": 2}


def test_update_state_dict_bad_input():
    target, source = _pair()
    with pytest.raises(ValueError, match="tau"):
        update_state_dict(target, source.state_dict(), tau=1.5)
    with pytest.raises(ValueError, match="missing"):
        update_state_dict(target, {"weight": source.weight.detach()})
    with pytest.raises(ValueError, match="shape"):
        update_state_dict(target, nn.Linear(4, 2).state_dict())


def test_init_orthogonal_gains():
    mlp = MlpModel(8, [16, 16], 4)
    init_orthogonal_(mlp, math.sqrt(2), 0.01)
    linears = [m for m in mlp.modules() if isinstance(m, nn.Linear)]
    # Rows of a [4, 16] orthogonal matrix are orthonormal, scaled by the gain.
    out = linears[-1].weight.detach()
    torch.testing.assert_close(out @ out.T, 0.01**2 * torch.eye(4))
    hidden = linears[1].weight.detach()
    torch.testing.assert_close(hidden @ hidden.T, 2.0 * torch.eye(16), atol=1e-5, rtol=1e-5)
    assert all(torch.count_nonzero(m.bias) == 0 for m in linears)
    lstm = init_orthogonal_(nn.LSTM(3, 4))
    assert torch.count_nonzero(lstm.bias_ih_l0) == 0
