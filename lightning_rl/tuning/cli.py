"""``lightning-rl tune <config> <space.yaml>``: an Optuna study over dotted config keys.

Each trial is one ``fit`` of the base config with the space's ``fixed`` values and the trial's
sampled values set (:mod:`lightning_rl.tuning.space`). Its directory,
``<study_dir>/trial_<number>/``, holds that complete ``config.yaml`` (``lightning-rl fit --config``
re-runs it), ``variant.yaml`` (the sampled values, as a grid variant's) and the run,
``runs/<algo>_<env>/<date-time>/`` (``--trainer.default_root_dir`` is the trial directory), as a
grid's variant directory does; so ``lightning-rl results <study_dir>`` reads a study as it reads a
grid, and the paths a trial prints (its checkpoint, ``play it: ...``) exist as printed. Each evaluation (the config's
:class:`~lightning_rl.callbacks.EvaluationCallback`, added when the config has none) is reported to
the trial with env steps as the step, and the pruner may stop the trial there
(:class:`~lightning_rl.tuning.pruning.PruningCallback`). The trial's value is its best (or last,
``--objective last``) ``eval/return_mean``. A trial whose fit fails is recorded as failed, with its
error in the trial's user attribute ``error``, and the study goes on.

The study lives in ``--storage`` (default: SQLite, ``<study_dir>/study.db``) and is loaded if it
exists, so running the same command again resumes it: trials are added until the study holds
``--n_trials`` (complete, pruned, failed with an error, or running in another process). Several
processes may work on one study at once; a trial whose process died (its heartbeat stopped) is
marked failed and done again. Interrupted trials (Ctrl-C) are redone too. When the study holds a
complete trial, the best one is written to ``--out`` as the base config with the best values set
(the space's ``fixed`` tuning settings are left out, so ``fit`` trains at the base config's budget).

Trials run in this process, through the same LightningCLI as ``lightning-rl fit``, so the pruning
callback holds the live Optuna trial; one trial runs at a time per process (run more processes for
more at once), each in one process (a DDP config would relaunch this command per rank).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import os
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from lightning_rl.runs import RUN_DIR_ENV, run_group
from lightning_rl.tuning.space import SearchSpace, apply_overrides, load_space

if TYPE_CHECKING:
    import optuna
    import pytorch_lightning as pl

    from lightning_rl.lightning_cli import RLCLI

__all__ = ["main", "trial_config", "tune"]

#: Seconds between a running trial's heartbeats in the storage, and after which a silent one is stale.
HEARTBEAT_INTERVAL_S = 10
HEARTBEAT_GRACE_S = 60
#: Seconds a process waits for another's SQLite write lock before its write fails.
SQLITE_TIMEOUT_S = 60
EVALUATION_CALLBACK = "lightning_rl.callbacks.EvaluationCallback"


class TrialError(RuntimeError):
    """A trial's fit failed; the study records it and goes on."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lightning-rl tune",
        description="Tune a config's hyperparameters with Optuna (needs the tune extra: pip install "
        "'lightning-rl[tune]'). Running the same command again resumes the study.",
    )
    parser.add_argument("config", help="the base config, as lightning-rl fit --config takes it")
    parser.add_argument("space", help="the search space: a YAML file with params (and fixed) by dotted key")
    parser.add_argument("--n_trials", type=int, default=10, help="trials the study holds when done (default 10)")
    parser.add_argument("--storage", default=None,
                        help="study database URL (default sqlite:///<study_dir>/study.db)")
    parser.add_argument("--study_name", default=None, help="default: the config's <algo>_<env>")
    parser.add_argument("--study_dir", default=None, help="trial directories and best.yaml (default tune/<study_name>)")
    parser.add_argument("--pruner", choices=["median", "none"], default="median")
    parser.add_argument("--sampler", choices=["tpe", "random"], default="tpe")
    parser.add_argument("--seed", type=int, default=None,
                        help="sampler seed, plus the trials the study already holds (give processes that "
                        "start on one study together different seeds)")
    parser.add_argument("--n_startup_trials", type=int, default=5,
                        help="trials sampled at random, and not pruned, before TPE and the median rule start")
    parser.add_argument("--n_warmup_steps", type=int, default=0,
                        help="env steps of each trial before the median pruner may stop it")
    parser.add_argument("--objective", choices=["best", "last"], default="best",
                        help="a trial's value: its best or its last eval/return_mean")
    parser.add_argument("--direction", choices=["maximize", "minimize"], default="maximize")
    parser.add_argument("--out", default=None, help="the best trial's config (default <study_dir>/best.yaml)")
    return parser


def main(argv: list[str]) -> int:
    """Run ``lightning-rl tune`` with ``argv``; its exit status (0: a best config was written, 1: no
    trial completed or interrupted, 2: bad input)."""
    options = build_parser().parse_args(argv)
    try:
        import optuna  # noqa: F401
    except ModuleNotFoundError as error:
        print(f"lightning-rl tune: error: {error.name} is not installed: pip install 'lightning-rl[tune]'",
              file=sys.stderr)
        return 2
    import lightning_rl.algos.catalog  # noqa: F401  (class_path names in configs resolve)
    import lightning_rl.callbacks  # noqa: F401
    from lightning_rl.video import choose_gl_backend

    choose_gl_backend()
    try:
        study, out = tune(
            options.config, load_space(options.space), n_trials=options.n_trials, storage=options.storage,
            study_name=options.study_name, study_dir=options.study_dir, pruner=options.pruner,
            sampler=options.sampler, seed=options.seed, n_startup_trials=options.n_startup_trials,
            n_warmup_steps=options.n_warmup_steps, objective=options.objective, direction=options.direction,
            out=options.out,
        )
    except ValueError as error:
        print(f"lightning-rl tune: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("lightning-rl tune: interrupted; run the same command again to resume the study", file=sys.stderr)
        return 1
    print(summary(study, out))
    return 0 if out is not None else 1


def tune(
    config: str | os.PathLike,
    space: SearchSpace,
    *,
    n_trials: int = 10,
    storage: str | None = None,
    study_name: str | None = None,
    study_dir: str | os.PathLike | None = None,
    pruner: str | optuna.pruners.BasePruner = "median",
    sampler: str | optuna.samplers.BaseSampler = "tpe",
    seed: int | None = None,
    n_startup_trials: int = 5,
    n_warmup_steps: int = 0,
    objective: str = "best",
    direction: str = "maximize",
    out: str | os.PathLike | None = None,
) -> tuple[optuna.Study, Path | None]:
    """Create or load the study and run trials until it holds ``n_trials`` (module docstring).

    Args:
        config: The base config file.
        space: The search space (and fixed values).
        n_trials: Trials the study holds when this returns (complete, pruned, failed with an error,
            or running elsewhere); a resumed study adds only the missing ones.
        storage: An SQLAlchemy database URL (``sqlite:///study.db``, relative to the working
            directory); None: ``sqlite:///<study_dir>/study.db``.
        study_name: Default: the config's run group (``configs/ppo/cartpole.yaml`` -> ``ppo_cartpole``).
        study_dir: Where trial directories and the best config go; default ``tune/<study_name>``.
        pruner: ``"median"``, ``"none"`` or an Optuna pruner.
        sampler: ``"tpe"``, ``"random"`` or an Optuna sampler.
        seed: Seed of a named sampler; a study that already holds ``k`` trials is resumed with ``seed + k``
            (the same seed again would repeat the values of its first trials).
        n_startup_trials: Random trials before TPE, and trials before the median pruner prunes.
        n_warmup_steps: Env steps before the median pruner may prune a trial.
        objective: ``"best"`` or ``"last"`` reported ``eval/return_mean`` of a trial.
        direction: ``"maximize"`` or ``"minimize"``.
        out: The best trial's config file; default ``<study_dir>/best.yaml``.

    Returns:
        The study, and the best config's path (None if no trial is complete).

    Raises:
        ValueError: If an argument, the config or its combination with the space is not valid (named),
            before any trial runs.
    """
    import optuna

    config_path = Path(config).resolve()
    if not config_path.is_file():
        raise ValueError(f"config: {config} is not a file")
    base = yaml.safe_load(config_path.read_text())
    if not isinstance(base, dict):
        raise ValueError(f"config: {config} does not hold a mapping (a LightningCLI config)")
    if n_trials < 1:
        raise ValueError(f"--n_trials must be >= 1, got {n_trials}")
    if n_startup_trials < 0 or n_warmup_steps < 0:
        raise ValueError(f"--n_startup_trials and --n_warmup_steps must be >= 0, got {n_startup_trials}, "
                         f"{n_warmup_steps}")
    if objective not in ("best", "last"):
        raise ValueError(f"objective must be 'best' or 'last', got {objective!r}")
    if direction not in ("maximize", "minimize"):
        raise ValueError(f"direction must be 'maximize' or 'minimize', got {direction!r}")
    study_name = study_name or run_group(base.get("model"))  # <algo>_<env>, as a run's group
    study_dir = Path(study_dir if study_dir is not None else Path("tune") / study_name).resolve()
    study_dir.mkdir(parents=True, exist_ok=True)
    out_path = Path(out).resolve() if out is not None else study_dir / "best.yaml"
    check_config(trial_config(base, space, space.first()), study_dir)

    rdb = open_storage(storage if storage is not None else f"sqlite:///{study_dir / 'study.db'}")
    study = optuna.create_study(
        storage=rdb, study_name=study_name, direction=optuna.study.StudyDirection[direction.upper()],
        load_if_exists=True, pruner=make_pruner(pruner, n_startup_trials, n_warmup_steps),
    )
    # A resumed study must not draw its first trials' values again: the seed moves on by the trials it holds.
    study.sampler = make_sampler(sampler, None if seed is None else seed + len(study.trials), n_startup_trials)
    if study.direction.name.lower() != direction:
        raise ValueError(
            f"study {study_name!r} in {rdb.url} was created to {study.direction.name.lower()}, not to {direction}"
        )
    run_trial = Objective(base, space, study_dir, objective=objective, direction=direction)
    # At most n_trials attempts per invocation: an attempt that does not count (interrupted) cannot loop.
    for _ in range(n_trials):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            optuna.storages.fail_stale_trials(study)
        if counted_trials(study) >= n_trials:
            break
        study.optimize(run_trial, n_trials=1, catch=(Exception,), gc_after_trial=True)
    if not study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
        return study, None
    write_best_config(study, base, space, out_path, config_path)
    return study, out_path


class Objective:
    """One trial: write its config, fit it in this process, return its value (module docstring).

    Args:
        base: The base config (a mapping, as read from YAML).
        space: The search space.
        study_dir: Where ``trial_<number>/`` directories go.
        objective: ``"best"`` or ``"last"`` reported value.
        direction: ``"maximize"`` or ``"minimize"`` (which value is the best).
    """

    def __init__(self, base: dict[str, Any], space: SearchSpace, study_dir: Path, objective: str,
                 direction: str) -> None:
        self.base, self.space, self.study_dir = base, space, study_dir
        self.objective, self.direction = objective, direction

    def __call__(self, trial: optuna.Trial) -> float:
        import optuna

        from lightning_rl.tuning.pruning import PruningCallback

        try:
            params = self.space.suggest(trial)
            trial_dir = self.study_dir / f"trial_{trial.number:04d}"
            trial_dir.mkdir(parents=True, exist_ok=True)
            config = trial_config(self.base, self.space, params)
            (trial_dir / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
            (trial_dir / "variant.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
            trial.set_user_attr("dir", str(trial_dir))
            pruning = PruningCallback(trial)
            cli = fit_in_process(trial_dir / "config.yaml", trial_dir, [pruning])
            trial.set_user_attr("env_steps", int(cli.model.global_env_steps))
            if pruning.pruned_at is not None:
                raise optuna.TrialPruned(f"pruned after its evaluation at {pruning.pruned_at} env steps")
            values = [value for _, value in pruning.reported]
            if not values:
                raise TrialError("no evaluation ran before fit ended (evaluations come at epoch ends: "
                                 "total_env_steps below log_interval_steps, or an early stop before the first)")
            value = objective_value(values, self.objective, self.direction)
            if not math.isfinite(value):
                raise TrialError(f"the objective is {value}")
            return value
        except (optuna.TrialPruned, KeyboardInterrupt):
            raise
        except Exception as error:
            # Recorded on the trial (counted toward --n_trials, unlike an interrupted one).
            trial.set_user_attr("error", f"{type(error).__name__}: {error}")
            raise


def objective_value(values: list[float], objective: str, direction: str) -> float:
    """A trial's value from its evaluations in order: the last, or the best (the largest when maximizing)."""
    if objective == "last":
        return values[-1]
    return max(values) if direction == "maximize" else min(values)


def trial_config(base: dict[str, Any], space: SearchSpace, params: dict[str, Any]) -> dict[str, Any]:
    """The complete config of a trial: ``base`` with the space's fixed values and ``params`` set,
    plus an :class:`~lightning_rl.callbacks.EvaluationCallback` (every epoch) if it has none.

    Raises:
        ValueError: If a dotted key cannot be set in ``base`` (:func:`~lightning_rl.tuning.space.set_dotted`).
    """
    config = apply_overrides(base, {**space.fixed, **params})
    trainer = config.get("trainer")
    if trainer is None:
        trainer = config["trainer"] = {}
    if not isinstance(trainer, dict):
        raise ValueError(f"config: trainer must be a mapping, got {trainer!r}")
    callbacks = trainer.get("callbacks") or []
    callbacks = list(callbacks) if isinstance(callbacks, list) else [callbacks]
    names = [c.get("class_path", "") if isinstance(c, dict) else str(c) for c in callbacks]
    if not any(name.rsplit(".", 1)[-1] == "EvaluationCallback" for name in names):
        callbacks.append({"class_path": EVALUATION_CALLBACK, "init_args": {"every_n_epochs": 1}})
    trainer["callbacks"] = callbacks
    return config


def check_config(config: dict[str, Any], study_dir: Path) -> dict[str, Any]:
    """``fit``'s resolved form of a trial config (``--print_config``); a sampler without eval envs
    evaluates on its defaults (4 envs, 10 episodes).

    Raises:
        ValueError: With fit's own message, if fit does not accept the config (an unknown key, a
            wrong type).
    """
    path = study_dir / ".check_config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    stdout, stderr = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            make_cli(["fit", "--config", str(path), "--print_config"])
        status: Any = 0
    except SystemExit as exit_:
        status = exit_.code
    finally:
        path.unlink(missing_ok=True)
    if status not in (0, None):
        text = stderr.getvalue()
        message = text[text.find("error:"):].strip() if "error:" in text else text.strip()[-2000:]
        raise ValueError(f"fit does not accept the base config with the space's keys set: {message}")
    resolved = yaml.safe_load(stdout.getvalue()) or {}
    return resolved


def make_cli(args: list[str], callbacks: list[pl.Callback] | None = None) -> RLCLI:
    """LightningCLI as ``lightning-rl`` builds it (:func:`lightning_rl.lightning_cli.run`), run on
    ``args``, with ``callbacks`` appended to the trainer's (after the config's own)."""
    from lightning_rl.lightning_cli import QUIET_WARNINGS, RLCLI, RLArgumentParser
    from lightning_rl.lightning_cli import make_cli as make_lightning_rl_cli

    RLCLI._argv = list(args)
    RLCLI._started = None
    RLArgumentParser.argv = list(args)
    RLArgumentParser.params_file = None
    with warnings.catch_warnings():
        for message in QUIET_WARNINGS:
            warnings.filterwarnings("ignore", message=message)
        return make_lightning_rl_cli(args, callbacks or ())


def fit_in_process(config_path: Path, workdir: Path, callbacks: list[pl.Callback]) -> RLCLI:
    """``lightning-rl fit`` of the config in ``config_path`` in this process, its run directory under
    ``workdir/runs/`` (``--trainer.default_root_dir``), plus ``callbacks``. The config is handed over as
    text, so the run is named after its algorithm and env (``runs/ppo_cartpole/...``), as ``fit
    --config`` of the base config would name it.

    Raises:
        TrialError: If fit exits with an error status (its message went to stderr).
        KeyboardInterrupt: If the run was stopped by Ctrl-C (it saved ``last.ckpt`` first).
    """
    from lightning_rl.callbacks.run_directory import RunDirectoryCallback

    previous_run = os.environ.pop(RUN_DIR_ENV, None)
    args = ["fit", "--config", config_path.read_text(), "--trainer.default_root_dir", str(workdir)]
    try:
        cli = make_cli(args, callbacks)
    except SystemExit as exit_:
        if exit_.code == 1:  # Lightning's exit after a second Ctrl-C
            raise KeyboardInterrupt from None
        raise TrialError(f"fit exited with status {exit_.code} (its error is above)") from None
    finally:
        if previous_run is None:
            os.environ.pop(RUN_DIR_ENV, None)
        else:
            os.environ[RUN_DIR_ENV] = previous_run
    if any(isinstance(c, RunDirectoryCallback) and c.exit_code == 1
           for c in cli.trainer.callbacks):  # type: ignore[attr-defined]
        raise KeyboardInterrupt("stopped by Ctrl-C (last.ckpt saved)")
    return cli


def open_storage(url: str) -> optuna.storages.RDBStorage:
    """The study database at ``url``, with heartbeats (a dead process's trial becomes stale) and,
    for SQLite, an absolute path (trials change the working directory) and a lock timeout.

    Raises:
        ValueError: If ``url`` is not a database URL.
    """
    import optuna

    if "://" not in url:
        raise ValueError(f"--storage must be a database URL such as sqlite:///study.db, got {url!r}")
    engine_kwargs: dict[str, Any] = {}
    if url.startswith("sqlite:///"):
        path = Path(url[len("sqlite:///"):]).resolve()
        path.parent.mkdir(parents=True, exist_ok=True)
        url = f"sqlite:///{path}"
        engine_kwargs = {"connect_args": {"timeout": SQLITE_TIMEOUT_S}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.storages.RDBStorage(
            url, engine_kwargs=engine_kwargs, heartbeat_interval=HEARTBEAT_INTERVAL_S,
            grace_period=HEARTBEAT_GRACE_S,
        )


def _by_name(option: str, value: Any, factories: dict[str, Callable[[], Any]]) -> Any:
    """``value`` itself, or for a name the object its factory builds; another name raises ``ValueError``."""
    if not isinstance(value, str):
        return value
    if value not in factories:
        raise ValueError(f"{option} must be {' or '.join(factories)}, got {value!r}")
    return factories[value]()


def make_sampler(sampler: str | optuna.samplers.BaseSampler, seed: int | None,
                 n_startup_trials: int) -> optuna.samplers.BaseSampler:
    """``"tpe"`` (random for the first ``n_startup_trials``), ``"random"``, or ``sampler`` itself.

    Raises:
        ValueError: If ``sampler`` is another name.
    """
    import optuna

    return _by_name("--sampler", sampler, {
        "tpe": lambda: optuna.samplers.TPESampler(seed=seed, n_startup_trials=n_startup_trials),
        "random": lambda: optuna.samplers.RandomSampler(seed=seed),
    })


def make_pruner(pruner: str | optuna.pruners.BasePruner, n_startup_trials: int,
                n_warmup_steps: int) -> optuna.pruners.BasePruner:
    """``"median"`` (prune a trial below the median of earlier trials at the same env step), ``"none"``,
    or ``pruner`` itself.

    Raises:
        ValueError: If ``pruner`` is another name.
    """
    import optuna

    return _by_name("--pruner", pruner, {
        "median": lambda: optuna.pruners.MedianPruner(n_startup_trials=n_startup_trials, n_warmup_steps=n_warmup_steps),
        "none": optuna.pruners.NopPruner,
    })


def counted_trials(study: optuna.Study) -> int:
    """Trials that count toward ``--n_trials``: complete, pruned, running, or failed with an error
    (not those interrupted or whose process died: they are redone)."""
    from optuna.trial import TrialState

    return sum(
        t.state in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING)
        or (t.state == TrialState.FAIL and "error" in t.user_attrs)
        for t in study.get_trials(deepcopy=False)
    )


def write_best_config(study: optuna.Study, base: dict[str, Any], space: SearchSpace, out: Path,
                      config_path: Path) -> None:
    """``base`` with the best trial's values set, as a config file ``fit`` runs."""
    best = study.best_trial
    params = space.decode(best.params)
    header = [
        f"# lightning-rl tune: the best of study {study.study_name!r} (trial {best.number}, value {best.value:.6g}):",
        f"# {config_path} with these values set ({len(study.trials)} trials in the study when written).",
        f"# The trial's own config (with the space's fixed tuning settings): {best.user_attrs.get('dir', '?')}",
    ]
    body = yaml.safe_dump(apply_overrides(base, params), sort_keys=False)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(header) + "\n" + body)


def summary(study: optuna.Study, out: Path | None) -> str:
    """The study's trials (state, value, env steps, values) and its best trial, as text."""
    from optuna.trial import TrialState

    trials = study.get_trials(deepcopy=False)
    counts = {state: sum(t.state == state for t in trials) for state in TrialState}
    lines = [
        f"study {study.study_name}: {len(trials)} trials: {counts[TrialState.COMPLETE]} complete, "
        f"{counts[TrialState.PRUNED]} pruned, {counts[TrialState.FAIL]} failed, {counts[TrialState.RUNNING]} running",
        f"{'trial':>5}  {'state':<8}  {'value':>9}  {'env steps':>9}  params",
    ]
    for t in trials:
        value = f"{t.value:.2f}" if t.value is not None else "-"
        if t.state == TrialState.PRUNED and t.intermediate_values:
            step = max(t.intermediate_values)
            value = f"({t.intermediate_values[step]:.2f})"
        params = " ".join(f"{k.rsplit('.', 1)[-1]}={_short(v)}" for k, v in t.params.items())
        if "error" in t.user_attrs:
            note = f"  error: {t.user_attrs['error']}"
        elif t.state == TrialState.FAIL:
            note = "  (interrupted, or its process died: not counted, done again)"
        else:
            note = ""
        lines.append(f"{t.number:>5}  {t.state.name:<8}  {value:>9}  {t.user_attrs.get('env_steps', '-'):>9}  "
                     f"{params}{note}")
    if out is not None:
        best = study.best_trial
        lines.append(f"best: trial {best.number}, value {best.value:.2f}")
        lines += [f"  {k}: {_short(v)}" for k, v in best.params.items()]
        lines.append(f"best config: {out} (lightning-rl fit --config {out})")
    else:
        lines.append("no complete trial: no best config written")
    return "\n".join(lines)


def _short(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)
