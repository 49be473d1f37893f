from __future__ import annotations

import multiprocessing as mp
import time

import numpy as np
import pytest

from lightning_rl.replays import ReplayBuffer, RWLock
from tests.replays.replay_reference import Samples

ctx = mp.get_context("fork")
B, N_STEP, DISCOUNT = 2, 3, 0.9


def test_rwlock_readers_share_and_writer_excludes():
    lock = RWLock()
    entered = ctx.Event()

    def read():
        with lock.read():
            entered.set()

    def write():
        with lock.write():
            entered.set()

    with lock.read():
        p = ctx.Process(target=read)
        p.start()
        assert entered.wait(10), "a second reader must get in while one reads"
        p.join(10)
    entered.clear()
    with lock.read():
        p = ctx.Process(target=write)
        p.start()
        assert not entered.wait(0.3), "a writer must wait for the reader"
    assert entered.wait(10)
    p.join(10)
    entered.clear()
    with lock.write():
        p = ctx.Process(target=read)
        p.start()
        assert not entered.wait(0.3), "a reader must wait for the writer"
    assert entered.wait(10)
    p.join(10)
    assert lock.readers == 0


def _step_data(a: np.ndarray, b: np.ndarray):
    """Deterministic samples of absolute step ``a``, env ``b`` (so both processes agree)."""
    reward = ((7 * a + 3 * b) % 11) / 10
    done = (5 * a + b) % 13 == 0
    truncated = done & (a % 2 == 0)
    return reward.astype(np.float32), done, truncated


def _batch(a0: int, T_in: int):
    a = np.arange(a0, a0 + T_in)[:, None] * np.ones(B, dtype=np.int64)
    b = np.zeros((T_in, 1), dtype=np.int64) + np.arange(B)
    reward, done, truncated = _step_data(a, b)
    obs = np.stack([a, b, np.zeros_like(a)], axis=-1).astype(np.float32)
    return Samples(obs, 10 * a + b, reward, done, truncated)


def _expected(a: int, b: int):
    ret = 0.0
    for j in range(N_STEP):
        r, d, to = (x.item() for x in _step_data(np.array(a + j), np.array(b)))
        if to:
            return ret, False, j
        ret += DISCOUNT**j * r
        if d:
            return ret, True, N_STEP
    return ret, False, N_STEP


def _check(batch):
    obs = batch.agent_inputs.observation.numpy()
    for i in range(len(obs)):
        a, b = int(obs[i, 0]), int(obs[i, 1])
        ret, done_n, n_steps = _expected(a, b)
        assert batch.action[i].item() == 10 * a + b
        assert batch.return_[i].item() == pytest.approx(ret, rel=1e-5, abs=1e-5)
        assert batch.done_n[i].item() == done_n
        assert batch.target_inputs.observation[i, 0].item() == a + n_steps
        assert batch.idxs[i].item() == a * B + b


@pytest.mark.parametrize("prioritized", [False, True])
def test_forked_writer_appends_while_parent_samples(prioritized):
    example = Samples(np.zeros(3, np.float32), np.int64(0), np.float32(0), False, False)
    replay = ReplayBuffer(
        example, size=B * 64, B=B, discount=DISCOUNT, n_step_return=N_STEP, prioritized=prioritized, shared=True,
    )
    replay.append_samples(_batch(0, 20))
    n_appends, T_in = 150, 3

    def writer():
        for k in range(n_appends):
            replay.append_samples(_batch(20 + k * T_in, T_in))
            time.sleep(0.001)

    p = ctx.Process(target=writer)
    p.start()
    during, newest_seen = 0, 0
    while p.is_alive():
        batch = replay.sample_batch(16)
        _check(batch)
        if prioritized:
            replay.update_batch_priorities(batch.idxs, np.full(16, 2.0))
        newest_seen = max(newest_seen, int(batch.agent_inputs.observation[:, 0].max()))
        during += 1
    p.join(30)
    assert p.exitcode == 0
    total = 20 + n_appends * T_in
    assert replay.storage.rows_written == total and replay.n_stored == replay.size
    assert during > 0 and newest_seen > 20
    batch = replay.sample_batch(256)
    _check(batch)
    assert int(batch.agent_inputs.observation[:, 0].min()) >= total - replay.T
