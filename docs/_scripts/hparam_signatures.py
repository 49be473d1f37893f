"""Griffe extension: each algorithm's API entry shows the keyword-only ``__init__`` Python reports.

An algorithm declares its hyperparameters as class attributes (``lightning_rl.algos.hparams``);
its flat ``__init__(agent, sampler, *, <hyperparameter>=<default>, ...)`` and that method's
``Args:`` docstring are built when the class is created, so reading the source finds only
``RLModule.__init__(agent, sampler, **hparams)``. For every ``RLModule`` subclass without an
``__init__`` of its own in the source, this gives the entry the runtime ``__init__``: its
parameters as ``inspect.signature`` reports them, with the declared types as written, and its
docstring.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

import griffe


class HyperparameterSignatures(griffe.Extension):
    """Replace the inherited ``**hparams`` ``__init__`` of the algorithms (see the module docstring)."""

    def on_class_members(self, *, node: Any, cls: griffe.Class, agent: Any, **kwargs: Any) -> None:
        if "__init__" in cls.members:  # written in the source: the static signature is the real one
            return
        try:
            runtime = getattr(importlib.import_module(cls.module.path), cls.name)
        except Exception:  # noqa: BLE001 - not importable: leave the entry as griffe read it
            return
        from lightning_rl.algos.base import RLModule
        from lightning_rl.algos.hparams import declared

        if not (isinstance(runtime, type) and issubclass(runtime, RLModule) and runtime is not RLModule):
            return
        types = {name: spec.type_text for name, spec in declared(runtime).items()}
        parameters = []
        for p in inspect.signature(runtime.__init__).parameters.values():
            annotation = types.get(p.name) or (
                None if p.annotation is inspect.Parameter.empty else inspect.formatannotation(p.annotation))
            default = None if p.default is inspect.Parameter.empty else repr(p.default)
            parameters.append(griffe.Parameter(p.name, annotation=annotation, kind=griffe.ParameterKind(p.kind.description),
                                               default=default))
        init = griffe.Function("__init__", parameters=griffe.Parameters(*parameters), returns="None")
        init.docstring = griffe.Docstring(inspect.cleandoc(runtime.__init__.__doc__ or ""), parent=init,
                                          parser=cls.docstring.parser if cls.docstring else None)
        cls.set_member("__init__", init)
