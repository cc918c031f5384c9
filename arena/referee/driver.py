"""The trio referee: plays one game between players over their connections, with real clocks.
(Left for benchmarks and tests that compare it; every arena command, web play included, plays on
:mod:`arena.referee.blocking`.)

A :class:`Player` is a seat's occupant for a whole match: a bot process
(:class:`BotPlayer`) or a person at the terminal. :func:`run_game` moves the
messages that :class:`~arena.referee.core.RefereeCore` writes to the players and
their replies back, timing each; the core decides everything else. A bot that
faults (times out, crashes, breaks the protocol) forfeits the game; the others
play on. Nothing a bot sends can raise out of :func:`run_game`; the arena's own failure to
start a bot (:class:`~arena.faults.ArenaFailure`) does, since it must cost no bot a game.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

import trio

from ..bots.manifest import BotSpec
from ..engine import Rules, State
from ..faults import ArenaFailure, BotFault
from . import protocol
from .core import GameRecord, Outcome, RefereeCore, Request, TimeControl
from .seat import BotSeat, answered, as_fault, faulted, game_clock, handshake_fault, hold, slot_end


class Connection(Protocol):
    """A line-based link to a bot process (see :mod:`arena.bots.process`); tests script their own."""

    async def send_line(self, text: str) -> None: ...
    async def receive_line(self, timeout: float) -> str: ...
    def take_stderr(self) -> list[str]: ...
    async def aclose(self) -> None: ...


Launcher = Callable[[BotSpec], Awaitable[Connection]]


class Player(Protocol):
    name: str

    async def begin(self, message: dict[str, Any]) -> None: ...
    async def decide(self, message: dict[str, Any], timeout: float) -> int: ...
    async def finish(self, message: dict[str, Any]) -> None: ...
    async def fault(self, reason: str, message: str, request_id: int | None) -> None: ...
    def take_stderr(self) -> list[str]: ...
    async def close(self) -> None: ...


class BotPlayer(BotSeat):
    """A bot process serving a match on trio (the decisions are :class:`~arena.referee.seat.BotSeat`'s)."""

    conn: Connection | None

    async def _ensure(self) -> Connection:
        if self.conn is not None:
            return self.conn
        try:
            self.conn = await self.launcher(self.spec)
        except Exception as e:
            self._not_started(e)
        self.starts += 1
        try:
            await self.conn.send_line(protocol.encode(protocol.hello()))
            self._greeted(await self.conn.receive_line(self.clock.handshake_s))
        except BaseException as e:
            if isinstance(e, (trio.Cancelled, KeyboardInterrupt)):  # Ctrl-C is never the bot's fault
                raise
            fault = handshake_fault(e)
            await self.fault(fault.reason, fault.message, None)  # a live bot is told why (bad_version...)
            raise fault from None
        return self.conn

    async def begin(self, message: dict[str, Any]) -> None:
        if self._stale():
            await self.close()
        self._between_games()  # before a fresh process starts: its own first lines are this game's
        conn = await self._ensure()
        self._clock_game(conn)
        try:
            await conn.send_line(protocol.encode(message))
        except BaseException as e:
            if isinstance(e, (trio.Cancelled, KeyboardInterrupt)):  # Ctrl-C is never the bot's fault
                raise
            raise as_fault(e) from None

    async def outcome(self, req: Request) -> Outcome:
        """Ask ``req`` and time the answer in seconds; a fault is told to the bot, which is stopped."""
        start = trio.current_time()
        try:
            conn = self.conn if self.conn is not None else await self._ensure()
            try:
                await conn.send_line(req.line or protocol.encode(req.message))
                reply = protocol.read_reply(await conn.receive_line(req.timeout), req.id, req.n_actions)
            except BaseException as e:
                if isinstance(e, (trio.Cancelled, KeyboardInterrupt)):  # Ctrl-C is never the bot's fault
                    raise
                raise as_fault(e) from None
        except BotFault as fault:
            seconds = trio.current_time() - start
            await self.fault(fault.reason, fault.message, req.id)
            return faulted(self, fault, seconds)
        return answered(self, reply, trio.current_time() - start)

    async def finish(self, message: dict[str, Any]) -> None:
        if self.conn is None:
            return
        try:
            await self.conn.send_line(protocol.encode(message))
        except BaseException as e:
            if isinstance(e, (trio.Cancelled, KeyboardInterrupt)):  # Ctrl-C is never the bot's fault
                raise
            await self.close()

    async def fault(self, reason: str, message: str, request_id: int | None) -> None:
        """Tell the bot what went wrong if it can still hear, then stop it: it restarts next game."""
        if self.conn is not None:
            with trio.move_on_after(0.2):
                try:
                    await self.conn.send_line(protocol.encode(protocol.error(reason, message, request_id)))
                except Exception:
                    pass
        await self.close()

    async def close(self, graceful: bool = False) -> None:
        conn = self._detach()
        if conn is not None:
            with trio.CancelScope(shield=True):
                close_gracefully = getattr(conn, "close_gracefully", None)
                await (close_gracefully() if graceful and close_gracefully else conn.aclose())
            self._keep_stderr(conn)

    async def shutdown(self) -> None:
        self.hold(False)  # it may be frozen off its turn: it needs the CPU to exit by itself
        if self.conn is not None:
            with trio.move_on_after(0.5):
                try:
                    await self.conn.send_line(protocol.encode(protocol.shutdown()))
                except Exception:
                    pass
        await self.close(graceful=True)  # a grace period to exit by itself (arena.bots.process.SHUTDOWN_GRACE)


async def outcome(player: Player, req: Request) -> Outcome:
    """Ask ``player`` for ``req``: a bot seat decides it itself (:meth:`BotPlayer.outcome`); a
    person (or any other :class:`Player`) is timed here, and a fault is told to it."""
    if isinstance(player, BotPlayer):
        return await player.outcome(req)
    start = trio.current_time()
    try:
        choice = await player.decide(req.message, req.timeout)
    except BotFault as fault:
        seconds = trio.current_time() - start
        await player.fault(fault.reason, fault.message, req.id)
        return faulted(player, fault, seconds)
    return answered(player, (choice, None), trio.current_time() - start)


async def run_game(players: Sequence[Player], rules: Rules, seed: int, *, game_id: str,
                   clock: TimeControl = TimeControl(), max_turns: int = 2000,
                   ask_forced: bool = False, stderr_lines_per_step: int = 20,
                   on_event: Callable[[State, dict[str, Any]], None] | None = None,
                   fixed_schedule: bool = False, ponder: bool = False, given: Sequence[int] = ()) -> GameRecord:
    """Play one game to its end and return its record. Bot faults become forfeits.

    ``given``: start mid-game, at a deal suite's position: these action indexes are played first,
    for the seats, without asking (:class:`arena.referee.core.RefereeCore`).

    ``fixed_schedule``: every decision takes one slot of ``clock.move_ms``: the next request is sent
    only when the slot is over, and there is no bank (the game's clock has ``bank_ms`` 0, so the
    requests say so): a bot answers within its move time or forfeits. How long a bot thought then
    changes nothing another seat can time, so think time carries no message between seats. (With
    a bank, a bot 1 ms over its move time would shift the schedule by a whole slot for 1 ms of
    bank: a bit per decision almost for free.)"""
    clock = game_clock(clock, fixed_schedule)
    t0 = time.perf_counter()
    core = RefereeCore(rules, [p.name for p in players], seed, game_id=game_id, clock=clock,
                       max_turns=max_turns, ask_forced=ask_forced,
                       stderr_lines_per_step=stderr_lines_per_step, on_event=on_event, given=given)

    start_faults: list[tuple[int, BotFault]] = []
    arena_failures: list[ArenaFailure] = []

    async def begin(seat: int) -> None:
        try:
            await players[seat].begin(core.start_message(seat))
        except BotFault as fault:
            start_faults.append((seat, fault))
        except ArenaFailure as e:
            arena_failures.append(e)

    async with trio.open_nursery() as nursery:  # slow starters (JVMs) start side by side
        for seat in range(len(players)):
            nursery.start_soon(begin, seat)
    if arena_failures:  # no game: every seat's process stops (it was sent a start that leads nowhere)
        for p in players:
            await p.close()
        raise arena_failures[0]
    for seat, fault in sorted(start_faults, key=lambda x: x[0]):
        await players[seat].fault(fault.reason, fault.message, None)
        # no step logs a start fault: keep what the bot said on stderr (say, a traceback) here
        core.start_fault(seat, fault.reason, fault.message, players[seat].take_stderr())
    if not ponder:
        for p in players:
            hold(p, True)

    while (req := core.next_request()) is not None:
        player = players[req.seat]
        if not ponder:
            hold(player, False)  # before its clock starts
        start = trio.current_time()
        core.settle(await outcome(player, req))
        if not ponder:
            hold(player, True)
        if fixed_schedule:
            await trio.sleep_until(slot_end(start, trio.current_time(), clock.move_s))

    rec = core.record
    for seat, message in core.end_messages():
        await players[seat].finish(message)
    rec.wall_ms = round((time.perf_counter() - t0) * 1000, 3)
    return rec
