"""The staged formats: a Swiss, a knockout and heats, as pure functions of the config and the stored results.

A staged tournament is played stage by stage (a Swiss round, a knockout round, a heat); each
stage's tables follow from the results of the stages before it, so nothing but the games is
stored: a run killed at any point recomputes the same stage from the same results and plays
only the games the store lacks. Stage ``s`` owns the game indexes from ``s * bots * deals``
(no stage plays more games than that: a stage seats each bot at most once, for ``deals`` deals
in each seat of its table), and every table of a stage plays the same deals
(:func:`arena.tournament.seeds.stage_deal_seed`), each in every seat rotation.

* Swiss: :mod:`arena.tournament.swiss` pairs each round from the standings of the one rating
  fit (:func:`arena.ratings.fit_elo`) over the rounds before.
* Knockout (2 seats): a bracket seeded best against worst; a match is ``deals`` deals in both
  seatings; on equal points the better seed goes on (the seed was earned before the match).
  ``elimination = "double"``: a loser drops to the losers' bracket and is out after a second loss;
  the winners' and the losers' champions meet in one final match.
* Heats (3-6 seats): tables of ``seats`` (snake-seeded, sizes as even as possible), the top
  ``advance`` of each by points go on (at most all but one of a table), until one table is left:
  the final.

Points at a table: each game gives a seat one point per seat that finished behind it and half
a point per seat tied with it.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import seeds
from .config import ConfigError, TournamentConfig
from .schedule import ScheduledGame, author_key, rotations
from .swiss import Pairing, meetings, pair_round, seated

Stored = Mapping[int, tuple[Sequence[str], Mapping[str, Any]]]  # game index -> (seats, result)


@dataclass(frozen=True)
class Stage:
    """One stage: who sits where, what it played, and what it decided."""

    number: int  # from 0
    title: str  # "round 3 of 6", "semi-final", "heat 2"
    tables: tuple[tuple[str, ...], ...]
    byes: tuple[str, ...] = ()
    games: tuple[ScheduledGame, ...] = ()
    note: str = ""  # Swiss: what the pairing minimised
    pairing: Pairing | None = None
    points: dict[str, float] = field(default_factory=dict)  # once played: each bot's points at its table
    advanced: tuple[str, ...] = ()  # once played: who goes on (knockout: the winners; heats: the top of each table)
    lower: tuple[bool, ...] = ()  # double elimination: per table, True in the losers' bracket
    scores: dict[str, float] = field(default_factory=dict)  # Swiss: the standings (Elo) the round was paired on

    @property
    def indexes(self) -> range:
        return range(self.games[0].index, self.games[-1].index + 1) if self.games else range(0)


def stage_start(cfg: TournamentConfig, stage: int) -> int:
    return stage * len(cfg.bots) * cfg.deals


def stage_of(cfg: TournamentConfig, index: int) -> int:
    return index // (len(cfg.bots) * cfg.deals)


def planned_games(cfg: TournamentConfig) -> int:
    """The games the whole event plays (a knockout's bye-free count; heats' from their table sizes)."""
    n, k, d = len(cfg.bots), cfg.seats, cfg.deals
    if cfg.format == "swiss":
        return cfg.swiss_rounds * (n // k) * k * d
    if cfg.format == "knockout":
        matches = n - 1 if cfg.elimination == "single" else 2 * (n - 1)
        return matches * 2 * d
    total, left = 0, n
    while left > k:  # a heat plays each of its bots' deals once per seat of its table
        total += left * d
        left = sum(min(cfg.heat_advance, s - 1) for s in _sizes(left, k))
    return total + left * d  # the final


def points(seats: Sequence[str], result: Mapping[str, Any]) -> dict[str, float]:
    """A game's points per bot: one per seat behind, a half per seat tied."""
    out: dict[str, float] = {}
    behind = len(seats)
    for group in result["order"]:
        behind -= len(group)
        for s in group:
            out[seats[s]] = behind + (len(group) - 1) / 2
    return out


def table_points(stage_games: Sequence[ScheduledGame], stored: Stored) -> dict[str, float]:
    total: Counter[str] = Counter()
    for g in stage_games:
        seats, result = stored[g.index]
        total.update(points(seats, result))
    return dict(total)


def stages(cfg: TournamentConfig, bots: Sequence[str], secret: bytes, stored: Stored,
           authors: Mapping[str, str] | None = None, known: Sequence[Stage] = (), *,
           table_deals: bool = True) -> list[Stage]:
    """Every stage that can be known from ``stored``: those played, then the next (whose games
    the store may partly hold already). ``bots`` are in seeding order, best first; ``authors``
    (label -> author) for a Swiss with ``one_seat_per_author``. ``known``: what an earlier call
    returned for the same event; its decided stages are taken as they are (stored games never
    change), so a running event computes only the new stage, from the standings and meetings of
    the rounds before, rather than every earlier round again (as a resumed run does once).
    ``table_deals``: strangers' tables deal cards of their own (:func:`_games`); False for an event
    stored before they did, which resumes as it began."""
    out: list[Stage] = list(itertools.takewhile(lambda s: bool(s.points), known))
    while True:
        stage = _next(cfg, bots, secret, stored, out, authors, table_deals)
        if stage is None:
            return out
        if not stage.tables:  # a stage that seats nobody would be asked for again, for ever
            raise RuntimeError(f"{cfg.format}: stage {stage.number + 1} seats nobody, with {len(bots)} bots")
        done = all(g.index in stored for g in stage.games)
        if done:
            stage = _decide(cfg, stage, stored, bots)
        out.append(stage)
        if not done:
            return out


def pending(known: Sequence[Stage]) -> Stage | None:
    """The stage of :func:`stages`' answer with games still to play; None when the event is over."""
    return known[-1] if known and not known[-1].points else None


def _next(cfg: TournamentConfig, bots: Sequence[str], secret: bytes, stored: Stored,
          before: list[Stage], authors: Mapping[str, str] | None = None, table_deals: bool = True) -> Stage | None:
    if cfg.format == "swiss":  # (a knockout and heats refuse one_seat_per_author: their tables never are strangers')
        return _swiss(cfg, bots, secret, stored, before, _apart(cfg, bots, authors), table_deals)
    if cfg.format == "knockout":
        return _knockout(cfg, bots, secret, before)
    return _heat(cfg, bots, secret, before)


def _games(cfg: TournamentConfig, secret: bytes, stage: int, tables: Sequence[tuple[str, ...]],
           table_deals: bool = False) -> tuple[ScheduledGame, ...]:
    """A stage's games. Tables of strangers (``one_seat_per_author``, with ``table_deals``) get deals
    of their own: with one set for the stage, a bot at one table saw at its game's end the cards that
    a partner of another author at another table, playing the deal in another lane, held against its
    opponent."""
    own = cfg.one_seat_per_author and table_deals
    return tuple(rotations(list(tables), cfg.deals,
                           lambda t, d: seeds.stage_deal_seed(secret, cfg.seed, stage, d, t if own else None),
                           start=stage_start(cfg, stage)))


# --------------------------------------------------------------------------- swiss

def swiss_scores(bots: Sequence[str], results: Sequence[tuple[Sequence[str], Mapping[str, Any]]]) -> dict[str, float]:
    """Each bot's Elo from the one rating fit over ``results``; a bot without games sits at the pool mean."""
    from ..ratings import fit_elo
    from .standings import outcomes
    fit = fit_elo(outcomes([(list(s), dict(r)) for s, r in results])) if results else {}
    return {b: (fit[b].elo if b in fit else 1500.0) for b in bots}


def _apart(cfg: TournamentConfig, bots: Sequence[str], authors: Mapping[str, str] | None) -> frozenset[frozenset[str]]:
    """The pairs ``one_seat_per_author`` keeps apart: bots of one author (as the round-robin's tables count them)."""
    if not cfg.one_seat_per_author:
        return frozenset()
    if authors is None:
        raise ConfigError("one_seat_per_author needs the bots' authors")
    return frozenset(frozenset((a, b)) for a, b in itertools.combinations(bots, 2)
                     if author_key(a, authors) == author_key(b, authors))


def _swiss(cfg: TournamentConfig, bots: Sequence[str], secret: bytes, stored: Stored,
           before: list[Stage], apart: frozenset[frozenset[str]] = frozenset(), table_deals: bool = True) -> Stage | None:
    r = len(before)
    if r >= cfg.swiss_rounds:
        return None
    k = cfg.seats
    earlier = [stored[i] for i in sorted(stored) if i < stage_start(cfg, r)]
    scores = {b: round(e, 6) for b, e in swiss_scores(bots, earlier).items()}  # no float noise in the order
    seed_rank = {b: i for i, b in enumerate(bots)}
    order = sorted(bots, key=lambda b: (-scores[b], seed_rank[b]))
    met = meetings(t for st in before for t in st.tables)
    byes = Counter(b for st in before for b in st.byes)
    start, per_round = stage_start(cfg, r), (len(bots) // k) * k * cfg.deals
    if all(i in stored for i in range(start, start + per_round)):
        # a round played: its tables as stored (rotation 0 of each, in table order), not searched again
        tables = tuple(tuple(stored[start + t * cfg.deals][0]) for t in range(len(bots) // k))
        pairing = seated(tables, order, scores, met, apart)
    else:
        pairing = pair_round(order, scores, k, met, byes, apart=apart)
    return Stage(r, f"round {r + 1} of {cfg.swiss_rounds}", pairing.tables, pairing.byes,
                 _games(cfg, secret, r, pairing.tables, table_deals), pairing.summary(), pairing, scores=scores)


# --------------------------------------------------------------------------- knockout

def bracket_order(size: int) -> list[int]:
    """Seed numbers (from 0) in bracket order for a power of two: 0 meets size-1, and the top two
    seeds can meet only in the final (0, 7, 3, 4, 1, 6, 2, 5 for eight)."""
    order = [0]
    while len(order) < size:
        n = 2 * len(order)
        order = [x for s in order for x in (s, n - 1 - s)]
    return order


def _knockout(cfg: TournamentConfig, bots: Sequence[str], secret: bytes, before: list[Stage]) -> Stage | None:
    r = len(before)
    rank = {b: i for i, b in enumerate(bots)}
    if r == 0:
        size = 1
        while size < len(bots):
            size *= 2
        slots = [bots[s] if s < len(bots) else None for s in bracket_order(size)]
        tables, byes = [], []
        for a, b in zip(slots[::2], slots[1::2]):
            if a is None or b is None:
                byes.append(a or b)
            else:
                tables.append(_seeded((a, b), rank))
        return Stage(0, _round_title(len(bots), 0), tuple(tables), tuple(byes), _games(cfg, secret, 0, tables),
                     lower=(False,) * len(tables))
    if cfg.elimination == "double":
        return _double(cfg, bots, secret, before, rank)
    alive = list(before[-1].byes) + list(before[-1].advanced)
    if len(alive) < 2:
        return None
    alive.sort(key=lambda b: _slot(bots, b))  # bracket order, so the bracket is kept
    tables = [_seeded((a, b), rank) for a, b in zip(alive[::2], alive[1::2])]
    return Stage(r, _round_title(len(alive), r), tuple(tables), (), _games(cfg, secret, r, tables),
                 lower=(False,) * len(tables))


def _seeded(table: Sequence[str], rank: Mapping[str, int]) -> tuple[str, ...]:
    return tuple(sorted(table, key=lambda b: rank[b]))


def _slot(bots: Sequence[str], bot: str) -> int:
    size = 1
    while size < len(bots):
        size *= 2
    return bracket_order(size).index(list(bots).index(bot))


def _round_title(alive: int, r: int) -> str:
    names = {2: "final", 4: "semi-finals", 8: "quarter-finals"}
    size = 1
    while size < alive:
        size *= 2
    return names.get(size, f"round {r + 1}")


def _double(cfg: TournamentConfig, bots: Sequence[str], secret: bytes, before: list[Stage],
            rank: Mapping[str, int]) -> Stage | None:
    """The next stage of a double elimination: every match of both brackets that can be played now."""
    losses: Counter[str] = Counter()
    for st in before:
        for table, lower in zip(st.tables, st.lower or (False,) * len(st.tables)):
            for b in table:
                if b not in st.advanced:
                    losses[b] += 1
    alive = [b for b in bots if losses[b] < 2]
    if len(alive) < 2:
        return None
    upper = sorted((b for b in alive if losses[b] == 0), key=lambda b: _slot(bots, b))
    lower = sorted((b for b in alive if losses[b] == 1), key=lambda b: rank[b])
    r = len(before)
    if len(upper) == 1 and len(lower) == 1:  # the final
        tables, flags, byes = [_seeded((upper[0], lower[0]), rank)], [False], []
        title = "grand final"
    else:
        tables, flags, byes = [], [], []
        for group, flag in ((upper, False), (lower, True)):
            if len(group) == 1 and flag is False and lower:  # the winners' champion waits for the losers' one
                byes.append(group[0])
                continue
            if len(group) % 2:  # the best of an odd group waits a stage
                byes.append(group[0])
                group = group[1:]
            if not flag:
                pairs = list(zip(group[::2], group[1::2]))
            else:  # losers' bracket: best against worst
                pairs = [(group[i], group[-1 - i]) for i in range(len(group) // 2)]
            for a, b in pairs:
                tables.append(_seeded((a, b), rank))
                flags.append(flag)
        title = f"round {r + 1}"
    return Stage(r, title, tuple(tables), tuple(byes), _games(cfg, secret, r, tables), lower=tuple(flags))


# --------------------------------------------------------------------------- heats

def _sizes(n: int, k: int) -> list[int]:
    t = -(-n // k)
    return [n // t + (1 if i < n % t else 0) for i in range(t)]


def _heat(cfg: TournamentConfig, bots: Sequence[str], secret: bytes, before: list[Stage]) -> Stage | None:
    r = len(before)
    if r == 0:
        field_ = list(bots)
    else:
        prev = before[-1]
        if len(prev.tables) == 1:
            return None  # the final has been played
        rank = {b: i for i, b in enumerate(bots)}
        field_ = sorted(prev.advanced, key=lambda b: (-prev.points.get(b, 0.0), rank[b]))
    k = cfg.seats
    if len(field_) <= k:
        tables = [tuple(field_)]
        title = "final"
    else:
        sizes = _sizes(len(field_), k)
        seats: list[list[str]] = [[] for _ in sizes]
        order = itertools.cycle(list(range(len(sizes))) + list(range(len(sizes)))[::-1])
        for b in field_:  # snake seeding: 1 2 3 3 2 1 ..., skipping full tables
            t = next(order)
            while len(seats[t]) >= sizes[t]:
                t = next(order)
            seats[t].append(b)
        tables = [tuple(t) for t in seats]
        title = f"heat {r + 1}"
    return Stage(r, title, tuple(tables), (), _games(cfg, secret, r, tables))


# --------------------------------------------------------------------------- results of a stage

def _decide(cfg: TournamentConfig, stage: Stage, stored: Stored, bots: Sequence[str]) -> Stage:
    """The stage with its points and who goes on."""
    rank = {b: i for i, b in enumerate(bots)}
    pts = table_points(stage.games, stored)
    advanced: list[str] = []
    for table in stage.tables:
        ordered = sorted(table, key=lambda b: (-pts.get(b, 0.0), rank[b]))
        if cfg.format == "knockout":
            advanced.append(ordered[0])
        elif cfg.format == "heats":
            advanced += ordered[:min(cfg.heat_advance, len(table) - 1)] if len(stage.tables) > 1 else ordered[:1]
    return Stage(stage.number, stage.title, stage.tables, stage.byes, stage.games, stage.note, stage.pairing,
                 pts, tuple(advanced), stage.lower, stage.scores)


def winner(cfg: TournamentConfig, done: Sequence[Stage]) -> str | None:
    """The winner of a knockout or heats once no stage is left to play (``cfg.bots`` in seeding
    order, as :func:`stored_config` gives them); a Swiss has none: its standings decide."""
    if cfg.format == "swiss" or not done or not done[-1].points:
        return None
    if _next(cfg, cfg.bots, b"", {}, list(done)) is not None:
        return None
    return done[-1].advanced[0]


# --------------------------------------------------------------------------- views

def stored_results(store: Any, name: str) -> dict[int, tuple[list[str], dict[str, Any]]]:
    """A tournament's stored games by index (a :class:`~arena.tournament.store.Store`): what a staged
    format's next stage is computed from."""
    return {g["index"]: (g["seats"], g["result"]) for g in store.games(tournament=name, limit=2**62)}


def stored_config(config: Mapping[str, Any]) -> TournamentConfig | None:
    """The stages' settings from a stored tournament's fingerprint, its bots as labels in seeding
    order; None for a format without stages."""
    if config.get("format") not in ("swiss", "knockout", "heats") or "order" not in config:
        return None
    return TournamentConfig(bots=list(config["order"]), format=config["format"], seats=config["seats"],
                            deals=config["deals"], seed=config["seed"], rounds=config.get("rounds", 0),
                            elimination=config.get("elimination", "single"), advance=config.get("advance", 0))


def event_view(config: Mapping[str, Any], stored: Stored) -> list[Stage] | None:
    """A stored event's stages so far, for the terminal, the report and the web; None if it has none.
    Only who sat where matters here, so the deal seeds are not computed from the store's secret."""
    cfg = stored_config(config)
    if cfg is None:
        return None
    return stages(cfg, cfg.bots, b"", stored)


def stage_rows(cfg_format: str, stage: Stage) -> list[tuple[tuple[tuple[str, float | None], ...], tuple[str, ...]]]:
    """Each table of a stage as ((bot, points or None), ...) best first once played, and who went on."""
    out = []
    for table in stage.tables:
        if stage.points:
            ranked = sorted(table, key=lambda b: -stage.points.get(b, 0.0))
            cells = tuple((b, stage.points.get(b, 0.0)) for b in ranked)
        else:
            cells = tuple((b, None) for b in table)
        out.append((cells, tuple(b for b in table if b in stage.advanced)))
    return out
