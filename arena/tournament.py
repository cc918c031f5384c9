"""Tournaments: the config file, the schedule of duplicate deals, and the concurrent runner.

The schedule is a pure function of the config: game ``i`` always has the same
seats and deal seed, whatever order games finish in. Each deal is played once
per seat rotation so the luck of the deal cancels. A tournament that was
killed resumes by playing only the games the store does not hold yet.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import random
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import trio

from .engine import Rules, RulesError, rules_from
from .launch import Launcher
from .limits import Limits
from .manifest import BotSpec, ManifestError, load_bot
from .referee import BotPlayer, GameRecord, TimeControl, run_game
from .store import Store

MAX_TABLES = 2000  # more k-subsets than this are sampled (seeded) rather than all played


class ConfigError(ValueError):
    """A tournament file or flag that cannot be run; the message names the field."""


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
    sandbox: bool = False
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
        return {k: v for k, v in asdict(self).items() if k in keep}

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


def deal_seed(base: int, table: int, deal: int) -> int:
    """A stable 63-bit seed from (base seed, table, deal): the same on every machine and run."""
    digest = hashlib.sha256(f"palace:{base}:{table}:{deal}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


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


def schedule(cfg: TournamentConfig, labels: dict[str, str]) -> list[ScheduledGame]:
    out = []
    for t, table in enumerate(tables(cfg, labels)):
        for d in range(cfg.deals):
            seed = deal_seed(cfg.seed, t, d)
            for r in range(cfg.seats):
                seats = table[r:] + table[:r]
                out.append(ScheduledGame(len(out), t, d, r, seats, seed))
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
    def finished(self, interrupted: bool) -> None: ...


class PlayerPool:
    """Idle bot processes by bot label, so a process serves many games (a match) in turn."""

    def __init__(self, specs: dict[str, BotSpec], launcher: Launcher, clock: TimeControl,
                 restart_each_game: bool, start_limit: int):
        self.specs = specs
        self.idle: dict[str, list[BotPlayer]] = {s.label: [] for s in specs.values()}
        self.launcher = launcher
        self.clock = clock
        self.restart = restart_each_game
        self.starting = trio.CapacityLimiter(start_limit)
        self.all: list[BotPlayer] = []

    async def _launch(self, spec: BotSpec):
        async with self.starting:  # bounded: a big tournament never starts hundreds at once
            return await self.launcher(spec)

    def take(self, label: str) -> BotPlayer:
        if self.idle[label]:
            return self.idle[label].pop()
        spec = next(s for s in self.specs.values() if s.label == label)
        p = BotPlayer(spec, self._launch, self.clock, restart_each_game=self.restart)
        self.all.append(p)
        return p

    def give_back(self, player: BotPlayer) -> None:
        self.idle[player.spec.label].append(player)

    async def close(self) -> None:
        with trio.CancelScope(shield=True):
            async with trio.open_nursery() as n:
                for p in self.all:
                    n.start_soon(p.shutdown)


async def play_scheduled(game: ScheduledGame, pool: PlayerPool, rules: Rules,
                         cfg: TournamentConfig) -> GameRecord:
    """One scheduled game, with bot processes borrowed from the pool for its duration."""
    players = [pool.take(label) for label in game.seats]
    try:
        return await run_game(players, rules, game.seed, game_id=f"{cfg.name}-{game.index:06d}",
                              clock=cfg.clock(), max_turns=cfg.max_turns)
    finally:
        for p in players:
            pool.give_back(p)


async def run_tournament(cfg: TournamentConfig, store: Store, reporter: Reporter | None = None,
                         *, launcher: Callable | None = None, keep_logs: bool = False,
                         collect: bool = True) -> list[GameRecord]:
    """Play every scheduled game the store does not hold yet; returns the records played now.

    Their step logs (steps, setup events, stderr) are in the store and are dropped from the
    returned records unless ``keep_logs``: a long tournament would hold every log in memory.
    ``collect=False`` returns nothing at all, so memory stays flat however many games are
    played (the command line does this: the reporter and the store see every game)."""
    if cfg.cluster:  # Dask is imported only on this path
        from .cluster import run_on_cluster
        return await run_on_cluster(cfg, store, reporter, keep_logs=keep_logs, collect=collect)
    from .botproc import cleanup_stale
    reporter = reporter or Reporter()
    rules = cfg.ruleset()
    specs = load_bots(cfg)
    labels = {ref: spec.label for ref, spec in specs.items()}
    games = schedule(cfg, labels)
    store.begin_tournament(cfg.name, cfg.fingerprint(), len(games))
    for spec in specs.values():
        store.register_bot(spec.label, spec.name, spec.version, spec.files_hash(),
                           {"command": list(spec.command), "author": spec.author,
                            "build": list(spec.build) if spec.build else None}, str(spec.root))
    done = store.done_indexes(cfg.name)
    todo = [g for g in games if g.index not in done]
    reporter.started(cfg, len(games), len(done))
    cleanup_stale()
    processes = min(cfg.process_count, max(1, len(todo)))
    if launcher is None and processes > 1:
        from .worker import run_in_workers
        interrupted = True
        try:
            played = await run_in_workers(cfg, store, reporter, todo, processes, collect=collect)
            interrupted = False
            store.finish_tournament(cfg.name)
        finally:
            reporter.finished(interrupted)
        return played
    launch = launcher or Launcher(Limits(**cfg.limits), cfg.sandbox)
    pool = PlayerPool(specs, launch, cfg.clock(), cfg.restart_each_game, max(2, cfg.workers))
    played: list[GameRecord] = []
    send, receive = trio.open_memory_channel[ScheduledGame](0)
    interrupted = True

    async def worker() -> None:
        async for game in receive:
            record = await play_scheduled(game, pool, rules, cfg)
            store.save_game(cfg.name, game.index, list(game.seats), record.as_json())
            if collect:
                played.append(record)
            reporter.game_done(game, record)
            if not keep_logs:
                record.steps, record.setup_events, record.stderr = [], [], []

    try:
        async with trio.open_nursery() as nursery:
            for _ in range(min(cfg.workers, max(1, len(todo)))):
                nursery.start_soon(worker)
            async with send:
                for game in todo:
                    await send.send(game)
        interrupted = False
        store.finish_tournament(cfg.name)
    finally:
        await pool.close()
        reporter.finished(interrupted)
    return played
