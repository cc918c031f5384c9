"""What the pages show, read from the store through a read-only SQLite connection.

Every function here opens nothing and writes nothing: it takes a
:class:`ReadStore` (a :class:`arena.tournament.store.Store` whose connection is opened
``mode=ro``), so the web server cannot change the store even by mistake, and it
reads the same file that ``arena tournament`` or ``arena ladder run`` write in
another process. The queries are the store's (:mod:`arena.store.reads`); a store from an
earlier arena is upgraded when it is opened here, or refused clearly, so every table is there.
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
import time
import zlib
from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ArenaError
from ..store import LATEST, reads, schema_version
from ..store.games import NewGame, games_after, reader_flags
from ..store.reads import LADDER_PREFIX, game_filter
from ..tournament.store import Store, StoreError


class ReadStore(Store):
    """The game store opened read-only (``mode=ro``): queries only, from any thread."""

    def __init__(self, path: str | Path):  # noqa: super().__init__ would create the file and its tables
        self.path = Path(path)
        flags = reader_flags(self.path)  # the rule of every open: no store planted in the arena's place
        uri = self.path.resolve().as_uri() + flags[0]
        self.db = sqlite3.connect(uri, uri=True, timeout=10, isolation_level=None, check_same_thread=False)


def open_read(path: str | Path) -> ReadStore | None:
    """The store, or None while it does not exist yet (serve can start before the first tournament).

    A store an earlier arena wrote is upgraded first (opened once for writing, which runs the
    migrations it lacks), so the pages never meet a missing table; one that cannot be upgraded
    (read-only, or from a newer arena) raises :class:`StoreError` saying so."""
    p = Path(path)
    if not p.is_file():
        return None
    try:
        db = ReadStore(p)
    except sqlite3.Error:
        return None
    try:
        old = schema_version(db.db) != LATEST
    except sqlite3.Error:  # being created or replaced: look again next time
        db.db.close()
        return None
    if not old:
        return db
    db.db.close()
    try:
        Store(p).close()
    except (ArenaError, sqlite3.Error, OSError) as e:
        raise StoreError(f"{p} cannot be served: {e}") from None
    return ReadStore(p)


def version(db: ReadStore | None) -> tuple:
    """Changes whenever a game, snapshot or ladder member is stored: the key for caches and live pushes."""
    if db is None:
        return (0,)
    return reads.counts(db.db)


# --------------------------------------------------------------------------- a ladder's games

class _Kept:
    """One ladder's parsed games and think totals, as far as row ``last``."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.clear()

    def clear(self) -> None:
        self.last = 0
        self.games: dict[tuple[str, int], tuple] = {}  # (tournament, idx) -> (tournament, seed, seats, result)
        self.think: dict[str, tuple[float, int]] = {}


def _read_after(db: sqlite3.Connection, prefix: str, after: int) -> tuple[list[NewGame], list[tuple], int]:
    """The games under ``prefix`` after row ``after`` (the store's one such reader), their think sums
    and how many games the prefix holds."""
    return (games_after(db, prefix, after), *reads.think_after(db, prefix, after))


def _take(kept: _Kept, rows: list[NewGame], think: list[tuple], total: int) -> bool:
    """Add the games read after ``kept.last``; False when they do not simply follow the kept ones."""
    for g in rows:
        if (g.tournament, g.idx) in kept.games:
            return False
        kept.games[(g.tournament, g.idx)] = (g.tournament, g.seed, g.seats, g.result)
        kept.last = max(kept.last, g.rowid)
    for bot, ms, n in think:
        old_ms, old_n = kept.think.get(bot, (0.0, 0))
        kept.think[bot] = (old_ms + (ms or 0.0), old_n + (n or 0))
    return len(kept.games) == total


_LADDER_GAMES: dict[tuple, _Kept] = {}  # by store and ladder prefix, or store, "bot" and label
_LADDER_GAMES_LOCK = threading.Lock()


def ladder_games(db: ReadStore, prefix: str) -> tuple[list[tuple], dict[str, tuple[float, int]]]:
    """What :func:`arena.tournament.standings.read_games` returns for a ladder (its games in
    tournament and index order, and think totals), kept in the process: each build reads and
    parses only the games stored since the last, so the standings of a 10,000-game ladder cost the
    fit, not 10,000 JSON parses. A game removed from the store (the count falls short) reads all again."""
    with _LADDER_GAMES_LOCK:
        kept = _LADDER_GAMES.setdefault((str(db.path), prefix), _Kept())
    with kept.lock:
        if not _take(kept, *_read_after(db.db, prefix, kept.last)):
            kept.clear()  # a game removed or stored again: read them all
            _take(kept, *_read_after(db.db, prefix, 0))
        return [kept.games[k] for k in sorted(kept.games)], dict(kept.think)


# --------------------------------------------------------------------------- per-bot timing

def think_totals(db: ReadStore, label: str) -> tuple[float, int]:
    """The bot's (think ms, decisions) over every stored game: a bot page's own line (one indexed
    sum, not every game read)."""
    return reads.think_totals(db.db, label)


# --------------------------------------------------------------------------- tournaments

@dataclass
class Progress:
    """A tournament as the progress bar shows it."""

    id: str
    planned: int
    played: int
    status: str
    created: float
    updated: float
    first: float | None  # when its first and last stored games finished
    last: float | None
    recent_rate: float | None  # games per second over the last minute of play
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def rate(self) -> float | None:
        if self.recent_rate:
            return self.recent_rate
        if self.first is None or self.last is None or self.last <= self.first or self.played < 2:
            return None
        return (self.played - 1) / (self.last - self.first)

    @property
    def eta_s(self) -> float | None:
        left = self.planned - self.played
        if self.status != "running" or left <= 0 or not self.rate:
            return None
        return left / self.rate

    @property
    def stalled(self) -> bool:
        """Marked running, but nothing stored for two minutes: killed, or very slow games."""
        return self.status == "running" and time.time() - (self.last or self.updated) > 120

    @property
    def ended_early(self) -> bool:
        """Finished with fewer games than planned: a match whose SPRT decided before --max-games."""
        return self.status == "done" and self.played < self.planned

    @property
    def fraction(self) -> float:
        """How full the bar is: a finished tournament is full, however many games it needed."""
        if self.status == "done":
            return 1.0
        return min(1.0, self.played / self.planned) if self.planned else 0.0


def tournaments(db: ReadStore, ladders: bool | None = None, unfinished: bool = False) -> list[Progress]:
    """Every tournament's progress, the most recently active first (or a part: :func:`reads.tournament_rows`)."""
    out = []
    for tid, planned, status, created, updated, config, played, first, last in reads.tournament_rows(
            db.db, ladders, unfinished):
        recent = None
        if status == "running" and last is not None:
            n = reads.games_since(db.db, tid, last - 60)
            span = min(60.0, last - first) if first is not None else 0
            recent = (n - 1) / span if n > 1 and span > 0 else None
        out.append(Progress(tid, planned, played, status, created, updated, first, last, recent, json.loads(config)))
    return out


def tournament(db: ReadStore, tid: str) -> Progress | None:
    return next((t for t in tournaments(db) if t.id == tid), None)


# --------------------------------------------------------------------------- games

def _game(r: tuple) -> dict[str, Any]:
    return {"id": r[0], "tournament": r[1], "index": r[2], "seed": str(r[3]), "seats": json.loads(r[4]),
            "reason": r[5], "draw": bool(r[6]), "result": json.loads(r[7]), "turns": r[8], "wall_ms": r[9],
            "faults": r[10], "finished": r[11]}


LIST_FILTERS = ("bot", "tournament", "ladder", "reason", "fault")


def list_query(params: Mapping[str, str]) -> tuple[dict[str, Any], int]:
    """The game list's filters (:func:`search_games`' keywords) and page number from its query
    string: the page and the key it is kept by (:func:`list_stamp`) read them here alone."""
    filters: dict[str, Any] = {k: params.get(k, "").strip()[:200] for k in LIST_FILTERS}
    filters.update(min_turns=int_or_none(params.get("min_turns")), max_turns=int_or_none(params.get("max_turns")))
    return filters, max(1, int_or_none(params.get("page")) or 1)


QUERY_INT_MAX = 2**31 - 1
"""The largest number a query parameter may give: no page, turn count or seat goes past it, and a page
times its size still fits the store's 64-bit integers (SQLite refuses a larger one: a 500 for anyone)."""


def int_or_none(value: str | None) -> int | None:
    """A query parameter's whole number; None when absent, not one, or past :data:`QUERY_INT_MAX`."""
    try:
        number = int(value) if value not in (None, "") else None
    except ValueError:
        return None
    return number if number is None or abs(number) <= QUERY_INT_MAX else None


def _list_clause(bot: str = "", tournament: str = "", ladder: str = "", reason: str = "", fault: str = "",
                 min_turns: int | None = None, max_turns: int | None = None) -> tuple[str, list[Any]]:
    return game_filter(tournament=tournament, tournament_prefix=f"{LADDER_PREFIX}{ladder}:" if ladder else None,
                       bot=bot, reason=reason, fault=fault, min_turns=min_turns, max_turns=max_turns)


def search_games(db: ReadStore, *, limit: int = 100, offset: int = 0,
                 **filters: Any) -> tuple[list[dict[str, Any]], int]:
    """Games matching every filter given (:data:`LIST_FILTERS`, ``min_turns``, ``max_turns``),
    newest first, and how many match in all."""
    rows, total = reads.game_rows(db.db, *_list_clause(**filters), limit, offset)
    return [_game(r) for r in rows], total


def list_stamp(db: ReadStore, **filters: Any) -> tuple[int, int]:
    """What moves when the games a list with ``filters`` shows do (any page of it): one query."""
    return reads.game_list_stamp(db.db, *_list_clause(**filters))


class _Choices:
    """The ends, forfeits and bots of a store's games as far as row ``last`` (of ``games`` games)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.clear()

    def clear(self) -> None:
        self.last = self.games = 0
        self.reasons: set[str] = set()
        self.faults: set[str] = set()
        self.bots: set[str] = set()


_CHOICES: dict[str, _Choices] = {}


def filter_choices(db: ReadStore) -> dict[str, list[str]]:
    """Values the games list can be filtered by (the form's menus): a ladder's batches are one
    entry, its name, so a new batch moves no menu (:func:`reads.tournament_menu`). The games' values are kept in
    the process like a ladder's games (:func:`ladder_games`): a read takes only the games stored
    since the last (a full scan of the games was 4 ms a build); a game removed reads them all again."""
    with _LADDER_GAMES_LOCK:
        kept = _CHOICES.setdefault(str(db.path), _Choices())
    with kept.lock:
        top, total, new, reasons, faults, bots = reads.choices_after(db.db, kept.last)
        if kept.games + new != total:  # a game removed: read them all
            kept.clear()
            top, total, new, reasons, faults, bots = reads.choices_after(db.db, 0)
        kept.last, kept.games = top, total
        kept.reasons |= reasons
        kept.faults |= faults
        kept.bots |= bots
        ladders, tournaments = reads.tournament_menu(db.db)
        return {"ladders": ladders, "tournaments": tournaments, "reasons": sorted(kept.reasons),
                "faults": sorted(kept.faults), "bots": sorted(kept.bots)}


def game_row(db: ReadStore, gid: str) -> dict[str, Any] | None:
    r = reads.game_row(db.db, gid)
    return _game(r) if r else None


def places(game: dict[str, Any]) -> dict[int, int]:
    """Seat -> place (tied seats share the best place of their group)."""
    out, place = {}, 1
    for group in game["result"].get("order", []):
        for s in group:
            out[s] = place
        place += len(group)
    return out


# --------------------------------------------------------------------------- bots

def bot_labels(db: ReadStore) -> list[str]:
    return reads.bot_labels(db.db)


def bot_versions(db: ReadStore, label: str) -> list[dict[str, Any]]:
    """Every version of the bot's name seen in the store, with its games and first appearance."""
    name = label.split("@", 1)[0]
    rows, registered_rows = reads.version_rows(db.db, name)
    info = {r[0]: {"label": r[0], "games": r[1], "first": r[2], "last": r[3]} for r in rows}
    for lab, registered in registered_rows:
        info.setdefault(lab, {"label": lab, "games": 0, "first": registered, "last": None})
    return sorted(info.values(), key=lambda v: (v["first"] or 0, v["label"]))


def bot_results(db: ReadStore, label: str) -> list[tuple[list[str], dict[str, Any]]]:
    """(seats, result) of each game the bot played, oldest first; kept in the process like a
    ladder's games (:func:`ladder_games`): a build parses only the games stored since the last."""
    with _LADDER_GAMES_LOCK:
        kept = _LADDER_GAMES.setdefault((str(db.path), "bot", label), _Kept())
    with kept.lock:
        for attempt in range(2):
            rows, total = reads.bot_results_after(db.db, label, kept.last)
            fresh = [r for r in rows if (r[2], r[1]) not in kept.games]
            if len(fresh) == len(rows) and len(kept.games) + len(rows) == total:
                break
            kept.clear()  # a game removed or stored again: read them all
        for rowid, gid, finished, seats, result in rows:
            kept.games[(finished, gid)] = (json.loads(seats), json.loads(result))
            kept.last = max(kept.last, rowid)
        return [kept.games[k] for k in sorted(kept.games)]


def _log(db: ReadStore, gid: str) -> dict[str, Any] | None:
    blob = reads.game_log(db.db, gid)
    return None if blob is None else json.loads(zlib.decompress(blob))


def bot_faults(db: ReadStore, label: str, limit: int = 20, stderr_lines: int = 8) -> tuple[list[dict[str, Any]], Counter]:
    """The bot's latest faulted games with the last stderr lines it wrote in each; counts by reason.
    Each game's log is read once per process (:func:`_kept_per_seat`), not on every build."""
    counts = Counter(reads.fault_counts(db.db, label))
    out = []
    for gid, seat, reason, finished in reads.seats_of(db.db, label, limit, faulted=True):
        fault = _kept_per_seat(db, ("fault", gid, seat, finished, stderr_lines),
                               lambda gid=gid, seat=seat: _fault_of(db, gid, seat, stderr_lines))
        out.append({"game": gid, "seat": seat, "reason": reason, "finished": finished, **fault})
    return out, counts


def _fault_of(db: ReadStore, gid: str, seat: int, stderr_lines: int) -> dict[str, Any]:
    rec = _log(db, gid) or {}
    fault = next((f for f in rec.get("faults", []) if f.get("seat") == seat), {})
    lines: list[str] = []
    for step in rec.get("steps", []):
        if step.get("seat") == seat and step.get("stderr"):
            lines = step["stderr"]
    stderr = rec.get("stderr", [])
    if not lines and seat < len(stderr):
        lines = stderr[seat]
    return {"message": fault.get("message", ""), "turn": fault.get("turn"),
            "stderr": [str(x) for x in lines[-stderr_lines:]]}


def slowest_decisions(db: ReadStore, label: str, games: int = 200, keep: int = 10) -> list[dict[str, Any]]:
    """The bot's ``keep`` slowest answered requests over its latest ``games`` games, slowest first
    (ties: the newer game, then the earlier step).

    A cold build parsed every one of those logs (0.57 s of CPU for a bot of the club store, 80% of its
    page, paid again by each serving process). Now a log is parsed only while it can still hold one of
    them: its largest ``"ms"`` value, found by a regex over the unparsed text (:func:`_ms_bound`, no
    smaller than any of its decisions' times), is taken largest first, and parsing stops once the next
    bound is below the ``keep``-th slowest found. The result is the same as parsing them all."""
    rows = reads.seats_of(db.db, label, games)
    order = sorted(range(len(rows)), key=lambda i: -_ms_bound(db, rows[i][0], rows[i][3]))
    found: list[tuple[float, int, int, dict[str, Any]]] = []
    for i in order:
        gid, seat, _, finished = rows[i]
        if len(found) >= keep and _ms_bound(db, gid, finished) < -found[keep - 1][0]:
            break
        found += [(-d["ms"], i, j, d) for j, d in enumerate(_decisions(db, gid, seat, finished, keep))]
        found.sort(key=lambda f: f[:3])
    return [f[3] for f in found[:keep]]


_MS = re.compile(rb'"ms"\s*:\s*"?(-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?)')


def _ms_bound(db: ReadStore, gid: str, finished: float) -> float:
    """No less than the time of any decision in the game's log: the largest ``"ms"`` in its text (a
    step without one counts 0.0), kept per process; a stored game's log never changes."""
    def read() -> float:
        blob = reads.game_log(db.db, gid)
        text = zlib.decompress(blob) if blob is not None else b""
        return max([0.0, *map(float, _MS.findall(text))])

    return _kept_per_seat(db, ("ms bound", gid, finished), read)


SLOWEST_KEPT = 20_000  # (game, seat) entries of at most ``keep`` small dicts each
_SLOWEST: OrderedDict[tuple, list[dict[str, Any]]] = OrderedDict()
_SLOWEST_LOCK = threading.Lock()


def _decisions(db: ReadStore, gid: str, seat: int, finished: float, keep: int) -> list[dict[str, Any]]:
    """A seat's ``keep`` slowest answered requests in one game, read once per process."""

    def read() -> list[dict[str, Any]]:
        rec = _log(db, gid) or {}
        found = []
        for step in rec.get("steps", []):
            if step.get("seat") == seat and "request" in step and not step.get("forced"):
                found.append({"game": gid, "turn": step.get("turn"), "ms": float(step.get("ms", 0.0)),
                              "phase": step.get("phase"),
                              "kind": (step.get("act") or {}).get("kind", step.get("fault"))})
        return sorted(found, key=lambda d: -d["ms"])[:keep]

    return _kept_per_seat(db, ("slowest", gid, seat, finished, keep), read)


def _kept_per_seat(db: ReadStore, key: tuple, read: Callable[[], Any]) -> Any:
    """What a page takes from one seat of a stored game's log. A stored game's log never changes, so
    each is read once per process (keyed by store, game, seat and finish time), not once per page
    build: a bot page is rebuilt on every change of its ladders, and 200 logs cost 0.3 s of CPU."""
    key = (str(db.path), *key)
    with _SLOWEST_LOCK:
        if key in _SLOWEST:
            _SLOWEST.move_to_end(key)
            return _SLOWEST[key]
    found = read()
    with _SLOWEST_LOCK:
        _SLOWEST[key] = found
        while len(_SLOWEST) > SLOWEST_KEPT:
            _SLOWEST.popitem(last=False)
    return found


REPLAYS_KEPT = 256  # replays of the games people have open (each some tens of kB)
_REPLAYS: OrderedDict[tuple, Any] = OrderedDict()
_REPLAYS_LOCK = threading.Lock()


def replay_once(db: ReadStore, game: dict[str, Any], make: Callable[[], Any]) -> Any:
    """A stored game's replay, made once per process. A stored game never changes, so it is kept
    by store, game and finish time, not by the store's version: a ladder that stores a game a
    second would otherwise replay every open game again each second (about 30 ms of CPU each)."""
    key = (str(db.path), game["id"], game["finished"])
    with _REPLAYS_LOCK:
        if key in _REPLAYS:
            _REPLAYS.move_to_end(key)
            return _REPLAYS[key]
    value = make()
    if value is None:  # no log (yet): looked for again next time
        return None
    with _REPLAYS_LOCK:
        _REPLAYS[key] = value
        while len(_REPLAYS) > REPLAYS_KEPT:
            _REPLAYS.popitem(last=False)
    return value


# --------------------------------------------------------------------------- ladders

def ladder_names(db: ReadStore) -> list[str]:
    """Ladders with anything in this store: a recorded identity or games under ``ladder:NAME:``."""
    return reads.ladder_names(db.db)


@dataclass
class Snapshot:
    taken_at: float
    games: int
    elo: float
    lo: float
    hi: float


def rating_series(db: ReadStore, ladder: str | None = None, bot: str | None = None,
                  max_points: int = 200) -> dict[str, dict[str, list[Snapshot]]]:
    """ladder -> bot -> snapshots in time order (thinned evenly to ``max_points``), for the charts."""
    out: dict[str, dict[str, list[Snapshot]]] = {}
    for lad, b, *rest in reads.rating_history(db.db, ladder, bot):
        out.setdefault(lad, {}).setdefault(b, []).append(Snapshot(*rest))
    for series in out.values():
        for b, points in series.items():
            if len(points) > max_points:
                step = (len(points) - 1) / (max_points - 1)
                series[b] = [points[round(i * step)] for i in range(max_points)]
    return out
