"""One root for the arena's own errors, and the command line's one-line report of any of them."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest
import typer
from typer.testing import CliRunner

import arena
from arena.cli.common import BUG, USAGE, ArenaTyper
from arena.engine import RulesError
from arena.errors import ArenaError
from arena.faults import ArenaFailure, BotFault
from arena.tournament.config import ConfigError
from arena.tournament.run import TournamentIncomplete

OPTIONAL = {"gymnasium", "pettingzoo", "numpy", "dask", "distributed", "torch"}  # extras a module may need


def _arena_modules():
    for info in pkgutil.walk_packages(arena.__path__, "arena."):
        if info.name.endswith("__main__") or info.name.startswith("arena.engine"):
            continue  # running a __main__ starts the program; the engine's errors are its own (below)
        try:
            yield importlib.import_module(info.name)
        except ModuleNotFoundError as e:
            if (e.name or "").split(".")[0] not in OPTIONAL:
                raise


def test_every_exception_the_arena_defines_is_an_arena_error() -> None:
    defined = {cls for module in _arena_modules() for _, cls in inspect.getmembers(module, inspect.isclass)
               if issubclass(cls, BaseException) and cls.__module__.startswith("arena.")
               and not cls.__module__.startswith("arena.engine")}
    assert len(defined) > 40  # the walk found the faults, the config, store, ladder and bot errors
    # Control flow, not errors: like KeyboardInterrupt, a BaseException that no ``except Exception``
    # catches and nobody is shown: raised in a game's thread whose caller was cancelled, or to unwind
    # the Swiss repeats search when its budget is spent (caught at the search's entry).
    control_flow = {"Interrupted", "_OutOfBudget"}
    assert all(not issubclass(c, Exception) for c in defined if c.__qualname__ in control_flow)
    assert sorted(c.__qualname__ for c in defined
                  if not issubclass(c, ArenaError) and c.__qualname__ not in control_flow) == []


def test_a_run_left_incomplete_is_the_arena_failing_not_a_config_error() -> None:
    assert issubclass(TournamentIncomplete, ArenaFailure) and not issubclass(TournamentIncomplete, ConfigError)
    assert issubclass(BotFault, ArenaError) and issubclass(ConfigError, ValueError)  # the built-in base kept


def _exit(exc: BaseException) -> tuple[int, str]:
    app = ArenaTyper()

    @app.command()
    def go() -> None:
        raise exc

    @app.command()
    def other() -> None:  # two commands, so `go` is a subcommand as in the real app
        pass

    result = CliRunner().invoke(app, ["go"])
    return result.exit_code, result.output


@pytest.mark.parametrize("exc", [ConfigError("bad file"), TournamentIncomplete("3 of 8 games could not be played"),
                                 ArenaFailure("could not start x"), RulesError("no such preset")])
def test_the_command_line_reports_an_arena_error_in_one_line(exc: BaseException) -> None:
    code, text = _exit(exc)
    assert code == USAGE and f"error: {exc}" in text and "Traceback" not in text and "arena bug" not in text


def test_anything_else_is_reported_as_an_arena_bug() -> None:
    code, text = _exit(KeyError("oops"))
    assert code == BUG and "KeyError" in text and "an arena bug" in text
