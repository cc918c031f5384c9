"""A failure that leaves a trio nursery reaches the caller, and the user, as one plain error.

These run under the trio the lock names, where every nursery wraps what leaves it in an
exception group (the first test proves that, so the rest cannot pass for want of groups).
"""

from __future__ import annotations

import pytest
import trio
import typer
from typer.testing import CliRunner

from arena.cli.common import ArenaTyper
from arena.groups import plain_errors
from arena.tournament.run import TournamentIncomplete


async def _nursery(*failures: BaseException) -> None:
    async def fail(e: BaseException) -> None:
        raise e

    async def wait() -> None:
        await trio.sleep_forever()

    async with trio.open_nursery() as n:
        n.start_soon(wait)  # cancelled by the failure: a Cancelled rides along
        for e in failures:
            n.start_soon(fail, e)


def test_this_trio_wraps_a_single_failure_in_a_group() -> None:
    with pytest.raises(BaseExceptionGroup):
        trio.run(_nursery, ValueError("one"))


def test_one_failure_comes_out_plain() -> None:
    async def main() -> None:
        with plain_errors():
            await _nursery(TournamentIncomplete("workers died"))

    with pytest.raises(TournamentIncomplete, match="workers died") as info:
        trio.run(main)
    assert not isinstance(info.value, BaseExceptionGroup)


def test_an_interrupt_wins_over_the_errors_beside_it() -> None:
    async def main() -> None:
        with plain_errors():
            await _nursery(ValueError("a"), KeyboardInterrupt())

    with pytest.raises(KeyboardInterrupt):
        trio.run(main)


def test_one_failure_met_by_several_tasks_comes_out_once() -> None:
    """Several games in flight that each find the cluster gone are one failure, not an arena bug;
    two different failures of one type still stay a group."""
    from arena.tournament.executors import ExecutorBroken

    async def main(*failures: BaseException) -> None:
        with plain_errors():
            await _nursery(*failures)

    lost = "lost the connection to the Dask scheduler at tcp://h:1"
    with pytest.raises(ExecutorBroken, match=lost) as info:
        trio.run(main, ExecutorBroken(lost), ExecutorBroken(lost), ExecutorBroken(lost))
    assert not isinstance(info.value, BaseExceptionGroup)
    with pytest.raises(BaseExceptionGroup):
        trio.run(main, ExecutorBroken(lost), ExecutorBroken("another"))


def test_several_real_failures_stay_a_group() -> None:
    async def main() -> None:
        with plain_errors():
            await _nursery(ValueError("a"), RuntimeError("b"))

    with pytest.raises(BaseExceptionGroup) as info:
        trio.run(main)
    assert {type(e) for e in info.value.exceptions} >= {ValueError, RuntimeError}


def test_the_command_line_prints_one_line_for_a_group() -> None:
    app = ArenaTyper()

    @app.command()
    def go() -> None:
        trio.run(_nursery, TournamentIncomplete("3 of 8 games could not be played"))

    @app.command()
    def other() -> None:  # two commands, so `go` is a subcommand as in the real app
        pass

    result = CliRunner().invoke(app, ["go"])
    assert result.exit_code == 2
    text = result.output
    assert "error: 3 of 8 games could not be played" in text
    assert "Traceback" not in text and "ExceptionGroup" not in text and "Cancelled" not in text
    assert isinstance(result.exception, (SystemExit, typer.Exit)) or result.exception is None
