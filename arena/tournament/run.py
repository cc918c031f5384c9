"""Running a tournament: play every scheduled game the store does not hold yet.

A tournament that was killed resumes by playing only the missing games. The games
themselves are played by an executor (:mod:`arena.tournament.executors`): here, on worker
processes, or on Dask; the runner only feeds it the schedule and stores what comes back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import trio

from ..faults import ArenaFailure
from ..groups import plain_errors
from ..bots.containment import cleanup_stale
from ..bots.launch import Launcher  # noqa: F401 - tests replace it here to run bots in-process
from ..limits import Limits
from ..bots.manifest import BotSpec
from ..referee import GameRecord
from . import seeds
from .cluster import DaskExecutor, open_dask
from .config import STAGED, ConfigError, TournamentConfig, load_bots
from .formats import Stage, pending, planned_games, stages, stored_results
from .executors import (BotSetup, Executor, ExecutorBroken, ExecutorError, GameTask, PlayedGame, by_deal,
                        open_in_process, store_played)
from .runlock import LockHeld, tournament_lock
from .schedule import ScheduledGame, schedule
from ..store.people import account_authors, owner_names
from ..store.reads import prefix_counts
from .store import Store
from .worker import open_workers


class TournamentBusy(ConfigError):
    """Another process is playing this tournament in this store."""


class TournamentIncomplete(ArenaFailure):
    """Games could not be played (the arena's fault, not a bot's); the rest are stored, resumable."""


class Reporter:
    """What the runner tells the screen; the CLI supplies a rich or a plain one."""

    def started(self, cfg: TournamentConfig, total: int, done: int) -> None: ...
    def game_done(self, game: ScheduledGame, record: GameRecord) -> None: ...
    def incident(self, text: str) -> None: ...  # the arena's own trouble (a worker died), as it happens
    def stage(self, title: str, text: str) -> None: ...  # a staged format's next stage, before its games
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
        return open_dask(setup, cfg.cluster, client=client, on_incident=on_incident)
    processes = min(cfg.process_count, max(1, games))
    if launcher is None and processes > 1:
        slots = max(1, -(-cfg.workers // processes))
        return open_workers(setup, processes, slots, on_incident=on_incident)
    return open_in_process(setup, capacity=min(cfg.workers, max(1, games)), launcher=launcher)


def shown_config(cfg: TournamentConfig, ex: Any) -> TournamentConfig:
    """The settings as the run's header shows them: on a cluster, games at a time are the worker
    processes connected when it started (``concurrency`` does not apply there)."""
    return replace(cfg, concurrency=ex.workers) if isinstance(ex, DaskExecutor) else cfg


def seat_authors(specs: dict[str, BotSpec], own: Iterable[str] = ()) -> dict[str, str]:
    """Label -> author for ``one_seat_per_author``: the manifest's, except for the bots the arena
    ships and the labels in ``own`` (a ladder's initial bots, named by its file): those count as
    their own authors. Claiming a shipped bot's author only keeps a bot away from its own kind."""
    from ..bots.launch import SHIPPED
    own = set(own)
    out = {}
    for spec in specs.values():
        root = spec.root.resolve()
        shipped = any(d == root or d in root.parents for d in SHIPPED)
        out[spec.label] = "" if shipped or spec.label in own else spec.author
    return out


def table_authors(specs: dict[str, BotSpec], store: Store, own: Iterable[str] = ()) -> dict[str, str]:
    """:func:`seat_authors`, with the account that owns a bot's name on this server (arena serve's
    accounts) in place of whatever author its manifest claims."""
    return account_authors(seat_authors(specs, own), owner_names(store.db))


def bot_setup(cfg: TournamentConfig, specs: dict[str, BotSpec]) -> BotSetup:
    return BotSetup.of(specs, rules=cfg.ruleset(), clock=cfg.clock(), limits=dict(cfg.limits),
                       containment=cfg.containment, restart_each_game=cfg.restart_each_game,
                       fixed_schedule=cfg.fixed_schedule, ponder=cfg.ponder, system=tuple(cfg.system),
                       view=cfg.view)


async def run_tournament(cfg: TournamentConfig, store: Store, reporter: Reporter | None = None,
                         *, launcher: Callable | None = None, keep_logs: bool = False,
                         collect: bool = True, stats: RunStats | None = None,
                         client: Any = None, own_authors: Iterable[str] = ()) -> list[GameRecord]:
    """Play every scheduled game the store does not hold yet; returns the records played now.

    Their step logs (steps, setup events, stderr) are in the store and are dropped from the
    returned records unless ``keep_logs``: a long tournament would hold every log in memory.
    ``collect=False`` returns nothing at all, so memory stays flat however many games are
    played (the command line does this: the reporter and the store see every game).
    ``launcher`` plays in this process with it (tests' fakes); ``client`` is a Dask client.
    ``own_authors``: labels that count as their own authors for ``one_seat_per_author``.

    Raises :class:`TournamentBusy` if another process is playing it in this store, and
    :class:`TournamentIncomplete` if games could not be played (they stay unstored; the
    same command plays them later)."""
    reporter = reporter or Reporter()
    stats = stats if stats is not None else RunStats()
    try:
        with tournament_lock(store.path, cfg.name), plain_errors():
            return await _run(cfg, store, reporter, stats, launcher, keep_logs, collect, client, own_authors)
    except LockHeld as e:
        raise TournamentBusy(str(e)) from None


def strangers_dealt_before(cfg: TournamentConfig, store: Store, games: Sequence[ScheduledGame]) -> None:
    """A table of strangers is never dealt a deal another tournament of the store was dealt: that
    one's game ends, stored games and replays show every card of it, so a bot shipped with them
    would know its opponents' hands, face-down cards and stock (a seed used again, a deal suite).
    A staged event is looked at once, at its first stage to play: every stage deals from its seed,
    so one that repeats another's later stage repeats its first stage too."""
    if not cfg.one_seat_per_author:
        return
    again = store.dealt_elsewhere(cfg.name, {g.seed for g in games})
    if again is not None:
        seed, other = again
        how = ("its suite deals" if cfg.suite else f"seed {cfg.seed} deals")
        fix = "deal it fresh cards (no suite)" if cfg.suite else "give it a seed no tournament of this store has used"
        raise ConfigError(f"{cfg.name} seats strangers' bots (one_seat_per_author), and {how} cards that {other} "
                          f"in this store was dealt (deal seed {seed}), whose games show every card of them to "
                          f"whoever reads them, and a bot can carry them in: {fix}")


async def _run(cfg: TournamentConfig, store: Store, reporter: Reporter, stats: RunStats,
               launcher: Callable | None, keep_logs: bool, collect: bool, client: Any,
               own_authors: Iterable[str]) -> list[GameRecord]:
    specs = load_bots(cfg)
    labels = {ref: spec.label for ref, spec in specs.items()}
    secret = seeds.named_secret(store, cfg.deal_secret) if cfg.deal_secret else seeds.load_secret(store.path.parent)
    staged = cfg.format in STAGED
    fingerprint = cfg.fingerprint()
    table_deals = "table_deals" in fingerprint  # a strangers' staged event: each table its own deals
    if table_deals and (prior := store.tournament(cfg.name)) is not None and "table_deals" not in prior["config"]:
        del fingerprint["table_deals"]  # begun before, dealing every table of a stage alike: it resumes so
        table_deals = False
    authors = table_authors(specs, store, own_authors)
    if staged:
        order = seeded_order(cfg, [labels[b] for b in cfg.bots], store)
        fingerprint["order"] = order  # a seeding whose standings changed would seat another event
        known = stages(cfg, order, secret, stored_results(store, cfg.name), authors, table_deals=table_deals)
        stage = pending(known)
        games = [] if stage is None else list(stage.games)
        planned = planned_games(cfg)
    else:
        order, stage, known = [], None, []
        games = schedule(cfg, labels, secret, authors)
        planned = len(games)
    if launcher is None:  # no containment, or a bot its uid cannot run: one error, no game played
        preflight = getattr(Launcher(Limits(**cfg.limits), cfg.containment,
                                      system=tuple(cfg.system), view=cfg.view), "preflight", None)
        if preflight is not None:  # (test doubles stand in for Launcher without one)
            await preflight(specs.values())
    strangers_dealt_before(cfg, store, games)
    store.begin_tournament(cfg.name, fingerprint, planned)
    for spec in specs.values():
        store.register_bot(spec.label, spec.name, spec.version, spec.files_hash(),
                           {"command": list(spec.command), "author": spec.author,
                            "build": list(spec.build) if spec.build else None}, str(spec.root))
    done = store.done_indexes(cfg.name)
    todo = [g for g in games if g.index not in done]
    played: list[GameRecord] = []
    interrupted = shown = True

    def incident(text: str) -> None:
        stats.incidents.append(text)
        reporter.incident(text)

    async def play_stages(ex: Executor) -> None:
        """The games of this run; a staged format's next stage once the one before is stored."""
        nonlocal stage, todo, known
        while True:
            if staged and stage is not None:
                reporter.stage(stage.title, "; ".join(filter(None, (stage.note, _stage_text(stage)))))
            await play_all(ex)
            if not staged or stats.failed:
                return
            known = stages(cfg, order, secret, stored_results(store, cfg.name), authors, known,
                           table_deals=table_deals)
            stage = pending(known)
            if stage is None:
                return
            todo = [g for g in stage.games if g.index not in done]

    async def play_all(ex: Executor) -> None:
        """Every game to play, a deal (its every seat order and table) at a time: see
        :func:`arena.tournament.executors.by_deal`."""
        deals = by_deal(todo)
        send, receive = trio.open_memory_channel[list[ScheduledGame]](0)
        trouble: list[BaseException] = []

        async def loop() -> None:
            async for deal in receive:
                try:
                    results = await ex.play_deal([GameTask(f"{cfg.name}-{g.index:06d}", g.seed, g.seats,
                                                           cfg.max_turns, g.moves) for g in deal])
                    for g, result in zip(deal, results):
                        if isinstance(result, ExecutorError):
                            stats.failed.append((g.index, str(result)))
                        else:
                            keep(g, result)
                except Exception as e:  # noqa: BLE001 - one plain error, not a group of them
                    # (an ExecutorBroken is said below, once every lane has stored what it got: the count is exact)
                    trouble.append(e)
                    nursery.cancel_scope.cancel()

        async with trio.open_nursery() as nursery:
            for _ in range(max(1, min(ex.capacity, len(deals)))):
                nursery.start_soon(loop)
            async with send:
                for deal in deals:
                    stats.submitted += len(deal)
                    await send.send(deal)
        if trouble:
            if isinstance(trouble[0], ExecutorBroken):
                kept = len(done) + stats.stored
                raise TournamentIncomplete(f"{trouble[0]}; {kept}/{planned} games are stored: run the same "
                                           "command again to play the rest")
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
            played.append(record)
        reporter.game_done(g, record)

    try:
        if todo:
            if cfg.cluster == "" and client is None:
                cleanup_stale()
            shown = False  # an executor that cannot start (no cluster) is one error, before any display
            try:
                async with open_executor(cfg, bot_setup(cfg, specs), len(todo), launcher=launcher,
                                         client=client, on_incident=incident) as ex:
                    reporter.started(shown_config(cfg, ex), planned, len(done))
                    shown = True
                    await play_stages(ex)
                    for text in ex.incidents:
                        if text not in stats.incidents:
                            incident(text)
            except ExecutorError as e:  # the executor could not start (no cluster, no Dask)
                raise TournamentIncomplete(str(e)) from None
        else:
            reporter.started(cfg, planned, len(done))
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


def seeded_order(cfg: TournamentConfig, bots: list[str], store: Store) -> list[str]:
    """The bots best first: by the standings of ``cfg.seeding`` (a tournament in this store), those it
    did not rate after them in the file's order; without a seeding, the file's order."""
    if not cfg.seeding:
        return bots
    from .standings import read_games, summarise
    if store.tournament(cfg.seeding) is not None:
        games, think = read_games(store, tournament=cfg.seeding)
    elif cfg.seeding.startswith("ladder:") and prefix_counts(store.db, cfg.seeding + ":")[1]:
        games, think = read_games(store, prefix=cfg.seeding + ":")  # a ladder's every game: its rating table
    else:
        raise ConfigError(f"seeding: no tournament or ladder {cfg.seeding!r} in {store.path} "
                          f"(known: {store.known_tournaments()})")
    ranked = [line.bot for line in summarise(games, think)[0] if line.bot in bots]
    return ranked + [b for b in bots if b not in ranked]


def _stage_text(stage: Stage) -> str:
    tables = "tables: " + " | ".join(" v ".join(t) for t in stage.tables)
    return tables + (f"; waiting: {', '.join(stage.byes)}" if stage.byes and stage.pairing is None else "")
