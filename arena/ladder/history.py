"""Rating history and the running ladder's view of its games, kept up to date incrementally.

:class:`LadderState` reads only the games stored since its last read (by SQLite rowid) and keeps
what the run needs: aggregated outcomes (the fit takes them as counts, so a refit costs the same
after 100 games or 100k), games per bot and per pair, and each bot's run of consecutive faulted
games.  Matchmaking refits once the games grew by ``REFIT_SHARE`` (a big ladder's refit takes
0.5-3 s: 100 bots, measured in bench/bench_ratings.py), snapshots always refit.  Snapshots of the fitted table go to the shared ``rating_snapshots`` table.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ..ratings import Outcome, Ratings, fit_elo
from ..store import reads
from ..store.games import games_after
from ..store.ladders import Note, Rated, add_snapshot
from ..store.notes import Kind
from ..store.people import label_name
from ..tournament.standings import outcomes
from ..tournament.store import Store
from .config import Ladder, resolve_anchor
from .matchmaking import pair_key
from .tables import _has_tables


@dataclass
class FaultRun:
    """A bot's current run of consecutive games with a forfeit of its own, and the last one.
    ``rowids`` are the store's rows of those games, so that a run can be cut at a reinstatement
    (:meth:`since`): the games a bot was suspended for do not suspend it again."""

    count: int = 0
    reasons: Counter = field(default_factory=Counter)
    last_game: str = ""
    last_seat: int = 0
    last_reason: str = ""
    rowids: list[tuple[int, str]] = field(default_factory=list)  # (game row, its forfeit reason)

    def add(self, rowid: int, gid: str, seat: int, reason: str) -> None:
        self.count += 1
        self.reasons[reason] += 1
        self.last_game, self.last_seat, self.last_reason = gid, seat, reason
        self.rowids.append((rowid, reason))

    def since(self, rowid: int) -> FaultRun:
        """The part of this run stored after game row ``rowid`` (all of it for 0)."""
        kept = [(r, why) for r, why in self.rowids if r > rowid]
        if len(kept) == len(self.rowids):
            return self
        if not kept:
            return FaultRun()
        return FaultRun(len(kept), Counter(why for _, why in kept), self.last_game, self.last_seat,
                        self.last_reason, kept)


REFIT_SHARE = 0.01  # matchmaking refits once the ladder's games grew by 1% (every batch while small)


class LadderState:
    """The ladder's games as the run needs them; :meth:`refresh` adds what was stored since."""

    def __init__(self, ladder: Ladder) -> None:
        self.ladder = ladder
        self.last_rowid = 0
        self.games = 0
        self.outcomes: Counter[Outcome] = Counter()
        self.bot_games: Counter[str] = Counter()
        self.pair_games: Counter[tuple[str, str]] = Counter()
        self.last_seen: dict[str, int] = {}  # label -> the number of its last game (balanced matchmaking)
        self.faults: dict[str, FaultRun] = {}
        self._ratings: Ratings | None = None
        self._fitted_at = -1

    def refresh(self, store: Store) -> int:
        """Read the ladder's games stored since the last call; returns how many there were."""
        rows = games_after(store.db, self.ladder.prefix, self.last_rowid)
        for rowid, gid, _, _, _, seats, result in rows:
            self.last_rowid = rowid
            self.games += 1
            self.outcomes.update(outcomes([(seats, result)]))
            self.bot_games.update(seats)
            self.last_seen.update(dict.fromkeys(seats, self.games))
            for a, b in ((a, b) for i, a in enumerate(seats) for b in seats[i + 1:]):
                self.pair_games[pair_key(a, b)] += 1
            forfeits = result.get("forfeits", {})
            for seat, label in enumerate(seats):
                run = self.faults.setdefault(label, FaultRun())
                reason = forfeits.get(str(seat))
                if reason is None:
                    self.faults[label] = FaultRun()
                else:
                    run.add(rowid, gid, seat, reason)
        if rows:
            self.last_rowid = rows[-1][0]
        return len(rows)

    def ratings(self, *, fresh: bool = False) -> Ratings | None:
        """The maximum-likelihood table for matchmaking: refitted once the games grew by
        ``REFIT_SHARE`` since the last fit, or a bot without a rating played (``fresh``: over
        every game read so far, as a snapshot needs)."""
        grown = self.games - max(self._fitted_at, 0)
        unrated = self._ratings is not None and any(b not in self._ratings for b in self.bot_games)
        if self._fitted_at != self.games and (fresh or self._ratings is None or unrated
                                              or grown >= REFIT_SHARE * self._fitted_at):
            self._ratings = _fit(self.ladder, self.outcomes) if self.bot_games else None
            self._fitted_at = self.games
        return self._ratings


def _fit(ladder: Ladder, counts: Counter[Outcome]) -> Ratings | None:
    names = sorted({b for o in counts for b in o.bots})
    if len(names) < 2:
        return None
    return fit_elo(counts, anchor=resolve_anchor(ladder, names), anchor_elo=ladder.anchor_elo)


def take_snapshot(store: Store, ladder: Ladder, *, state: LadderState | None = None) -> int:
    """Store the fitted table now (one ``rating_snapshots`` row per rated bot); returns the rows written."""
    if state is None:
        state = LadderState(ladder)
        state.refresh(store)
    ratings = state.ratings(fresh=True)
    if ratings is None:
        return 0
    after = {label: (r.elo, r.ci_low, r.ci_high) for label, r in ratings.items()}
    return add_snapshot(store.db, ladder.name, time.time(), state.games, after,
                        lambda before: _pass_notes(ladder.name, before, after))


def passes(before: dict[str, Rated], after: dict[str, Rated]) -> dict[str, list[str]]:
    """Bot -> the rivals whose interval its own now clears (its low end above their high end) and
    did not clear at the last snapshot (bots in both snapshots only), nearest first.

    Intervals, not points: two bots whose points swap back and forth inside overlapping intervals
    are not told each time; a bot is told again only after falling back into its rival's interval
    and clearing it once more."""
    def clears(table: dict[str, Rated], a: str, b: str) -> bool:
        return table[a][1] > table[b][2]

    out: dict[str, list[str]] = {}
    for bot, (elo, _, _) in after.items():
        if bot not in before:
            continue
        passed = [r for r in after if r != bot and r in before and clears(after, bot, r) and not clears(before, bot, r)]
        if passed:
            out[bot] = sorted(passed, key=lambda r: elo - after[r][0])
    return out


def _pass_notes(ladder: str, before: dict[str, Rated], after: dict[str, Rated]) -> list[Note]:
    """What to tell each bot's owner (on a club server): which rivals it moved past since the last snapshot."""
    notes: list[Note] = []
    for bot, rivals in passes(before, after).items():
        names = ", ".join(rivals[:3]) + (f" and {len(rivals) - 3} more" if len(rivals) > 3 else "")
        notes.append((label_name(bot), Kind.PASSED,
                      f"{bot} moved past {names} on ladder {ladder} (Elo {before[bot][0]:.0f} -> {after[bot][0]:.0f})",
                      f"/ladders/{ladder}"))
    return notes


def rating_history(store: Store, ladder: str, bot: str | None = None) -> list[dict[str, Any]]:
    """Snapshots oldest first: {taken_at, games, bot, elo, lo, hi}; ``bot`` is a label or a name
    (the store's one reader of snapshots, :func:`arena.store.reads.rating_history`, as rows to print)."""
    if not _has_tables(store):
        return []
    return [{"taken_at": taken_at, "games": games, "bot": b, "elo": round(elo, 1), "lo": round(lo, 1),
             "hi": round(hi, 1)} for _, b, taken_at, games, elo, lo, hi in reads.rating_history(store.db, ladder, bot)]


TREND_SNAPSHOTS = 3  # a trend compares the latest snapshot with the one this many before it
TREND_ELO = 5.0  # smaller moves are shown as steady


def trends(snapshots: list[dict[str, Any]]) -> dict[str, str]:
    """Per bot: '↑', '↓' or '→' comparing its latest snapshot with the one TREND_SNAPSHOTS before it
    (or its first); no entry for a bot with a single snapshot."""
    by_bot: dict[str, list[float]] = {}
    for s in snapshots:
        by_bot.setdefault(s["bot"], []).append(s["elo"])
    out = {}
    for bot, elos in by_bot.items():
        if len(elos) < 2:
            continue
        delta = elos[-1] - elos[max(0, len(elos) - 1 - TREND_SNAPSHOTS)]
        out[bot] = "↑" if delta > TREND_ELO else "↓" if delta < -TREND_ELO else "→"
    return out
