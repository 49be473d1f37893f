"""Grids of runs (rlpyt's launching layer on LightningCLI configs): variants, affinity, local and Slurm launchers.

* :mod:`~lightning_rl.launch.variants`: ``VariantLevel`` / ``make_variants`` on dotted config keys and the
  grid directory (one ``config.yaml`` + ``variant.yaml`` per variant);
* :mod:`~lightning_rl.launch.affinity`: the machine divided into run slots (cores, GPUs, hyperthreads);
* :mod:`~lightning_rl.launch.local`: ``lightning-rl launch``'s runs on this machine, resumable;
* :mod:`~lightning_rl.launch.slurm`: the same grid through submitit (the ``slurm`` extra; not imported here).
"""

from lightning_rl.launch.affinity import Slot, make_affinity
from lightning_rl.launch.local import VariantResult, launch_local
from lightning_rl.launch.variants import Grid, Variant, VariantLevel, load_grid, make_variants, write_variants

__all__ = [
    "Grid", "Slot", "Variant", "VariantLevel", "VariantResult", "launch_local", "load_grid", "make_affinity",
    "make_variants", "write_variants",
]
