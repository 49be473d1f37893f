"""Modules that moved stay importable under their old names (lightning_rl.moved)."""

from __future__ import annotations

import importlib
import sys

import pytest

from lightning_rl import moved


@pytest.mark.parametrize("old", sorted(moved.MOVED))
def test_an_old_module_name_is_the_new_module(old):
    module = importlib.import_module(old)
    new = importlib.import_module(moved.MOVED[old])
    assert module is new
    assert sys.modules[old] is new


def test_an_algorithm_recorded_under_an_old_module_compares_equal(monkeypatch):
    monkeypatch.setitem(moved.MOVED, "pkg.old", "pkg.new")
    monkeypatch.setitem(moved.MOVED, "pkg.new", "pkg.newer")
    assert moved.current_name("pkg.old.Algo") == "pkg.newer.Algo"
    assert moved.current_name("pkg.other.Algo") == "pkg.other.Algo"
    assert moved.current_name("Algo") == "Algo"
