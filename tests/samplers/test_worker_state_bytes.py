"""A worker's checkpoint state crosses to the main process as a copy: readable after the worker died.

A tensor put on a multiprocessing queue as it is travels as a shared-memory handle that the reader
opens by asking the sending process; a worker killed between sending its state and the main
process reading it then left ``ConnectionResetError`` instead of a ``SamplerWorkerDied``.
"""

from __future__ import annotations

import multiprocessing as mp

import torch

from lightning_rl.samplers.worker_state import state_from_bytes, state_to_bytes


def _send_and_exit(q, as_bytes: bool) -> None:
    state = {"torch_rng": torch.arange(5, dtype=torch.uint8), "collector": {"obs": torch.ones(2, 3)}}
    q.put(state_to_bytes(state) if as_bytes else state)
    q.close()
    q.join_thread()  # the message is in the pipe; then the process ends


def test_a_worker_state_sent_as_bytes_is_read_after_the_worker_ended():
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    proc = ctx.Process(target=_send_and_exit, args=(q, True))
    proc.start()
    proc.join(timeout=30)
    assert proc.exitcode == 0
    state = state_from_bytes(q.get(timeout=10))
    assert torch.equal(state["torch_rng"], torch.arange(5, dtype=torch.uint8))
    assert torch.equal(state["collector"]["obs"], torch.ones(2, 3))
