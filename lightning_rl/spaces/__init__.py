"""Spaces describing observations and actions: IntBox, FloatBox, Composite, gymnasium conversion."""

from lightning_rl.spaces.base import Space
from lightning_rl.spaces.composite import Composite, to_field_names
from lightning_rl.spaces.float_box import FloatBox
from lightning_rl.spaces.gymnasium import from_gymnasium, from_gymnasium_value, to_gymnasium_value
from lightning_rl.spaces.int_box import IntBox

__all__ = [
    "Composite",
    "FloatBox",
    "IntBox",
    "Space",
    "from_gymnasium",
    "from_gymnasium_value",
    "to_field_names",
    "to_gymnasium_value",
]
