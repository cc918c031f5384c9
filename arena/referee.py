"""The referee: runs one game between players, enforcing the protocol and the clock.

A :class:`Player` is a seat's occupant for a whole match: a bot process
(:class:`BotPlayer`) or a person at the terminal. The referee asks the engine
for the legal actions, sends each decision to the player to move, validates the
reply and applies it. A bot that faults (times out, crashes, breaks the
protocol) forfeits the game; the others play on. Nothing a bot sends can raise
out of :func:`run_game`.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import trio

from . import protocol
from .engine import Rules, State, apply_action, forfeit, legal_actions, start_game
from .engine.cards import cards_str
from .engine.views import action_json, event_for, result_json, seat_view
from .manifest import BotSpec

FAULT_REASONS = ("timeout", "crash", "bad_json", "schema", "illegal_action", "wrong_request",
                 "line_too_long", "bad_encoding", "handshake", "bad_version", "closed_input",
                 "closed_output", "start_failed", "cpu_limit", "memory_limit", "output_limit",
                 "bot_error")


@dataclass(frozen=True)
class TimeControl:
    """Per-decision limit plus a bank drawn on when a decision runs over (like Kaggle's overage)."""

    move_ms: int = 1000
    bank_ms: int = 10_000
    handshake_ms: int = 10_000  # generous: JVMs and heavy imports start slowly

    def as_json(self) -> dict[str, int]:
        return {"move_ms": self.move_ms, "bank_ms": self.bank_ms, "handshake_ms": self.handshake_ms}


class BotFault(Exception):
    """The bot's fault: the game is forfeited. ``reason`` is one of :data:`FAULT_REASONS`."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason
        self.message = message


class Connection(Protocol):
    """A line-based link to a bot process (see :mod:`arena.botproc`); tests script their own."""

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


def _as_fault(exc: BaseException) -> BotFault:
    if isinstance(exc, BotFault):
        return exc
    reason = getattr(exc, "reason", None)
    if reason in FAULT_REASONS:
        return BotFault(reason, str(exc) or reason)
    if isinstance(exc, protocol.ProtocolError):
        return BotFault(exc.reason, str(exc))
    return BotFault("crash", f"{type(exc).__name__}: {exc}")


class BotPlayer:
    """A bot process serving a match: started and greeted on first use, restarted after a fault."""

    def __init__(self, spec: BotSpec, launcher: Launcher, clock: TimeControl, *, restart_each_game: bool = False):
        self.spec = spec
        self.name = spec.name
        self.launcher = launcher
        self.clock = clock
        self.restart_each_game = restart_each_game
        self.conn: Connection | None = None
        self.hello: dict[str, Any] | None = None
        self.starts = 0
        self._stderr: list[str] = []

    async def _ensure(self) -> Connection:
        if self.conn is not None:
            return self.conn
        try:
            self.conn = await self.launcher(self.spec)
        except Exception as e:  # a missing command or unbuildable bot is still the bot's problem
            raise BotFault("start_failed", f"could not start {self.spec.label}: {e}") from None
        self.starts += 1
        try:
            await self.conn.send_line(protocol.encode(protocol.hello()))
            line = await self.conn.receive_line(self.clock.handshake_ms / 1000)
            self.hello = protocol.read_bot_hello(line)
        except BaseException as e:
            if isinstance(e, (trio.Cancelled, KeyboardInterrupt)):  # Ctrl-C is never the bot's fault
                raise
            fault = _as_fault(e)
            if fault.reason in ("bad_json", "schema", "timeout", "crash"):
                fault = BotFault("handshake" if fault.reason != "timeout" else "timeout",
                                 f"handshake failed: {fault.message}")
            await self.fault(fault.reason, fault.message, None)  # a live bot is told why (bad_version...)
            raise fault from None
        return self.conn

    async def _send(self, message: dict[str, Any]) -> None:
        conn = await self._ensure()
        try:
            await conn.send_line(protocol.encode(message))
        except BaseException as e:
            if isinstance(e, (trio.Cancelled, KeyboardInterrupt)):  # Ctrl-C is never the bot's fault
                raise
            raise _as_fault(e) from None

    async def begin(self, message: dict[str, Any]) -> None:
        if self.restart_each_game or self._cpu_spent():
            await self.close()
        await self._send(message)

    def _cpu_spent(self) -> bool:
        """True once the process has used half its CPU limit: a fresh process then serves the
        next game, so the limit (per process, see arena.limits) bounds one game, not a match."""
        usage = getattr(self.conn, "resource_usage", None)
        limits = getattr(self.conn, "limits", None)
        if not callable(usage) or limits is None:
            return False
        spent = usage().cpu_seconds
        return spent is not None and spent >= limits.cpu_seconds / 2

    async def decide(self, message: dict[str, Any], timeout: float) -> int:
        conn = self.conn if self.conn is not None else await self._ensure()
        try:
            await conn.send_line(protocol.encode(message))
            line = await conn.receive_line(timeout)
            return protocol.read_action(line, message["id"], len(message["actions"]))
        except BaseException as e:
            if isinstance(e, (trio.Cancelled, KeyboardInterrupt)):  # Ctrl-C is never the bot's fault
                raise
            raise _as_fault(e) from None

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

    def take_stderr(self) -> list[str]:
        out = self._stderr  # lines kept from a closed process are handed out once
        if out:
            self._stderr = []
        return out + self.conn.take_stderr() if self.conn is not None else out

    async def close(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            with trio.CancelScope(shield=True):
                await conn.aclose()
            self._stderr += conn.take_stderr()  # after aclose, which waits for a dying bot's last lines

    async def shutdown(self) -> None:
        if self.conn is not None:
            with trio.move_on_after(0.5):
                try:
                    await self.conn.send_line(protocol.encode(protocol.shutdown()))
                except Exception:
                    pass
        await self.close()


@dataclass
class GameRecord:
    """Everything needed to store, score and replay a game. Requests are not stored:
    they are rebuilt exactly from the deal and the actions (see :mod:`arena.replay`)."""

    game_id: str
    rules: dict[str, Any]
    seed: int
    players: list[str]
    max_turns: int
    steps: list[dict[str, Any]] = field(default_factory=list)
    clock: dict[str, int] = field(default_factory=dict)  # TimeControl.as_json(): requests carry it
    setup_events: list[dict[str, Any]] = field(default_factory=list)
    result: dict[str, Any] | None = None
    faults: list[dict[str, Any]] = field(default_factory=list)
    think_ms: list[float] = field(default_factory=list)
    decisions: list[int] = field(default_factory=list)
    stderr: list[list[str]] = field(default_factory=list)
    wall_ms: float = 0.0

    def as_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> GameRecord:
        """A record from :meth:`as_json`'s output, or from a summary of it (keys it lacks keep
        their defaults; keys it does not know, such as a summary's ``turns``, are ignored)."""
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


@functools.lru_cache(maxsize=32)
def _options(rules: Rules) -> dict[str, Any]:
    """Rules as JSON, built once per rule set: every record of a tournament shares it (read-only)."""
    return rules.options()


def decision_name(state: State) -> str:
    if state.phase == "setup":
        return "setup"
    seat = state.seats[state.to_move]
    if seat.hand:
        return "play_hand"
    return "play_face_up" if seat.face_up else "flip_face_down"


def reveal(state: State) -> list[dict[str, Any]]:
    return [{"seat": i, "hand": cards_str(s.hand), "face_up": [cards_str(x) for x in s.face_up],
             "face_down": [None if c is None else cards_str((c,))[0] for c in s.face_down]}
            for i, s in enumerate(state.seats)]


async def run_game(players: Sequence[Player], rules: Rules, seed: int, *, game_id: str,
                   clock: TimeControl = TimeControl(), max_turns: int = 2000,
                   ask_forced: bool = False, stderr_lines_per_step: int = 20,
                   on_event: Callable[[State, dict[str, Any]], None] | None = None) -> GameRecord:
    """Play one game to its end and return its record. Bot faults become forfeits."""
    n = len(players)
    t0 = time.perf_counter()
    state, events = start_game(rules, n, seed, max_turns=max_turns)
    rec = GameRecord(game_id, _options(rules), seed, [p.name for p in players], max_turns,
                     clock=clock.as_json(), setup_events=[event_for(e, None) for e in events],
                     think_ms=[0.0] * n, decisions=[0] * n, stderr=[[] for _ in range(n)])
    pending: list[list[dict[str, Any]]] = [[event_for(e, s) for e in events] for s in range(n)]
    bank = [clock.bank_ms / 1000] * n
    faulted: set[int] = set()

    async def drop(seat: int, fault: BotFault, request_id: int | None) -> list[Any]:
        nonlocal state
        faulted.add(seat)
        rec.faults.append({"seat": seat, "bot": players[seat].name, "reason": fault.reason,
                           "message": fault.message[:500], "turn": state.turn})
        await players[seat].fault(fault.reason, fault.message, request_id)
        state, evs = forfeit(state, seat, fault.reason)
        return evs

    async def begin(seat: int) -> None:
        msg = protocol.start(game_id, seat, n, rec.players, rec.rules, clock.as_json(),
                             (seed * 1_000_003 + seat) % (1 << 31))
        try:
            await players[seat].begin(msg)
        except BotFault as fault:
            start_faults.append((seat, fault))

    start_faults: list[tuple[int, BotFault]] = []
    async with trio.open_nursery() as nursery:  # slow starters (JVMs) start side by side
        for seat in range(n):
            nursery.start_soon(begin, seat)
    for seat, fault in sorted(start_faults, key=lambda x: x[0]):
        evs = await drop(seat, fault, None)
        # no step logs a start fault: keep what the bot said on stderr (say, a traceback) here
        rec.stderr[seat] += players[seat].take_stderr()[-stderr_lines_per_step:]
        _deliver(evs, pending, on_event, state)
    request_id = 0
    while state.result is None:
        seat = state.to_move
        actions = legal_actions(state)
        step: dict[str, Any] = {"turn": state.turn, "seat": seat, "phase": state.phase}
        if len(actions) == 1 and not ask_forced:
            choice, ms = 0, 0.0
            step["forced"] = True
            offered = None
        else:
            request_id += 1
            offered = [action_json(a) for a in actions]
            msg = protocol.request(request_id, game_id, decision_name(state), seat_view(state, seat),
                                   pending[seat], offered,
                                   {"move_ms": clock.move_ms, "bank_ms": int(bank[seat] * 1000)})
            start = trio.current_time()
            try:
                choice = await players[seat].decide(msg, clock.move_ms / 1000 + bank[seat])
            except BotFault as fault:
                ms = (trio.current_time() - start) * 1000
                step.update(request=request_id, ms=round(ms, 3), fault=fault.reason)
                evs = await drop(seat, fault, request_id)
                # taken once the bot is stopped: what it wrote while dying belongs to this game
                step["stderr"] = players[seat].take_stderr()[-stderr_lines_per_step:]
                step["events"] = _deliver(evs, pending, on_event, state)
                rec.steps.append(step)
                continue
            ms = round((trio.current_time() - start) * 1000, 3)  # the logged ms: replays rebuild the bank from it
            bank[seat] = max(0.0, bank[seat] - max(0.0, ms / 1000 - clock.move_ms / 1000))
            pending[seat] = []
            rec.think_ms[seat] += ms
            rec.decisions[seat] += 1
            step["request"] = request_id
        action = actions[choice]
        state, evs = apply_action(state, action, check=False)
        step.update(action=choice, ms=round(ms, 3), act=action_json(action) if offered is None else offered[choice],
                    events=_deliver(evs, pending, on_event, state))
        lines = players[seat].take_stderr()
        if lines:
            step["stderr"] = lines[-stderr_lines_per_step:]
            rec.stderr[seat] += lines[-stderr_lines_per_step:]
        rec.steps.append(step)
    assert state.result is not None
    rec.result = result_json(state.result)
    rec.result["forfeits"] = {str(f["seat"]): f["reason"] for f in rec.faults}
    final = reveal(state)
    for seat, p in enumerate(players):
        if seat not in faulted:
            await p.finish(protocol.end(game_id, rec.result, final, pending[seat]))
    rec.wall_ms = round((time.perf_counter() - t0) * 1000, 3)
    return rec


PRIVATE_EVENTS = ("drew", "setup")  # the only events whose content depends on who sees them


def _deliver(evs: list[Any], pending: list[list[dict[str, Any]]],
             on_event: Callable[[State, dict[str, Any]], None] | None, state: State) -> list[dict[str, Any]]:
    """Queue each seat's view of ``evs`` for its next request; return the omniscient rendering.

    Public events are rendered once and the same dict is shared by every seat and the log."""
    omni = [event_for(e, None) for e in evs]
    if any(e.kind in PRIVATE_EVENTS for e in evs):
        for seat, queue in enumerate(pending):
            queue.extend([o if e.kind not in PRIVATE_EVENTS or e.seat == seat else event_for(e, seat)
                          for e, o in zip(evs, omni)])
    else:
        for queue in pending:
            queue.extend(omni)
    if on_event is not None:
        for o in omni:
            on_event(state, o)
    return omni
