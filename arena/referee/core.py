"""The referee's conversation with the seats of one game, without I/O, trio or clocks.

:class:`RefereeCore` knows the rules of the conversation: what each seat is sent
(``start``, then a ``request`` carrying the events it has not seen yet, its view,
the legal actions and its clock, then ``end``), which moves are forced and asked of
no one, how an answer draws down the seat's time bank, and how a fault becomes a
forfeit. It is told what happened (an answer and how long it took, or a fault) and
writes the :class:`GameRecord`. Whoever moves the bytes drives it: the referee's loop
(:mod:`arena.referee.blocking`), the in-process matches of the search bots
(:mod:`arena.ai.match`), the replay that rebuilds what a seat was sent
(:mod:`arena.replay.simulate`) and the tests. So they cannot disagree.
"""

from __future__ import annotations

import bisect
import hashlib
import hmac
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..engine import Rules, State, apply_action, forfeit, legal_actions, start_game
from ..engine.model import Action
from ..engine.views import action_json, decision_name, event_for, events_seen, line_json, result_json, reveal, seat_view
from ..faults import FaultReason
from . import protocol



# Upper bounds (ms) of the think-time histogram kept per seat: fixed, so histograms of
# many games add up, and a percentile over all of a bot's decisions is a bucket bound.
THINK_BUCKETS_MS: tuple[float, ...] = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 30_000,
                                       float("inf"))
_BUCKET_BOUNDS = tuple(map(float, THINK_BUCKETS_MS))
"""The same bounds as floats, for the bisect of every decision's time: a float compared with an int
costs CPython several times a float compared with a float (about 650 instructions a decision)."""



@dataclass(frozen=True)
class TimeControl:
    """Per-decision limit plus a bank drawn on when a decision runs over (like Kaggle's overage)."""

    move_ms: int = 1000
    bank_ms: int = 10_000
    handshake_ms: int = 10_000  # generous: JVMs and heavy imports start slowly

    def as_json(self) -> dict[str, int]:
        return {"move_ms": self.move_ms, "bank_ms": self.bank_ms, "handshake_ms": self.handshake_ms}

    # The files and the protocol speak milliseconds; the referee measures and waits in seconds.
    # These are the one place a clock's milliseconds become seconds.
    @property
    def move_s(self) -> float:
        return self.move_ms / 1000

    @property
    def bank_s(self) -> float:
        return self.bank_ms / 1000

    @property
    def handshake_s(self) -> float:
        return self.handshake_ms / 1000


@dataclass
class GameRecord:
    """Everything needed to store, score and replay a game. Requests are not stored:
    they are rebuilt exactly from the deal and the actions (see :mod:`arena.replay`).

    Per seat: ``decisions`` answered requests, ``think_ms`` their total time, and
    ``think_hist`` their count per :data:`THINK_BUCKETS_MS` bucket (mean = think_ms /
    decisions; a percentile comes from the summed histograms, see :func:`think_percentile`).
    """

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
    think_hist: list[list[int]] = field(default_factory=list)
    stderr: list[list[str]] = field(default_factory=list)
    wall_ms: float = 0.0
    given: list[int] = field(default_factory=list)  # a suite position's opening moves (see RefereeCore)

    def as_json(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__}
        if not self.given:  # a game from the deal (nearly all): its record is as it always was
            del out["given"]
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> GameRecord:
        """A record from :meth:`as_json`'s output, or from a summary of it (keys it lacks keep
        their defaults; keys it does not know, such as a summary's ``turns``, are ignored)."""
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


def think_percentile(hist: Sequence[int], q: float) -> float | None:
    """The bucket bound (ms) below which a fraction ``q`` of the decisions in ``hist`` fell
    (``None`` without decisions): ``think_percentile(h, 0.95)`` is a p95 to within one bucket."""
    total = sum(hist)
    if not total:
        return None
    need = q * total
    seen = 0
    for bound, count in zip(THINK_BUCKETS_MS, hist):
        seen += count
        if seen >= need:
            return bound
    return THINK_BUCKETS_MS[len(hist) - 1]




def bot_seed(deal_seed: int, seat: int) -> int:
    """The seed a seat's bot is given in ``start``: HMAC-SHA256 of the seat, keyed by the deal seed,
    cut to 31 bits. Without the deal seed it says nothing about the deal or the other seats' seeds
    (earlier versions sent ``(deal_seed * 1_000_003 + seat) % 2**31``, which inverts to the deal).
    It hides the deal only as well as the deal seed itself is secret: a guessable deal seed can be
    found by trying candidates, so tournaments derive deal seeds from a secret (arena/tournament/seeds.py)."""
    key = str(int(deal_seed)).encode()
    digest = hmac.new(key, f"palace-bot-seed:{int(seat)}".encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFF_FFFF


class Request:
    """A decision a seat is asked for: its line (UTF-8 bytes without the newline, encoded once and
    written as they are; empty where the core was told not to encode, for in-process agents), the
    message, and how long the seat has.

    A core that encodes builds the line alone, and the message is read back from it the first
    time someone asks (a person's seat, a test): a bot's seat needs only the line, and the
    message read from the line cannot differ from what the bot was sent."""

    __slots__ = ("seat", "id", "_message", "line", "timeout", "n_actions")

    def __init__(self, seat: int, id: int, message: dict[str, Any] | None, line: bytes, timeout: float,
                 n_actions: int) -> None:
        if message is None and not line:
            raise ValueError("a request needs its message or its line")
        self.seat = seat
        self.id = id
        self._message = message
        self.line = line
        self.timeout = timeout  # seconds: the move time plus what is left of the seat's bank
        self.n_actions = n_actions

    @property
    def message(self) -> dict[str, Any]:
        if self._message is None:
            self._message = orjson.loads(self.line)
        return self._message

    def __repr__(self) -> str:
        return f"Request(seat={self.seat}, id={self.id}, n_actions={self.n_actions}, timeout={self.timeout})"


@dataclass(slots=True)
class Answered:
    """How a decision ended: the seat chose ``choice`` after ``seconds``. (Not frozen,
    like :class:`Faulted`: one is built per decision, and a frozen one's ``__init__`` cost the
    blocking referee four times as much.)"""

    choice: int
    seconds: float
    stderr: list[str] = field(default_factory=list)
    note: dict[str, Any] | None = None  # what the bot said it was thinking (its reply's info)


@dataclass(slots=True)
class Faulted:
    """How a decision ended: the seat faulted, for ``reason``."""

    reason: FaultReason
    message: str
    seconds: float
    stderr: list[str] = field(default_factory=list)


Outcome = Answered | Faulted


class RefereeCore:
    """One game's conversation. Call :meth:`start_message` per seat, :meth:`start_fault` for seats
    that failed to start, then loop: :meth:`next_request`, and :meth:`answer` or :meth:`fault`;
    when ``next_request`` returns None the game is over and :meth:`end_messages` says goodbye."""

    def __init__(self, rules: Rules, names: Sequence[str], seed: int, *, game_id: str,
                 clock: TimeControl = TimeControl(), max_turns: int = 2000, ask_forced: bool = False,
                 stderr_lines_per_step: int = 20, encode: bool = True,
                 on_event: Callable[[State, dict[str, Any]], None] | None = None,
                 given: Sequence[int] = ()) -> None:
        """``given``: a mid-game start (a deal suite's position): the first steps take these
        action indexes without asking anyone, and the record keeps them (``given`` steps), so the
        game replays from its seed like any other. The bots' first requests carry the events."""
        n = len(names)
        self.rules = rules
        self.game_id = game_id
        self.clock = clock
        self.ask_forced = ask_forced
        self.stderr_lines = stderr_lines_per_step
        self.on_event = on_event
        self.encode = encode
        self.seed = seed
        self.state, events = start_game(rules, n, seed, max_turns=max_turns)
        self.given = tuple(int(i) for i in given)
        self.record = GameRecord(game_id, rules.options(), seed, list(names), max_turns,
                                 clock=clock.as_json(), setup_events=[event_for(e, None) for e in events],
                                 think_ms=[0.0] * n, decisions=[0] * n,
                                 think_hist=[[0] * len(THINK_BUCKETS_MS) for _ in range(n)],
                                 stderr=[[] for _ in range(n)], given=list(self.given))
        self.pending: list[list[dict[str, Any]]] = [[event_for(e, s) for e in events] for s in range(n)]
        self.bank = [clock.bank_s] * n
        self.faulted: set[int] = set()
        self.request_id = 0
        # the request waiting for its answer: the turn, seat, phase and id its step begins with, the actions
        self._asked: tuple[int, int, str, int, tuple[Action, ...]] | None = None
        self._clock_json = clock.as_json()
        self._move_s = clock.move_s
        self._game_json = b',"game":' + orjson.dumps(game_id) + b',"decision":'  # what follows a request's id
        # per seat: (bank, its clock as sent, encoded), kept until the bank moves
        self._clocks: list[tuple[float, dict[str, int], bytes]] = [(-1.0, {}, b"")] * n

    @property
    def players(self) -> int:
        return len(self.record.players)

    @property
    def over(self) -> bool:
        return self.state.result is not None

    # ------------------------------------------------------------ before play

    def start_message(self, seat: int) -> dict[str, Any]:
        rec = self.record
        return protocol.start(self.game_id, seat, self.players, rec.players, rec.rules, self._clock_json,
                              bot_seed(self.seed, seat))

    def start_fault(self, seat: int, reason: FaultReason, message: str, stderr: Iterable[str] = ()) -> None:
        """A seat that could not start (or greet) is out before the first request; no step logs it."""
        self.forfeit(seat, reason, message)
        self.record.stderr[seat] += list(stderr)[-self.stderr_lines:]

    def forfeit(self, seat: int, reason: FaultReason, message: str = "") -> list[dict[str, Any]]:
        """Remove ``seat`` now, outside any request (start faults; simulations). Returns the events."""
        self._note_fault(seat, reason, message)
        self.state, evs = forfeit(self.state, seat, reason)
        return self._deliver(evs)

    # ------------------------------------------------------------ play

    def next_request(self) -> Request | None:
        """Apply forced moves (one legal action, not asked unless ``ask_forced``) up to the next
        decision someone must make, and return it; None once the game is over."""
        if self._asked is not None:
            raise RuntimeError("the last request has not been answered")
        steps = self.record.steps
        while self.state.result is None:
            state = self.state
            seat = state.to_move
            actions = legal_actions(state)
            k = len(steps)
            if k < len(self.given):  # the position's opening: played for the seats, none asked
                i = self.given[k]
                if not 0 <= i < len(actions):
                    raise ValueError(f"given move {k + 1} is action {i}; there are {len(actions)}")
                self.state, evs = apply_action(state, actions[i], check=False)
                steps.append({"turn": state.turn, "seat": seat, "phase": state.phase, "given": True, "action": i,
                              "ms": 0.0, "act": action_json(actions[i]), "events": self._deliver(evs)})
                continue
            if len(actions) == 1 and not self.ask_forced:
                self.state, evs = apply_action(state, actions[0], check=False)
                steps.append({"turn": state.turn, "seat": seat, "phase": state.phase, "forced": True, "action": 0,
                              "ms": 0.0, "act": action_json(actions[0]), "events": self._deliver(evs)})
                continue
            self.request_id = rid = self.request_id + 1
            bank = self.bank[seat]
            sent = self._clocks[seat]
            if sent[0] != bank:  # the bank was drawn on since the seat's last request
                sent_clock = {"move_ms": self.clock.move_ms, "bank_ms": int(bank * 1000)}
                sent = self._clocks[seat] = (bank, sent_clock, orjson.dumps(sent_clock))
            events, self.pending[seat] = self.pending[seat], []  # handed over: later events start anew
            self._asked = (state.turn, seat, state.phase, rid, actions)
            timeout = self._move_s + bank
            if self.encode:  # the line alone: protocol.request's message as orjson writes it (same keys,
                # same order), joined from its encoded parts (tests/test_referee_core_lines.py holds the two together)
                line = line_json((b'{"type":"request","id":', str(rid).encode(), self._game_json,
                                  orjson.dumps(decision_name(state)), b',"view":'), state, seat,
                                 (b',"events":', orjson.dumps(events), b',"actions":'), actions,
                                 (b',"clock":', sent[2], b"}"))
                return Request(seat, rid, None, line, timeout, len(actions))
            msg = protocol.request(rid, self.game_id, decision_name(state), seat_view(state, seat), events,
                                   list(map(action_json, actions)), dict(sent[1]))
            return Request(seat, rid, msg, b"", timeout, len(actions))
        return None

    def answer(self, choice: int, seconds: float, stderr: Sequence[str] = (), note: dict[str, Any] | None = None) -> None:
        """The seat asked chose action ``choice`` after ``seconds``. The record keeps it in
        milliseconds to 3 places, and the bank is drawn by that recorded time, so a replay that
        feeds the logged time back rebuilds the same bank. ``choice`` must be in range: the protocol checked it.
        ``note``: what the bot said it was thinking, checked (:func:`protocol.check_info`): its
        ``info`` and ``info_warning`` are kept with the step."""
        asked = self._asked
        if asked is not None and not 0 <= choice < len(asked[4]):
            raise ValueError(f"action {choice} is not one of the {len(asked[4])} offered")
        turn, seat, phase, rid, actions = self._take()
        ms = round(seconds * 1000, 3)
        over = ms / 1000 - self._move_s
        if over > 0:
            self.bank[seat] = max(0.0, self.bank[seat] - over)
        rec = self.record
        rec.think_ms[seat] += ms
        rec.decisions[seat] += 1
        rec.think_hist[seat][bisect.bisect_left(_BUCKET_BOUNDS, ms)] += 1
        action = actions[choice]
        self.state, evs = apply_action(self.state, action, check=False)
        step = {"turn": turn, "seat": seat, "phase": phase, "request": rid, "action": choice, "ms": ms,
                "act": action_json(action), "events": self._deliver(evs)}  # one dict, its keys in the record's order
        if note:
            step.update(note)
        if stderr:
            lines = list(stderr)[-self.stderr_lines:]
            step["stderr"] = lines
            rec.stderr[seat] += lines
        rec.steps.append(step)

    def fault(self, reason: FaultReason, message: str, seconds: float, stderr: Sequence[str] = ()) -> None:
        """The seat asked faulted instead of answering after ``seconds`` (what it wrote while dying is ``stderr``)."""
        turn, seat, phase, rid, _ = self._take()
        self._note_fault(seat, reason, message)
        self.state, evs = forfeit(self.state, seat, str(reason))
        self.record.steps.append({"turn": turn, "seat": seat, "phase": phase, "request": rid,
                                  "ms": round(seconds * 1000, 3), "fault": str(reason),
                                  "stderr": list(stderr)[-self.stderr_lines:], "events": self._deliver(evs)})

    def fault_off_turn(self, seat: int, reason: FaultReason, message: str, stderr: Sequence[str] = ()) -> None:
        """While the request waiting for its answer was another seat's, ``seat`` (frozen off its turn)
        faulted, and the seat asked was held up by it: the request is void (its id spent) and
        ``seat`` forfeits; the step says so with ``off_turn``. The seat asked is asked again."""
        turn, _, phase, rid, _ = self._take()
        self._note_fault(seat, reason, message)
        self.state, evs = forfeit(self.state, seat, str(reason))
        self.record.steps.append({"turn": turn, "seat": seat, "phase": phase, "request": rid, "off_turn": True,
                                  "ms": 0.0, "fault": str(reason), "stderr": list(stderr)[-self.stderr_lines:],
                                  "events": self._deliver(evs)})

    def settle(self, outcome: Outcome) -> None:
        """The one step that ends every decision, whoever moved the bytes (the referee's loop, the
        environments, the in-process matches): an answer or a fault."""
        if isinstance(outcome, Faulted):
            self.fault(outcome.reason, outcome.message, outcome.seconds, outcome.stderr)
        else:
            self.answer(outcome.choice, outcome.seconds, outcome.stderr, outcome.note)

    def end_messages(self) -> list[tuple[int, dict[str, Any]]]:
        """The game is over: (seat, ``end``) for every seat still at the table. Fills the result."""
        state = self.state
        assert state.result is not None, "the game is not over"
        rec = self.record
        rec.result = result_json(state.result)
        rec.result["forfeits"] = {str(f["seat"]): f["reason"] for f in rec.faults}
        final = reveal(state)
        return [(seat, protocol.end(self.game_id, rec.result, final, self.pending[seat]))
                for seat in range(self.players) if seat not in self.faulted]

    # ------------------------------------------------------------ inside

    def _take(self) -> tuple[int, int, str, int, tuple[Action, ...]]:
        asked = self._asked
        if asked is None:
            raise RuntimeError("no request is waiting for an answer")
        self._asked = None
        return asked

    def _note_fault(self, seat: int, reason: FaultReason, message: str) -> None:
        self.faulted.add(seat)
        self.record.faults.append({"seat": seat, "bot": self.record.players[seat], "reason": str(reason),
                                   "message": message[:500], "turn": self.state.turn})

    def _deliver(self, evs: Sequence[Any]) -> list[dict[str, Any]]:  # engine events (a union)
        """Queue each seat's view of ``evs`` for its next request; return the omniscient rendering.

        Public events are rendered once and the same dict is shared by every seat and the log."""
        omni, each = events_seen(evs, len(self.pending))
        if each is None:
            for queue in self.pending:
                queue.extend(omni)
        else:
            for queue, seen in zip(self.pending, each):
                queue.extend(seen)
        if self.on_event is not None:
            for o in omni:
                self.on_event(self.state, o)
        return omni
