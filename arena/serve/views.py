"""Page models: what each page needs, gathered from :mod:`.data` and the arena's own tables.

Standings are the same numbers ``arena standings`` and ``arena ladder`` print:
tournaments go through :func:`arena.tournament.standings.standings`, ladders through
:func:`arena.ladder.ladder_standings` (one Elo fit over every game of the
ladder). Mean ms per decision is added from the stored per-seat totals.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..store import reads
from ..store.people import label_name
from ..tournament.runlock import held
from ..tournament.standings import from_store
from . import data
from .charts import Band, heat_map, rating_chart


@dataclass
class StandingRow:
    """One row as the page shows it; the text comes from the formatters `arena standings` and
    `arena ladder` use (:mod:`arena.tournament.standings`), so every view writes the same numbers."""

    rank: int
    bot: str
    version: str
    elo: float | None
    margin: float | None
    games: int
    win_rate: float
    avg_place: float
    faults: dict[str, int]
    ms: float | None
    draw_rate: float = 0.0
    los_next: float | None = None
    elo_text: str = "-"
    win_text: str = "-"
    draw_text: str = "-"
    los_text: str = "-"
    ms_text: str = "-"
    author: str = ""   # the account that owns the bot, on a club server
    status: str = ""   # on a ladder: active, suspended or retired

    @property
    def name(self) -> str:
        return self.bot.split("@", 1)[0]

    @property
    def fault_count(self) -> int:
        return sum(self.faults.values())


def row_of(rank: int, line: Any, bot: str) -> StandingRow:
    """A page row from a standings line or a ladder row (both carry the same fields)."""
    from ..tournament.standings import elo_text, los_text, rate_text
    ms = line.ms_per_decision if line.decisions else None
    return StandingRow(rank, bot, bot.partition("@")[2], line.elo if line.rated else None,
                       line.margin if line.rated else None, line.games, line.win_rate, line.avg_place,
                       dict(line.faults), ms, line.draw_rate, line.los_next,
                       elo_text(line.elo, line.elo_low, line.elo_high, line.rated, line.games),
                       rate_text(line.win_rate, line.win_low, line.win_high, line.games),
                       rate_text(line.draw_rate, line.draw_low, line.draw_high, line.games),
                       los_text(line.los_next), "-" if ms is None else f"{ms:,.1f}")


def tournament_rows(db: data.ReadStore, tid: str | None) -> list[StandingRow]:
    return [row_of(rank, line, line.bot) for rank, line in enumerate(from_store(db, tid), 1)]


def _owners(db: data.ReadStore) -> dict[str, str]:
    """Bot name -> owning account (none on a store from before accounts)."""
    from ..store.people import owner_names
    return owner_names(db.db)


def _ladder(db: data.ReadStore, name: str, ladders_dir: Path | None) -> Any:
    """The ladder's file as played on this store if it can be read (its anchor decides the scale), else
    the copy its store keeps (a server started without ``--ladders`` where the file is: its seats and
    seed are what a season's published games are checked by), else its defaults."""
    return _ladder_and_refusal(db, name, ladders_dir)[0]


def _ladder_and_refusal(db: data.ReadStore, name: str, ladders_dir: Path | None) -> tuple[Any, str]:
    """:func:`_ladder`, and why it cannot be played on this store if it cannot (its file as it is then)."""
    from ..ladder import Ladder, LadderError, SeatsRefused, load_ladder
    try:
        return load_ladder(name, ladders_dir, check_bots=False, store_dir=Path(db.path).parent,
                           store=db.path), ""
    except SeatsRefused as e:
        return e.ladder, e.reason  # without the file's path, which is the server's
    except (LadderError, OSError):
        return Ladder(name=name, bots=[]), ""


@dataclass
class LadderPage:
    name: str
    description: str
    games: int
    rows: list[StandingRow]
    chart: str  # SVG markup
    series: int
    heat: str  # SVG markup
    cells: int
    error: str = ""
    members: list[str] = field(default_factory=list)
    misfits: list[dict[str, Any]] = field(default_factory=list)
    seasons: list[int] = field(default_factory=list)  # the ladder's season numbers, each linked
    seat_rule: str = ""  # one_seat_per_author and who set it (the file, or the club's default), when either says so
    refused: str = ""  # why the ladder cannot be played on this store (its seats), if it cannot


def ladder_page(db: data.ReadStore, name: str, ladders_dir: Path | None) -> LadderPage:
    from ..ladder import LadderError, ladder_standings
    ladder, refused = _ladder_and_refusal(db, name, ladders_dir)
    from ..ladder import SeatRule
    error = ""
    games = data.ladder_games(db, ladder.prefix)  # only the games since the last build are read
    try:
        table = ladder_standings(ladder, db, matrix=True, games=games)
    except (LadderError, ValueError) as e:  # an anchor without games: show the table unrated
        error = str(e)
        ladder.anchor = None
        table = ladder_standings(ladder, db, matrix=True, games=games)
    owners = _owners(db)
    rows = [replace(row_of(r.rank, r, r.label), author=owners.get(label_name(r.label), ""),
                    status=str(getattr(r.status, "value", r.status))) for r in table.rows]
    order = [r.bot for r in rows if r.games]
    history = data.rating_series(db, ladder=name).get(name, {})
    bands = {bot: [Band(p.games, p.taken_at, p.elo, p.lo, p.hi) for p in pts] for bot, pts in history.items()}
    chart = rating_chart(bands, order=[b for b in order if b in bands] + sorted(set(bands) - set(order)))
    matrix = table.matrix or {}
    cells = {a: {b: (c.score, c.games) for b, c in row.items()} for a, row in matrix.items()}
    from ..ladder.seasons import seasons
    numbers = [s.number for s in seasons(db, name)]  # the store is upgraded on open: the table is there
    return LadderPage(name, ladder.description, table.games, rows, chart, len(bands), heat_map(order, cells),
                      len(order) * (len(order) - 1), error, [r.bot for r in rows], table.misfits, numbers,
                      "" if ladder.seat_rule is SeatRule.DESK else ladder.seat_rule_text, refused)


@dataclass
class BotPage:
    label: str
    versions: list[dict[str, Any]]
    line: StandingRow | None
    opponents: list[dict[str, Any]]
    faults: list[dict[str, Any]]
    fault_counts: dict[str, int]
    slowest: list[dict[str, Any]]
    charts: list[tuple[str, str]]  # (ladder, SVG) for each ladder with history
    ladders: list[str]
    author: str = ""  # the owning account, on a club server
    statuses: list[dict[str, Any]] = field(default_factory=list)  # ladder, status, reason where not active


def bot_page(db: data.ReadStore, label: str) -> BotPage | None:
    from ..ladder import head_to_head
    versions = data.bot_versions(db, label)
    if not any(v["label"] == label for v in versions):
        return None
    games = data.bot_results(db, label)
    line = _row_for(games, db, label)
    opponents = []
    for other, cell in sorted(head_to_head(games).get(label, {}).items()):
        opponents.append({"bot": other, "games": cell.games, "ahead": cell.ahead, "tied": cell.tied,
                          "behind": cell.behind, "score": cell.score})
    faults, counts = data.bot_faults(db, label)
    charts = []
    for ladder, series in sorted(data.rating_series(db, bot=label).items()):
        bands = {label: [Band(p.games, p.taken_at, p.elo, p.lo, p.hi) for p in series.get(label, [])]}
        charts.append((ladder, rating_chart(bands, order=[label], selected=label)))
    ladders = sorted({g_tid for g_tid in _ladders_of(db, label)})
    statuses = [{"ladder": lad, "status": status, "reason": reason}
                for lad, status, reason in reads.bot_statuses(db.db, label)]
    return BotPage(label, versions, line, opponents, faults, dict(counts), data.slowest_decisions(db, label),
                   charts, ladders, _owners(db).get(label_name(label), ""), statuses)


def _row_for(games: list, db: data.ReadStore, label: str) -> StandingRow | None:
    """The bot's own line over all its games (no fit: Elo is per ladder or tournament)."""
    from ..tournament.standings import tally
    line = tally(games).get(label)
    if line is None:
        return None
    line.think_ms, line.decisions = data.think_totals(db, label)
    row = row_of(0, line, line.bot)
    row.elo_text = "- (per ladder or tournament)"
    return row


def _ladders_of(db: data.ReadStore, label: str) -> list[str]:
    return reads.ladders_played(db.db, label)


@dataclass(frozen=True)
class LadderTile:
    """A ladder on the overview. A batch marked running counts as playing only while some process
    holds its run lock; one whose runner is gone (killed, or stopped mid-batch) is ``stopped``.
    ``seen`` is when a playing batch last stored a game (or began): a page kept from before a
    ``kill -9`` still shows how old that sign of life is."""

    name: str
    games: int
    batches: int
    playing: int = 0
    stopped: int = 0
    seen: float | None = None


@dataclass
class Home:
    ladders: list[LadderTile]
    tournaments: list[data.Progress]  # this page of them; a ladder's batches and placements are its own
    recent: list[dict[str, Any]]
    games: int
    page_no: int = 1
    pages: int = 1


TOURNAMENTS_PER_PAGE = 25


def home(db: data.ReadStore, page_no: int = 1) -> Home:
    """The overview: each ladder once (its batches and placements folded under it), then the
    other tournaments, newest first, a page at a time."""
    unfinished = data.tournaments(db, ladders=True, unfinished=True)  # a ladder's thousands of batches: not read
    alive = held(db.path, [t.id for t in unfinished if t.status == "running"])
    ladders = []
    for name in data.ladder_names(db):
        prefix = f"{data.LADDER_PREFIX}{name}:"
        n, batches = reads.prefix_counts(db.db, prefix)
        mine = [t for t in unfinished if t.id.startswith(prefix)]
        playing = [t for t in mine if t.id in alive]
        seen = max((t.last or t.updated for t in playing), default=None)
        ladders.append(LadderTile(name, n, batches, len(playing), len(mine) - len(playing), seen))
    others = data.tournaments(db, ladders=False)
    pages = max(1, -(-len(others) // TOURNAMENTS_PER_PAGE))
    page_no = min(max(1, page_no), pages)
    shown = others[(page_no - 1) * TOURNAMENTS_PER_PAGE:page_no * TOURNAMENTS_PER_PAGE]
    recent, total = data.search_games(db, limit=10)
    return Home(ladders, shown, recent, total, page_no, pages)
