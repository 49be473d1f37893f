"""Hyperparameters are declared once (lightning_rl.algos.hparams): every algorithm's flat keyword-only
signature, LightningCLI's schema and ``save_hyperparameters`` come from the declarations; a subclass
changes a default by assignment only; a notebook subclass adds one in a line."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import lightning_rl.algos as algos
from lightning_rl.agents import CategoricalPgAgent
from lightning_rl.algos.hparams import POSITIVE, hparam, hyperparameters
from lightning_rl.cli import main
from lightning_rl.samplers import SerialSampler

ROOT = Path(__file__).resolve().parents[2]
ALGORITHMS = [algos.A2C, algos.PPO, algos.MultiAgentPPO, algos.DQN, algos.CategoricalDQN, algos.R2D1,
              algos.DDPG, algos.TD3, algos.SAC]


class KlStopPPO(algos.PPO):
    """A notebook's PPO variant: one more hyperparameter, declared in one line."""

    kl_stop: float = hparam(0.02, "Skip the rest of a rollout's updates once approx_kl exceeds it.", check=POSITIVE)


def _sampler() -> SerialSampler:
    return SerialSampler(env_id="CartPole-v1", batch_T=8, batch_B=2)


# Defaults each algorithm had when it wrote its own __init__ (lightning_rl 0.1), a few per class,
# picked where a subclass or base changes them.
OLD_DEFAULTS = {
    algos.A2C: dict(gae_lambda=1.0, value_loss_coeff=0.5, normalize_advantage=False, linear_lr_schedule=False,
                    optimizer_eps=1e-5, clip_grad_norm=1.0, learning_rate=1e-3),
    algos.PPO: dict(ratio_clip=0.1, epochs=4, minibatches=4, gae_lambda=0.98, value_loss_coeff=1.0,
                    normalize_advantage=True, linear_lr_schedule=True, entropy_loss_coeff=0.01),
    algos.MultiAgentPPO: dict(agent_rewards_key=None, ratio_clip=0.1, gae_lambda=0.98, linear_lr_schedule=True),
    algos.DQN: dict(discount=0.99, batch_size=32, min_steps_learn=50_000, replay_ratio=8.0, target_update_tau=1.0,
                    target_update_interval=312, learning_rate=2.5e-4, optimizer_eps=3.125e-4, clip_grad_norm=10.0,
                    pri_beta_steps=12_500_000, delta_clip=1.0, double_dqn=False),
    algos.CategoricalDQN: dict(target_update_interval=312, learning_rate=2.5e-4, batch_size=32),
    algos.R2D1: dict(discount=0.997, batch_size=64, batch_T=80, warmup_T=40, min_steps_learn=100_000,
                     delta_clip=None, replay_ratio=1.0, target_update_interval=2500, n_step_return=5,
                     double_dqn=True, learning_rate=1e-4, optimizer_eps=1e-3, clip_grad_norm=80.0,
                     prioritized_replay=True, pri_alpha=0.9, pri_beta_init=0.6, pri_beta_final=0.6,
                     pri_beta_steps=1_000_000),
    algos.DDPG: dict(batch_size=64, replay_ratio=64.0, min_steps_learn=10_000, target_update_tau=0.01,
                     target_update_interval=1, policy_update_interval=1, learning_rate=1e-4, q_learning_rate=1e-3,
                     q_target_clip=1e6, pretrain_uniform=True, clip_grad_norm=None),
    algos.TD3: dict(batch_size=100, replay_ratio=100.0, target_update_tau=0.005, target_update_interval=2,
                    policy_update_interval=2, learning_rate=1e-3, q_learning_rate=1e-3, q_target_clip=1e6),
    algos.SAC: dict(batch_size=256, replay_ratio=256.0, target_update_tau=0.005, target_update_interval=1,
                    learning_rate=3e-4, q_learning_rate=None, q_target_clip=None, initial_alpha=1.0,
                    target_entropy="auto", pretrain_uniform=True),
}


@pytest.mark.parametrize("cls", ALGORITHMS, ids=lambda c: c.__name__)
def test_the_signature_is_flat_keyword_only_and_lists_every_hyperparameter_with_its_default(cls):
    params = inspect.signature(cls.__init__).parameters
    assert list(params)[:3] == ["self", "agent", "sampler"]
    rows = {row.name: row for row in hyperparameters(cls)}
    hparams = {name: p for name, p in params.items() if name not in ("self", "agent", "sampler")}
    assert list(hparams) == list(rows)
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in hparams.values())
    assert {name: p.default for name, p in hparams.items()} == {name: row.default for name, row in rows.items()}
    for name, default in OLD_DEFAULTS[cls].items():
        assert hparams[name].default == default, f"{cls.__name__}.{name}"
    # Every one is documented in the generated Args section.
    assert all(f"    {name}: " in cls.__init__.__doc__ for name in rows)


@pytest.mark.parametrize(("cls", "base"), [(algos.TD3, algos.DDPG), (algos.PPO, algos.OnPolicyAlgorithm),
                                           (algos.A2C, algos.OnPolicyAlgorithm), (algos.CategoricalDQN, algos.DQN),
                                           (algos.R2D1, algos.DQN), (algos.MultiAgentPPO, algos.PPO)],
                         ids=lambda c: c.__name__)
def test_a_subclass_changes_a_base_default_only_by_assignment(cls, base):
    inherited = {row.name for row in hyperparameters(base)}
    declared_here = {row.name for row in hyperparameters(cls) if row.declared_in == cls.__name__}
    assert not declared_here & inherited  # nothing re-declared
    changed = {name for name in inherited if name in vars(cls)}
    for name in changed:  # a plain value in the class body, nothing else
        assert not callable(vars(cls)[name]) and inspect.signature(cls).parameters[name].default == vars(cls)[name]


def test_td3_declares_nothing_and_changes_six_defaults():
    rows = hyperparameters(algos.TD3)
    assert not [row for row in rows if row.declared_in == "TD3"]
    changed = {name: vars(algos.TD3)[name] for name in (row.name for row in rows) if name in vars(algos.TD3)}
    assert changed == dict(batch_size=100, replay_ratio=100.0, target_update_tau=0.005, target_update_interval=2,
                           policy_update_interval=2, learning_rate=1e-3)


def test_redeclaring_an_inherited_hyperparameter_is_refused():
    with pytest.raises(TypeError, match="ratio_clip: already declared by PPO; change its default by assignment"):
        type("Redeclared", (algos.PPO,), {"__annotations__": {"ratio_clip": "float"},
                                          "ratio_clip": hparam(0.2, "Clip range.")})


def test_a_method_on_a_hyperparameter_name_is_refused():
    with pytest.raises(TypeError, match="hides the hyperparameter epochs"):
        type("Hidden", (algos.PPO,), {"epochs": lambda self: 3})


def test_a_notebook_subclass_adds_a_hyperparameter_in_one_line():
    params = inspect.signature(KlStopPPO.__init__).parameters
    assert params["kl_stop"].default == 0.02 and params["kl_stop"].annotation is float
    assert params["ratio_clip"].default == 0.1  # PPO's, inherited
    module = KlStopPPO(CategoricalPgAgent(), _sampler(), total_env_steps=64, kl_stop=0.05, epochs=2)
    assert (module.kl_stop, module.epochs) == (0.05, 2)
    assert module.hparams["kl_stop"] == 0.05
    with pytest.raises(ValueError, match="kl_stop must be > 0, got -1.0"):
        KlStopPPO(CategoricalPgAgent(), _sampler(), total_env_steps=64, kl_stop=-1.0)


def test_a_class_that_writes_its_own_init_keeps_it():
    class Own(algos.PPO):
        def __init__(self, agent, sampler, scale: float = 2.0, **hparams) -> None:
            super().__init__(agent, sampler, **hparams)
            self.scale = scale

    assert list(inspect.signature(Own.__init__).parameters) == ["self", "agent", "sampler", "scale", "hparams"]
    module = Own(CategoricalPgAgent(), _sampler(), total_env_steps=64, scale=3.0, epochs=2)
    assert (module.scale, module.epochs, module.hparams["scale"], module.hparams["epochs"]) == (3.0, 2, 3.0, 2)


def test_unknown_keywords_and_bad_values_are_refused_by_name():
    with pytest.raises(TypeError, match=r"PPO\(\) got unexpected keyword arguments \['ratio_clipp'\]"):
        algos.PPO(CategoricalPgAgent(), _sampler(), total_env_steps=64, ratio_clipp=0.2)
    with pytest.raises(ValueError, match="ratio_clip must be > 0, got -0.1"):
        algos.PPO(CategoricalPgAgent(), _sampler(), total_env_steps=64, ratio_clip=-0.1)
    with pytest.raises(ValueError, match="epochs must be an int >= 1, got 1.5"):
        algos.PPO(CategoricalPgAgent(), _sampler(), total_env_steps=64, epochs=1.5)
    with pytest.raises(ValueError, match=r"discount must be in \[0, 1\], got 1.5"):
        algos.PPO(CategoricalPgAgent(), _sampler(), total_env_steps=64, discount=1.5)
    # An integral float is an int: range(epochs) works.
    assert algos.PPO(CategoricalPgAgent(), _sampler(), total_env_steps=64, epochs=3.0).epochs == 3


def test_save_hyperparameters_holds_every_value_as_plain_data():
    module = algos.PPO(CategoricalPgAgent(), _sampler(), ratio_clip=0.2, total_env_steps=128)
    saved = dict(module.hparams)
    expected = {row.name: row.default for row in hyperparameters(algos.PPO)}
    expected.update(ratio_clip=0.2, total_env_steps=128)
    del expected["optimizer"], expected["lr_scheduler"]  # callables: in the run's config, not in hparams
    assert saved == expected


def test_hyperparameter_table_rows_for_the_docs():
    rows = {row.name: row for row in hyperparameters(algos.PPO)}
    ratio_clip = rows["ratio_clip"]
    assert (ratio_clip.type, ratio_clip.default, ratio_clip.declared_in) == ("float", 0.1, "PPO")
    assert (rows["gae_lambda"].default, rows["gae_lambda"].declared_in) == (0.98, "OnPolicyAlgorithm")
    assert (rows["value_clip"].type, rows["total_env_steps"].declared_in) == ("float | None", "RLModule")
    assert rows["ratio_clip"].meaning == "Clip range epsilon of the likelihood ratio."


def _print_config(capsys, *args: str) -> dict:
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--config", str(ROOT / "configs" / "ppo" / "cartpole.yaml"), *args, "--print_config"])
    assert exit_info.value.code in (0, None)
    return yaml.safe_load(capsys.readouterr().out)


def test_lightning_cli_print_config_lists_every_hyperparameter_with_its_default(capsys):
    # jsonargparse reads the generated signature (RLModule.__init__ itself takes **hparams, whose
    # source names none of them): every key, with the config's value or the default.
    init_args = _print_config(capsys)["model"]["init_args"]
    shipped = yaml.safe_load((ROOT / "configs" / "ppo" / "cartpole.yaml").read_text())["model"]["init_args"]
    for row in hyperparameters(algos.PPO):
        assert row.name in init_args, row.name
        assert init_args[row.name] == shipped.get(row.name, row.default), row.name


def test_lightning_cli_takes_a_notebook_subclass_and_refuses_unknown_keys(capsys):
    subclass = ["--model.class_path", f"{__name__}.KlStopPPO", "--model.init_args.kl_stop", "0.5"]
    init_args = _print_config(capsys, *subclass)["model"]["init_args"]
    assert init_args["kl_stop"] == 0.5 and init_args["epochs"] == 20  # the shipped config's value carried over
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--config", str(ROOT / "configs" / "ppo" / "cartpole.yaml"),
              "--model.init_args.ratio_clipp", "0.2", "--print_config"])
    assert exit_info.value.code not in (0, None)
    assert "ratio_clipp" in capsys.readouterr().err


def test_importing_ppo_loads_no_replay_module():
    code = ("import sys; import lightning_rl.algos.ppo; from lightning_rl.algos import PPO; "
            "print(sorted(m for m in sys.modules if m.startswith('lightning_rl.replays') "
            "or m == 'lightning_rl.datasets.async_replay' or m == 'lightning_rl.datasets.replay'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"
    # The probe itself sees a replay module where one is loaded.
    code_dqn = code.replace("lightning_rl.algos.ppo", "lightning_rl.algos.dqn")
    out = subprocess.run([sys.executable, "-c", code_dqn], capture_output=True, text=True, check=True, cwd=ROOT)
    assert "lightning_rl.replays" in out.stdout


def test_the_docs_ppo_table_is_the_generated_one():
    from lightning_rl.algos.hparams import markdown_table

    page = (ROOT / "docs" / "concepts" / "hyperparameters.md").read_text()
    assert markdown_table(algos.PPO) in page


def test_a_class_made_by_exec_outside_any_module_gets_its_typed_signature():
    # A docs page or a script run by exec(): the class's module is not in sys.modules, and with
    # postponed annotations its annotation is the string "float".
    namespace = {"__name__": "not_a_loaded_module"}
    source = ("from __future__ import annotations\nfrom lightning_rl.algos import PPO\n"
              "from lightning_rl.algos.hparams import hparam\n"
              "class Scaled(PPO):\n    scale: float = hparam(2.0, 'A factor.')\n")
    exec(compile(source, "<page>", "exec"), namespace)
    assert inspect.signature(namespace["Scaled"].__init__).parameters["scale"].annotation is float
