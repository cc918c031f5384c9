"""``arena debug``: feed one seat's recorded requests to another build of its bot, one by one,
and stop at the first decision where it chooses differently from the record.

The requests are rebuilt exactly as the referee wrote them (:func:`requests_for`), after the
``start`` the seat was sent, so a bot that seeds its randomness from ``start.seed`` makes the
same choices again. The bot is started like any bot (contained by the launcher), on the
recorded time control. ``start`` (a decision number, 1-based) skips the earlier requests: the
bot then gets ``start`` and the requests from there on, each with its full view but only the
events since the seat's previous request.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..bots.manifest import BotSpec
from ..faults import BotFault
from ..referee.driver import BotPlayer
from .simulate import Decision, Replay, ReplayError, requests_for, start_for


@dataclass
class Divergence:
    """The first decision where the new build did not do what the record says."""

    number: int  # 1-based among the seat's decisions
    recorded: Decision
    choice: int | None  # the new build's action id; None when it faulted
    ms: float | None = None
    fault: tuple[str, str] | None = None  # (reason, message) when the new build faulted
    info: dict[str, Any] | None = None  # what the new build said it was thinking
    info_warning: str | None = None

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

    @property
    def diverged(self) -> bool:
        return self.divergence is not None


async def debug_seat(replay: Replay, seat: int, spec: BotSpec, launcher: Callable, *, start: int = 1,
                     on_agree: Callable[[int, Decision], None] | None = None) -> DebugResult:
    """Feed ``seat``'s recorded requests from decision ``start`` on to the bot ``spec`` started by
    ``launcher``; stop at the first different choice (or fault)."""
    decisions = requests_for(replay, seat)
    if not decisions:
        raise ReplayError(f"seat {seat} was never asked in {replay.game_id}: every move it made was forced")
    if not 1 <= start <= len(decisions):
        raise ReplayError(f"--from {start}: seat {seat} made decisions 1..{len(decisions)} in {replay.game_id}")
    result = DebugResult(seat, len(decisions), start)
    player = BotPlayer(spec, launcher, replay.clock)
    try:
        try:
            await player.begin(start_for(replay, seat))
        except BotFault as f:
            result.divergence = Divergence(start, decisions[start - 1], None, fault=(str(f.reason), str(f)))
            return result
        for number in range(start, len(decisions) + 1):
            recorded = decisions[number - 1]
            req = recorded.request
            timeout = (req["clock"]["move_ms"] + req["clock"]["bank_ms"]) / 1000
            t0 = _now()
            try:
                choice, fault = await player.decide(req, timeout), None
            except BotFault as f:
                choice, fault = None, (str(f.reason), str(f))
            ms = round((_now() - t0) * 1000, 3)
            result.stderr += player.take_stderr()
            same = (choice == recorded.choice) if recorded.fault is None else fault is not None
            if not same:
                note = player.note or {}
                result.divergence = Divergence(number, recorded, choice, ms, fault, note.get("info"),
                                               note.get("info_warning"))
                return result
            result.agreed += 1
            if on_agree is not None:
                on_agree(number, recorded)
            if fault is not None:  # it forfeited where the record did too: nothing more to ask
                return result
        return result
    finally:
        await player.shutdown()
        if result.divergence is not None or not result.stderr:
            result.stderr += player.take_stderr()


def _now() -> float:
    import trio
    return trio.current_time()
