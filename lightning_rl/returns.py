"""Discounted returns, n-step returns and GAE over time-major ``[T, ...]`` samples (rlpyt 15.6), and
the masks of valid steps the losses average over (:func:`valid_from_done`, :func:`valid_mean`).

Every function takes ``[T]``, ``[T, B]`` or ``[T, B, ...]`` inputs, numpy arrays or torch
tensors, and returns the kind ``reward`` is (other inputs are converted to it). Work is
vectorized over the trailing dims; only time is looped over. ``done`` may be bool or float.
Outputs have ``reward``'s dtype (float32 for integer rewards); ``*_dest`` arguments are
preallocated outputs written in place and returned.

Terminated versus truncated (gymnasium's words): ``done = terminated | truncated`` cuts the
return at every episode end. Where an episode was *truncated* by a time limit (``truncated``),
the state was not terminal and the target should bootstrap from the value of the final
observation ``s'`` reached by the truncated step, ``V(s')``. The ``*_tl`` variants do so in one
of two forms:

* **Exact**, when ``truncated_value`` ``[T, ...]`` is given: ``truncated_value[t]`` is ``V(s')`` for
  the step ``t`` that timed out (ignored elsewhere). The timeout step bootstraps from it, and
  every step is a valid training target.
* **Approximate** (rlpyt's ``_tl``), without it: a sample buffer holds only ``value[t] = V(s_t)``,
  the value of the observation the timeout step *acted on*. The timeout step's own target is
  then unknown, so it is replaced by ``value[t]`` (return) and ``0`` (advantage), and earlier
  steps of that episode bootstrap through ``V(s_t)``: ``G_{t-1} = r_{t-1} + discount * V(s_t)``,
  exact for them. The algorithm must mask the timeout steps out of its loss
  (``valid = 1 - truncated``); they carry no gradient signal by construction.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

__all__ = [
    "discount_return",
    "discount_return_n_step",
    "discount_return_tl",
    "generalized_advantage_estimation",
    "generalized_advantage_estimation_tl",
    "valid_from_done",
    "valid_mean",
]

Array = Any  # np.ndarray | torch.Tensor


def discount_return(
    reward: Array, done: Array, bootstrap_value: Array, discount: float, return_dest: Array | None = None
) -> Array:
    """Discounted sum of future rewards within the batch, reset at ``done`` and bootstrapped at the end.

    ``G_t = r_t + discount * (1 - done_t) * G_{t+1}``, with ``G_T = bootstrap_value``.

    Args:
        reward: Rewards ``[T, ...]``.
        done: Episode ends ``[T, ...]`` (bool or float).
        bootstrap_value: Value of the observation after the last step, ``[...]``.
        discount: Discount factor in ``[0, 1]``.
        return_dest: Optional output ``[T, ...]``, written in place.

    Returns:
        Returns ``[T, ...]`` (``return_dest`` if given).

    Raises:
        ValueError: On a discount outside ``[0, 1]`` or mismatched shapes.
    """
    reward, done, bootstrap_value = _prepare(reward, discount, done=done, bootstrap_value=bootstrap_value)
    return _discount_core(reward, done, bootstrap_value, discount, None, None, None, return_dest)


def discount_return_tl(
    reward: Array,
    done: Array,
    bootstrap_value: Array,
    discount: float,
    truncated: Array,
    value: Array | None = None,
    return_dest: Array | None = None,
    truncated_value: Array | None = None,
) -> Array:
    """:func:`discount_return` that bootstraps through time-limit truncations.

    Exact form (``truncated_value`` given):
    ``G_t = r_t + discount * ((1 - d_t) * G_{t+1} + truncated_t * truncated_value_t)``, where
    ``d_t = done_t | truncated_t``.
    Approximate form (``value`` given, see the module docstring): as :func:`discount_return`,
    except ``G_t = value_t`` wherever ``truncated_t``; mask those steps out of the loss.

    Args:
        reward: Rewards ``[T, ...]``.
        done: Episode ends ``[T, ...]``, True at timeouts too.
        bootstrap_value: Value of the observation after the last step, ``[...]``.
        discount: Discount factor in ``[0, 1]``.
        truncated: True where the episode was truncated by a time limit, ``[T, ...]``.
        value: ``V(s_t)`` of each step's observation ``[T, ...]``; used by the approximate form.
        return_dest: Optional output ``[T, ...]``, written in place.
        truncated_value: ``V(s')`` of the truncated final observation at timeout steps ``[T, ...]``;
            selects the exact form.

    Returns:
        Returns ``[T, ...]`` (``return_dest`` if given).

    Raises:
        ValueError: If neither ``value`` nor ``truncated_value`` is given, on a bad discount, or on
            mismatched shapes.
    """
    if value is None and truncated_value is None:
        raise ValueError("discount_return_tl: pass value (approximate form) or timeout_value (exact form)")
    reward, done, bootstrap_value, truncated, value, truncated_value = _prepare(
        reward,
        discount,
        done=done,
        bootstrap_value=bootstrap_value,
        truncated=truncated,
        value=value,
        truncated_value=truncated_value,
    )
    return _discount_core(reward, done, bootstrap_value, discount, truncated, value, truncated_value, return_dest)


def generalized_advantage_estimation(
    reward: Array,
    value: Array,
    done: Array,
    bootstrap_value: Array,
    discount: float,
    gae_lambda: float,
    advantage_dest: Array | None = None,
    return_dest: Array | None = None,
) -> tuple[Array, Array]:
    """Generalized advantage estimation (Schulman et al. 2016, https://arxiv.org/abs/1506.02438).

    ``delta_t = r_t + discount * (1 - done_t) * V_{t+1} - V_t`` with ``V_T = bootstrap_value``;
    ``A_t = delta_t + discount * gae_lambda * (1 - done_t) * A_{t+1}``; ``R_t = A_t + V_t``
    (the lambda-return, the value target).

    Args:
        reward: Rewards ``[T, ...]``.
        value: ``V(s_t)`` of each step's observation ``[T, ...]``.
        done: Episode ends ``[T, ...]`` (bool or float).
        bootstrap_value: Value of the observation after the last step, ``[...]``.
        discount: Discount factor in ``[0, 1]``.
        gae_lambda: GAE lambda in ``[0, 1]`` (0: one-step TD error, 1: Monte-Carlo advantage).
        advantage_dest: Optional output ``[T, ...]`` for advantages, written in place.
        return_dest: Optional output ``[T, ...]`` for returns, written in place.

    Returns:
        ``(advantage, return_)``, each ``[T, ...]``.

    Raises:
        ValueError: On ``discount``/``gae_lambda`` outside ``[0, 1]`` or mismatched shapes.
    """
    reward, done, bootstrap_value, value = _prepare(
        reward, discount, gae_lambda, done=done, bootstrap_value=bootstrap_value, value=value
    )
    return _gae_core(
        reward, value, done, bootstrap_value, discount, gae_lambda, None, None, advantage_dest, return_dest
    )


def generalized_advantage_estimation_tl(
    reward: Array,
    value: Array,
    done: Array,
    bootstrap_value: Array,
    discount: float,
    gae_lambda: float,
    truncated: Array,
    advantage_dest: Array | None = None,
    return_dest: Array | None = None,
    truncated_value: Array | None = None,
) -> tuple[Array, Array]:
    """:func:`generalized_advantage_estimation` that bootstraps through time-limit truncations.

    With ``d_t = done_t | truncated_t``:

    * Exact form (``truncated_value`` given):
      ``delta_t = r_t + discount * ((1 - d_t) * V_{t+1} + truncated_t * truncated_value_t) - V_t``,
      ``A_t = delta_t + discount * gae_lambda * (1 - d_t) * A_{t+1}``; all steps valid.
    * Approximate form: as :func:`generalized_advantage_estimation` but ``A_t = 0`` (so
      ``R_t = V_t``) wherever ``truncated_t``. The step before a timeout then gets
      ``A_{t-1} = r_{t-1} + discount * V_t - V_{t-1}``: its lambda-return is cut short at
      ``V(s_t)`` instead of at 0. Mask timeout steps out of the loss.

    Args:
        reward: Rewards ``[T, ...]``.
        value: ``V(s_t)`` of each step's observation ``[T, ...]``.
        done: Episode ends ``[T, ...]``, True at timeouts too.
        bootstrap_value: Value of the observation after the last step, ``[...]``.
        discount: Discount factor in ``[0, 1]``.
        gae_lambda: GAE lambda in ``[0, 1]``.
        truncated: True where the episode was truncated by a time limit, ``[T, ...]``.
        advantage_dest: Optional output ``[T, ...]`` for advantages, written in place.
        return_dest: Optional output ``[T, ...]`` for returns, written in place.
        truncated_value: ``V(s')`` of the truncated final observation at timeout steps ``[T, ...]``;
            selects the exact form.

    Returns:
        ``(advantage, return_)``, each ``[T, ...]``.

    Raises:
        ValueError: On ``discount``/``gae_lambda`` outside ``[0, 1]`` or mismatched shapes.
    """
    reward, done, bootstrap_value, value, truncated, truncated_value = _prepare(
        reward,
        discount,
        gae_lambda,
        done=done,
        bootstrap_value=bootstrap_value,
        value=value,
        truncated=truncated,
        truncated_value=truncated_value,
    )
    return _gae_core(
        reward, value, done, bootstrap_value, discount, gae_lambda, truncated, truncated_value, advantage_dest,
        return_dest,
    )


def discount_return_n_step(
    reward: Array,
    done: Array,
    n_step: int,
    discount: float,
    return_dest: Array | None = None,
    done_n_dest: Array | None = None,
    do_truncated: bool = False,
) -> tuple[Array, Array]:
    """N-step discounted reward sums and n-step done flags (the bootstrap is left to the algorithm).

    ``return_[t] = sum_{k<n} discount^k * r_{t+k} * prod_{j<k} (1 - done_{t+j})`` and
    ``done_n[t] = any(done_t, ..., done_{t+n-1})``; the algorithm's target is
    ``return_[t] + discount^n * (1 - done_n[t]) * Q(s_{t+n})``.

    Args:
        reward: Rewards ``[T, ...]``.
        done: Episode ends ``[T, ...]`` (bool or float).
        n_step: Number of steps ``n >= 1``.
        discount: Discount factor in ``[0, 1]``.
        return_dest: Optional output for returns, written in place.
        done_n_dest: Optional output for n-step dones, written in place.
        do_truncated: If False, only the ``T - n + 1`` steps with ``n`` rewards ahead in the
            batch get outputs; if True, all ``T``, the last ones summing the fewer rewards left.

    Returns:
        ``(return_, done_n)``, each ``[T - n + 1, ...]`` (or ``[T, ...]`` with ``do_truncated``);
        ``done_n`` has ``done``'s dtype.

    Raises:
        ValueError: On ``n_step < 1``, ``n_step > T`` without ``do_truncated``, a bad discount or
            mismatched shapes.
    """
    if int(n_step) != n_step or n_step < 1:
        raise ValueError(f"discount_return_n_step: n_step must be a positive integer, got {n_step!r}")
    n_step = int(n_step)
    # done_n keeps done's dtype, in reward's kind (numpy or torch).
    done_dtype: torch.dtype | np.dtype
    if _is_torch(reward):
        done_dtype = torch.as_tensor(done).dtype
    else:
        done_dtype = (done.detach().cpu().numpy() if _is_torch(done) else np.asarray(done)).dtype
    reward, done_f = _prepare(reward, discount, done=done)
    T = reward.shape[0]
    length = T if do_truncated else T - n_step + 1
    if length < 1:
        raise ValueError(
            f"discount_return_n_step: n_step={n_step} exceeds T={T}; use do_truncated=True or a longer batch"
        )
    out_shape = (length,) + tuple(reward.shape[1:])
    return_ = _output(return_dest, out_shape, reward, "return_dest")
    return_[:] = reward[:length]
    done_n = _copy(done_f[:length])
    for k in range(1, n_step):
        m = min(length, T - k)  # Entries whose step t + k still lies in the batch.
        return_[:m] += (discount**k) * reward[k : k + m] * (1 - done_n[:m])
        done_n[:m] = _maximum(done_n[:m], done_f[k : k + m])
    if done_n_dest is not None:
        _check_shape(done_n_dest, out_shape, "done_n_dest")
        done_n_dest[:] = _to_kind(done_n, done_n_dest)
        return return_, done_n_dest
    return return_, _cast(done_n, done_dtype)


def valid_from_done(done: Array) -> Array:
    """Float mask ``[T, ...]``: 1 up to and including each column's first ``done``, 0 after it.

    Used to ignore steps of a new episode that began inside a recurrent training sequence.

    Args:
        done: Episode ends ``[T, ...]`` (bool or float).

    Returns:
        ``valid`` ``[T, ...]``, float32, the kind of ``done``.
    """
    if _is_torch(done):
        done_f = done.to(torch.float32)
        valid = torch.ones_like(done_f)
        valid[1:] = 1 - torch.clamp(torch.cumsum(done_f[:-1], dim=0), max=1)
        return valid
    done_np = np.asarray(done, dtype=np.float32)
    valid_np = np.ones_like(done_np)
    valid_np[1:] = 1 - np.minimum(np.cumsum(done_np[:-1], axis=0), 1)
    return valid_np


def valid_mean(tensor: Array, valid: Array | None = None, dim: int | None = None) -> Array:
    """Mean of ``tensor`` over entries where ``valid`` is nonzero (all if ``valid`` is None): how the
    losses average over the steps a mask such as :func:`valid_from_done` or ``1 - truncated`` keeps.

    Args:
        tensor: Values, e.g. ``[T, B]`` losses.
        valid: Mask broadcastable to ``tensor``'s shape (bool or float).
        dim: Reduce only this dim; all dims if None.
    """
    is_torch = isinstance(tensor, torch.Tensor)
    if valid is None:
        if dim is None:
            return tensor.mean()
        return tensor.mean(dim=dim) if is_torch else tensor.mean(axis=dim)
    mask: Array = valid.to(tensor.dtype) if is_torch else np.asarray(valid, dtype=tensor.dtype)
    if dim is None:
        return (tensor * mask).sum() / mask.sum().clamp(min=1) if is_torch else (
            (tensor * mask).sum() / max(mask.sum(), 1)
        )
    if is_torch:
        return (tensor * mask).sum(dim=dim) / mask.sum(dim=dim).clamp(min=1)
    return (tensor * mask).sum(axis=dim) / np.maximum(mask.sum(axis=dim), 1)


def _discount_core(
    reward: Array,
    done: Array,
    bootstrap_value: Array,
    discount: float,
    truncated: Array | None,
    value: Array | None,
    truncated_value: Array | None,
    return_dest: Array | None,
) -> Array:
    return_ = _output(return_dest, tuple(reward.shape), reward, "return_dest")
    if truncated is not None:
        done = _maximum(done, truncated)
    not_done = 1 - done
    extra = None if truncated_value is None else truncated * truncated_value
    # Carry the running return in its own variable, never read back from the output buffer, so
    # autograd never sees a saved tensor modified in place.
    next_return = bootstrap_value
    for t in reversed(range(reward.shape[0])):
        bootstrap = not_done[t] * next_return
        if extra is not None:
            bootstrap = bootstrap + extra[t]
        next_return = reward[t] + discount * bootstrap
        if truncated is not None and extra is None:
            assert value is not None  # discount_return_tl requires value when timeout_value is None
            next_return = next_return * (1 - truncated[t]) + value[t] * truncated[t]
        return_[t] = next_return
    return return_


def _gae_core(
    reward: Array,
    value: Array,
    done: Array,
    bootstrap_value: Array,
    discount: float,
    gae_lambda: float,
    truncated: Array | None,
    truncated_value: Array | None,
    advantage_dest: Array | None,
    return_dest: Array | None,
) -> tuple[Array, Array]:
    shape = tuple(reward.shape)
    advantage = _output(advantage_dest, shape, reward, "advantage_dest")
    return_ = _output(return_dest, shape, reward, "return_dest")
    if truncated is not None:
        done = _maximum(done, truncated)
    not_done = 1 - done
    extra = None if truncated_value is None else truncated * truncated_value
    zero_at_truncation = truncated is not None and extra is None
    next_value = bootstrap_value
    next_advantage = 0.0
    for t in reversed(range(shape[0])):
        bootstrap = not_done[t] * next_value
        if extra is not None:
            bootstrap = bootstrap + extra[t]
        delta = reward[t] + discount * bootstrap - value[t]
        next_advantage = delta + discount * gae_lambda * not_done[t] * next_advantage
        if zero_at_truncation:
            assert truncated is not None
            next_advantage = next_advantage * (1 - truncated[t])
        advantage[t] = next_advantage
        next_value = value[t]
    return_[:] = advantage + value
    return advantage, return_


def _prepare(
    reward: Array, discount: float, gae_lambda: float | None = None, **arrays: Array | None
) -> tuple[Array, ...]:
    """Check scalars and shapes; return ``reward`` then ``arrays`` in order, in ``reward``'s kind.

    ``bootstrap_value`` must broadcast to ``reward.shape[1:]``; every other array must have
    ``reward``'s shape. None entries pass through.
    """
    if not 0.0 <= discount <= 1.0:
        raise ValueError(f"discount must lie in [0, 1], got {discount!r}")
    if gae_lambda is not None and not 0.0 <= gae_lambda <= 1.0:
        raise ValueError(f"gae_lambda must lie in [0, 1], got {gae_lambda!r}")
    if _is_torch(reward):
        reward = reward if reward.is_floating_point() else reward.to(torch.get_default_dtype())
    else:
        reward = np.asarray(reward)
        if not np.issubdtype(reward.dtype, np.floating):
            reward = reward.astype(np.float32)
    if reward.ndim < 1:
        raise ValueError(f"reward must have a leading time dim [T, ...], got shape {tuple(reward.shape)}")
    out = [reward]
    for name, array in arrays.items():
        if array is None:
            out.append(None)
            continue
        array = _to_kind(array, reward)
        shape = tuple(array.shape)
        if name == "bootstrap_value":
            expected = tuple(reward.shape[1:])
            aligned = expected[len(expected) - len(shape) :] if shape else ()
            if len(shape) > len(expected) or any(n not in (1, e) for n, e in zip(shape, aligned, strict=True)):
                raise ValueError(f"bootstrap_value of shape {shape} must broadcast to {expected}")
        elif shape != tuple(reward.shape):
            raise ValueError(f"{name} of shape {shape} must match reward's shape {tuple(reward.shape)}")
        out.append(array)
    return tuple(out)


def _is_torch(x: Any) -> bool:
    return isinstance(x, torch.Tensor)


def _to_kind(x: Any, like: Array) -> Array:
    """``x`` as the kind (numpy/torch), float dtype and device of ``like``."""
    if _is_torch(like):
        if _is_torch(x):
            return x.to(device=like.device, dtype=like.dtype)
        return torch.as_tensor(np.asarray(x), dtype=like.dtype, device=like.device)
    if _is_torch(x):
        x = x.detach().cpu().numpy()
    return np.asarray(x, dtype=like.dtype)


def _output(dest: Array | None, shape: tuple[int, ...], like: Array, name: str) -> Array:
    if dest is None:
        if _is_torch(like):
            return torch.zeros(shape, dtype=like.dtype, device=like.device)
        return np.zeros(shape, dtype=like.dtype)
    _check_shape(dest, shape, name)
    return dest


def _check_shape(dest: Array, shape: tuple[int, ...], name: str) -> None:
    if tuple(dest.shape) != shape:
        raise ValueError(f"{name} of shape {tuple(dest.shape)} must have shape {shape}")


def _maximum(a: Array, b: Array) -> Array:
    return torch.maximum(a, b) if _is_torch(a) else np.maximum(a, b)


def _copy(x: Array) -> Array:
    return x.clone() if _is_torch(x) else x.copy()


def _cast(x: Array, dtype: Any) -> Array:
    return x.to(dtype) if _is_torch(x) else x.astype(dtype)
