"""Learning curves: seeds on a common env-step grid, mean and band per variant, a PNG written."""

from __future__ import annotations

import numpy as np
import pytest

from lightning_rl.results.cli import summarize
from lightning_rl.results.plot import common_grid, make_figure, plot_summary
from lightning_rl.results.reader import read_runs
from tests.results.conftest import make_run

pytest.importorskip("matplotlib")

LR = "model.init_args.learning_rate"
TAG = "eval/return_mean"


def test_common_grid_interpolates_onto_the_overlap_by_hand(tmp_path):
    make_run(tmp_path, {LR: 0.1}, 0, {TAG: [(0, 0.0), (100, 10.0), (200, 20.0)]})
    make_run(tmp_path, {LR: 0.1}, 1, {TAG: [(50, 0.0), (150, 100.0), (250, 200.0)]})
    (table,) = summarize(read_runs(tmp_path)).tables
    grid = common_grid(table.runs, TAG)
    assert grid is not None
    steps, values = grid
    # Steps of either seed within [max first, min last] = [50, 200]; seed 0 at 50 and 150 and seed 1 at
    # 100 and 200 are interpolated between their neighbours.
    np.testing.assert_array_equal(steps, [50, 100, 150, 200])
    np.testing.assert_allclose(values, [[5.0, 10.0, 15.0, 20.0], [0.0, 50.0, 100.0, 150.0]])


def test_figure_has_one_line_per_variant_with_the_seed_mean_and_band(tmp_path):
    make_run(tmp_path, {LR: 0.1}, 0, {TAG: [(100, 0.0), (200, 10.0)]})
    make_run(tmp_path, {LR: 0.1}, 1, {TAG: [(100, 4.0), (200, 30.0)]})
    make_run(tmp_path, {LR: 0.2}, 0, {TAG: [(100, 7.0), (200, 8.0), (300, 9.0)]})
    make_run(tmp_path, {LR: 0.1}, 0, {TAG: [(100, 1.0)]}, name="other_env", env_id="Acrobot-v1")
    figure = make_figure(summarize(read_runs(tmp_path)), confidence=0.95, reps=4000)
    visible = [ax for ax in figure.axes if ax.get_visible()]
    assert [ax.get_title() for ax in visible] == ["PPO Acrobot-v1", "PPO CartPole-v1"]
    ax = visible[1]
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert sorted(lines) == ["learning_rate=0.1 (2 seeds)", "learning_rate=0.2 (1 seed)"]
    two = lines["learning_rate=0.1 (2 seeds)"]
    np.testing.assert_array_equal(two.get_xdata(), [100, 200])
    np.testing.assert_allclose(two.get_ydata(), [2.0, 20.0])
    np.testing.assert_allclose(lines["learning_rate=0.2 (1 seed)"].get_ydata(), [7.0, 8.0, 9.0])
    # One band (two seeds only): from both-seed-0 to both-seed-1 resamples, the 95% interval's ends.
    (band,) = ax.collections
    vertices = band.get_paths()[0].vertices
    assert vertices[:, 1].min() == pytest.approx(0.0)
    assert vertices[:, 1].max() == pytest.approx(30.0)
    assert ax.get_xlabel() == "env steps" and ax.get_ylabel() == TAG


def test_png_is_written_into_new_directories(tmp_path):
    make_run(tmp_path / "grid", {LR: 0.1}, 0, {TAG: [(100, 0.0), (200, 10.0)]})
    path = plot_summary(summarize(read_runs(tmp_path / "grid")), tmp_path / "a" / "b" / "curves.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    import matplotlib.image

    height, width = matplotlib.image.imread(str(path)).shape[:2]
    assert (width, height) == (550, 400)  # one subplot: 5.5 x 4 inches at 100 dpi
