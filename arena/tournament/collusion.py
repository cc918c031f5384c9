"""The collusion audit: how much did one bot's result depend on one partner, on duplicate deals?

Two bots that help each other (one feeds the other low cards, blocks everyone but its partner,
throws its own game at the right moment) look, in the standings, like two good bots. Duplicate
deals give the test: every table the pair shared is dealt again from the same seed, with the same
seats and the same opening, once with the partner replaced by a fixed reference bot. What the
other bot scores less without its partner is its *lift*; what the rest of the table scores less
is the lift any seat gets from sitting with that partner (a weak partner helps every seat
alike). The pair's *dependence* is the first minus the mean of the second, per table, in the
tournament's points (one per seat behind, a half per seat tied). It is reported with a
bootstrap interval over the shared tables, and the pair is flagged when the interval lies wholly
above ``margin``. A 2-seat table has no rest: its dependence is the plain lift, which a weak
partner explains as well as a colluding one, so the audit says so.

This module is pure: the tables come from the store, and the games are played by the caller's
``play`` (a :class:`~arena.tournament.executors.BlockingExecutor` from the command line, an
in-process match in the tests).
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .config import ConfigError
from .formats import points

Play = Callable[[tuple[str, ...], int, tuple[int, ...]], Mapping[str, float]]  # seats, seed, opening -> points


@dataclass(frozen=True)
class Table:
    """One stored game the pair shared: its deal, seats, opening and the points it gave."""

    game_id: str
    seed: int
    seats: tuple[str, ...]
    given: tuple[int, ...]
    points: Mapping[str, float]


@dataclass(frozen=True)
class Dependence:
    """How much ``bot``'s result depended on ``partner``, in points per game."""

    bot: str
    partner: str
    tables: int
    mean: float
    low: float
    high: float
    per_table: tuple[float, ...]


@dataclass(frozen=True)
class Audit:
    pair: tuple[str, str]
    reference: str
    confidence: float
    margin: float
    directions: tuple[Dependence, Dependence]
    two_seat_only: bool  # no table had a rest to compare with: a lift is not evidence of collusion

    @property
    def flagged(self) -> bool:
        return any(d.tables > 0 and d.low > self.margin for d in self.directions)


def shared_tables(games: Iterable[Mapping[str, Any]], a: str, b: str) -> list[Table]:
    """The games (as :meth:`Store.games` lists them, with ``given`` where the record had one)
    where both ``a`` and ``b`` sat, in their stored order."""
    out = []
    for g in games:
        seats = tuple(g["seats"])
        if a in seats and b in seats:
            out.append(Table(g["id"], int(g["seed"]), seats, tuple(g.get("given", ())), points(seats, g["result"])))
    return out


def interval(values: Sequence[float], confidence: float, *, resamples: int = 2000) -> tuple[float, float]:
    """A percentile bootstrap interval of the mean, on a fixed seed: the same tables give the same
    interval every run. One value gives no spread to resample: its interval is the whole range."""
    if len(values) < 2:
        return (float("-inf"), float("inf"))
    rng = random.Random(0)
    n = len(values)
    means = sorted(sum(rng.choices(values, k=n)) / n for _ in range(resamples))
    tail = (1 - confidence) / 2
    return means[int(tail * (resamples - 1))], means[int((1 - tail) * (resamples - 1))]


def dependence(tables: Sequence[Table], bot: str, partner: str, reference: str, play: Play,
               confidence: float) -> Dependence:
    """Replay each table with ``partner`` replaced by ``reference``; ``bot``'s lift less the mean
    lift of the table's other seats."""
    per_table = []
    for t in tables:
        seats = tuple(reference if s == partner else s for s in t.seats)
        again = play(seats, t.seed, t.given)
        lift = t.points[bot] - again[bot]
        rest = [s for s in t.seats if s not in (bot, partner)]
        base = statistics.fmean(t.points[s] - again[s] for s in rest) if rest else 0.0
        per_table.append(lift - base)
    mean = statistics.fmean(per_table) if per_table else 0.0
    low, high = interval(per_table, confidence)
    return Dependence(bot, partner, len(per_table), mean, low, high, tuple(per_table))


def audit(tables: Sequence[Table], pair: tuple[str, str], reference: str, play: Play, *,
          confidence: float = 0.95, margin: float = 0.0) -> Audit:
    """Both directions: ``pair[1]``'s dependence on ``pair[0]`` and the other way round."""
    a, b = pair
    if a == b:
        raise ConfigError("the pair must be two different bots")
    if reference in pair or any(reference in t.seats for t in tables):
        raise ConfigError(f"the reference bot {reference} sat at the pair's tables: choose one that did not")
    one = dependence(tables, b, a, reference, play, confidence)
    two = dependence(tables, a, b, reference, play, confidence)
    return Audit(pair, reference, confidence, margin, (one, two), all(len(t.seats) == 2 for t in tables))


# ------------------------------------------------------------ from a store, on real bots

Game = tuple[tuple[str, ...], int, tuple[int, ...]]  # seats, seed, opening


def replays(tables: Sequence[Table], pair: tuple[str, str], reference: str) -> list[Game]:
    """Every game :func:`audit` will ask its ``play`` for, each once, in a fixed order."""
    out: dict[Game, None] = {}
    for partner in pair:
        for t in tables:
            out[(tuple(reference if s == partner else s for s in t.seats), t.seed, t.given)] = None
    return list(out)


def stored_tables(store: Any, tournament: str, pair: tuple[str, str]) -> tuple[list[Table], dict[str, Any]]:
    """The pair's shared tables in a stored tournament (their openings read from the game logs)
    and the rules they were played under."""
    if store.tournament(tournament) is None:
        raise ConfigError(f"no tournament {tournament!r} in the store")
    games = store.games(tournament=tournament, limit=2**62)
    for bot in pair:
        if not any(bot in g["seats"] for g in games):
            raise ConfigError(f"{bot} played no game of {tournament}")
    shared = [g for g in games if pair[0] in g["seats"] and pair[1] in g["seats"]]
    rules: dict[str, Any] = {}
    for g in shared:
        record = store.game_record(g["id"]) or {}
        g["given"] = record.get("given", [])
        rules = record.get("rules", rules)
    return shared_tables(shared, *pair), rules


def stored_setup(store: Any, labels: Iterable[str], reference: str, rules: dict[str, Any], **kw: Any) -> Any:
    """A :class:`~arena.tournament.executors.BotSetup` of the stored bots, read from the folders
    the store names, each refused if its files changed since it played (the audit would measure
    another bot), and the reference bot (a folder or a bundled name) under its own label, which
    must not be one of theirs."""
    from ..bots.manifest import load_bot
    from ..engine.rules import Rules
    from .executors import BotSetup
    specs = {}
    for label in sorted(set(labels)):
        row = store.bot(label)
        if row is None:
            raise ConfigError(f"{label} is not in the store's bots")
        spec = load_bot(row["path"])
        if not spec.has_files(row["hash"]):
            raise ConfigError(f"{label}: the files at {row['path']} changed since it played; the audit needs the same bot")
        specs[row["path"]] = spec
    ref = load_bot(reference)
    if ref.label in labels:
        raise ConfigError(f"the reference bot {ref.label} sat at the pair's tables: choose one that did not")
    specs[reference] = ref
    return BotSetup.of(specs, rules=Rules.from_options(rules), **kw)


async def play_replays(setup: Any, games: Sequence[Game], max_turns: int, *, launcher: Any = None) -> dict[Game, dict[str, float]]:
    """Play each game once on ``setup``'s bots; its points by bot. Nothing is stored."""
    from .executors import GameTask, open_in_process
    out: dict[Game, dict[str, float]] = {}
    async with open_in_process(setup, launcher=launcher) as ex:
        for i, (seats, seed, given) in enumerate(games):
            played = await ex.play(GameTask(f"audit-{i}", seed, seats, max_turns, given))
            out[(seats, seed, given)] = points(seats, played.summary["result"])
    return out


async def audit_stored(store: Any, tournament: str, pair: tuple[str, str], reference: str, *,
                       confidence: float = 0.95, margin: float = 0.25, launcher: Any = None,
                       **setup: Any) -> Audit:
    """:func:`audit` of a stored tournament's pair, its tables dealt again on the stored bots."""
    if pair[0] == pair[1]:
        raise ConfigError("the pair must be two different bots")
    tables, rules = stored_tables(store, tournament, pair)
    if not tables:
        raise ConfigError(f"{pair[0]} and {pair[1]} never sat at one table in {tournament}")
    bots = stored_setup(store, {s for t in tables for s in t.seats}, reference, rules, **setup)
    label = next(lb for lb in bots.specs if all(lb not in t.seats for t in tables))
    max_turns = store.tournament(tournament)["config"].get("max_turns", 2000)
    done = await play_replays(bots, replays(tables, pair, label), max_turns, launcher=launcher)
    return audit(tables, pair, label, lambda seats, seed, given: done[(seats, seed, given)],
                 confidence=confidence, margin=margin)
