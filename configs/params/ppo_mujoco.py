"""PPO on a MuJoCo task as a parameter file; the defaults give ``configs/ppo/halfcheetah.yaml``.

Coupled values follow the control panel: minibatches from the minibatch size and rollout size,
the epoch length from whole rollouts, and the learning
rate schedule from the env-step budget::

    lightning-rl fit --params configs/params/ppo_mujoco.py --cpanel '{"lr": 1e-4, "env": "Hopper-v5"}'
"""

from __future__ import annotations

from typing import Any

#: Values to change from the command line with ``--cpanel '{"key": value}'``.
CPANEL: dict[str, Any] = {
    "env": "HalfCheetah-v5",
    "n_envs": 8,
    "rollout_steps": 256,
    "rollouts_per_epoch": 10,
    "minibatch_size": 64,
    "epochs": 10,
    "lr": 3e-4,
    "total_env_steps": 1_000_000,
    "eval_every_epochs": 5,
    "eval_episodes": 4,
    "hidden_sizes": [64, 64],
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
            "accelerator": "auto",
            "callbacks": [
                {
                    "class_path": "pytorch_lightning.callbacks.ModelCheckpoint",
                    "init_args": {"save_last": True},
                },
                {
                    "class_path": "lightning_rl.callbacks.EvaluationCallback",
                    "init_args": {"every_n_epochs": cpanel["eval_every_epochs"], "deterministic": True},
                },
            ],
        },
        "model": {
            "class_path": "lightning_rl.algos.PPO",
            "init_args": {
                "agent": {
                    "class_path": "lightning_rl.agents.GaussianPgAgent",
                    # The network named explicitly: the agent supplies (observation shape, action
                    # size). No tanh on the Gaussian mean (SB3's and CleanRL's choice; see the
                    # YAML file's comment for the measured difference).
                    "init_args": {
                        "model": {
                            "class_path": "lightning_rl.models.GaussianPgMlpModel",
                            "init_args": {
                                "hidden_sizes": list(cpanel["hidden_sizes"]),
                                "hidden_nonlinearity": "torch.nn.Tanh",
                                "mu_nonlinearity": None,
                                "init_log_std": 0.0,
                                "normalize_observation": True,
                                "orthogonal_init": True,
                            },
                        },
                    },
                },
                "sampler": {
                    "class_path": "lightning_rl.samplers.CpuSampler",
                    "init_args": {
                        "env_id": cpanel["env"],
                        "batch_T": cpanel["rollout_steps"],
                        "batch_B": cpanel["n_envs"],
                        # Two eval envs share the episodes (at least one each).
                        "eval_n_envs": min(2, cpanel["eval_episodes"]),
                        "eval_max_trajectories": cpanel["eval_episodes"],
                    },
                },
                "discount": 0.99,
                "gae_lambda": 0.95,
                "ratio_clip": 0.2,
                "epochs": cpanel["epochs"],
                "minibatches": rollout_size // cpanel["minibatch_size"],
                "value_loss_coeff": 0.5,
                "entropy_loss_coeff": 0.0,
                "learning_rate": cpanel["lr"],
                "optimizer": {"class_path": "torch.optim.Adam", "init_args": {"eps": 1e-5}},
                "clip_grad_norm": 0.5,
                "normalize_advantage": True,
                # The learning rate (and PPO's clip range) decay to zero over the whole budget.
                "linear_lr_schedule": True,
                "total_env_steps": cpanel["total_env_steps"],
                "log_interval_steps": rollout_size * cpanel["rollouts_per_epoch"],
                "torch_threads": 1,
            },
        },
    }
