"""Section profiler: nested totals, counts, Lightning integration, sampler vs learner report."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
import pytorch_lightning as pl
from pytorch_lightning.profilers import PassThroughProfiler

from lightning_rl.agents import CategoricalPgAgent
from lightning_rl.algos import PPO
from lightning_rl.profiler import SectionProfiler
from lightning_rl.samplers import SerialSampler


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture()
def clock(monkeypatch):
    fake = FakeClock()
    monkeypatch.setattr("lightning_rl.profiler.time", SimpleNamespace(perf_counter=fake.perf_counter))
    return fake


def test_nested_sections_add_up(clock):
    profiler = SectionProfiler()
    for child_seconds in (2.0, 4.0):
        with profiler("sampler"):
            clock.advance(0.5)
            with profiler("sampler/obtain"):
                clock.advance(child_seconds)
            with profiler("sampler/targets"):
                clock.advance(0.25)
    with profiler("learner"):
        clock.advance(3.0)
    clock.advance(0.5)  # outside any section
    report = profiler.report()
    assert list(report) == ["learner", "sampler", "sampler/obtain", "sampler/targets"]
    assert report["sampler"]["total"] == pytest.approx(2 * 0.75 + 6.0)
    assert report["sampler"]["count"] == 2
    assert report["sampler/obtain"] == pytest.approx(
        {"total": 6.0, "count": 2, "mean": 3.0, "min": 2.0, "max": 4.0, "fraction": 6.0 / 11.0}
    )
    assert report["sampler/targets"]["total"] == pytest.approx(0.5)
    assert report["learner"]["fraction"] == pytest.approx(3.0 / 11.0)
    summary = profiler.summary()
    assert "wall time 11.000 s" in summary
    assert "time split: sampler 7.500 s (68.2%), learner 3.000 s (27.3%)" in summary
    obtain_row = next(line for line in summary.splitlines() if line.strip().startswith("obtain"))
    assert obtain_row.startswith("  obtain")  # indented under "sampler"
    assert obtain_row.split()[1:] == ["6.0000", "2", "3000.000", "80.0", "54.5"]


def test_child_without_recorded_parent_keeps_its_full_name(clock):
    profiler = SectionProfiler()
    with profiler("learner/update"):
        clock.advance(1.0)
    assert "learner/update" in profiler.summary()
    assert "sampler 0.000 s" in profiler.summary()


def test_start_and_stop_errors_name_the_section():
    profiler = SectionProfiler()
    profiler.start("sampler")
    with pytest.raises(ValueError, match="'sampler' is already running"):
        profiler.start("sampler")
    with pytest.raises(ValueError, match="'learner' was never started"):
        profiler.stop("learner")
    profiler.stop("sampler")
    assert profiler.report()["sampler"]["count"] == 1
    profiler.reset()
    assert profiler.report() == {}
    assert "no sections recorded" in profiler.summary()


def test_lightning_actions_are_aliased_or_left_out():
    profiler = SectionProfiler()
    lightning_names = (
        "[Strategy]SingleDeviceStrategy.training_step", "[Callback]X.on_train_batch_end", "run_training_batch"
    )
    for name in lightning_names:
        with profiler.profile(name):
            pass
    assert list(profiler.report()) == ["learner"]
    everything = SectionProfiler(aliases={}, lightning_actions=True)
    for name in ("[Strategy]SingleDeviceStrategy.training_step", "optimizer_step"):
        with everything.profile(name):
            pass
    assert sorted(everything.report()) == ["[Strategy]SingleDeviceStrategy.training_step", "optimizer_step"]


def test_sections_in_a_ppo_fit(tmp_path):
    pl.seed_everything(0)
    epochs, minibatches, rollouts = 2, 2, 4
    module = PPO(
        CategoricalPgAgent(hidden_sizes=[16]),
        SerialSampler(env_id="CartPole-v1", batch_T=16, batch_B=2),
        epochs=epochs, minibatches=minibatches, total_env_steps=32 * rollouts, log_interval_steps=64,
    )
    profiler = SectionProfiler(dirpath=tmp_path, filename="sections")
    trainer = pl.Trainer(
        max_epochs=-1, accelerator="cpu", logger=False, enable_checkpointing=False, enable_progress_bar=False,
        enable_model_summary=False, profiler=profiler,
    )
    trainer.fit(module)
    report = profiler.report()
    assert set(report) == {"sampler", "sampler/obtain", "sampler/targets", "learner", "learner/update"}
    for name in ("sampler", "sampler/obtain", "sampler/targets", "learner"):
        assert report[name]["count"] == rollouts, name
    assert report["learner/update"]["count"] == rollouts * epochs * minibatches == module.train_state.updates
    assert report["sampler/obtain"]["total"] + report["sampler/targets"]["total"] <= report["sampler"]["total"]
    assert report["learner/update"]["total"] <= report["learner"]["total"]
    assert report["sampler"]["total"] + report["learner"]["total"] <= profiler.wall_time()
    # Lightning describes the profile at the end of fit: into the file when one is named.
    written = (tmp_path / "fit-sections.txt").read_text()
    assert "time split: sampler" in written and "  update" in written


def test_disabled_sections_cost_about_nothing():
    profiler = PassThroughProfiler()
    n = 20_000
    t0 = time.perf_counter()
    for _ in range(n):
        with profiler.profile("sampler/obtain"):
            pass
    per_section = (time.perf_counter() - t0) / n
    # A rollout opens 3 sections and an update 1; a PPO update alone takes about 1 ms.
    assert per_section < 20e-6
