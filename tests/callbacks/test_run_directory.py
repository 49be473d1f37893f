"""Run directory: run_info.yaml, config.yaml, and a resumable checkpoint on SIGINT/SIGUSR1."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import pytorch_lightning as pl
import torch
import yaml
from pytorch_lightning.callbacks import ModelCheckpoint
from pytorch_lightning.loggers import CSVLogger

import lightning_rl
from lightning_rl.agents import CategoricalPgAgent
from lightning_rl.algos import PPO
from lightning_rl.algos.base import RLModule
from lightning_rl.callbacks import RunDirectoryCallback
from lightning_rl.callbacks.run_directory import code_hash, git_commit
from lightning_rl.cli import RLCLI, RLTrainer, main
from lightning_rl.samplers import SerialSampler
from tests.signals import default_sigint

ROOT = Path(__file__).resolve().parents[2]
CARTPOLE = str(ROOT / "configs" / "ppo" / "cartpole.yaml")
QUIET = ["--model.init_args.log_interval_steps", "256", "--model.init_args.epochs", "2",
         "--trainer.enable_progress_bar", "false"]


def tiny_ppo(total_env_steps: int = 32 * 50) -> PPO:
    return PPO(
        CategoricalPgAgent(hidden_sizes=[16]),
        SerialSampler(env_id="CartPole-v1", batch_T=16, batch_B=2),
        epochs=1, minibatches=1, total_env_steps=total_env_steps, log_interval_steps=64,
    )


class SignalAt(pl.Callback):
    """Sends ``sig`` to this process at the end of training batch ``batch`` (global count)."""

    def __init__(self, sig: signal.Signals, batch: int) -> None:
        self.sig, self.batch, self.seen = sig, batch, 0

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.seen += 1
        if self.seen == self.batch:
            os.kill(os.getpid(), self.sig)


def make_trainer(tmp_path: Path, callbacks: list, **kwargs) -> pl.Trainer:
    return pl.Trainer(
        max_epochs=-1, accelerator="cpu", logger=CSVLogger(tmp_path, name="run"), callbacks=callbacks,
        enable_progress_bar=False, enable_model_summary=False, **kwargs,
    )


@pytest.mark.parametrize("sig", [signal.SIGUSR1, signal.SIGINT])
def test_signal_saves_a_checkpoint_and_stops(tmp_path, sig):
    with default_sigint():  # a test run started in the background ignores SIGINT
        handler_before = signal.getsignal(sig)
        pl.seed_everything(0)
        module = tiny_ppo()
        # SignalAt runs first, so the signal arrives before RunDirectoryCallback's hook of the same batch.
        trainer = make_trainer(tmp_path, [SignalAt(sig, batch=3), RunDirectoryCallback()], enable_checkpointing=False)
        trainer.fit(module)
        assert module.train_state.itr == 3  # stopped right after the third rollout
        assert signal.getsignal(sig) is handler_before  # handlers restored
    path = Path(trainer.log_dir) / "checkpoints" / "last.ckpt"
    state = torch.load(path, weights_only=True)
    assert state["global_step"] == 3
    assert state["lightning_rl"]["train_state"]["env_steps"] == 3 * 32

    pl.seed_everything(0)
    resumed = tiny_ppo(total_env_steps=5 * 32)
    make_trainer(tmp_path, [RunDirectoryCallback()], enable_checkpointing=False).fit(resumed, ckpt_path=str(path))
    assert resumed.train_state.env_steps == 5 * 32


class SigtermAtEpochEnd(pl.Callback):
    """Sends SIGTERM at the end of the first training epoch, after its last batch's hooks ran."""

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        if trainer.current_epoch == 0:
            os.kill(os.getpid(), signal.SIGTERM)


def test_sigterm_at_an_epoch_end_saves_at_the_next_batch_end(tmp_path):
    # Lightning's own SIGTERM handler, registered after on_fit_start, would raise SIGTERMException
    # from the fit loop right after this epoch (a checkpoint-less stop): the callback's handler
    # must be the one that runs, so the run saves at the next batch end and fit returns.
    handler_before = signal.getsignal(signal.SIGTERM)
    pl.seed_everything(0)
    module = tiny_ppo()
    callback = RunDirectoryCallback()
    trainer = make_trainer(tmp_path, [SigtermAtEpochEnd(), callback], enable_checkpointing=False)
    trainer.fit(module)
    assert callback.received == signal.SIGTERM and callback.exit_code == 143
    assert not trainer.received_sigterm
    # 64 logging steps of 32 env steps per rollout: two rollouts an epoch, then one more.
    assert module.train_state.itr == 3
    state = torch.load(Path(trainer.log_dir) / "checkpoints" / "last.ckpt", weights_only=True)
    assert state["lightning_rl"]["train_state"]["env_steps"] == 3 * 32
    assert signal.getsignal(signal.SIGTERM) is handler_before


def test_checkpoint_goes_to_the_model_checkpoint_dir(tmp_path):
    pl.seed_everything(0)
    module = tiny_ppo()
    checkpoints = tmp_path / "ckpts"
    callbacks = [SignalAt(signal.SIGUSR1, batch=1), RunDirectoryCallback(), ModelCheckpoint(dirpath=checkpoints)]
    make_trainer(tmp_path, callbacks).fit(module)
    assert module.train_state.itr == 1
    assert torch.load(checkpoints / "last.ckpt", weights_only=True)["global_step"] == 1


def test_run_info_describes_the_code(tmp_path):
    make_trainer(tmp_path, [RunDirectoryCallback(signals=[])], enable_checkpointing=False, max_steps=1).fit(tiny_ppo())
    info = yaml.safe_load((tmp_path / "run" / "version_0" / "run_info.yaml").read_text())
    assert info["lightning_rl_version"] == lightning_rl.__version__
    assert info["code_hash"] == code_hash()
    assert info["torch"] == torch.__version__
    assert info["world_size"] == 1
    assert info["command"] == sys.argv
    assert info["git_commit"] is None or re.fullmatch(r"[0-9a-f]{40}", info["git_commit"])


def test_code_hash_follows_the_source_files(tmp_path):
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "a.py").write_text("x = 1\n")
    (tmp_path / "pkg" / "sub" / "b.py").write_text("y = 2\n")
    (tmp_path / "pkg" / "notes.txt").write_text("not code\n")
    first = code_hash(tmp_path / "pkg")
    assert first.startswith("sha256:") and len(first) == len("sha256:") + 64
    (tmp_path / "pkg" / "notes.txt").write_text("changed\n")
    assert code_hash(tmp_path / "pkg") == first
    (tmp_path / "pkg" / "sub" / "b.py").write_text("y = 3\n")
    assert code_hash(tmp_path / "pkg") != first
    assert git_commit(tmp_path) is None


def test_second_sigint_interrupts_at_once():
    callback = RunDirectoryCallback()
    callback._previous = {signal.SIGINT: signal.default_int_handler}
    callback._handle(signal.SIGINT, None)
    assert callback.received == signal.SIGINT
    with pytest.raises(KeyboardInterrupt):
        callback._handle(signal.SIGINT, None)


def test_bad_signal_name_is_rejected():
    with pytest.raises(ValueError, match="'SIGNOPE' is not a signal name"):
        RunDirectoryCallback(signals=["SIGNOPE"])


def count_run_directory_callbacks(extra: list[str]) -> int:
    cli = RLCLI(RLModule, trainer_class=RLTrainer, subclass_mode_model=True, run=False,
                args=["--config", CARTPOLE, *extra])
    return sum(isinstance(c, RunDirectoryCallback) for c in cli.trainer.callbacks)


def test_cli_adds_one_run_directory_callback(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert count_run_directory_callbacks([]) == 1
    assert count_run_directory_callbacks(["--trainer.callbacks+=lightning_rl.callbacks.RunDirectoryCallback"]) == 1


def test_sigusr1_during_cli_fit_leaves_a_resumable_checkpoint(tmp_path, monkeypatch):
    cmd = [sys.executable, "-m", "lightning_rl.cli", "fit", "--config", CARTPOLE,
           "--model.init_args.total_env_steps", "100000000", *QUIET]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=dict(os.environ, PYTHONUNBUFFERED="1"),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        # run_info.yaml is written right after the signal handlers are installed.
        deadline = time.monotonic() + 120
        while not list(tmp_path.glob("runs/ppo_cartpole/*/run_info.yaml")):
            assert proc.poll() is None, proc.stdout.read()[-3000:]
            assert time.monotonic() < deadline, "training did not start within 120 s"
            time.sleep(0.1)
        time.sleep(1.0)  # let it train a few rollouts
        proc.send_signal(signal.SIGUSR1)
        output, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, output[-3000:]
    assert "Received SIGUSR1: saving" in output
    run_dir = next(tmp_path.glob("runs/ppo_cartpole/*"))
    saved_config = yaml.safe_load((run_dir / "config.yaml").read_text())  # LightningCLI's resolved config
    assert saved_config["model"]["init_args"]["total_env_steps"] == 100000000
    last = run_dir / "checkpoints" / "last.ckpt"
    steps = torch.load(last, weights_only=True)["lightning_rl"]["train_state"]["env_steps"]
    assert 0 < steps < 100000000

    monkeypatch.chdir(tmp_path)
    main(["fit", "--config", CARTPOLE, "--model.init_args.total_env_steps", str(steps + 512), *QUIET,
          "--ckpt_path", "last"])
    assert torch.load(last, weights_only=True)["lightning_rl"]["train_state"]["env_steps"] == steps + 512


@pytest.mark.parametrize("bad", [0, -1.0, float("nan")])
def test_a_shutdown_timeout_that_is_not_positive_is_rejected(bad):
    with pytest.raises(ValueError, match="shutdown_timeout_s: .* must be > 0 seconds"):
        RunDirectoryCallback(shutdown_timeout_s=bad)
