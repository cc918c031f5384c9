"""#35: the stop rule after each answer, on the production loop (``play_game``) with scripted
seats and scripted cgroups, so every part of it is held without a real kernel or the wall clock.

A freezer stops a process only on its way back to user space: a seat frozen inside a long system
call runs on. So before the next seat is thawed, the referee looks whether the seat that answered
has stopped (after its own work: an honest seat is frozen by then, and a read of the freezer's
state, with one of its CPU counter at the freeze, never parsed, is all it costs); one that runs on
uses CPU from its freeze, and past ``OFF_TURN_CPU_S`` it is killed in the wait and forfeits at its
next request; one the wait leaves unseen frozen has its CPU
counted again at its next request. The real kernel side (a sitter in ``mmap``) is
tests/test_stranger_attacks19.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from arena.bots import cgroups
from arena.bots.cgroups import OFF_TURN_CPU_S, BotCgroup
from arena.bots.manifest import BotSpec
from arena.engine import preset
from arena.ladder.seasons import public_log
from arena.referee import TimeControl
from arena.referee.blocking import BlockingPlayer, play_game
from arena.referee.testing import FakeClock, MockBot, Sleep, action_line, policy
from arena.replay import requests_for, simulate

from tests.fakes import mock_players, play_mocks

CLOCK = TimeControl(move_ms=1000, bank_ms=0, handshake_ms=1000)
OVER = OFF_TURN_CPU_S * 1.5  # CPU past the allowance
SEED = 0  # a classic game of two action-0 bots: 198 requests, 54 of them the same seat twice running


class ScriptedGroup(BotCgroup):
    """A seat's cgroup whose freezer state and CPU counter the test writes (``cpu``). Once its
    seat has answered ``after`` requests, in ``mode`` "burn" it is never reported frozen and each
    read of its counter finds OVER more (the wait's budget's case), in "sit" never reported frozen
    and its counter still (the case of a wait that ends without seeing it frozen), in "spent" OVER
    used between its freeze and the first look, frozen after (the case of a count from the freeze),
    in "late" the same but frozen already at the first look (a look the referee's work delayed),
    in "freezing" frozen only at the second look (the case of a wait that pauses)."""

    def __init__(self, log: list[tuple[str, int]], owner: Seat, mode: str | None, after: int) -> None:  # (no kernel group)
        self.log, self.owner, self.mode, self.after = log, owner, mode, after
        self.cpu = 0.0
        self.frozen = False
        self.marks = 0  # CPU counter reads
        self.reads = 0  # and parses
        self.held = 0  # freezes and thaws

    freezes = True

    def running(self) -> bool:
        return self.mode is not None and self.owner.asked >= self.after

    def hold(self, frozen: bool) -> bool:
        self.frozen = frozen
        self.held += 1
        self.log.append(("freeze" if frozen else "thaw", self.owner.seat))
        return True

    def is_frozen(self) -> bool:
        self.log.append(("look", self.owner.seat))
        if self.mode in ("spent", "late", "freezing") and self.running():
            if self.log[-2] == ("freeze", self.owner.seat):  # the first look since its freeze
                if self.mode != "freezing":  # it ran OVER between its freeze and this look
                    self.cpu += OVER
                return self.mode == "late"
            return self.frozen
        return self.frozen and not self.running()

    def cpu_mark(self) -> bytes:
        self.marks += 1
        return repr(self.cpu).encode()

    def _cpu_of(self, text: bytes) -> float:
        self.reads += 1
        return float(text)

    def cpu_seconds(self) -> float:
        if self.frozen and self.running() and self.mode == "burn":
            self.cpu += OVER
        return self._cpu_of(self.cpu_mark())


class Seat(MockBot):
    """A scripted bot in a scripted cgroup; its close is logged (the referee's kill)."""

    def __init__(self, log: list[tuple[str, int]], seat: int, mode: str | None = None, after: int = 1,
                 respond: Any = None) -> None:
        super().__init__(respond)
        self.log, self.seat = log, seat
        self.asked = 0
        self.cgroup = ScriptedGroup(log, self, mode, after)

    def ask(self, line: str | bytes, timeout: float) -> str:
        self.asked += 1
        return super().ask(line, timeout)

    def freezer(self) -> Any:
        return lambda frozen: self.cgroup.hold(frozen)

    def hold(self, frozen: bool) -> bool:
        return self.cgroup.hold(frozen)

    def close(self, grace: float = 0.0) -> None:
        if not self.closed:
            self.log.append(("closed", self.seat))
        super().close(grace)


def _requests(seat: Seat) -> list[int]:
    return [m["id"] for m in seat.of_type("request")]


def _play(seats: list[Seat], **kw) -> Any:
    return play_mocks(seats, preset("classic"), SEED, clock=CLOCK, **kw)


def test_an_honest_seat_costs_one_look_and_is_seen_stopped_before_the_other_is_thawed() -> None:
    log: list[tuple[str, int]] = []
    seats = [Seat(log, 0), Seat(log, 1)]
    rec = _play(seats)
    assert not rec.faults and rec.result is not None
    # the cost: one read of the CPU counter a freeze, one look at the freezer and one more read of the
    # counter per change of seat (the counter never parsed: it did not move); the same for each start
    assert [s.cgroup.reads for s in seats] == [0, 0]
    looks = sum(1 for kind, _ in log if kind == "look")
    assert sum(s.cgroup.marks for s in seats) == sum(rec.decisions) + len(seats) + looks
    asked = [step["seat"] for step in rec.steps if "request" in step]
    changes = sum(a != b for a, b in zip(asked, asked[1:]))
    assert looks >= changes > 20
    # the order: a seat's answer, then its freeze and the look at it, then the other seat's thaw
    last_frozen = None
    for kind, seat in log:
        if kind == "freeze":
            last_frozen, looked = seat, False
        elif kind == "look" and seat == last_frozen:
            looked = True
        elif kind == "thaw" and last_frozen is not None and seat != last_frozen:
            assert looked, f"seat {seat} thawed before seat {last_frozen} was seen stopped"


def _unasked_fault(rec: Any, seat: Seat) -> dict[str, Any]:
    """The seat's one fault step, which must be for a request it was never sent."""
    steps = [s for s in rec.steps if "fault" in s]
    assert [(s["seat"], s["fault"]) for s in steps] == [(seat.seat, "cpu_limit")], rec.faults
    assert steps[0]["request"] not in _requests(seat)
    assert "while frozen off its turn" in rec.faults[0]["message"]
    return steps[0]


def test_a_seat_that_runs_on_in_the_wait_is_killed_before_the_other_is_thawed_and_forfeits() -> None:
    log: list[tuple[str, int]] = []
    seats = [Seat(log, 0), Seat(log, 1, "burn")]
    rec = _play(seats)
    _unasked_fault(rec, seats[1])
    killed = log.index(("closed", 1))
    last_answer = max(i for i, entry in enumerate(log[:killed]) if entry == ("freeze", 1))
    assert ("thaw", 0) not in log[last_answer:killed], "the other seat was thawed while it ran on"
    assert ("thaw", 0) in log[killed:], "the game went on"


@pytest.mark.parametrize("mode", ["spent", "late"])
def test_the_wait_counts_the_cpu_from_the_freeze_not_from_the_first_look(mode: str) -> None:
    """The first look comes after the referee's own work, which a loaded machine can stretch: what
    the seat ran meanwhile is counted too (a gVisor seat in the kernel commits memory as it runs,
    and its memory limit ended it first while only the CPU from the look was counted), also where
    it is frozen by the look ("late": frozen says nothing of what it ran before)."""
    log: list[tuple[str, int]] = []
    seats = [Seat(log, 0), Seat(log, 1, mode)]
    rec = _play(seats)
    _unasked_fault(rec, seats[1])


@pytest.mark.parametrize("kind", ["v1", "v2"])
def test_the_wait_for_a_seat_still_freezing_sleeps_on_v1_and_polls_its_events_on_v2(kind: str, monkeypatch) -> None:
    """On v2 the kernel wakes a ``poll`` on ``cgroup.events`` as the group becomes frozen, so the
    wait pauses there; v1 has no such event, and sleeps."""
    pauses: list[tuple[str, float]] = []
    monkeypatch.setattr(cgroups.time, "sleep", lambda s: pauses.append(("sleep", s)))

    class Events:
        def poll(self, ms: float) -> list:
            pauses.append(("poll", ms / 1000))
            return []
    log: list[tuple[str, int]] = []
    seats = [Seat(log, 0), Seat(log, 1, "freezing")]
    if kind == "v2":
        seats[1].cgroup._events = Events()  # type: ignore[assignment]
    rec = _play(seats)
    assert not rec.faults and rec.result is not None
    assert pauses and {how for how, _ in pauses} == {"poll" if kind == "v2" else "sleep"}


def test_a_seat_the_wait_leaves_unseen_frozen_forfeits_for_what_it_ran_until_its_next_request(monkeypatch) -> None:
    monkeypatch.setattr(cgroups, "STILL_S", 0.0)  # the wait gives up at its first look: still
    log: list[tuple[str, int]] = []
    seats = [Seat(log, 0), Seat(log, 1, "sit")]
    grown = []

    def hold(frozen: bool) -> bool:  # seat 1 sits in the kernel while seat 0 thinks: its CPU moves, once
        if not frozen and seats[1].asked >= 2 and not grown:
            grown.append(True)
            seats[1].cgroup.cpu += OVER
        return seats[0].cgroup.hold(frozen)
    seats[0].freezer = lambda: hold  # type: ignore[method-assign]
    rec = _play(seats, shutdown=False)
    assert grown
    _unasked_fault(rec, seats[1])
    assert all(len(_requests(s)) for s in seats) and ("closed", 0) not in log


def test_a_seat_whose_wait_ends_unseen_frozen_is_never_blamed_for_its_own_turns(monkeypatch) -> None:
    """Its CPU counted where the wait ended is compared only until it is thawed: its own thinking,
    also when it is asked twice running, is no off-turn CPU."""
    monkeypatch.setattr(cgroups, "STILL_S", 0.0)
    log: list[tuple[str, int]] = []
    seats = [Seat(log, 0, "sit", after=0), Seat(log, 1, "sit", after=0)]
    for s in seats:
        def hold(frozen: bool, s: Seat = s) -> bool:  # each of its turns costs it OVER
            if frozen and s.asked:
                s.cgroup.cpu += OVER
            return s.cgroup.hold(frozen)
        s.freezer = lambda hold=hold: hold  # type: ignore[method-assign]
    rec = _play(seats)
    assert not rec.faults and rec.result is not None
    asked = [step["seat"] for step in rec.steps if "request" in step]
    assert sum(a == b for a, b in zip(asked, asked[1:])) > 10  # (asked twice running, often)


@pytest.mark.parametrize("where", ["start", "end"])
def test_the_start_and_the_end_are_waited_for_too(where: str) -> None:
    """After reading its start a seat that runs on has a start fault; after its end a pooled
    process that runs on is closed (a fresh one plays its next game)."""
    log: list[tuple[str, int]] = []
    if where == "start":
        seats = [Seat(log, 0), Seat(log, 1, "burn", after=0)]
        rec = _play(seats)
        assert [(f["seat"], f["reason"]) for f in rec.faults] == [(1, "cpu_limit")]
        assert "after reading its start" in rec.faults[0]["message"] and not _requests(seats[1])
        return
    seats = [Seat(log, 0), Seat(log, 1, "burn", after=10**9)]

    send_line = seats[1].send_line

    def sent(text: str | bytes, *, timeout: float = 10.0) -> None:  # it runs on once it has its end
        send_line(text, timeout=timeout)
        if seats[1].of_type("end"):
            seats[1].cgroup.after = 0
    seats[1].send_line = sent  # type: ignore[method-assign]
    rec = _play(seats, shutdown=False)
    assert not rec.faults and ("closed", 1) in log and ("closed", 0) not in log


def _times_out_at(k: int) -> Any:
    """A bot that takes action 0 but lets its ``k``-th request run out (it answers a minute late)."""
    base = policy(lambda msg: 0)
    asked: list[int] = []

    def respond(msg: dict[str, Any]) -> Any:
        if msg["type"] == "request":
            asked.append(msg["id"])
            if len(asked) == k:
                return [Sleep(60.0), action_line(msg, 0)]
        return base(msg)
    return respond


def _runs_on_while_asked(victim: Seat, sitter: Seat, k: int) -> None:
    """``sitter`` (its waits end unseen frozen) runs OVER in the kernel while ``victim`` is asked its ``k``-th time."""
    def hold(frozen: bool) -> bool:
        if not frozen and victim.asked == k - 1:
            sitter.cgroup.cpu += OVER
        return victim.cgroup.hold(frozen)
    victim.freezer = lambda: hold  # type: ignore[method-assign]


def test_a_seat_on_turn_that_times_out_while_a_frozen_seat_runs_on_is_excused_and_the_sitter_forfeits(monkeypatch) -> None:
    """The fixed schedule's gap: a seat that answers at the end of its slot is waited for only until the
    slot ends, and can run on in the kernel into the other seat's turn, which then times out. The
    frozen seats are looked at first: the one past its allowance forfeits (off its turn: its
    request never came), the seat on turn is excused; the record says so, and replays."""
    monkeypatch.setattr(cgroups, "STILL_S", 0.0)  # every wait for the sitter ends unseen frozen
    log: list[tuple[str, int]] = []
    seats = [Seat(log, 0, respond=_times_out_at(5)), Seat(log, 1, "sit")]
    _runs_on_while_asked(seats[0], seats[1], 5)
    rec = _play(seats, fixed_schedule=True)
    assert [(f["seat"], f["reason"]) for f in rec.faults] == [(1, "cpu_limit")], rec.faults
    step = next(s for s in rec.steps if "fault" in s)
    assert step["off_turn"] and step["request"] == _requests(seats[0])[4]  # the request it voids was seat 0's
    assert "while frozen off its turn" in rec.faults[0]["message"] and ("closed", 1) in log
    _replays(rec, {0: 5})


def _replays(rec: Any, asked: dict[int, int]) -> None:
    """The record re-simulates without a mismatch, and rebuilds each seat's requests (``asked``: how
    many a seat was sent), the void one with neither a choice nor a fault; a ladder's public export too."""
    replay = simulate(rec.as_json())
    assert replay.ok, replay.mismatches
    public = simulate(public_log(rec.as_json()))  # a ladder's export (its verifier replays that)
    assert public.ok, public.mismatches
    for seat, n in asked.items():
        decisions = requests_for(replay, seat)
        assert len(decisions) >= n
        assert [d.fault for d in decisions] == [None] * len(decisions)


def test_with_three_seats_the_excused_seat_plays_on_in_a_fresh_process_sent_the_start_again(monkeypatch) -> None:
    """Its timeout stopped its process (a bot's timeout always does): the seat comes back in a fresh
    one, which gets the game's ``start`` again and the decision it was excused from, and plays on to
    the end; the sitter is out, and the game replays."""
    monkeypatch.setattr(cgroups, "STILL_S", 0.0)
    log: list[tuple[str, int]] = []
    first = Seat(log, 0, respond=_times_out_at(3))
    sitter = Seat(log, 1, "sit")
    _runs_on_while_asked(first, sitter, 3)
    again = Seat(log, 0)
    timer = FakeClock()
    procs = iter([first, again])

    def launch(_spec: BotSpec) -> Seat:
        bot = next(procs)
        bot.clock = timer
        return bot
    players = [BlockingPlayer(BotSpec("seat0", "1", ("fake",), Path("."), Path(".")), launch, CLOCK, timer=timer),
               *mock_players([sitter, Seat(log, 2)], CLOCK, timer=timer, names=["seat1", "seat2"])]
    rec = play_game(players, preset("classic"), SEED, game_id="g3", clock=CLOCK, timer=timer, fixed_schedule=True)
    assert [(f["seat"], f["reason"]) for f in rec.faults] == [(1, "cpu_limit")], rec.faults
    assert rec.result is not None and first.closed
    assert len(again.of_type("start")) == 1 and again.of_type("request") and again.of_type("end")
    voided = _requests(first)[2]
    assert next(s for s in rec.steps if "fault" in s)["request"] == voided
    assert _requests(again)[0] == voided + 1  # the decision it was excused from, asked again
    assert again.cgroup.held >= 2 * len(_requests(again))  # frozen and thawed through its new process's group
    _replays(rec, {0: 3, 2: 1})


def test_of_two_seats_that_ran_on_the_one_that_ran_most_forfeits_then_and_the_other_at_its_next_request(monkeypatch) -> None:
    """One request is voided once: the seat that ran most forfeits off turn in its place; the other
    is still counted from its freeze, at its own next request."""
    monkeypatch.setattr(cgroups, "STILL_S", 0.0)
    log: list[tuple[str, int]] = []
    first = Seat(log, 0, respond=_times_out_at(3))
    sitters = [Seat(log, 1, "sit"), Seat(log, 2, "sit")]

    def hold(frozen: bool) -> bool:  # both run on while seat 0 is asked its third time, seat 2 twice as much
        if not frozen and first.asked == 2:
            sitters[0].cgroup.cpu += OVER
            sitters[1].cgroup.cpu += 2 * OVER
        return first.cgroup.hold(frozen)
    first.freezer = lambda: hold  # type: ignore[method-assign]
    timer = FakeClock()
    procs = iter([first, Seat(log, 0)])

    def launch(_spec: BotSpec) -> Seat:
        bot = next(procs)
        bot.clock = timer
        return bot
    players = [BlockingPlayer(BotSpec("seat0", "1", ("fake",), Path("."), Path(".")), launch, CLOCK, timer=timer),
               *mock_players(sitters, CLOCK, timer=timer, names=["seat1", "seat2"])]
    rec = play_game(players, preset("classic"), SEED, game_id="g2", clock=CLOCK, timer=timer, fixed_schedule=True)
    assert [(f["seat"], f["reason"]) for f in rec.faults] == [(2, "cpu_limit"), (1, "cpu_limit")], rec.faults
    off, later = [s for s in rec.steps if "fault" in s]
    assert off.get("off_turn") and not later.get("off_turn") and later["request"] not in _requests(sitters[0])
    _replays(rec, {0: 3})
