"""Seasons of a ladder: a stretch of its run with frozen rules and members, its own deal secret,
standings and archive, and ratings carried into the next season without a jump (docs/SEASONS.md).

* A season freezes what decides its games (rules, seats, time control, suite, turn cap, table
  rules) and its members' active versions; ``arena ladder run`` plays only those members while it
  is open and refuses a ladder file that changed any frozen key.
* Its games are the run batches from ``first_batch`` to ``last_batch``, dealt from a secret of
  their own (``deal_secrets``): its sha256 is published when the season starts, the secret itself
  when it ends, so anyone can check every deal (:mod:`arena.replay.verify`).
* Its standings are one fit over its own games and the seasons before, each season back weighed
  by ``carry`` once more (a power prior: the last season's posterior, flattened, is this season's
  prior). Before any game the objective is ``carry`` times the last one's, so the first standings
  of a season are the last of the one before, with intervals wider by ``1/sqrt(carry)``.
* Divisions split by rating interval: a bot moves up only when its interval's low end clears the
  boundary above it, down only when its high end falls below its own division's.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..store.games import game_results, tournament_statuses
from ..store.ladders import ArchivedRow, SeasonRecord, add_season, archived_rows, season_records
from ..store.ladders import end_season as close_season
from ..tournament.seeds import commitment, make_named_secret
from ..tournament.store import Store
from .config import Ladder, LadderError, resolve_anchor
from .tables import bot_statuses, members

DAY_S = 86_400.0


class Season(SeasonRecord):
    """A season as the ladder uses it: the store's record (the secret only once the season has
    ended and revealed it), with what follows from it."""
    __slots__ = ()

    @property
    def open(self) -> bool:
        return self.ended is None

    def as_json(self) -> dict[str, Any]:
        return {"ladder": self.ladder, "season": self.number, "open": self.open, "started": self.started,
                "ends_at": self.ends_at, "end_games": self.end_games, "ended": self.ended,
                "first_batch": self.first_batch, "last_batch": self.last_batch, "members": list(self.members),
                "frozen": self.frozen, "commitment": self.commitment,
                "secret": None if self.secret is None else self.secret.hex()}


def frozen_of(ladder: Ladder) -> dict[str, Any]:
    """What a season keeps fixed: everything that decides its games, and how it is rated."""
    suite = ladder.deal_suite()
    frozen = {**ladder.identity(), "time": {"move_ms": ladder.move_ms, "bank_ms": ladder.bank_ms,
                                            "handshake_ms": ladder.handshake_ms},
              "max_turns": ladder.max_turns, "suite": suite.digest() if suite is not None else "",
              "fixed_schedule": ladder.fixed_schedule, "ponder": ladder.ponder,
              "one_seat_per_author": ladder.one_seat_per_author, "carry": ladder.season.carry,
              "divisions": list(ladder.season.divisions)}
    if ladder.channels_accepted:  # only when on: seasons frozen before the rule existed still match
        frozen["accept_kernel_channels"] = True
    return frozen


def seasons(store: Store, ladder: str) -> list[Season]:
    return [Season(*r) for r in season_records(store.db, ladder)]


def season(store: Store, ladder: str, number: int) -> Season:
    found = season_records(store.db, ladder, number)
    if not found:
        known = ", ".join(str(s.number) for s in seasons(store, ladder)) or "none yet"
        raise LadderError(f"ladder {ladder} has no season {number} (seasons: {known})")
    return Season(*found[0])


def current(store: Store, ladder: str) -> Season | None:
    """The season being played, if one is."""
    return next((s for s in seasons(store, ladder) if s.open), None)


def _next_batch(store: Store, ladder: Ladder) -> int:
    batches = tournament_statuses(store.db, ladder.run_prefix)
    return int(batches[-1][0][len(ladder.run_prefix):]) + 1 if batches else 0


def start_season(store: Store, ladder: Ladder, *, now: float | None = None) -> Season:
    """Begin the next season: freeze the rules and the active members, make and commit to its secret."""
    now = time.time() if now is None else now
    if (open_ := current(store, ladder.name)) is not None:
        raise LadderError(f"season {open_.number} of ladder {ladder.name} is still open: end it first "
                          f"(arena ladder {ladder.name} season end)")
    out = bot_statuses(store, ladder.name)
    active = sorted(m.label for m in members(store, ladder.name) if m.label not in out)
    if len(active) < ladder.seats:
        raise LadderError(f"ladder {ladder.name} has {len(active)} active member(s); a season of {ladder.seats}-seat "
                          "tables needs at least that many (play the ladder once to seed it)")
    number = 1 + max((s.number for s in seasons(store, ladder.name)), default=0)
    name = f"season:{ladder.name}:{number}"
    make_named_secret(store, name)
    rules = ladder.season
    add_season(store.db, ladder.name, number, frozen_of(ladder), name, _next_batch(store, ladder), now,
               None if rules.days is None else now + rules.days * DAY_S, rules.games, active)
    return season(store, ladder.name, number)


def check_frozen(ladder: Ladder, s: Season) -> None:
    """Refuse a ladder file that changed what the open season froze."""
    now = frozen_of(ladder)
    changed = sorted(k for k in set(now) | set(s.frozen) if now.get(k) != s.frozen.get(k))
    if changed:
        raise LadderError(f"ladder {ladder.name}: the file changes {', '.join(changed)} during season {s.number}, "
                          f"which froze them; put them back, or end the season first "
                          f"(arena ladder {ladder.name} season end)")


def season_tournaments(ladder: Ladder, s: Season, last: int | None = None) -> tuple[str, str]:
    """The run batch ids a season's games lie between (inclusive); an open season's run to the end."""
    end = s.last_batch if s.last_batch is not None else last
    return ladder.run_id(s.first_batch), ladder.run_id(end) if end is not None else ladder.run_prefix + "~"


def season_games(store: Store, ladder: Ladder, s: Season) -> list[tuple[str, int, list[str], dict[str, Any]]]:
    """(tournament, seed, seats, result) of every game of the season, in order."""
    lo, hi = season_tournaments(ladder, s)
    return list(game_results(store.db, prefix=ladder.run_prefix, first=lo, last=hi))


def due(store: Store, ladder: Ladder, s: Season, *, now: float | None = None) -> str:
    """Why the open season should end now ("" if it should not): its date passed or its games were played."""
    now = time.time() if now is None else now
    if s.ends_at is not None and now >= s.ends_at:
        return f"its end date passed ({time.strftime('%Y-%m-%d %H:%M', time.gmtime(s.ends_at))} UTC)"
    if s.end_games is not None and len(season_games(store, ladder, s)) >= s.end_games:
        return f"its {s.end_games} games were played"
    return ""


def end_season(store: Store, ladder: Ladder, *, now: float | None = None) -> Season:
    """End the open season: its last batch is the last one begun, its standings are archived, its
    secret revealed. The run finishes a begun batch before it ends a season, so none is cut short."""
    now = time.time() if now is None else now
    s = current(store, ladder.name)
    if s is None:
        raise LadderError(f"ladder {ladder.name} has no open season (start one: arena ladder {ladder.name} season start)")
    last = _next_batch(store, ladder) - 1
    rows = season_standings(store, ladder, s)
    close_season(store.db, ladder.name, s.number, s.secret_name, last, now,
                 [ArchivedRow(r.rank, r.bot, r.games, r.elo, r.lo, r.hi, r.division) for r in rows])
    return season(store, ladder.name, s.number)


# --------------------------------------------------------------------------- standings and divisions

@dataclass
class SeasonRow:
    rank: int
    bot: str
    games: int  # this season's own
    elo: float | None
    lo: float | None
    hi: float | None
    division: int  # 0 is the top division
    wins: int = 0
    avg_place: float = 0.0

    def as_json(self) -> dict[str, Any]:
        r = lambda x: None if x is None else round(x, 1)  # noqa: E731
        return {"rank": self.rank, "bot": self.bot, "games": self.games, "elo": r(self.elo), "elo_low": r(self.lo),
                "elo_high": r(self.hi), "division": self.division, "wins": self.wins,
                "avg_place": round(self.avg_place, 4)}


def division_of(lo: float, hi: float, now: int, bounds: list[float]) -> int:
    """The division a bot with this 95% interval is in, from division ``now`` (0 the top; ``bounds``
    the floors of divisions 0..m-1, highest first; division m has none). It moves up to the highest
    division whose floor its low end clears, and down only to the highest whose floor its high end
    still reaches; an interval across its own floor keeps it where it is."""
    m = len(bounds)
    cleared = next((i for i, b in enumerate(bounds) if lo >= b), m)
    reached = next((i for i, b in enumerate(bounds) if hi >= b), m)
    if cleared < now:
        return cleared
    if reached > now:
        return reached
    return now


def _weights(store: Store, ladder: Ladder, s: Season) -> list[tuple[float, list[tuple[list[str], dict[str, Any]]]]]:
    """(weight, games) of this season and each one before it: 1, carry, carry^2, ..."""
    carry = float(s.frozen.get("carry", 1.0))
    out = []
    for back in [x for x in seasons(store, ladder.name) if x.number <= s.number]:
        games = [(seats, result) for _, _, seats, result in season_games(store, ladder, back)]
        out.append((carry ** (s.number - back.number), games))
    return out


def season_standings(store: Store, ladder: Ladder, s: Season) -> list[SeasonRow]:
    """The season's table: its own games counted, ratings from the carried fit, divisions from the
    previous season's archived divisions (a bot new to the seasons starts in the bottom one)."""
    from ..ratings import Outcome, fit_elo
    from ..tournament.standings import outcomes, tally
    counts: dict[Outcome, float] = defaultdict(float)  # weighted: fit_elo takes fractional counts
    for w, games in _weights(store, ladder, s):
        for o in outcomes(games):
            counts[o] += w
    own = [(seats, result) for _, _, seats, result in season_games(store, ladder, s)]
    names = sorted({b for o in counts for b in o.bots})
    ratings = None
    if len(names) >= 2:
        weight = float(s.frozen.get("carry", 1.0)) ** (s.number - 1)  # the first season's prior, carried as often
        ratings = fit_elo(counts, anchor=resolve_anchor(ladder, names), anchor_elo=ladder.anchor_elo,
                          prior=weight, tie_prior=weight)
    lines = tally(own)
    bounds = [float(b) for b in s.frozen.get("divisions", [])]
    before = _archived_divisions(store, ladder.name, s.number - 1)
    bots = sorted(set(s.members) | set(lines))
    rows = []
    for bot in bots:
        r = ratings.get(bot) if ratings is not None else None
        line = lines.get(bot)
        now = before.get(bot, len(bounds))
        div = division_of(r.ci_low, r.ci_high, now, bounds) if r is not None else now
        rows.append(SeasonRow(0, bot, line.games if line else 0, r.elo if r else None, r.ci_low if r else None,
                              r.ci_high if r else None, div, line.wins if line else 0,
                              line.avg_place if line else 0.0))
    rows.sort(key=lambda x: (x.division, -(x.elo if x.elo is not None else float("-inf")), x.bot))
    for i, row in enumerate(rows, 1):
        row.rank = i
    return rows


def _archived_divisions(store: Store, ladder: str, number: int) -> dict[str, int]:
    return {r.bot: r.division for r in archived_rows(store.db, ladder, number)}


def archived_standings(store: Store, ladder: str, number: int) -> list[SeasonRow]:
    """An ended season's table as it was archived when it ended."""
    return [SeasonRow(*r) for r in archived_rows(store.db, ladder, number)]


def standings_of(store: Store, ladder: Ladder, s: Season) -> list[SeasonRow]:
    """What a season's page shows: the archive once ended, the live table while open."""
    return archived_standings(store, ladder.name, s.number) if not s.open else season_standings(store, ladder, s)


# --------------------------------------------------------------------------- what is published

def published_games(store: Store, ladder: Ladder, s: Season) -> Iterator[dict[str, Any]]:
    """The season's export, one JSON object per line: a header (ladder, season, its public seed,
    the commitment), then every game with its log and where in its batch it was dealt (the batch's
    base seed, its tables and deals), which with the revealed secret is all a verifier needs."""
    yield {"kind": "season", "ladder": ladder.name, "season": s.number, "ladder_seed": ladder.seed,
           "seats": ladder.seats, "commitment": s.commitment, "first_batch": s.first_batch,
           "last_batch": s.last_batch, "games": len(season_games(store, ladder, s))}
    lo, hi = season_tournaments(ladder, s)
    n = len(ladder.run_prefix)
    tids = [t for t, _ in tournament_statuses(store.db, ladder.run_prefix) if lo <= t <= hi]
    for tid in tids:
        t = store.tournament(tid) or {}
        cfg = t.get("config", {})
        deals, seats = int(cfg.get("deals", 1)), int(cfg.get("seats", ladder.seats))
        batch = {"number": int(tid[n:]), "base": cfg.get("seed"), "deals": deals,
                 "tables": int(t.get("planned", 0)) // max(1, deals * seats), "deal_secret": cfg.get("deal_secret", "")}
        for g in store.games(tournament=tid, limit=10**9):
            yield {"kind": "game", "id": g["id"], "tournament": tid, "index": g["index"], "seed": g["seed"],
                   "seats": g["seats"], "result": g["result"], "batch": batch,
                   "log": public_log(store.game_record(g["id"]) or {})}


# What of a game log the export carries: an allow-list, so a field added to the log later stays out
# until named here. A bot's stderr and info lines, and fault messages (which quote them), are its
# author's (docs/CLUB.md); the verifier needs only the deal, the moves and the result.
PUBLIC_LOG = frozenset({"game_id", "rules", "seed", "players", "max_turns", "steps", "clock", "setup_events",
                        "result", "faults", "think_ms", "decisions", "wall_ms", "given"})
PUBLIC_STEP = frozenset({"turn", "seat", "phase", "request", "action", "ms", "act", "events", "forced", "given",
                         "fault", "off_turn"})
PUBLIC_FAULT = frozenset({"game", "seat", "reason", "finished", "turn"})


def public_log(log: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in log.items() if k in PUBLIC_LOG}
    out["steps"] = [{k: v for k, v in step.items() if k in PUBLIC_STEP} for step in log.get("steps", [])]
    out["faults"] = [{k: v for k, v in f.items() if k in PUBLIC_FAULT} for f in log.get("faults", [])]
    return out


def reveal(s: Season) -> dict[str, Any]:
    """The published secret of an ended season (and its commitment, to check it against)."""
    if s.secret is None:
        raise LadderError(f"season {s.number} of ladder {s.ladder} is still open: its secret is revealed when it ends")
    assert commitment(s.secret) == s.commitment
    return {"ladder": s.ladder, "season": s.number, "secret": s.secret.hex(), "commitment": s.commitment}


__all__ = ["Season", "SeasonRow", "archived_standings", "check_frozen", "current", "division_of", "due",
           "end_season", "frozen_of", "public_log", "published_games", "reveal", "season", "season_games", "season_standings",
           "seasons", "standings_of", "start_season"]
