"""PPO on CartPole as a parameter file: ``configs/ppo/cartpole.yaml`` with its coupled values in code.

With the default ``CPANEL`` it gives exactly the config of ``configs/ppo/cartpole.yaml``::

    lightning-rl fit --params configs/params/ppo_cartpole.py
    lightning-rl fit --params configs/params/ppo_cartpole.py --cpanel '{"lr": 3e-4, "n_envs": 16}'
"""

from __future__ import annotations

from typing import Any

#: Values to change from the command line with ``--cpanel '{"key": value}'``.
CPANEL: dict[str, Any] = {
    "env": "CartPole-v1",
    "n_envs": 8,
    "rollout_steps": 32,
    "rollouts_per_epoch": 8,
    "minibatch_size": 256,
    "epochs": 20,
    "lr": 1e-3,
    "total_env_steps": 200_000,
    "target_return": 475.0,
    "seed": 1,
}



def gen_params(cpanel: dict[str, Any]) -> dict[str, Any]:
    """The LightningCLI config for the control-panel values ``cpanel``.

    Raises:
        ValueError: If ``minibatch_size`` does not divide the rollout size ``n_envs * rollout_steps``.
    """
    rollout_size = cpanel["n_envs"] * cpanel["rollout_steps"]
    if rollout_size % cpanel["minibatch_size"]:
        raise ValueError(
            f"minibatch_size={cpanel['minibatch_size']} must divide n_envs * rollout_steps = {rollout_size}"
        )
    return {
        "seed_everything": cpanel["seed"],
        "trainer": {
            "max_epochs": -1,
            "accelerator": "cpu",
            "callbacks": [
                {
                    "class_path": "pytorch_lightning.callbacks.ModelCheckpoint",
                    "init_args": {"save_last": True},
                },
                {
                    "class_path": "pytorch_lightning.callbacks.EarlyStopping",
                    "init_args": {
                        "monitor": "train/return_mean",
                        "mode": "max",
                        "stopping_threshold": cpanel["target_return"],
                        "patience": 1_000_000,
                        "strict": False,
                        "check_on_train_epoch_end": True,
                    },
                },
            ],
        },
        "model": {
            "class_path": "lightning_rl.algos.PPO",
            "init_args": {
                "agent": {
                    "class_path": "lightning_rl.agents.CategoricalPgAgent",
                    "init_args": {"hidden_sizes": [64, 64]},
                },
                "sampler": {
                    "class_path": "lightning_rl.samplers.VectorSampler",
                    "init_args": {
                        "env_id": cpanel["env"],
                        "batch_T": cpanel["rollout_steps"],
                        "batch_B": cpanel["n_envs"],
                        # gymnasium's NumPy vector env for CartPole, a SyncVectorEnv for other ids.
                        "backend": "auto",
                    },
                },
                "discount": 0.98,
                "gae_lambda": 0.8,
                "ratio_clip": 0.2,
                "epochs": cpanel["epochs"],
                "minibatches": rollout_size // cpanel["minibatch_size"],
                "value_loss_coeff": 0.5,
                "entropy_loss_coeff": 0.0,
                "learning_rate": cpanel["lr"],
                "clip_grad_norm": 0.5,
                "normalize_advantage": True,
                # The learning rate (and PPO's clip range) decay to zero over the whole budget.
                "linear_lr_schedule": True,
                "total_env_steps": cpanel["total_env_steps"],
                # One Lightning epoch (logging, checkpoint, early-stopping check) per few rollouts.
                "log_interval_steps": rollout_size * cpanel["rollouts_per_epoch"],
                "torch_threads": 1,
            },
        },
    }
