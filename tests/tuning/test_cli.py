"""``lightning-rl tune``: trials as in-process fits, failures recorded, pruning, resume, the best config."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import optuna
import pytest
import yaml
from optuna.trial import TrialState

import lightning_rl.tuning.cli as tune_cli
from lightning_rl.tuning.cli import counted_trials, main, objective_value, trial_config, tune
from lightning_rl.tuning.space import load_space, parse_space

EVAL = "lightning_rl.callbacks.EvaluationCallback"
# Tiny PPO on CartPole: 64 env steps per epoch (an evaluation each), 256 in all.
BASE = {
    "seed_everything": 0,
    "trainer": {
        "max_epochs": -1,
        "accelerator": "cpu",
        "enable_progress_bar": False,
        "enable_model_summary": False,
        "callbacks": [{"class_path": "pytorch_lightning.callbacks.ModelCheckpoint", "init_args": {"save_last": True}}],
    },
    "model": {
        "class_path": "lightning_rl.algos.PPO",
        "init_args": {
            "agent": {"class_path": "lightning_rl.agents.CategoricalPgAgent", "init_args": {"hidden_sizes": [16]}},
            "sampler": {"class_path": "lightning_rl.samplers.SerialSampler",
                        "init_args": {"env_id": "CartPole-v1", "batch_T": 16, "batch_B": 2}},
            "epochs": 1,
            "minibatches": 1,
            "learning_rate": 0.001,
            "total_env_steps": 256,
            "log_interval_steps": 64,
            "torch_threads": 1,
        },
    },
}
LR = "model.init_args.learning_rate"
HIDDEN = "model.init_args.agent.init_args.hidden_sizes"
SPACE = {
    "params": {
        LR: {"type": "float", "low": 1.0e-4, "high": 1.0e-2, "log": True},
        HIDDEN: {"type": "categorical", "choices": [[8], [16, 16]]},
    },
    "fixed": {"model.init_args.sampler.init_args.eval_n_envs": 1,
              "model.init_args.sampler.init_args.eval_max_trajectories": 1},
}


def write(path: Path, data) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def logged(run_dir: Path, tag: str) -> list[tuple[int, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    events.Reload()
    return [(e.step, e.value) for e in events.Scalars(tag)]


def args(tmp_path: Path, *extra: str, space=SPACE, base=BASE) -> list[str]:
    return [str(write(tmp_path / "base.yaml", base)), str(write(tmp_path / "space.yaml", space)),
            "--storage", f"sqlite:///{tmp_path / 's.db'}", "--study_name", "s", "--study_dir", str(tmp_path / "study"),
            *extra]


def test_a_study_runs_fits_records_values_resumes_and_writes_a_best_config_that_fit_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    options = ("--sampler", "random", "--seed", "0", "--pruner", "none")
    assert main(args(tmp_path, "--n_trials", "2", *options)) == 0
    study = optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path / 's.db'}")
    assert [t.state for t in study.trials] == [TrialState.COMPLETE] * 2
    for t in study.trials:
        trial_dir = tmp_path / "study" / f"trial_{t.number:04d}"
        config = yaml.safe_load((trial_dir / "config.yaml").read_text())
        init = config["model"]["init_args"]
        assert init["learning_rate"] == t.params[LR]
        assert init["agent"]["init_args"]["hidden_sizes"] == yaml.safe_load(t.params[HIDDEN])  # JSON is YAML
        assert init["sampler"]["init_args"]["eval_n_envs"] == 1  # fixed
        assert config["trainer"]["callbacks"][-1] == {"class_path": EVAL, "init_args": {"every_n_epochs": 1}}
        assert yaml.safe_load((trial_dir / "variant.yaml").read_text()) == {
            LR: t.params[LR], HIDDEN: init["agent"]["init_args"]["hidden_sizes"]}
        # The value is the best eval/return_mean the run logged; every evaluation was reported at its env step.
        # Named after the algorithm and env, as a fit of the base config would be.
        (run_dir,) = (trial_dir / "runs" / "ppo_cartpole").iterdir()
        evaluations = logged(run_dir, "eval/return_mean")
        assert [s for s, _ in evaluations] == [64, 128, 192, 256]
        assert t.value == pytest.approx(max(v for _, v in evaluations))
        assert t.intermediate_values == pytest.approx(dict(evaluations))
        assert t.user_attrs["env_steps"] == 256

    # The best config: the base with the best trial's values (not the fixed tuning settings).
    best = max(study.trials, key=lambda t: t.value)
    expected = copy.deepcopy(BASE)
    expected["model"]["init_args"]["learning_rate"] = best.params[LR]
    expected["model"]["init_args"]["agent"]["init_args"]["hidden_sizes"] = yaml.safe_load(best.params[HIDDEN])
    best_yaml = tmp_path / "study" / "best.yaml"
    assert yaml.safe_load(best_yaml.read_text()) == expected

    # Resume: the same command with --n_trials 3 adds one trial, with new values (the seed moves on by the
    # trials held), and leaves the first two as they were.
    first = [(t.params, t.value) for t in study.trials]
    assert main(args(tmp_path, "--n_trials", "3", *options)) == 0
    resumed = optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path / 's.db'}").trials
    assert len(resumed) == 3 and resumed[2].state == TrialState.COMPLETE
    assert [(t.params, t.value) for t in resumed[:2]] == first
    assert resumed[2].params[LR] not in (first[0][0][LR], first[1][0][LR])
    # Asked again for 3, a finished study adds nothing.
    assert main(args(tmp_path, "--n_trials", "3", *options)) == 0
    assert len(optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path / 's.db'}").trials) == 3

    # fit accepts the best config as it is.
    from lightning_rl.cli import main as cli_main

    monkeypatch.chdir(tmp_path / "study")
    cli_main(["fit", "--config", str(best_yaml)])
    assert list((tmp_path / "study" / "runs" / "ppo_cartpole").glob("*/checkpoints/last.ckpt"))


class AlwaysPrune(optuna.pruners.BasePruner):
    def prune(self, study, trial) -> bool:
        return True


def test_a_pruned_trial_stops_after_its_first_evaluation_and_counts_toward_n_trials(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    storage = f"sqlite:///{tmp_path / 's.db'}"
    config = write(tmp_path / "base.yaml", BASE)
    kwargs = dict(storage=storage, study_name="p", study_dir=tmp_path / "study", pruner=AlwaysPrune(),
                  sampler="random", seed=0)
    study, best = tune(config, parse_space(SPACE), n_trials=2, **kwargs)
    assert best is None  # no complete trial, no best config
    assert not (tmp_path / "study" / "best.yaml").exists()
    assert [t.state for t in study.trials] == [TrialState.PRUNED] * 2
    for t in study.trials:
        assert list(t.intermediate_values) == [64]
        assert t.user_attrs["env_steps"] == 64  # stopped there, not at the 256 budget
    study, _ = tune(config, parse_space(SPACE), n_trials=2, **kwargs)
    assert len(study.trials) == 2


def test_a_failing_trial_is_recorded_with_its_error_and_the_study_goes_on(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    storage = f"sqlite:///{tmp_path / 's.db'}"
    space = {**SPACE, "params": {"model.init_args.discount": {"type": "categorical", "choices": [1.5, 0.99]}}}
    # The order of the two trials is fixed by enqueueing them: a discount of 1.5 fails in PPO's __init__.
    study = optuna.create_study(storage=storage, study_name="f", direction="maximize")
    study.enqueue_trial({"model.init_args.discount": 1.5})
    study.enqueue_trial({"model.init_args.discount": 0.99})
    study, best = tune(write(tmp_path / "base.yaml", BASE), parse_space(space), n_trials=2, storage=storage,
                       study_name="f", study_dir=tmp_path / "study", pruner="none")
    assert [t.state for t in study.trials] == [TrialState.FAIL, TrialState.COMPLETE]
    assert study.trials[0].user_attrs["error"] == "TrialError: fit exited with status 2 (its error is above)"
    assert best == tmp_path / "study" / "best.yaml"


def test_only_finished_running_and_errored_trials_count_toward_n_trials():
    study = optuna.create_study()
    dist = {"x": optuna.distributions.FloatDistribution(0.0, 1.0)}
    for state, attrs in [(TrialState.COMPLETE, {}), (TrialState.PRUNED, {}), (TrialState.FAIL, {"error": "E"}),
                         (TrialState.FAIL, {}), (TrialState.WAITING, {})]:
        study.add_trial(optuna.trial.create_trial(
            state=state, params={"x": 0.5}, distributions=dist, user_attrs=attrs,
            value=1.0 if state == TrialState.COMPLETE else None,
            intermediate_values={1: 0.5} if state == TrialState.PRUNED else None,
        ))
    study.ask()  # RUNNING: the WAITING one, now taken by a process
    # COMPLETE, PRUNED, FAIL with an error, RUNNING; not the FAIL without one (interrupted or its process died).
    assert counted_trials(study) == 4


def test_the_objective_is_the_best_or_the_last_evaluation():
    values = [1.0, 3.0, 2.0]
    assert objective_value(values, "best", "maximize") == 3.0
    assert objective_value(values, "best", "minimize") == 1.0
    assert objective_value(values, "last", "maximize") == 2.0
    assert objective_value(values, "last", "minimize") == 2.0


def test_an_interrupted_trial_stops_the_study_and_is_redone_on_resume(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(tune_cli, "fit_in_process", interrupted)
    assert main(args(tmp_path, "--n_trials", "1", "--pruner", "none")) == 1
    assert "interrupted; run the same command again to resume" in capsys.readouterr().err
    monkeypatch.undo()
    monkeypatch.chdir(tmp_path)
    assert main(args(tmp_path, "--n_trials", "1", "--pruner", "none")) == 0
    trials = optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path / 's.db'}").trials
    assert [t.state for t in trials] == [TrialState.FAIL, TrialState.COMPLETE]
    assert "error" not in trials[0].user_attrs


def test_a_space_takes_keys_as_the_command_line_writes_them():
    short = parse_space({"params": {"model.learning_rate": SPACE["params"][LR],
                                    "model.agent.hidden_sizes": SPACE["params"][HIDDEN]},
                         "fixed": {"model.sampler.eval_max_trajectories": 2}})
    config = trial_config(BASE, short, {"model.learning_rate": 0.01, "model.agent.hidden_sizes": [8]})
    assert config == trial_config(BASE, parse_space({**SPACE, "fixed": {
        "model.init_args.sampler.init_args.eval_max_trajectories": 2}}), {LR: 0.01, HIDDEN: [8]})
    assert config["model"]["init_args"]["learning_rate"] == 0.01
    assert config["model"]["init_args"]["agent"]["init_args"]["hidden_sizes"] == [8]
    assert config["model"]["init_args"]["sampler"]["init_args"]["eval_max_trajectories"] == 2


def test_trial_config_adds_evaluation_only_when_the_config_has_none():
    space = parse_space(SPACE)
    config = trial_config(BASE, space, {LR: 0.01, HIDDEN: [8]})
    assert config["trainer"]["callbacks"] == [*BASE["trainer"]["callbacks"],
                                              {"class_path": EVAL, "init_args": {"every_n_epochs": 1}}]
    assert config["model"]["init_args"]["learning_rate"] == 0.01
    assert config["model"]["init_args"]["sampler"]["init_args"]["eval_max_trajectories"] == 1
    own = copy.deepcopy(BASE)
    own["trainer"]["callbacks"].append({"class_path": "my.EvaluationCallback", "init_args": {"every_n_epochs": 3}})
    assert trial_config(own, space, {})["trainer"]["callbacks"] == own["trainer"]["callbacks"]
    assert BASE["trainer"]["callbacks"][-1]["class_path"].endswith("ModelCheckpoint")  # the base is not changed


def test_bad_input_exits_2_naming_it_before_any_trial(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    typo = {"params": {"model.init_args.learnin_rate": SPACE["params"][LR]}, "fixed": SPACE["fixed"]}
    assert main(args(tmp_path, space=typo)) == 2
    err = capsys.readouterr().err
    assert "lightning-rl tune: error: fit does not accept" in err and "learnin_rate" in err
    assert not (tmp_path / "s.db").exists()

    assert main(args(tmp_path, space={"params": {LR: {"type": "float", "low": 1.0}}})) == 2
    assert "lightning-rl tune: error: space: model.init_args.learning_rate: type float needs low and high" in \
        capsys.readouterr().err

    assert main(args(tmp_path, "--n_trials", "0")) == 2
    assert "--n_trials must be >= 1, got 0" in capsys.readouterr().err


def test_the_shipped_space_and_its_config_are_accepted_by_fit(tmp_path):
    root = Path(__file__).resolve().parents[2]
    space = load_space(root / "configs" / "tune" / "ppo_cartpole_space.yaml")
    base = yaml.safe_load((root / "configs" / "ppo" / "cartpole.yaml").read_text())
    from lightning_rl.tuning.cli import check_config

    resolved = check_config(trial_config(base, space, space.first()), tmp_path)
    # The shipped space writes its keys as the command line does (model.learning_rate).
    assert resolved["model"]["init_args"]["learning_rate"] == space.first()["model.learning_rate"]


def test_without_optuna_the_command_names_the_extra(monkeypatch, capsys):
    from lightning_rl.cli import main as cli_main

    monkeypatch.setitem(sys.modules, "optuna", None)
    with pytest.raises(SystemExit) as exit_:
        cli_main(["tune", "configs/ppo/cartpole.yaml", "configs/tune/ppo_cartpole_space.yaml"])
    assert exit_.value.code == 2
    assert "lightning-rl tune: error: optuna is not installed: pip install 'lightning-rl[tune]'" in \
        capsys.readouterr().err


def test_every_path_a_study_prints_exists(tmp_path, monkeypatch, capsys):
    # As a person runs it: a study directory relative to the working directory, the progress summary on.
    monkeypatch.chdir(tmp_path)
    base = copy.deepcopy(BASE)
    base["trainer"]["enable_progress_bar"] = True
    write(tmp_path / "base.yaml", base)
    write(tmp_path / "space.yaml", SPACE)
    assert main(["base.yaml", "space.yaml", "--n_trials", "1", "--study_dir", "study", "--pruner", "none"]) == 0
    out = capsys.readouterr().out
    prefixes = ("checkpoint: ", "best checkpoint: ", "play it: lightning-rl play ", "best config: ")
    paths = [line[len(p):].split(" (")[0] for line in out.splitlines() for p in prefixes if line.startswith(p)]
    assert len(paths) == 4, out  # last.ckpt, best.ckpt, the run directory, best.yaml
    for path in paths:
        assert Path(path).exists(), (path, out)
    assert any(Path(p).name == "best.ckpt" for p in paths)


def test_samplers_and_pruners_by_name_or_as_objects():
    tpe = tune_cli.make_sampler("tpe", 3, n_startup_trials=7)
    assert isinstance(tpe, optuna.samplers.TPESampler) and tpe._n_startup_trials == 7
    assert isinstance(tune_cli.make_sampler("random", 3, 7), optuna.samplers.RandomSampler)
    given = optuna.samplers.RandomSampler(seed=1)
    assert tune_cli.make_sampler(given, 3, 7) is given
    median = tune_cli.make_pruner("median", n_startup_trials=2, n_warmup_steps=5)
    assert isinstance(median, optuna.pruners.MedianPruner) and median._n_warmup_steps == 5
    assert isinstance(tune_cli.make_pruner("none", 2, 5), optuna.pruners.NopPruner)
    with pytest.raises(ValueError, match=r"^--sampler must be tpe or random, got 'grid'$"):
        tune_cli.make_sampler("grid", 3, 7)
    with pytest.raises(ValueError, match=r"^--pruner must be median or none, got 'hyperband'$"):
        tune_cli.make_pruner("hyperband", 2, 5)
