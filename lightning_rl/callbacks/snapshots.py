"""rlpyt's logger snapshot modes as Lightning ``ModelCheckpoint`` settings.

rlpyt's ``logger_context(snapshot_mode=...)`` keeps the agent's parameters at each log interval in
one of four ways. Here a log interval is a Lightning epoch (``log_interval_steps`` env steps), so
epoch ``N`` ends at ``(N + 1) * log_interval_steps`` env steps, and each mode is a ``ModelCheckpoint``
setting (``configs/ppo/cartpole_snapshots.yaml`` shows them in a config):

=========  ===========================  ======================================================================
rlpyt      files                        ModelCheckpoint
=========  ===========================  ======================================================================
``last``   ``last.ckpt``, replaced      ``filename="last", save_top_k=1, enable_version_counter=False``
           every epoch
``all``    ``epoch_<N>.ckpt`` every     ``filename="epoch_{epoch}", auto_insert_metric_name=False,
           epoch, plus ``last.ckpt``    save_top_k=-1, save_last=True``
``gap``    ``epoch_<N>.ckpt`` every     the ``last`` one (resumable every epoch) plus ``filename="epoch_{epoch}",
           ``gap`` epochs, plus         auto_insert_metric_name=False, save_top_k=-1, every_n_epochs=gap``
           ``last.ckpt`` every epoch
``none``   nothing                      no ModelCheckpoint (``trainer.enable_checkpointing: false``)
=========  ===========================  ======================================================================

In ``gap`` mode ``last.ckpt`` comes from its own callback because Lightning writes a ``save_last``
file only when a snapshot was written in the same epoch; ``last.ckpt`` every epoch is what
``--ckpt_path last`` and the launcher's resume need. Every file is a complete checkpoint (optimizer and
counters included): ``lightning-rl fit --ckpt_path <file>`` continues from it, ``lightning-rl play
<file>`` plays it.
"""

from __future__ import annotations

from typing import Literal

from pytorch_lightning.callbacks import ModelCheckpoint

__all__ = ["SNAPSHOT_MODES", "snapshot_callbacks"]

SNAPSHOT_MODES = ("last", "all", "gap", "none")
SnapshotMode = Literal["last", "all", "gap", "none"]


def snapshot_callbacks(mode: SnapshotMode = "last", gap: int = 1, dirpath: str | None = None) -> list[ModelCheckpoint]:
    """The ``ModelCheckpoint`` callbacks of one of rlpyt's snapshot modes (see the module docstring).

    Args:
        mode: ``last``, ``all``, ``gap`` or ``none``.
        gap: Epochs between snapshots in ``gap`` mode (1 is ``all``).
        dirpath: The checkpoint directory; default: the run directory's ``checkpoints/``.

    Raises:
        ValueError: If ``mode`` is not one of :data:`SNAPSHOT_MODES` or ``gap`` is below 1.
    """
    if mode not in SNAPSHOT_MODES:
        raise ValueError(f"snapshot mode must be one of {SNAPSHOT_MODES}, got {mode!r}")
    if gap < 1:
        raise ValueError(f"snapshot gap must be at least 1 epoch, got {gap}")
    if mode == "none":
        return []
    if mode == "all" or (mode == "gap" and gap == 1):
        return [ModelCheckpoint(dirpath=dirpath, filename="epoch_{epoch}", auto_insert_metric_name=False,
                                save_top_k=-1, save_last=True)]
    last = ModelCheckpoint(dirpath=dirpath, filename="last", save_top_k=1, enable_version_counter=False)
    if mode == "last":
        return [last]
    return [last, ModelCheckpoint(dirpath=dirpath, filename="epoch_{epoch}", auto_insert_metric_name=False,
                                  save_top_k=-1, every_n_epochs=gap)]
