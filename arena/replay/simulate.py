"""Re-simulation of a logged game: every state again, checked against the log.

A :class:`arena.referee.GameRecord` stores the deal (rules, seed, seats,
max_turns), each step's action index and its JSON, the omniscient events and
the result. Nothing else is needed to rebuild the game: :func:`simulate` deals
again, applies each step (a forfeit step through :func:`arena.engine.forfeit`),
and compares what the engine produces with what was logged. Every difference
becomes a :class:`Mismatch` naming the step: a tampered or corrupted log, or an
engine change that alters old games.

:func:`requests_for` rebuilds, byte for byte, the requests a seat was sent,
following :func:`arena.referee.run_game`: the seat's censored events pending
since its last request, its view, the legal actions, and its clock with the
time bank drawn down from the logged ``ms`` of its earlier decisions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .. import protocol
from ..engine import Rules, RulesError, State, apply_action, forfeit, legal_actions, start_game
from ..engine.model import Action, Event
from ..engine.views import action_json, event_for, result_json, seat_view
from ..referee import TimeControl, decision_name, reveal


class ReplayError(ValueError):
    """A game that cannot be found, read or re-simulated at all."""


@dataclass(frozen=True)
class Mismatch:
    """One difference between the re-simulation and the log.

    ``step`` is the 1-based step number (0 for the deal, ``None`` for the game as a whole).
    """

    step: int | None
    what: str
    expected: Any
    stored: Any
    note: str = ""

    def __str__(self) -> str:
        where = "game" if self.step is None else ("deal" if self.step == 0 else f"step {self.step}")
        text = f"{where}: {self.what}: expected {_short(self.expected)}, log has {_short(self.stored)}"
        return text + (f" ({self.note})" if self.note else "")

    def as_json(self) -> dict[str, Any]:
        return {"step": self.step, "what": self.what, "expected": self.expected, "stored": self.stored,
                "note": self.note, "text": str(self)}


def _short(value: Any, limit: int = 300) -> str:
    import json
    try:
        text = json.dumps(value, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


@dataclass
class Frame:
    """The game after ``index`` steps (0: after the deal and any forfeits at the start).

    ``before`` is the state at the decision (None for frame 0); ``events`` are the
    engine's events of this step, ``logged_events`` what the log says.
    """

    index: int
    state: State
    before: State | None = None
    step: dict[str, Any] | None = None
    actions: tuple[Action, ...] = ()
    action: Action | None = None
    raw_events: list[Event] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    logged_events: list[dict[str, Any]] = field(default_factory=list)

    @property
    def seat(self) -> int | None:
        return None if self.before is None else self.before.to_move

    @property
    def kinds(self) -> set[str]:
        return {e["kind"] for e in self.events}


@dataclass
class Replay:
    """A re-simulated game: its frames, and how it compares with its log."""

    record: dict[str, Any]
    rules: Rules
    clock: TimeControl
    clock_assumed: bool
    frames: list[Frame]
    mismatches: list[Mismatch]
    complete: bool  # the re-simulation applied every logged step
    start_forfeits: list[dict[str, Any]] = field(default_factory=list)
    start_events: list[Event] = field(default_factory=list)  # the deal's events, engine objects
    result: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return not self.mismatches

    @property
    def game_id(self) -> str:
        return str(self.record.get("game_id", "?"))

    @property
    def players(self) -> list[str]:
        return list(self.record.get("players", []))

    @property
    def steps(self) -> int:
        return len(self.frames) - 1

    @property
    def final(self) -> State:
        return self.frames[-1].state


def clock_of(record: dict[str, Any]) -> tuple[TimeControl, bool]:
    """The game's time control, and whether it had to be assumed (logs from before it was stored)."""
    c = record.get("clock") or {}
    default = TimeControl()
    try:
        clock = TimeControl(int(c.get("move_ms", default.move_ms)), int(c.get("bank_ms", default.bank_ms)),
                            int(c.get("handshake_ms", default.handshake_ms)))
    except (TypeError, ValueError):
        return default, True
    return clock, not {"move_ms", "bank_ms"} <= set(c)


def _rules_of(record: dict[str, Any]) -> Rules:
    try:
        return Rules.from_options(dict(record["rules"]))
    except KeyError:
        raise ReplayError("the log has no rules") from None
    except (RulesError, TypeError, ValueError) as e:
        raise ReplayError(f"the log's rules cannot be loaded: {e}") from None


def simulate(record: dict[str, Any]) -> Replay:
    """Rebuild every state of a logged game and compare it with the log."""
    if not isinstance(record, dict):
        raise ReplayError("a game log must be a JSON object")
    for key in ("seed", "players", "steps"):
        if key not in record:
            raise ReplayError(f"the log has no {key!r}: is this a game record?")
    rules = _rules_of(record)
    players = record["players"]
    n = len(players)
    try:
        state, deal_events = start_game(rules, n, int(record["seed"]),
                                        max_turns=int(record.get("max_turns", 2000)))
    except (RulesError, TypeError, ValueError) as e:
        raise ReplayError(f"cannot deal this game again: {e}") from None
    clock, assumed = clock_of(record)
    mism: list[Mismatch] = []
    setup_json = [event_for(e, None) for e in deal_events]
    _compare_events(mism, 0, setup_json, list(record.get("setup_events", [])))

    steps = list(record["steps"])
    faults = list(record.get("faults", []))
    fault_steps = [s for s in steps if isinstance(s, dict) and "fault" in s]
    n_start = len(faults) - len(fault_steps)
    start_forfeits = faults[:max(0, n_start)]
    if n_start < 0:
        mism.append(Mismatch(None, "faults", len(fault_steps), len(faults),
                             "fewer faults listed than forfeit steps"))
    frame0_raw: list[Event] = list(deal_events)
    for f in start_forfeits:  # bots that failed to start are dropped before the first step
        try:
            state, evs = forfeit(state, int(f["seat"]), str(f["reason"]))
        except (KeyError, TypeError, ValueError, IndexError) as e:
            mism.append(Mismatch(0, "fault", "a seat and a reason", f, f"unusable fault entry: {e}"))
            continue
        frame0_raw += evs
    frames = [Frame(0, state, raw_events=frame0_raw, events=[event_for(e, None) for e in frame0_raw],
                    logged_events=list(record.get("setup_events", [])))]
    fault_iter = iter(faults[max(0, n_start):])
    request_id = 0
    decisions = [0] * n
    complete = True
    for k, step in enumerate(steps, 1):
        if not isinstance(step, dict):
            mism.append(Mismatch(k, "step", "a JSON object", step))
            complete = False
            break
        if state.result is not None:
            mism.append(Mismatch(k, "step", "no step: the game was over", step.get("act", step.get("fault"))))
            complete = False
            break
        before = state
        seat = state.to_move
        for key, want in (("seat", seat), ("turn", state.turn), ("phase", state.phase)):
            if step.get(key) != want:
                mism.append(Mismatch(k, key, want, step.get(key)))
        actions = legal_actions(state)
        asked = not step.get("forced")
        if asked:
            request_id += 1
            if step.get("request") != request_id:
                mism.append(Mismatch(k, "request", request_id, step.get("request")))
        elif len(actions) != 1:
            mism.append(Mismatch(k, "forced", "a single legal action", len(actions),
                                 "a forced step must have had no choice"))
        action: Action | None = None
        if "fault" in step:
            f = next(fault_iter, None)
            want_f = {"seat": seat, "reason": step["fault"], "turn": state.turn}
            if f is None or {key: f.get(key) for key in want_f} != want_f:
                mism.append(Mismatch(k, "fault", want_f, f and {key: f.get(key) for key in want_f}))
            state, evs = forfeit(state, seat, str(step["fault"]))
        else:
            action = _choose(mism, k, step, actions)
            if action is None:
                complete = False
                break
            if asked:
                decisions[seat] += 1
            state, evs = apply_action(state, action, check=False)
        events = [event_for(e, None) for e in evs]
        logged = step.get("events")
        _compare_events(mism, k, events, logged if isinstance(logged, list) else [])
        frames.append(Frame(k, state, before, step, actions, action, list(evs), events,
                            logged if isinstance(logged, list) else []))
    result = None
    if complete:
        if state.result is None:
            mism.append(Mismatch(None, "end", "more steps: the game is not over", "the log ends here"))
        else:
            result = result_json(state.result)
            result["forfeits"] = {str(f.get("seat")): f.get("reason") for f in faults}
            if result != record.get("result"):
                mism.append(Mismatch(None, "result", result, record.get("result")))
            logged_dec = record.get("decisions")
            if isinstance(logged_dec, list) and logged_dec != decisions:
                mism.append(Mismatch(None, "decisions", decisions, logged_dec, "answered requests per seat"))
    return Replay(record, rules, clock, assumed, frames, mism, complete, start_forfeits, list(deal_events), result)


def _choose(mism: list[Mismatch], k: int, step: dict[str, Any], actions: tuple[Action, ...]) -> Action | None:
    """The action this step took. The index must be legal and its JSON equal ``act``.

    When they disagree, the action named by ``act`` (if it is legal) is taken, so one
    tampered field yields one mismatch rather than a diverging game.
    """
    idx = step.get("action")
    act = step.get("act")
    by_act = [a for a in actions if action_json(a) == act]
    if not (isinstance(idx, int) and not isinstance(idx, bool) and 0 <= idx < len(actions)):
        mism.append(Mismatch(k, "action", f"an index in 0..{len(actions) - 1}", idx))
        if by_act:
            return by_act[0]
        mism.append(Mismatch(k, "act", "one of the legal actions", act, "cannot go on: the action is unknown"))
        return None
    chosen = actions[idx]
    if action_json(chosen) != act:
        note = ""
        if by_act:
            note = f"act is legal action {actions.index(by_act[0])}; the replay follows act"
        mism.append(Mismatch(k, "act", action_json(chosen), act, note or f"follows action {idx}"))
        if by_act:
            return by_act[0]
    return chosen


def _compare_events(mism: list[Mismatch], k: int, expected: list[dict[str, Any]], stored: list[Any]) -> None:
    for j in range(max(len(expected), len(stored))):
        e = expected[j] if j < len(expected) else None
        s = stored[j] if j < len(stored) else None
        if e != s:
            what = f"event {j + 1}" if e is not None and s is not None else (
                f"event {j + 1} missing from the log" if s is None else f"event {j + 1} not produced")
            mism.append(Mismatch(k, what, e, s))


# ---------------------------------------------------------------- what a seat was sent

@dataclass
class Decision:
    """One request a seat was sent, rebuilt, and what came of it."""

    step: int  # 1-based step number in the log
    request: dict[str, Any]
    choice: int | None  # the action id answered; None when the seat faulted instead
    ms: float | None
    fault: str | None = None
    stderr: list[str] = field(default_factory=list)

    @property
    def line(self) -> str:
        """The request exactly as the referee wrote it on the bot's stdin."""
        return protocol.encode(self.request)


def _pending_start(replay: Replay) -> list[list[dict[str, Any]]]:
    n = len(replay.players)
    frame0 = replay.frames[0]
    return [[event_for(e, s) for e in frame0.raw_events] for s in range(n)]


def requests_for(replay: Replay, seat: int) -> list[Decision]:
    """Every request ``seat`` was sent, as :func:`arena.referee.run_game` built it.

    Forced steps (one legal action) sent no request. The clock's ``bank_ms`` is
    the bank drawn down by each earlier overrun, computed from the logged ``ms``
    exactly as the referee did.
    """
    n = len(replay.players)
    if not 0 <= seat < n:
        raise ReplayError(f"seat {seat} is not at this table (seats 0..{n - 1})")
    clock = replay.clock
    game_id = replay.game_id
    pending = _pending_start(replay)
    bank = [clock.bank_ms / 1000] * n
    out: list[Decision] = []
    request_id = 0
    for fr in replay.frames[1:]:
        step = fr.step or {}
        before = fr.before
        assert before is not None
        s = before.to_move
        if not step.get("forced"):
            request_id += 1
            if s == seat:
                msg = protocol.request(request_id, game_id, decision_name(before), seat_view(before, s),
                                       list(pending[s]), [action_json(a) for a in fr.actions],
                                       {"move_ms": clock.move_ms, "bank_ms": int(bank[s] * 1000)})
                choice = None if fr.action is None else fr.actions.index(fr.action)
                out.append(Decision(fr.index, msg, choice, step.get("ms"), step.get("fault"),
                                    list(step.get("stderr", []))))
            if "fault" not in step:
                ms = step.get("ms")
                ms = float(ms) if isinstance(ms, (int, float)) and not isinstance(ms, bool) else 0.0
                bank[s] = max(0.0, bank[s] - max(0.0, ms / 1000 - clock.move_ms / 1000))
                pending[s] = []
        for t in range(n):
            pending[t].extend(event_for(e, t) for e in fr.raw_events)
    return out


def start_for(replay: Replay, seat: int) -> dict[str, Any]:
    """The ``start`` message ``seat`` was sent before the game."""
    r = replay.record
    return protocol.start(replay.game_id, seat, len(replay.players), list(replay.players), dict(r["rules"]),
                          replay.clock.as_json(), (int(r["seed"]) * 1_000_003 + seat) % (1 << 31))


def end_for(replay: Replay, seat: int) -> dict[str, Any] | None:
    """The ``end`` message ``seat`` was sent, or None (it forfeited, or the log is incomplete)."""
    final = replay.final
    if replay.result is None or final.result is None or final.seats[seat].forfeit is not None:
        return None
    pending = _pending_start(replay)
    for fr in replay.frames[1:]:
        step = fr.step or {}
        if not step.get("forced") and "fault" not in step and fr.before is not None:
            pending[fr.before.to_move] = []
        for t in range(len(pending)):
            pending[t].extend(event_for(e, t) for e in fr.raw_events)
    result = result_json(final.result)
    result["forfeits"] = replay.result.get("forfeits", {})
    return protocol.end(replay.game_id, result, reveal(final), pending[seat])


def conversation_for(replay: Replay, seat: int) -> list[dict[str, Any]]:
    """``start``, every ``request`` and ``end``: the game's messages to ``seat`` (hello and errors aside)."""
    out = [start_for(replay, seat)] + [d.request for d in requests_for(replay, seat)]
    end = end_for(replay, seat)
    return out + ([end] if end is not None else [])
