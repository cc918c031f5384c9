"""Tournaments: the config file, the schedule of duplicate deals, and the runner.

The schedule is a pure function of the config and the store's secret: game ``i``
always has the same seats and deal seed, whatever order games finish in. Each
deal is played once per seat rotation so the luck of the deal cancels, and the
schedule is ordered by rotation round (every deal's first rotation, then every
deal's second...) so that the bot pool can keep its never-the-same-deal-twice
promise with about one fresh process per bot per round. A tournament that was
killed resumes by playing only the games the store does not hold yet. The games
themselves are played by an executor (:mod:`arena.executors`): here, on worker
processes, or on Dask.
"""

from __future__ import annotations

import itertools
import os
import random
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import trio

from . import seeds
from .cluster import open_dask
from .engine import Rules, RulesError, rules_from
from .executors import (BotSetup, Executor, ExecutorBroken, ExecutorError, GameTask, PlayedGame,
                        open_in_process, store_played)
from .launch import Launcher  # noqa: F401 - tests replace it here to run bots in-process
from .limits import Limits
from .manifest import BotSpec, ManifestError, load_bot
from .referee import GameRecord, TimeControl
from .runlock import LockHeld, tournament_lock
from .store import Store
from .worker import open_workers

MAX_TABLES = 2000  # more k-subsets than this are sampled (seeded) rather than all played
SCHEDULE_VERSION = 2  # 2: deal seeds from the store's secret, games ordered by rotation round


class ConfigError(ValueError):
    """A tournament file or flag that cannot be run; the message names the field."""


class TournamentBusy(ConfigError):
    """Another process is playing this tournament in this store."""


class TournamentIncomplete(ConfigError):
    """Games could not be played (the arena's fault, not a bot's); the rest are stored, resumable."""


@dataclass
class TournamentConfig:
    name: str = "demo"
    bots: list[str] = field(default_factory=lambda: ["random", "lowest", "heuristic"])
    format: str = "round-robin"  # or "gauntlet"
    candidates: list[str] = field(default_factory=list)  # gauntlet: the bots under test
    rules: str = "classic"
    options: dict[str, Any] = field(default_factory=dict)
    seats: int = 2
    deals: int = 4  # deals per table; each is played once per seat rotation
    seed: int = 1
    concurrency: int = 0  # 0: number of cores
    max_turns: int = 2000
    move_ms: int = 1000
    bank_ms: int = 10_000
    handshake_ms: int = 10_000
    restart_each_game: bool = False
    sandbox: bool | None = None  # None: bubblewrap where it works (arena.launch.Launcher)
    trusted_bots: bool = False  # run bots as the referee's own user, on purpose
    max_tables: int = MAX_TABLES
    store: str = "arena-data/arena.sqlite"
    limits: dict[str, int] = field(default_factory=dict)
    processes: int = 0  # referee processes sharing the games; 0: one per core, up to concurrency
    cluster: str = ""  # a Dask scheduler (tcp://HOST:PORT) to run the games on; "" plays here (docs/CLUSTER.md)

    def ruleset(self) -> Rules:
        try:
            return rules_from(self.rules, dict(self.options))
        except (RulesError, TypeError) as e:
            raise ConfigError(f"rules: {e}") from None

    def clock(self) -> TimeControl:
        return TimeControl(self.move_ms, self.bank_ms, self.handshake_ms)

    def fingerprint(self) -> dict[str, Any]:
        """What decides the games; a resumed run must match it. Runtime knobs are left out."""
        keep = ("bots", "format", "candidates", "rules", "options", "seats", "deals", "seed",
                "max_turns", "max_tables")
        # "schedule" tells this schedule (secret seeds, rotation rounds) from the older public one
        return {**{k: v for k, v in asdict(self).items() if k in keep}, "schedule": SCHEDULE_VERSION}

    @property
    def workers(self) -> int:
        return self.concurrency if self.concurrency > 0 else (os.cpu_count() or 1)

    @property
    def process_count(self) -> int:
        if self.processes > 0:
            return min(self.processes, self.workers)
        return max(1, min(self.workers, os.cpu_count() or 1))


def load_config(path: str | Path | None, overrides: dict[str, Any] | None = None) -> TournamentConfig:
    """The file (if any), then the flags, each validated by :mod:`arena.config`."""
    from .config import ConfigFileError, read_toml, tournament_data
    known = set(TournamentConfig.__dataclass_fields__)
    data: dict[str, Any] = {}
    try:
        if path is not None:
            p = Path(path)
            data = tournament_data(read_toml(p, "tournament file"), str(p), known)
            data["bots"] = [_resolve(b, p.parent) for b in data.get("bots", [])]
            data["candidates"] = [_resolve(b, p.parent) for b in data.get("candidates", [])]
            data.setdefault("name", p.stem)
        flags = {k: v for k, v in (overrides or {}).items() if v is not None}
        data.update(tournament_data(flags, "command line", known))
    except ConfigFileError as e:
        raise ConfigError(str(e)) from None
    cfg = TournamentConfig(**data)
    check_config(cfg)
    return cfg


def _resolve(ref: str, base: Path) -> str:
    """Paths in a tournament file are relative to the file; bundled names stay names."""
    p = base / ref
    return str(p.resolve()) if p.exists() else ref


def check_config(cfg: TournamentConfig) -> None:
    rules = cfg.ruleset()
    if cfg.format not in ("round-robin", "gauntlet"):
        raise ConfigError("format must be 'round-robin' or 'gauntlet'")
    if not rules.min_players <= cfg.seats <= rules.max_players:
        raise ConfigError(f"seats: {rules.name} is for {rules.min_players}-{rules.max_players} players, not {cfg.seats}")
    pool = cfg.bots + cfg.candidates
    if cfg.format == "gauntlet" and not cfg.candidates:
        raise ConfigError("a gauntlet needs candidates = [...] to play against the bots")
    if cfg.format == "round-robin" and len(cfg.bots) < cfg.seats:
        raise ConfigError(f"{cfg.seats} seats need at least {cfg.seats} bots, got {len(cfg.bots)}")
    if cfg.format == "gauntlet" and len(cfg.bots) < cfg.seats - 1:
        raise ConfigError(f"a {cfg.seats}-seat gauntlet needs at least {cfg.seats - 1} field bots")
    if len(set(pool)) != len(pool):
        raise ConfigError("each bot may be listed once")
    for name, lo in (("deals", 1), ("max_turns", 10), ("move_ms", 1), ("handshake_ms", 1), ("max_tables", 1)):
        if getattr(cfg, name) < lo:
            raise ConfigError(f"{name} must be at least {lo}")
    if cfg.bank_ms < 0 or cfg.concurrency < 0 or cfg.processes < 0:
        raise ConfigError("bank_ms, concurrency and processes must not be negative")
    try:
        Limits(**cfg.limits)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"limits: {e}") from None


@dataclass(frozen=True)
class ScheduledGame:
    index: int
    table: int
    deal: int
    rotation: int
    seats: tuple[str, ...]  # bot labels in seat order
    seed: int


def tables(cfg: TournamentConfig, labels: dict[str, str]) -> list[tuple[str, ...]]:
    """The groups of bots that meet: every k-subset (round-robin), or each candidate with each
    (k-1)-subset of the field (gauntlet); more than ``max_tables`` are sampled with the seed."""
    bots = [labels[b] for b in cfg.bots]
    if cfg.format == "round-robin":
        groups = list(itertools.combinations(bots, cfg.seats))
    else:
        groups = [(labels[c],) + rest for c in cfg.candidates
                  for rest in itertools.combinations(bots, cfg.seats - 1)]
    if len(groups) > cfg.max_tables:
        groups = random.Random(cfg.seed).sample(groups, cfg.max_tables)
    return groups


def schedule(cfg: TournamentConfig, labels: dict[str, str], secret: bytes) -> list[ScheduledGame]:
    """Every game, ordered by rotation round; deal seeds from ``secret`` (:func:`arena.seeds.load_secret`)."""
    groups = tables(cfg, labels)
    seed = {(t, d): seeds.deal_seed(secret, cfg.seed, t, d) for t in range(len(groups)) for d in range(cfg.deals)}
    out = []
    for r in range(cfg.seats):
        for t, table in enumerate(groups):
            for d in range(cfg.deals):
                out.append(ScheduledGame(len(out), t, d, r, table[r:] + table[:r], seed[t, d]))
    return out


def load_bots(cfg: TournamentConfig) -> dict[str, BotSpec]:
    """Bot reference -> spec; two references to one bot version are refused."""
    specs: dict[str, BotSpec] = {}
    for ref in cfg.bots + cfg.candidates:
        try:
            spec = load_bot(ref)
        except ManifestError as e:
            raise ConfigError(str(e)) from None
        if spec.human:
            raise ConfigError("a tournament cannot seat a human")
        if any(s.label == spec.label for s in specs.values()):
            raise ConfigError(f"{spec.label} is listed twice")
        specs[ref] = spec
    return specs


class Reporter:
    """What the runner tells the screen; the CLI supplies a rich or a plain one."""

    def started(self, cfg: TournamentConfig, total: int, done: int) -> None: ...
    def game_done(self, game: ScheduledGame, record: GameRecord) -> None: ...
    def incident(self, text: str) -> None: ...  # the arena's own trouble (a worker died), as it happens
    def finished(self, interrupted: bool) -> None: ...


@dataclass
class RunStats:
    """What one run did, beyond the records: for the summary and for tests."""

    submitted: int = 0
    stored: int = 0
    duplicates: int = 0  # records the store already held (another runner stored them first): ignored
    failed: list[tuple[int, str]] = field(default_factory=list)  # (game index, why) not stored
    incidents: list[str] = field(default_factory=list)  # e.g. a worker process that died and was replaced


def open_executor(cfg: TournamentConfig, setup: BotSetup, games: int, *, launcher: Callable | None = None,
                  client: Any = None, on_incident: Callable[[str], None] | None = None):
    """The executor a run's settings ask for: Dask with ``cluster``, worker processes when more than
    one process would help, else this process (always, with an in-process ``launcher`` of fakes)."""
    if cfg.cluster or client is not None:
        return open_dask(setup, cfg.cluster, client=client)
    processes = min(cfg.process_count, max(1, games))
    if launcher is None and processes > 1:
        slots = max(1, -(-cfg.workers // processes))
        return open_workers(setup, processes, slots, on_incident=on_incident)
    return open_in_process(setup, capacity=min(cfg.workers, max(1, games)), launcher=launcher)


def bot_setup(cfg: TournamentConfig, specs: dict[str, BotSpec]) -> BotSetup:
    return BotSetup.of(specs, clock=cfg.clock(), limits=dict(cfg.limits), sandbox=cfg.sandbox,
                       restart_each_game=cfg.restart_each_game, trusted_bots=cfg.trusted_bots)


async def run_tournament(cfg: TournamentConfig, store: Store, reporter: Reporter | None = None,
                         *, launcher: Callable | None = None, keep_logs: bool = False,
                         collect: bool = True, stats: RunStats | None = None,
                         client: Any = None) -> list[GameRecord]:
    """Play every scheduled game the store does not hold yet; returns the records played now.

    Their step logs (steps, setup events, stderr) are in the store and are dropped from the
    returned records unless ``keep_logs``: a long tournament would hold every log in memory.
    ``collect=False`` returns nothing at all, so memory stays flat however many games are
    played (the command line does this: the reporter and the store see every game).
    ``launcher`` plays in this process with it (tests' fakes); ``client`` is a Dask client.

    Raises :class:`TournamentBusy` if another process is playing it in this store, and
    :class:`TournamentIncomplete` if games could not be played (they stay unstored; the
    same command plays them later)."""
    reporter = reporter or Reporter()
    stats = stats if stats is not None else RunStats()
    try:
        with tournament_lock(store.path, cfg.name):
            return await _run(cfg, store, reporter, stats, launcher, keep_logs, collect, client)
    except LockHeld as e:
        raise TournamentBusy(str(e)) from None


async def _run(cfg: TournamentConfig, store: Store, reporter: Reporter, stats: RunStats,
               launcher: Callable | None, keep_logs: bool, collect: bool, client: Any) -> list[GameRecord]:
    rules = cfg.ruleset()
    specs = load_bots(cfg)
    labels = {ref: spec.label for ref, spec in specs.items()}
    games = schedule(cfg, labels, seeds.load_secret(store.path.parent))
    if launcher is None:  # no containment, or a bot its uid cannot run: one error, no game played
        preflight = getattr(Launcher(Limits(**cfg.limits), cfg.sandbox, cfg.trusted_bots), "preflight", None)
        if preflight is not None:  # (test doubles stand in for Launcher without one)
            await preflight(specs.values())
    store.begin_tournament(cfg.name, cfg.fingerprint(), len(games))
    for spec in specs.values():
        store.register_bot(spec.label, spec.name, spec.version, spec.files_hash(),
                           {"command": list(spec.command), "author": spec.author,
                            "build": list(spec.build) if spec.build else None}, str(spec.root))
    done = store.done_indexes(cfg.name)
    todo = [g for g in games if g.index not in done]
    played: list[GameRecord] = []
    options = rules.options()
    interrupted = shown = True

    def incident(text: str) -> None:
        stats.incidents.append(text)
        reporter.incident(text)

    async def play_all(ex: Executor) -> None:
        send, receive = trio.open_memory_channel[ScheduledGame](0)
        trouble: list[BaseException] = []

        async def loop() -> None:
            async for g in receive:
                try:
                    result = await ex.play(GameTask(f"{cfg.name}-{g.index:06d}", g.seed, g.seats, options,
                                                    cfg.max_turns))
                    keep(g, result)
                except ExecutorBroken as e:
                    trouble.append(TournamentIncomplete(f"{e}; the games played so far are stored"))
                    nursery.cancel_scope.cancel()
                except ExecutorError as e:
                    stats.failed.append((g.index, str(e)))
                except Exception as e:  # noqa: BLE001 - one plain error, not a group of them
                    trouble.append(e)
                    nursery.cancel_scope.cancel()

        async with trio.open_nursery() as nursery:
            for _ in range(max(1, min(ex.capacity, len(todo)))):
                nursery.start_soon(loop)
            async with send:
                for g in todo:
                    stats.submitted += 1
                    await send.send(g)
        if trouble:
            raise trouble[0]

    def keep(g: ScheduledGame, result: PlayedGame) -> None:
        if not store_played(store, cfg.name, g.index, list(g.seats), result):
            stats.duplicates += 1
            return
        stats.stored += 1
        record = result.full_record() if keep_logs else result.record
        if not keep_logs:
            record.steps, record.setup_events, record.stderr = [], [], []
        if collect:
            record.rules = options  # one copy for the whole run, not one per game
            played.append(record)
        reporter.game_done(g, record)

    try:
        if todo:
            if cfg.cluster == "" and client is None:
                from .botproc import cleanup_stale
                cleanup_stale()
            shown = False  # an executor that cannot start (no cluster) is one error, before any display
            try:
                async with open_executor(cfg, bot_setup(cfg, specs), len(todo), launcher=launcher,
                                         client=client, on_incident=incident) as ex:
                    reporter.started(cfg, len(games), len(done))
                    shown = True
                    await play_all(ex)
                    for text in ex.incidents:
                        if text not in stats.incidents:
                            incident(text)
            except ExecutorError as e:  # the executor could not start (no cluster, no Dask)
                raise TournamentIncomplete(str(e)) from None
        else:
            reporter.started(cfg, len(games), len(done))
        if stats.failed:
            first = min(stats.failed)
            raise TournamentIncomplete(
                f"{len(stats.failed)} of {stats.submitted} game(s) could not be played and were not stored "
                f"(first: game {first[0]}: {first[1]}); the rest are stored: run the same command again "
                "to play the missing ones")
        interrupted = False
        store.finish_tournament(cfg.name)
    finally:
        if shown:
            reporter.finished(interrupted)
    return played
