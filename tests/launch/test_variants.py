"""Variants: rlpyt's levels (multiply) and zipped keys, readable unique names, and complete configs."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from lightning_rl.launch.variants import Variant, VariantLevel, load_grid, make_variants, write_variants

ROOT = Path(__file__).resolve().parents[2]
CARTPOLE = ROOT / "configs" / "ppo" / "cartpole.yaml"
LR = "model.init_args.learning_rate"
CLIP = "model.init_args.ratio_clip"


def test_levels_multiply_in_order_and_keys_within_a_level_zip() -> None:
    variants = make_variants(
        VariantLevel.zip({LR: [0.001, 0.0003], CLIP: [0.2, 0.1]}),
        VariantLevel.zip({"seed_everything": [0, 1]}),
    )
    assert variants == [
        Variant("lr_0.001-ratio_clip_0.2-seed_0", {LR: 0.001, CLIP: 0.2, "seed_everything": 0}),
        Variant("lr_0.001-ratio_clip_0.2-seed_1", {LR: 0.001, CLIP: 0.2, "seed_everything": 1}),
        Variant("lr_0.0003-ratio_clip_0.1-seed_0", {LR: 0.0003, CLIP: 0.1, "seed_everything": 0}),
        Variant("lr_0.0003-ratio_clip_0.1-seed_1", {LR: 0.0003, CLIP: 0.1, "seed_everything": 1}),
    ]


def test_zipped_keys_of_different_lengths_are_refused() -> None:
    with pytest.raises(ValueError, match=r"same length; got \{.*learning_rate': 2, .*ratio_clip': 3\}"):
        VariantLevel.zip({LR: [0.001, 0.0003], CLIP: [0.1, 0.2, 0.3]})


def test_rlpyt_form_with_dir_names() -> None:
    level = VariantLevel((LR, CLIP), ((0.001, 0.2), (0.0003, 0.1)), dir_names=("fast", "slow"))
    assert [v.name for v in make_variants(level)] == ["fast", "slow"]
    with pytest.raises(ValueError, match="has 1 values for 2 keys"):
        VariantLevel((LR, CLIP), ((0.001,),))


def test_names_are_filesystem_safe_short_and_unique() -> None:
    env = "model.init_args.sampler.init_args.env_id"
    hidden = "model.init_args.agent.init_args.hidden_sizes"
    optimizer = "model.init_args.optimizer"
    variants = make_variants(VariantLevel.zip({
        env: ["ALE/Pong-v5", "ALE_Pong-v5"],
        hidden: [[64, 64], [32]],
        optimizer: [{"class_path": "torch.optim.RMSprop"}, "torch.optim.SGD"],
    }))
    # "/" becomes "_", so the two env ids would share a name: the second gets "-2".
    assert [v.name for v in variants] == [
        "env_id_ALE_Pong-v5-hidden_sizes_64x64-optimizer_RMSprop",
        "env_id_ALE_Pong-v5-hidden_sizes_32-optimizer_SGD",
    ]
    same_last = make_variants(VariantLevel.zip({
        "model.init_args.agent.init_args.lstm_size": [8], "model.init_args.critic.init_args.lstm_size": [16]}))
    assert same_last[0].name == "agent.lstm_size_8-critic.lstm_size_16"
    named = make_variants(VariantLevel.zip({LR: [0.001]}), names={LR: "alpha"})
    assert named[0].name == "alpha_0.001"
    clash = make_variants(VariantLevel.zip({"model.init_args.sampler.init_args.env_id": ["a/b", "a_b"]}))
    assert [v.name for v in clash] == ["env_id_a_b", "env_id_a_b-2"]


def test_a_key_in_two_levels_or_a_repeated_variant_is_refused() -> None:
    with pytest.raises(ValueError, match="more than one level"):
        make_variants(VariantLevel.zip({LR: [0.1]}), VariantLevel.zip({LR: [0.2]}))
    with pytest.raises(ValueError, match="same variant more than once"):
        make_variants(VariantLevel.zip({LR: [0.1, 0.1]}))


def test_shipped_grid_is_two_learning_rates_by_two_seeds() -> None:
    grid = load_grid(ROOT / "configs" / "grids" / "ppo_cartpole_lr_seed.yaml")
    assert grid.base == CARTPOLE
    assert [v.name for v in grid.variants] == ["lr_0.0003-seed_0", "lr_0.0003-seed_1", "lr_0.001-seed_0",
                                               "lr_0.001-seed_1"]
    assert grid.overrides == {"model.total_env_steps": 50000}  # written as on the command line


def test_variant_configs_are_the_base_plus_overrides_written_out(tmp_path: Path) -> None:
    variants = make_variants(VariantLevel.zip({LR: [0.0003]}), VariantLevel.zip({"seed_everything": [7]}))
    (directory,) = write_variants(CARTPOLE, variants, tmp_path / "grid",
                                  {"trainer.callbacks.1.init_args.stopping_threshold": 400.0})
    assert directory == tmp_path / "grid" / "lr_0.0003-seed_7"
    config = yaml.safe_load((directory / "config.yaml").read_text())
    assert config["seed_everything"] == 7
    assert config["model"]["init_args"]["learning_rate"] == 0.0003
    assert config["trainer"]["callbacks"][1]["init_args"]["stopping_threshold"] == 400.0
    # The rest as the base config has it, and defaults it does not write are written out.
    assert config["model"]["init_args"]["sampler"]["init_args"]["batch_T"] == 32
    assert config["model"]["init_args"]["total_env_steps"] == 200000
    assert config["model"]["init_args"]["value_clip"] is None
    assert yaml.safe_load((directory / "variant.yaml").read_text()) == {LR: 0.0003, "seed_everything": 7}


def test_variant_yaml_names_the_seed_even_when_the_grid_does_not_vary_it(tmp_path: Path) -> None:
    (directory,) = write_variants(CARTPOLE, make_variants(VariantLevel.zip({LR: [0.002]})), tmp_path)
    assert yaml.safe_load((directory / "variant.yaml").read_text()) == {LR: 0.002, "seed_everything": 1}


def test_unknown_keys_are_refused_naming_close_keys(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"unknown config key 'model.init_args.lerning_rate'.*close keys: "
                                         r"model.init_args.learning_rate"):
        write_variants(CARTPOLE, make_variants(VariantLevel.zip({"model.init_args.lerning_rate": [1.0]})), tmp_path)
    with pytest.raises(ValueError, match=r"unknown config key 'learning_rate'.*model.init_args.learning_rate"):
        write_variants(CARTPOLE, make_variants(VariantLevel.zip({"learning_rate": [1.0]})), tmp_path)
    assert not any(tmp_path.iterdir())


def test_a_value_the_config_rejects_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="variant lr_fast: .*learning_rate"):
        write_variants(CARTPOLE, make_variants(VariantLevel.zip({LR: ["fast"]})), tmp_path / "grid")
    assert not any((tmp_path / "grid").iterdir())


def test_a_variant_directory_holding_another_config_is_not_mixed_in(tmp_path: Path) -> None:
    variants = make_variants(VariantLevel.zip({LR: [0.001]}))
    write_variants(CARTPOLE, variants, tmp_path)
    write_variants(CARTPOLE, variants, tmp_path)  # the same grid again: kept, so a launch resumes
    with pytest.raises(ValueError, match="holds another config than this grid writes for lr_0.001"):
        write_variants(CARTPOLE, variants, tmp_path, {"model.init_args.epochs": 3})


def test_short_keys_as_on_the_command_line_give_the_configs_long_keys_give(tmp_path: Path) -> None:
    short = make_variants(VariantLevel.zip({"model.learning_rate": [0.002], "model.sampler.batch_B": [4]}))
    long = make_variants(VariantLevel.zip({LR: [0.002], "model.init_args.sampler.init_args.batch_B": [4]}))
    (a,) = write_variants(CARTPOLE, short, tmp_path / "short", {"model.total_env_steps": 1024})
    (b,) = write_variants(CARTPOLE, long, tmp_path / "long", {"model.init_args.total_env_steps": 1024})
    config = yaml.safe_load((a / "config.yaml").read_text())
    assert config == yaml.safe_load((b / "config.yaml").read_text())
    assert config["model"]["init_args"]["learning_rate"] == 0.002
    assert config["model"]["init_args"]["sampler"]["init_args"]["batch_B"] == 4
    assert config["model"]["init_args"]["total_env_steps"] == 1024
    # The variant records the keys as the grid wrote them.
    assert yaml.safe_load((a / "variant.yaml").read_text())["model.learning_rate"] == 0.002
    with pytest.raises(ValueError, match="unknown config key 'model.lerning_rate'"):
        write_variants(CARTPOLE, make_variants(VariantLevel.zip({"model.lerning_rate": [1.0]})), tmp_path / "x")
