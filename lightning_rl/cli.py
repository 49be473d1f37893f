"""The ``lightning-rl`` command: a light entry point that imports only what each command uses.

Examples::

    lightning-rl --version
    lightning-rl fit --config configs/ppo/cartpole.yaml                  # a new run in runs/ppo_cartpole/<date-time>/
    lightning-rl fit --config configs/ppo/cartpole.yaml --model.learning_rate 3e-4 --run_name lr3e-4
    lightning-rl fit --config configs/ppo/cartpole.yaml --ckpt_path last # resume the newest run of this config
    lightning-rl validate --config configs/ppo/cartpole.yaml --ckpt_path last   # a table of eval episode returns
    lightning-rl play runs/ppo_cartpole                                   # the newest run's best (else last) checkpoint
    lightning-rl fit --help                                               # the common options; --help all: every one

``--version``, ``--help``, each command's ``--help``, a command line that names a missing file and
most config errors (:mod:`lightning_rl.config_check`) answer here, without importing torch or
Lightning; ``play`` of a run loads its agent without Lightning (:func:`lightning_rl.load_policy`).
``fit``, ``validate``, ``test`` and ``play`` run
through LightningCLI (:mod:`lightning_rl.lightning_cli`); ``launch``, ``results``, ``tune``,
``export`` and ``check-env`` are argparse commands of their own modules. ``python -m lightning_rl``
and ``python -m lightning_rl.cli`` run the same command.
"""

from __future__ import annotations

import difflib
import importlib
import os
import sys
import time
from typing import Any

#: When this module was imported: the start of a ``lightning-rl`` process, for the summary's wall time.
IMPORTED_AT = time.monotonic()

#: Every command with its one-line description, in the order ``--help`` lists them.
COMMANDS: dict[str, str] = {
    "fit": "train an agent from a config: a new run directory, or --ckpt_path last to resume",
    "validate": "evaluate a checkpoint: a table of eval episode returns",
    "test": "evaluate a checkpoint on held-out env seeds",
    "play": "watch a run's agent play a few episodes, optionally as videos",
    "check-env": "check an env against gymnasium's and lightning_rl's rules",
    "launch": "run a grid of configs x seeds here or on Slurm (resumable)",
    "results": "tables and learning curves of the runs under a directory, across seeds",
    "tune": "tune a config's hyperparameters with Optuna (extra: tune)",
    "export": "write a trained policy as TorchScript and/or ONNX (extra: export)",
}
#: The commands LightningCLI runs (:mod:`lightning_rl.lightning_cli`).
LIGHTNING_COMMANDS = ("fit", "validate", "test", "play")

#: Commands outside LightningCLI: name -> (module whose ``main(argv) -> int`` runs it, the extra it needs).
TOOL_COMMANDS: dict[str, tuple[str, str | None]] = {
    "launch": ("lightning_rl.launch.cli", None),
    "tune": ("lightning_rl.tuning.cli", "tune"),
    "export": ("lightning_rl.export.cli", "export"),
    "results": ("lightning_rl.results.cli", None),
}
#: Where each tool command's ``build_parser()`` lives (modules that import neither torch nor Lightning).
TOOL_PARSERS: dict[str, str] = {
    "launch": "lightning_rl.launch.cli",
    "tune": "lightning_rl.tuning.cli",
    "export": "lightning_rl.export.cli",
    "results": "lightning_rl.results.cli",
    "check-env": "lightning_rl.cli",
}

HELP_FLAGS = ("-h", "--help")
VERBOSE_FLAG = "--verbose"


def _version() -> str:
    from lightning_rl import __version__

    return __version__


def main_help() -> str:
    """``lightning-rl --help``: every command with one line, and where to go next."""
    width = max(len(name) for name in COMMANDS)
    commands = "\n".join(f"  {name:<{width}}  {line}" for name, line in COMMANDS.items())
    return f"""usage: lightning-rl [--version] [--help] <command> [options]

lightning_rl {_version()}: deep reinforcement learning on PyTorch Lightning.

commands:
{commands}

Each command has its own --help (lightning-rl fit --help).
  lightning-rl fit --config configs/ppo/cartpole.yaml      train; the run goes to runs/ppo_cartpole/<date-time>/
  lightning-rl play runs/ppo_cartpole                       watch the newest run's agent
Configs: --config FILE, or a parameter file: --params FILE [--cpanel JSON] (its gen_params(cpanel)).
Guide: docs/guides/cli.md
"""


_OVERRIDES = """overrides (any key of the config; the short forms leave out class_path/init_args):
  --model.learning_rate 3e-4            (= --model.init_args.learning_rate 3e-4)
  --model.total_env_steps 100000        the env-step budget
  --model.sampler.env_id Acrobot-v1     (= --model.init_args.sampler.init_args.env_id)
  --model.sampler.batch_B 16            envs stepped together
  --trainer.max_epochs 10               any Trainer argument
  --trainer.callbacks+=EvaluationCallback   add a callback (eval envs: --model.sampler.eval_n_envs 4)
  --model PPO  |  --model.help PPO      another algorithm / the parameters of one
  --optimizer RMSprop --lr_scheduler StepLR --lr_scheduler.step_size 10"""

_CONFIG_OPTIONS = """  -c, --config FILE         a config (configs/<algo>/<env>.yaml); several are merged in order
  --params FILE [--cpanel JSON]
                            a parameter file's gen_params(cpanel) in place of --config
  --seed_everything N       the seed
  --print_config            print the resolved config and exit
  --verbose                 a config error's full parser message; a failure's traceback"""

_HELP_ALL = "  -h, --help [all]          this help; --help all: every option (LightningCLI's full reference)"

# The options and overrides of the two commands that evaluate a checkpoint (validate, test).
_EVALUATE_OPTIONS = f"""options:
{_CONFIG_OPTIONS}
  --ckpt_path last|best|FILE  the newest run's last.ckpt / best.ckpt, or a checkpoint file
  --run_name NAME           with last/best: the run of that name
{_HELP_ALL}

{_OVERRIDES}"""

COMMAND_HELP: dict[str, str] = {
    "fit": f"""usage: lightning-rl fit --config FILE [overrides] [--ckpt_path last|FILE] [--run_name NAME]

Train an agent. Each run gets a run directory, runs/<algo>_<env>/<date-time>[_<run_name>]/, with the
resolved config.yaml, run_info.yaml, TensorBoard events and checkpoints/ (last.ckpt; best.ckpt where the
run evaluates). Ctrl-C saves last.ckpt and stops; --ckpt_path last continues the run.

options:
{_CONFIG_OPTIONS}
  --ckpt_path last|FILE     resume: last = the newest run of this config (with --run_name: that run)
  --run_name NAME           suffix of the run directory; with --ckpt_path last, the run to resume
  --trainer.default_root_dir DIR
                            run directories go under DIR/runs/ (default: the working directory)
{_HELP_ALL}

{_OVERRIDES}
""",
    "validate": f"""usage: lightning-rl validate --config FILE --ckpt_path last|best|FILE [overrides]

Evaluate a checkpoint on the config's eval envs and print a table of episode returns. A config
without eval envs is evaluated on 4 envs for 10 episodes (the output says so); choose with
--model.sampler.eval_n_envs N --model.sampler.eval_max_trajectories K. Writes no files.

{_EVALUATE_OPTIONS}
""",
    "test": f"""usage: lightning-rl test --config FILE --ckpt_path last|best|FILE [overrides]

As validate, on env seeds that neither training nor validate use (held out). A config without eval
envs is evaluated on 4 envs for 10 episodes (the output says so). Writes no files.

{_EVALUATE_OPTIONS}
""",
    "play": f"""usage: lightning-rl play RUN_DIR|GROUP_DIR|CHECKPOINT [--episodes N] [--video_folder DIR]
       lightning-rl play --config FILE [--ckpt_path FILE] [options]

Watch an agent play. A run directory plays its best.ckpt (else last.ckpt) with its own config.yaml;
a group directory (runs/ppo_cartpole) its newest run with a checkpoint; a checkpoint the config it
carries. Without a checkpoint (--config alone) the untrained agent plays.

options:
  --episodes N              episodes to play (default 3)
  --video_folder DIR        write one .mp4 per episode here
  --deterministic BOOL      act with the policy's mode (default true)
  --seed N                  the env seed (default 0)
  --max_steps_per_episode N safety limit for envs without a time limit (default 100000)
{_CONFIG_OPTIONS}
{_HELP_ALL}
""",
}


def check_env_parser() -> Any:
    """The options of ``lightning-rl check-env``."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="lightning-rl check-env",
        description="Run gymnasium's env checker (and PettingZoo's API test for PettingZoo envs) and lightning_rl's "
        "rules (lightning_rl.envs.check) on one env; exit 0 when it passes (printing gymnasium's advice), 2 naming "
        "the broken rule.",
    )
    parser.add_argument("env_id", help="a gymnasium id (CartPole-v1, HalfCheetah-v5), ALE/<Game>-v5, a PettingZoo "
                                       "import path (mpe2.simple_spread_v3, module:factory), ...")
    parser.add_argument("--env_kwargs", default="{}", help="constructor arguments as JSON (a dict)")
    return parser


build_parser = check_env_parser  # TOOL_PARSERS names every command's parser builder by this name


def check_env_command(argv: list[str]) -> int:
    """``lightning-rl check-env <env_id> [--env_kwargs JSON]``: gymnasium's env checker (and
    PettingZoo's API test for PettingZoo envs) plus lightning_rl's rules
    (:mod:`lightning_rl.envs.check`) on one env; exit 0 when it passes
    (printing gymnasium's advice), 2 naming the broken rule."""
    import json

    options = check_env_parser().parse_args(argv)
    from lightning_rl.envs.check import check_env

    try:
        advice = check_env(options.env_id, **json.loads(options.env_kwargs))
    except ValueError as error:  # EnvCheckError, an unknown id or bad JSON
        print(f"lightning-rl check-env: error: {error}", file=sys.stderr)
        return 2
    print(f"{options.env_id}: passes the env contract checks")
    for line in advice:
        print(f"  advice: {line}")
    return 0


def _flag_bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "1", "yes", "on"):
        return True
    if value in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"--deterministic: expected true or false, got {text!r}")


def play_run(argv: list[str]) -> int | None:
    """``lightning-rl play RUN_DIR|GROUP_DIR|CKPT [--episodes N] [--video_folder DIR] [--deterministic B]
    [--seed N] [--max_steps_per_episode N]`` through :func:`lightning_rl.load_policy`: neither Lightning
    nor a config parser is imported. None when the command line holds other options (config
    overrides), which LightningCLI then parses."""
    import argparse

    parser = argparse.ArgumentParser(prog="lightning-rl play", add_help=False, allow_abbrev=False)
    parser.add_argument("target")
    parser.add_argument("--episodes", type=int, default=3)
    parser.add_argument("--video_folder", default=None)
    parser.add_argument("--deterministic", default="true")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max_steps_per_episode", type=int, default=100_000)
    options, unknown = parser.parse_known_args(argv)
    if unknown:
        return None
    from lightning_rl.envs.rendering import choose_gl_backend

    choose_gl_backend()  # before anything imports mujoco: a headless machine renders through EGL/OSMesa
    from lightning_rl.policy import load_policy, quiet_sdl

    quiet_sdl()
    try:
        deterministic = _flag_bool(options.deterministic)
        policy = load_policy(options.target)
        print(policy.choice_line("play"), flush=True)
        results = policy.play(options.episodes, deterministic, options.video_folder, options.seed,
                              options.max_steps_per_episode)
    except ValueError as error:
        return _error(str(error).strip().splitlines()[0], "lightning-rl play")
    for i, r in enumerate(results):
        print(f"episode {i}: return {r['return']:.2f} length {int(r['length'])}")
    mean = sum(r["return"] for r in results) / len(results)
    print(f"mean return {mean:.2f} over {len(results)} episodes")
    return 0


def run_tool_command(name: str, argv: list[str]) -> int:
    """Run the tool command ``name`` (:data:`TOOL_COMMANDS`) with ``argv``; its exit status.

    A missing optional dependency is reported with the extra that installs it (exit status 2)."""
    module_name, extra = TOOL_COMMANDS[name]
    try:
        module = importlib.import_module(module_name)
        return int(module.main(argv))
    except ModuleNotFoundError as error:
        if error.name is None or error.name.split(".")[0] == "lightning_rl":
            raise
        hint = f": pip install 'lightning-rl[{extra}]'" if extra else ""
        print(f"lightning-rl {name}: error: {error.name} is not installed{hint}", file=sys.stderr)
        return 2


def _value_of(argv: list[str], flag: str) -> list[str]:
    """Every value given to ``flag`` (``flag VALUE`` or ``flag=VALUE``) in ``argv``."""
    values = []
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            values.append(argv[i + 1])
        elif arg.startswith(flag + "="):
            values.append(arg[len(flag) + 1:])
    return values


def _looks_like_a_path(value: str) -> bool:
    """Whether a ``--config`` value is a file name (not YAML text, which ``--params`` and callers pass)."""
    return "\n" not in value and not value.lstrip().startswith(("{", "[")) and ": " not in value


def check_paths(command: str, argv: list[str]) -> str | None:
    """The message for a ``--ckpt_path`` or ``--config`` file that does not exist (None if all do):
    said before anything is imported or created."""
    for value in _value_of(argv, "--ckpt_path"):
        if value in ("last", "best", "null", "None", ""):
            continue
        if not os.path.isfile(value):
            if os.path.isdir(value):
                return f"--ckpt_path {value}: a directory; give a .ckpt file (or last, for the newest run)"
            return f"--ckpt_path {value}: no such file; give a .ckpt file (or last, for the newest run)"
    for flag in ("--config", "-c"):
        for value in _value_of(argv, flag):
            if _looks_like_a_path(value) and not os.path.isfile(value):
                return f"{flag} {value}: no such file"
    return None


def _error(message: str, prog: str = "lightning-rl") -> int:
    print(f"{prog}: error: {message}", file=sys.stderr)
    return 2


def _help(command: str, argv: list[str]) -> int | None:
    """Print ``command``'s help when ``argv`` asks for it; its exit status, None when it does not ask."""
    asks = [i for i, arg in enumerate(argv) if arg in HELP_FLAGS or arg == "--help=all"]
    if not asks:
        return None
    i = asks[0]
    full = argv[i] == "--help=all" or argv[i + 1: i + 2] == ["all"]
    if command in LIGHTNING_COMMANDS:
        if full:
            from lightning_rl.lightning_cli import run

            return run([command, "--help"])
        sys.stdout.write(COMMAND_HELP[command])
        return 0
    module = importlib.import_module(TOOL_PARSERS[command])
    module.build_parser().print_help()
    return 0


def main(args: list[str] | None = None) -> None:
    """Entry point of ``lightning-rl`` (``args`` replaces ``sys.argv[1:]``, for tests).

    ``fit``, ``validate``, ``test`` and ``play`` return when they succeed (so a program or test can
    call them in a row) and raise ``SystemExit`` with the status otherwise; the other commands, the
    help and ``--version`` always end with ``SystemExit``. Ctrl-C outside training (while torch and
    Lightning import, while the envs are built) ends the command's own process with one line and
    status 130; inside a program (``args`` given) it propagates."""
    try:
        _main(args)
    except KeyboardInterrupt:
        if args is not None or VERBOSE_FLAG in sys.argv:
            raise
        argv = sys.argv[1:]
        command = argv[0] if argv and argv[0] in COMMANDS else ""
        print(f"lightning-rl{' ' + command if command else ''}: interrupted", file=sys.stderr)
        raise SystemExit(130) from None


def _main(args: list[str] | None) -> None:
    argv = list(sys.argv[1:] if args is None else args)
    if not argv or argv[0] in HELP_FLAGS:
        sys.stdout.write(main_help())
        raise SystemExit(0 if argv else 2)
    if argv[0] in ("--version", "-V"):
        print(f"lightning-rl {_version()}")
        raise SystemExit(0)
    command = argv[0]
    if command not in COMMANDS:
        close = difflib.get_close_matches(command, list(COMMANDS), n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise SystemExit(_error(f"unknown command {command!r}{hint}; the commands: {', '.join(COMMANDS)}"))
    rest = argv[1:]
    status = _help(command, rest)
    if status is not None:
        raise SystemExit(status)
    if command == "check-env":
        raise SystemExit(check_env_command(rest))
    if command in TOOL_COMMANDS:
        raise SystemExit(run_tool_command(command, rest))
    verbose = VERBOSE_FLAG in rest
    rest = [arg for arg in rest if arg != VERBOSE_FLAG]
    if command == "play" and rest[:1] and not rest[0].startswith("-"):
        status = play_run(rest)
        if status is not None:
            if status:
                raise SystemExit(status)
            return
    if command != "play" or not rest[:1] or rest[0].startswith("-"):
        problem = check_paths(command, rest)
        if problem is not None:
            raise SystemExit(_error(problem, f"lightning-rl {command}"))
    if not verbose:
        # The config checked against the package's schema before torch and Lightning import: a typo,
        # an unknown class, a wrong type or a value out of range costs a fraction of a second.
        from lightning_rl.config_check import check_command_line

        lines = check_command_line(command, rest)
        if lines:
            sys.stderr.write("\n".join(lines) + "\n")
            raise SystemExit(2)
    from lightning_rl.lightning_cli import run

    status = run([command, *rest], own_process=args is None, verbose=verbose, started=IMPORTED_AT)
    if status:
        raise SystemExit(status)


#: Names that lived in this module before the LightningCLI part moved to :mod:`lightning_rl.lightning_cli`.
_MOVED = (
    "HELD_OUT_SEED_OFFSET", "QUIET_WARNINGS", "RLCLI", "RLTrainer", "make_cli", "migrate_hyperparameters",
    "print_episode_table",
)


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        from lightning_rl import lightning_cli

        return getattr(lightning_cli, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if __name__ == "__main__":
    main()
