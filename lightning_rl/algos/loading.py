"""A module rebuilt from the config its checkpoint carries (``PPO.load_from_checkpoint(path)`` and
``lightning-rl play <ckpt>`` with no config restated)."""

from __future__ import annotations

import io
from typing import Any, cast

import pytorch_lightning as pl
import torch

from lightning_rl.algos.checkpointing import migrate_config, migrate_hyperparameters
from lightning_rl.safe_state import load_data

__all__ = ["CheckpointLoading", "module_from_config"]


def module_from_config(cls: type, config: dict[str, Any], checkpoint: dict[str, Any], map_location: Any) -> Any:
    """Build the module of ``config`` (``{class_path, init_args}``) and load ``checkpoint`` into it.

    Raises:
        ValueError: If the config's module is not a ``cls``.
    """
    from jsonargparse import ArgumentParser

    parser = ArgumentParser(exit_on_error=False)
    parser.add_subclass_arguments(pl.LightningModule, "model")
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


class CheckpointLoading:
    """``load_from_checkpoint`` for a LightningModule (mixed in before ``pl.LightningModule``)."""

    @classmethod
    def load_from_checkpoint(
        cls, checkpoint_path: Any, map_location: Any = None, hparams_file: Any = None, strict: bool | None = None,
        weights_only: bool | None = None, **kwargs: Any,
    ) -> Any:
        """Lightning's ``load_from_checkpoint``, reading the file as data only.

        ``PPO.load_from_checkpoint(path)`` needs nothing else when the checkpoint carries its config
        (every checkpoint of a ``lightning-rl`` run does): the agent, sampler and hyperparameters are
        built from it, then the weights and counters are loaded. Given ``agent``/``sampler`` keyword
        arguments (or a checkpoint without a config), Lightning's own loading runs.

        Raises:
            ValueError: If ``weights_only`` is False, the file would need unpickling (nothing in it
                runs), or the checkpoint's module is not a ``cls``.
        """
        if weights_only is False:
            raise ValueError("lightning_rl reads checkpoints as data only (weights_only=True); drop weights_only")
        data = load_data(checkpoint_path)  # refuses a file that needs unpickling, naming it
        config = (data.get("lightning_rl") or {}).get("config")
        if config and not kwargs and hparams_file is None:
            return module_from_config(cls, migrate_config(config), data, map_location)
        # Lightning's own loading, from the hyperparameters in today's form (older versions named
        # the optimizer): handed over as an in-memory copy of the checkpoint.
        data["hyper_parameters"] = migrate_hyperparameters(data.get("hyper_parameters") or {})
        buffer = io.BytesIO()
        torch.save(data, buffer)
        buffer.seek(0)
        return super().load_from_checkpoint(  # type: ignore[misc]  # pl.LightningModule's, next in the MRO
            buffer, map_location=map_location, hparams_file=hparams_file, strict=strict, weights_only=True, **kwargs,
        )
