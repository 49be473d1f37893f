"""Shared checks for the model tests: the ``[]`` / ``[B]`` / ``[T, B]`` layout contract."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch

from lightning_rl.models import RnnState

T, B = 3, 2


def _split(out: Any, recurrent: bool) -> tuple[tuple[torch.Tensor, ...], RnnState | None]:
    outs = out if isinstance(out, tuple) else (out,)
    if recurrent:
        return tuple(outs[:-1]), outs[-1]
    return tuple(outs), None


def _close(a: torch.Tensor, b: torch.Tensor) -> None:
    torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


@pytest.fixture
def check_leading_dims() -> Callable[..., None]:
    """Return ``check(model, args, out_shapes, recurrent=False)``.

    ``args`` are the positional inputs with leading ``[T, B]`` dims (``T = 3``, ``B = 2``);
    ``out_shapes`` the trailing shape of each output. The model is run on ``args``, on
    ``args[0]`` (``[B]``) and on ``args[0, 0]`` (``[]``); every output must carry the same
    leading dims, and the ``[B]`` and ``[]`` results must equal the first entries of the
    ``[T, B]`` result (for recurrent models: the first step from a zero state).
    """

    def check(
        model: torch.nn.Module,
        args: Sequence[torch.Tensor],
        out_shapes: Sequence[tuple[int, ...]],
        recurrent: bool = False,
    ) -> None:
        assert args[0].shape[:2] == (T, B)
        model.eval()
        with torch.no_grad():
            full, full_state = _split(model(*args), recurrent)
            batch, batch_state = _split(model(*(a[0] for a in args)), recurrent)
            single, single_state = _split(model(*(a[0, 0] for a in args)), recurrent)
        assert len(full) == len(batch) == len(single) == len(out_shapes)
        for f, b, s, shape in zip(full, batch, single, out_shapes, strict=False):
            assert f.shape == (T, B) + tuple(shape)
            assert b.shape == (B,) + tuple(shape)
            assert s.shape == tuple(shape)
            _close(b, f[0])
            _close(s, f[0, 0])
        if recurrent:
            n, _, h = full_state.h.shape
            for state, size in ((full_state, B), (batch_state, B), (single_state, 1)):
                assert state.h.shape == state.c.shape == (n, size, h)
            with torch.no_grad():
                _, first_state = _split(model(*(a[:1] for a in args)), recurrent)
            _close(batch_state.h, first_state.h)
            _close(single_state.c, first_state.c[:, :1])

    return check


@pytest.fixture
def check_stepping() -> Callable[..., None]:
    """Return ``check(model, args)`` for recurrent models: running ``T`` steps at once from a
    nonzero state equals stepping one at a time, feeding back each returned state."""

    def check(model: torch.nn.Module, args: Sequence[torch.Tensor]) -> None:
        model.eval()
        lstm = model.lstm
        gen = torch.Generator().manual_seed(0)
        shape = (lstm.num_layers, args[0].shape[1], lstm.lstm_size)
        state = RnnState(torch.randn(shape, generator=gen), torch.randn(shape, generator=gen))
        with torch.no_grad():
            full, full_state = _split(model(*args, state), True)
            step_state = state
            for t in range(args[0].shape[0]):
                outs, step_state = _split(model(*(a[t] for a in args), step_state), True)
                for f, o in zip(full, outs, strict=False):
                    _close(o, f[t])
        _close(step_state.h, full_state.h)
        _close(step_state.c, full_state.c)

    return check
