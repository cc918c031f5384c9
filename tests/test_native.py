"""The bot floor's C helper is used only where the built binary is of the sources' interface
(``arena/bots/native.py``): a checkout updated without rebuilding keeps an older ``_pipe`` whose
``ask`` took other arguments, and every seat crashed at its first decision."""

from __future__ import annotations

import sys
import types

import pytest

from arena.bots import native


def _with_binary(monkeypatch, module: types.ModuleType | None) -> types.ModuleType | None:
    monkeypatch.setitem(sys.modules, "arena.bots._pipe", module)  # None: import fails, as unbuilt
    return native.load()


def test_an_older_binary_is_left_unused(monkeypatch) -> None:
    old = types.ModuleType("arena.bots._pipe")
    old.ask = lambda *a: None  # an interface of before API existed: no API attribute
    assert _with_binary(monkeypatch, old) is None
    old.API = native.API - 1
    assert _with_binary(monkeypatch, old) is None


def test_a_binary_of_this_interface_is_used_and_none_where_unbuilt(monkeypatch) -> None:
    current = types.ModuleType("arena.bots._pipe")
    current.API = native.API
    assert _with_binary(monkeypatch, current) is current
    assert _with_binary(monkeypatch, None) is None


def test_the_shell_and_the_freezer_take_the_helper_from_the_check() -> None:
    from arena.bots import blocking, cgroups
    if native.pipe is None:
        pytest.skip("the C helper is not built here (or is of another interface): nothing to compare")
    assert native.pipe.API == native.API  # the binary built from these sources declares what the check asks
    assert blocking._round_trip is native.pipe.ask and cgroups.Knob is native.pipe.Knob
