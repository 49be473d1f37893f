"""The ``lightning-rl`` command: LightningCLI with ``fit``, ``validate``, ``test`` and ``play``.

Examples::

    lightning-rl fit --config configs/ppo/cartpole.yaml                  # a new run in runs/ppo_cartpole/<date-time>/
    lightning-rl fit --config configs/ppo/cartpole.yaml --run_name wide  # runs/ppo_cartpole/<date-time>_wide/
    lightning-rl fit --config configs/ppo/cartpole.yaml --ckpt_path last # resume the newest run of this config
    lightning-rl validate --config configs/ppo/cartpole.yaml --ckpt_path last   # a table of eval episode returns
    lightning-rl test --config configs/ppo/cartpole.yaml --ckpt_path last       # the same on held-out env seeds
    lightning-rl play runs/ppo_cartpole                                   # the newest run's best (else last) checkpoint
    lightning-rl play runs/ppo_cartpole/2026-11-25_16-40-00/checkpoints/last.ckpt --video_folder videos
    lightning-rl fit --config configs/ppo/cartpole.yaml --optimizer RMSprop --lr_scheduler StepLR \
        --lr_scheduler.step_size 10
    lightning-rl fit --config configs/ppo/cartpole.yaml --print_config
    lightning-rl fit --params configs/params/ppo_mujoco.py --cpanel '{"lr": 1e-4, "env": "Hopper-v5"}'

``--params FILE --cpanel JSON`` runs a parameter file's ``gen_params`` (``lightning_rl.params``)
and hands its config to LightningCLI in place of a ``--config`` file. Each ``fit`` writes into a run
directory (:mod:`lightning_rl.runs`): the resolved ``config.yaml`` (LightningCLI), ``run_info.yaml``
(version, code hash, git commit), TensorBoard events, ``checkpoints/`` and ``videos/``; on SIGINT or
SIGUSR1 the run saves ``last.ckpt`` and exits (status 1 after Ctrl-C, as Lightning's, 0 after SIGUSR1;
SIGTERM: 143), so ``--ckpt_path last`` resumes it (``RunDirectoryCallback``, added unless the config
has one). Progress is shown in env steps (:class:`~lightning_rl.callbacks.progress.RLProgressBar`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytorch_lightning as pl
import torch
import yaml
from jsonargparse import DefaultHelpFormatter
from pytorch_lightning.callbacks import ModelCheckpoint, ProgressBar
from pytorch_lightning.cli import LightningArgumentParser, LightningCLI, instantiate_class
from pytorch_lightning.loggers import TensorBoardLogger

from lightning_rl.algos.base import RLModule
from lightning_rl.algos.checkpointing import check_resume, load_data, migrate_hyperparameters
from lightning_rl.callbacks.progress import RLProgressBar
from lightning_rl.callbacks.run_directory import RunDirectoryCallback
from lightning_rl.params import expand_params_args
from lightning_rl.runs import (
    RUN_DIR_ENV,
    RUNS_ROOT,
    best_checkpoint,
    new_run_dir,
    newest_checkpoint,
    run_dir_of,
    run_group,
)


class RawDescriptionFormatter(DefaultHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """jsonargparse's help format, keeping the description's line breaks."""


#: ``test`` evaluates on env seeds this far from the training seeds (held out from training and ``validate``).
HELD_OUT_SEED_OFFSET = 1_000_000


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


class RLCLI(LightningCLI):
    """LightningCLI whose model is any :class:`RLModule` subclass (PPO, A2C, ...).

    Adds ``--run_name`` (the optional suffix of the run directory), run directories as TensorBoard
    logger (unless the config names a logger), the env-step progress display, ``--ckpt_path last``,
    the evaluation table of ``validate``/``test``, and ``--optimizer``/``--lr_scheduler`` handed to
    the module's own ``optimizer``/``lr_scheduler`` (built in ``setup``, after the agent's networks).
    """

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        parser.add_argument(
            "--run_name", type=str | None, default=None,
            help="fit: suffix of the run directory, runs/<algo>_<env>/<date-time>_<run_name>/",
        )

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
        subcommand = self.config.get("subcommand")
        model_config = self._get(self.config, "model")
        if model_config is not None and hasattr(self.model, "run_config"):
            # The model's config travels with its checkpoints (play <ckpt>, load_from_checkpoint(path)).
            self.model.run_config = self._model_config_as_data(subcommand)
        if subcommand == "test":
            # Held-out env seeds: neither training nor validate used them.
            self.model.seed = self.model._base_seed() + HELD_OUT_SEED_OFFSET

    def _model_config_as_data(self, subcommand: str | None) -> dict[str, Any]:
        """The model's config as plain data, in the form ``config.yaml`` has: class paths and
        callables as the import paths and ``class_path``/``init_args`` the parser reads back
        (``torch.nn.Tanh``, not the text of a class object), so a checkpoint rebuilds its module."""
        parser = self._parser(subcommand)
        config = self.config[subcommand] if subcommand else self.config
        dumped = yaml.safe_load(parser.dump(config, skip_none=False, skip_check=True))
        return dumped["model"]

    # -- run directories ---------------------------------------------------------------------------------------

    def _uses_run_dirs(self) -> bool:
        return isinstance(self.trainer.logger, TensorBoardLogger) and getattr(self.trainer.logger, "_rl_run_dir", False)

    def _run_group_dir(self) -> Path:
        # Files only: a parameter file's config arrives as YAML text (--params), named from the model.
        given = [str(p) for p in (self._get(self.config, "config") or []) if p is not None]
        config_paths = [p for p in given if os.path.isfile(p)]
        return Path(RUNS_ROOT) / run_group(config_paths, self._get(self.config, "model"))

    def _run_logger(self, ckpt_path: Any) -> TensorBoardLogger:
        """The default logger of ``fit``: TensorBoard into a new run directory, or, for ``--ckpt_path
        last``, into the run directory of the checkpoint it resumes."""
        group_dir = self._run_group_dir()
        run_dir: Path | None = None
        inherited = os.environ.get(RUN_DIR_ENV)
        if inherited and os.environ.get("LOCAL_RANK", "0") != "0":
            run_dir = Path(inherited)  # a DDP rank started by rank 0 shares its directory
        elif ckpt_path == "last":
            last = newest_checkpoint(group_dir)
            run_dir = last.parent.parent if last is not None else None
        if run_dir is None:
            name = self._get(self.config, "run_name")
            try:
                run_dir = new_run_dir(group_dir.name, name)
            except ValueError as error:
                self._exit(str(error))
        assert run_dir is not None
        os.environ[RUN_DIR_ENV] = str(run_dir)
        logger = TensorBoardLogger(
            save_dir=str(run_dir.parent.parent), name=run_dir.parent.name, version=run_dir.name,
            default_hp_metric=False,
            # TensorBoard shows a run's scalars within seconds (its default is 120 s). It also bounds
            # closing the writer after a Ctrl-C: an interrupt that lands inside the writer queue's
            # Condition.notify can cost the writer thread its wake-up (CPython gh-92530), and closing
            # then waits for the thread's next timed flush.
            flush_secs=TENSORBOARD_FLUSH_S,
        )
        logger._rl_run_dir = True  # type: ignore[attr-defined]
        return logger

    def before_fit(self) -> None:
        """The ``--ckpt_path last`` rule (reliability row 5), then :meth:`_check_resume`.

        With run directories (the default logger), ``last`` resumes the newest ``last*.ckpt`` under
        ``runs/<algo>_<env>/*/checkpoints`` and the run keeps writing into that run directory; a new
        run always gets a new directory. With a config's own checkpoint directory
        (``ModelCheckpoint(dirpath=...)``) or logger, ``last`` resumes the newest ``last*.ckpt`` there
        (every version of a versioned logger directory), and a new run whose fixed checkpoint directory
        already holds an earlier run's checkpoints exits 2: its ``last.ckpt`` would be written as
        ``last-v1.ckpt`` beside the old one. With nothing to resume, ``last`` exits 2 naming the
        directories searched, instead of Lightning's warning and a silent start from step 0.
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
            elif self._uses_run_dirs():
                group_dir = self._run_group_dir()
                dirs = sorted(str(p) for p in group_dir.glob("*/checkpoints")) or [f"{group_dir}/*/checkpoints"]
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

    # -- validate / test --------------------------------------------------------------------------------------

    def _resolve_eval_ckpt(self) -> None:
        """``validate``/``test`` ``--ckpt_path last`` (or ``best``): the newest run's checkpoint."""
        subcommand = self.config["subcommand"]
        ckpt_path = self._get(self.config, "ckpt_path")
        if ckpt_path in ("last", "best"):
            group_dir = self._run_group_dir()
            found = newest_checkpoint(group_dir, f"{ckpt_path}*.ckpt")
            if found is None:
                self._exit(f"--ckpt_path {ckpt_path}: no {ckpt_path}.ckpt in {group_dir}/*/checkpoints")
            assert found is not None
            self.config_init[subcommand]["ckpt_path"] = str(found)
            sys.stderr.write(f"lightning-rl: --ckpt_path {ckpt_path}: {found}\n")
            ckpt_path = str(found)
        self._check_resume(ckpt_path)

    def before_validate(self) -> None:
        self._resolve_eval_ckpt()

    before_test = before_validate

    def after_validate(self) -> None:
        print_episode_table(self.model, "validate")

    def after_test(self) -> None:
        print_episode_table(self.model, "test (held-out seeds)")

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
        # predict is gone: an RL agent has no dataset to predict on (play runs it in an env).
        commands = {k: v for k, v in LightningCLI.subcommands().items() if k != "predict"}
        commands["play"] = {"model"}
        return commands

    # -- optimizers -------------------------------------------------------------------------------------------

    def _add_configure_optimizers_method_to_model(self, subcommand: str | None) -> None:
        """``--optimizer``/``--lr_scheduler`` as LightningCLI documents them, given to the module's own
        ``optimizer``/``lr_scheduler`` (LightningCLI's would replace ``configure_optimizers`` and see no
        parameters: the agent's networks are built in ``setup``). The module's ``learning_rate`` is the
        optimizer's ``lr`` unless the command line sets ``--optimizer.lr``."""
        if not subcommand:
            return
        optimizer_init = self._get(self.config_init, "optimizer")
        scheduler_init = self._get(self.config_init, "lr_scheduler")
        if optimizer_init:
            init = _plain(optimizer_init)
            flags = ("--optimizer.lr", "--optimizer.init_args.lr")
            explicit_lr = any(a.startswith(flags) for a in [*sys.argv, *self._argv])
            if not explicit_lr:
                init.get("init_args", {}).pop("lr", None)
            self.model.optimizer = _OptimizerFromConfig(init)
        if scheduler_init:
            if getattr(self.model, "linear_lr_schedule", False):
                self.model.linear_lr_schedule = False  # the scheduler given on the command line sets the lr
            self.model.lr_scheduler = _SchedulerFromConfig(_plain(scheduler_init))

    _argv: list[str] = []
    #: True when this CLI is the whole process (``lightning-rl ...``), not a call of main() inside another program.
    _own_process = False

    def instantiate_trainer(self, **kwargs: Any) -> pl.Trainer:
        """The Trainer, with the env-step progress display (:class:`RLProgressBar`) unless the config
        has a progress bar or disables it, a :class:`RunDirectoryCallback` (``run_info.yaml``,
        checkpoint on SIGINT/SIGUSR1) unless the config has one, and for ``fit`` without a logger of
        the config's own, TensorBoard into the run directory (:mod:`lightning_rl.runs`)."""
        config = self._get(self.config_init, "trainer", default={}) or {}
        callbacks = list(config.get("callbacks") or [])
        extra: list[pl.Callback] = []
        if config.get("enable_progress_bar", True) is not False and not any(
            isinstance(c, ProgressBar) for c in callbacks
        ):
            extra.append(RLProgressBar())
        if not any(isinstance(c, RunDirectoryCallback) for c in callbacks):
            extra.append(RunDirectoryCallback())
        if extra:
            kwargs["callbacks"] = [*callbacks, *extra]
        if self.config.get("subcommand") != "fit" and config.get("enable_checkpointing", True) is not False:
            # validate/test/play write no checkpoints (and restore no ModelCheckpoint state that
            # points at the run directory of the checkpoint they read).
            kwargs["callbacks"] = [c for c in kwargs.get("callbacks", callbacks) if not isinstance(c, ModelCheckpoint)]
            kwargs["enable_checkpointing"] = False
        if self.config.get("subcommand") == "fit" and config.get("limit_val_batches") is None:
            # Fit evaluates through EvaluationCallback; Lightning's validation loop runs in validate only.
            kwargs["limit_val_batches"] = 0
        if config.get("logger") in (None, True):
            if self.config.get("subcommand") == "fit":
                kwargs["logger"] = self._run_logger(self._get(self.config, "ckpt_path"))
            else:
                kwargs["logger"] = False  # validate/test/play write no run directory
        trainer = super().instantiate_trainer(**kwargs)
        if self._own_process:
            for callback in trainer.callbacks:  # type: ignore[attr-defined]
                if isinstance(callback, RunDirectoryCallback) and callback.shutdown_timeout_s is None:
                    callback.shutdown_timeout_s = SHUTDOWN_TIMEOUT_S
        return trainer


def _plain(config: Any) -> dict[str, Any]:
    """A jsonargparse namespace (or dict) as plain dicts."""
    data = config.as_dict() if hasattr(config, "as_dict") else dict(config)
    return json.loads(json.dumps(data, default=str))


class _OptimizerFromConfig:
    """``optimizer(params, lr=...)`` from ``{class_path, init_args}`` (the form of :func:`build_optimizer`)."""

    def __init__(self, init: dict[str, Any]) -> None:
        self.init = init

    def __call__(self, params: Any, lr: float) -> torch.optim.Optimizer:
        init = {"class_path": self.init["class_path"], "init_args": {"lr": lr, **self.init.get("init_args", {})}}
        return instantiate_class(params, init)


class _SchedulerFromConfig:
    """``lr_scheduler(optimizer)`` from ``{class_path, init_args}``."""

    def __init__(self, init: dict[str, Any]) -> None:
        self.init = init

    def __call__(self, optimizer: torch.optim.Optimizer) -> Any:
        return instantiate_class(optimizer, self.init)


def print_episode_table(module: Any, title: str) -> None:
    """Print the returns and lengths of the last evaluation's episodes as a table, and their mean."""
    episodes = getattr(module, "eval_episodes", None)
    if not episodes:
        return
    from rich.console import Console
    from rich.table import Table

    print(f"{title}: {len(episodes)} eval episodes")
    table = Table()
    table.add_column("episode", justify="right")
    table.add_column("return", justify="right")
    table.add_column("length", justify="right")
    for i, (ret, length) in enumerate(episodes):
        table.add_row(str(i), f"{ret:.2f}", str(int(length)))
    returns = np.array([ret for ret, _ in episodes])
    table.add_row("mean", f"{returns.mean():.2f}", f"± {returns.std():.2f}")
    Console(file=sys.stdout, width=max(60, min(120, Console().width))).print(table)


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


#: How often the run's TensorBoard writer flushes (seconds).
TENSORBOARD_FLUSH_S = 5

#: Seconds the ``lightning-rl`` process gives a failed or interrupted fit to shut down (RunDirectoryCallback).
SHUTDOWN_TIMEOUT_S = 30.0

#: Subcommands outside LightningCLI: name -> (module whose ``main(argv) -> int`` runs it, the extra it needs).
TOOL_COMMANDS: dict[str, tuple[str, str | None]] = {
    "launch": ("lightning_rl.launch.cli", None),
    "tune": ("lightning_rl.tuning.cli", "tune"),
    "export": ("lightning_rl.export", "export"),
    "results": ("lightning_rl.results.cli", None),
}


def run_tool_command(name: str, argv: list[str]) -> int:
    """Run the tool subcommand ``name`` (:data:`TOOL_COMMANDS`) with ``argv``; its exit status.

    A missing optional dependency is reported with the extra that installs it (exit status 2)."""
    import importlib

    module_name, extra = TOOL_COMMANDS[name]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name is None or error.name.split(".")[0] == "lightning_rl":
            raise
        hint = f": pip install 'lightning-rl[{extra}]'" if extra else ""
        print(f"lightning-rl {name}: error: {error.name} is not installed{hint}", file=sys.stderr)
        return 2
    return int(module.main(argv))


DESCRIPTION = """lightning_rl: deep RL on PyTorch Lightning.

Configs: --config configs/<algo>/<env>.yaml, or a parameter file: --params FILE [--cpanel JSON] runs the
file's gen_params(cpanel) (lightning_rl.params) and uses the config it returns, e.g.
  lightning-rl fit --params configs/params/ppo_mujoco.py --cpanel '{"lr": 1e-4, "env": "Hopper-v5"}'
Runs go to runs/<algo>_<env>/<date-time>[_<run_name>]/ (config.yaml, checkpoints/, TensorBoard, videos/).
Play a run without restating its config: lightning-rl play <run_dir | group_dir | checkpoint> [--video_folder DIR].
Check an env: lightning-rl check-env <env_id>.
Beyond one run (each has its own --help): lightning-rl launch <grid.yaml> (grids of configs x seeds),
results <dir> (tables and curves across seeds), tune <config> <space.yaml> (Optuna; extra `tune`),
export <ckpt | run_dir> (TorchScript/ONNX; extra `export`)."""


#: Warnings a user of the CLI can do nothing about, each with the reason (all others stay visible).
QUIET_WARNINGS = (
    # Lightning's data check: the dataset's __len__ (the prefetch fix, DESIGN.md) and multi-process
    # loading, which lightning_rl never uses (num_workers=0: workers would copy the sampler).
    r".*Your `IterableDataset` has `__len__` defined.*",
    # Raised inside pytorch_lightning's own code by this torch version's pytree API.
    r".*isinstance\(treespec, LeafSpec\)` is deprecated.*",
    # DDP: the episode statistics are reduced over the ranks (torchmetrics) before they are
    # logged, the env-step x-axis is the same on every rank, and the perf/ timings are rank 0's
    # own (env steps per second counts all ranks); Lightning cannot see that.
    r".*self\.log\('(train/episodes|train/epoch_return_(mean|max|min)|step|perf/[a-z_]+)', \.\.\., sync_dist=True\)`.*",
)


def play_target_args(target: str) -> list[str]:
    """``play <target>``'s arguments: the run's ``config.yaml`` and checkpoint (``best.ckpt``, else
    ``last.ckpt``) for a run or group directory; for a checkpoint outside a run directory, the model
    config it carries.

    Raises:
        ValueError: If ``target`` is neither a run directory nor a checkpoint with a config.
    """
    path = Path(target)
    run_dir = run_dir_of(path)
    ckpt = path if path.is_file() else (best_checkpoint(run_dir) if run_dir is not None else None)
    if not path.exists():
        raise ValueError(f"play: {target} does not exist (give a run directory, runs/<algo>_<env> or a .ckpt)")
    if run_dir is not None:
        args = ["--config", str(run_dir / "config.yaml")]
        return [*args, "--ckpt_path", str(ckpt)] if ckpt is not None else args
    if ckpt is None:
        raise ValueError(f"play: no run (config.yaml) in {target}")
    config = (load_data(ckpt).get("lightning_rl") or {}).get("config")
    if not config:
        raise ValueError(f"play: {ckpt} carries no config and has no config.yaml beside it; add --config")
    return ["--model", json.dumps(config), "--ckpt_path", str(ckpt)]


def make_cli(args: list[str] | None, callbacks: Sequence[pl.Callback] = ()) -> RLCLI:
    """LightningCLI as ``lightning-rl`` builds it, run on ``args`` (None: ``sys.argv[1:]``), with
    ``callbacks`` appended to the trainer's after the config's own (``lightning-rl tune`` adds its
    pruning callback this way)."""
    cli_class = RLCLI
    if callbacks:
        extra = list(callbacks)

        class _WithCallbacks(RLCLI):
            def instantiate_trainer(self, **kwargs: Any) -> pl.Trainer:
                trainer = super().instantiate_trainer(**kwargs)
                trainer.callbacks.extend(extra)  # type: ignore[attr-defined]
                return trainer

        cli_class = _WithCallbacks
    return cli_class(
        RLModule,
        trainer_class=RLTrainer,
        subclass_mode_model=True,
        save_config_kwargs={"overwrite": True},
        # One logged point per sampler iteration (a rollout, or an off-policy sampler batch).
        trainer_defaults={"max_epochs": -1, "log_every_n_steps": 1},
        parser_kwargs={"description": DESCRIPTION, "formatter_class": RawDescriptionFormatter},
        args=args,
    )


def main(args: list[str] | None = None) -> None:
    """Entry point of ``lightning-rl`` (``args`` replaces ``sys.argv[1:]``, for tests)."""
    # Import the algorithm packages so `--model PPO` and class_path names resolve.
    import lightning_rl.algos.catalog  # noqa: F401
    import lightning_rl.callbacks  # noqa: F401
    from lightning_rl.video import choose_gl_backend

    choose_gl_backend()  # before anything imports mujoco: a headless machine renders through EGL/OSMesa
    argv = list(sys.argv[1:] if args is None else args)
    if argv[:1] == ["check-env"]:
        raise SystemExit(check_env_command(argv[1:]))
    if argv[:1] and argv[0] in TOOL_COMMANDS:
        raise SystemExit(run_tool_command(argv[0], argv[1:]))
    try:
        if argv[:1] == ["play"] and len(argv) > 1 and not argv[1].startswith("-"):
            argv = ["play", *play_target_args(argv[1]), *argv[2:]]
        expanded = expand_params_args(argv)
    except ValueError as error:
        # Reported as argparse reports usage errors: on stderr, exit status 2.
        print(f"lightning-rl: error: {error}", file=sys.stderr)
        raise SystemExit(2) from error
    RLCLI._argv = list(expanded)
    RLCLI._own_process = args is None
    # The same list as sys.argv[1:] is passed as None, so LightningCLI does not warn about both.
    cli_args = None if args is None and expanded == sys.argv[1:] else expanded
    torch.set_float32_matmul_precision("high")
    for message in QUIET_WARNINGS:
        warnings.filterwarnings("ignore", message=message)
    cli = make_cli(cli_args)
    for callback in getattr(getattr(cli, "trainer", None), "callbacks", []):
        if isinstance(callback, RunDirectoryCallback) and callback.exit_code:
            raise SystemExit(callback.exit_code)  # stopped by Ctrl-C: last.ckpt saved, status 1


if __name__ == "__main__":
    main()
