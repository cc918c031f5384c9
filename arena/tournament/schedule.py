"""The schedule: every game of a tournament, as a pure function of its config and the store's secret.

Game ``i`` always has the same seats and deal seed, whatever order games finish in. Each
deal is played once per seat rotation so the luck of the deal cancels. The schedule is numbered
by rotation round (every deal's first rotation, then every deal's second...), as stored games
always were; the runner plays it a deal at a time (:func:`arena.tournament.executors.by_deal`).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Mapping
from dataclasses import dataclass

from . import seeds
from .config import ConfigError, TournamentConfig


@dataclass(frozen=True)
class ScheduledGame:
    index: int
    table: int
    deal: int
    rotation: int
    seats: tuple[str, ...]  # bot labels in seat order
    seed: int
    moves: tuple[int, ...] = ()  # a suite position's opening (arena.tournament.suites)


def tables(cfg: TournamentConfig, labels: dict[str, str],
           authors: Mapping[str, str] | None = None) -> list[tuple[str, ...]]:
    """The groups of bots that meet: every k-subset (round-robin), or each candidate with each
    (k-1)-subset of the field (gauntlet); more than ``max_tables`` are sampled with the seed.
    With ``one_seat_per_author``, a group that seats two bots of one author (``authors``: label
    -> author; a bot with none is its own) is left out: they could pass each other their hands."""
    if cfg.format not in ("round-robin", "gauntlet"):  # a staged event has no schedule up front
        raise ConfigError(f"a {cfg.format} is played stage by stage (arena.tournament.formats), not scheduled")
    bots = [labels[b] for b in cfg.bots]
    if cfg.format == "round-robin":
        groups = list(itertools.combinations(bots, cfg.seats))
    else:
        groups = [(labels[c],) + rest for c in cfg.candidates
                  for rest in itertools.combinations(bots, cfg.seats - 1)]
    if cfg.one_seat_per_author:
        if authors is None:
            raise ConfigError("one_seat_per_author needs the bots' authors")
        groups = [g for g in groups if len({author_key(b, authors) for b in g}) == len(g)]
        if not groups:
            raise ConfigError(f"one_seat_per_author leaves no {cfg.seats}-seat table: too few authors among the bots")
    if len(groups) > cfg.max_tables:
        groups = random.Random(cfg.seed).sample(groups, cfg.max_tables)
    return groups


def author_key(label: str, authors: Mapping[str, str]) -> str:
    """Who a bot's seat counts for: its author, or the bot itself when it names none."""
    author = authors.get(label, "").strip().casefold()
    return f"author:{author}" if author else f"bot:{label}"


def schedule(cfg: TournamentConfig, labels: dict[str, str], secret: bytes,
             authors: Mapping[str, str] | None = None) -> list[ScheduledGame]:
    """Every game, ordered by rotation round; deal seeds from ``secret`` (:func:`arena.tournament.seeds.load_secret`)."""
    groups = tables(cfg, labels, authors)
    suite = cfg.deal_suite()
    if suite is not None:  # the suite's deals from suite_from on (round the end), the same at every table
        n = len(suite.deals)
        seed = {(t, d): suite.deals[(cfg.suite_from + d) % n] for t in range(len(groups)) for d in range(cfg.deals)}
        moves = {d: suite.moves_of((cfg.suite_from + d) % n) for d in range(cfg.deals)}
    else:
        seed = {(t, d): seeds.deal_seed(secret, cfg.seed, t, d) for t in range(len(groups)) for d in range(cfg.deals)}
        moves = {}
    return rotations(groups, cfg.deals, lambda t, d: seed[t, d], moves)


def rotations(groups: list[tuple[str, ...]], deals: int, seed_of, moves: Mapping[int, tuple[int, ...]] | None = None,
              start: int = 0) -> list[ScheduledGame]:
    """Each table's deals, each in every seat rotation (a table of s bots plays s rotations, so every
    bot sits in every seat of every deal), ordered rotation round by rotation round; indexes from
    ``start``. ``seed_of(table, deal)`` is the deal's seed."""
    out = []
    for r in range(max((len(t) for t in groups), default=0)):
        for t, table in enumerate(groups):
            if r >= len(table):
                continue
            for d in range(deals):
                out.append(ScheduledGame(start + len(out), t, d, r, table[r:] + table[:r], seed_of(t, d),
                                         (moves or {}).get(d, ())))
    return out
