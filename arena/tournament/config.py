"""A tournament's settings: the file and flags, validated, and the bots they name.

:class:`TournamentConfig` is what ``arena tournament`` runs and what a ladder hands the runner;
:func:`TournamentConfig.fingerprint` is the part that decides the games, so a resumed run
can be checked against the one it continues.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..bots.containment import Containment
from ..bots.filesystem import SystemView, SystemViewError, run_system
from ..bots.manifest import BotSpec, ManifestError, load_bot
from ..config import Elimination, Format
from ..engine import Rules, RulesError, rules_from
from ..errors import ArenaError
from ..referee import TimeControl

STAGED = ("swiss", "knockout", "heats")  # each stage's games follow from the stored results of the ones before
MAX_TABLES = 2000  # more k-subsets than this are sampled (seeded) rather than all played
SCHEDULE_VERSION = 2  # 2: deal seeds from the store's secret, games ordered by rotation round


class ConfigError(ArenaError, ValueError):
    """A tournament file or flag that cannot be run; the message names the field."""


@dataclass
class TournamentConfig:
    name: str = "demo"
    bots: list[str] = field(default_factory=lambda: ["random", "lowest", "heuristic"])
    format: Format = "round-robin"  # the one type of it: arena.config.Format
    candidates: list[str] = field(default_factory=list)  # gauntlet: the bots under test
    rounds: int = 0  # swiss: 0 is log2(bots) rounded up
    elimination: Elimination = "single"  # knockout: or "double"
    advance: int = 0  # heats: 0 is seats // 2
    seeding: str = ""  # staged formats: a stored tournament whose standings order the bots
    rules: str = "classic"
    options: dict[str, Any] = field(default_factory=dict)
    seats: int = 2
    deals: int = 4  # deals per table; each is played once per seat rotation
    seed: int = 1
    concurrency: int = 0  # 0: number of cores
    max_turns: int = 2000
    move_ms: int = 1000
    bank_ms: int = 10_000
    handshake_ms: int = 10_000
    restart_each_game: bool = False
    containment: Containment = Containment.AUTO  # from the file's and the flags' options (load_config)
    system: list[str] = field(default_factory=list)  # extra system a gVisor seat sees (arena.bots.filesystem.system_paths)
    max_tables: int = MAX_TABLES
    store: str = "arena-data/arena.sqlite"
    limits: dict[str, int] = field(default_factory=dict)
    processes: int = 0  # referee processes sharing the games; 0: one per core, up to concurrency
    cluster: str = ""  # a Dask scheduler (tcp://HOST:PORT) to run the games on; "" plays here (docs/CLUSTER.md)
    fixed_schedule: bool = False  # every decision takes one move_ms slot, no bank: think time carries nothing
    ponder: bool = False  # seats keep running off their turn (else frozen between requests; docs/SANDBOX.md)
    one_seat_per_author: bool = False  # no table seats two bots of one author (docs/SANDBOX.md); not for a bracket
    accept_kernel_channels: bool = False  # with one_seat_per_author outside gVisor: the operator's, by name (check_config)
    suite: str = ""  # a deal suite file (arena deals make): its deals at every table instead of fresh ones
    suite_from: int = 0  # the suite's deal that is this tournament's first (a ladder's batches go round the suite)
    deal_secret: str = ""  # a named secret in the store to deal from (a season's: arena.ladder.seasons); "" the store's

    def ruleset(self) -> Rules:
        try:
            return rules_from(self.rules, dict(self.options))
        except (RulesError, TypeError) as e:
            raise ConfigError(f"rules: {e}") from None

    def clock(self) -> TimeControl:
        return TimeControl(self.move_ms, self.bank_ms, self.handshake_ms)

    def fingerprint(self) -> dict[str, Any]:
        """What decides the games; a resumed run must match it. Runtime knobs are left out."""
        keep = ("bots", "format", "candidates", "rules", "options", "seats", "deals", "seed",
                "max_turns", "max_tables")
        # "schedule" tells this schedule (secret seeds, rotation rounds) from the older public one
        out = {**{k: v for k, v in asdict(self).items() if k in keep}, "schedule": SCHEDULE_VERSION}
        if self.format in STAGED:  # only for these: the older formats' stored fingerprints still match
            out["seeding"] = self.seeding
            if self.format == "swiss":
                out["rounds"] = self.swiss_rounds
            if self.format == "knockout":
                out["elimination"] = self.elimination
            if self.format == "heats":
                out["advance"] = self.heat_advance
        if self.one_seat_per_author:  # only when on: runs stored before the rule existed still resume
            out["one_seat_per_author"] = True
            if self.format in STAGED:
                out["table_deals"] = True  # each table of a stage its own deals (formats._games)
        if self.channels_accepted:  # stored: the run's record says its seats were not sealed
            out["accept_kernel_channels"] = True
        if self.deal_secret:  # only when set: every other stored fingerprint still matches
            out["deal_secret"] = self.deal_secret
        if self.suite:  # the suite's content, not its path: the same deals resume, other deals do not
            out["suite"] = self.deal_suite().digest()
            if self.suite_from:
                out["suite_from"] = self.suite_from
        return out

    @property
    def view(self) -> SystemView:
        """What a seat sees of the system: strangers' seats, and every gVisor seat, the small
        stranger view whose pages the referee keeps in the cache (docs/SANDBOX.md)."""
        strangers = self.one_seat_per_author or self.containment is Containment.GVISOR
        return SystemView.STRANGER if strangers else SystemView.HOST

    @property
    def channels_accepted(self) -> bool:
        """Strangers' seats whose operator accepted the kernel channels (check_config holds the rest)."""
        return self.one_seat_per_author and self.accept_kernel_channels

    def deal_suite(self) -> Any:
        """The deal suite this tournament plays (:mod:`arena.tournament.suites`), or None."""
        from .suites import config_suite
        return config_suite(self.suite, ConfigError, "suite: ")

    @property
    def swiss_rounds(self) -> int:
        """Swiss rounds; other formats have none (their stages follow from the bracket)."""
        if self.format != "swiss":
            return 0
        return self.rounds or max(1, math.ceil(math.log2(max(2, len(self.bots)))))

    @property
    def heat_advance(self) -> int:
        return self.advance or max(1, self.seats // 2)

    @property
    def workers(self) -> int:
        return self.concurrency if self.concurrency > 0 else (os.cpu_count() or 1)

    @property
    def process_count(self) -> int:
        if self.processes > 0:
            return min(self.processes, self.workers)
        return max(1, min(self.workers, os.cpu_count() or 1))


def load_config(path: str | Path | None, overrides: dict[str, Any] | None = None) -> TournamentConfig:
    """The file (if any), then the flags, each validated by :mod:`arena.config`."""
    from ..config import ConfigFileError, read_toml, tournament_data
    data: dict[str, Any] = {}
    try:
        if path is not None:
            p = Path(path)
            data = tournament_data(read_toml(p, "tournament file"), str(p))
            data["bots"] = [_resolve(b, p.parent) for b in data.get("bots", [])]
            data["candidates"] = [_resolve(b, p.parent) for b in data.get("candidates", [])]
            if data.get("suite"):
                data["suite"] = str(p.parent / data["suite"])
            data.setdefault("name", p.stem)
        flags = {k: v for k, v in (overrides or {}).items() if v is not None}
        data.update(tournament_data(flags, "command line", flags=True))
    except ConfigFileError as e:
        raise ConfigError(str(e)) from None
    from ..bots.launch import containment_for
    data["containment"] = containment_for(data.pop("sandbox", None), data.pop("trusted_bots", False),
                                          data.pop("gvisor", False))
    cfg = TournamentConfig(**data)
    suite = cfg.deal_suite()
    if suite is not None:
        cfg.deals = len(suite.deals)  # every deal of the suite, at every table
        if suite.rules.options() != cfg.ruleset().options() or suite.players != cfg.seats:
            from ..config import rule_label
            raise ConfigError(f"suite: {cfg.suite} holds deals for {rule_label(suite.rules)} with {suite.players} "
                              f"players; set rules, options and seats to match it")
    check_config(cfg)
    return cfg


def _resolve(ref: str, base: Path) -> str:
    """Paths in a tournament file are relative to the file; bundled names stay names."""
    p = base / ref
    return str(p.resolve()) if p.exists() else ref


def check_config(cfg: TournamentConfig) -> None:
    """What holds between fields (seats and rules, bots and format, a suite's deals); each field's
    own bounds were checked once, where the file or the flags were read (:mod:`arena.config`)."""
    rules = cfg.ruleset()
    try:
        run_system(cfg.system, stranger_view=cfg.view is SystemView.STRANGER, refused=(Path(cfg.store).parent,))
    except SystemViewError as e:
        raise ConfigError(f"system: {e}") from None
    if not rules.min_players <= cfg.seats <= rules.max_players:
        raise ConfigError(f"seats: {rules.name} is for {rules.min_players}-{rules.max_players} players, not {cfg.seats}")
    pool = cfg.bots + cfg.candidates
    if cfg.format == "gauntlet" and not cfg.candidates:
        raise ConfigError("a gauntlet needs candidates = [...] to play against the bots")
    if cfg.format in STAGED:
        _check_staged(cfg)
    if cfg.format in ("round-robin", *STAGED) and len(cfg.bots) < cfg.seats:
        raise ConfigError(f"{cfg.seats} seats need at least {cfg.seats} bots, got {len(cfg.bots)}")
    if cfg.format == "gauntlet" and len(cfg.bots) < cfg.seats - 1:
        raise ConfigError(f"a {cfg.seats}-seat gauntlet needs at least {cfg.seats - 1} field bots")
    if len(set(pool)) != len(pool):
        raise ConfigError("each bot may be listed once")
    suite = cfg.deal_suite()
    if suite is not None and cfg.deals > len(suite.deals):
        raise ConfigError(f"deals: the suite {cfg.suite} holds {len(suite.deals)} deals, not {cfg.deals}")
    if suite is not None and cfg.one_seat_per_author:
        raise ConfigError("suite: one_seat_per_author seats strangers' bots, and a suite deals its deals at every "
                          "table: a bot that saw one whole at its game's end could pass it to a partner of another "
                          "author playing it at another table. Drop the suite, or one_seat_per_author")
    problem = strangers_problem(cfg.one_seat_per_author, cfg.containment, cfg.accept_kernel_channels, flags=True,
                                ponder=cfg.ponder)
    if problem:
        raise ConfigError(problem)


KERNEL_CHANNELS = ("two seats can still pass bits through counters the host kernel shares (pipe inode numbers, "
                   "eventfd ids: up to hundreds of bits per second, docs/SANDBOX.md)")
PONDER_CHANNEL = ("the seat on turn can time how much CPU the others take from it: a channel between the seats in "
                  "every mode, gVisor included (docs/SANDBOX.md)")
"""Why ``ponder`` is refused on a table of strangers: measured, a seat spinning or idle in
20 ms windows halved or not the loop count of the seat on turn (gVisor, fixed schedule, load 20)."""
ACCEPTED_CHANNELS = ("kernel channels accepted: strangers' bots (one_seat_per_author) run outside gVisor, where "
                     + KERNEL_CHANNELS)
"""What every view of a run's or a ladder's settings says when its operator accepted the channels (a
run's stored settings hold ``accept_kernel_channels``)."""


def strangers_problem(one_seat_per_author: bool, containment: Containment, accepted: bool, *,
                      flags: bool, ponder: bool, club_default: bool = False) -> str | None:
    """Why these settings may not seat strangers, or None. ``one_seat_per_author`` seats bots of
    authors who do not trust each other: they run under gVisor, which shares no kernel counter
    between seats, or the operator accepts the known kernel channels by name (the acceptance is
    stored with the run); and never on a ``ponder`` table, in any mode: a seat left running on the
    other's turn takes a CPU from it in a pattern the seat on turn times (:data:`PONDER_CHANNEL`).
    ``flags``: the command line's spelling is offered beside the file's. ``club_default``: the rule
    is on because a club's store turned it on for a ladder file that leaves it out, so the
    organiser may also turn it off by name."""
    gvisor = "gvisor = true" + (" or --gvisor" if flags else "")
    accept = "accept_kernel_channels = true" + (" or --accept-kernel-channels" if flags else "")
    if accepted and not one_seat_per_author:
        return ("accept_kernel_channels is for one_seat_per_author, whose seats are strangers to each other; "
                "without it there is nothing to accept: drop it")
    if not one_seat_per_author:
        return None
    if ponder:
        why = ("this store is a club's (it has accounts), so one_seat_per_author is on by default, and it seats "
               "strangers' bots" if club_default else "one_seat_per_author seats strangers' bots")
        return (f"{why}, and ponder = true leaves each seat running on the other seats' turns, where "
                f"{PONDER_CHANNEL}: drop ponder, or set one_seat_per_author = false (the organiser lets one "
                "author's bots share a table)")
    if containment is Containment.TRUSTED:
        return ("one_seat_per_author seats strangers' bots, and --trusted-bots runs every bot as your own user "
                "with no wall (a bot could read the store and the other seats' files): drop --trusted-bots, "
                "or drop one_seat_per_author if every bot is your own")
    if containment is Containment.GVISOR:
        return ("accept_kernel_channels is for seats outside gVisor; under gVisor the seats share no kernel "
                "counter, so there is nothing to accept: drop it") if accepted else None
    if accepted:
        return None
    if club_default:
        return ("this store is a club's (it has accounts), so one_seat_per_author is on by default, and it seats "
                f"strangers' bots: outside gVisor {KERNEL_CHANNELS}. Set one of these in the ladder file: {gvisor} (every seat in its own "
                f"kernel), {accept} (accept those channels by name), or one_seat_per_author = false (the "
                "organiser lets one author's bots share a table)")
    return (f"one_seat_per_author seats strangers' bots, and outside gVisor {KERNEL_CHANNELS}: run them under "
            f"gVisor ({gvisor}), or accept those channels by name ({accept})")

def _check_staged(cfg: TournamentConfig) -> None:
    """What the staged formats need beyond the shared checks."""
    name = cfg.format
    if cfg.candidates:
        raise ConfigError(f"candidates are for a gauntlet; a {name} plays every bot of bots = [...]")
    if cfg.suite:
        raise ConfigError(f"a {name} deals its own duplicate deals per stage: suite is for round-robins and gauntlets")
    if cfg.one_seat_per_author and name != "swiss":
        raise ConfigError(f"a {name} seats by its bracket: one_seat_per_author is for round-robins, gauntlets and swiss")
    if cfg.rounds and name != "swiss":
        raise ConfigError("rounds is for a swiss; a knockout or heats ends when one bot is left")
    if name == "knockout" and cfg.seats != 2:
        raise ConfigError("a knockout is for 2 seats; use format = \"heats\" for tables of 3 to 6")
    if name == "heats":
        if cfg.seats < 3:
            raise ConfigError("heats are for 3 to 6 seats; use format = \"knockout\" for 2")
        if not 1 <= cfg.heat_advance < cfg.seats:
            raise ConfigError(f"advance must be 1 to {cfg.seats - 1}: fewer than the seats at a table")
    if cfg.elimination != "single" and name != "knockout":
        raise ConfigError("elimination is for a knockout")


def load_bots(cfg: TournamentConfig) -> dict[str, BotSpec]:
    """Bot reference -> spec; two references to one bot version are refused."""
    specs: dict[str, BotSpec] = {}
    for ref in cfg.bots + cfg.candidates:
        try:
            spec = load_bot(ref)
        except ManifestError as e:
            raise ConfigError(str(e)) from None
        if spec.human:
            raise ConfigError("a tournament cannot seat a human")
        if any(s.label == spec.label for s in specs.values()):
            raise ConfigError(f"{spec.label} is listed twice")
        specs[ref] = spec
    if cfg.suite:
        from .suites import SuiteError, check_hidden
        try:
            check_hidden(cfg.suite, {s.label: s.root for s in specs.values()})
        except SuiteError as e:
            raise ConfigError(f"suite: {e}") from None
    return specs
