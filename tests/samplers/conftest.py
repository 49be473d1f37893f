"""Fixtures of the sampler tests."""

from __future__ import annotations

import pytest

from tests.samplers.helpers import leak_check


@pytest.fixture
def no_leaks():
    """Assert a test leaves no child processes and no new /dev/shm entries."""
    with leak_check():
        yield
