"""SIGINT for tests that send it: Python's Ctrl-C handler even where the test run was started with
SIGINT ignored.

A shell starts a background job (``make test &``, ``nohup``) with SIGINT ignored, and every process
it starts inherits that: Python then installs no KeyboardInterrupt handler, and
``RunDirectoryCallback`` leaves an ignored signal ignored, as it must for a user's ``nohup`` run.
A test that sends SIGINT to itself or to a process it starts gives that process the default
handler first, so it passes however the test run was started.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator

__all__ = ["default_sigint", "sigint_default_in_child"]


@contextlib.contextmanager
def default_sigint() -> Iterator[None]:
    """Python's own SIGINT handler (KeyboardInterrupt) in this process while the block runs, the
    previous disposition afterwards."""
    previous = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)


def sigint_default_in_child() -> None:
    """``subprocess.Popen(preexec_fn=...)``: the child starts with SIGINT's default disposition, so its
    Python installs the KeyboardInterrupt handler (an ignored SIGINT would stay ignored across exec)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
