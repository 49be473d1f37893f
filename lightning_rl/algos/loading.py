"""A module rebuilt from the config its checkpoint carries (``PPO.load_from_checkpoint(path)`` and
``lightning-rl play <ckpt>`` with no config restated)."""

from __future__ import annotations

from typing import Any, cast

__all__ = ["module_from_config"]


def module_from_config(cls: type, config: dict[str, Any], checkpoint: dict[str, Any], map_location: Any) -> Any:
    """Build the module of ``config`` (``{class_path, init_args}``) and load ``checkpoint`` into it."""
    from jsonargparse import ArgumentParser

    from lightning_rl.algos.base import RLModule  # the base imports this module

    parser = ArgumentParser(exit_on_error=False)
    parser.add_subclass_arguments(RLModule, "model")
    module: Any = parser.instantiate_classes(parser.parse_object({"model": config})).model
    if not isinstance(module, cls):
        raise ValueError(f"the checkpoint holds a {type(module).__name__}, not a {cls.__name__}")
    module = cast(Any, module)  # isinstance narrowed it to `object` (cls is a plain type)
    module.on_load_checkpoint(checkpoint)
    module.load_state_dict(checkpoint["state_dict"])
    module.run_config = config
    if map_location is not None:
        module.to(map_location)
    return module
