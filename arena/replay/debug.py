"""``arena debug``: feed one seat's recorded requests to another build of its bot, one by one,
and stop at the first decision where it chooses differently from the record.

The requests are rebuilt exactly as the referee wrote them (:func:`requests_for`), after the
``start`` the seat was sent, so a bot that seeds its randomness from ``start.seed`` makes the
same choices again. The bot is started like any bot (contained by the launcher), on the
recorded time control. ``start`` (a decision number, 1-based) skips the earlier requests: the
bot then gets ``start`` and the requests from there on, each with its full view but only the
events since the seat's previous request.

``opponents`` (``--continue``) then plays the game out live from the divergence: the referee core
is driven by the log up to that decision, the new build's answer is applied, and every later
request goes to the new build or to a fresh process of the recorded opponent's bot (which gets
``start`` and then its requests from there on, like ``--from``).

Every bot here runs on the blocking shell (the one referee worker processes use), with no event
loop: ``launcher`` is a :class:`~arena.bots.launch.Launcher`, wrapped once in a
:class:`~arena.referee.blocking.BlockingLaunch`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..bots.manifest import BotSpec
from ..faults import BotFault, FaultReason
from ..referee import protocol
from ..referee.core import Answered, GameRecord, RefereeCore, Request
from ..referee.blocking import BlockingLaunch, BlockingPlayer, settle
from .simulate import Decision, Replay, ReplayError, _seconds, fault_reason, log_fault, requests_for, start_for


@dataclass
class Divergence:
    """The first decision where the new build did not do what the record says."""

    number: int  # 1-based among the seat's decisions
    recorded: Decision
    choice: int | None  # the new build's action id; None when it faulted
    seconds: float | None = None  # how long the new build took
    fault: tuple[FaultReason, str] | None = None  # (reason, message) when the new build faulted
    info: dict[str, Any] | None = None  # what the new build said it was thinking
    info_warning: str | None = None

    @property
    def ms(self) -> float | None:
        """The new build's time as the record and the terminal show it."""
        return None if self.seconds is None else round(self.seconds * 1000, 3)

    def as_json(self) -> dict[str, Any]:
        req = self.recorded.request
        return {"decision": self.number, "step": self.recorded.step, "request": req["id"],
                "recorded": {"action": self.recorded.choice, "fault": self.recorded.fault},
                "new": {"action": self.choice, "ms": self.ms,
                        "fault": None if self.fault is None else {"reason": self.fault[0], "message": self.fault[1]},
                        "info": self.info, "info_warning": self.info_warning}}


@dataclass
class DebugResult:
    seat: int
    decisions: int  # the seat's decisions in the record
    first: int  # the decision fed first (1-based)
    agreed: int = 0  # decisions answered as recorded before the divergence (or all of them)
    divergence: Divergence | None = None
    stderr: list[str] = field(default_factory=list)  # what the new build wrote, up to the divergence
    live: GameRecord | None = None  # with opponents: the game played out from the divergence

    @property
    def diverged(self) -> bool:
        return self.divergence is not None


def debug_seat(replay: Replay, seat: int, spec: BotSpec, launcher: Callable, *, start: int = 1,
                     on_agree: Callable[[int, Decision], None] | None = None,
                     opponents: dict[int, BotSpec] | None = None) -> DebugResult:
    """Feed ``seat``'s recorded requests from decision ``start`` on to the bot ``spec`` started by
    ``launcher``; stop at the first different choice (or fault). With ``opponents`` (a bot for
    every other seat), play the game out live from there (:attr:`DebugResult.live`)."""
    decisions = requests_for(replay, seat)
    if not decisions:
        raise ReplayError(f"seat {seat} was never asked in {replay.game_id}: every move it made was forced")
    if not 1 <= start <= len(decisions):
        raise ReplayError(f"--from {start}: seat {seat} made decisions 1..{len(decisions)} in {replay.game_id}")
    result = DebugResult(seat, len(decisions), start)
    launch = launcher if isinstance(launcher, BlockingLaunch) else BlockingLaunch(launcher)
    player = BlockingPlayer(spec, launch, replay.clock)
    try:
        try:
            player.begin(start_for(replay, seat))
        except BotFault as f:
            result.divergence = Divergence(start, decisions[start - 1], None, fault=(f.reason, str(f)))
            return result
        for number in range(start, len(decisions) + 1):
            recorded = decisions[number - 1]
            req = recorded.request
            timeout = (req["clock"]["move_ms"] + req["clock"]["bank_ms"]) / 1000  # the request's own clock
            got = player.decide(Request(seat, req["id"], req, protocol.encode(req).encode(), timeout, len(req["actions"])))
            if isinstance(got, Answered):
                choice, fault, note = got.choice, None, got.note or {}
            else:
                choice, fault, note = None, (got.reason, got.message), {}
            result.stderr += got.stderr
            same = (choice == recorded.choice) if recorded.fault is None else fault is not None
            if not same:
                result.divergence = Divergence(number, recorded, choice, got.seconds, fault, note.get("info"),
                                               note.get("info_warning"))
                if opponents is not None:
                    result.live = _play_on(replay, seat, result.divergence, player, opponents, launch)
                return result
            result.agreed += 1
            if on_agree is not None:
                on_agree(number, recorded)
            if fault is not None:  # it forfeited where the record did too: nothing more to ask
                return result
        return result
    finally:
        player.shutdown()
        settle()  # its grace to exit by itself, and every opponent's
        if result.divergence is not None or not result.stderr:
            result.stderr += player.take_stderr()


def _play_on(replay: Replay, seat: int, d: Divergence, player: BlockingPlayer, opponents: dict[int, BotSpec],
             launcher: BlockingLaunch) -> GameRecord:
    """The game from the divergence on: the log up to it, the new build's answer, then live play."""
    record = replay.record
    names = list(replay.players)
    names[seat] = player.spec.name  # the new build plays this seat from here on
    core = RefereeCore(replay.rules, names, int(record["seed"]), game_id=f"{replay.game_id}-debug",
                       clock=replay.clock, max_turns=int(record.get("max_turns", 2000)),
                       given=record.get("given") or ())
    for f in replay.start_forfeits:
        core.start_fault(int(f["seat"]), fault_reason(f["reason"]), str(f.get("message", "")))
    frames = replay.frames[1:]
    target = d.recorded.request["id"]
    while (req := core.next_request()) is not None and req.id != target:
        step = frames[len(core.record.steps)].step or {}
        fr = frames[len(core.record.steps)]
        if "fault" in step:
            log_fault(core, step)
        else:
            core.answer(fr.actions.index(fr.action), _seconds(step))
    if req is None:
        raise ReplayError("the log ended before the divergence: nothing to play on from")
    if d.fault is not None:
        core.fault(d.fault[0], d.fault[1], d.seconds or 0.0, player.take_stderr())
    else:
        core.answer(d.choice, d.seconds or 0.0, player.take_stderr(), {k: v for k, v in
                    (("info", d.info), ("info_warning", d.info_warning)) if v is not None} or None)
    players: dict[int, BlockingPlayer] = {seat: player}
    try:
        while (req := core.next_request()) is not None:
            p = players.get(req.seat)
            if p is None:
                p = players[req.seat] = BlockingPlayer(opponents[req.seat], launcher, replay.clock)
                try:
                    p.begin(core.start_message(req.seat))
                except BotFault as fault:
                    core.fault(fault.reason, str(fault), 0.0, p.take_stderr())
                    continue
            core.settle(p.decide(req))
        for s, message in core.end_messages():
            if s in players:
                players[s].finish(message)
    finally:
        for s, p in players.items():
            if s != seat:
                p.shutdown()
    return core.record

