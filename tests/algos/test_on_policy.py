"""PPO and A2C on Lightning: data flow, resume, errors, and learning."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import ModelCheckpoint

from lightning_rl.agents import CategoricalPgAgent, GaussianPgAgent
from lightning_rl.algos import A2C, PPO
from lightning_rl.samplers import SerialSampler


def make_trainer(max_epochs: int = -1, callbacks: list | None = None, **kwargs) -> pl.Trainer:
    return pl.Trainer(
        max_epochs=max_epochs,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=bool(callbacks and any(isinstance(c, ModelCheckpoint) for c in callbacks)),
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=callbacks or [],
        **kwargs,
    )


def cartpole_ppo(total_env_steps: int = 200_000, **kwargs) -> PPO:
    settings = dict(
        discount=0.98, gae_lambda=0.8, ratio_clip=0.2, epochs=20, minibatches=1, value_loss_coeff=0.5,
        entropy_loss_coeff=0.0, learning_rate=1e-3, clip_grad_norm=0.5, log_interval_steps=2048,
    )
    settings.update(kwargs)
    return PPO(
        CategoricalPgAgent(hidden_sizes=[64, 64]),
        SerialSampler(env_id="CartPole-v1", batch_T=32, batch_B=8),
        total_env_steps=total_env_steps,
        **settings,
    )


def assert_same(a, b, where: str) -> None:
    """Exact equality of nested state (tensors, arrays, dicts, lists, scalars)."""
    if isinstance(a, torch.Tensor):
        assert torch.equal(a, b), where
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            assert_same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, np.ndarray):
        np.testing.assert_array_equal(a, b, err_msg=where)
    else:
        assert a == b, where


def params_vector(module: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().flatten().clone() for p in module.parameters()])


class _RecordingPPO(PPO):
    """Records the weights the sampler acts with at each collection and after each update."""

    def setup(self, stage: str) -> None:
        super().setup(stage)
        self.collected_with: list[torch.Tensor] = []
        self.after_update: list[torch.Tensor] = []
        obtain = self.sampler.obtain_samples

        def recording_obtain(itr: int):
            self.collected_with.append(params_vector(self.agent.shared_model or self.agent.model))
            return obtain(itr)

        self.sampler.obtain_samples = recording_obtain

    def training_step(self, batch, batch_idx):
        super().training_step(batch, batch_idx)
        self.after_update.append(params_vector(self.agent.model))


def test_each_rollout_is_collected_with_the_latest_weights():
    pl.seed_everything(0)
    module = _RecordingPPO(
        CategoricalPgAgent(hidden_sizes=[16]),
        SerialSampler(env_id="CartPole-v1", batch_T=16, batch_B=2),
        epochs=1, minibatches=2, total_env_steps=32 * 6, log_interval_steps=32 * 3,
    )
    make_trainer().fit(module)
    assert len(module.collected_with) == 6
    assert len(module.after_update) == 6
    for i in range(1, 6):
        # Rollout i acts with exactly the weights produced by update i-1 (no prefetch).
        assert torch.equal(module.collected_with[i], module.after_update[i - 1])
        assert not torch.equal(module.collected_with[i], module.collected_with[i - 1])


def test_budget_in_env_steps_sets_epochs_and_stops():
    pl.seed_everything(0)
    module = cartpole_ppo(total_env_steps=256 * 5, log_interval_steps=512, epochs=1)
    trainer = make_trainer()
    trainer.fit(module)
    assert module.train_state.env_steps == 256 * 5
    assert module.train_state.itr == 5
    assert trainer.current_epoch == 3  # epochs of 2 rollouts: 2 full, then 1 stopped after one rollout
    assert module.train_state.updates == 5


def test_exact_resume_matches_an_uninterrupted_run(tmp_path):
    def run(max_epochs: int, dirpath, ckpt_path=None) -> PPO:
        pl.seed_everything(3)
        module = cartpole_ppo(total_env_steps=10**6, log_interval_steps=512, epochs=2, minibatches=4)
        ckpt = ModelCheckpoint(dirpath=dirpath, save_last=True, save_top_k=-1)
        make_trainer(max_epochs=max_epochs, callbacks=[ckpt]).fit(module, ckpt_path=ckpt_path)
        return module

    full = run(4, tmp_path / "full")
    run(2, tmp_path / "part")
    resumed = run(4, tmp_path / "part", ckpt_path=str(tmp_path / "part" / "last.ckpt"))
    assert resumed.train_state.env_steps == full.train_state.env_steps == 4 * 512
    assert_same(full.state_dict(), resumed.state_dict(), "state_dict")
    assert_same(full.optimizers().state_dict(), resumed.optimizers().state_dict(), "optimizer")


def test_a2c_one_update_per_rollout_changes_weights():
    pl.seed_everything(0)
    module = A2C(
        CategoricalPgAgent(hidden_sizes=[16]),
        SerialSampler(env_id="CartPole-v1", batch_T=5, batch_B=4),
        total_env_steps=200, log_interval_steps=100,
    )
    trainer = make_trainer()
    module_before = None

    class Snapshot(pl.Callback):
        def on_train_start(self, trainer, pl_module):
            nonlocal module_before
            module_before = params_vector(pl_module.agent)

    trainer.callbacks.append(Snapshot())
    trainer.fit(module)
    assert module.train_state.updates == 10
    assert not torch.equal(module_before, params_vector(module.agent))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(ratio_clip=-0.1), "ratio_clip"),
        (dict(epochs=0), "epochs"),
        (dict(discount=1.5), "discount"),
        (dict(learning_rate=0.0), "learning_rate"),
        (dict(total_env_steps=-5), "total_env_steps"),
    ],
)
def test_bad_hyperparameters_name_the_parameter(kwargs, match):
    with pytest.raises(ValueError, match=match):
        cartpole_ppo(**kwargs)


def test_unknown_env_fails_with_the_env_id():
    module = PPO(CategoricalPgAgent(), SerialSampler(env_id="NoSuchEnv-v9", batch_T=8, batch_B=2), total_env_steps=64)
    with pytest.raises(ValueError, match="NoSuchEnv-v9"):
        make_trainer().fit(module)


def test_categorical_agent_on_continuous_actions_fails_clearly():
    module = PPO(CategoricalPgAgent(), SerialSampler(env_id="Pendulum-v1", batch_T=8, batch_B=2), total_env_steps=64)
    with pytest.raises(ValueError, match="(?i)discrete|IntBox"):
        make_trainer().fit(module)


def test_minibatches_must_divide_the_batch_at_construction():
    # Checked when the module is built (before any env or worker exists), naming both numbers.
    with pytest.raises(ValueError, match=r"minibatches=3 must divide batch_T \* batch_B = "):
        cartpole_ppo(total_env_steps=256, minibatches=3, epochs=1)
    with pytest.raises(ValueError, match=r"minibatches=3 must divide batch_B .* = 2"):
        PPO(CategoricalPgAgent(hidden_sizes=[16], lstm_size=16),
            SerialSampler(env_id="CartPole-v1", batch_T=8, batch_B=2), minibatches=3, linear_lr_schedule=False)


def test_recurrent_agent_needs_wait_reset_collection():
    module = PPO(
        CategoricalPgAgent(hidden_sizes=[16], lstm_size=16),
        SerialSampler(env_id="CartPole-v1", batch_T=8, batch_B=2, collector="reset"),
        total_env_steps=64,
        minibatches=2,
    )
    with pytest.raises(ValueError, match="wait_reset"):
        make_trainer().fit(module)


def test_recurrent_ppo_trains_on_sequences():
    pl.seed_everything(0)
    module = PPO(
        CategoricalPgAgent(hidden_sizes=[16], lstm_size=16),
        SerialSampler(env_id="CartPole-v1", batch_T=16, batch_B=4, collector="wait_reset"),
        epochs=2, minibatches=2, total_env_steps=64 * 3, log_interval_steps=64,
    )
    before = None

    class Snapshot(pl.Callback):
        def on_train_start(self, trainer, pl_module):
            nonlocal before
            before = params_vector(pl_module.agent)

    make_trainer(callbacks=[Snapshot()]).fit(module)
    assert module.train_state.updates == 3 * 2 * 2
    assert not torch.equal(before, params_vector(module.agent))


def test_continuous_actions_and_tiny_atari_pipeline():
    pl.seed_everything(0)
    gaussian = PPO(
        GaussianPgAgent(hidden_sizes=[16]),
        SerialSampler(env_id="Pendulum-v1", batch_T=16, batch_B=2),
        epochs=1, minibatches=2, total_env_steps=64, log_interval_steps=64,
    )
    make_trainer().fit(gaussian)
    assert gaussian.train_state.updates == 2 * 2
    atari = A2C(
        CategoricalPgAgent(),
        SerialSampler(env_id="ALE/Pong-v5", batch_T=16, batch_B=2),
        total_env_steps=160, log_interval_steps=160,
    )
    make_trainer().fit(atari)
    assert atari.train_state.env_steps == 160
    assert atari.train_state.updates == 5


def _return_mean(module) -> float:
    return float(module.trainer.callback_metrics["train/return_mean"])


@pytest.mark.slow
def test_ppo_solves_cartpole():
    pl.seed_everything(1)
    module = cartpole_ppo(total_env_steps=200_000)
    stop = pl.callbacks.EarlyStopping(
        monitor="train/return_mean", mode="max", stopping_threshold=475.0, patience=10**9, strict=False,
        check_on_train_epoch_end=True,
    )
    make_trainer(callbacks=[stop]).fit(module)
    assert _return_mean(module) >= 475.0, module.train_state


@pytest.mark.slow
def test_a2c_solves_cartpole():
    pl.seed_everything(1)
    module = A2C(
        CategoricalPgAgent(hidden_sizes=[64, 64]),
        SerialSampler(env_id="CartPole-v1", batch_T=5, batch_B=8),
        discount=0.99, entropy_loss_coeff=0.0, learning_rate=7e-4, clip_grad_norm=0.5,
        optimizer=functools.partial(torch.optim.RMSprop, alpha=0.99, eps=1e-5),  # the config's RMSprop
        total_env_steps=500_000, log_interval_steps=4000,
    )
    stop = pl.callbacks.EarlyStopping(
        monitor="train/return_mean", mode="max", stopping_threshold=475.0, patience=10**9, strict=False,
        check_on_train_epoch_end=True,
    )
    make_trainer(callbacks=[stop]).fit(module)
    assert _return_mean(module) >= 475.0, module.train_state


@pytest.mark.slow
def test_ppo_improves_on_inverted_pendulum():
    pl.seed_everything(0)
    module = PPO(
        GaussianPgAgent(hidden_sizes=[64, 64]),
        SerialSampler(env_id="InvertedPendulum-v5", batch_T=256, batch_B=4),
        discount=0.99, gae_lambda=0.95, ratio_clip=0.2, epochs=10, minibatches=16, entropy_loss_coeff=0.0,
        learning_rate=1e-3, value_loss_coeff=0.5, clip_grad_norm=0.5, total_env_steps=20_480,
        log_interval_steps=2048,
    )
    history = []

    class Track(pl.Callback):
        def on_train_epoch_end(self, trainer, pl_module):
            history.append(float(trainer.callback_metrics["train/return_mean"]))

    make_trainer(callbacks=[Track()]).fit(module)
    assert len(history) == 10
    # A random policy balances for about 10 steps; PPO should at least quadruple that.
    assert history[-1] > 4 * history[0], history


def test_observation_normalization_learns_from_each_rollout_after_its_updates():
    pl.seed_everything(0)
    module = PPO(
        GaussianPgAgent(hidden_sizes=[16], normalize_observation=True),
        SerialSampler(env_id="Pendulum-v1", batch_T=32, batch_B=2),
        epochs=1, minibatches=1, total_env_steps=3 * 64, log_interval_steps=64,
    )
    seen, stats_while_training = [], []

    class Record(pl.Callback):
        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            rms = pl_module.agent.model.encoder.obs_rms
            stats_while_training.append((float(rms.count), rms.mean.clone()))
            seen.append(batch.agent_inputs.observation.reshape(-1, 3))

    make_trainer(callbacks=[Record()]).fit(module)
    rms = module.agent.model.encoder.obs_rms
    # Rollout k is trained on with the statistics of rollouts < k; all three are folded in at the end.
    assert [c for c, _ in stats_while_training] == [0.0, 64.0, 128.0]
    everything = torch.cat(seen)
    assert float(rms.count) == 192
    torch.testing.assert_close(rms.mean, everything.mean(0), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(rms.var, everything.var(0, unbiased=False), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(stats_while_training[1][1], seen[0].mean(0), rtol=1e-5, atol=1e-5)
