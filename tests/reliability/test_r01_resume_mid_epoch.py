"""Rows 1 and 2, anywhere: a run cut in the middle of an epoch and resumed in a new process ends
exactly as the uninterrupted run, for every algorithm and sampler.

An epoch is four sampler iterations; the run is cut after six (mid-epoch) by its env-step budget,
by a real SIGINT (Ctrl-C) or at a checkpoint written every few updates, then resumed in a fresh
interpreter with another global seed (:func:`~tests.reliability.resume_anywhere.resume_anywhere`).
Compared: the state right after the reload (weights, counters, python/numpy/torch and shuffle
generators, the sampler's envs and collectors -- in the parallel sampler's worker processes
too -- the replay, targets, epsilon, ``log_alpha``), every loss after the cut, every metric logged
after the cut (the 100-episode return window and the epoch's statistics included), the epochs'
ends, and the final state with the optimizers.

What each failure meant before it was fixed: a new DataLoader iterator drew its seed from the
global torch generator (every case diverged at the first update after the cut); the run stopped by
its budget or Ctrl-C closed its epoch early, so the resumed run ended its epochs elsewhere; the
episode windows restarted empty; the parallel samplers restarted their envs; gymnasium's vector env
seeded its spaces from OS entropy.
"""

from __future__ import annotations

import pytest

from tests.reliability.anywhere_builders import BATCH
from tests.reliability.exact_resume import keep_determinism_flag
from tests.reliability.resume_anywhere import CUT, FULL, K, resume_anywhere

CASES = [
    # Every algorithm on the serial sampler, cut by its budget.
    *[(algo, "serial", "budget") for algo in ("ppo", "a2c", "dqn", "c51", "r2d1", "ddpg", "td3", "sac")],
    # The parallel CPU sampler (envs in worker processes) and the vector sampler.
    *[(algo, "cpu", "budget") for algo in ("ppo", "dqn", "r2d1", "sac")],
    *[(algo, "vector", "budget") for algo in ("ppo", "dqn", "sac")],
    # Ctrl-C in the middle of an epoch, and a checkpoint written every update.
    ("ppo", "serial", "sigint"), ("dqn", "cpu", "sigint"), ("sac", "vector", "sigint"),
    ("ppo", "serial", "every_n"), ("dqn", "cpu", "every_n"),
]


@pytest.fixture(autouse=True)
def _restore_torch_flags():
    yield from keep_determinism_flag()


@pytest.mark.parametrize(("algo", "sampler", "how"), CASES, ids=["-".join(c) for c in CASES])
def test_a_run_cut_mid_epoch_resumes_as_the_uninterrupted_run(tmp_path, algo, sampler, how):
    legs = resume_anywhere(tmp_path, f"tests.reliability.anywhere_builders:build_{algo}", how, BATCH, sampler=sampler)
    full, resumed = legs["full"], legs["resumed"]
    # By hand: epochs end every K iterations; the cut (iteration CUT) is not one of them.
    assert CUT % K != 0
    assert full["epoch_ends"] == list(range(K, FULL + 1, K))
    assert resumed["final"]["train_state"]["env_steps"] == FULL * BATCH
    assert resumed["final"]["train_state"]["itr"] == FULL
    # The return window was not empty when the run was cut, and the resumed run logged it.
    assert any("train/return_mean" in row for _, row in resumed["logged"])
    assert resumed["wall"] < 60, resumed["wall"]
