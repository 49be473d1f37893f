"""Checkpoint files that are atomic, paired with their replay side file, and read as data only.

:class:`RLCheckpointIO` writes the files: the ``.ckpt`` and the replay's side file go to temporary
names and are renamed into place, the side file is named after a pair token that the ``.ckpt``
records (so a ``.ckpt`` never meets another save's replay), the two saves of one step (``save_last``
and the periodic one) share one side file (a hard link), and every load is
``torch.load(weights_only=True)``: a file that would need unpickling is refused with a
``ValueError`` naming it.
"""

from __future__ import annotations

import glob
import os
import uuid
from pathlib import Path
from typing import Any

import torch
from lightning_fabric.plugins import CheckpointIO, TorchCheckpointIO

from lightning_rl.checkpoint_format import CHECKPOINT_KEY, REPLAY_KEY
from lightning_rl.safe_state import load_data

__all__ = ["CHECKPOINT_KEY", "REPLAY_KEY", "RLCheckpointIO"]


class RLCheckpointIO(CheckpointIO):
    """Atomic, paired, data-only checkpoint files (see the module docstring).

    Wraps the strategy's CheckpointIO for anything remote; local paths are written here.

    Args:
        inner: The CheckpointIO to wrap (default: Lightning's ``TorchCheckpointIO``).
    """

    def __init__(self, inner: CheckpointIO | None = None) -> None:
        self.inner = inner or TorchCheckpointIO()
        # (global step, counters, side file) of the last replay written, to link instead of rewriting.
        self._last_replay: tuple[Any, Any, str] | None = None

    def save_checkpoint(self, checkpoint: dict[str, Any], path: Any, storage_options: Any = None) -> None:
        path = os.fspath(path)
        if "://" in path:  # a remote filesystem (fsspec): no rename there, the wrapped IO writes it
            if checkpoint.get(REPLAY_KEY) is not None:
                raise ValueError(
                    f"cannot save {path}: the replay's side file needs a local checkpoint directory "
                    "(or checkpoint_replay=False)"
                )
            self.inner.save_checkpoint(checkpoint, path, storage_options)
            return
        replay_state = checkpoint.pop(REPLAY_KEY, None)
        ours = checkpoint.get(CHECKPOINT_KEY)
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        tmp_files: list[str] = []
        try:
            if replay_state is not None and ours is not None:
                side = self._write_replay(replay_state, checkpoint, ours, path, tmp_files)
                ours["replay_file"] = os.path.basename(side)
            tmp = f"{path}.tmp-{uuid.uuid4().hex[:8]}"
            tmp_files.append(tmp)
            self.inner.save_checkpoint(checkpoint, tmp, storage_options)
            os.replace(tmp, path)
        except BaseException:
            for name in tmp_files:
                if os.path.exists(name):
                    os.remove(name)
            raise
        finally:
            if replay_state is not None:
                checkpoint[REPLAY_KEY] = replay_state
        # The new pair is in place: side files of earlier saves to this name are stale.
        keep = ours.get("replay_file") if ours is not None else None
        for old in _side_files(path):
            if os.path.basename(old) != keep:
                os.remove(old)

    def _write_replay(
        self, replay_state: Any, checkpoint: dict[str, Any], ours: dict[str, Any], path: str, tmp_files: list[str]
    ) -> str:
        key = (checkpoint.get("global_step"), repr(ours.get("train_state")))
        if self._last_replay is not None and self._last_replay[:2] == key and os.path.exists(self._last_replay[2]):
            # The same replay as the save just before (save_last and the periodic checkpoint of
            # one step): link the file written then instead of writing the buffer again.
            previous = self._last_replay[2]
            pair = previous.rsplit(".replay-", 1)[1]
            side = f"{path}.replay-{pair}"
            if os.path.abspath(side) != os.path.abspath(previous):
                tmp = f"{side}.tmp"
                tmp_files.append(tmp)
                if os.path.exists(tmp):
                    os.remove(tmp)
                try:
                    os.link(previous, tmp)
                except OSError:  # no hard links on this filesystem
                    Path(tmp).write_bytes(Path(previous).read_bytes())
                os.replace(tmp, side)
            ours["replay_pair"] = pair
            return side
        pair = uuid.uuid4().hex[:12]
        side = f"{path}.replay-{pair}"
        tmp = f"{side}.tmp"
        tmp_files.append(tmp)
        torch.save({"pair": pair, "replay": replay_state}, tmp)
        os.replace(tmp, side)
        tmp_files.append(side)  # removed again if the .ckpt itself then fails
        ours["replay_pair"] = pair
        self._last_replay = (*key, side)
        return side

    def load_checkpoint(self, path: Any, map_location: Any = None, weights_only: bool | None = None) -> dict[str, Any]:
        """Load as data only (``weights_only=False`` is refused), with the replay of its pair.

        Raises:
            ValueError: If the file needs unpickling, ``weights_only`` is False, the side file the
                checkpoint names is missing or belongs to another save.
        """
        if weights_only is False:
            raise ValueError(
                f"refusing to load {os.fspath(path)} with weights_only=False: lightning_rl reads checkpoints "
                "as data only; drop weights_only"
            )
        if not os.path.exists(os.fspath(path)):  # remote: the wrapped CheckpointIO reads it
            return self.inner.load_checkpoint(path, map_location=map_location, weights_only=True)
        checkpoint = load_data(path, map_location=map_location)
        ours = checkpoint.get(CHECKPOINT_KEY) or {}
        name = ours.get("replay_file")
        if name is not None:
            if os.path.basename(name) != name:
                raise ValueError(f"{os.fspath(path)}: replay_file {name!r} must be a file name")
            side = os.path.join(os.path.dirname(os.fspath(path)), name)
            if not os.path.exists(side):
                raise ValueError(f"{os.fspath(path)}: its replay side file {side} is missing")
            stored = load_data(side)
            if stored.get("pair") != ours.get("replay_pair"):
                raise ValueError(
                    f"{side} belongs to another save than {os.fspath(path)} "
                    f"(pair {stored.get('pair')!r}, the checkpoint names {ours.get('replay_pair')!r})"
                )
            checkpoint[REPLAY_KEY] = stored["replay"]
        elif os.path.exists(f"{os.fspath(path)}.replay"):  # lightning_rl 0.1: no pair token
            checkpoint[REPLAY_KEY] = load_data(f"{os.fspath(path)}.replay")
        return checkpoint

    def remove_checkpoint(self, path: Any) -> None:
        self.inner.remove_checkpoint(path)
        for side in _side_files(os.fspath(path)):
            os.remove(side)

    def teardown(self) -> None:
        self.inner.teardown()


def _side_files(path: str) -> list[str]:
    """Replay side files of the checkpoint ``path`` (paired ones and a 0.1 ``<path>.replay``)."""
    found = [f for f in glob.glob(glob.escape(path) + ".replay-*") if not f.endswith(".tmp")]
    if os.path.exists(f"{path}.replay"):
        found.append(f"{path}.replay")
    return found
