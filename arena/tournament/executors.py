"""One way to run games: ``await executor.play_deal(tasks) -> [PlayedGame | ExecutorError]``, a deal's games.

Three executors implement it: :class:`InProcessExecutor` (here: lanes in this process, each a
thread playing on the blocking shell with a :class:`BotPool` of its own, driven from a trio loop), :class:`arena.tournament.worker.WorkerExecutor` (referee
processes on this machine, each a :class:`BlockingExecutor`, or an in-process executor when
it plays several games at once) and :class:`arena.tournament.cluster.DaskExecutor` (Dask
workers, each a :class:`BlockingExecutor` per run). A caller (a tournament, a match, a ladder placement) builds
:class:`GameTask` s, groups them by deal (:func:`by_deal`), calls ``play_deal`` as many times at
once as the executor's ``capacity`` says, and stores what comes back with :func:`store_played`; it
never needs to know where a game ran.

This module imports neither the tournament nor the other executors, so the
import graph has no cycle: tournament -> worker, cluster -> executors.

Fair play lives here in two rules. A bot process never plays the same deal twice
(``end`` reveals every card, so a process that saw a deal in one seat rotation
would know the hidden cards in the next): the pool's. And a deal is played in one place,
one game after the other: callers hand an executor a deal's every seat order at once
(:func:`by_deal`, :meth:`play_deal`), and it plays them back to back on one
:class:`BlockingExecutor`. So no two seat orders of a deal run at the same time, and no process
that saw a deal (each seat order's hands, or its ``end``) is thawed, in another lane, worker
process or Dask worker, while another seat order of that deal is played: two processes of one bot
on turn at once share a CPU, and whatever channel the sandbox leaves between them.
Each game records which pooled process played each seat, so the store can prove it.
"""

from __future__ import annotations

import queue
import threading
import uuid
import zlib
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import msgpack
import orjson
import trio

from ..bots.containment import Containment
from ..bots.filesystem import SystemView
from ..bots.manifest import BotSpec, ManifestError, load_bot, refused_bot
from ..engine.rules import Rules
from ..errors import ArenaError
from ..faults import ArenaFailure
from ..bots.blocking import Hub, Interrupted, adopt_hub
from ..referee import GameRecord, TimeControl
from ..referee.blocking import BlockingLaunch, BlockingPlayer, blocking_launch, play_game, settle
from ..referee.seat import WALL, Timer
from .store import Store, pack_log, summary


class ExecutorError(ArenaError, RuntimeError):
    """A game could not be played because of the arena, not a bot (a bot's faults are in its record)."""


class ExecutorBroken(ExecutorError):
    """The executor can play no more games (its workers keep dying, the cluster is gone)."""


@dataclass(frozen=True)
class GameTask:
    """Everything that decides one game, in plain values so it can travel to another process.

    ``seed`` is the secret deal seed (:mod:`arena.tournament.seeds`); it is also the deal's identity
    for the pool's never-the-same-deal-twice rule, which is stricter than (tournament,
    table, deal): two tournaments with the same seed deal the same cards."""

    game_id: str
    seed: int
    seats: tuple[str, ...]  # bot labels, seat order
    max_turns: int
    moves: tuple[int, ...] = ()  # a deal suite's position: the opening played for the seats

    def wire(self) -> dict[str, Any]:
        return {"game_id": self.game_id, "seed": self.seed, "seats": list(self.seats), "max_turns": self.max_turns,
                "moves": list(self.moves)}

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> GameTask:
        return cls(d["game_id"], d["seed"], tuple(d["seats"]), d["max_turns"], tuple(d.get("moves", ())))


@dataclass(frozen=True)
class BotSetup:
    """What every game of a run shares: the rules, the bots (by label), their clock, limits and
    sandbox. It crosses to another process once (:meth:`wire`), before the games; a game then
    travels as its :class:`GameTask`, and comes back without the rules (:meth:`PlayedGame.to_bytes`)."""

    specs: dict[str, BotSpec]
    refs: dict[str, str]  # label -> how another process on this machine loads the bot again
    rules: Rules
    clock: TimeControl = TimeControl()
    limits: dict[str, int] = field(default_factory=dict)
    containment: Containment = Containment.AUTO  # resolved by each process's Launcher (AUTO)
    restart_each_game: bool = False
    fixed_schedule: bool = False  # requests on a fixed schedule (arena.referee.blocking.play_game)
    ponder: bool = False  # seats left running off their turn (arena.referee.blocking.play_game)
    system: tuple[str, ...] = ()  # extra system a stranger view holds (checked again by the Launcher)
    view: SystemView = SystemView.HOST  # STRANGER: strangers' seats see the gVisor seat's view in every mode

    @classmethod
    def of(cls, refs: Iterable[str] | dict[str, BotSpec], **kw: Any) -> BotSetup:
        """From bot references (loaded here) or from ref -> already loaded spec."""
        loaded = refs if isinstance(refs, dict) else {r: load_bot(r) for r in refs}
        return cls({s.label: s for s in loaded.values()}, {s.label: r for r, s in loaded.items()}, **kw)

    def wire(self) -> dict[str, Any]:
        """The setup as plain data: each bot travels as its ref and the files hash this run read it
        under, which :meth:`from_wire` checks on arrival."""
        hashes = {label: spec.files_hash() for label, spec in self.specs.items() if not spec.human}
        return {"refs": self.refs, "hashes": hashes, "rules": self.rules.options(), "clock": self.clock.as_json(),
                "limits": self.limits, "containment": self.containment.value,
                "restart_each_game": self.restart_each_game, "fixed_schedule": self.fixed_schedule,
                "ponder": self.ponder, "system": list(self.system), "view": self.view.value}

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> BotSetup:
        """The setup :meth:`wire` made; a containment this arena does not know is refused, never
        taken for a weaker one."""
        try:
            containment = Containment(d["containment"])
            view = SystemView(d.get("view", SystemView.HOST.value))
        except (KeyError, ValueError):
            from ..bots.launch import ContainmentError
            raise ContainmentError(f"the run's setup names no known containment: {d.get('containment')!r}, "
                                   f"view {d.get('view')!r}") from None
        hashes = d.get("hashes", {})
        specs = {label: _arrived(label, ref, hashes.get(label)) for label, ref in d["refs"].items()}
        return cls(specs, dict(d["refs"]), Rules.from_options(d["rules"]), TimeControl(**d["clock"]),
                   dict(d["limits"]), containment, d["restart_each_game"], d.get("fixed_schedule", False),
                   d.get("ponder", False), tuple(d.get("system", ())), view)


def _arrived(label: str, ref: str, digest: str | None) -> BotSpec:
    """The bot ``ref`` as this process loads it, checked against the hash the run read it under.
    A folder changed since (edited, its bot.toml broken or naming another bot, gone) is the author's
    doing: the bot becomes a :func:`~arena.bots.manifest.refused_bot` whose every start fails
    naming the change, so it forfeits and the other bots' games go on (a worker that raised here
    died, and with it the run)."""
    try:
        spec = load_bot(ref)
        if spec.label != label:
            raise ManifestError(f"its bot.toml now names {spec.label}")
        if digest is not None and not spec.has_files(digest):
            raise ManifestError("a file differs")
    except ManifestError as e:  # FolderError too: what the folder holds now
        return refused_bot(label, ref, f"{ref}: {label}'s files changed since the run read them ({e})")
    return spec


@dataclass
class PlayedGame:
    """A finished game as an executor returns it: the record (full when played here, its summary
    when it came from another process), which pooled process played each seat, and the log
    already packed for the store (packed where the game ran, so the storing parent does not)."""

    record: GameRecord
    processes: list[str]
    summary: dict[str, Any]
    log: bytes

    @classmethod
    def of(cls, record: GameRecord, processes: list[str]) -> PlayedGame:
        full = record.as_json()
        full["processes"] = processes
        return cls(record, processes, summary(full), pack_log(full))

    def to_bytes(self) -> bytes:
        """The one form a game crosses a process boundary in: msgpack, the log as raw bytes, the
        summary without the rules (the receiver sent them in the run's setup)."""
        brief = {k: v for k, v in self.summary.items() if k != "rules"}
        return msgpack.packb({"summary": brief, "log": self.log}, use_bin_type=True)

    @classmethod
    def from_bytes(cls, data: bytes, rules: dict[str, Any]) -> PlayedGame:
        """:meth:`to_bytes` read back; ``rules`` is the run's ``Rules.options()`` (one dict that
        every record of the run shares), put back in the summary the store keeps."""
        d = msgpack.unpackb(data, raw=False, strict_map_key=False)
        summary = d["summary"]
        summary["rules"] = rules
        return cls(GameRecord.from_json(summary), summary.get("processes", []), summary, d["log"])

    def full_record(self) -> GameRecord:
        """The record with its step log (decoded from the packed log if it came as a summary)."""
        if self.record.steps or not self.summary.get("turns"):
            return self.record
        return GameRecord.from_json(orjson.loads(zlib.decompress(self.log)))


def store_played(store: Store, tournament: str, index: int, seats: list[str], played: PlayedGame) -> bool:
    """Store a played game; False if the store already had it (another run stored it first)."""
    return store.save_game(tournament, index, seats, played.summary, played.log)


Played = PlayedGame | ExecutorError  # one game of a deal: played, or why the arena could not play it


def by_deal(games: Iterable[Any]) -> list[list[Any]]:
    """Games (anything with a deal ``seed``: :class:`GameTask`, a scheduled game) grouped by deal,
    each group in the order given, the groups in the order of their first game. A group is what an
    executor plays as one (:meth:`Executor.play_deal`): every game of one deal, its seat orders and,
    with a deal suite, which deals the same cards at every table, its every table."""
    groups: dict[int, list[Any]] = {}
    for g in games:
        groups.setdefault(g.seed, []).append(g)
    return list(groups.values())


class Executor(Protocol):
    """Plays games, a deal at a time. ``capacity``: how many ``play_deal`` calls to keep in flight to
    keep it busy. ``incidents``: what went wrong in the arena itself (a worker that died), for the
    summary. ``play`` is a deal of one game (its :class:`ExecutorError` raised)."""

    capacity: int
    incidents: list[str]

    async def play_deal(self, tasks: list[GameTask]) -> list[Played]: ...

    async def play(self, task: GameTask) -> PlayedGame: ...


def one_deal(tasks: list[GameTask]) -> list[GameTask]:
    """``tasks`` if they are one deal's games; a caller that mixes deals is the arena's bug."""
    if not tasks or len({t.seed for t in tasks}) != 1:
        raise ValueError(f"play_deal takes the games of one deal, got {len({t.seed for t in tasks})} deals")
    return tasks


def one_game(played: list[Played]) -> PlayedGame:
    """A deal of one game's game, or its error raised (each executor's ``play``)."""
    if isinstance(played[0], ExecutorError):
        raise played[0]
    return played[0]


Launch = Callable[[BotSpec], Any]  # a spec -> a started bot on the blocking shell


@dataclass
class _Pooled:
    serial: str
    spec: BotSpec
    seen: set[int] = field(default_factory=set)
    last: int | None = None  # the deal of its latest game


class BotPool:
    """Bot processes lent one game at a time, so a process serves many games (a match) in turn,
    but never a deal it has already seen: such a game gets another process. Deals come seat order
    after seat order (:meth:`BlockingExecutor.play_deal`): the processes whose latest game was this
    deal, up to one a seat less than the table, wait, frozen, for the next deal (two processes per
    bot serve a two-seat match or a lane of any length); the other idle ones that saw the deal are
    killed where they wait, never thawed while it is played (a retired process is thawed for its
    grace: it could pass on the cards it saw).

    Each lent player has a serial ``<pool id>.<n>``, unique across machines and runs, that
    the game record keeps per seat. A serial covers the player's process and the fresh
    ones started after a fault: none of them sees a deal twice either. A pool and its players
    belong to one thread (a blocking bot is used by the thread that started it)."""

    def __init__(self, launcher: Launch, clock: TimeControl, *, restart_each_game: bool = False,
                 timer: Timer = WALL):
        self.id = uuid.uuid4().hex[:8]
        self.launcher = launcher
        self.clock = clock
        self.restart = restart_each_game
        self.timer = timer
        self.idle: dict[BotSpec, list[BlockingPlayer]] = {}
        self.info: dict[BlockingPlayer, _Pooled] = {}
        self.started = 0

    def take(self, spec: BotSpec, deal: int, seats: int) -> BlockingPlayer:
        """A process of ``spec`` for a game of ``deal`` at a table of ``seats``."""
        idle = self.idle.setdefault(spec, [])  # oldest first: in the order they were given back
        unseen = [p for p in idle if deal not in self.info[p].seen]
        playing = [p for p in idle if self.info[p].last == deal][::-1][:seats - 1]  # the deal's other seat orders
        spent = [p for p in idle if deal in self.info[p].seen and p not in playing]
        if unseen:
            player = unseen[-1]  # the one given back last
            idle.remove(player)
        else:
            player = BlockingPlayer(spec, self.launcher, self.clock, restart_each_game=self.restart,
                                    timer=self.timer)
            self.started += 1
            self.info[player] = _Pooled(f"{self.id}.{self.started}", spec)
        for p in spent:
            idle.remove(p)
            self._kill(p)
        self.info[player].seen.add(deal)
        self.info[player].last = deal
        return player

    def serial(self, player: BlockingPlayer) -> str:
        return self.info[player].serial

    def give_back(self, player: BlockingPlayer) -> None:
        self.idle.setdefault(self.info[player].spec, []).append(player)

    def _kill(self, player: BlockingPlayer) -> None:
        """Stop an idle player where it waits: killed frozen, it runs no code of its own
        (:meth:`~arena.bots.cgroups.BotCgroup.kill`), where a shutdown would thaw it for its grace."""
        del self.info[player]
        player.close()

    def drop(self, deal: int) -> None:
        """Kill every idle process that saw ``deal``: a deal given up part way (its games raised)
        may be played again elsewhere (a Dask retry, another referee worker), and none of them may
        run meanwhile, here or anywhere."""
        for spec, idle in self.idle.items():
            for p in [p for p in idle if deal in self.info[p].seen]:
                idle.remove(p)
                self._kill(p)

    def close(self) -> None:
        """Shut every player down and wait out their grace."""
        for p in list(self.info):
            p.shutdown()
        settle()


class BlockingExecutor:
    """Plays one game at a time on the blocking shell, in the calling thread: a referee worker
    process, a Dask worker, and each lane of an :class:`InProcessExecutor`."""

    def __init__(self, setup: BotSetup, launcher: Launch | None = None, *, timer: Timer = WALL):
        self.setup = setup
        self.pool = BotPool(launcher or BlockingLaunch(default_launcher(setup)), setup.clock,
                            restart_each_game=setup.restart_each_game, timer=timer)
        self.timer = timer
        self.capacity = 1
        self.incidents: list[str] = []

    def play_deal(self, tasks: list[GameTask],
                  spec_of: Callable[[str], BotSpec] | None = None) -> list[PlayedGame | ArenaFailure]:
        """Every game of one deal, one after the other, here: each played, or the arena's failure that
        kept it from being played (the others are played all the same). ``spec_of``: a seat's spec by
        label (a Dask worker unpacks each bot when a game needs it; default: the setup's). Anything
        else raised gives the deal up: every idle process that saw it is killed first."""
        spec_of = spec_of or self.setup.specs.__getitem__
        out: list[PlayedGame | ArenaFailure] = []
        try:
            for task in one_deal(tasks):
                try:
                    out.append(self._play(task, [spec_of(label) for label in task.seats]))
                except ArenaFailure as e:
                    out.append(e)
        except BaseException:
            self.pool.drop(tasks[0].seed)
            raise
        return out

    def play(self, task: GameTask) -> PlayedGame:
        """A deal of one game; the arena's failure raised."""
        played = self.play_deal([task])[0]
        if isinstance(played, ArenaFailure):
            raise played
        return played

    def _play(self, task: GameTask, specs: list[BotSpec]) -> PlayedGame:
        players = [self.pool.take(spec, task.seed, len(specs)) for spec in specs]
        try:
            record = play_game(players, self.setup.rules, task.seed, game_id=task.game_id,
                               clock=self.setup.clock, max_turns=task.max_turns,
                               fixed_schedule=self.setup.fixed_schedule, ponder=self.setup.ponder,
                               given=task.moves, timer=self.timer)
        except Interrupted:  # called off mid-game: its bots stop now (they restart if lent again)
            for p in players:
                p.close()
            raise
        finally:
            for p in players:
                self.pool.give_back(p)
        return PlayedGame.of(record, [self.pool.serial(p) for p in players])

    def close(self) -> None:
        self.pool.close()


class _Lane:
    """A thread of its own that plays one game at a time with a :class:`BlockingExecutor` of its
    own: its pooled players outlive a game, and a blocking bot is used by the thread that started
    it. A job called off by its caller (:meth:`run` cancelled) is interrupted in its hub's wait,
    and its bots are stopped before :meth:`run` returns."""

    def __init__(self, setup: BotSetup, launch: Launch, timer: Timer, n: int):
        self.jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.hub = Hub()
        self.thread = threading.Thread(target=self._serve, args=(setup, launch, timer), name=f"arena-lane-{n}",
                                       daemon=True)
        self.thread.start()

    def _serve(self, setup: BotSetup, launch: Launch, timer: Timer) -> None:
        adopt_hub(self.hub)
        ex = BlockingExecutor(setup, launch, timer=timer)
        try:
            while (job := self.jobs.get()) is not None:
                work, deliver = job
                self.hub.clear_interrupt()  # one meant for a job that had ended
                result: tuple[Any, BaseException | None]
                try:
                    result = (work(ex), None)
                except BaseException as e:  # noqa: BLE001 - delivered to the caller
                    result = (None, e)
                self._settle()
                deliver(result)
        finally:
            self.hub.clear_interrupt()
            ex.close()

    def _settle(self) -> None:
        """Finish the bots the job retired before it is handed back (an honest bot has exited by
        then: nothing to wait for). A retired bot is thawed and given its grace, which only this
        hub's waits end: a game shorter than the grace left it closing, and a lane given no game
        after it waited on its queue while a bot that ignores ``shutdown`` spun, unfrozen, beside
        the other lanes' games until the run's end (as on a Dask worker: cluster.RunReferee.play)."""
        try:
            self.hub.settle()
        except Interrupted:  # the job was called off meanwhile: its bots are finished all the same
            self.hub.settle()

    async def run(self, work: Callable[[BlockingExecutor], Any]) -> Any:
        token = trio.lowlevel.current_trio_token()
        done = trio.Event()
        box: list[Any] = []

        def arrived(result: Any) -> None:
            box.append(result)
            done.set()
        self.jobs.put((work, lambda result: token.run_sync_soon(arrived, result)))
        try:
            await done.wait()
        except trio.Cancelled:
            self.hub.interrupt()
            with trio.CancelScope(shield=True):
                await done.wait()
            raise
        await trio.lowlevel.checkpoint_if_cancelled()  # a caller cancelled meanwhile gets no game
        value, error = box[0]
        if error is not None:
            raise error
        return value

    def stop(self) -> None:
        self.jobs.put(None)


class InProcessExecutor:
    """Plays ``capacity`` games at once in this process, each on a lane (a thread with its own
    pool) running the blocking shell's :func:`~arena.referee.blocking.play_game`."""

    def __init__(self, setup: BotSetup, launch: Launch, capacity: int, timer: Timer = WALL):
        self.setup = setup
        self.capacity = max(1, capacity)
        self.incidents: list[str] = []
        self.launch = launch
        self._lanes = [_Lane(setup, launch, timer, i) for i in range(self.capacity)]
        self._idle = list(self._lanes)
        self._free = trio.Semaphore(self.capacity)

    async def play_deal(self, tasks: list[GameTask]) -> list[Played]:
        """A deal's games on one lane, back to back. A game the arena failed is an
        :class:`ExecutorError`: not stored, no forfeit: the tournament plays it on its next run."""
        one_deal(tasks)
        async with self._free:
            lane = self._idle.pop()
            try:
                played = await lane.run(lambda ex: ex.play_deal(tasks))
            finally:
                self._idle.append(lane)
        return [ExecutorError(f"{t.game_id}: {p}") if isinstance(p, ArenaFailure) else p
                for t, p in zip(tasks, played)]

    async def play(self, task: GameTask) -> PlayedGame:
        return one_game(await self.play_deal([task]))

    async def aclose(self) -> None:
        """Stop every lane: its players shut down and their grace waited out, in its own thread."""
        for lane in self._lanes:
            lane.stop()
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(self._join)

    def _join(self) -> None:
        for lane in self._lanes:
            lane.thread.join()
        release = getattr(self.launch, "release", None)
        if release is not None:  # every lane's bots are finished: the builds' copies go too
            release()


def default_launcher(setup: BotSetup) -> Launch:
    from ..bots.launch import Launcher
    from ..limits import Limits
    return Launcher(Limits(**setup.limits), setup.containment, system=tuple(setup.system), view=setup.view)


@asynccontextmanager
async def open_in_process(setup: BotSetup, *, capacity: int = 1, launcher: Any = None,
                          timer: Timer = WALL) -> AsyncIterator[InProcessExecutor]:
    """An in-process executor. ``launcher``: a :class:`~arena.bots.launch.Launcher` (default: the
    setup's), or a spec -> bot function (tests' in-process :class:`~arena.referee.testing.MockBot`
    s, timed on ``timer``)."""
    ex = InProcessExecutor(setup, blocking_launch(launcher or default_launcher(setup)), capacity, timer)
    try:
        yield ex
    finally:
        await ex.aclose()
