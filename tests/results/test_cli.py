"""``lightning-rl results``: tables, aggregates, formats, notes and errors on grids with known scalars."""

from __future__ import annotations

import csv
import io

import pytest

from lightning_rl.cli import main as lightning_rl_main
from lightning_rl.results.cli import main, print_rich, summarize
from lightning_rl.results.reader import read_runs
from tests.results.conftest import make_run

LR = "model.init_args.learning_rate"


def eval_curve(final: float, best: float) -> list[tuple[int, float]]:
    return [(256, 0.0), (512, best), (768, final)]


@pytest.fixture()
def grid(tmp_path):
    """lr 0.001: seeds 0, 1 (final 100, 200); lr 0.0003: seeds 0..3 (final 10, 20, 30, 1000)."""
    for seed, final in ((0, 100.0), (1, 200.0)):
        make_run(tmp_path, {LR: 0.001}, seed, {"eval/return_mean": eval_curve(final, final + 1.0),
                                              "train/return_mean": [(1024, -1.0)]})
    for seed, final in ((3, 1000.0), (1, 20.0), (0, 10.0), (2, 30.0)):
        make_run(tmp_path, {LR: 0.0003}, seed, {"eval/return_mean": eval_curve(final, 2000.0 + seed),
                                               "train/return_mean": [(1024, -1.0)]})
    return tmp_path


def run_csv(capsys, argv: list[str]) -> tuple[int, list[dict[str, str]], str]:
    status = main([*argv, "--format", "csv"])
    captured = capsys.readouterr()
    return status, list(csv.DictReader(io.StringIO(captured.out))), captured.err


def test_csv_rows_and_aggregates_by_hand(grid, capsys):
    status, rows, err = run_csv(capsys, [str(grid)])
    assert status == 0
    runs = [(r["variant"], r["seed"], float(r["final"]), float(r["best"]), r["env_steps"])
            for r in rows if r["kind"] == "run"]
    # Variants in numeric order of the learning rate, seeds sorted; final = last point, best = max.
    assert runs == [
        ("learning_rate=0.0003", "0", 10.0, 2000.0, "1024"),
        ("learning_rate=0.0003", "1", 20.0, 2001.0, "1024"),
        ("learning_rate=0.0003", "2", 30.0, 2002.0, "1024"),
        ("learning_rate=0.0003", "3", 1000.0, 2003.0, "1024"),
        ("learning_rate=0.001", "0", 100.0, 101.0, "1024"),
        ("learning_rate=0.001", "1", 200.0, 201.0, "1024"),
    ]
    assert {r["metric"] for r in rows} == {"eval/return_mean"}
    variants = {r["variant"]: r for r in rows if r["kind"] == "variant"}
    low_lr, high_lr = variants["learning_rate=0.0003"], variants["learning_rate=0.001"]
    assert float(low_lr["mean"]) == pytest.approx((10 + 20 + 30 + 1000) / 4)  # 265
    assert float(low_lr["iqm"]) == pytest.approx((20 + 30) / 2)               # one dropped at each end
    assert low_lr["seeds"] == "0 1 2 3"
    assert float(high_lr["mean"]) == pytest.approx(150.0)
    assert float(high_lr["iqm"]) == pytest.approx(150.0)                       # two seeds: nothing dropped
    # Resampling two seeds: both seed-0 (p = 1/4) and both seed-1 are the 2.5% and 97.5% quantiles.
    assert (float(high_lr["ci_low"]), float(high_lr["ci_high"])) == (100.0, 200.0)
    # Four seeds 10, 20, 30, 1000: the IQM of a resample is 10 when three or four draws are 10,
    # p = (4 * 3 + 1) / 4**4 = 5.1% > 2.5%, and likewise 1000; so the 95% interval spans both. (The mean's
    # would not: it reaches 10 or 1000 only when all four draws are equal, p = 0.4%.)
    assert (float(low_lr["ci_low"]), float(low_lr["ci_high"])) == (10.0, 1000.0)
    assert err == ""  # nothing to note


def test_plain_table_on_a_pipe(grid, capsys):
    assert main([str(grid)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "PPO CartPole-v1: eval/return_mean"
    assert lines[1].split() == ["variant", "run", "seed", "final", "best", "env", "steps", "wall", "time"]
    # Each row names its run (the run directory), so runs of one seed stay apart.
    assert lines[2].split()[:6] == ["learning_rate=0.0003", "2026-01-01_00-00-00", "0", "10.00", "2000.00", "1,024"]
    aggregate = next(line for line in lines if line.startswith("learning_rate=0.001 ") and "[" in line)
    # 2 runs of 2 distinct seeds.
    assert aggregate.split() == ["learning_rate=0.001", "2", "2", "150.00", "150.00", "[100.00,", "200.00]"]


def test_markdown_and_rich(grid, capsys):
    assert main([str(grid), "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("### PPO CartPole-v1: eval/return_mean\n")
    assert "| learning_rate=0.001 | 2 | 2 | 150.00 | 150.00 | [100.00, 200.00] |" in out
    buffer = io.StringIO()
    print_rich(summarize(read_runs(grid)), file=buffer)
    text = buffer.getvalue()
    assert "265.00" in text and "[100.00, 200.00]" in text


def test_train_return_fallback_is_noted(tmp_path, capsys):
    for seed, final in ((0, 4.0), (1, 6.0)):
        make_run(tmp_path, {LR: 0.001}, seed, {"train/return_mean": [(100, 1.0), (200, final)]})
    status, rows, err = run_csv(capsys, [str(tmp_path)])
    assert status == 0
    assert [float(r["final"]) for r in rows if r["kind"] == "run"] == [4.0, 6.0]
    assert {r["metric"] for r in rows} == {"train/return_mean"}
    assert "no run logged eval/return_mean; final and best are train/return_mean instead" in err
    # An explicit metric has no fallback: nothing to show is an error naming what was logged.
    assert main([str(tmp_path), "--metric", "eval/return_mean"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("lightning-rl results: error: no run logged eval/return_mean;")
    assert "train/return_mean" in err


def test_single_seed_and_different_lengths_are_noted(tmp_path, capsys):
    make_run(tmp_path, {LR: 0.1}, 0, {"eval/return_mean": [(100, 1.0), (200, 3.0)]})
    make_run(tmp_path, {LR: 0.1}, 1, {"eval/return_mean": [(100, 2.0)]})
    make_run(tmp_path, {LR: 0.2}, 0, {"eval/return_mean": [(100, 7.0)]})
    status = main([str(tmp_path)])
    out = capsys.readouterr().out
    assert status == 0
    assert "learning_rate=0.2: a single seed; no confidence interval" in out
    assert "learning_rate=0.1: runs end at different env steps (100 to 200)" in out
    single = next(line for line in out.splitlines() if line.startswith("learning_rate=0.2 ") and "n/a" in line)
    assert single.split() == ["learning_rate=0.2", "1", "1", "7.00", "7.00", "n/a", "(1", "seed)"]


def test_every_run_is_shown_falling_back_per_run_and_saying_so(tmp_path, capsys):
    # Two runs evaluated, one did not (train returns only), one logged neither (a run cut short).
    make_run(tmp_path, {LR: 0.1}, 0, {"eval/return_mean": [(100, 1.0), (200, 3.0)], "train/return_mean": [(200, 9.0)]})
    make_run(tmp_path, {LR: 0.1}, 1, {"eval/return_mean": [(100, 5.0)]})
    no_eval = make_run(tmp_path, {LR: 0.2}, 0, {"train/return_mean": [(100, 4.0), (200, 6.0)]})
    nothing = make_run(tmp_path, {LR: 0.2}, 1, {"perf/env_steps_per_s": [(100, 1000.0)]})
    status = main([str(tmp_path)])
    out = capsys.readouterr().out
    assert status == 0
    lines = out.splitlines()
    assert lines[0] == "PPO CartPole-v1: eval/return_mean"
    rows = [line.split() for line in lines[2:6]]
    # Each run's own last and best value; the evaluated run keeps eval (3.0), not its train return (9.0).
    assert [r[:7] if "*" in r else r[:5] for r in rows] == [
        ["learning_rate=0.1", "2026-01-01_00-00-00", "0", "3.00", "3.00"],
        ["learning_rate=0.1", "2026-01-01_00-00-00", "1", "5.00", "5.00"],
        ["learning_rate=0.2", "2026-01-01_00-00-00", "0", "6.00", "*", "6.00", "*"],
        ["learning_rate=0.2", "2026-01-01_00-00-00", "1", "-", "-"],
    ]
    assert f"1 run(s) without eval/return_mean show train/return_mean instead (marked *): {no_eval}" in out
    assert f"1 run(s) logged no eval/return_mean or train/return_mean (shown with -): {nothing}" in out
    # The variant of the two lr=0.2 runs aggregates the one value it has: mean 6.
    aggregate = next(line for line in lines if line.startswith("learning_rate=0.2 ") and "n/a" in line)
    assert aggregate.split()[:5] == ["learning_rate=0.2", "2", "2", "6.00", "6.00"]  # 2 runs, 2 seeds
    status, rows_csv, _ = run_csv(capsys, [str(tmp_path)])
    assert [r["metric"] for r in rows_csv if r["kind"] == "run"] == [
        "eval/return_mean", "eval/return_mean", "train/return_mean", ""]


def test_one_table_per_algorithm_and_env(tmp_path, capsys):
    make_run(tmp_path, {LR: 0.1}, 0, {"eval/return_mean": [(100, 1.0)]}, name="a")
    make_run(tmp_path, {LR: 0.1}, 0, {"eval/return_mean": [(100, 2.0)]}, name="b", algo="x.A2C")
    make_run(tmp_path, {LR: 0.1}, 0, {"eval/return_mean": [(100, 3.0)]}, name="c", env_id="Acrobot-v1")
    status, rows, _ = run_csv(capsys, [str(tmp_path)])
    assert status == 0
    assert [(r["algo"], r["env"], r["final"]) for r in rows if r["kind"] == "run"] == [
        ("A2C", "CartPole-v1", "2.0"), ("PPO", "Acrobot-v1", "3.0"), ("PPO", "CartPole-v1", "1.0"),
    ]


def test_errors_exit_2_with_the_command_name(tmp_path, capsys, monkeypatch):
    assert main([str(tmp_path / "missing")]) == 2
    assert "lightning-rl results: error: " in capsys.readouterr().err
    assert main([str(tmp_path)]) == 2
    assert "error: no runs under" in capsys.readouterr().err
    make_run(tmp_path, {LR: 0.1}, 0, {"eval/return_mean": [(100, 1.0)]})
    assert main([str(tmp_path), "--plot", str(tmp_path / "curves.svg")]) == 2
    assert "--plot writes a PNG file" in capsys.readouterr().err
    assert main([str(tmp_path), "--format", "html"]) == 2
    assert "invalid choice: 'html'" in capsys.readouterr().err
    assert main([str(tmp_path), "--confidence", "95"]) == 2
    assert "confidence must be in (0, 1), got 95" in capsys.readouterr().err

    import lightning_rl.results.cli as results_cli

    real_find_spec = results_cli.importlib.util.find_spec
    monkeypatch.setattr(results_cli.importlib.util, "find_spec",
                        lambda name, *a: None if name == "matplotlib" else real_find_spec(name, *a))
    assert main([str(tmp_path), "--plot", str(tmp_path / "curves.png")]) == 2
    assert "pip install 'lightning-rl[plot]'" in capsys.readouterr().err
    assert not (tmp_path / "curves.png").exists()


def test_registered_as_a_lightning_rl_subcommand(grid, tmp_path, capsys):
    png = tmp_path / "out" / "curves.png"
    with pytest.raises(SystemExit) as exit_:
        lightning_rl_main(["results", str(grid), "--plot", str(png)])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("PPO CartPole-v1: eval/return_mean\n")
    assert f"wrote {png}" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
