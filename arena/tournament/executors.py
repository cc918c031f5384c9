"""One way to run a game: ``await executor.play(task) -> PlayedGame``.

Three executors implement it: :class:`InProcessExecutor` (here: a trio loop and a
:class:`BotPool` in this process), :class:`arena.tournament.worker.WorkerExecutor` (referee
processes on this machine, each a :class:`BlockingExecutor`, or an in-process executor when
it plays several games at once) and :class:`arena.tournament.cluster.DaskExecutor` (Dask
workers, each a :class:`BlockingExecutor` per run). A caller (a tournament, a match, a ladder placement) builds
:class:`GameTask` s, calls ``play`` as many times at once as the executor's
``capacity`` says, and stores what comes back with :func:`store_played`; it
never needs to know where a game ran.

This module imports neither the tournament nor the other executors, so the
import graph has no cycle: tournament -> worker, cluster -> executors.

Fair play lives in the pool: a bot process never plays the same deal twice
(``end`` reveals every card, so a process that saw a deal in one seat rotation
would know the hidden cards in the next). Each game records which pooled
process played each seat, so the store can prove it.
"""

from __future__ import annotations

import uuid
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import msgpack
import orjson
import trio

from ..bots.manifest import BotSpec, FolderError, load_bot
from ..engine.rules import Rules
from ..errors import ArenaError
from ..faults import ArenaFailure
from ..referee import BotPlayer, GameRecord, TimeControl, run_game
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
    sandbox: bool | None = None  # None: bubblewrap where it works (arena.bots.launch.Launcher)
    restart_each_game: bool = False
    trusted_bots: bool = False  # bots run as the referee's own user, on purpose
    fixed_schedule: bool = False  # requests on a fixed schedule (arena.referee.driver.run_game)
    ponder: bool = False  # seats left running off their turn (arena.referee.driver.run_game)
    gvisor: bool = False  # every bot under gVisor (arena.bots.launch.Launcher)

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
                "limits": self.limits, "sandbox": self.sandbox, "restart_each_game": self.restart_each_game,
                "trusted_bots": self.trusted_bots, "fixed_schedule": self.fixed_schedule, "ponder": self.ponder,
                "gvisor": self.gvisor}

    @classmethod
    def from_wire(cls, d: dict[str, Any]) -> BotSetup:
        specs = {label: load_bot(ref) for label, ref in d["refs"].items()}
        for label, digest in d.get("hashes", {}).items():
            spec = specs.get(label)
            if spec is not None and spec.files_hash() != digest:
                raise FolderError(f"{spec.root}: {label}'s files changed since the run read them; run again")
        return cls(specs, dict(d["refs"]), Rules.from_options(d["rules"]), TimeControl(**d["clock"]),
                   dict(d["limits"]), d["sandbox"],
                   d["restart_each_game"], d.get("trusted_bots", False), d.get("fixed_schedule", False),
                   d.get("ponder", False), d.get("gvisor", False))


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


class Executor(Protocol):
    """Plays games. ``capacity``: how many ``play`` calls to keep in flight to keep it busy.
    ``incidents``: what went wrong in the arena itself (a worker that died), for the summary."""

    capacity: int
    incidents: list[str]

    async def play(self, task: GameTask) -> PlayedGame: ...


Launch = Callable[[BotSpec], Awaitable[Any]]


@dataclass
class _Pooled:
    serial: str
    spec: BotSpec
    seen: set[int] = field(default_factory=set)


class BotPool:
    """Bot processes lent one game at a time, so a process serves many games (a match) in turn,
    but never a deal it has already seen: such a game gets another process, and the idle
    processes that saw the deal are retired (with the schedule ordered by seat-rotation
    round, that is about one fresh process per bot per round and concurrent game).

    Each lent player has a serial ``<pool id>.<n>``, unique across machines and runs, that
    the game record keeps per seat. A serial covers the player's process and the fresh
    ones started after a fault: none of them sees a deal twice either."""

    def __init__(self, launcher: Launch, clock: TimeControl, *, restart_each_game: bool = False,
                 start_limit: int = 4):
        self.id = uuid.uuid4().hex[:8]
        self.launcher = launcher
        self.clock = clock
        self.restart = restart_each_game
        self.starting = trio.CapacityLimiter(max(1, start_limit))
        self.idle: dict[BotSpec, list[BotPlayer]] = {}
        self.info: dict[BotPlayer, _Pooled] = {}
        self.started = 0
        self._nursery: trio.Nursery | None = None

    async def _launch(self, spec: BotSpec) -> Any:
        async with self.starting:  # bounded: a big tournament never starts hundreds at once
            return await self.launcher(spec)

    def take(self, spec: BotSpec, deal: int) -> BotPlayer:
        idle = self.idle.setdefault(spec, [])
        for i in range(len(idle) - 1, -1, -1):
            if deal not in self.info[idle[i]].seen:
                player = idle.pop(i)
                break
        else:
            for old in [p for p in idle if deal in self.info[p].seen]:
                idle.remove(old)
                self._retire(old)
            player = self._new_player(spec)
            self.started += 1
            self.info[player] = _Pooled(f"{self.id}.{self.started}", spec)
        self.info[player].seen.add(deal)
        return player

    def _new_player(self, spec: BotSpec) -> BotPlayer:
        return BotPlayer(spec, self._launch, self.clock, restart_each_game=self.restart)

    def serial(self, player: BotPlayer) -> str:
        return self.info[player].serial

    def give_back(self, player: BotPlayer) -> None:
        self.idle.setdefault(self.info[player].spec, []).append(player)

    def _retire(self, player: BotPlayer) -> None:
        del self.info[player]
        if self._nursery is not None:
            self._nursery.start_soon(player.shutdown)

    async def close(self) -> None:
        with trio.CancelScope(shield=True):
            async with trio.open_nursery() as n:
                for p in list(self.info):
                    n.start_soon(p.shutdown)


@asynccontextmanager
async def open_pool(launcher: Launch, clock: TimeControl, **kw: Any) -> AsyncIterator[BotPool]:
    """A pool whose retired processes are shut down in the background, and all of them at the end."""
    pool = BotPool(launcher, clock, **kw)
    failure: BaseException | None = None
    try:
        async with trio.open_nursery() as nursery:
            pool._nursery = nursery
            try:
                yield pool
            except BaseException as e:
                failure = e  # raised below, outside the nursery: the caller's error, not a group of one
            pool._nursery = None
    finally:
        await pool.close()
    if failure is not None:
        raise failure


class InProcessExecutor:
    """Plays games in this trio loop with bots from one :class:`BotPool`."""

    def __init__(self, setup: BotSetup, pool: BotPool, capacity: int):
        self.setup = setup
        self.pool = pool
        self.capacity = max(1, capacity)
        self.incidents: list[str] = []

    async def play(self, task: GameTask) -> PlayedGame:
        players = [self.pool.take(self.setup.specs[label], task.seed) for label in task.seats]
        try:
            record = await run_game(players, self.setup.rules, task.seed, game_id=task.game_id,
                                    clock=self.setup.clock, max_turns=task.max_turns,
                                    fixed_schedule=self.setup.fixed_schedule, ponder=self.setup.ponder,
                                    given=task.moves)
        except ArenaFailure as e:  # not stored, no forfeit: the tournament plays it on its next run
            raise ExecutorError(f"{task.game_id}: {e}") from None
        finally:
            for p in players:
                self.pool.give_back(p)
        return PlayedGame.of(record, [self.pool.serial(p) for p in players])


class BlockingPool(BotPool):
    """The pool on the blocking shell, for a process that plays one game at a time: the same
    lending rules, players that need no event loop, retirement that waits for no grace."""

    def _new_player(self, spec: BotSpec) -> Any:
        from ..referee.blocking import BlockingPlayer
        return BlockingPlayer(spec, self.launcher, self.clock, restart_each_game=self.restart)

    def _retire(self, player: Any) -> None:
        del self.info[player]
        player.shutdown()  # its grace runs in the shell's hub

    def close_now(self) -> None:
        from ..referee.blocking import settle
        for p in list(self.info):
            p.shutdown()
        settle()


class BlockingExecutor:
    """Plays one game at a time on the blocking shell (a referee worker process)."""

    def __init__(self, setup: BotSetup, launcher: Any = None):
        from ..referee.blocking import BlockingLaunch
        self.setup = setup
        self.pool = BlockingPool(launcher or BlockingLaunch(default_launcher(setup)), setup.clock,
                                 restart_each_game=setup.restart_each_game)
        self.capacity = 1
        self.incidents: list[str] = []

    def play(self, task: GameTask) -> PlayedGame:
        return self.play_with(task, [self.setup.specs[label] for label in task.seats])

    def play_with(self, task: GameTask, specs: list[BotSpec]) -> PlayedGame:
        """``play`` with the seats' specs given (a Dask worker unpacks each bot when a game needs it)."""
        from ..referee.blocking import play_game
        players = [self.pool.take(spec, task.seed) for spec in specs]
        try:
            record = play_game(players, self.setup.rules, task.seed, game_id=task.game_id,
                               clock=self.setup.clock, max_turns=task.max_turns,
                               fixed_schedule=self.setup.fixed_schedule, ponder=self.setup.ponder,
                               given=task.moves)
        finally:
            for p in players:
                self.pool.give_back(p)
        return PlayedGame.of(record, [self.pool.serial(p) for p in players])

    def close(self) -> None:
        self.pool.close_now()


def default_launcher(setup: BotSetup) -> Launch:
    from ..bots.launch import Launcher
    from ..limits import Limits
    return Launcher(Limits(**setup.limits), setup.sandbox, setup.trusted_bots, gvisor=setup.gvisor)


@asynccontextmanager
async def open_in_process(setup: BotSetup, *, capacity: int = 1,
                          launcher: Launch | None = None) -> AsyncIterator[InProcessExecutor]:
    """An in-process executor; ``launcher`` (tests' in-process fakes) defaults to real processes."""
    launch = launcher or default_launcher(setup)
    async with open_pool(launch, setup.clock, restart_each_game=setup.restart_each_game,
                         start_limit=max(2, capacity)) as pool:
        yield InProcessExecutor(setup, pool, capacity)
