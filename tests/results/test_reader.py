"""Finding runs in a directory tree and reading their scalars, variants, seeds and wall times."""

from __future__ import annotations

import datetime
import os

import numpy as np
import pytest
import yaml

from lightning_rl.results.reader import find_run_dirs, find_variant, read_run, read_runs, variant_label
from tests.results.conftest import make_run, write_config, write_events_file, write_scalars

LR = "model.init_args.learning_rate"


def test_finds_runs_of_a_grid_and_not_the_variant_configs(tmp_path):
    a = make_run(tmp_path, {LR: 0.001}, 0, {"eval/return_mean": [(100, 1.0)]})
    b = make_run(tmp_path, {LR: 0.001}, 1, {"eval/return_mean": [(100, 2.0)]})
    # A variant not started yet: config.yaml and variant.yaml, no events: not a run.
    write_config(tmp_path / "lr_0.01_seed_0")
    (tmp_path / "lr_0.01_seed_0" / "variant.yaml").write_text(yaml.safe_dump({LR: 0.01, "seed_everything": 0}))
    assert find_run_dirs(tmp_path) == sorted([a, b])
    assert find_run_dirs(a) == [a]  # the root itself may be a run
    with pytest.raises(ValueError, match="is not a directory"):
        find_run_dirs(tmp_path / "missing")
    with pytest.raises(ValueError, match="no runs under"):
        read_runs(tmp_path / "lr_0.01_seed_0")


def test_reads_scalars_identity_and_variant_without_the_seed(tmp_path):
    run_dir = make_run(
        tmp_path, {LR: 0.0003, "model.init_args.sampler.init_args.batch_T": 64}, 2,
        {"eval/return_mean": [(256, 10.0), (512, 30.0), (768, 20.0)], "train/return_mean": [(1024, 5.0)]},
        algo="lightning_rl.algos.A2C", env_id="ALE/Pong-v5",
    )
    run = read_run(run_dir)
    assert (run.algo, run.env, run.seed, run.group, run.source) == ("A2C", "ALE/Pong-v5", 2, "ppo_cartpole",
                                                                   "tensorboard")
    assert run.variant == {LR: 0.0003, "model.init_args.sampler.init_args.batch_T": 64}
    assert run.variant_label == "learning_rate=0.0003, batch_T=64"
    np.testing.assert_array_equal(run.scalars["eval/return_mean"].steps, [256, 512, 768])
    np.testing.assert_allclose(run.scalars["eval/return_mean"].values, [10.0, 30.0, 20.0])
    assert run.env_steps == 1024  # the last step of any scalar, not of the eval curve


def test_without_variant_file_the_variant_is_the_run_group(tmp_path):
    run = read_run(make_run(tmp_path, None, 5, {"train/return_mean": [(8, 1.0)]}, name="plain"))
    assert (run.variant, run.variant_label, run.seed) == ({}, "ppo_cartpole", 5)


def test_nearest_variant_file_wins_and_bad_ones_are_named(tmp_path):
    run_dir = make_run(tmp_path, {LR: 0.001}, 0, {"train/return_mean": [(8, 1.0)]}, name="v")
    (tmp_path / "variant.yaml").write_text(yaml.safe_dump({LR: 0.5}))  # further up: not used
    assert find_variant(run_dir) == ({LR: 0.001}, tmp_path / "v" / "variant.yaml")
    (tmp_path / "v" / "variant.yaml").write_text("- a list\n")
    with pytest.raises(ValueError, match="variant.yaml: a variant must be a mapping"):
        read_run(run_dir)


def test_variant_label_keeps_full_keys_where_last_parts_clash():
    label = variant_label({"model.init_args.a.lr": 1e-3, "model.init_args.b.lr": 0.5, "seedless": "x"})
    assert label == "model.init_args.a.lr=0.001, model.init_args.b.lr=0.5, seedless=x"


def test_seed_that_is_not_an_int_is_unknown(tmp_path):
    run_dir = make_run(tmp_path, {LR: 0.1}, 0, {"train/return_mean": [(8, 1.0)]}, name="v")
    write_config(run_dir, seed=True)  # seed_everything: true (a random seed) written as is
    assert read_run(run_dir).seed is None


def test_resumed_run_reads_as_one_curve_and_sums_segment_wall_times(tmp_path):
    run_dir = tmp_path / "runs" / "ppo_cartpole" / "2026-01-01_00-00-00"
    write_config(run_dir, seed=3)
    tag = "train/return_mean"
    # First segment: started at t=1000, logged steps 100..400 until t=1040, killed. The resume from the
    # step-300 checkpoint starts a second file at t=2000 and re-logs 300 and 400, then 500, until t=2030.
    write_events_file(run_dir / "events.out.tfevents.1000.host.1.0", 1000.0,
                      [(tag, s, 1000.0 + s / 10, float(s)) for s in (100, 200, 300, 400)])
    write_events_file(run_dir / "events.out.tfevents.2000.host.2.0", 2000.0,
                      [(tag, 300, 2010.0, -3.0), (tag, 400, 2020.0, -4.0), (tag, 500, 2030.0, -5.0)])
    run = read_run(run_dir)
    np.testing.assert_array_equal(run.scalars[tag].steps, [100, 200, 300, 400, 500])
    np.testing.assert_allclose(run.scalars[tag].values, [100.0, 200.0, -3.0, -4.0, -5.0])
    assert run.wall_time_s == pytest.approx(40.0 + 30.0)
    assert run.env_steps == 500


def test_points_logged_after_the_resumed_checkpoint_are_dropped(tmp_path):
    run_dir = tmp_path / "run"
    write_config(run_dir)
    tag = "train/return_mean"
    # Killed after logging step 400 with its last checkpoint at 300; the resume logged 300 and was stopped
    # again: step 400 of the first attempt belongs to no curve the resumed run continues.
    write_events_file(run_dir / "events.out.tfevents.1", 1000.0,
                      [(tag, s, 1000.0 + s / 10, float(s)) for s in (100, 200, 300, 400)])
    write_events_file(run_dir / "events.out.tfevents.2", 2000.0, [(tag, 300, 2010.0, -3.0)])
    run = read_run(run_dir)
    np.testing.assert_array_equal(run.scalars[tag].steps, [100, 200, 300])
    np.testing.assert_allclose(run.scalars[tag].values, [100.0, 200.0, -3.0])
    assert run.env_steps == 300


def _started_at(timestamp: float) -> str:
    return datetime.datetime.fromtimestamp(timestamp, datetime.timezone.utc).isoformat(timespec="seconds")


def test_run_info_start_extends_only_the_latest_segment(tmp_path):
    run_dir = tmp_path / "run"
    write_config(run_dir)
    write_events_file(run_dir / "events.out.tfevents.a", 1000.0, [("x", 1, 1040.0, 1.0)])
    write_events_file(run_dir / "events.out.tfevents.b", 2000.0, [("x", 2, 2030.0, 2.0)])
    # The resumed process started 5 s before its logger's first event (building its envs).
    (run_dir / "run_info.yaml").write_text(yaml.safe_dump({"started_at": _started_at(1995.0)}))
    assert read_run(run_dir).wall_time_s == pytest.approx(40.0 + 35.0)
    # started_at has whole seconds only: where it reads later than the logger's first event, that event
    # is the start.
    (run_dir / "run_info.yaml").write_text(yaml.safe_dump({"started_at": _started_at(2002.0)}))
    assert read_run(run_dir).wall_time_s == pytest.approx(40.0 + 30.0)
    # A started_at before the first segment ended cannot be the latest segment's start: ignored.
    (run_dir / "run_info.yaml").write_text(yaml.safe_dump({"started_at": _started_at(1020.0)}))
    assert read_run(run_dir).wall_time_s == pytest.approx(40.0 + 30.0)


def test_csv_logs_are_read_with_wall_time_from_run_info(tmp_path):
    run_dir = tmp_path / "run"
    write_config(run_dir, seed=7)
    (run_dir / "metrics.csv").write_text(
        "epoch,step,train/return_mean,train/loss\n"
        "0,256,10.5,\n"
        "0,256,,0.25\n"
        "1,512,12.0,0.5\n"
        ",,,\n"
    )
    (run_dir / "run_info.yaml").write_text(yaml.safe_dump({"started_at": _started_at(5000.0)}))
    os.utime(run_dir / "metrics.csv", (5090.0, 5090.0))
    run = read_run(run_dir)
    assert run.source == "csv"
    np.testing.assert_array_equal(run.scalars["train/return_mean"].steps, [256, 512])
    np.testing.assert_allclose(run.scalars["train/return_mean"].values, [10.5, 12.0])
    np.testing.assert_allclose(run.scalars["train/loss"].values, [0.25, 0.5])
    assert "epoch" not in run.scalars
    assert run.wall_time_s == pytest.approx(90.0)
    assert run.seed == 7


def test_summary_writer_events_are_found_beside_checkpoints(tmp_path):
    run_dir = tmp_path / "r"
    write_config(run_dir)
    write_scalars(run_dir, {"eval/return_mean": [(10, 1.5), (20, 2.5)]})
    # A checkpoint folder with stray files is not searched for runs.
    write_config(run_dir / "checkpoints")
    write_scalars(run_dir / "checkpoints", {"eval/return_mean": [(10, 9.0)]})
    assert find_run_dirs(tmp_path) == [run_dir]
    assert read_run(run_dir).scalars["eval/return_mean"].values.tolist() == [1.5, 2.5]
