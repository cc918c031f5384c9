"""Ladders: named, persistent rating pools that bots join with ``arena submit``.

A ladder is defined by ``ladders/<name>.toml`` (rules, seats, time control,
deals per placement, the initial bots, an optional anchor; see
``ladders/README.md``).  Its state lives in the ordinary game store:

* ``ladders`` - the settings that decide what a game *is* (rules, options,
  seats), recorded on first use, so a ladder whose file later changes them is
  refused instead of silently mixing two games in one rating pool;
* ``ladder_members`` - who is on the ladder: label (name@version), files hash,
  how to load the bot again, when it joined and which tournament placed it;
* every game is a normal game of a normal tournament: ``ladder:<name>:seed``
  (the round-robin of the initial bots, played lazily on first use) and
  ``ladder:<name>:placement:<label>`` (a newcomer's gauntlet against the
  members of the day), so ``arena games --tournament ...`` finds them.

The table is one :func:`arena.ratings.fit_elo` over *all* games of the ladder,
refitted each time it is shown (order independent; ``docs/RATINGS.md``).
Placement runs are resumable like any tournament: submitting the same bot
again finishes its placement.

:func:`run_match` (``arena match``) is the two-bot counterpart: duplicate-deal
pairs until an SPRT decides.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import shutil
import time
import tomllib
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from .engine import Rules, RulesError, rules_from
from .manifest import NAME_RE, BotSpec, ManifestError, bundled_bots, load_bot
from .ratings import Sprt, elo_difference, fit_elo, los, neighbour_los
from .referee import TimeControl
from .standings import outcomes, tally
from .store import DEFAULT_STORE, Store
from .executors import BotSetup, GameTask, open_in_process, store_played
from .seeds import deal_seed, load_secret, run_secret
from .tournament import MAX_TABLES, ConfigError, Reporter, TournamentConfig, check_config, run_tournament

LADDER_DIR = Path(__file__).resolve().parent.parent / "ladders"

LADDER_SCHEMA = """
CREATE TABLE IF NOT EXISTS ladders (
    name TEXT PRIMARY KEY,
    config TEXT NOT NULL,            -- JSON: what decides a game (rules, options, seats)
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS ladder_members (
    ladder TEXT NOT NULL,
    label TEXT NOT NULL,             -- name@version
    name TEXT NOT NULL,
    version TEXT NOT NULL,
    hash TEXT NOT NULL,              -- BotSpec.files_hash() when it joined
    ref TEXT NOT NULL,               -- how to load it again: bundled name or absolute path
    origin TEXT NOT NULL,            -- 'initial' (from the ladder file) or 'submitted'
    placement TEXT NOT NULL,         -- the tournament that placed it
    registered REAL NOT NULL,
    PRIMARY KEY (ladder, label)
);
"""


class LadderError(ValueError):
    """A ladder file, submission or store state that cannot be used; the message says why."""


class CheckFailed(LadderError):
    """``arena check`` found faults; ``report`` is its report."""

    def __init__(self, message: str, report: dict[str, Any]):
        super().__init__(message)
        self.report = report


# --------------------------------------------------------------------------- the ladder file

# The file's fields and their checks: arena.config.LadderFile (shared with tournament files).


@dataclass
class Ladder:
    name: str
    bots: list[str]  # initial bots: bundled names or absolute paths
    path: Path | None = None
    description: str = ""
    rules: str = "classic"
    options: dict[str, Any] = field(default_factory=dict)
    seats: int = 2
    deals: int = 4  # per placement table; each deal is played in every seat rotation
    seed: int = 1
    max_turns: int = 2000
    max_tables: int = MAX_TABLES
    move_ms: int = 1000
    bank_ms: int = 10_000
    handshake_ms: int = 10_000
    anchor: str | None = None  # None: the pool mean is anchor_elo
    anchor_elo: float = 1500.0
    store: str = str(DEFAULT_STORE)
    concurrency: int = 0
    check_games: int = 1  # games per scenario of the entry check

    # -- names of what the ladder keeps in the store
    @property
    def prefix(self) -> str:
        return f"ladder:{self.name}:"

    @property
    def seed_id(self) -> str:
        return f"ladder:{self.name}:seed"

    def placement_id(self, label: str) -> str:
        return f"ladder:{self.name}:placement:{label}"

    def ruleset(self) -> Rules:
        return rules_from(self.rules, dict(self.options))

    def identity(self) -> dict[str, Any]:
        """What decides the games; fixed for the ladder's life once it has any."""
        return {"rules": self.ruleset().options(), "seats": self.seats}

    def tournament(self, tid: str, *, format: str, bots: list[str], candidates: list[str] | None = None,
                   **fingerprint: Any) -> TournamentConfig:
        """A tournament config with this ladder's settings; ``fingerprint`` (a stored config) wins."""
        cfg = TournamentConfig(
            name=tid, bots=list(bots), format=format, candidates=list(candidates or []), rules=self.rules,
            options=dict(self.options), seats=self.seats, deals=self.deals, seed=self.seed,
            concurrency=self.concurrency, max_turns=self.max_turns, move_ms=self.move_ms,
            bank_ms=self.bank_ms, handshake_ms=self.handshake_ms, max_tables=self.max_tables,
            store=self.store)
        return dataclasses.replace(cfg, **fingerprint) if fingerprint else cfg


def ladder_path(ref: str | Path, ladders_dir: Path | None = None) -> Path:
    """A ladder name (``ladders/<name>.toml``) or a path to a ladder file."""
    directory = ladders_dir or LADDER_DIR
    p = Path(ref)
    if p.suffix == ".toml" or p.is_file():
        return p
    return directory / f"{ref}.toml"


def list_ladders(ladders_dir: Path | None = None) -> list[tuple[str, Ladder | None, str]]:
    """(name, ladder or None, error) for every ``*.toml`` in the ladders directory."""
    directory = ladders_dir or LADDER_DIR
    out = []
    for p in sorted(directory.glob("*.toml")) if directory.is_dir() else []:
        try:
            out.append((p.stem, load_ladder(p), ""))
        except LadderError as e:
            out.append((p.stem, None, str(e)))
    return out


def load_ladder(ref: str | Path, ladders_dir: Path | None = None, *, check_bots: bool = True) -> Ladder:
    """Load and validate a ladder file; every problem is a :class:`LadderError` naming the field."""
    path = ladder_path(ref, ladders_dir)
    if not path.is_file():
        directory = ladders_dir or LADDER_DIR
        known = ", ".join(sorted(p.stem for p in directory.glob("*.toml"))) if directory.is_dir() else ""
        raise LadderError(f"no ladder {str(ref)!r}: expected {path}"
                          + (f" (known ladders: {known})" if known else ""))
    where = str(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise LadderError(f"{where}: not valid TOML: {e}") from None
    name = path.stem
    if not NAME_RE.match(name):
        raise LadderError(f"{where}: the ladder name {name!r} (the file name) must be lower-case letters, "
                          "digits, '.', '_' or '-'")
    from .config import ConfigFileError, ladder_data
    try:
        data = ladder_data(data, where, set(Ladder.__dataclass_fields__) - {"name", "path"})
    except ConfigFileError as e:
        raise LadderError(str(e)) from None
    base = path.parent
    bots = []
    for i, ref_ in enumerate(data["bots"]):
        if not isinstance(ref_, str) or not ref_:
            raise LadderError(f"{where}: bots[{i}] must be a bundled bot name or a path, got {ref_!r}")
        bots.append(_resolve(ref_, base))
    data["bots"] = bots
    ladder = Ladder(name=name, path=path.resolve(), **data)
    try:
        rules = ladder.ruleset()
    except (RulesError, TypeError) as e:
        raise LadderError(f"{where}: rules: {e}") from None
    if not rules.min_players <= ladder.seats <= rules.max_players:
        raise LadderError(f"{where}: seats: {rules.name} is for {rules.min_players}-{rules.max_players} players, "
                          f"not {ladder.seats}")
    if len(bots) < ladder.seats:
        raise LadderError(f"{where}: {ladder.seats} seats need at least {ladder.seats} initial bots, "
                          f"got {len(bots)}")
    if ladder.check_games < 1:
        raise LadderError(f"{where}: check_games must be at least 1")
    try:
        check_config(ladder.tournament(ladder.seed_id, format="round-robin", bots=bots))
    except ConfigError as e:
        raise LadderError(f"{where}: {e}") from None
    if check_bots:
        labels: dict[str, str] = {}
        for i, ref_ in enumerate(bots):
            try:
                spec = load_bot(ref_)
            except ManifestError as e:
                raise LadderError(f"{where}: bots[{i}]: {e}") from None
            if spec.label in labels:
                raise LadderError(f"{where}: bots[{i}] is {spec.label} again (also {labels[spec.label]})")
            labels[spec.label] = ref_
    return ladder


def _resolve(ref: str, base: Path) -> str:
    """Initial bots: a path relative to the ladder file if it exists there, else a bundled name."""
    p = base / ref
    if p.exists():
        return str(p.resolve())
    if NAME_RE.match(ref) and ref in bundled_bots():
        return ref
    return str(p.resolve()) if ("/" in ref or ref.endswith(".toml")) else ref


# --------------------------------------------------------------------------- store tables

@dataclass
class Member:
    ladder: str
    label: str
    name: str
    version: str
    hash: str
    ref: str
    origin: str
    placement: str
    registered: float


def open_store(ladder: Ladder, path: str | Path | None = None) -> Store:
    """The ladder's store (``path`` overrides the file's), with the ladder tables created."""
    store = Store(path or ladder.store)
    store.db.executescript(LADDER_SCHEMA)
    return store


def _has_tables(store: Store) -> bool:
    row = store.db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='ladder_members'").fetchone()
    return row is not None


def members(store: Store, ladder: str) -> list[Member]:
    if not _has_tables(store):
        return []
    rows = store.db.execute("SELECT ladder, label, name, version, hash, ref, origin, placement, registered "
                            "FROM ladder_members WHERE ladder=? ORDER BY registered, label", (ladder,))
    return [Member(*r) for r in rows]


def member(store: Store, ladder: str, label: str) -> Member | None:
    return next((m for m in members(store, ladder) if m.label == label), None)


def _add_member(store: Store, ladder: Ladder, spec: BotSpec, origin: str, placement: str,
                say: Callable[[str], None] = lambda text: None) -> Member:
    """Register ``spec`` (a snapshot of its files is what the ladder runs from then on); an existing
    member with the same files is returned as is, one with other files is refused."""
    digest = spec.files_hash()
    m = member(store, ladder.name, spec.label)
    if m is None:
        ref = _snapshot(store, ladder, spec, digest)
        why = _unreachable(Path(ref), spec)
        if why:
            say(f"warning: the ladder's copy of {spec.label} cannot be run by the bots' private uid ({why}); "
                f"the ladder runs it from {spec.root} instead, so leave those files as they are (bump the "
                "version for changes)")
            ref = str(spec.root)
        with store.tx() as db:  # a concurrent insert of the same label is fine if the files match
            db.execute("INSERT OR IGNORE INTO ladder_members VALUES (?,?,?,?,?,?,?,?,?)",
                       (ladder.name, spec.label, spec.name, spec.version, digest, ref, origin, placement, time.time()))
        m = member(store, ladder.name, spec.label)
        assert m is not None
    if m.hash != digest:
        raise LadderError(_bump_message(ladder, m, digest))
    return m


SNAPSHOT_IGNORE = {".git", "__pycache__"}


def snapshot_dir(store: Store, ladder: Ladder, label: str) -> Path:
    safe = "".join(c if c.isalnum() or c in "._@-" else "_" for c in label)
    return store.path.resolve().parent / "ladder-bots" / ladder.name / safe


def _unreachable(copy: Path, spec: BotSpec) -> str | None:
    """Why a bot that could start from its own directory could not start from ``copy`` when the
    launcher runs it under a private uid (root referees), or None."""
    if os.geteuid() != 0:
        return None
    from .sandbox import inaccessible_reason
    other = 65534  # any uid that owns neither directory
    need = os.R_OK | os.X_OK
    if inaccessible_reason(spec.workdir, other, other, need):
        return None  # the original is no better: arena check has said so already
    return inaccessible_reason(copy / spec.workdir.relative_to(spec.root), other, other, need)


def _snapshot(store: Store, ladder: Ladder, spec: BotSpec, digest: str) -> str:
    """Copy the bot's directory next to the store, so a member keeps playing exactly the files it
    joined with even after its author edits them in place (for the next version)."""
    dest = snapshot_dir(store, ladder, spec.label)
    data_dir = store.path.resolve().parent

    def ignore(directory: str, names: list[str]) -> set[str]:
        return {n for n in names if n in SNAPSHOT_IGNORE or (Path(directory) / n).resolve() == data_dir}

    if dest.exists():
        try:
            if load_bot(dest).files_hash() == digest:
                return str(dest)
        except (ManifestError, OSError):
            pass
        shutil.rmtree(dest)  # left by an attempt that never registered (members are checked first)
    for d in (dest.parent.parent, dest.parent):
        if not d.is_dir():
            d.mkdir(parents=True, exist_ok=True)
            d.chmod(0o755)  # bots may run under a private uid: they must reach their copy
    tmp = dest.with_name(f"{dest.name}.partial-{os.getpid()}")
    try:
        shutil.copytree(spec.root, tmp, ignore=ignore)
        os.replace(tmp, dest)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if not dest.exists():
            raise LadderError(f"could not copy {spec.label} from {spec.root} to {dest}: {e}") from None
    copy = load_bot(dest)
    if copy.files_hash() != digest or copy.label != spec.label:
        raise LadderError(f"the copy of {spec.label} at {dest} differs from {spec.root} (files changed while "
                          "submitting?); submit again")
    return str(dest)


def _bump_message(ladder: Ladder, m: Member, digest: str) -> str:
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(m.registered))
    return (f"{m.label} is already on ladder {ladder.name} (registered {when}, files {m.hash[:12]}) and these "
            f"files differ ({digest[:12]}); a label names one exact bot, so bump `version` in its bot.toml "
            f"to submit the changed bot as a new entry")


def check_identity(store: Store, ladder: Ladder) -> None:
    """Record the ladder's rules on first use; refuse a ladder file that changed them since."""
    now = ladder.identity()
    row = store.db.execute("SELECT config FROM ladders WHERE name=?", (ladder.name,)).fetchone()
    if row is None:
        with store.tx() as db:
            db.execute("INSERT OR IGNORE INTO ladders VALUES (?,?,?)",
                       (ladder.name, json.dumps(now, sort_keys=True), time.time()))
        row = store.db.execute("SELECT config FROM ladders WHERE name=?", (ladder.name,)).fetchone()
    before = json.loads(row[0])
    # options the engine gained since (absent from the record) are not a change of the ladder's rules
    changed = [f"rules.{k}" for k in now["rules"] if k in before["rules"] and before["rules"][k] != now["rules"][k]]
    if before["seats"] != now["seats"]:
        changed.append("seats")
    if changed:
        raise LadderError(f"ladder {ladder.name}: the file changes {', '.join(changed)} since its games in "
                          f"{store.path} were played; games under other rules cannot share one rating pool - "
                          f"make a new ladder file (or use another --store)")


def ladder_results(store: Store, ladder: Ladder) -> list[tuple[list[str], dict[str, Any]]]:
    """(seats, result) of every game of every tournament of the ladder, in a stable order."""
    n = len(ladder.prefix)
    rows = store.db.execute("SELECT seats, result FROM games WHERE substr(tournament, 1, ?)=? "
                            "ORDER BY tournament, idx", (n, ladder.prefix))
    return [(json.loads(s), json.loads(r)) for s, r in rows]


# --------------------------------------------------------------------------- playing

ReporterFactory = Callable[[str, str | None, list[tuple[list[str], dict[str, Any]]]], Reporter]
"""(title, focus label, ladder games so far) -> a Reporter for one run (the CLI's live display)."""


@dataclass
class RunContext:
    """What a ladder run needs from its caller: how to start bots and show progress."""

    launcher: Callable | None = None  # None: real processes (arena.launch.Launcher)
    reporter: ReporterFactory | None = None
    say: Callable[[str], None] = lambda text: None
    checker: Callable[[BotSpec], Awaitable[dict[str, Any]]] | None = None  # None: arena.check.run_check

    def make_reporter(self, title: str, focus: str | None, history) -> Reporter | None:
        return self.reporter(title, focus, history) if self.reporter else None


async def _run(cfg: TournamentConfig, store: Store, ctx: RunContext, title: str, focus: str | None,
               ladder: Ladder) -> int:
    reporter = ctx.make_reporter(title, focus, ladder_results(store, ladder))
    try:
        played = await run_tournament(cfg, store, reporter, launcher=ctx.launcher)
    except ConfigError as e:
        raise LadderError(str(e)) from None
    return len(played)


def _spec(ref: str) -> BotSpec:
    try:
        return load_bot(ref)
    except ManifestError as e:
        raise LadderError(str(e)) from None


def _opponents(store: Store, ladder: Ladder, exclude: str, ctx: RunContext) -> list[str]:
    """Refs of the members a newcomer plays; a member whose files changed since it joined is left out."""
    refs = []
    for m in members(store, ladder.name):
        if m.label == exclude:
            continue
        try:
            spec = load_bot(m.ref)
            ok = spec.label == m.label and spec.files_hash() == m.hash
        except (ManifestError, OSError):
            ok = False
        if ok:
            refs.append(m.ref)
        else:
            ctx.say(f"warning: {m.label} is left out of this placement: its files at {m.ref} are missing or "
                    "changed since it joined the ladder")
    return refs


async def ensure_seeded(ladder: Ladder, store: Store, ctx: RunContext | None = None) -> int:
    """Play the initial bots' round-robin if it is not complete, and place initial bots added to
    the file later.  Returns the number of games played now."""
    ctx = ctx or RunContext()
    check_identity(store, ladder)
    played = 0
    seed = store.tournament(ladder.seed_id)
    if seed is None or seed["status"] != "done":
        if seed is not None:  # resuming: the same schedule as when it started
            fp = dict(seed["config"])
            refs = fp.pop("bots")
            fp.pop("format", None)
        else:  # members play from their snapshots; one registered before keeps its own
            fp, refs = {}, [_add_member(store, ladder, _spec(r), "initial", ladder.seed_id, ctx.say).ref
                            for r in ladder.bots]
        ctx.say(f"seeding ladder {ladder.name}: round-robin of its initial bots "
                f"({', '.join(_spec(r).label for r in refs)})")
        cfg = ladder.tournament(ladder.seed_id, format="round-robin", bots=refs, **fp)
        played += await _run(cfg, store, ctx, f"{ladder.name}: seeding", None, ladder)
    for ref in ladder.bots:  # initial bots added to the file after the seed
        spec = _spec(ref)
        if member(store, ladder.name, spec.label) is None:
            ctx.say(f"{spec.label} was added to {ladder.name}'s initial bots: placing it")
            played += await _place(ladder, store, spec, "initial", ctx)
    return played


async def _place(ladder: Ladder, store: Store, spec: BotSpec, origin: str, ctx: RunContext) -> int:
    """Register ``spec`` and play (or finish) its placement gauntlet."""
    tid = ladder.placement_id(spec.label)
    existing = store.tournament(tid)
    me = _add_member(store, ladder, spec, origin, tid, ctx.say)
    if existing is not None:
        fp = dict(existing["config"])
        opponents, candidates = fp.pop("bots"), fp.pop("candidates")
        fp.pop("format", None)
    else:
        opponents, candidates, fp = _opponents(store, ladder, spec.label, ctx), [me.ref], {}
    if len(opponents) < ladder.seats - 1:
        raise LadderError(f"ladder {ladder.name} has {len(opponents)} playable member(s) besides {spec.label}; "
                          f"a {ladder.seats}-seat placement needs {ladder.seats - 1}")
    cfg = ladder.tournament(tid, format="gauntlet", bots=opponents, candidates=candidates, **fp)
    ctx.say(f"placement of {spec.label} on {ladder.name}: against {len(opponents)} member(s), "
            f"{ladder.deals} deal(s) per table x {ladder.seats} seat rotations")
    return await _run(cfg, store, ctx, f"{ladder.name}: placing {spec.label}", spec.label, ladder)


@dataclass
class SubmitResult:
    label: str
    status: str  # 'placed' (new entry), 'resumed' (placement finished now), 'unchanged' (nothing to play)
    games_played: int
    standings: "LadderStandings"

    @property
    def row(self) -> "Row":
        return next(r for r in self.standings.rows if r.label == self.label)


async def submit(ladder: Ladder, bot_ref: str, store: Store, ctx: RunContext | None = None) -> SubmitResult:
    """``arena submit``: version rules, ``arena check``, seed the ladder, place the bot, refit."""
    ctx = ctx or RunContext()
    spec = _spec(bot_ref)
    if spec.human:
        raise LadderError("a ladder cannot seat a human")
    check_identity(store, ladder)
    digest = spec.files_hash()
    known = member(store, ladder.name, spec.label)
    if known is not None and known.hash != digest:
        raise LadderError(_bump_message(ladder, known, digest))
    played = 0
    if known is None:
        ctx.say(f"checking {spec.label} (arena check, {ladder.check_games} game(s) per scenario)")
        if ctx.checker is not None:
            report = await ctx.checker(spec)
        else:
            from .check import run_check
            report = await run_check(spec, ladder.check_games, ladder.move_ms)
        if not report.get("ok"):
            n = len(report.get("faults", []))
            why = f"{n} fault(s)" if n else "it answered no requests"
            raise CheckFailed(f"{spec.label} failed arena check ({why}); fix it and submit again", report)
        played += await ensure_seeded(ladder, store, ctx)
        played += await _place(ladder, store, spec, "submitted", ctx)
        status = "placed"
    else:
        played += await ensure_seeded(ladder, store, ctx)
        t = store.tournament(known.placement)
        if t is not None and t["status"] == "done":
            ctx.say(f"{spec.label} is already on ladder {ladder.name} with these files; nothing to play")
            status = "unchanged"
        else:
            ctx.say(f"{spec.label} is already on ladder {ladder.name}: finishing its placement")
            if known.placement == ladder.seed_id:
                status = "resumed"  # ensure_seeded finished it
            else:
                played += await _place(ladder, store, _spec(known.ref), known.origin, ctx)
                status = "resumed"
    return SubmitResult(spec.label, status, played, ladder_standings(ladder, store))


# --------------------------------------------------------------------------- standings

@dataclass
class Row:
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

    @property
    def win_rate(self) -> float:
        return self.wins / self.games if self.games else 0.0

    @property
    def draw_rate(self) -> float:
        return self.draws / self.games if self.games else 0.0

    @property
    def margin(self) -> float | None:
        return None if self.elo_low is None or self.elo_high is None else (self.elo_high - self.elo_low) / 2

    def as_json(self) -> dict[str, Any]:
        r = lambda x, k=1: None if x is None else round(x, k)  # noqa: E731
        return {"rank": self.rank, "bot": self.label, "name": self.name, "version": self.version,
                "elo": r(self.elo), "elo_se": r(self.se), "elo_low": r(self.elo_low), "elo_high": r(self.elo_high),
                "games": self.games, "wins": self.wins, "win_rate": round(self.win_rate, 4),
                "draws": self.draws, "draw_rate": round(self.draw_rate, 4), "lasts": self.lasts,
                "avg_place": round(self.avg_place, 4), "faults": dict(self.faults),
                "fault_count": sum(self.faults.values()),
                "los_next": None if self.los_next is None else round(self.los_next, 4),
                "origin": self.origin, "registered": self.registered}


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

    def as_json(self) -> dict[str, Any]:
        lad = self.ladder
        out: dict[str, Any] = {
            "ladder": lad.name, "description": lad.description, "rules": lad.rules, "options": lad.options,
            "seats": lad.seats, "time": {"move_ms": lad.move_ms, "bank_ms": lad.bank_ms},
            "deals_per_placement": lad.deals, "store": self.store, "games": self.games,
            "anchor": {"bot": self.anchor, "elo": lad.anchor_elo} if self.anchor else
                      {"bot": None, "pool_mean": lad.anchor_elo},
            "standings": [r.as_json() for r in self.rows],
        }
        if self.matrix is not None:
            order = [r.label for r in self.rows]
            out["matrix"] = {"bots": order, "cells": {a: {b: c.as_json() for b, c in self.matrix[a].items()}
                                                      for a in order if a in self.matrix}}
        return out


def head_to_head(games: list[tuple[list[str], dict[str, Any]]]) -> dict[str, dict[str, Cell]]:
    """Row bot against column bot over every game where both sat: who finished ahead."""
    m: dict[str, dict[str, Cell]] = defaultdict(lambda: defaultdict(Cell))
    for seats, result in games:
        place = {s: g for g, group in enumerate(result["order"]) for s in group}
        for i, a in enumerate(seats):
            for j, b in enumerate(seats):
                if i == j:
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


def resolve_anchor(ladder: Ladder, labels: list[str]) -> str | None:
    """The ladder file's ``anchor`` (a label, or a name with one version on the ladder) as a label."""
    if ladder.anchor is None:
        return None
    if ladder.anchor in labels:
        return ladder.anchor
    same = [lab for lab in labels if lab.split("@", 1)[0] == ladder.anchor]
    if len(same) == 1:
        return same[0]
    if not same:
        raise LadderError(f"ladder {ladder.name}: anchor {ladder.anchor!r} has no games on the ladder "
                          f"(rated: {', '.join(labels) or 'none'})")
    raise LadderError(f"ladder {ladder.name}: anchor {ladder.anchor!r} is ambiguous ({', '.join(same)}); "
                      "name one version, e.g. anchor = \"" + same[0] + "\"")


def ladder_standings(ladder: Ladder, store: Store, *, matrix: bool = False) -> LadderStandings:
    """The ladder's table: one Plackett-Luce fit over all its games, best first."""
    games = ladder_results(store, ladder)
    lines = tally(games)
    mem = {m.label: m for m in members(store, ladder.name)}
    ratings = None
    anchor = None
    if len(lines) >= 2:
        anchor = resolve_anchor(ladder, sorted(lines))
        ratings = fit_elo(outcomes(games), anchor=anchor, anchor_elo=ladder.anchor_elo)
    order = ratings.standings() if ratings is not None else sorted(lines, key=lambda b: (lines[b].avg_place, b))
    order += sorted(set(lines) - set(order))
    order += sorted(set(mem) - set(order))
    neighbours = {a: p for a, _, p in neighbour_los(ratings)} if ratings is not None else {}
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
        if ratings is not None and label in ratings:
            r = ratings[label]
            row.elo, row.se, row.elo_low, row.elo_high = r.elo, r.se, r.ci_low, r.ci_high
            row.los_next = neighbours.get(label)
        rows.append(row)
    return LadderStandings(ladder, rows, len(games), anchor, head_to_head(games) if matrix else None,
                           str(store.path))


# --------------------------------------------------------------------------- arena match

@dataclass
class MatchProgress:
    a: str
    b: str
    wins: int = 0  # from a's side
    draws: int = 0
    losses: int = 0
    sprt: Sprt | None = None
    status: str = "continue"  # or accept_h0 / accept_h1 / max_games

    @property
    def games(self) -> int:
        return self.wins + self.draws + self.losses

    def elo(self) -> tuple[float, float]:
        return elo_difference(self.wins, self.draws, self.losses)

    def los(self) -> float:
        return los(self.wins, self.losses)

    def as_json(self) -> dict[str, Any]:
        elo, margin = self.elo()
        fin = lambda x: x if math.isfinite(x) else None  # noqa: E731
        out: dict[str, Any] = {"a": self.a, "b": self.b, "games": self.games, "wins": self.wins,
                               "draws": self.draws, "losses": self.losses,
                               "elo": fin(round(elo, 1)), "elo_margin": fin(round(margin, 1)),
                               "los": round(self.los(), 4), "status": self.status}
        if self.sprt is not None:
            s = self.sprt
            out["sprt"] = {"elo0": s.elo0, "elo1": s.elo1, "alpha": s.alpha, "beta": s.beta,
                           "llr": round(s.llr, 4), "lower": round(s.lower, 4), "upper": round(s.upper, 4)}
        return out


def match_id(a: BotSpec, b: BotSpec, rules: Rules, seed: int, max_turns: int) -> tuple[str, dict[str, Any]]:
    """The store's tournament id for a match: same bots (files), rules and seed = same games, resumed."""
    fp = {"format": "match", "bots": [a.label, b.label], "hashes": [a.files_hash(), b.files_hash()],
          "rules": rules.options(), "seats": 2, "seed": seed, "max_turns": max_turns}
    digest = hashlib.sha256(json.dumps(fp, sort_keys=True).encode()).hexdigest()[:10]
    return f"match:{a.label}:{b.label}:{digest}", fp


def _score(seats: list[str], result: dict[str, Any], a: str) -> float:
    place = {seats[s]: g for g, group in enumerate(result["order"]) for s in group}
    b = next(x for x in seats if x != a)
    return 1.0 if place[a] < place[b] else 0.5 if place[a] == place[b] else 0.0


async def run_match(a: BotSpec, b: BotSpec, rules: Rules, *, sprt: Sprt | None = None, max_games: int = 1000,
                    seed: int = 1, clock: TimeControl = TimeControl(), max_turns: int = 2000,
                    concurrency: int = 1, store: Store | None = None, launcher: Callable | None = None,
                    on_pair: Callable[[MatchProgress], None] | None = None) -> tuple[MatchProgress, str]:
    """Duplicate-deal pairs of ``a`` against ``b`` (each deal once per seat order) until the SPRT
    accepts H0 or H1 or ``max_games`` are played.  The verdict depends only on the games, in
    order: concurrency plays some pairs ahead, and a stored match resumes where it stopped.
    Returns the progress (W/D/L from ``a``'s side, SPRT state) and the store's tournament id."""
    if a.label == b.label:
        raise LadderError(f"both sides are {a.label}: a match needs two different labels (bump a version)")
    if not rules.min_players <= 2 <= rules.max_players:
        raise LadderError(f"{rules.name} is not a two-player game")
    tid, fp = match_id(a, b, rules, seed, max_turns)
    pairs = max(1, max_games // 2)
    stored: dict[int, tuple[list[str], dict[str, Any]]] = {}
    if store is not None:
        store.begin_tournament(tid, fp, 2 * pairs)
        for spec in (a, b):
            store.register_bot(spec.label, spec.name, spec.version, spec.files_hash(),
                               {"command": list(spec.command), "author": spec.author,
                                "build": list(spec.build) if spec.build else None}, str(spec.root))
        for g in store.games(tournament=tid, limit=10**9):
            stored[g["index"]] = (g["seats"], g["result"])
    progress = MatchProgress(a.label, b.label, sprt=sprt)
    if launcher is None:
        from .botproc import cleanup_stale
        from .launch import Launcher
        cleanup_stale()
        launcher = Launcher()
    secret = load_secret(store.path.parent) if store is not None else run_secret()
    setup = BotSetup.of({a.label: a, b.label: b}, clock=clock)  # in process: refs unused

    async def play(idx: int) -> None:
        deal = idx // 2
        seats = [a.label, b.label] if idx % 2 == 0 else [b.label, a.label]
        played = await executor.play(GameTask(f"{tid}-{idx:06d}", deal_seed(secret, seed, 0, deal), tuple(seats),
                                              rules.options(), max_turns))
        if store is not None:
            store_played(store, tid, idx, seats, played)
        stored[idx] = (seats, played.record.result or {})

    async with open_in_process(setup, capacity=2 * concurrency, launcher=launcher) as executor:
        deal = 0
        while deal < pairs and progress.status == "continue":
            batch = range(deal, min(pairs, deal + max(1, concurrency)))
            todo = [i for d in batch for i in (2 * d, 2 * d + 1) if i not in stored]
            if todo:
                async with trio.open_nursery() as nursery:
                    for i in todo:
                        nursery.start_soon(play, i)
            for d in batch:
                for i in (2 * d, 2 * d + 1):
                    s = _score(*stored[i], a.label)
                    if s == 1.0:
                        progress.wins += 1
                    elif s == 0.5:
                        progress.draws += 1
                    else:
                        progress.losses += 1
                    if sprt is not None:
                        sprt.update(s)
                deal = d + 1
                if sprt is not None:
                    progress.status = sprt.status
                if progress.status == "continue" and deal >= pairs:
                    progress.status = "max_games"
                if on_pair is not None:
                    on_pair(progress)
                if progress.status != "continue":
                    break
        if store is not None:
            store.finish_tournament(tid)
    return progress, tid


__all__ = [
    "CheckFailed", "Ladder", "LadderError", "LadderStandings", "MatchProgress", "Member", "Row", "RunContext",
    "SubmitResult", "ensure_seeded", "head_to_head", "ladder_results", "ladder_standings", "list_ladders",
    "load_ladder", "match_id", "members", "open_store", "run_match", "submit",
]
