"""The referee on the blocking shell: one game at a time, each bot a
:class:`~arena.bots.blocking.BlockingBot`, no event loop.

For a thread that plays one game at a time (a referee worker, an in-process lane, ``arena play``,
a game in the browser through :func:`in_thread`), a decision is a write and a ``poll``:
:func:`play_game` moves the messages of a :class:`~arena.referee.core.RefereeCore` to the seats
and their replies back, waiting with ``poll``; what a bot seat's decisions mean is
:mod:`~arena.referee.seat`'s. Bots start one after the other.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import trio

from ..bots.blocking import BlockingBot, Hub, Interrupted, adopt_hub, hub
from ..bots.manifest import BotSpec
from ..engine import Rules
from ..bots.cgroups import OFF_TURN_CPU_S
from ..faults import ArenaFailure, BotFault, CpuLimit, FaultReason, StartFailed
from . import protocol
from .core import Answered, Faulted, GameRecord, Outcome, RefereeCore, Request, TimeControl
from .seat import (BETWEEN_GAMES, WALL, Timer, answered, as_fault, bots_doing, faulted, game_clock, handshake_fault,
                   slot_end)

BlockingLauncher = Callable[[BotSpec], BlockingBot]


class BlockingPlayer:
    """A bot process serving a match: started and greeted on first use, restarted after a fault,
    shut down without waiting for its grace. Holds its connection (``conn``), its hello, how often
    it started, and the stderr lines of processes already closed (handed out once, by
    :meth:`take_stderr`); a reply's note travels in the decision's outcome, not here. Its
    decisions are timed on ``timer`` (the wall clock; a test's fake clock with
    :class:`~arena.referee.testing.MockBot`); what they decide is :mod:`.seat`'s."""

    def __init__(self, spec: BotSpec, launcher: Any, clock: TimeControl, *, restart_each_game: bool = False,
                 timer: Timer = WALL):
        self.spec = spec
        self.name = spec.name
        self.launcher = launcher
        self.clock = clock
        self.restart_each_game = restart_each_game
        self.timer = timer
        self.conn: BlockingBot | None = None
        self.hello: dict[str, Any] | None = None
        self.starts = 0
        self._stderr: list[str] = []
        self._last_line: str | None = None  # a process closed this game: the last line it wrote
        self.games = 0  # games begun

    def _not_started(self, exc: Exception) -> NoReturn:
        """The launcher failed: the bot's own doing (its command is missing, its build failed) is
        its start fault; anything else is the arena's, which costs no bot a game."""
        if bots_doing(exc):
            raise StartFailed(f"could not start {self.spec.label}: {exc}") from None
        raise ArenaFailure(f"the arena could not start {self.spec.label}: {type(exc).__name__}: {exc}") from exc

    def _greeted(self, line: str) -> None:
        self.hello = protocol.read_bot_hello(line)

    def _stale(self) -> bool:
        """Whether the next game needs a fresh process: asked for, or the process has used half
        of its lifetime CPU backstop (``Limits.process_cpu_seconds``)."""
        if self.restart_each_game:
            return True
        usage = getattr(self.conn, "resource_usage", None)
        limits = getattr(self.conn, "limits", None)
        if not callable(usage) or limits is None:  # (tests' scripted connections have neither)
            return False
        spent = usage().cpu_seconds
        return spent is not None and spent >= limits.process_cpu_seconds / 2

    def _between_games(self) -> None:
        """A game begins: what the bot wrote after its last game's ``end`` (and reached us by now)
        is marked as written between games, not filed as this game's first decision's own."""
        if self.games:
            self._stderr = [BETWEEN_GAMES + line for line in self.take_stderr()]
        self.games += 1
        self._last_line = None
        if self.conn is not None:
            self.conn.last_line = None

    @property
    def last_line(self) -> str | None:
        """The last line the bot wrote this game (the greeting included), None if none: its
        connection's, or that of the process a fault closed. ``arena check`` quotes it when a
        reply was not JSON."""
        conn = self.conn
        return self._last_line if conn is None else conn.last_line

    def hold(self, frozen: bool) -> None:
        """Freeze (or thaw) the bot's processes, where its cgroup has a freezer."""
        hold = getattr(self.conn, "hold", None)  # (tests' scripted connections have none)
        if hold is not None:
            hold(frozen)

    def _clock_game(self, conn: Any) -> None:
        """A game begins: the process's CPU is counted per game (arena.limits)."""
        begin_game = getattr(conn, "begin_game", None)
        if begin_game is not None:
            begin_game(self.clock.move_s, self.clock.bank_s)

    def take_stderr(self) -> list[str]:
        fresh = self.conn.take_stderr() if self.conn is not None else []
        if not self._stderr:
            return fresh
        out, self._stderr = self._stderr + fresh, []  # lines kept from a closed process, handed out once
        return out

    def _detach(self) -> Any:
        """Forget the connection (the shell closes it, then :meth:`_keep_stderr`)."""
        conn, self.conn = self.conn, None
        return conn

    def _keep_stderr(self, conn: Any) -> None:
        self._stderr += conn.take_stderr()  # after closing, which waits for a dying bot's last lines
        self._last_line = conn.last_line

    def _ensure(self) -> BlockingBot:
        if self.conn is not None:
            return self.conn
        try:
            self.conn = self.launcher(self.spec)
        except Exception as e:
            self._not_started(e)
        self.starts += 1
        try:
            self.conn.send_line(protocol.encode(protocol.hello()))
            self._greeted(self.conn.receive_line(self.clock.handshake_s))
        except Exception as e:
            fault = handshake_fault(e)
            self.fault(fault.reason, fault.message, None)  # a live bot is told why (bad_version...)
            raise fault from None
        return self.conn

    def begin(self, message: dict[str, Any]) -> None:
        if self._stale():
            self.close()
        self._between_games()  # before a fresh process starts: its own first lines are this game's
        self._send_start(message)

    def decide(self, req: Request) -> Outcome:
        """Ask ``req`` and time the answer in seconds; a fault is told to the bot, which is stopped.
        The stderr it wrote since the last decision goes with the outcome (most bring none: then
        nothing is taken)."""
        now = self.timer.now
        start = now()
        try:
            conn = self.conn if self.conn is not None else self._ensure()
            line = req.line or protocol.encode(req.message).encode()  # a core told not to encode leaves it empty
            try:
                choice, note = protocol.read_reply(conn.ask(line, req.timeout), req.id, req.n_actions)
            except Exception as e:
                raise as_fault(e) from None
        except BotFault as fault:
            seconds = now() - start
            self.fault(fault.reason, fault.message, req.id)
            return faulted(self, fault, seconds)
        seconds = now() - start
        # seat.answered's work written out: through it (two more calls) a decision costs 1.1% more
        # instructions (bench_instructions, blocking: 111.0k -> 112.2k), on the hottest path there is.
        return Answered(choice, seconds, self.take_stderr() if self._stderr or conn.stderr_lines else [], note)

    def rejoin(self, message: dict[str, Any]) -> None:
        """Back at the table mid-game, excused for a fault another seat caused (see ``play_game``),
        where that fault stopped its process: a fresh one, sent the game's ``start`` again."""
        self._send_start(message)

    def _send_start(self, message: dict[str, Any]) -> None:
        """The game's ``start`` to this seat's process (started now where there is none), its clock set."""
        conn = self._ensure()
        self._clock_game(conn)
        try:
            conn.send_line(protocol.encode(message))
        except Exception as e:
            raise as_fault(e) from None

    def finish(self, message: dict[str, Any]) -> None:
        if self.conn is None:
            return
        try:
            self.conn.send_line(protocol.encode(message))
        except Exception:
            self.close()

    def fault(self, reason: str, message: str, request_id: int | None) -> None:
        """Tell the bot what went wrong if it can still hear, then stop it: it restarts next game."""
        if self.conn is not None:
            try:
                self.conn.send_line(protocol.encode(protocol.error(reason, message, request_id)), timeout=0.2)
            except Exception:
                pass
        self.close()

    def close(self, graceful: bool = False) -> None:
        conn = self._detach()
        if conn is not None:
            conn.close_gracefully() if graceful else conn.close()
            self._keep_stderr(conn)

    def shutdown(self) -> None:
        """``shutdown``, then the bot's grace runs in the hub while this process goes on."""
        self.hold(False)  # it may be frozen off its turn: it needs the CPU to exit by itself
        if self.conn is not None:
            try:
                self.conn.send_line(protocol.encode(protocol.shutdown()), timeout=0.5)
            except Exception:
                pass
        self.close(graceful=True)


class PersonSeat:
    """A person's seat (the terminal's, the browser's): sent exactly the messages a bot in the seat
    would get. A subclass answers a request in :meth:`choose` (blocking; a
    :class:`~arena.faults.BotFault` there, say a :class:`~arena.faults.Timeout`, is the person's
    forfeit); the decision is timed here on ``timer``, as a bot's is in :class:`BlockingPlayer`."""

    name: str
    timer: Timer = WALL

    def begin(self, message: dict[str, Any]) -> None:
        pass

    def choose(self, message: dict[str, Any], timeout: float) -> int:
        raise NotImplementedError

    def decide(self, req: Request) -> Outcome:
        now = self.timer.now
        start = now()
        try:
            choice = self.choose(req.message, req.timeout)
        except BotFault as fault:
            seconds = now() - start
            self.fault(fault.reason, fault.message, req.id)
            return faulted(self, fault, seconds)
        return answered(self, (choice, None), now() - start)

    def finish(self, message: dict[str, Any]) -> None:
        pass

    def fault(self, reason: str, message: str, request_id: int | None) -> None:
        pass

    def take_stderr(self) -> list[str]:
        return []

    def close(self) -> None:
        pass

    def shutdown(self) -> None:
        pass


Seat = BlockingPlayer | PersonSeat


def run_async(afn, *args):
    """``await afn(*args)`` on a loop of its own, on a thread of its own (so a caller inside an
    event loop of its own is no trouble); its exception is raised here."""
    box: list = []

    def run() -> None:
        try:
            box.append((trio.run(afn, *args), None))
        except BaseException as e:  # delivered to the caller
            box.append((None, e))

    thread = threading.Thread(target=run, name="arena-env-launch")
    thread.start()
    thread.join()
    value, error = box[0]
    if error is not None:
        raise error
    return value


async def in_thread(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` from trio on a thread of its own with a :class:`~arena.bots.blocking.Hub` of
    its own (a game with a person at the table: the server's loop goes on meanwhile). The caller's
    cancellation reaches the thread: its bot waits raise :class:`~arena.bots.blocking.Interrupted`
    and its ``trio.from_thread`` calls ``trio.Cancelled``, so ``fn``'s cleanup runs at once and
    the thread's bots in their grace are settled before this returns (or raises ``Cancelled``)."""
    own = Hub()
    box: list[tuple[Any, BaseException | None]] = []

    def run() -> None:
        adopt_hub(own)
        try:
            box.append((fn(*args), None))
        except Interrupted:  # the caller was cancelled: it raises Cancelled itself
            box.append((None, None))
        except BaseException as e:  # noqa: BLE001 - delivered to the caller
            box.append((None, e))
        finally:
            own.clear_interrupt()
            try:
                own.settle()
            except Interrupted:  # an interrupt that came during the cleanup: finish it anyway
                own.settle()
            # trio keeps the thread for its next job: it must not take this hub along, which the
            # caller interrupts as it leaves (a submission check then raised Interrupted at once)
            adopt_hub(None)

    returned = False

    async def interrupt_when_cancelled() -> None:
        try:
            await trio.sleep_forever()
        finally:
            if not returned:  # the caller was cancelled, not merely done with the thread
                own.interrupt()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(interrupt_when_cancelled)
        try:
            await trio.to_thread.run_sync(run)  # not abandoned: the thread's cleanup is waited for
            returned = True
        finally:
            nursery.cancel_scope.cancel()
    value, error = box[0]
    if error is not None:
        raise error
    return value


class BlockingLaunch:
    """A :class:`~arena.bots.launch.Launcher` for the blocking shell: each bot's
    :class:`~arena.bots.launch.LaunchPlan` is worked out once (containment, build), and every
    start is then a plain fork. No event loop is run for it, a bot's build included (it runs on
    the blocking shell too)."""

    def __init__(self, launcher: Any):
        self.launcher = launcher
        self.plans: dict[str, Any] = {}  # label -> LaunchPlan
        self._planning = threading.Lock()  # lanes of one executor share it: each bot planned once

    def __call__(self, spec):
        plan = self.plans.get(spec.label)
        if plan is None:
            with self._planning:
                plan = self.plans.get(spec.label)
                if plan is None:
                    plan = self.plans[spec.label] = self.launcher.plan_now(spec)
        return plan.start()

    def release(self) -> None:
        """Once no bot it started runs: its launcher's build copies go (a later start plans and
        builds again; :meth:`~arena.bots.launch.Launcher.release_builds`)."""
        with self._planning:
            self.plans.clear()
            release = getattr(self.launcher, "release_builds", None)
            if release is not None:
                release()


def blocking_launch(launcher: Any) -> BlockingLauncher:
    """What starts bots on the blocking shell: a :class:`~arena.bots.launch.Launcher` planned once
    per bot (:class:`BlockingLaunch`), or a spec -> bot function as it is (a test's fakes)."""
    return BlockingLaunch(launcher) if hasattr(launcher, "plan_now") else launcher


def hold(player: Any, frozen: bool) -> None:
    """Freeze a bot's seat off its turn, or thaw it for its request (a person's seat, or a
    scripted one, is left alone). The game loops thaw a seat before its clock starts, so the
    thaw costs it no time; ``ponder`` tables never freeze (see ``play_game``)."""
    if isinstance(player, BlockingPlayer):
        player.hold(frozen)


def make_room(player: Any, message: dict[str, Any]) -> None:
    """Grow a bot seat's stdin pipe to hold ``message`` (a game's ``end``) whole, so its send never
    waits on the bot. A bot may shrink its pipe to one page (``F_SETPIPE_SZ``): one that did, and
    left its ``end`` unread, held the game's lane for the send's 10 s timeout at every game's end,
    thawed all the while, at no cost to itself (the game was over, its next game a fresh process)."""
    conn = player.conn if isinstance(player, BlockingPlayer) else None
    room = getattr(conn, "make_room", None)  # (tests' scripted connections have none)
    if room is not None:
        room(len(protocol.encode(message)) + 1)


def freezer(player: Any) -> Callable[[bool], Any] | None:
    """:func:`hold` for one seat, looked up once a game (a decision then costs one call): its
    process's cgroup's own freeze call (:meth:`~arena.bots.process.BotBase.freezer`), or None for
    a seat that is never frozen (a person's, a scripted one, a bot with no freezer). A bot's seat
    with no process yet gets the player's own ``hold``, which looks at each call."""
    if not isinstance(player, BlockingPlayer):
        return None
    conn = player.conn
    if conn is None:
        return player.hold
    own = getattr(conn, "freezer", None)  # (tests' scripted connections have none)
    return own() if own is not None else None


MAX_STOP_WAIT_S = 1.0
"""Off a fixed schedule, how long the referee waits at most for a seat to stop after its answer."""


def frozen_group(player: Any) -> Any:
    """The cgroup a bot seat is frozen through (its CPU is read off its turn), or None."""
    conn = getattr(player, "conn", None) if isinstance(player, BlockingPlayer) else None
    group = getattr(conn, "cgroup", None)
    return group if group is not None and group.freezes else None


EXCUSABLE = (FaultReason.TIMEOUT, FaultReason.CPU_LIMIT)
"""The faults of a seat on turn that a frozen seat running on can cause: checked for a culprit first."""


def ran_past(group: Any, mark: bytes | None) -> float | None:
    """The CPU seconds a frozen seat used since its freeze (``mark``), where over its allowance."""
    ran = group.cpu_since(mark)
    return ran if ran > OFF_TURN_CPU_S else None


def ran_past_all(players: Sequence[Any], groups: Sequence[Any], marks: Sequence[bytes | None],
                 on_turn: int) -> list[tuple[int, float]]:
    """(seat, CPU seconds) of every frozen seat but ``on_turn`` that ran past its allowance since its
    freeze; only seats not yet seen frozen (``marks``) can have."""
    return [(s, ran) for s, mark in enumerate(marks)
            if s != on_turn and mark is not None and (ran := ran_past(groups[s], mark)) is not None]


def ran_on_message(ran: float, when: str = "") -> str:
    return (f"used {ran * 1000:.0f} ms of CPU while frozen off its turn{when} (at most "
            f"{OFF_TURN_CPU_S * 1000:.0f} ms): work in the kernel that outlasts a turn runs through another seat's")


def off_turn_fault(player: BlockingPlayer, req: Request, ran: float, seconds: float) -> Faulted:
    """A seat that ran on while frozen forfeits (and is stopped: killed and reaped): its own
    fault, never that of the seat on turn."""
    message = ran_on_message(ran)
    player.fault(FaultReason.CPU_LIMIT, message, req.id)
    return Faulted(FaultReason.CPU_LIMIT, message, seconds, player.take_stderr())


def play_game(players: Sequence[Seat], rules: Rules, seed: int, *, game_id: str,
              clock: TimeControl = TimeControl(), max_turns: int = 2000, ask_forced: bool = False,
              stderr_lines_per_step: int = 20, fixed_schedule: bool = False, ponder: bool = False,
              given: Sequence[int] = (), timer: Timer = WALL,
              on_event: Callable[[Any, dict[str, Any]], None] | None = None) -> GameRecord:
    """Play one game to its end and return its record. Bot faults become forfeits; the arena's own
    failure to start a bot (:class:`~arena.faults.ArenaFailure`) raises, and costs no bot a game.

    ``fixed_schedule``: every decision takes one slot of ``clock.move_ms``: the next request is
    sent only when the slot is over, and there is no bank (the game's clock has ``bank_ms`` 0, so
    the requests say so): a bot answers within its move time or forfeits. Its move time is the
    slot less the referee's share (:data:`~.seat.REFEREE_SHARE`), so the referee's own work after
    an answer in time never carries the decision into a second slot. How long a bot thought
    then changes nothing another seat can time, so think time carries no message between seats.
    (With a bank, a bot 1 ms over its move time would shift the schedule by a whole slot for 1 ms
    of bank: a bit per decision almost for free.) ``ponder``: seats are left running off their
    turn (never frozen). ``given``: start mid-game, at a deal suite's position: these action
    indexes are played first, for the seats, without asking. ``timer``: the clock of the fixed schedule
    (the players time their decisions on their own, the same one in a test). ``on_event`` is
    called with the state and each event as the core applies it (a replay test watches the game)."""
    slot = clock.move_s  # the whole slot; the bots are told and held to game_clock's move time
    clock = game_clock(clock, fixed_schedule)
    t0 = time.perf_counter()
    core = RefereeCore(rules, [p.name for p in players], seed, game_id=game_id, clock=clock,
                       max_turns=max_turns, ask_forced=ask_forced, stderr_lines_per_step=stderr_lines_per_step,
                       given=given, on_event=on_event)
    start_faults: list[tuple[int, BotFault]] = []
    # Each frozen seat's CPU counter at its freeze (unparsed), for as long as it may still be running:
    # None once it is seen frozen within its allowance (frozen is final until its thaw), or never frozen.
    marks: list[bytes | None] = [None] * len(players)
    for seat, player in enumerate(players):
        if not ponder:  # a pooled seat waits frozen (below): thawed to read its start, one seat at a time
            hold(player, False)
        try:
            player.begin(core.start_message(seat))
        except BotFault as fault:
            start_faults.append((seat, fault))
        except ArenaFailure:  # no game: every seat's process stops (it was sent a start that leads nowhere)
            for p in players:
                p.close()
            raise
        if not ponder:
            hold(player, True)
            if (group := frozen_group(player)) is not None and not (start_faults and start_faults[-1][0] == seat):
                mark = group.cpu_mark()
                ran, stopped = group.run_on(time.perf_counter() + MAX_STOP_WAIT_S, mark)
                if ran is not None:
                    start_faults.append((seat, CpuLimit(ran_on_message(ran, ", after reading its start"))))
                elif not stopped:
                    marks[seat] = mark
    for seat, failed in start_faults:
        players[seat].fault(failed.reason, failed.message, None)
        core.start_fault(seat, failed.reason, failed.message, players[seat].take_stderr())
    holds = [None if ponder else freezer(p) for p in players]  # each seat's connection is set by now
    groups = [None if ponder else frozen_group(p) for p in players]
    ran_on: list[float | None] = [None] * len(players)  # a seat killed for running on: its forfeit, at its next request
    rejoin = [False] * len(players)  # a seat excused for another's fault, its process stopped by that fault
    stopping = None  # (seat, its group, until when): the seat that answered last, frozen, not yet looked at
    start: float | None = None  # on a fixed schedule, when the last decision's slot began
    while (req := core.next_request()) is not None:
        seat = req.seat
        player = players[seat]
        if stopping is not None:
            # The seat that answered must have stopped before the next seat's clock starts (a process
            # inside a long system call runs on frozen). Looked at only now, after the referee's own
            # work, so an honest seat is frozen by then: two reads. One that ran past its allowance
            # since its freeze is killed and reaped now (nothing of it runs on) and forfeits at its next
            # request. On a fixed schedule the wait ends with the slot, so it never moves the schedule
            # (a sender could choose it); one still running then is counted again at its next request,
            # and at any fault of the seats on turn until then.
            s, group, until = stopping
            stopping = None
            if s == seat:  # asked again at once: what it ran meanwhile ran on nobody's time
                marks[s] = None
            else:
                ran, stopped = group.run_on(until, marks[s])
                if ran is not None:
                    ran_on[s], marks[s] = ran, None
                    players[s].fault(FaultReason.CPU_LIMIT, ran_on_message(ran), None)
                elif stopped:
                    marks[s] = None
        if ran_on[seat] is not None or marks[seat] is not None:
            ran = ran_on[seat] if ran_on[seat] is not None else ran_past(groups[seat], marks[seat])
            ran_on[seat] = marks[seat] = None
            if ran is not None:
                core.settle(off_turn_fault(player, req, ran, 0.0))  # never asked: its own fault, not another seat's
                continue
        if fixed_schedule:
            if start is not None:  # until the end of the last decision's slot
                timer.sleep_until(slot_end(start, timer.now(), slot))
            start = timer.now()
        if rejoin[seat] and isinstance(player, BlockingPlayer):
            rejoin[seat] = False
            try:
                player.rejoin(core.start_message(seat))
            except BotFault as fault:
                player.fault(fault.reason, fault.message, req.id)
                core.settle(faulted(player, fault, 0.0))
                continue
            if not ponder:  # its new process's own cgroup
                holds[seat], groups[seat] = freezer(player), frozen_group(player)
        freeze = holds[seat]
        if freeze is not None:
            freeze(False)  # before its clock starts (in decide)
        outcome = player.decide(req)
        if freeze is not None:
            freeze(True)
            if (group := groups[seat]) is not None and isinstance(outcome, Answered):
                marks[seat] = group.cpu_mark()  # its CPU as it was frozen, unparsed (one read)
                stopping = (seat, group, time.perf_counter()
                            + (slot_end(start, timer.now(), slot) - timer.now() if start is not None else MAX_STOP_WAIT_S))
        if isinstance(outcome, Faulted) and outcome.reason in EXCUSABLE \
                and (culprits := ran_past_all(players, groups, marks, seat)):
            # The seat on turn ran out of time or CPU while a frozen seat ran on past its allowance (a
            # wait that ended with a fixed schedule's slot): that seat forfeits (the one that ran most;
            # any other at its next request), this one is excused and asked again, a fresh process
            # where its fault stopped it.
            s, ran = max(culprits, key=lambda c: c[1])
            why = ran_on_message(ran)
            players[s].fault(FaultReason.CPU_LIMIT, why, None)
            core.fault_off_turn(s, FaultReason.CPU_LIMIT, why, players[s].take_stderr())
            marks[s] = None
            rejoin[seat] = isinstance(player, BlockingPlayer) and player.conn is None
            continue
        core.settle(outcome)
    if stopping is not None:  # the last answer ended the game: seen stopped before a seat is thawed for its end
        s, group, until = stopping
        if group.run_on(until, marks[s])[0] is not None:
            players[s].close()  # (after the game: its process only, no forfeit)
    if start is not None:  # the last slot too: when the game's end is sent tells no seat how long one thought
        timer.sleep_until(slot_end(start, timer.now(), slot))
    rec = core.record
    for seat, message in core.end_messages():
        make_room(players[seat], message)  # while it is frozen: it cannot shrink its pipe back before the send
        if not ponder:  # a frozen seat cannot read its end (with a long game's events it outgrows the
            hold(players[seat], False)  # pipe: the send then waited out its 10 s timeout and lost the bot)
        players[seat].finish(message)
        if not ponder:  # and it waits for its next game frozen: thawed, a pooled bot could run what it
            hold(players[seat], True)  # forked at its end all through the other games of the run
            group = frozen_group(players[seat])  # (and what will not stop, through the other games: a fresh process)
            if group is not None and group.run_on(time.perf_counter() + MAX_STOP_WAIT_S)[0] is not None:
                players[seat].close()
    rec.wall_ms = round((time.perf_counter() - t0) * 1000, 3)
    return rec


def settle() -> None:
    """Wait for the bots shut down with a grace period (at the end of a process's work)."""
    hub().settle()
