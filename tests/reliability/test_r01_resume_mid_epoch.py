"""Rows 1 and 2, anywhere: a run cut in the middle of an epoch and resumed in a new process ends
exactly as the uninterrupted run, for every algorithm on every sampler.

An epoch is four sampler iterations; the run is cut after six (mid-epoch) by its env-step budget
and by a real SIGINT (Ctrl-C), and for two of them at a checkpoint written every update; each
cut run is resumed in a fresh interpreter with another global seed
(:mod:`tests.reliability.resume_anywhere`). Compared: the state right after the reload
(weights, counters, python/numpy/torch and shuffle generators, the sampler's envs and collectors
-- in the parallel sampler's worker processes too -- the replay, targets, epsilon,
``log_alpha``), every loss after the cut, every metric logged after the cut (the 100-episode
return window and the epoch's statistics included), the epochs' ends, and the final state with
the optimizers.

What each failure meant before it was fixed: a new DataLoader iterator drew its seed from the
global torch generator (every case diverged at the first update after the cut); the run stopped by
its budget or Ctrl-C closed its epoch early, so the resumed run ended its epochs elsewhere; the
episode windows restarted empty; the parallel samplers restarted their envs; gymnasium's vector env
seeded its spaces from OS entropy.

All cut runs are prepared once (a module fixture) and resumed in one new process.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.reliability.anywhere_builders import BATCH
from tests.reliability.exact_resume import keep_determinism_flag
from tests.reliability.resume_anywhere import CUT, FULL, K, check_resumed, cut_runs, run_legs_in_new_process

ALGOS = ("ppo", "a2c", "dqn", "c51", "r2d1", "ddpg", "td3", "sac")
#: R2D1 trains on whole sequences with a wait-reset collector, which the vector sampler cannot be.
COMBOS = [(a, s) for s in ("serial", "cpu", "vector") for a in ALGOS if (a, s) != ("r2d1", "vector")]
#: A checkpoint written every update (ModelCheckpoint(every_n_train_steps=1)), resumed mid-epoch.
EVERY_N = {("ppo", "serial"), ("dqn", "cpu")}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[tuple[str, str, str], Any]:
    """Every combination's uninterrupted and cut runs (here) and its resumed runs (one new process)."""
    gen = keep_determinism_flag()
    next(gen)
    prepared, specs = [], []
    for algo, sampler in COMBOS:
        hows = ("budget", "sigint", *(("every_n",) if (algo, sampler) in EVERY_N else ()))
        builder = f"tests.reliability.anywhere_builders:build_{algo}"
        legs = cut_runs(tmp_path_factory.mktemp(f"{algo}-{sampler}"), builder, hows, BATCH, sampler=sampler)
        for how in hows:
            prepared.append(((algo, sampler, how), legs["full"], legs[how]["cut"]))
            specs.append(legs[how]["resume"])
    resumed = run_legs_in_new_process(specs, tmp_path_factory.mktemp("resumed"))
    next(gen, None)
    return {key: (full, cut, report) for (key, full, cut), report in zip(prepared, resumed, strict=True)}


CASES = [(a, s, h) for a, s in COMBOS for h in ("budget", "sigint", *(("every_n",) if (a, s) in EVERY_N else ()))]


@pytest.mark.timeout(2400)
@pytest.mark.parametrize(("algo", "sampler", "how"), CASES, ids=["-".join(c) for c in CASES])
def test_a_run_cut_mid_epoch_resumes_as_the_uninterrupted_run(runs, algo, sampler, how):
    full, cut, resumed = runs[(algo, sampler, how)]
    check_resumed(full, cut, resumed, BATCH)
    # By hand: epochs end every K iterations; the cut (iteration CUT) is not one of them.
    assert CUT % K != 0
    assert full["epoch_ends"] == list(range(K, FULL + 1, K))
    assert resumed["final"]["train_state"]["env_steps"] == FULL * BATCH
    assert resumed["final"]["train_state"]["itr"] == FULL
    # The return window held episodes when the run was cut, and the resumed run logged it.
    assert any("train/return_mean" in row for _, row in resumed["logged"])
