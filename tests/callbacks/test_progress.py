"""The env-step progress display as a person sees it: under a pseudo-terminal (Rich) and with stdout
redirected (plain lines every N seconds), and the end summary."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import pytorch_lightning as pl

from lightning_rl.callbacks.progress import RLProgressBar, format_duration
from lightning_rl.cli import main

ROOT = Path(__file__).resolve().parents[2]
CARTPOLE = str(ROOT / "configs" / "ppo" / "cartpole.yaml")
RUN = ["fit", "--config", CARTPOLE, "--model.init_args.total_env_steps", "4096",
       "--model.init_args.log_interval_steps", "512", "--model.init_args.epochs", "2"]
LINE = re.compile(r"([\d,]+)/4,096 env steps \(\d+%\) \| [\d,]+ steps/s \| ETA ≤\d+:\d\d \(to the 4,096-step budget; "
                  r"stops earlier at return ≥475\) \| return [-\d.]+ \| best eval - \| elapsed \d+:\d\d")


def env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1", TERM="xterm-256color", COLUMNS="160")


def test_at_80_columns_every_line_fits_and_keeps_env_steps_return_and_the_eta_with_its_target(tmp_path):
    pexpect = pytest.importorskip("pexpect")
    child = pexpect.spawn(sys.executable, ["-m", "lightning_rl.cli", *RUN], cwd=str(tmp_path),
                          env=dict(env(), COLUMNS="80", LINES="24"), encoding="utf-8", timeout=240, dimensions=(24, 80))
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before[-3000:]
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", child.before)
    drawn = re.split(r"[\r\n]", plain)
    assert max(len(line) for line in drawn) <= 80
    progress = [line for line in drawn if "/4,096 env steps" in line]
    assert progress, plain[-2000:]
    # Env steps, the last mean return and the ETA with what it counts to: the budget, or the main
    # config's return threshold, which may stop the run first.
    pattern = r"[\d,]+/4,096 env steps( \d+%)? \| return [-\d.]+ \| ETA ≤\d+:\d\d \(4\.1k or return ≥475\).*"
    for line in progress:
        assert re.fullmatch(pattern, line.rstrip()), line
    assert progress[-1].startswith("4,096/4,096 env steps 100%")


def test_rich_display_under_a_pseudo_terminal_shows_env_steps_eta_and_return(tmp_path):
    pexpect = pytest.importorskip("pexpect")
    child = pexpect.spawn(sys.executable, ["-m", "lightning_rl.cli", *RUN], cwd=str(tmp_path), env=env(),
                          encoding="utf-8", timeout=240, dimensions=(40, 160))
    child.expect(pexpect.EOF)
    child.close()
    out = child.before
    assert child.exitstatus == 0, out[-3000:]
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out)  # Rich's cursor and colour codes
    assert "\x1b[" in out  # drawn as a live display, not printed line by line
    assert "env steps" in plain and "/s" in plain and "ETA " in plain and "return " in plain
    assert "4,096/4,096 env steps 100%" in plain
    assert "stopped: budget: total_env_steps=4,096 reached" in plain


def test_redirected_stdout_gets_plain_lines_and_the_end_summary(tmp_path):
    out_file = tmp_path / "out.txt"
    with open(out_file, "w") as out:
        proc = subprocess.run(
            [sys.executable, "-m", "lightning_rl.cli", *RUN,
             "--trainer.callbacks+=lightning_rl.callbacks.RLProgressBar", "--trainer.callbacks.print_interval_s=0"],
            cwd=tmp_path, env=env(), stdout=out, stderr=subprocess.PIPE, text=True, timeout=240,
        )
    text = out_file.read_text()
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "\x1b[" not in text  # no terminal codes in a log file
    steps = [int(m.group(1).replace(",", "")) for m in LINE.finditer(text)]
    # One line per sampler iteration (interval 0): 256, 512, ... env steps, in order.
    assert steps == list(range(256, 4097, 256)), text[-3000:]
    (run_dir,) = (tmp_path / "runs" / "ppo_cartpole").iterdir()
    summary = text[text.index("stopped:"):].splitlines()
    assert summary[0] == "stopped: budget: total_env_steps=4,096 reached"
    assert summary[1] == "env steps: 4,096 of 4,096"
    assert re.fullmatch(r"wall time: \d+:\d\d \([\d,]+ env steps/s\)", summary[2])
    assert summary[3].startswith("last mean return: ")
    # The config does not evaluate: no eval line.
    assert summary[4] == f"checkpoint: {run_dir.relative_to(tmp_path)}/checkpoints/last.ckpt"
    assert summary[5] == f"play it: lightning-rl play {run_dir.relative_to(tmp_path)}"
    assert not any("eval" in line for line in summary)


def test_default_interval_prints_no_periodic_line_in_a_short_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    main(RUN)
    out = capsys.readouterr().out
    assert not LINE.search(out)  # 30 s between lines: none in a run of a few seconds
    assert "stopped: budget" in out


def test_summary_names_the_return_threshold(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "cartpole.yaml"
    config.write_text(Path(CARTPOLE).read_text().replace("stopping_threshold: 475.0", "stopping_threshold: 5.0"))
    main(["fit", "--config", str(config), *RUN[3:]])
    out = capsys.readouterr().out
    stopped = next(line for line in out.splitlines() if line.startswith("stopped:"))
    assert stopped.startswith("stopped: return threshold: ") and "train/return_mean" in stopped
    steps = int(re.search(r"env steps: ([\d,]+) of", out).group(1).replace(",", ""))
    assert steps < 4096


def test_format_duration_and_bad_intervals():
    assert format_duration(59.4) == "0:59"
    assert format_duration(3 * 3600 + 62) == "3:01:02"
    assert format_duration(float("inf")) == "?"
    with pytest.raises(ValueError, match="print_interval_s"):
        RLProgressBar(print_interval_s=-1)
    with pytest.raises(ValueError, match="refresh_interval_s"):
        RLProgressBar(refresh_interval_s=-1)


class RaiseAt(pl.Callback):
    """Raises ``RuntimeError("boom")`` at the end of training batch ``batch``."""

    def __init__(self, batch: int) -> None:
        self.batch = batch

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if batch_idx + 1 == self.batch:
            raise RuntimeError("boom")


def tiny_fit(callbacks: list, tmp_path: Path, bar: RLProgressBar | None = None, eval_n_envs: int = 0,
             total_env_steps: int = 32 * 20) -> RLProgressBar:
    from lightning_rl.agents import CategoricalPgAgent
    from lightning_rl.algos import PPO
    from lightning_rl.samplers import SerialSampler

    pl.seed_everything(0)
    sampler = SerialSampler(env_id="CartPole-v1", batch_T=16, batch_B=2, eval_n_envs=eval_n_envs,
                            eval_max_trajectories=2 if eval_n_envs else None)
    module = PPO(CategoricalPgAgent(hidden_sizes=[16]), sampler,
                 epochs=1, minibatches=1, total_env_steps=total_env_steps, log_interval_steps=64)
    bar = bar if bar is not None else RLProgressBar(rich=False)
    trainer = pl.Trainer(max_epochs=-1, accelerator="cpu", logger=False, default_root_dir=tmp_path,
                         callbacks=[*callbacks, bar], enable_model_summary=False)
    trainer.fit(module)
    return bar


def test_a_budget_of_no_whole_number_of_iterations_says_where_it_stopped(tmp_path):
    bar = tiny_fit([], tmp_path, total_env_steps=100)  # 32 env steps an iteration: 3 iterations, 96 steps
    assert bar.summary[:2] == [
        "stopped: budget: 96 of total_env_steps=100 (one more iteration of 32 would pass it)",
        "env steps: 96 of 100",
    ]
    assert tiny_fit([], tmp_path, total_env_steps=96).summary[0] == "stopped: budget: total_env_steps=96 reached"


def test_summary_names_an_interrupt(tmp_path):
    from lightning_rl.callbacks import RunDirectoryCallback
    from tests.callbacks.test_run_directory import SignalAt
    from tests.signals import default_sigint

    with default_sigint():  # a test run started in the background ignores SIGINT
        bar = tiny_fit([SignalAt(signal.SIGINT, batch=3), RunDirectoryCallback()], tmp_path)
    assert bar.summary[0] == "stopped: interrupted (SIGINT)"
    assert bar.summary[1] == "env steps: 96 of 640"
    assert bar.summary[4].endswith("checkpoints/last.ckpt")  # saved on the signal


def test_summary_names_an_error(tmp_path, capsys):
    with pytest.raises(RuntimeError, match="boom"):
        tiny_fit([RaiseAt(batch=2)], tmp_path)
    out = capsys.readouterr().out
    assert "stopped: error: RuntimeError: boom" in out
    assert "env steps: 64 of 640" in out


def test_wall_time_counts_from_the_start_of_the_process(tmp_path):
    import time

    bar = RLProgressBar(rich=False)
    bar.process_start = time.monotonic() - 125.0  # the command started 2 minutes before fitting
    tiny_fit([], tmp_path, bar)
    assert re.fullmatch(r"wall time: 2:0\d \([\d,]+ env steps/s\)", bar.summary[2]), bar.summary


def test_the_best_eval_return_is_every_evaluations_not_the_drawn_ones(tmp_path):
    from lightning_rl.callbacks import EvaluationCallback

    evaluation = EvaluationCallback(every_n_epochs=1, save_best=False)
    seen: list[float] = []

    class Record(pl.Callback):
        def on_train_epoch_end(self, trainer, pl_module) -> None:
            seen.append(evaluation.last_metrics["eval/return_mean"])

    # No line is ever drawn (a 1e9 s interval, no terminal): the summary still has the best of the 10 evaluations.
    bar = tiny_fit([evaluation, Record()], tmp_path, RLProgressBar(rich=False, print_interval_s=1e9), eval_n_envs=1)
    assert len(seen) == 10
    # save_best=False: the summary says why there is no best.ckpt beside the best return.
    assert f"best eval return: {max(seen):.1f} (no best.ckpt: the evaluation saves none)" in bar.summary


def fields(**changes):
    base = {"steps": 63_488, "total": 200_000, "target": 200_000, "target_label": "budget", "threshold": "",
            "rate": 2104.0, "eta_s": 65.0, "return_mean": 478.9, "eval_return": None, "elapsed_s": 31.0}
    return {**base, **changes}


def test_the_line_for_a_terminal_drops_the_least_needed_fields_first():
    bar = RLProgressBar()
    wide = bar.format_fitted(fields(eval_return=500.0), 200)
    assert wide == ("63,488/200,000 env steps 32% | return 478.9 | ETA 1:05 (to 200k) | best eval 500.0 | 2.1k/s | "
                    "elapsed 0:31")
    at_80 = bar.format_fitted(fields(eval_return=500.0, threshold="return ≥475"), 80)
    assert at_80 == "63,488/200,000 env steps 32% | return 478.9 | ETA ≤1:05 (200k or return ≥475)"
    narrow = bar.format_fitted(fields(), 52)
    assert narrow == "63,488/200,000 env steps | return 478.9 | ETA 1:05"


def test_the_eta_counts_to_max_epochs_when_the_trainer_stops_first(tmp_path):
    bar = RLProgressBar(rich=False)
    trainer_args = {"max_epochs": 3}
    from lightning_rl.agents import CategoricalPgAgent
    from lightning_rl.algos import PPO
    from lightning_rl.samplers import SerialSampler

    module = PPO(CategoricalPgAgent(hidden_sizes=[16]), SerialSampler(env_id="CartPole-v1", batch_T=16, batch_B=2),
                 epochs=1, minibatches=1, total_env_steps=32 * 20, log_interval_steps=64)
    trainer = pl.Trainer(accelerator="cpu", logger=False, enable_checkpointing=False, callbacks=[bar],
                         enable_model_summary=False, default_root_dir=tmp_path, **trainer_args)
    trainer.fit(module)
    # 3 epochs of 64 env steps: 192 of the 640-step budget; the ETA counted to max_epochs.
    assert bar.target(trainer, module) == (192, "max_epochs")
    assert bar.summary[1] == "env steps: 192 of 640"
    assert bar.format_line({**bar.fields(module), "eta_s": 0.0}).split(" | ")[2] == (
        "ETA 0:00 (to max_epochs (192 env steps))")
