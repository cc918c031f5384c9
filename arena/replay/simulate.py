"""Re-simulation of a logged game: every state again, checked against the log.

A :class:`arena.referee.GameRecord` stores the deal (rules, seed, seats,
max_turns), each step's action index and its JSON, the omniscient events and
the result. Nothing else is needed to rebuild the game: :func:`simulate` deals
again, applies each step (a forfeit step through :func:`arena.engine.forfeit`),
and compares what the engine produces with what was logged. Every difference
becomes a :class:`Mismatch` naming the step: a tampered or corrupted log, or an
engine change that alters old games.

:func:`requests_for` rebuilds, byte for byte, the requests a seat was sent, by
driving the referee's own :class:`~arena.referee.core.RefereeCore` with the
logged actions, faults and times: the seat's censored events pending since its
last request, its view, the legal actions, and its clock with the time bank
drawn down from the logged ``ms`` of its earlier decisions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..engine import Rules, RulesError, State, apply_action, forfeit, legal_actions, start_game
from ..engine.model import Action, Event
from ..engine.views import action_json, event_for, result_json
from ..errors import ArenaError
from ..faults import FAULT_REASONS, FaultReason
from ..referee import protocol
from ..referee.core import RefereeCore, Request, TimeControl


def log_fault(core: RefereeCore, step: dict[str, Any]) -> None:
    """A fault step of a log told to a core driven by it, as the referee told it: the seat asked's,
    or (``off_turn``) another seat's, which voids the request asked."""
    reason = fault_reason(step["fault"])
    if step.get("off_turn"):
        core.fault_off_turn(int(step["seat"]), reason, "")
    else:
        core.fault(reason, "", _seconds(step))


def _off_turn_seat(mism: list[Mismatch], k: int, step: dict[str, Any], state: State) -> int:
    """The seat an ``off_turn`` fault step names: one still playing, not the seat to move (whose
    request the step voids); else the seat to move, and a mismatch."""
    seat = step.get("seat")
    if type(seat) is not int or not 0 <= seat < len(state.seats) or seat == state.to_move \
            or state.seats[seat].place is not None:
        mism.append(Mismatch(k, "seat", "a seat still playing, not the one to move", seat, "an off-turn fault"))
        return state.to_move
    return seat


def fault_reason(value: Any) -> FaultReason:
    """A log's fault reason, or ReplayError for one the protocol does not know (a tampered log)."""
    if value not in FAULT_REASONS:
        raise ReplayError(f"the log's fault {value!r} is no fault reason")
    return FaultReason(value)


class ReplayError(ArenaError, ValueError):
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
        """The seat the step is of: the one to move, or the one an ``off_turn`` fault names."""
        if self.step is not None and self.step.get("off_turn") and "fault" in self.step:
            return self.step.get("seat")
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
        off_turn = bool(step.get("off_turn")) and "fault" in step  # another seat forfeited; the request asked is void
        if off_turn:
            seat = _off_turn_seat(mism, k, step, state)
        for key, want in (("seat", seat), ("turn", state.turn), ("phase", state.phase)):
            if step.get(key) != want:
                mism.append(Mismatch(k, key, want, step.get(key)))
        actions = legal_actions(state)
        given = bool(step.get("given"))  # a suite position's opening: played for the seat, not asked
        asked = not step.get("forced") and not given
        if given and step.get("action") != _given_move(record, k):
            mism.append(Mismatch(k, "given", _given_move(record, k), step.get("action"),
                                 "the opening the record names"))
        if asked:
            request_id += 1
            if step.get("request") != request_id:
                mism.append(Mismatch(k, "request", request_id, step.get("request")))
        elif not given and len(actions) != 1:
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
    info: dict[str, Any] | None = None  # what the bot said it was thinking (checked again on reading)
    info_warning: str | None = None

    @property
    def line(self) -> str:
        """The request exactly as the referee wrote it on the bot's stdin."""
        return protocol.encode(self.request)


def _given_move(record: dict[str, Any], k: int) -> int | None:
    """The ``k``-th (from 1) move of the record's given opening, or None past its end."""
    given = record.get("given") or []
    return given[k - 1] if 0 < k <= len(given) and isinstance(given, list) else None


def _seconds(step: dict[str, Any]) -> float:
    """A logged step's time (milliseconds in the record) in the referee's seconds."""
    ms = step.get("ms")
    return float(ms) / 1000 if isinstance(ms, (int, float)) and not isinstance(ms, bool) else 0.0


def _converse(replay: Replay) -> tuple[RefereeCore, list[tuple[Request, Frame, int | None]]]:
    """The referee core driven again by the log: every request it makes, with the frame that
    answered it and the action id taken (None for a fault). It stops where the log does, or
    where a tampered log leaves the game the core is playing."""
    record = replay.record
    frames = replay.frames[1:]
    ask_forced = any(not (fr.step or {}).get("forced") and len(fr.actions) == 1 for fr in frames)
    core = RefereeCore(replay.rules, replay.players, int(record["seed"]), game_id=replay.game_id,
                       clock=replay.clock, max_turns=int(record.get("max_turns", 2000)), ask_forced=ask_forced,
                       encode=False, given=record.get("given") or ())
    for f in replay.start_forfeits:
        try:
            core.start_fault(int(f["seat"]), fault_reason(f["reason"]), str(f.get("message", "")))
        except (KeyError, TypeError, ValueError, IndexError):
            continue  # simulate() reported it
    asked: list[tuple[Request, Frame, int | None]] = []
    while (req := _next_request(core)) is not None:
        k = len(core.record.steps)  # steps the core has taken: this request is the log's next one
        fr = frames[k] if k < len(frames) else None
        if fr is None or fr.before is None or fr.before.to_move != req.seat:
            break
        step = fr.step or {}
        if "fault" in step:
            if step["fault"] not in FAULT_REASONS:
                break  # no reason the protocol knows: a tampered log
            log_fault(core, step)
            asked.append((req, fr, None))
            continue
        if fr.action is None or fr.action not in fr.actions:
            break
        choice = fr.actions.index(fr.action)
        core.answer(choice, _seconds(step))
        asked.append((req, fr, choice))
    return core, asked


def _next_request(core: RefereeCore) -> Request | None:
    """The core's next request; a ReplayError where the log's ``given`` opening names an action
    its deal does not have (a tampered log: the core cannot play it, :func:`simulate` reports it)."""
    try:
        return core.next_request()
    except ValueError as e:
        raise ReplayError(f"the log's given opening cannot be played again: {e}") from None


def thought_of(step: dict[str, Any]) -> dict[str, Any]:
    """What the bot said it was thinking at this step (its ``info``), as ``thought`` and
    ``thought_warning``. Checked again here: a stored log is not trusted to hold what the
    referee let through (:func:`arena.referee.protocol.check_info`)."""
    out: dict[str, Any] = {}
    if "info" in step:
        kept = protocol.check_info(step["info"]).get("info")
        if kept:
            out["thought"] = kept
    if "info_warning" in step:
        out["thought_warning"] = str(step["info_warning"])[:300]
    return out


def _decision(req: Request, fr: Frame, choice: int | None) -> Decision:
    step = fr.step or {}
    thought = thought_of(step)
    fault = None if step.get("off_turn") else step.get("fault")  # (a void request: another seat's fault)
    return Decision(fr.index, req.message, choice, step.get("ms"), fault, list(step.get("stderr", [])),
                    thought.get("thought"), thought.get("thought_warning"))


def _check_seat(replay: Replay, seat: int) -> None:
    n = len(replay.players)
    if not 0 <= seat < n:
        raise ReplayError(f"seat {seat} is not at this table (seats 0..{n - 1})")


def requests_for(replay: Replay, seat: int) -> list[Decision]:
    """Every request ``seat`` was sent, rebuilt by the referee core from the log.

    Forced steps (one legal action) sent no request. The clock's ``bank_ms`` is
    the bank drawn down by each earlier overrun, from the logged ``ms``.
    """
    _check_seat(replay, seat)
    _, asked = _converse(replay)
    return [_decision(req, fr, choice) for req, fr, choice in asked if req.seat == seat]


def start_for(replay: Replay, seat: int) -> dict[str, Any]:
    """The ``start`` message ``seat`` was sent before the game."""
    _check_seat(replay, seat)
    return _core(replay).start_message(seat)


def _core(replay: Replay) -> RefereeCore:
    r = replay.record
    return RefereeCore(replay.rules, replay.players, int(r["seed"]), game_id=replay.game_id,
                       clock=replay.clock, max_turns=int(r.get("max_turns", 2000)))


def _end(replay: Replay, core: RefereeCore, seat: int) -> dict[str, Any] | None:
    if replay.result is None or not core.over:
        return None
    return dict(core.end_messages()).get(seat)


def end_for(replay: Replay, seat: int) -> dict[str, Any] | None:
    """The ``end`` message ``seat`` was sent, or None (it forfeited, or the log is incomplete)."""
    _check_seat(replay, seat)
    return _end(replay, _converse(replay)[0], seat)


def conversation_for(replay: Replay, seat: int) -> list[dict[str, Any]]:
    """``start``, every ``request`` and ``end``: the game's messages to ``seat`` (hello and errors aside)."""
    _check_seat(replay, seat)
    core, asked = _converse(replay)
    out = [core.start_message(seat)] + [req.message for req, _, _ in asked if req.seat == seat]
    end = _end(replay, core, seat)
    return out + ([end] if end is not None else [])
