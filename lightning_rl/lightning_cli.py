"""The LightningCLI part of ``lightning-rl``: ``fit``, ``validate``, ``test`` and ``play``, and
:func:`from_config`, the same module and trainer from Python.

:mod:`lightning_rl.cli` is the entry point; it answers ``--help`` and ``--version`` itself and comes
here only to run one of these four commands. Examples::

    lightning-rl fit --config configs/ppo/cartpole.yaml --ckpt_path last --run_name wide
    lightning-rl fit --config configs/ppo/cartpole.yaml --optimizer RMSprop --lr_scheduler StepLR \
        --lr_scheduler.step_size 10
    lightning-rl fit --params configs/params/ppo_mujoco.py --cpanel '{"lr": 1e-4, "env": "Hopper-v5"}'

``--params FILE --cpanel JSON`` runs a parameter file's ``gen_params`` (``lightning_rl.params``)
and hands its config to LightningCLI in place of a ``--config`` file. Each ``fit`` writes into a run
directory (:mod:`lightning_rl.runs`, under ``--trainer.default_root_dir``, default the working
directory): the resolved ``config.yaml`` (LightningCLI), ``run_info.yaml`` (version, code hash, git
commit), TensorBoard events, ``checkpoints/`` and ``videos/``. A run that fails before its first
checkpoint removes its run directory again. On SIGINT or SIGUSR1 the run saves ``last.ckpt`` and exits
(status 1 after Ctrl-C, as Lightning's, 0 after SIGUSR1; SIGTERM: 143), so ``--ckpt_path last``
resumes it (``RunDirectoryCallback``, added unless the config has one); resuming a run that already
reached its ``total_env_steps`` says so and exits 0. Progress is shown in env steps
(:class:`~lightning_rl.callbacks.progress.RLProgressBar`). ``validate``/``test`` of a config without
eval envs evaluate with the sampler's defaults (4 envs, 10 episodes) and write no files.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytorch_lightning as pl
import torch
import yaml
from jsonargparse import DefaultHelpFormatter
from pytorch_lightning.callbacks import ModelCheckpoint, ProgressBar
from pytorch_lightning.cli import LightningArgumentParser, LightningCLI, SaveConfigCallback, instantiate_class
from pytorch_lightning.loggers import TensorBoardLogger

from lightning_rl import config_errors
from lightning_rl.algos.base import RLModule
from lightning_rl.algos.checkpointing import (
    CHECKPOINT_KEY,
    check_compatible,
    check_resume,
    load_data,
    migrate_hyperparameters,
)
from lightning_rl.callbacks.progress import RLProgressBar
from lightning_rl.callbacks.run_directory import RunDirectoryCallback
from lightning_rl.checkpoint_format import checkpoint_env_steps
from lightning_rl.error_report import error_lines, user_frame
from lightning_rl.params import expand_params_args
from lightning_rl.runs import (
    RUN_DIR_ENV,
    RunChoice,
    choice_line,
    choose_checkpoint,
    new_run_dir,
    newest_checkpoint,
    run_dir_of,
    run_group,
    runs_root,
)

__all__ = ["RLCLI", "RLTrainer", "from_config", "make_cli", "migrate_hyperparameters", "run"]


class RawDescriptionFormatter(DefaultHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """jsonargparse's help format, keeping the description's line breaks."""


#: ``test`` evaluates on env seeds this far from the training seeds (held out from training and ``validate``).
HELD_OUT_SEED_OFFSET = 1_000_000


#: How often the run's TensorBoard writer flushes (seconds).
TENSORBOARD_FLUSH_S = 5

#: Seconds the ``lightning-rl`` process gives a failed or interrupted fit to shut down (RunDirectoryCallback).
SHUTDOWN_TIMEOUT_S = 30.0

#: Warnings a user of the CLI can do nothing about, each with the reason (all others stay visible).
QUIET_WARNINGS = (
    # Lightning's data check: the datasets' __len__ (it keeps Lightning from fetching ahead) and multi-process
    # loading, which lightning_rl never uses (num_workers=0: workers would copy the sampler).
    r".*Your `IterableDataset` has `__len__` defined.*",
    # Raised inside pytorch_lightning's own code by this torch version's pytree API.
    r".*isinstance\(treespec, LeafSpec\)` is deprecated.*",
    # DDP: the episode statistics are reduced over the ranks (torchmetrics) before they are
    # logged, the env-step x-axis is the same on every rank, and the perf/ timings are rank 0's
    # own (env steps per second counts all ranks); Lightning cannot see that.
    r".*self\.log\('(train/episodes|train/epoch_return_(mean|max|min)|step|perf/[a-z_]+)', \.\.\., sync_dist=True\)`.*",
    # A resume writes into the run directory it continues: its checkpoint directory holds the
    # checkpoint being resumed by design.
    r".*Checkpoint directory .* exists and is not empty.*",
    # validate/test restore a checkpoint written by fit, whose callbacks (ModelCheckpoint,
    # EarlyStopping) they leave out on purpose: they write no checkpoints and stop nothing.
    r".*Be aware that when using `ckpt_path`, callbacks used to create the checkpoint need to be provided.*",
    # main() passes the command line it expanded (--params, play <run_dir>) as args on purpose.
    r".*LightningCLI's args parameter is intended to run from within Python.*",
)

#: Lightning log lines a user of the CLI can do nothing about.
QUIET_LOG_LINES = (
    "💡 Tip: For seamless cloud logging",  # an advertisement, on every Trainer
    # The accelerators found, on every Trainer: the config's `accelerator` decides, and run_info.yaml
    # records the machine.
    "GPU available:", "TPU available:", "HPU available:",
    # Which checkpoint a command restores: the command's own line says it first, with the env steps
    # and how it was chosen.
    "Restoring states from the checkpoint path", "Loaded model weights from the checkpoint",
    "Restored all states from the checkpoint",
)


class _DropLines(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.getMessage()).startswith(QUIET_LOG_LINES)


def quiet_lightning() -> None:
    """Apply :data:`QUIET_WARNINGS` and :data:`QUIET_LOG_LINES` (once per process)."""
    # LightningCLI calls jsonargparse functions that jsonargparse deprecates: Lightning's to change.
    os.environ.setdefault("JSONARGPARSE_DEPRECATION_WARNINGS", "off")
    for message in QUIET_WARNINGS:
        warnings.filterwarnings("ignore", message=message)
    for name in ("pytorch_lightning.utilities.rank_zero", "lightning.pytorch.utilities.rank_zero"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DropLines) for f in logger.filters):
            logger.addFilter(_DropLines())


class RLArgumentParser(LightningArgumentParser):
    """LightningCLI's parser whose errors are a line or two (:mod:`lightning_rl.config_errors`) instead
    of a usage dump and jsonargparse's nested message; ``verbose`` restores those."""

    #: Print jsonargparse's own message (``--verbose``).
    verbose = False
    #: The command line being parsed (named in messages).
    argv: list[str] = []
    #: The parameter file whose config the command line carries as text (``--params FILE``), if any.
    params_file: str | None = None

    def error(self, message: str, ex: Exception | None = None) -> Any:
        if self.verbose or not self.exit_on_error:
            return super().error(message, ex)
        for line in explain_error(message, self, self.argv, self.params_file):
            sys.stderr.write(line + "\n")
        self.exit(2)


def explain_error(message: str, parser: Any, argv: Sequence[str], params_file: str | None = None) -> list[str]:
    """The short lines of a parser error (:func:`lightning_rl.config_errors.explain`): the first starts
    with ``lightning-rl <command>: error:``; a key from a parameter file's config is said to be in
    ``params_file``."""
    command = argv[0] if argv and not argv[0].startswith("-") else "fit"
    subparsers = getattr(getattr(parser, "_subcommands_action", None), "_name_parser_map", {}) or {}
    keys = config_errors.parser_keys(subparsers.get(command, parser))
    configs = [a for i, a in enumerate(argv) if i and argv[i - 1] in ("--config", "-c")]
    if params_file is not None:
        configs = [params_file if "\n" in c else c for c in configs]
    explained = config_errors.explain(
        message, command, parser_keys=keys, argv=argv, config_files=configs,
        class_names=config_errors.class_names_of(RLModule),
    )
    lines = explained.lines()
    return [f"lightning-rl {command}: error: {lines[0]}", *(f"  {line}" for line in lines[1:])]


class _TrainingStarted(pl.Callback):
    """Notes that training started (the envs and the model were set up), so a failure before it is a
    config problem reported in a line, one after it a run that crashed (with its traceback)."""

    started = False

    def on_train_start(self, trainer: pl.Trainer, pl_module: Any) -> None:
        self.started = True


class RLTrainer(pl.Trainer):
    """``pl.Trainer`` plus :meth:`play`, which the CLI exposes as a subcommand, and a :meth:`fit` that
    removes its new run directory again when the run fails before its first checkpoint."""

    def fit(self, model: Any, *args: Any, **kwargs: Any) -> None:
        """``pl.Trainer.fit``; a failed fit in a run directory of its own that holds no checkpoint
        yet leaves no run directory behind (it would be the newest run that play and resume pick)."""
        log_dir = getattr(self.logger, "log_dir", None) if getattr(self.logger, "_rl_new_run", False) else None
        run_dir = Path(log_dir) if log_dir else None
        try:
            super().fit(model, *args, **kwargs)
        except BaseException:
            if run_dir is not None:
                remove_failed_run(run_dir)
            raise

    def validate(
        self,
        model: Any = None,
        dataloaders: Any = None,
        ckpt_path: str | Path | None = None,
        verbose: bool = True,
        datamodule: Any = None,
        weights_only: bool | None = None,
        deterministic: bool = True,
    ) -> list[Any]:
        """``pl.Trainer.validate`` of an :class:`RLModule`: evaluation episodes on the eval envs, printed
        as one table (each episode's return and length, then their mean) instead of Lightning's.

        Args:
            model: The module; ``ckpt_path``: its checkpoint; ``dataloaders``, ``datamodule``,
                ``weights_only``: as Lightning's.
            verbose: Print the table.
            deterministic: Act with the policy's mode (greedy / mean action), as ``play`` does;
                False samples actions as in training.
        """
        return self._evaluate(super().validate, "validate", model, dataloaders, ckpt_path, verbose, datamodule,
                              weights_only, deterministic)

    def test(
        self,
        model: Any = None,
        dataloaders: Any = None,
        ckpt_path: str | Path | None = None,
        verbose: bool = True,
        datamodule: Any = None,
        weights_only: bool | None = None,
        deterministic: bool = True,
    ) -> list[Any]:
        """``pl.Trainer.test``: as :meth:`validate`, on the env seeds the CLI holds out for it."""
        return self._evaluate(super().test, "test (held-out seeds)", model, dataloaders, ckpt_path, verbose,
                              datamodule, weights_only, deterministic)

    def _evaluate(self, run: Any, title: str, model: Any, dataloaders: Any, ckpt_path: Any, verbose: bool,
                  datamodule: Any, weights_only: bool | None, deterministic: bool) -> list[Any]:
        module = model if model is not None else self.lightning_module
        if module is not None:
            module.eval_deterministic = bool(deterministic)
        results = run(model, dataloaders, ckpt_path, verbose=False, datamodule=datamodule, weights_only=weights_only)
        if verbose and self.is_global_zero:
            print_episode_table(model if model is not None else self.lightning_module, title, deterministic)
        return results

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


def remove_failed_run(run_dir: Path) -> bool:
    """Remove ``run_dir`` if it holds no checkpoint and no ``error.log`` (a run that failed before it
    trained; one that failed while training keeps its traceback there), and then its group and runs
    folders if they are empty; whether it was removed."""
    if not run_dir.is_dir() or any(run_dir.rglob("*.ckpt")) or (run_dir / "error.log").is_file():
        return False
    shutil.rmtree(run_dir, ignore_errors=True)
    for parent in (run_dir.parent, run_dir.parent.parent):
        try:
            parent.rmdir()  # only when empty
        except OSError:
            break
    return True


class _SaveFitConfig(SaveConfigCallback):
    """LightningCLI's ``config.yaml`` for ``fit`` only: ``validate``/``test`` write no files (they would
    land in the working directory, over a ``config.yaml`` of the user's). It records the run's settings,
    not the checkpoint it resumed (``ckpt_path``), so ``fit --config <run>/config.yaml`` trains the same
    run again from step 0, and ``--ckpt_path`` added to it continues it."""

    def setup(self, trainer: pl.Trainer, pl_module: Any, stage: str) -> None:
        if stage == "fit":
            if self.config.get("ckpt_path") is not None:
                self.config = self.config.clone()
                self.config.ckpt_path = None
            super().setup(trainer, pl_module, stage)


def _get(obj: Any, key: str, default: Any = None) -> Any:
    """``obj[key]`` / ``obj.key`` for a jsonargparse namespace, a dict or None."""
    if obj is None:
        return default
    if isinstance(obj, dict):
        return obj.get(key, default)
    try:
        value = obj[key] if key in obj else default
    except (TypeError, KeyError):
        value = getattr(obj, key, default)
    return value


class RLCLI(LightningCLI):
    """LightningCLI whose model is any :class:`RLModule` subclass (PPO, A2C, ...).

    Adds ``--run_name`` (the optional suffix of the run directory, and the run ``--ckpt_path last``
    picks), run directories as TensorBoard logger (unless the config names a logger), the env-step
    progress display, ``--ckpt_path last``, the evaluation table of ``validate``/``test`` (with
    the sampler's evaluation defaults for settings a config leaves unset), short config errors
    (:class:`RLArgumentParser`), and ``--optimizer``/``--lr_scheduler`` handed to the module's own
    ``optimizer``/``lr_scheduler`` (built in ``setup``, after the agent's networks).
    """

    _argv: list[str] = []
    #: True when this CLI is the whole process (``lightning-rl ...``), not a call of main() inside another program.
    _own_process = False
    #: ``time.monotonic()`` when the command started (the summary's wall time counts from it).
    _started: float | None = None
    #: The CLI being built or run (:func:`run` asks it whether training started when an error came).
    _current: RLCLI | None = None
    #: The run directory ``--ckpt_path last`` continues (found before the trainer is built).
    _resume_run_dir: Path | None = None
    #: How the command line's run or checkpoint was chosen (``validate runs/ppo_cartpole``), in words.
    _choice_rule: str | None = None

    def init_parser(self, **kwargs: Any) -> LightningArgumentParser:
        kwargs.setdefault("parser_mode", "yaml")
        # A typo that happens to be a prefix of a key (--trainer.max_epoch) is an error, not that key.
        kwargs.setdefault("allow_abbrev", False)
        self.parser_class = RLArgumentParser
        return super().init_parser(**kwargs)

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        parser.add_argument(
            "--run_name", type=str | None, default=None,
            help="fit: suffix of the run directory, runs/<algo>_<env>/<date-time>_<run_name>/; with "
            "--ckpt_path last (or best): the run of that name",
        )
        parser.add_argument(
            "--run_group", type=str | None, default=None,
            help="the folder under runs/ that groups this run (default: <algo>_<env> of the algorithm and env "
            "trained, e.g. ppo_cartpole); --ckpt_path last looks there",
        )

    # -- the checkpoint of --ckpt_path, before anything is built ---------------------------------------------

    def _section(self) -> Any:
        """The config of the subcommand (the whole config without one: :func:`from_config`)."""
        subcommand = self.config.get("subcommand")
        return self.config[subcommand] if subcommand else self.config

    def _runs_root(self) -> Path:
        return runs_root(_get(_get(self._section(), "trainer"), "default_root_dir"))

    def _run_group_dir(self) -> Path:
        """``runs/<algo>_<env>`` of the resolved algorithm and env id (``--run_group`` names it instead)."""
        try:
            group = run_group(_get(self._section(), "model"), _get(self._section(), "run_group"))
        except ValueError as error:
            self._exit(str(error))
        return self._runs_root() / group

    def _run_checkpoint(self, kind: str) -> Path:
        """The newest ``<kind>*.ckpt`` (``last``, ``best``) of this config's runs, of the run named
        ``--run_name`` if given; exit 2 naming where it looked if there is none."""
        group_dir = self._run_group_dir()
        name = _get(self._section(), "run_name")
        pattern = f"{kind}*.ckpt"
        if name:
            found = newest_checkpoint(group_dir, pattern, run_name=name)
            if found is None:
                self._exit(f"--ckpt_path {kind} --run_name {name}: no run named {name} with a {kind}.ckpt in "
                           f"{group_dir} (run directories <date-time>_{name})")
        else:
            found = newest_checkpoint(group_dir, pattern)
            if found is None:
                fitting = self.config.get("subcommand") == "fit"
                hint = "; drop --ckpt_path to start a new run" if fitting else ""
                self._exit(f"--ckpt_path {kind}: no {kind} checkpoint in {group_dir}/*/checkpoints{hint}")
        assert found is not None
        return found

    def _resolves_in_run_dirs(self) -> bool:
        """Whether ``--ckpt_path last`` is a run directory's (the default logger, no ModelCheckpoint
        with a directory of its own), so it is found before anything is built."""
        subcommand = self.config.get("subcommand")
        if subcommand in ("validate", "test"):
            return True
        trainer = _get(self._section(), "trainer")
        if _get(trainer, "logger") not in (None, True):
            return False
        for callback in _get(trainer, "callbacks") or []:
            if _get(_get(callback, "init_args"), "dirpath") is not None:
                return False
        return True

    def _parse_ckpt_path(self) -> None:
        """``--ckpt_path`` before anything is built: ``last``/``best`` found in the run directories
        (:meth:`_run_checkpoint`), a file that does not exist refused (exit 2), a finished run's
        checkpoint answered (:meth:`_exit_if_finished`), and where the config differs from the
        checkpoint's saved hyperparameters, a line on stderr.

        LightningCLI would apply the checkpoint's saved hyperparameters over the config, so a resume
        could not change them (a larger total_env_steps was silently replaced by the checkpoint's).
        Here the config and the command line win.
        """
        subcommand = self.config.get("subcommand")
        if not subcommand or subcommand == "play":
            return
        section = self.config[subcommand]
        ckpt_path = section.get("ckpt_path")
        rule = RLCLI._choice_rule
        if ckpt_path in ("last", "best") and (self._resolves_in_run_dirs() or ckpt_path == "best"):
            found = self._run_checkpoint(ckpt_path)
            name = _get(section, "run_name")
            rule = f"the newest {ckpt_path}.ckpt of {found.parent.parent.parent.name}" + (
                f" named {name}" if name else "")
            ckpt_path = str(found)
            section["ckpt_path"] = ckpt_path
        if not ckpt_path:
            if subcommand in ("validate", "test"):
                print(f"{subcommand}: no checkpoint given: evaluating the untrained agent (give a run directory, "
                      f"lightning-rl {subcommand} runs/<algo>_<env>, or --ckpt_path last|best|FILE)")
            return
        if ckpt_path in ("last", "best"):
            return
        if not Path(ckpt_path).is_file():
            self._exit(f"--ckpt_path {ckpt_path}: no such file; give a .ckpt file (or last, for the newest run)")
        try:
            data = load_data(ckpt_path)
        except ValueError as error:  # a file that would need unpickling: refused, nothing run
            self._exit(str(error))
        if subcommand == "fit":
            self._check_written_for_this_run(data)
            self._exit_if_finished(ckpt_path, data)
            # A checkpoint of a run under this command's runs/ continues that run in its directory; one
            # from elsewhere (another machine's, another working directory's) starts a run directory here.
            run_dir = run_dir_of(ckpt_path) if self._resolves_in_run_dirs() else None
            root = self._runs_root().resolve()
            self._resume_run_dir = run_dir if run_dir is not None and root in run_dir.resolve().parents else None
        verb = "resuming" if subcommand == "fit" else subcommand
        print(choice_line(verb, ckpt_path, checkpoint_env_steps(data), rule), flush=True)
        if subcommand != "fit":
            return  # validate/test take the weights; budgets and schedules do not matter there
        saved = migrate_hyperparameters(data.get("hyper_parameters", {}))
        init_args = _get(_get(section, "model"), "init_args") or {}
        changed = [
            f"{key}={_get(init_args, key)!r} (checkpoint: {value!r})"
            for key, value in saved.items()
            if not key.startswith("_") and key in init_args and _get(init_args, key) != value
        ]
        if changed:
            sys.stderr.write(f"lightning-rl: resuming {ckpt_path} with the config's {', '.join(changed)}\n")

    def _check_written_for_this_run(self, data: dict[str, Any]) -> None:
        """Exit 2 naming the fields where the checkpoint's run (algorithm, env id, env count) differs
        from the config's, read from both as data; the spaces are compared once the module exists
        (:func:`~lightning_rl.algos.checkpointing.check_resume`)."""
        run = (data.get(CHECKPOINT_KEY) or {}).get("run")
        if not run:
            return
        init = _get(_get(self._section(), "model"), "init_args")
        sampler = _get(_get(init, "sampler"), "init_args")
        env_id, batch_b = _get(sampler, "env_id"), _get(sampler, "batch_B")
        live = {
            "algorithm": _qualified_name(_get(_get(self._section(), "model"), "class_path")),
            "env_id": env_id if isinstance(env_id, str) else None,
            "batch_B": int(batch_b) if isinstance(batch_b, int) else None,
        }
        try:
            check_compatible(run, live)
        except ValueError as error:
            self._exit(str(error))

    def _exit_if_finished(self, ckpt_path: str, data: dict[str, Any]) -> None:
        """A checkpoint whose run already collected the config's ``total_env_steps``: one line, exit 0
        (nothing is built, no env steps, the checkpoint stays as it is)."""
        ours = data.get(CHECKPOINT_KEY) or {}
        steps = (ours.get("train_state") or {}).get("env_steps")
        total = _get(_get(_get(self._section(), "model"), "init_args"), "total_env_steps")
        world = self._world_size()
        if steps is None or total is None or world is None:
            return
        # Counters are per rank, and a resume on another number of processes continues from rank 0's:
        # the resumed run counts steps x its own world size, as RLModule.global_env_steps does.
        done = int(steps) * world
        if done >= int(total):
            print(f"lightning-rl: {ckpt_path} already reached its budget ({done:,} of total_env_steps={int(total):,} "
                  "env steps): nothing to train; give a larger --model.total_env_steps to train on")
            sys.stdout.flush()
            raise SystemExit(0)

    def _world_size(self) -> int | None:
        """The number of processes the config's Trainer runs (``devices`` x ``num_nodes``); None where
        only the built Trainer knows (``devices: -1``, a GPU count under ``auto``)."""
        trainer = _get(self._section(), "trainer")
        devices, nodes = _get(trainer, "devices", "auto"), _get(trainer, "num_nodes", 1)
        accelerator = str(_get(trainer, "accelerator", "auto") or "auto")
        if isinstance(devices, str) and devices.strip().isdigit():
            devices = int(devices)
        if isinstance(devices, (list, tuple)):
            devices = len(devices)
        if devices in ("auto", None) and (accelerator == "cpu" or not torch.cuda.is_available()):
            devices = 1
        if not isinstance(devices, int) or devices < 1 or not isinstance(nodes, int):
            return None
        return devices * nodes

    def instantiate_classes(self) -> None:
        """Build the model and Trainer; a bad value that the classes reject (a range check in an
        ``__init__``) is a config error: exit 2 naming it, before any env or worker exists."""
        try:
            super().instantiate_classes()
        except ValueError as error:
            for line in explain_error(str(error), self.parser, self._argv, RLArgumentParser.params_file):
                sys.stderr.write(line + "\n")
            raise SystemExit(2) from error
        subcommand = self.config.get("subcommand")
        model_config = self._get(self.config, "model")
        if model_config is not None and hasattr(self.model, "run_config"):
            # The model's config travels with its checkpoints (play <ckpt>, load_from_checkpoint(path)).
            self.model.run_config = self._model_config_as_data(subcommand)
        if subcommand == "test":
            # Held-out env seeds: neither training nor validate used them.
            self.model.seed = self.model._base_seed() + HELD_OUT_SEED_OFFSET
        if subcommand in ("validate", "test"):
            self._default_eval_envs(subcommand)

    def _model_config_as_data(self, subcommand: str | None) -> dict[str, Any]:
        """The model's config as plain data, in the form ``config.yaml`` has: class paths and
        callables as the import paths and ``class_path``/``init_args`` the parser reads back
        (``torch.nn.Tanh``, not the text of a class object), so a checkpoint rebuilds its module."""
        parser = self._parser(subcommand)
        config = self.config[subcommand] if subcommand else self.config
        dumped = yaml.safe_load(parser.dump(config, skip_none=False, skip_check=True))
        return dumped["model"]

    def _default_eval_envs(self, subcommand: str) -> None:
        """Give the sampler's unset evaluation settings their defaults (before its setup builds the eval
        envs, :meth:`~lightning_rl.samplers.base.BaseSampler.use_eval_defaults`) and say which."""
        sampler = getattr(self.model, "sampler", None)
        if sampler is None or not hasattr(sampler, "use_eval_defaults"):
            return
        try:
            used = sampler.use_eval_defaults()
        except ValueError as error:
            self._exit(str(error))
        if used:
            print(f"{subcommand}: evaluating on {sampler.eval_n_envs} envs, "
                  + (f"{sampler.eval_max_trajectories} episodes" if sampler.eval_max_trajectories
                     else f"{sampler.eval_max_steps} steps each")
                  + f" (defaults: {', '.join(used)}; set them with --model.sampler.eval_n_envs and "
                  "--model.sampler.eval_max_trajectories)")

    # -- run directories ---------------------------------------------------------------------------------------

    def _uses_run_dirs(self) -> bool:
        return isinstance(self.trainer.logger, TensorBoardLogger) and getattr(self.trainer.logger, "_rl_run_dir", False)

    def _run_logger(self, ckpt_path: Any) -> TensorBoardLogger:
        """The default logger of ``fit``: TensorBoard into a new run directory, or, for ``--ckpt_path
        last``, into the run directory of the checkpoint it resumes."""
        group_dir = self._run_group_dir()
        run_dir: Path | None = None
        inherited = os.environ.get(RUN_DIR_ENV)
        if inherited and os.environ.get("LOCAL_RANK", "0") != "0":
            run_dir = Path(inherited)  # a DDP rank started by rank 0 shares its directory
        elif self._resume_run_dir is not None:
            run_dir = self._resume_run_dir
        elif ckpt_path == "last":
            last = newest_checkpoint(group_dir)
            run_dir = last.parent.parent if last is not None else None
        new = run_dir is None
        if run_dir is None:
            name = self._get(self.config, "run_name")
            try:
                run_dir = new_run_dir(group_dir.name, name, root=group_dir.parent)
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
        logger._rl_new_run = new  # type: ignore[attr-defined]
        return logger

    def before_fit(self) -> None:
        """The ``--ckpt_path last`` rule (never a silent start from step 0) where the config's own checkpoint
        directory or logger decides it, then :meth:`_check_resume`.

        With run directories (the default logger), ``last`` was resolved before anything was built
        (:meth:`_parse_ckpt_path`) and the run keeps writing into that run directory; a new run
        always gets a new directory. With a config's own checkpoint directory
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
            try:
                data = load_data(ckpt_path)
            except ValueError as error:
                self._exit(str(error))
            self._exit_if_finished(ckpt_path, data)
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

    def before_validate(self) -> None:
        self._check_resume(self._get(self.config, "ckpt_path"))

    before_test = before_validate

    def _check_resume(self, ckpt_path: Any) -> None:
        try:
            check_resume(self.model, ckpt_path)
        except ValueError as error:
            self._exit(str(error))

    def _exit(self, message: str) -> Any:
        command = self.config.get("subcommand") or "fit"
        sys.stderr.write(f"lightning-rl {command}: error: {message}\n")
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

    def instantiate_trainer(self, **kwargs: Any) -> pl.Trainer:
        """The Trainer, with the env-step progress display (:class:`RLProgressBar`) unless the config
        has a progress bar or disables it, a :class:`RunDirectoryCallback` (``run_info.yaml``,
        checkpoint on SIGINT/SIGUSR1) unless the config has one, and for ``fit`` without a logger of
        the config's own, TensorBoard into the run directory (:mod:`lightning_rl.runs`). A
        ``ModelCheckpoint`` that would keep a copy of ``last.ckpt`` (no monitor, ``save_top_k=1``,
        ``save_last``, no ``filename``) writes ``last.ckpt`` only."""
        subcommand = self.config.get("subcommand")
        fitting = subcommand in ("fit", None)
        config = self._get(self.config_init, "trainer", default={}) or {}
        callbacks = list(config.get("callbacks") or [])
        extra: list[pl.Callback] = [_TrainingStarted()]
        if config.get("enable_progress_bar", True) is not False and not any(
            isinstance(c, ProgressBar) for c in callbacks
        ):
            extra.append(RLProgressBar())
        if not any(isinstance(c, RunDirectoryCallback) for c in callbacks):
            extra.append(RunDirectoryCallback())
        kwargs["callbacks"] = [*callbacks, *extra]
        for callback in callbacks:
            if (isinstance(callback, ModelCheckpoint) and callback.monitor is None and callback.save_top_k == 1
                    and callback.save_last is True and callback.filename is None):
                # It would keep the newest epoch's checkpoint, epoch=N-step=M.ckpt, a byte-identical twin of
                # last.ckpt; as rlpyt's "last" snapshot mode (callbacks/snapshots.py) its one file is last.ckpt.
                callback.filename, callback.save_last = "last", False
        if not fitting and config.get("enable_checkpointing", True) is not False:
            # validate/test/play write no checkpoints (and restore no ModelCheckpoint state that
            # points at the run directory of the checkpoint they read).
            kwargs["callbacks"] = [c for c in kwargs["callbacks"] if not isinstance(c, ModelCheckpoint)]
            kwargs["enable_checkpointing"] = False
        if fitting and config.get("limit_val_batches") is None:
            # Fit evaluates through EvaluationCallback; Lightning's validation loop runs in validate only.
            kwargs["limit_val_batches"] = 0
        if config.get("logger") in (None, True):
            if fitting:
                kwargs["logger"] = self._run_logger(self._get(self.config, "ckpt_path"))
            else:
                kwargs["logger"] = False  # validate/test/play write no run directory
        trainer = super().instantiate_trainer(**kwargs)
        for callback in trainer.callbacks:  # type: ignore[attr-defined]
            if self._own_process and isinstance(callback, RunDirectoryCallback) and callback.shutdown_timeout_s is None:
                callback.shutdown_timeout_s = SHUTDOWN_TIMEOUT_S
            if isinstance(callback, RunDirectoryCallback) and callback.process_start is None:
                callback.process_start = self._started
            if isinstance(callback, RLProgressBar) and callback.process_start is None:
                callback.process_start = self._started
            if isinstance(callback, RLProgressBar) and callback.command is None and self._own_process:
                callback.command = ["lightning-rl", *self._argv]
        return trainer

    def before_instantiate_classes(self) -> None:
        RLCLI._current = self

    def training_started(self) -> bool:
        trainer = getattr(self, "trainer", None)
        return any(isinstance(c, _TrainingStarted) and c.started for c in getattr(trainer, "callbacks", []))


def _qualified_name(class_path: Any) -> str | None:
    """``module.QualName`` of the class at ``class_path`` (as a checkpoint records it), None if unknown."""
    import importlib

    if not isinstance(class_path, str) or "." not in class_path:
        return None
    module_name, _, name = class_path.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError):
        return None
    return f"{cls.__module__}.{cls.__qualname__}"


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


def print_episode_table(module: Any, title: str, deterministic: bool | None = None) -> None:
    """Print the returns and lengths of the last evaluation's episodes as a table, and their mean."""
    episodes = getattr(module, "eval_episodes", None)
    if not episodes:
        return
    from rich.console import Console
    from rich.table import Table

    how = "" if deterministic is None else (", deterministic actions" if deterministic else ", sampled actions")
    print(f"{title}: {len(episodes)} eval episodes{how}")
    table = Table()
    table.add_column("episode", justify="right")
    table.add_column("return", justify="right")
    table.add_column("length", justify="right")
    for i, (ret, length) in enumerate(episodes):
        table.add_row(str(i), f"{ret:.2f}", str(int(length)))
    returns = np.array([ret for ret, _ in episodes])
    table.add_row("mean", f"{returns.mean():.2f}", f"± {returns.std():.2f}")
    Console(file=sys.stdout, width=max(60, min(120, Console().width))).print(table)


DESCRIPTION = """lightning_rl: deep RL on PyTorch Lightning.

Configs: --config configs/<algo>/<env>.yaml, or a parameter file: --params FILE [--cpanel JSON] runs the
file's gen_params(cpanel) (lightning_rl.params) and uses the config it returns, e.g.
  lightning-rl fit --params configs/params/ppo_mujoco.py --cpanel '{"lr": 1e-4, "env": "Hopper-v5"}'
Keys have short forms: --model.learning_rate is --model.init_args.learning_rate, --model.sampler.env_id is
--model.init_args.sampler.init_args.env_id.
Runs go to runs/<algo>_<env>/<date-time>[_<run_name>]/ (config.yaml, checkpoints/, TensorBoard, videos/).
The other commands (play, launch, results, tune, export, check-env): lightning-rl --help."""


#: Flags that give a command its config (without one, validate/test take it from the run or checkpoint).
_CONFIG_FLAGS = ("--config", "-c", "--params", "--model")


def checkpoint_args(choice: RunChoice) -> list[str]:
    """The arguments that evaluate or play a chosen checkpoint: its run's ``config.yaml``, or for a
    checkpoint outside a run directory the model config it carries.

    Raises:
        ValueError: If the checkpoint is outside a run directory and carries no config.
    """
    if choice.run_dir is not None:
        return ["--config", str(choice.run_dir / "config.yaml"), "--ckpt_path", str(choice.checkpoint)]
    config = (load_data(choice.checkpoint).get(CHECKPOINT_KEY) or {}).get("config")
    if not config:
        raise ValueError(f"{choice.checkpoint} carries no config and has no config.yaml beside it; add --config")
    return ["--model", json.dumps(config), "--ckpt_path", str(choice.checkpoint)]


def target_args(argv: list[str]) -> tuple[list[str], str | None]:
    """``play``/``validate``/``test`` of a run: ``<command> RUN_DIR|GROUP_DIR|CKPT [options]``, or
    ``validate --ckpt_path FILE`` without a config, as the command line LightningCLI parses (the
    run's ``config.yaml`` and checkpoint), and how the checkpoint was chosen; other command lines as
    they are.

    Raises:
        ValueError: If the target holds no checkpoint, or validate/test has neither a config nor a
            checkpoint.
    """
    command, rest = argv[0], argv[1:]
    if command not in ("play", "validate", "test"):
        return argv, None
    if rest and not rest[0].startswith("-"):
        choice = choose_checkpoint(rest[0])
        return [command, *checkpoint_args(choice), *rest[1:]], choice.rule
    if command == "play" or any(a in _CONFIG_FLAGS or a.startswith(tuple(f + "=" for f in _CONFIG_FLAGS))
                                for a in rest):
        return argv, None
    given = [v for i, v in enumerate(rest) if i and rest[i - 1] == "--ckpt_path"]
    given += [a.split("=", 1)[1] for a in rest if a.startswith("--ckpt_path=")]
    if not given or given[-1] in ("last", "best"):
        raise ValueError(f"which run? give a run directory (lightning-rl {command} runs/ppo_cartpole), a checkpoint "
                         f"(--ckpt_path FILE) or a config (--config FILE --ckpt_path last)")
    choice = choose_checkpoint(given[-1])
    others, skip = [], False
    for a in rest:
        if skip:
            skip = False
        elif a == "--ckpt_path":
            skip = True
        elif not a.startswith("--ckpt_path="):
            others.append(a)
    return [command, *checkpoint_args(choice), *others], choice.rule


def _import_classes() -> None:
    """Import every algorithm, agent, sampler and callback class, so short names (``--model PPO``,
    ``--trainer.callbacks+=EvaluationCallback``) resolve: jsonargparse finds subclasses among the
    imported ones. Works whether the packages import their classes eagerly or on first use."""
    import importlib

    for package in ("lightning_rl.algos", "lightning_rl.agents", "lightning_rl.samplers", "lightning_rl.callbacks"):
        module = importlib.import_module(package)
        for name in getattr(module, "__all__", []):
            getattr(module, name)


def make_cli(
    args: list[str] | None, callbacks: Sequence[pl.Callback] = (), run: bool = True
) -> RLCLI:
    """LightningCLI as ``lightning-rl`` builds it, run on ``args`` (None: ``sys.argv[1:]``), with
    ``callbacks`` appended to the trainer's after the config's own (``lightning-rl tune`` adds its
    pruning callback this way); ``run=False`` builds the module and trainer of ``fit`` without
    running it (:func:`from_config`)."""
    _import_classes()
    quiet_lightning()
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
        save_config_callback=_SaveFitConfig,
        save_config_kwargs={"overwrite": True},
        # One logged point per sampler iteration (a rollout, or an off-policy sampler batch).
        trainer_defaults={"max_epochs": -1, "log_every_n_steps": 1},
        parser_kwargs={"description": DESCRIPTION, "formatter_class": RawDescriptionFormatter},
        args=args,
        run=run,
    )


def _override_text(value: Any) -> str:
    """A Python value as a command-line value (jsonargparse reads it as YAML/JSON)."""
    return value if isinstance(value, str) else json.dumps(value)


def from_config(
    config: str | os.PathLike[str] | Mapping[str, Any],
    overrides: Mapping[str, Any] | None = None,
    **model_args: Any,
) -> tuple[RLModule, RLTrainer]:
    """The module and trainer that ``lightning-rl fit --config <config>`` would train, built in one call.

    Example::

        import lightning_rl

        module, trainer = lightning_rl.from_config(
            "configs/ppo/cartpole.yaml", {"model.sampler.env_id": "Acrobot-v1"}, total_env_steps=20_000
        )
        trainer.fit(module)   # a run directory under runs/, progress, summary and checkpoints as the CLI's

    Args:
        config: A config file, or the config itself as a mapping (a parsed YAML file).
        overrides: Dotted keys as on the command line without the dashes, short or long form:
            ``{"model.learning_rate": 3e-4, "trainer.max_epochs": 5, "run_name": "wide"}``.
        **model_args: Shorthand for ``model.<name>`` overrides: ``learning_rate=3e-4``.

    Returns:
        ``(module, trainer)``; ``trainer.fit(module)`` trains (``ckpt_path=`` resumes a checkpoint).

    Raises:
        ValueError: If the config or an override is not valid, with the short message the CLI prints.
    """
    import contextlib
    import io

    if isinstance(config, Mapping):
        args = ["--config", yaml.safe_dump(dict(config), sort_keys=False)]
    else:
        if not os.path.isfile(config):
            raise ValueError(f"config: {os.fspath(config)} is not a file")
        args = ["--config", os.fspath(config)]
    for key, value in {**(overrides or {}), **{f"model.{k}": v for k, v in model_args.items()}}.items():
        args += [f"--{key}", _override_text(value)]
    RLCLI._argv = ["fit", *args]
    RLCLI._own_process = False
    RLCLI._started = time.monotonic()
    RLArgumentParser.argv = RLCLI._argv
    RLArgumentParser.verbose = False
    RLArgumentParser.params_file = None
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors):
            cli = make_cli(args, run=False)
    except SystemExit as exit_:
        lines = [line.replace("lightning-rl fit: error: ", "").strip() for line in errors.getvalue().splitlines()]
        raise ValueError(" ".join(line for line in lines if line) or f"config rejected (exit {exit_.code})") from None
    return cli.model, cli.trainer  # type: ignore[return-value]


def _process_start(own_process: bool, started: float | None) -> float:
    """``time.monotonic()`` at the start of this process (own process) or of this command."""
    if own_process:
        try:
            import psutil

            return time.monotonic() - max(0.0, time.time() - psutil.Process().create_time())
        except (ImportError, OSError):
            pass
    return started if started is not None else time.monotonic()


def _config_error_lines(error: ValueError) -> list[str]:
    """A config problem's lines: lightning_rl's own check says it in its message (its first line, the
    second of a multi-line one); the user's code (an env's constructor or reset) is named with the
    exception's type and the frame that raised it (:func:`~lightning_rl.error_report.error_lines`)."""
    if user_frame(error) is not None:
        return error_lines(error)
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()] or [type(error).__name__]
    out = [lines[0]]
    if len(lines) > 1:  # a message of several lines (the fields a check names): the first of them
        out.append(f"  {lines[1]}" + (" ..." if len(lines) > 2 else ""))
    return [*out, "  --verbose shows the traceback"]


def _print_error_lines(command: str, lines: list[str]) -> None:
    print(f"lightning-rl {command}: error: {lines[0]}", file=sys.stderr)
    for line in lines[1:]:
        print(line, file=sys.stderr)


def _error_log(current: RLCLI | None) -> str | None:
    """The ``error.log`` the run's :class:`RunDirectoryCallback` wrote, if any."""
    trainer = getattr(current, "trainer", None)
    for callback in getattr(trainer, "callbacks", None) or []:
        if isinstance(callback, RunDirectoryCallback) and callback.error_log:
            return str(callback.error_log)
    return None


def run(argv: list[str], own_process: bool = False, verbose: bool = False, started: float | None = None) -> int:
    """Run ``fit``, ``validate``, ``test`` or ``play`` (``argv[0]``) with the rest of ``argv``; the exit status.

    A ``ValueError`` before training starts (an env id gymnasium does not know, a space the agent
    cannot take) is a config problem: two lines and exit status 2. Any other failure of the command's
    own process is said in at most four lines (:func:`lightning_rl.error_report.error_lines`: the
    type, the message, the user's frame that raised it, the run's ``error.log``) with exit status 1;
    Ctrl-C outside training is one line and status 130. ``verbose`` shows the tracebacks instead;
    inside another program (``own_process=False``) the exception propagates.

    Args:
        argv: The command line after ``lightning-rl``.
        own_process: This command is the whole process (``lightning-rl ...``), not a call inside a program.
        verbose: Full parser messages and tracebacks instead of the short error lines.
        started: ``time.monotonic()`` when the command started (default: now).
    """
    from lightning_rl.envs.rendering import choose_gl_backend
    from lightning_rl.play import quiet_sdl

    choose_gl_backend()  # before anything imports mujoco: a headless machine renders through EGL/OSMesa
    quiet_sdl()
    command = argv[0]
    try:
        argv, RLCLI._choice_rule = target_args(argv)
        expanded = expand_params_args(argv)
    except ValueError as error:
        # Reported as argparse reports usage errors: on stderr, exit status 2.
        print(f"lightning-rl {command}: error: {error}", file=sys.stderr)
        return 2
    RLCLI._argv = list(expanded)
    RLCLI._own_process = own_process
    RLCLI._started = _process_start(own_process, started)
    RLCLI._current = None
    RLArgumentParser.verbose = verbose
    RLArgumentParser.argv = list(expanded)
    given = [a for i, a in enumerate(argv) if i and argv[i - 1] == "--params"]
    given += [a.split("=", 1)[1] for a in argv if a.startswith("--params=")]
    RLArgumentParser.params_file = given[-1] if given else None
    torch.set_float32_matmul_precision("high")
    try:
        cli = make_cli(expanded)
    except KeyboardInterrupt:
        if verbose or not own_process:
            raise
        print(f"lightning-rl {command}: interrupted", file=sys.stderr)
        return 130
    except Exception as error:
        if verbose:
            raise
        current = RLCLI._current
        started = current is not None and current.training_started()
        if isinstance(error, ValueError) and not started:
            # A config problem (an env id gymnasium does not know, a space the agent cannot take): in a
            # line or two; with its type and place when the user's own code raised it.
            _print_error_lines(command, _config_error_lines(error))
            return 2
        if not own_process:
            raise
        _print_error_lines(command, error_lines(error, _error_log(current)))
        return 1
    for callback in getattr(getattr(cli, "trainer", None), "callbacks", []):
        if isinstance(callback, RunDirectoryCallback) and callback.exit_code:
            return callback.exit_code  # stopped by Ctrl-C (1) or SIGTERM (143): last.ckpt saved
    return 0
