"""Search spaces over dotted config keys: parsing, validation errors, sampling calls, overrides."""

from __future__ import annotations

from typing import Any

import pytest

from lightning_rl.tuning.space import (
    Categorical,
    FloatRange,
    IntRange,
    apply_overrides,
    load_space,
    parse_space,
    set_dotted,
)


class RecordingTrial:
    """Records each suggest call and answers the range's high end or the last choice."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def suggest_float(self, name, low, high, *, step=None, log=False):
        self.calls.append(("float", name, low, high, step, log))
        return high

    def suggest_int(self, name, low, high, *, step=1, log=False):
        self.calls.append(("int", name, low, high, step, log))
        return high

    def suggest_categorical(self, name, choices):
        self.calls.append(("categorical", name, list(choices)))
        return choices[-1]


SPACE = {
    "params": {
        "model.init_args.learning_rate": {"type": "float", "low": 1.0e-4, "high": 3.0e-3, "log": True},
        "model.init_args.clip": {"type": "float", "low": 0.1, "high": 0.3, "step": 0.05},
        "model.init_args.epochs": {"type": "int", "low": 4, "high": 20, "step": 4},
        "model.init_args.batch_B": {"type": "int", "low": 2, "high": 64, "log": True},
        "model.init_args.gae_lambda": {"type": "categorical", "choices": [0.8, 0.9]},
        "model.init_args.agent.init_args.hidden_sizes": {"type": "categorical", "choices": [[64, 64], [128]]},
    },
    "fixed": {"model.init_args.total_env_steps": 1000},
}


def test_a_space_parses_into_its_distributions():
    space = parse_space(SPACE)
    assert space.params == {
        "model.init_args.learning_rate": FloatRange(1.0e-4, 3.0e-3, log=True),
        "model.init_args.clip": FloatRange(0.1, 0.3, step=0.05),
        "model.init_args.epochs": IntRange(4, 20, step=4),
        "model.init_args.batch_B": IntRange(2, 64, log=True),
        "model.init_args.gae_lambda": Categorical((0.8, 0.9)),
        "model.init_args.agent.init_args.hidden_sizes": Categorical(([64, 64], [128]), encoded=True),
    }
    assert space.fixed == {"model.init_args.total_env_steps": 1000}


def test_suggest_asks_optuna_for_each_key_with_its_bounds_and_lists_travel_as_json():
    trial = RecordingTrial()
    values = parse_space(SPACE).suggest(trial)
    assert trial.calls == [
        ("float", "model.init_args.learning_rate", 1.0e-4, 3.0e-3, None, True),
        ("float", "model.init_args.clip", 0.1, 0.3, 0.05, False),
        ("int", "model.init_args.epochs", 4, 20, 4, False),
        ("int", "model.init_args.batch_B", 2, 64, 1, True),
        ("categorical", "model.init_args.gae_lambda", [0.8, 0.9]),
        ("categorical", "model.init_args.agent.init_args.hidden_sizes", ["[64, 64]", "[128]"]),
    ]
    assert values == {
        "model.init_args.learning_rate": 3.0e-3,
        "model.init_args.clip": 0.3,
        "model.init_args.epochs": 20,
        "model.init_args.batch_B": 64,
        "model.init_args.gae_lambda": 0.9,
        "model.init_args.agent.init_args.hidden_sizes": [128],  # decoded from "[128]"
    }


def test_first_gives_each_low_and_first_choice_and_decode_reads_stored_json():
    space = parse_space(SPACE)
    assert space.first() == {
        "model.init_args.learning_rate": 1.0e-4,
        "model.init_args.clip": 0.1,
        "model.init_args.epochs": 4,
        "model.init_args.batch_B": 2,
        "model.init_args.gae_lambda": 0.8,
        "model.init_args.agent.init_args.hidden_sizes": [64, 64],
    }
    stored = {"model.init_args.agent.init_args.hidden_sizes": "[64, 64]", "model.init_args.gae_lambda": 0.9}
    assert space.decode(stored) == {"model.init_args.agent.init_args.hidden_sizes": [64, 64],
                                    "model.init_args.gae_lambda": 0.9}


def test_yaml_exponents_without_a_dot_are_read_as_floats(tmp_path):
    # YAML 1.1 reads 1e-4 as the string "1e-4".
    path = tmp_path / "space.yaml"
    path.write_text("params:\n  model.init_args.learning_rate: {type: float, low: 1e-4, high: 1e-2, log: true}\n")
    assert load_space(path).params["model.init_args.learning_rate"] == FloatRange(1e-4, 1e-2, log=True)


KEY = "model.init_args.x"


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ([1, 2], "expected a mapping with params"),
        ({"params": {KEY: {"type": "int", "low": 1, "high": 2}}, "extra": 1},
         r"unknown top-level key\(s\) \['extra'\]"),
        ({"params": {}}, "params must be a non-empty mapping"),
        ({"params": {KEY: {"type": "int", "low": 1, "high": 2}}, "fixed": [1]}, "fixed must be a mapping"),
        ({"params": {KEY: {"type": "int", "low": 1, "high": 2}}, "fixed": {KEY: 3}}, "both searched"),
        ({"params": {"model..x": {"type": "int", "low": 1, "high": 2}}}, "'model..x' is not a dotted config key"),
        ({"params": {KEY: 0.1}}, f"{KEY}: expected a mapping such as"),
        ({"params": {KEY: {"type": "uniform", "low": 1, "high": 2}}}, "type must be one of float, int, categorical"),
        ({"params": {KEY: {"type": "float", "low": 1.0, "high": 2.0, "q": 1}}}, r"unknown field\(s\) \['q'\]"),
        ({"params": {KEY: {"type": "float", "low": 1.0}}}, "high is missing"),
        ({"params": {KEY: {"type": "float", "low": 2.0, "high": 1.0}}}, "low must be <= high"),
        ({"params": {KEY: {"type": "float", "low": 0.0, "high": 1.0, "log": True}}}, "log: true needs low > 0"),
        ({"params": {KEY: {"type": "float", "low": 0.1, "high": 1.0, "log": "yes"}}}, "log must be true or false"),
        ({"params": {KEY: {"type": "float", "low": "small", "high": 1.0}}}, "low must be a finite number"),
        ({"params": {KEY: {"type": "float", "low": True, "high": 1.0}}}, "low must be a finite number"),
        ({"params": {KEY: {"type": "int", "low": 1.5, "high": 4}}}, "low must be an int for type int"),
        ({"params": {KEY: {"type": "int", "low": 1, "high": 4, "step": 0}}}, "step must be > 0"),
        ({"params": {KEY: {"type": "int", "low": 1, "high": 8, "step": 2, "log": True}}}, "step and log"),
        ({"params": {KEY: {"type": "categorical", "choices": []}}}, "choices must be a non-empty list"),
        ({"params": {KEY: {"type": "categorical", "choices": [1, 2, 1]}}}, "choices must differ"),
        ({"params": {KEY: {"type": "categorical", "choices": [1], "low": 0}}}, r"unknown field\(s\) \['low'\]"),
    ],
)
def test_bad_spaces_are_refused_naming_the_key_and_what_is_allowed(data, match):
    with pytest.raises(ValueError, match=match):
        parse_space(data)


def test_load_space_refuses_a_missing_file_and_bad_yaml(tmp_path):
    with pytest.raises(ValueError, match="is not a file"):
        load_space(tmp_path / "none.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("params: [unclosed\n")
    with pytest.raises(ValueError, match="is not valid YAML"):
        load_space(bad)


def test_overrides_set_nested_keys_list_positions_and_empty_sections_without_touching_the_base():
    base = {
        "seed_everything": 1,
        "trainer": {"callbacks": [{"class_path": "A", "init_args": {"patience": 3}}]},
        "model": {"class_path": "PPO", "init_args": {"learning_rate": 0.001, "sampler": {"init_args": None}}},
    }
    result = apply_overrides(base, {
        "model.init_args.learning_rate": 0.01,
        "model.init_args.sampler.init_args.eval_n_envs": 2,
        "trainer.callbacks.0.init_args.patience": 9,
        "seed_everything": 5,
        "trainer.max_epochs": 3,
    })
    assert result == {
        "seed_everything": 5,
        "trainer": {"callbacks": [{"class_path": "A", "init_args": {"patience": 9}}], "max_epochs": 3},
        "model": {"class_path": "PPO",
                  "init_args": {"learning_rate": 0.01, "sampler": {"init_args": {"eval_n_envs": 2}}}},
    }
    assert base["model"]["init_args"]["learning_rate"] == 0.001
    assert base["trainer"]["callbacks"][0]["init_args"]["patience"] == 3


def test_a_key_under_a_plain_value_or_past_a_list_end_is_refused():
    config = {"model": {"init_args": {"learning_rate": 0.001}}, "trainer": {"callbacks": [{}]}}
    with pytest.raises(ValueError, match=r"model.init_args.learning_rate is 0.001, not a mapping"):
        set_dotted(config, "model.init_args.learning_rate.value", 1)
    with pytest.raises(ValueError, match=r"trainer.callbacks is a list of 1; '1' is not a position"):
        set_dotted(config, "trainer.callbacks.1.init_args", {})
    with pytest.raises(ValueError, match=r"'first' is not a position"):
        set_dotted(config, "trainer.callbacks.first", {})

