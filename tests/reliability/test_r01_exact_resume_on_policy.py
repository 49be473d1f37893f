"""Row 1: PPO resumed from a checkpoint in a new process continues exactly as if never stopped.

PPO on CartPole, CPU, ``Trainer(deterministic=True)``, 2 envs (SerialSampler), an
``ExponentialLR`` scheduler (the learning rate changes every iteration, so its state matters).
An epoch is one sampler iteration. (a) This process runs 2N iterations. (b) It runs N and saves
``last.ckpt``; a new Python process (another global seed) resumes it with ``fit(ckpt_path=...)``
and runs N more. Compared (:func:`~tests.reliability.exact_resume.resume_matches_uninterrupted_run`),
from the live objects: every loss term of every update (within 1e-8) and the logged losses;
all parameters, optimizer states, learning rates, scheduler states, ``global_step``, the
env-step, iteration and update counters, the envs (physics, step counters, ``np_random`` and
action-space generators), the collector's buffers, the python/numpy/torch and minibatch-shuffle
generators, right after the reload and at the end; and the final checkpoints' ``state_dict``,
``loops``, ``lr_schedulers``, optimizer states and ``lightning_rl`` entry.
"""

from __future__ import annotations

import functools

import pytest
import torch

from lightning_rl.agents import CategoricalPgAgent
from lightning_rl.algos import PPO
from lightning_rl.samplers import SerialSampler
from tests.reliability.exact_resume import SEED, keep_determinism_flag, resume_matches_uninterrupted_run

N = 3
T, B = 32, 2
EPOCHS, MINIBATCHES = 2, 2


def build_ppo() -> PPO:
    return PPO(
        CategoricalPgAgent(hidden_sizes=[16]), SerialSampler(env_id="CartPole-v1", batch_T=T, batch_B=B),
        epochs=EPOCHS, minibatches=MINIBATCHES, linear_lr_schedule=False,
        lr_scheduler=functools.partial(torch.optim.lr_scheduler.ExponentialLR, gamma=0.8),
        total_env_steps=10**6, log_interval_steps=T * B, seed=SEED, torch_threads=1,
    )


@pytest.fixture(autouse=True)
def _restore_torch_flags():
    yield from keep_determinism_flag()


def test_ppo_resumed_in_a_new_process_matches_an_uninterrupted_run(tmp_path):
    full, part, resumed, wall = resume_matches_uninterrupted_run(tmp_path, f"{__name__}:build_ppo", N)
    assert wall < 30, wall
    # The counters, by hand: N iterations of T * B env steps and EPOCHS * MINIBATCHES updates,
    # the learning rate 1e-3 times 0.8 per iteration; then as many again.
    saved = part["at_save"][str(N)]
    assert saved["train_state"]["env_steps"] == N * T * B
    assert saved["train_state"]["updates"] == saved["global_step"] == N * EPOCHS * MINIBATCHES
    assert saved["lr"] == [[pytest.approx(1e-3 * 0.8**N)]]
    final = resumed["final"]
    assert final["train_state"]["env_steps"] == 2 * N * T * B
    assert final["train_state"]["updates"] == final["global_step"] == 2 * N * EPOCHS * MINIBATCHES
    assert final["lr"] == [[pytest.approx(1e-3 * 0.8 ** (2 * N))]]
    assert len(resumed["losses"]) == N * EPOCHS * MINIBATCHES


def build_vector_ppo() -> PPO:
    from lightning_rl.samplers import VectorSampler

    return PPO(
        CategoricalPgAgent(hidden_sizes=[16]),
        VectorSampler(env_id="CartPole-v1", batch_T=T, batch_B=4, backend="gymnasium", max_decorrelation_steps=20),
        epochs=EPOCHS, minibatches=MINIBATCHES, total_env_steps=10**6, log_interval_steps=T * 4, seed=SEED,
        torch_threads=1,
    )


def test_ppo_on_the_gymnasium_vector_backend_resumes_exactly(tmp_path):
    # The vector env's state and the collector's are in the checkpoint, so episodes that span the
    # save continue: the resumed run (another global seed) ends with the uninterrupted run's
    # weights, bit for bit, and collected the same observations.
    import pytorch_lightning as pl
    from pytorch_lightning.callbacks import ModelCheckpoint

    from tests.algos.test_on_policy import make_trainer, params_vector

    def fit(max_epochs: int, seed: int, **kwargs) -> tuple[PPO, list]:
        pl.seed_everything(seed)
        module = build_vector_ppo()
        observations: list = []
        trainer = make_trainer(max_epochs=max_epochs, callbacks=kwargs.pop("callbacks", []))
        module.setup("fit")
        obtain = module.sampler.obtain_samples

        def recording(*args, **kw):
            samples, trajs = obtain(*args, **kw)
            observations.append(samples.env.observation.copy())
            return samples, trajs

        module.sampler.obtain_samples = recording
        trainer.fit(module, **kwargs)
        return module, observations

    full, full_obs = fit(2 * N, 0)
    _, part_obs = fit(N, 0, callbacks=[ModelCheckpoint(dirpath=tmp_path, save_last=True)])
    resumed, resumed_obs = fit(2 * N, 99, ckpt_path=str(tmp_path / "last.ckpt"))
    assert len(full_obs) == 2 * N and len(part_obs) == N and len(resumed_obs) == N
    for a, b in zip(part_obs + resumed_obs, full_obs, strict=True):
        assert (a == b).all()
    assert torch.equal(params_vector(resumed.agent), params_vector(full.agent))
    assert resumed.train_state.env_steps == full.train_state.env_steps == 2 * N * T * 4
