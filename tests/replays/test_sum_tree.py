from __future__ import annotations

import numpy as np
import pytest

from lightning_rl.replays import SumTree
from tests.replays.replay_reference import chi_square


@pytest.mark.parametrize(
    "capacity,branching", [(1, 2), (7, 2), (100, 3), (1000, 16), (4096, 16), (20_000, 2), (100_000, 16)]
)
def test_sums_and_find_match_brute_force(capacity, branching):
    rng = np.random.default_rng(capacity)
    tree = SumTree(capacity, branching)
    values = np.zeros(capacity)
    for _ in range(5):
        idxs = rng.integers(0, capacity, size=min(capacity, 50))
        new = rng.random(len(idxs)) * (rng.random(len(idxs)) < 0.7)  # some zeros
        tree.set(idxs, new)
        for i, v in zip(idxs, new, strict=False):  # repeats: the last value wins
            values[i] = v
        np.testing.assert_array_equal(tree.leaves, values)
        assert tree.total == pytest.approx(values.sum())
        # Every internal node is the sum of its children.
        for upper, lower in zip(tree.levels[:-1], tree.levels[1:], strict=False):
            np.testing.assert_allclose(upper[: len(lower) // branching], lower.reshape(-1, branching).sum(1))
        if values.sum() == 0:
            continue
        queries = np.concatenate([rng.random(200) * values.sum(), [0.0, values.sum() * (1 - 1e-12)]])
        idx, leaf = tree.find(queries)
        cumsum = np.cumsum(values)
        expected = np.searchsorted(cumsum, queries, side="right")
        np.testing.assert_array_equal(idx, expected)
        np.testing.assert_array_equal(leaf, values[expected])


@pytest.mark.parametrize("capacity", [50, 100_000])
def test_zero_leaves_never_found_even_past_the_total(capacity):
    # 100_000 leaves descend level by level below the top levels; 50 are searched whole.
    tree = SumTree(capacity, 4)
    tree.set([3, 17, 40], [1.0, 2.0, 0.5])
    idx, _ = tree.find(np.array([0.0, 0.999999, 1.0, 2.9999, 3.0, 3.4999, 3.5, 10.0]))
    np.testing.assert_array_equal(idx, [3, 3, 17, 17, 40, 40, 40, 40])


@pytest.mark.parametrize("stratified", [False, True])
def test_sampling_frequencies_chi_square(stratified):
    rng = np.random.default_rng(0)
    priorities = np.array([0.0, 1.0, 2.0, 3.0, 0.5, 0.0, 4.0, 1.5, 6.0, 2.0, 0.25, 3.0])
    tree = SumTree(len(priorities), branching=4)
    tree.set(np.arange(len(priorities)), priorities)
    draws = np.concatenate([tree.sample(100, rng, stratified)[0] for _ in range(100)])  # 10k
    counts = np.bincount(draws, minlength=len(priorities))
    assert counts[priorities == 0].sum() == 0
    nz = priorities > 0
    stat, threshold = chi_square(counts[nz], priorities[nz] / priorities.sum())
    assert stat < threshold
    if stratified:
        # Stratification: every batch of 100 covers each leaf within one draw of expectation.
        one = np.bincount(tree.sample(100, rng, True)[0], minlength=len(priorities))
        assert np.all(np.abs(one - 100 * priorities / priorities.sum()) <= 1)


def test_state_dict_round_trip_and_shared():
    tree = SumTree(30, 4, shared=True)
    tree.set(np.arange(30), np.arange(30.0))
    other = SumTree(30, 4)
    other.load_state_dict({"tree": tree.state_dict()["tree"].copy()})
    np.testing.assert_array_equal(other.leaves, np.arange(30.0))
    assert other.total == 435.0
    with pytest.raises(ValueError, match="tree shape"):
        SumTree(40, 4).load_state_dict(tree.state_dict())


def test_bad_arguments():
    with pytest.raises(ValueError, match="capacity"):
        SumTree(0)
    with pytest.raises(ValueError, match="branching"):
        SumTree(10, branching=1)
    tree = SumTree(10)
    with pytest.raises(ValueError, match="idxs"):
        tree.set([10], [1.0])
    with pytest.raises(ValueError, match="values"):
        tree.set([1], [-1.0])
    with pytest.raises(RuntimeError, match="zero"):
        tree.sample(1, np.random.default_rng())
