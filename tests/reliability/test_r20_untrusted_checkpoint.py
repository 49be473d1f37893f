"""A checkpoint or config from someone else cannot run code: every load path reads checkpoints
with ``torch.load(weights_only=True)`` and refuses, naming the file, what would need unpickling
(no fallback); YAML is read safely; a foreign ``_instantiator`` is refused. lightning_rl's own
checkpoints hold only tensors and plain containers, so they load that way, envs included.
"""

from __future__ import annotations

import pathlib
from pathlib import Path

import numpy as np
import pytest
import pytorch_lightning as pl
import torch
from pytorch_lightning.callbacks import ModelCheckpoint

from lightning_rl.algos import PPO, SAC
from lightning_rl.algos.checkpointing import RLCheckpointIO, load_data
from lightning_rl.cli import main
from lightning_rl.envs.make import make_env
from lightning_rl.safe_state import encode, env_state, load_env_state
from tests.algos.test_on_policy import make_trainer

ROOT = Path(__file__).resolve().parents[2]
CARTPOLE = str(ROOT / "configs" / "ppo" / "cartpole.yaml")


class Touch:
    """Unpickling this creates ``path``: the sentinel of code run by a load."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):
        return (pathlib.Path.touch, (pathlib.Path(self.path),))


def crafted_checkpoint(tmp_path: Path) -> tuple[Path, Path]:
    sentinel = tmp_path / "code_ran"
    path = tmp_path / "crafted.ckpt"
    torch.save({"state_dict": {}, "hyper_parameters": {}, "lightning_rl": {"x": Touch(sentinel)}}, path)
    return path, sentinel


def small_ppo_fit(tmp_path: Path) -> tuple[PPO, Path]:
    pl.seed_everything(0)
    from tests.algos.test_on_policy import cartpole_ppo

    module = cartpole_ppo(log_interval_steps=256)
    ckpt = ModelCheckpoint(dirpath=tmp_path / "ckpt", save_last=True)
    make_trainer(max_epochs=1, callbacks=[ckpt]).fit(module)
    return module, tmp_path / "ckpt" / "last.ckpt"


def test_the_sentinel_would_be_created_by_unpickling(tmp_path):
    # The crafted file is a real attack: loading it the unsafe way runs its code.
    path, sentinel = crafted_checkpoint(tmp_path)
    torch.load(path, weights_only=False)
    assert sentinel.exists()


@pytest.mark.parametrize("command", ["fit", "validate"])
def test_cli_refuses_a_crafted_checkpoint_naming_it(tmp_path, monkeypatch, capsys, command):
    monkeypatch.chdir(tmp_path)
    path, sentinel = crafted_checkpoint(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--config", CARTPOLE, "--trainer.enable_progress_bar", "false", "--ckpt_path", str(path)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"refusing to load {path}" in err
    assert not sentinel.exists()


def test_python_api_refuses_a_crafted_checkpoint_and_weights_only_false(tmp_path):
    path, sentinel = crafted_checkpoint(tmp_path)
    with pytest.raises(ValueError, match="refusing to load .*crafted.ckpt"):
        PPO.load_from_checkpoint(path)
    with pytest.raises(ValueError, match="weights_only"):
        PPO.load_from_checkpoint(path, weights_only=False)
    io = RLCheckpointIO()
    with pytest.raises(ValueError, match="refusing to load"):
        io.load_checkpoint(path)
    with pytest.raises(ValueError, match="weights_only=False"):
        io.load_checkpoint(path, weights_only=False)
    with pytest.raises(ValueError, match="refusing to load"):
        load_data(path)
    assert not sentinel.exists()


def test_trainer_fit_with_weights_only_false_is_refused(tmp_path):
    _, last = small_ppo_fit(tmp_path)
    path, sentinel = crafted_checkpoint(tmp_path)
    from tests.algos.test_on_policy import cartpole_ppo

    for ckpt, kwargs in ((path, {}), (last, {"weights_only": False})):
        with pytest.raises(ValueError, match="refusing to load"):
            make_trainer(max_epochs=2).fit(cartpole_ppo(log_interval_steps=256), ckpt_path=str(ckpt), **kwargs)
    assert not sentinel.exists()


def test_yaml_with_python_tags_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    sentinel = tmp_path / "code_ran"
    config = tmp_path / "evil.yaml"
    config.write_text(f"seed_everything: !!python/object/apply:pathlib.Path.touch [{pathlib.Path(sentinel)!s}]\n")
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "--config", CARTPOLE, "--config", str(config), "--trainer.enable_progress_bar", "false"])
    assert exit_info.value.code != 0
    assert not sentinel.exists()


def test_a_foreign_instantiator_is_refused(tmp_path):
    _, last = small_ppo_fit(tmp_path)
    checkpoint = torch.load(last, weights_only=True)
    checkpoint["hyper_parameters"]["_instantiator"] = "os.system"
    forged = tmp_path / "forged.ckpt"
    torch.save(checkpoint, forged)
    with pytest.raises(ValueError, match="instantiator"):
        PPO.load_from_checkpoint(forged)


def test_own_checkpoints_are_plain_data_with_env_state(tmp_path):
    module, last = small_ppo_fit(tmp_path)
    checkpoint = torch.load(last, weights_only=True)  # would raise on any pickled object

    def leaves(x):
        if isinstance(x, dict):
            for v in x.values():
                yield from leaves(v)
        elif isinstance(x, (list, tuple)):
            for v in x:
                yield from leaves(v)
        else:
            yield x

    kinds = {type(v) for v in leaves(checkpoint)}
    assert kinds <= {torch.Tensor, int, float, str, bool, type(None)}, kinds
    ours = checkpoint["lightning_rl"]
    assert "pickled" not in ours and ours["format"] == 2
    # The serial sampler's envs travel as data: CartPole's state array is there, per env.
    envs = ours["sampler"]["envs"]
    assert len(envs) == module.sampler.batch_spec.B
    cartpole = envs[0][-1]
    assert cartpole["class"] == "CartPoleEnv" and cartpole["attrs"]["state"]["data"].shape == (4,)


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1", "HalfCheetah-v5", "ALE/Pong-v5"])
def test_env_state_as_data_continues_identically(tmp_path, env_id):
    env = make_env(env_id, seed=3)
    env.reset()
    actions = [env.action_space.sample() for _ in range(40)]
    for a in actions[:10]:
        env.step(a)
    layers, missing = env_state(env)
    assert missing == []
    torch.save(layers, tmp_path / "env.pt")
    clone = make_env(env_id, seed=99)  # another seed: everything must come from the state
    clone.reset()
    load_env_state(clone, torch.load(tmp_path / "env.pt", weights_only=True))
    for a in actions[10:]:
        a_ref, a_clone = env.step(a), clone.step(a)
        np.testing.assert_array_equal(a_ref.observation, a_clone.observation)
        assert a_ref.reward == a_clone.reward and a_ref.done == a_clone.done
        if a_ref.done:
            np.testing.assert_array_equal(env.reset(), clone.reset())
    # The action space's generator came along too.
    np.testing.assert_array_equal(env.action_space.sample(), clone.action_space.sample())


def test_an_env_with_state_that_is_not_data_says_which_attribute(tmp_path):
    env = make_env("CartPole-v1", seed=0)
    env.reset()
    env.env.unwrapped.tracker = object()  # e.g. a user env keeping a Python object
    layers, missing = env_state(env)
    assert layers is None and missing == ["CartPoleEnv.tracker (object)"]
    with pytest.raises(TypeError, match="state.x: a builtins.object cannot be stored"):
        encode({"x": object()})


def test_a_sync_vector_env_stores_each_copy_and_names_the_one_that_cannot_be_stored(tmp_path):
    import gymnasium

    def make(n):
        return gymnasium.vector.SyncVectorEnv([lambda: gymnasium.make("CartPole-v1")] * n)

    venv = make(2)
    venv.reset(seed=0)
    layers, missing = env_state(venv)
    assert missing == [] and [len(sub) for sub in layers[0]["sub_envs"]] == [4, 4]
    torch.save(layers, tmp_path / "venv.pt")
    stored = torch.load(tmp_path / "venv.pt", weights_only=True)
    with pytest.raises(ValueError, match="holds 2 copies in SyncVectorEnv, this env has 3"):
        load_env_state(make(3), stored)
    venv.envs[1].unwrapped.tracker = object()
    layers, missing = env_state(venv)
    assert layers is None and missing == ["SyncVectorEnv.envs[1]: CartPoleEnv.tracker (object)"]


def test_sac_resume_is_refused_for_another_env(tmp_path):
    from tests.algos.test_sac import pendulum_sac

    module = pendulum_sac(total_env_steps=256, min_steps_learn=64)
    ckpt = ModelCheckpoint(dirpath=tmp_path / "ckpt", save_last=True)
    make_trainer(max_epochs=1, callbacks=[ckpt]).fit(module)
    assert isinstance(module, SAC)
    other = pendulum_sac(total_env_steps=512, min_steps_learn=64)
    other.sampler.env_id = "MountainCarContinuous-v0"
    with pytest.raises(ValueError, match="env_id: checkpoint has 'Pendulum-v1'"):
        make_trainer(max_epochs=2).fit(other, ckpt_path=str(tmp_path / "ckpt" / "last.ckpt"))


def test_torch_is_new_enough_for_weights_only_loading():
    # weights_only=True is only a safety boundary on torch versions with the fixes for
    # CVE-2025-32434 and CVE-2026-24747; the row asks CI to insist on 2.10 or newer.
    from packaging.version import Version

    assert Version(torch.__version__.split("+")[0]) >= Version("2.10")


def test_a_file_that_is_no_checkpoint_at_all_is_named_as_such(tmp_path):
    path = tmp_path / "notes.ckpt"
    path.write_text("a text file saved with the wrong name\n")
    message = r"notes\.ckpt is not a checkpoint \(torch\.save writes a zip archive; this file is none\)"
    with pytest.raises(ValueError, match=message):
        load_data(path)
