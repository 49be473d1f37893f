"""The algorithm layer stays flat and readable: an algorithm extends ``RLModule`` through its family
base (on-policy or off-policy) and at most one other algorithm, no algorithm module over 400 lines,
a pure loss function per algorithm, keyword-only ``__init__`` arguments after the agent and the
sampler, and no method that reuses a Lightning hook's name with another signature."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
import pytorch_lightning as pl

import lightning_rl.algos as algos
from lightning_rl.algos.base import RLModule

ALGORITHMS = [algos.A2C, algos.PPO, algos.MultiAgentPPO, algos.DQN, algos.CategoricalDQN, algos.R2D1,
              algos.DDPG, algos.TD3, algos.SAC]
LOSSES = [algos.a2c_loss, algos.ppo_loss, algos.dqn_loss, algos.categorical_dqn_loss, algos.r2d1_loss,
          algos.ddpg_q_loss, algos.ddpg_mu_loss, algos.sac_loss]
ALGOS_DIR = Path(algos.__file__).parent


@pytest.mark.parametrize("cls", ALGORITHMS, ids=lambda c: c.__name__)
def test_an_algorithm_is_its_family_base_plus_at_most_one_other_algorithm(cls):
    between = [c for c in cls.__mro__[1:] if issubclass(c, pl.LightningModule) and c is not pl.LightningModule]
    families = [algos.OnPolicyAlgorithm, algos.OffPolicyAlgorithm]
    assert between[-2:] in ([family, RLModule] for family in families), f"{cls.__name__}: {between}"
    assert len(between) <= 3 and all(c in ALGORITHMS for c in between[:-2]), f"{cls.__name__}: {between}"


@pytest.mark.parametrize("path", sorted(ALGOS_DIR.glob("*.py")), ids=lambda p: p.name)
def test_no_algorithm_module_is_longer_than_400_lines(path):
    assert len(path.read_text().splitlines()) <= 400


@pytest.mark.parametrize("cls", ALGORITHMS, ids=lambda c: c.__name__)
def test_init_arguments_are_keyword_only_after_agent_and_sampler(cls):
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    assert [p.name for p in params[:2]] == ["agent", "sampler"]
    rest = params[2:]
    assert rest and all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in rest), cls.__name__
    # Every argument is typed (the generated __init__ signature is the config schema) and none is **kwargs.
    assert all(p.annotation is not inspect.Parameter.empty for p in params)


@pytest.mark.parametrize("loss", LOSSES, ids=lambda f: f.__name__)
def test_each_loss_is_a_module_level_function_of_tensors(loss):
    assert inspect.isfunction(loss) and "self" not in inspect.signature(loss).parameters
    assert inspect.getmodule(loss).__name__.startswith("lightning_rl.algos.")


def test_no_method_reuses_a_lightning_hook_name():
    hooks = {name for name in dir(pl.LightningModule) if not name.startswith("_")}
    for cls in ALGORITHMS:
        for klass in cls.__mro__:
            if not klass.__module__.startswith("lightning_rl."):
                continue
            for name, member in vars(klass).items():
                if name in hooks and callable(member):
                    ours = inspect.signature(member).parameters
                    theirs = inspect.signature(getattr(pl.LightningModule, name)).parameters
                    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in theirs.values()):
                        continue  # training_step(*args, **kwargs) and the like: any signature is theirs
                    assert list(ours) == list(theirs), f"{klass.__name__}.{name} changes the hook's signature"
