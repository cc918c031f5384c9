"""The ladder's table: one Plackett-Luce fit over all its games, with what the view adds
(status, games in the last hour, trend over the last snapshots, intervals still wide)."""

from __future__ import annotations

import dataclasses
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from ..tournament.standings import Rates, read_games, summarise
from ..store.games import recent_seats
from ..store.ladders import last_view, record_view
from ..tournament.store import Store
from .config import Ladder, resolve_anchor
from .history import rating_history, trends
from .tables import MemberStatus, bot_statuses, members

@dataclass
class Row(Rates):
    rank: int
    label: str
    name: str
    version: str
    games: int = 0
    wins: int = 0
    draws: int = 0
    lasts: int = 0
    avg_place: float = 0.0
    faults: dict[str, int] = field(default_factory=dict)
    elo: float | None = None
    se: float | None = None
    elo_low: float | None = None
    elo_high: float | None = None
    los_next: float | None = None  # P(stronger than the bot ranked just below)
    origin: str = ""
    registered: float | None = None
    status: MemberStatus = MemberStatus.ACTIVE
    status_reason: str = ""
    last_hour: int = 0  # games finished in the last hour
    trend: str = ""  # ↑ ↓ → over the last snapshots ('' before two snapshots)
    wide: bool = False  # the 95% interval is wider than the ladder's wide_elo (or unrated)
    win_low: float | None = None  # the rates' 95% intervals (Wilson at the effective games over deals)
    win_high: float | None = None
    draw_low: float | None = None
    draw_high: float | None = None
    rated: bool = False  # enough games to show the rating (ratings.MIN_RATED_GAMES)
    think_ms: float = 0.0
    decisions: int = 0

    def as_json(self) -> dict[str, Any]:
        r = lambda x, k=1: None if x is None else round(x, k)  # noqa: E731
        return {"rank": self.rank, "bot": self.label, "name": self.name, "version": self.version,
                "elo": r(self.elo), "elo_se": r(self.se), "elo_low": r(self.elo_low), "elo_high": r(self.elo_high),
                "games": self.games, "wins": self.wins, "win_rate": round(self.win_rate, 4),
                "draws": self.draws, "draw_rate": round(self.draw_rate, 4), "lasts": self.lasts,
                "avg_place": round(self.avg_place, 4), "faults": dict(self.faults),
                "fault_count": sum(self.faults.values()),
                "los_next": None if self.los_next is None else round(self.los_next, 4),
                "origin": self.origin, "registered": self.registered, "status": self.status,
                "status_reason": self.status_reason or None, "games_last_hour": self.last_hour,
                "trend": self.trend or None, "wide_interval": self.wide,
                "win_rate_low": None if self.win_low is None else round(self.win_low, 4),
                "win_rate_high": None if self.win_high is None else round(self.win_high, 4),
                "draw_rate_low": None if self.draw_low is None else round(self.draw_low, 4),
                "draw_rate_high": None if self.draw_high is None else round(self.draw_high, 4),
                "rated": self.rated,
                "ms_per_decision": round(self.ms_per_decision, 3) if self.decisions else None}


@dataclass
class Cell:
    games: int = 0
    ahead: int = 0  # row finished ahead of column
    tied: int = 0  # same place (draws included)
    behind: int = 0

    @property
    def score(self) -> float | None:
        return (self.ahead + 0.5 * self.tied) / self.games if self.games else None

    def as_json(self) -> dict[str, Any]:
        return {"games": self.games, "wins": self.ahead, "ties": self.tied, "losses": self.behind,
                "score": None if self.score is None else round(self.score, 4)}


@dataclass
class LadderStandings:
    ladder: Ladder
    rows: list[Row]
    games: int
    anchor: str | None  # the anchor bot's label, or None for the pool mean
    matrix: dict[str, dict[str, Cell]] | None = None
    store: str = ""
    since_last_view: int | None = None  # games stored since the previous `arena ladder NAME` (None: first view)
    last_view: float | None = None
    history: list[dict[str, Any]] = field(default_factory=list)
    suspensions: dict[str, dict[str, Any]] = field(default_factory=dict)  # label -> detail (faults, stderr)
    misfits: list[dict[str, Any]] = field(default_factory=list)  # pairs the ratings do not predict (see misfits())

    def as_json(self) -> dict[str, Any]:
        lad = self.ladder
        out: dict[str, Any] = {
            "ladder": lad.name, "description": lad.description, "rules": lad.rules, "options": lad.options,
            "seats": lad.seats, "time": {"move_ms": lad.move_ms, "bank_ms": lad.bank_ms},
            "deals_per_placement": lad.deals, "store": self.store, "games": self.games,
            "gvisor": lad.gvisor, "one_seat_per_author": lad.one_seat_per_author,
            "one_seat_per_author_from": lad.seat_rule.value,
            "accept_kernel_channels": lad.channels_accepted,
            "anchor": {"bot": self.anchor, "elo": lad.anchor_elo} if self.anchor else
                      {"bot": None, "pool_mean": lad.anchor_elo},
            "standings": [r.as_json() for r in self.rows],
            "since_last_view": self.since_last_view, "last_view": self.last_view,
            "matchmaking": dataclasses.asdict(lad.matchmaking),
            "history": self.history, "suspended": self.suspensions, "misfits": self.misfits,
        }
        if self.matrix is not None:
            order = [r.label for r in self.rows]
            out["matrix"] = {"bots": order, "cells": {a: {b: c.as_json() for b, c in self.matrix[a].items()}
                                                      for a in order if a in self.matrix}}
        return out


def head_to_head(games: list[tuple[list[str], dict[str, Any]]]) -> dict[str, dict[str, Cell]]:
    """Row bot against column bot over every game where both sat and their order is known: who
    finished ahead, or on the same place (a tie or a draw).  The seats left unranked by a
    first-out game (the rest, when only the winner is known) are no result against each other,
    as they are none in the fit."""
    m: dict[str, dict[str, Cell]] = defaultdict(lambda: defaultdict(Cell))
    for seats, result in games:
        place = {s: g for g, group in enumerate(result["order"]) for s in group}
        unranked = not result.get("complete", True) and not result.get("draw", False)
        for i, a in enumerate(seats):
            for j, b in enumerate(seats):
                if i == j or (unranked and place[i] == place[j] and place[i] > 0):
                    continue
                c = m[a][b]
                c.games += 1
                if place[i] < place[j]:
                    c.ahead += 1
                elif place[i] == place[j]:
                    c.tied += 1
                else:
                    c.behind += 1
    return {a: dict(row) for a, row in m.items()}


MISFIT_GAMES = 20  # a pair needs this many games together before its score is held against the ratings


def misfits(rows: list[Row], cells: dict[str, dict[str, Cell]]) -> list[dict[str, Any]]:
    """Pairs whose head-to-head score the table does not predict: the score the two ratings imply
    (the Elo logistic of their gap) lies outside the pair's own 95% score interval (Wilson, as a
    match's).  One rating per bot cannot fit a bot whose score hardly depends on its opponent (a
    bot that draws most games against everyone); the view says so instead of letting the table
    alone mislead a reader."""
    from ..ratings import elo_to_score, score_interval
    out = []
    rated = [r for r in rows if r.elo is not None and r.rated]
    for i, a in enumerate(rated):
        for b in rated[i + 1:]:
            c = cells.get(a.label, {}).get(b.label)
            if c is None or c.games < MISFIT_GAMES:
                continue
            score, lo, hi = score_interval([c.behind, 0, c.tied, 0, c.ahead])
            predicted = elo_to_score(a.elo - b.elo)
            if not lo <= predicted <= hi:
                out.append({"a": a.label, "b": b.label, "games": c.games, "score": round(score, 4),
                            "score_low": round(lo, 4), "score_high": round(hi, 4),
                            "predicted": round(predicted, 4)})
    return out


def ladder_standings(ladder: Ladder, store: Store, *, matrix: bool = False, view: bool = False,
                     games: tuple[list, dict[str, tuple[float, int]]] | None = None) -> LadderStandings:
    """The ladder's table: one Plackett-Luce fit over all its games, best first.  ``view`` adds
    what `arena ladder NAME` shows besides (games since the last view, which it records; games in
    the last hour; trends; rating history). ``games`` is what ``read_games`` would read, from a
    reader that keeps them (the web server's pages)."""
    full, think = games if games is not None else read_games(store, prefix=ladder.prefix)
    games = [(seats, result) for _, _, seats, result in full]
    mem = {m.label: m for m in members(store, ladder.name)}
    labels = sorted({b for seats, _ in games for b in seats})
    anchor = resolve_anchor(ladder, labels) if len(labels) >= 2 else None
    ranked_lines, ratings = summarise(full, think, anchor=anchor, anchor_elo=ladder.anchor_elo, strict=True)
    lines = {l.bot: l for l in ranked_lines}
    order = [l.bot for l in ranked_lines] + sorted(set(mem) - set(lines))
    rows = []
    for rank, label in enumerate(order, 1):
        m = mem.get(label)
        name, _, version = label.partition("@")
        row = Row(rank, label, m.name if m else name, m.version if m else version,
                  origin=m.origin if m else "", registered=m.registered if m else None)
        line = lines.get(label)
        if line is not None:
            row.games, row.wins, row.draws, row.lasts = line.games, line.wins, line.draws, line.lasts
            row.avg_place, row.faults = line.avg_place, dict(line.faults)
            row.elo, row.elo_low, row.elo_high, row.rated = line.elo, line.elo_low, line.elo_high, line.rated
            row.se = ratings[label].se if ratings is not None and label in ratings else None
            row.los_next, row.win_low, row.win_high = line.los_next, line.win_low, line.win_high
            row.draw_low, row.draw_high = line.draw_low, line.draw_high
            row.think_ms, row.decisions = line.think_ms, line.decisions
        rows.append(row)
    cells = head_to_head(games)
    st = LadderStandings(ladder, rows, len(games), anchor, cells if matrix else None, str(store.path),
                         misfits=misfits(rows, cells))
    statuses = bot_statuses(store, ladder.name)
    wide = ladder.matchmaking.wide_elo
    for row in rows:
        got = statuses.get(row.label)
        if got is not None:
            row.status, row.status_reason = got.status, got.reason
            if got.status is MemberStatus.SUSPENDED:
                st.suspensions[row.label] = {"reason": got.reason, "since": got.since, **got.detail}
        row.wide = row.margin is None or row.margin > wide
    if view:
        _add_view(st, ladder, store)
    return st


def _add_view(st: LadderStandings, ladder: Ladder, store: Store) -> None:
    now = time.time()
    recent: dict[str, int] = defaultdict(int)
    for seats in recent_seats(store.db, ladder.prefix, since=now - 3600):
        for label in seats:
            recent[label] += 1
    st.history = rating_history(store, ladder.name)
    arrows = trends(st.history)
    for row in st.rows:
        row.last_hour = recent.get(row.label, 0)
        row.trend = arrows.get(row.label, "")
    seen = last_view(store.db, ladder.name)
    if seen is not None:
        st.last_view, st.since_last_view = seen[0], max(0, st.games - seen[1])
    try:
        record_view(store.db, ladder.name, now, st.games)
    except Exception:  # a read-only store shows the table without remembering the view
        pass
