"""The ladder file: ``ladders/<name>.toml`` (rules, seats, time control, initial bots, anchor,
matchmaking), loaded and validated into a :class:`Ladder`; every problem names the file and field.

A ladder also keeps a copy of its file in the store directory (``<store dir>/ladders/NAME.toml``,
see :func:`arena.ladder.tables.keep_ladder_file`), so a store copied to another machine is a whole
ladder: ``load_ladder(NAME, store_dir=...)`` falls back to that copy.
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from ..bots.launch import containment_for
from ..bots.manifest import NAME_RE, ManifestError, bundled_bots, load_bot
from ..engine import Rules, RulesError, rules_from
from ..config import Format
from ..errors import ArenaError
from ..store.games import StoreError, club_store
from ..tournament.config import MAX_TABLES, ConfigError, TournamentConfig, check_config, strangers_problem
from ..tournament.store import DEFAULT_STORE

LADDER_DIR = Path(__file__).resolve().parent.parent.parent / "ladders"


class LadderError(ArenaError, ValueError):
    """A ladder file, submission or store state that cannot be used; the message says why."""


class SeatsRefused(LadderError):
    """A ladder file whose seats may not be played as set (strangers outside gVisor, unaccepted);
    ``ladder`` is what the file holds, so its initial bots' names stay the organiser's meanwhile;
    ``reason`` is the message without the file's path."""

    def __init__(self, where: str, reason: str, ladder: "Ladder"):
        super().__init__(f"{where}: {reason}")
        self.ladder, self.reason = ladder, reason


class CheckFailed(LadderError):
    """``arena check`` found faults; ``report`` is its report."""

    def __init__(self, message: str, report: dict[str, Any]):
        super().__init__(message)
        self.report = report


# --------------------------------------------------------------------------- the ladder file

@dataclass
class Matchmaking:
    """The ``[matchmaking]`` table of a ladder file (its keys, types and defaults: arena.config.Matchmaking)."""

    deals: int = 1
    opponents: int = 0
    snapshot_every: int = 100
    explore_every: int = 4
    new_games: int = 0
    suspend_after: int = 3
    wide_elo: float = 100.0
    policy: str = "informative"  # or "balanced" (arena.ladder.balance)

    def field_size(self, seats: int) -> int:
        return self.opponents if self.opponents > 0 else (3 if seats == 2 else seats - 1)

    def new_threshold(self, seats: int) -> int:
        return self.new_games if self.new_games > 0 else 20 * seats


@dataclass
class SeasonRules:
    """The ``[season]`` table of a ladder file (its keys and checks: arena.config.Season)."""

    games: int | None = None  # the season ends after this many of its games
    days: float | None = None  # ... or this many days after it starts
    carry: float = 0.5  # the weight of the seasons before in this one's fit (arena.ladder.seasons)
    divisions: list[float] = field(default_factory=list)  # boundaries in Elo, highest first


class SeatRule(StrEnum):
    """Where a ladder's ``one_seat_per_author`` comes from. A file that leaves it out lets the store
    decide: a club's store (one with accounts) seats strangers, one person's store seats their own bots."""

    FILE = "file"  # the ladder file says true or false
    CLUB = "club"  # left out, so on: the store has accounts (docs/CLUB.md)
    DESK = "desk"  # left out, so off: the store has no account


SEAT_RULE_TEXT = {
    SeatRule.FILE: "set in the ladder file",
    SeatRule.CLUB: "the club's default: this store has accounts and the ladder file does not set it",
    SeatRule.DESK: "the default outside a club's store: this store has no account and the ladder file does not set it",
}


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
    fixed_schedule: bool = False  # requests on a fixed schedule (arena.referee.blocking.play_game)
    ponder: bool = False  # seats left running off their turn (arena.referee.blocking.play_game)
    one_seat_per_author: bool = False  # no table seats two bots of one author; resolved by load_ladder
    seat_rule: SeatRule = SeatRule.DESK  # where one_seat_per_author came from (shown with the settings)
    accept_kernel_channels: bool = False  # strangers outside gVisor, by the operator's acceptance (strangers_problem)
    gvisor: bool = False  # every bot under gVisor (arena.bots.gvisor), or an error
    system: list[str] = field(default_factory=list)  # extra system a gVisor seat sees (arena.bots.filesystem.system_paths)
    suite: str = ""  # a deal suite file (absolute once loaded): its deals instead of fresh ones
    matchmaking: Matchmaking = field(default_factory=Matchmaking)
    season: SeasonRules = field(default_factory=SeasonRules)

    # -- names of what the ladder keeps in the store
    @property
    def prefix(self) -> str:
        return f"ladder:{self.name}:"

    @property
    def seed_id(self) -> str:
        return f"ladder:{self.name}:seed"

    def placement_id(self, label: str) -> str:
        return f"ladder:{self.name}:placement:{label}"

    @property
    def run_prefix(self) -> str:
        return f"ladder:{self.name}:run:"

    def run_id(self, batch: int) -> str:
        """The tournament id of ``arena ladder run``'s batch number ``batch``."""
        return f"{self.run_prefix}{batch:06d}"

    def ruleset(self) -> Rules:
        return rules_from(self.rules, dict(self.options))

    @property
    def channels_accepted(self) -> bool:
        """Strangers' seats whose operator accepted the kernel channels (shown with the ladder's settings)."""
        return self.one_seat_per_author and self.accept_kernel_channels

    @property
    def seat_rule_text(self) -> str:
        """``one_seat_per_author`` as every view of the ladder's settings says it: on or off, and by whom."""
        return (f"one_seat_per_author: {'on' if self.one_seat_per_author else 'off'} "
                f"({SEAT_RULE_TEXT[self.seat_rule]})")

    def identity(self) -> dict[str, Any]:
        """What decides the games; fixed for the ladder's life once it has any."""
        return {"rules": self.ruleset().options(), "seats": self.seats}

    def deal_suite(self) -> Any:
        """The ladder's deal suite (:mod:`arena.tournament.suites`), or None."""
        from ..tournament.suites import config_suite
        return config_suite(self.suite, LadderError, f"{self.path}: suite: ")

    def tournament(self, tid: str, *, format: Format, bots: list[str], candidates: list[str] | None = None,
                   **fingerprint: Any) -> TournamentConfig:
        """A tournament config with this ladder's settings; ``fingerprint`` (a stored config) wins.

        With a suite, a table plays ``deals`` of its deals (at most all of them) from ``suite_from``
        on. A stored config resumes with the deals it began with: the suite its digest names (the
        file changed since: refused), or fresh deals if it began before the ladder had a suite; and
        with the acceptance of kernel channels it began with (none stored: none)."""
        fingerprint = dict(fingerprint)
        stored = fingerprint.pop("suite", None)
        resuming = "schedule" in fingerprint
        suite = self.deal_suite() if (stored is not None or not resuming) else None
        if suite is not None and stored is not None and suite.digest() != stored:
            raise LadderError(f"{tid} began with other deals than the suite {self.suite} holds now: put back "
                              "the suite it began with to finish it")
        cfg = TournamentConfig(
            name=tid, bots=list(bots), format=format, candidates=list(candidates or []), rules=self.rules,
            options=dict(self.options), seats=self.seats, deals=self.deals, seed=self.seed,
            concurrency=self.concurrency, max_turns=self.max_turns, move_ms=self.move_ms,
            bank_ms=self.bank_ms, handshake_ms=self.handshake_ms, max_tables=self.max_tables,
            store=self.store, fixed_schedule=self.fixed_schedule, ponder=self.ponder, one_seat_per_author=self.one_seat_per_author,
            accept_kernel_channels=(bool(fingerprint.get("accept_kernel_channels")) if resuming
                                    else self.accept_kernel_channels),
            containment=containment_for(gvisor=self.gvisor), system=list(self.system),
            suite=self.suite if suite is not None else "")
        known = {k: v for k, v in fingerprint.items() if k in TournamentConfig.__dataclass_fields__}
        cfg = dataclasses.replace(cfg, **known) if known else cfg  # "schedule" is checked by the store
        if suite is not None:
            cfg.deals = min(cfg.deals, len(suite.deals))
        return cfg


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


def ladder_path(ref: str | Path, ladders_dir: Path | None = None, store_dir: Path | None = None) -> Path:
    """A ladder name (``ladders/<name>.toml``, else the copy kept in ``store_dir``) or a path to a file."""
    directory = ladders_dir or LADDER_DIR
    p = Path(ref)
    if p.suffix == ".toml" or p.is_file():
        return p
    named = directory / f"{ref}.toml"
    if not named.is_file() and store_dir is not None and (store_dir / "ladders" / f"{ref}.toml").is_file():
        return store_dir / "ladders" / f"{ref}.toml"
    return named


def list_ladders(ladders_dir: Path | None = None, *, store: str | Path | None = None
                 ) -> list[tuple[str, Ladder | None, str]]:
    """(name, ladder or None, error) for every ``*.toml`` in the ladders directory, each played on
    ``store`` (None: its file's own store), which decides ``one_seat_per_author`` where the file does not."""
    directory = ladders_dir or LADDER_DIR
    out: list[tuple[str, Ladder | None, str]] = []
    for p in sorted(directory.glob("*.toml")) if directory.is_dir() else []:
        try:
            out.append((p.stem, load_ladder(p, store=store), ""))
        except LadderError as e:
            out.append((p.stem, None, str(e)))
    return out


def load_ladder(ref: str | Path, ladders_dir: Path | None = None, *, check_bots: bool = True,
                store_dir: Path | None = None, store: str | Path | None = None) -> Ladder:
    """Load and validate a ladder file; every problem is a :class:`LadderError` naming the field.
    A name that is not in ``ladders/`` is looked up in ``store_dir`` (the copy a store keeps).

    ``store``: the store the ladder is played on (None: the file's own ``store``). Where the file
    leaves ``one_seat_per_author`` out, that store decides it, here and only here (:class:`SeatRule`),
    so every command and the server resolve one ladder on one store alike."""
    path = ladder_path(ref, ladders_dir, store_dir)
    if not path.is_file():
        directory = ladders_dir or LADDER_DIR
        known = ", ".join(sorted(p.stem for p in directory.glob("*.toml"))) if directory.is_dir() else ""
        raise LadderError(f"no ladder {str(ref)!r}: expected {path}"
                          + (f" (known ladders: {known})" if known else ""))
    where = str(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except ValueError as e:  # a decode error, bytes not UTF-8, a number past Python's digit limit
        from ..config import toml_error
        raise LadderError(f"{where}: not valid TOML: {toml_error(e)}") from None
    name = path.stem
    if not NAME_RE.match(name):
        raise LadderError(f"{where}: the ladder name {name!r} (the file name) must be lower-case letters, "
                          "digits, '.', '_' or '-'")
    from ..config import ConfigFileError, ladder_data  # the fields and their checks: arena.config.LadderFile
    try:
        data = ladder_data(data, where)
    except ConfigFileError as e:
        raise LadderError(str(e)) from None
    base = path.parent
    bots = []
    for i, ref_ in enumerate(data["bots"]):
        if not isinstance(ref_, str) or not ref_:
            raise LadderError(f"{where}: bots[{i}] must be a bundled bot name or a path, got {ref_!r}")
        bots.append(_resolve(ref_, base))
    data["bots"] = bots
    if data.get("suite"):
        data["suite"] = str((base / data["suite"]).resolve())
    mm = Matchmaking(**data.pop("matchmaking"))
    explicit = data.pop("one_seat_per_author", None)
    ladder = Ladder(name=name, path=path.resolve(), matchmaking=mm, season=SeasonRules(**data.pop("season")), **data)
    if explicit is not None:
        ladder.one_seat_per_author, ladder.seat_rule = explicit, SeatRule.FILE
    else:
        played_on = Path(store if store is not None else ladder.store)
        try:
            club = club_store(played_on)
        except StoreError as e:
            raise LadderError(f"{where}: one_seat_per_author is not set, and whether {played_on} is a club's store "
                              f"cannot be read: {e}") from None
        ladder.one_seat_per_author, ladder.seat_rule = (True, SeatRule.CLUB) if club else (False, SeatRule.DESK)
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
    suite = ladder.deal_suite()
    if suite is not None and (suite.rules.options() != rules.options() or suite.players != ladder.seats):
        from ..config import rule_label
        raise LadderError(f"{where}: suite: {ladder.suite} holds deals for {rule_label(suite.rules)} with "
                          f"{suite.players} players; the ladder plays {rule_label(rules)} with {ladder.seats}")
    problem = strangers_problem(ladder.one_seat_per_author, containment_for(gvisor=ladder.gvisor),
                                ladder.accept_kernel_channels, flags=False, ponder=ladder.ponder,
                                club_default=ladder.seat_rule is SeatRule.CLUB)
    if problem:
        raise SeatsRefused(where, problem, ladder)
    if suite is not None and ladder.one_seat_per_author:
        raise LadderError(f"{where}: suite: the ladder seats strangers' bots (one_seat_per_author), and a suite "
                          "deals its deals again in every placement and batch, after games that show every card "
                          "of them, which a bot can carry in: drop the suite (fresh cards for each placement and "
                          "batch), or set one_seat_per_author = false")
    try:
        check_config(ladder.tournament(ladder.seed_id, format="round-robin", bots=bots))
    except ConfigError as e:
        raise LadderError(f"{where}: {e}") from None
    if check_bots:
        labels: dict[str, str] = {}
        roots = {}
        for i, ref_ in enumerate(bots):
            try:
                spec = load_bot(ref_)
            except ManifestError as e:
                raise LadderError(f"{where}: bots[{i}]: {e}") from None
            if spec.label in labels:
                raise LadderError(f"{where}: bots[{i}] is {spec.label} again (also {labels[spec.label]})")
            labels[spec.label] = ref_
            roots[spec.label] = spec.root
        if suite is not None:
            from ..tournament.suites import SuiteError, check_hidden
            try:
                check_hidden(ladder.suite, roots)
            except SuiteError as e:
                raise LadderError(f"{where}: suite: {e}") from None
    return ladder


def _resolve(ref: str, base: Path) -> str:
    """Initial bots: a path relative to the ladder file if it exists there, else a bundled name."""
    p = base / ref
    if p.exists():
        return str(p.resolve())
    if NAME_RE.match(ref) and ref in bundled_bots():
        return ref
    return str(p.resolve()) if ("/" in ref or ref.endswith(".toml")) else ref


def _toml_value(value: Any) -> str:
    """TOML for the plain values a ladder file holds (JSON strings are valid TOML basic strings)."""
    import json
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, str)):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {value!r} as a ladder file value")


def ladder_toml(ladder: Ladder, bots: list[str], suite: str = "") -> str:
    """The ladder as a file with ``bots`` as its initial bots (and ``suite`` as its suite file):
    what the store keeps beside its games."""
    top = {"description": ladder.description, "rules": ladder.rules, "seats": ladder.seats, "deals": ladder.deals,
           "seed": ladder.seed, "max_turns": ladder.max_turns, "max_tables": ladder.max_tables,
           "anchor_elo": ladder.anchor_elo, "check_games": ladder.check_games,
           "fixed_schedule": ladder.fixed_schedule, "ponder": ladder.ponder, "bots": bots}
    if ladder.seat_rule is SeatRule.FILE:  # left out, the copy leaves it to the store, as the file did
        top["one_seat_per_author"] = ladder.one_seat_per_author
    if suite:
        top["suite"] = suite
    if ladder.gvisor:  # how its bots are contained travels with the copy, so the store alone plays it alike
        top["gvisor"] = True
    if ladder.system:
        top["system"] = list(ladder.system)
    if ladder.accept_kernel_channels:
        top["accept_kernel_channels"] = True
    if ladder.anchor is not None:
        top["anchor"] = ladder.anchor
    lines = [f"# A copy of ladder {ladder.name} kept with its store, so the store alone can resume it.",
             f"# Written by arena from {ladder.path}; initial bots point at the store's copies of their files."]
    lines += [f"{k} = {_toml_value(v)}" for k, v in top.items()]
    lines += ["", "[options]"] + [f"{k} = {_toml_value(v)}" for k, v in sorted(ladder.options.items())]
    lines += ["", "[time]"] + [f"{k} = {getattr(ladder, k)}" for k in ("move_ms", "bank_ms", "handshake_ms")]
    lines += ["", "[matchmaking]"] + [f"{f.name} = {_toml_value(getattr(ladder.matchmaking, f.name))}"
                                      for f in dataclasses.fields(Matchmaking)]
    lines += ["", "[season]"] + [f"{f.name} = {_toml_value(getattr(ladder.season, f.name))}"
                                 for f in dataclasses.fields(SeasonRules) if getattr(ladder.season, f.name) is not None]
    return "\n".join(lines) + "\n"
