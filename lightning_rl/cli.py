"""The ``lightning-rl`` command: LightningCLI with ``fit``, ``validate`` and ``play``.

Examples::

    lightning-rl fit --config configs/ppo/cartpole.yaml
    lightning-rl fit --config configs/ppo/cartpole.yaml --ckpt_path last
    lightning-rl validate --config configs/ppo/cartpole.yaml --ckpt_path path/to.ckpt
    lightning-rl play --config configs/ppo/cartpole.yaml --ckpt_path path/to.ckpt --video_folder videos
    lightning-rl fit --config configs/ppo/cartpole.yaml --print_config
    lightning-rl fit --params configs/params/ppo_mujoco.py --cpanel '{"lr": 1e-4, "env": "Hopper-v5"}'

``--params FILE --cpanel JSON`` runs a parameter file's ``gen_params`` (``lightning_rl.params``)
and hands its config to LightningCLI in place of a ``--config`` file. Each run's log dir keeps the
resolved ``config.yaml`` (LightningCLI) and ``run_info.yaml`` (version, code hash, git commit); on
SIGINT or SIGUSR1 the run saves ``last.ckpt`` and exits (status 1 after Ctrl-C, as Lightning's,
0 after SIGUSR1; SIGTERM: 143), so ``--ckpt_path last`` resumes it (``RunDirectoryCallback``,
added unless the config has one).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import ProgressBar, RichProgressBar
from pytorch_lightning.cli import LightningCLI

from lightning_rl.algos.base import RLModule
from lightning_rl.algos.checkpointing import check_resume, load_data
from lightning_rl.callbacks.run_directory import RunDirectoryCallback
from lightning_rl.params import expand_params_args


class RLTrainer(pl.Trainer):
    """``pl.Trainer`` plus :meth:`play`, which the CLI exposes as a subcommand."""

    def play(
        self,
        model: RLModule,
        ckpt_path: str | None = None,
        episodes: int = 3,
        deterministic: bool = True,
        video_folder: str | None = None,
        seed: int = 0,
        max_steps_per_episode: int = 100_000,
        weights_only: bool | None = None,
        verbose: bool = True,
    ) -> list[dict[str, float]]:
        """Run the agent of a checkpoint for a few episodes, optionally recording videos.

        Args:
            model: The module from the config (its agent and the sampler's env id are used).
            ckpt_path: Checkpoint to load; None plays the untrained agent.
            episodes: Episodes to play.
            deterministic: Act with the policy's mode instead of sampling.
            video_folder: Write one ``.mp4`` per episode here (gymnasium's ``RecordVideo`` for
                gymnasium envs, rendered emulator frames for Atari).
            seed: Env seed.
            max_steps_per_episode: Safety limit for envs without a time limit.
            weights_only: Accepted so that a run's saved ``config.yaml`` (which records ``fit``'s
                ``weights_only``) plays as it is; checkpoints are always read as data
                (``torch.load(weights_only=True)``), so only None or True are allowed.
            verbose: Print each episode's return and length and their mean (as ``validate``'s
                ``verbose`` prints its metrics).

        Raises:
            ValueError: If ``weights_only`` is False.

        Returns:
            One ``{"return": ..., "length": ...}`` per episode (also printed).
        """
        from lightning_rl.play import play_episodes

        if weights_only is False:
            raise ValueError("play reads checkpoints as data only (torch.load(weights_only=True)); drop weights_only")
        results = play_episodes(
            model,
            ckpt_path=ckpt_path,
            episodes=episodes,
            deterministic=deterministic,
            video_folder=video_folder,
            seed=seed,
            max_steps_per_episode=max_steps_per_episode,
        )
        if verbose:
            for i, r in enumerate(results):
                print(f"episode {i}: return {r['return']:.2f} length {int(r['length'])}")
            if results:
                print(f"mean return {np.mean([r['return'] for r in results]):.2f} over {len(results)} episodes")
        return results


def migrate_hyperparameters(hparams: dict[str, Any]) -> dict[str, Any]:
    """Hyperparameters saved by an older lightning_rl, in today's form (a copy).

    ``optimizer`` was a name (``"adam"`` or ``"rmsprop"``) before any torch optimizer could be given
    by class path: ``"adam"`` is today's default (None) and ``"rmsprop"`` the same RMSprop
    (``alpha`` 0.99, ``eps`` = ``optimizer_eps``) as a class path.
    """
    hparams = dict(hparams)
    optimizer = hparams.get("optimizer")
    if optimizer == "adam":
        hparams["optimizer"] = None
    elif optimizer == "rmsprop":
        eps = float(hparams.get("optimizer_eps", 1e-5))
        hparams["optimizer"] = {"class_path": "torch.optim.RMSprop", "init_args": {"alpha": 0.99, "eps": eps}}
    return hparams


class RLCLI(LightningCLI):
    """LightningCLI whose model is any :class:`RLModule` subclass (PPO, A2C, ...)."""

    def _parse_ckpt_path(self) -> None:
        # LightningCLI would apply the checkpoint's saved hyperparameters over the config, so a
        # resume could not change them (a larger total_env_steps was silently replaced by the
        # checkpoint's). Here the config and the command line win; where they differ from the
        # checkpoint (migrated from older versions first), a line on stderr says so.
        subcommand = self.config.get("subcommand")
        ckpt_path = self.config[subcommand].get("ckpt_path") if subcommand else None
        if not ckpt_path or not Path(ckpt_path).is_file():
            return
        try:
            saved = load_data(ckpt_path).get("hyper_parameters", {})
        except ValueError as error:  # a file that would need unpickling: refused, nothing run
            sys.stderr.write(f"lightning-rl: error: {error}\n")
            raise SystemExit(2) from error
        saved = migrate_hyperparameters(saved)
        init_args = self.config[subcommand].get("model", {}).get("init_args") or {}
        changed = [
            f"{key}={getattr(init_args, key)!r} (checkpoint: {value!r})"
            for key, value in saved.items()
            if not key.startswith("_") and key in init_args and getattr(init_args, key) != value
        ]
        if changed:
            verb = "resuming" if subcommand == "fit" else "loading"
            sys.stderr.write(f"lightning-rl: {verb} {ckpt_path} with the config's {', '.join(changed)}\n")

    def instantiate_classes(self) -> None:
        """Build the model and Trainer; a bad value that the classes reject (a range check in an
        ``__init__``) is a config error: exit 2 naming it, before any env or worker exists."""
        try:
            super().instantiate_classes()
        except ValueError as error:
            sys.stderr.write(f"lightning-rl: error: {error}\n")
            raise SystemExit(2) from error

    def before_fit(self) -> None:
        """The ``--ckpt_path last`` rule (reliability row 5), then :meth:`_check_resume`.

        ``last`` resumes the newest ``last*.ckpt`` of the run's checkpoint directories: the
        ``ModelCheckpoint`` dirpath, or, when checkpoints go to the logger's versioned directory,
        every earlier version of it (a re-run gets a new version whose directory is empty). With
        none, the command exits 2 naming the directories searched, instead of Lightning's warning
        and a silent start from step 0. A new run (no ``--ckpt_path``) whose checkpoint directory
        already holds an earlier run's checkpoints exits 2 too: its ``last.ckpt`` would be
        written as ``last-v1.ckpt`` beside the old one, and ``validate``/``play`` of ``last.ckpt``
        would pick the older run.
        """
        ckpt_path = self._get(self.config, "ckpt_path")
        searched, found, fixed = self._checkpoint_dirs()
        if ckpt_path == "last":
            if not found:
                where = ", ".join(searched) if searched else "(no ModelCheckpoint callback to search)"
                self._exit(f"--ckpt_path last: no last checkpoint in {where}; drop --ckpt_path to start a new run")
            ckpt_path = max(found, key=os.path.getmtime)
            self.config_init[self.config["subcommand"]]["ckpt_path"] = ckpt_path
            sys.stderr.write(f"lightning-rl: --ckpt_path last: resuming {ckpt_path}\n")
        elif ckpt_path is None:
            earlier = sorted(str(p) for d in fixed for p in Path(d).glob("*.ckpt"))
            if earlier:
                self._exit(
                    f"the checkpoint directory {fixed[0]} already holds an earlier run's checkpoints "
                    f"({', '.join(Path(p).name for p in earlier[:3])}); continue that run with --ckpt_path last, "
                    "or give this one another directory (--trainer.callbacks ModelCheckpoint dirpath) or "
                    "move the old checkpoints away"
                )
        self._check_resume(ckpt_path)

    def _checkpoint_dirs(self) -> tuple[list[str], list[str], list[str]]:
        """Directories searched for ``last``, the ``last*.ckpt`` files in them, and the fixed
        (``ModelCheckpoint(dirpath=...)``) directories among them."""
        searched: list[str] = []
        found: list[str] = []
        fixed: list[str] = []
        for callback in self.trainer.checkpoint_callbacks:
            dirpath = getattr(callback, "dirpath", None)
            if dirpath is not None:
                dirs = [str(dirpath)]
                fixed.append(str(dirpath))
            else:
                logger = self.trainer.logger
                root = getattr(logger, "root_dir", None) if logger is not None else None
                if root is not None:
                    dirs = sorted(str(p) for p in Path(root).glob("*/checkpoints")) or [f"{root}/*/checkpoints"]
                else:
                    dirs = [os.path.join(self.trainer.default_root_dir, "checkpoints")]
            for d in dirs:
                searched.append(d)
                found.extend(str(p) for p in Path(d).glob("last*.ckpt") if not p.name.endswith(".tmp"))
        return searched, found, fixed

    def before_validate(self) -> None:
        self._check_resume(self._get(self.config, "ckpt_path"))

    before_test = before_validate

    def _check_resume(self, ckpt_path: Any) -> None:
        try:
            check_resume(self.model, ckpt_path)
        except ValueError as error:
            self._exit(str(error))

    @staticmethod
    def _exit(message: str) -> None:
        sys.stderr.write(f"lightning-rl: error: {message}\n")
        raise SystemExit(2)

    @staticmethod
    def subcommands() -> dict[str, set[str]]:
        commands = dict(LightningCLI.subcommands())
        commands["play"] = {"model"}
        return commands

    def instantiate_trainer(self, **kwargs: Any) -> pl.Trainer:
        """The Trainer, with a Rich progress bar unless the config has one or disables it, and a
        :class:`RunDirectoryCallback` (``run_info.yaml``, checkpoint on SIGINT/SIGUSR1) unless the
        config has one."""
        config = self._get(self.config_init, "trainer", default={}) or {}
        callbacks = list(config.get("callbacks") or [])
        extra: list[pl.Callback] = []
        if config.get("enable_progress_bar", True) is not False and not any(
            isinstance(c, ProgressBar) for c in callbacks
        ):
            extra.append(RichProgressBar())
        if not any(isinstance(c, RunDirectoryCallback) for c in callbacks):
            extra.append(RunDirectoryCallback())
        if extra:
            kwargs["callbacks"] = [*callbacks, *extra]
        return super().instantiate_trainer(**kwargs)


def check_env_command(argv: list[str]) -> int:
    """``lightning-rl check-env <env_id> [--env_kwargs JSON]``: gymnasium's env checker plus
    lightning_rl's rules (:mod:`lightning_rl.envs.check`) on one env; exit 0 when it passes
    (printing gymnasium's advice), 2 naming the broken rule."""
    import argparse
    import json

    from lightning_rl.envs.check import check_env

    parser = argparse.ArgumentParser(prog="lightning-rl check-env", description=check_env_command.__doc__)
    parser.add_argument("env_id", help="a gymnasium id (CartPole-v1, HalfCheetah-v5), ALE/<Game>-v5, ...")
    parser.add_argument("--env_kwargs", default="{}", help="constructor arguments as JSON (a dict)")
    options = parser.parse_args(argv)
    try:
        advice = check_env(options.env_id, **json.loads(options.env_kwargs))
    except ValueError as error:  # EnvCheckError, an unknown id or bad JSON
        print(f"lightning-rl check-env: error: {error}", file=sys.stderr)
        return 2
    print(f"{options.env_id}: passes the env contract checks")
    for line in advice:
        print(f"  advice: {line}")
    return 0


def main(args: list[str] | None = None) -> None:
    """Entry point of ``lightning-rl`` (``args`` replaces ``sys.argv[1:]``, for tests)."""
    # Import the algorithm packages so `--model PPO` and class_path names resolve.
    import lightning_rl.algos  # noqa: F401
    import lightning_rl.callbacks  # noqa: F401

    argv = list(sys.argv[1:] if args is None else args)
    if argv[:1] == ["check-env"]:
        raise SystemExit(check_env_command(argv[1:]))
    try:
        expanded = expand_params_args(argv)
    except ValueError as error:
        # Reported as argparse reports usage errors: on stderr, exit status 2.
        print(f"lightning-rl: error: {error}", file=sys.stderr)
        raise SystemExit(2) from error
    if expanded != argv:
        args = expanded
    torch.set_float32_matmul_precision("high")
    cli = RLCLI(
        RLModule,
        trainer_class=RLTrainer,
        subclass_mode_model=True,
        save_config_kwargs={"overwrite": True},
        trainer_defaults={"max_epochs": -1},
        args=args,
    )
    for callback in getattr(getattr(cli, "trainer", None), "callbacks", []):
        if isinstance(callback, RunDirectoryCallback) and callback.exit_code:
            raise SystemExit(callback.exit_code)  # stopped by Ctrl-C: last.ckpt saved, status 1


if __name__ == "__main__":
    main()
