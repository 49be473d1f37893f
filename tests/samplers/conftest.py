"""Fixtures of the sampler tests."""

from __future__ import annotations

import os

import psutil
import pytest


@pytest.fixture
def no_leaks():
    """Assert a test leaves no child processes and no new /dev/shm entries."""
    me = psutil.Process()
    children = {p.pid for p in me.children(recursive=True)}
    shm = set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()
    yield
    left = [p for p in me.children(recursive=True) if p.pid not in children and _running(p)]
    assert left == [], f"child processes left behind: {left}"
    if os.path.isdir("/dev/shm"):
        new = set(os.listdir("/dev/shm")) - shm
        assert new == set(), f"shared memory left behind: {new}"


def _running(p: psutil.Process) -> bool:
    try:
        return p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
