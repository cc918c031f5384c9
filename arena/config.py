"""One config layer: the files a user writes (bot.toml, tournament files, ladder files) as pydantic models.

The three files share their field definitions (a clock, rule options, limits), so a field
means the same and is checked the same wherever it appears. Every problem is a
:class:`ConfigFileError` whose one line names the file, the key and what is allowed:
an unknown key, a key in the wrong table (``seats`` under ``[time]``), a bad value, an
unknown rule option. ``python -m arena.config`` writes the models' JSON Schemas to
``protocol/schemas/`` so editors can check the files as they are typed.
"""

from __future__ import annotations

import dataclasses
import json
import re
import tomllib
import typing
from pathlib import Path
from typing import Annotated, Any, Callable, Literal, Optional

from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr,
                      ValidationError, create_model, field_validator, model_validator)

from .errors import ArenaError
from .limits import Limits
from .engine import PRESETS, Rules
from .engine.describe import option_value
from .engine.rules import ALIASES

SCHEMA_DIR = Path(__file__).resolve().parent.parent / "protocol" / "schemas" / "config"  # not bot messages
BOT_TOML_DOC = "protocol/PROTOCOL.md#bottoml-reference"


class ConfigFileError(ArenaError, ValueError):
    """A config file (or flag) that cannot be used; the message names the file, key and allowed values."""


# --------------------------------------------------------------------------- shared fields

MoveMs = Annotated[StrictInt, Field(ge=1, description="Milliseconds per decision.")]
BankMs = Annotated[StrictInt, Field(ge=0, description="Time bank in milliseconds, drawn on when a decision runs over.")]
HandshakeMs = Annotated[StrictInt, Field(ge=1, description="Milliseconds a bot has to start and answer hello.")]
Seats = Annotated[StrictInt, Field(ge=2, description="Players per game, within the preset's range.")]
Deals = Annotated[StrictInt, Field(ge=1, description="Deals per table, each played in every seat rotation.")]
Seed = Annotated[StrictInt, Field(description="Base deal seed.")]
MaxTurns = Annotated[StrictInt, Field(ge=10, description="Turn cap: a game still running then is a draw.")]
MaxTables = Annotated[StrictInt, Field(ge=1, description="At most this many tables; more are sampled from the seed.")]
Concurrency = Annotated[StrictInt, Field(ge=0, description="Games at a time; 0: one per core.")]
BotRefs = Annotated[list[StrictStr], Field(description="Bundled bot names, or paths (relative to this file) "
                                                        "to a bot.toml or a directory holding one.")]
FixedSchedule = Annotated[StrictBool, Field(description="Every decision takes one slot of move_ms, with no "
                                              "bank: the next request waits for the slot's end, so think "
                                              "time carries nothing between seats (docs/SANDBOX.md).")]
Ponder = Annotated[StrictBool, Field(description="Bots may think on the other seats' time. By default a seat "
                                       "is frozen whole between its requests and gets no CPU; refused with "
                                       "one_seat_per_author, where it is a channel between the seats "
                                       "(docs/SANDBOX.md).")]
OneSeatPerAuthor = Annotated[StrictBool, Field(description="No table seats two bots of one author (the manifest's "
                                                 "author; a bot without one is its own; docs/SANDBOX.md).")]
AcceptKernelChannels = Annotated[StrictBool, Field(description="With one_seat_per_author outside gVisor: the "
                                                     "operator accepts, by name, that two seats can still pass bits "
                                                     "through counters the host kernel shares (pipe inode numbers, "
                                                     "eventfd ids: up to hundreds of bits/s, docs/SANDBOX.md). "
                                                     "Without it (or gvisor = true) such a run is refused; with it, "
                                                     "the run's stored settings and every view of them say so.")]
PRESET_NAMES = tuple(PRESETS) + tuple(ALIASES)
RulesName = Annotated[StrictStr, Field(description="A rule preset (arena rules lists them).",
                                        json_schema_extra={"enum": list(PRESET_NAMES)})]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)


class Clock(Strict):
    """The ``[time]`` table: only the clock belongs here."""

    move_ms: Optional[MoveMs] = None
    bank_ms: Optional[BankMs] = None
    handshake_ms: Optional[HandshakeMs] = None


CLOCK_KEYS = tuple(Clock.model_fields)


def _rule_option_fields() -> dict[str, Any]:
    """One optional field per rule option, typed from the engine's own choices and defaults
    (the compiled engine keeps no annotations to read)."""
    from .engine.rules import _CHOICES
    defaults = Rules()
    out: dict[str, Any] = {}
    for f in dataclasses.fields(Rules):
        if not f.init or f.name == "name":
            continue
        default = getattr(defaults, f.name)
        kind: Any
        if f.name in _CHOICES:
            kind = Literal[typing.get_args(_CHOICES[f.name])]  # type: ignore[misc]
        elif f.name == "short_deal":
            kind = list[Annotated[list[StrictInt], Field(min_length=4, max_length=4)]]
        elif isinstance(default, tuple):
            kind = list[StrictInt]
        elif isinstance(default, bool):
            kind = StrictBool
        elif f.name == "stale_turns":
            kind = Optional[Annotated[StrictInt, Field(ge=1)]]
        else:
            kind = StrictInt
        out[f.name] = (Optional[kind], Field(None, description=_option_help(f.name)))
    return out


def _option_help(name: str) -> str | None:
    from .engine.describe import OPTION_HELP
    return OPTION_HELP.get(name)


RuleOptions = create_model("RuleOptions", __base__=Strict, **_rule_option_fields())  # type: ignore[call-overload]
RuleOptions.__doc__ = "Rule options that change the preset (arena rules lists them)."


def _limit_fields() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in dataclasses.fields(Limits):
        low = 0 if f.name == "address_space_mb" else 1
        out[f.name] = (Optional[Annotated[StrictInt, Field(ge=low)]], None)
    return out


LimitsTable = create_model("LimitsTable", __base__=Strict, **_limit_fields())  # type: ignore[call-overload]
LimitsTable.__doc__ = "Resource limits for one bot process (docs/SANDBOX.md); a bot's own can only tighten them."


class _Shared(Strict):
    """Fields a tournament file and a ladder file both have."""

    rules: RulesName = "classic"
    options: RuleOptions = Field(default_factory=RuleOptions)  # type: ignore[valid-type]
    seats: Seats = 2
    deals: Deals = 4
    seed: Seed = 1
    max_turns: MaxTurns = 2000
    max_tables: MaxTables = 2000
    concurrency: Concurrency = 0
    move_ms: MoveMs = 1000
    bank_ms: BankMs = 10_000
    handshake_ms: HandshakeMs = 10_000
    store: StrictStr = "arena-data/arena.sqlite"
    time: Optional[Clock] = Field(None, description="The clock, as a table: move_ms, bank_ms, handshake_ms.")


# Containment is weakened only on the command line, where the operator types it for one run: a
# file is often someone else's (a shared example, a ladder kept in a store), and a key in it would
# weaken every run that reads it without a word on the command line.


def _no_weaker_containment(data: Any) -> Any:
    if isinstance(data, dict):
        if "trusted_bots" in data:
            raise ValueError("trusted_bots cannot be set in a file: only the command line can run bots "
                             "uncontained (--trusted-bots)")
        if "sandbox" in data and data["sandbox"] is not True:
            raise ValueError(f"sandbox = {json.dumps(data['sandbox'])} cannot be set in a file: only the command "
                             "line can run bots without bubblewrap (--no-sandbox); a file may only ask for it "
                             "(sandbox = true)")
    return data


# A tournament's format: the one type of it, for the file, the flags and TournamentConfig alike.
Format = Literal["round-robin", "gauntlet", "swiss", "knockout", "heats"]
Elimination = Literal["single", "double"]  # a knockout's: TournamentConfig.elimination is of this type


class _TableGuards(_Shared):
    """What a table guards against, which a tournament file and a ladder file both name (docs/SANDBOX.md);
    ``one_seat_per_author`` is each one's own, since a ladder's may be left for its store to decide."""

    fixed_schedule: FixedSchedule = False
    ponder: Ponder = False
    accept_kernel_channels: AcceptKernelChannels = False
    gvisor: StrictBool = Field(False, description="true: every bot runs under gVisor (runsc run), which shares no "
                                                  "kernel with the host; an error where runsc cannot run, never a "
                                                  "weaker mode (docs/SANDBOX.md).")
    system: list[StrictStr] = Field(default_factory=list, description="Under gVisor or one_seat_per_author: what "
                                    "a seat sees of the system besides Python 3 and bash, for its bots' languages: "
                                    "presets (javascript, java) or absolute paths, with their libraries "
                                    "(docs/SANDBOX.md).")


class _TournamentFields(_TableGuards):
    name: Optional[Annotated[StrictStr, Field(min_length=1)]] = Field(
        None, description="The tournament's name and resume key; defaults to the file name.")
    one_seat_per_author: OneSeatPerAuthor = False
    bots: BotRefs = Field(default_factory=lambda: ["random", "lowest", "heuristic"])
    format: Format = Field(
        "round-robin", description="round-robin: every table of `seats` bots; gauntlet: each candidate against "
                                   "the bots; swiss: `rounds` rounds, each seating bots of similar standing; "
                                   "knockout: 2 seats, matches of `deals` deals in both seatings, losers out; "
                                   "heats: tables of `seats`, the top `advance` of each go on to the next heat.")
    candidates: BotRefs = Field(default_factory=list, description="Gauntlet: the bots under test.")
    rounds: Annotated[StrictInt, Field(ge=0, description="Swiss: rounds to play; 0: log2 of the bots, "
                                                         "rounded up.")] = 0
    elimination: Elimination = Field("single", description="Knockout: out after one lost "
                                                     "match, or after two (a losers' bracket and a final).")
    advance: Annotated[StrictInt, Field(ge=0, description="Heats: bots of each table that go on; 0: half "
                                                          "the seats.")] = 0
    seeding: StrictStr = Field("", description="Swiss, knockout, heats: a tournament in the same store whose "
                                               "standings seed the bots (a ladder's seeding round-robin, or the "
                                               "Swiss before a knockout); empty: the order of `bots`.")
    restart_each_game: StrictBool = False
    limits: LimitsTable = Field(default_factory=LimitsTable)  # type: ignore[valid-type]
    processes: Annotated[StrictInt, Field(ge=0)] = 0
    cluster: StrictStr = Field("", description="A Dask scheduler, tcp://HOST:PORT (docs/CLUSTER.md).")
    suite: StrictStr = Field("", description="A deal suite file (arena deals make / from-games), relative to this "
                                             "file: its deals are played at every table instead of fresh ones. It "
                                             "sets the number of deals; rules, options and seats must match it.")


class TournamentFile(_TournamentFields):
    """A tournament file (examples/tournaments/*.toml)."""

    sandbox: Optional[Literal[True]] = Field(None, description="true: require bubblewrap (an error where it "
                                              "cannot run). Only the command line can weaken containment.")
    _containment = model_validator(mode="before")(_no_weaker_containment)


class TournamentFlags(_TournamentFields):
    """``arena tournament``'s flags (and a test's or a ladder's settings): the only place that may
    weaken containment."""

    sandbox: Optional[StrictBool] = None
    trusted_bots: StrictBool = False
    suite_from: Annotated[StrictInt, Field(ge=0, description="The suite deal a ladder batch starts at (its "
                                                              "batches go round the suite).")] = 0
    deal_secret: StrictStr = Field("", description="A named secret in the store to deal from instead of its key "
                                                    "(a ladder season's batches).")


class Matchmaking(Strict):
    """The ``[matchmaking]`` table: how ``arena ladder run`` chooses its tables (docs/RATINGS.md)."""

    deals: Annotated[StrictInt, Field(ge=1, description="Deals per table of a run batch.")] = 1
    opponents: Annotated[StrictInt, Field(ge=0, description="Opponents of the focus bot per batch; "
                                                             "0: 3 at 2 seats, else seats - 1.")] = 0
    snapshot_every: Annotated[StrictInt, Field(ge=1, description="A rating snapshot every this many games.")] = 100
    explore_every: Annotated[StrictInt, Field(ge=1, description="Every this many batches, the least-played "
                                                                 "pairing.")] = 4
    new_games: Annotated[StrictInt, Field(ge=0, description="Fewer games than this is a new bot, played "
                                                             "first; 0: 20 x seats.")] = 0
    suspend_after: Annotated[StrictInt, Field(ge=1, description="Faulted games in a row that suspend a bot.")] = 3
    # StrictFloat takes integers too; a union would keep ge=1 out of the published schema's anyOf
    wide_elo: Annotated[StrictFloat, Field(ge=1, description="A 95% interval wider than +-this is still wide.")] = 100.0
    policy: Literal["informative", "balanced"] = Field(
        "informative", description="informative: the table a game teaches most about; balanced: the longest-idle "
                                   "bot against those it has sat with least, so games and co-seatings stay even.")


class Season(Strict):
    """The ``[season]`` table: how long a season lasts once `arena ladder NAME season start` begins one
    (docs/SEASONS.md). Neither end set: the season lasts until `season end`."""

    games: Annotated[StrictInt, Field(ge=1, description="The season ends after this many of its games.")] | None = None
    days: Annotated[StrictFloat, Field(gt=0, description="The season ends this many days after it starts.")] | None = None
    carry: Annotated[StrictFloat, Field(gt=0, le=1, description="How much the seasons before weigh in this one's fit "
                                                                 "(1: all of it; each season back is weighed by it "
                                                                 "once more).")] = 0.5
    divisions: list[Annotated[StrictFloat, Field(description="A division boundary in Elo.")]] = Field(
        default_factory=list, description="Division boundaries in Elo, highest first: a bot is in a division only "
                                          "when its whole 95% interval clears that division's boundary.")

    @field_validator("divisions")
    @classmethod
    def _descending(cls, v: list[float]) -> list[float]:
        if any(a <= b for a, b in zip(v, v[1:])):
            raise ValueError("must be listed highest first, each below the one before")
        return v


class LadderFile(_TableGuards):
    """A ladder file (ladders/*.toml)."""

    description: StrictStr = ""
    bots: BotRefs = Field(description="The initial bots.")
    deals: Deals = 4
    anchor: Optional[StrictStr] = Field(None, description="A bot pinned at anchor_elo; default: the pool mean.")
    anchor_elo: StrictInt | StrictFloat = 1500.0
    check_games: Annotated[StrictInt, Field(ge=1, description="Games per scenario of the entry check.")] = 1
    matchmaking: Matchmaking = Field(default_factory=Matchmaking)
    season: Season = Field(default_factory=Season)
    one_seat_per_author: Optional[StrictBool] = Field(None, description="No table seats two bots of one author (on "
                                                      "a club server the owning account; docs/SANDBOX.md). Absent: "
                                                      "the store decides: on in a club's store (one with accounts, "
                                                      "docs/CLUB.md), off elsewhere.")
    suite: StrictStr = Field("", description="A deal suite file (arena deals make / from-games), relative to this "
                                             "file: placements play its first `deals` deals, run batches go round "
                                             "it; rules, options and seats must match it.")
    _containment = model_validator(mode="before")(_no_weaker_containment)


ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SET = "is set by the arena for every bot"
_LIBC = "changes how the C library runs every program"
ARENA_ENV: dict[str, str] = {
    # what the arena sets: a bot's value would be ignored or would undo the arena's choice
    **dict.fromkeys(("PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "USER", "LOGNAME", "SHELL"), _SET),
    "PYTHONPATH": "is set by the arena (where a Python bot finds the arena package)",
    "PYTHONHOME": "would move the standard library of the interpreter the arena chose",
    # the C library's list of variables unsafe for set-id programs (glibc's unsecvars.h),
    # less the LD_ and MALLOC_ families below
    "GCONV_PATH": "makes the C library load code (iconv modules) from the directory it names",
    "GLIBC_TUNABLES": _LIBC + " (allocator, CPU features; the way in of the 2023 'Looney Tunables' exploit)",
    "LOCPATH": "makes the C library parse locale files from the directory it names",
    "NLSPATH": "makes the C library read message catalogs from the path it names",
    "GETCONF_DIR": "makes getconf run programs from the directory it names",
    "TZDIR": "makes the C library parse time-zone files from the directory it names",
    **dict.fromkeys(("HOSTALIASES", "LOCALDOMAIN", "RES_OPTIONS", "RESOLV_HOST_CONF", "NIS_PATH"),
                    "changes how the C library resolves names (no bot has a network)"),
    # shells read these at start: a shell the arena ran would run the file they name
    "BASH_ENV": "makes every non-interactive bash run the file it names",
    "ENV": "makes every sh run the file it names",
    "SHELLOPTS": "changes how every bash runs", "BASHOPTS": "changes how every bash runs",
}
ARENA_ENV_PREFIXES: dict[str, str] = {
    "LD_": "is the dynamic loader's: it loads code into every program before it starts "
           "(LD_PRELOAD, LD_AUDIT, LD_LIBRARY_PATH...) or changes what and how it loads",
    "MALLOC_": _LIBC + " (its allocator; MALLOC_TRACE writes a file)",
    "ARENA_": "is the arena's own",
    "PALACE_ARENA_": "is the arena's own (it finds a bot's processes by it)",
}
"""Keys a manifest's ``[env]`` may not set, and why (docs/SANDBOX.md, "Environment of a bot").
A bot's environment reaches its own processes only, inside its sandbox; these are refused all
the same because they act on any program started with them, the loader and the C library first,
and the arena never wants a bot's value for its own."""


def reserved_env(key: str) -> str | None:
    """Why ``key`` may not be set by a bot, or None if it may."""
    if key in ARENA_ENV:
        return ARENA_ENV[key]
    return next((why for prefix, why in ARENA_ENV_PREFIXES.items() if key.startswith(prefix)), None)


EXEC_BYTES = 64 * 1024
"""The most a bot's command, build or [env] may take in bytes, each: far below the kernel's exec limits
(131,072 bytes a string, about 2 MB in all), which a longer one made every start of the bot fail
as the arena's own error."""


def _execable(strings: list[str]) -> None:
    """Strings that ``execve`` takes: no NUL byte, at most :data:`EXEC_BYTES` together."""
    if any("\0" in s for s in strings):
        raise ValueError("may not hold a NUL byte")
    size = sum(len(s.encode("utf-8", "surrogatepass")) + 1 for s in strings)
    if size > EXEC_BYTES:
        raise ValueError(f"is {size:,} bytes long; at most {EXEC_BYTES:,}")


def _check_argv(argv: list[str]) -> list[str]:
    _execable(argv)
    return argv


def _no_nul(value: str | None) -> str | None:
    if value is not None and "\0" in value:
        raise ValueError("a path may not hold a NUL byte")
    return value


def _check_env(env: dict[str, str]) -> dict[str, str]:
    _execable([f"{k}={v}" for k, v in env.items()])
    for key, value in env.items():
        if not ENV_NAME.match(key):
            raise ValueError(f"{key!r} is not a variable name (letters, digits and _)")
        why = reserved_env(key)
        if why:
            raise ValueError(f"{key} cannot be set by a bot: it {why} (docs/SANDBOX.md lists the reserved keys)")
        if "\0" in value:
            raise ValueError(f"{key}: a value may not hold a NUL byte")
    return env


BotEnv = Annotated[dict[str, StrictStr], AfterValidator(_check_env)]


def _one_printable_line(value: Any) -> Any:
    """Text the arena prints (a bot's version, author, description) holds no control character:
    an escape sequence there would drive the operator's terminal (docs/SANDBOX.md)."""
    if isinstance(value, str) and not value.isprintable():
        bad = next(c for c in value if not c.isprintable())
        raise ValueError(f"must be one line of printable text (it holds {bad.encode('unicode_escape').decode()})")
    return value


def _quoted_version(value: Any) -> Any:
    """A version is the text its author wrote: a TOML number loses it (``1.10`` reads as ``1.1``),
    so two versions would share one label."""
    if not isinstance(value, str):
        raise ValueError('must be quoted text (version = "1.10", not version = 1.10: a TOML number loses its '
                         "spelling, so 1.10 and 1.1 would be one label)")
    return value


def _at_most(limit: int) -> Callable[[Any], Any]:
    """Text a bot says about itself goes into every game row of the store and onto the operator's
    terminal: a 60,000-character version took 6 MB of store in 12 games (the manifest may be 1 MiB)."""
    def check(value: Any) -> Any:
        if isinstance(value, str) and len(value) > limit:
            raise ValueError(f"is {len(value):,} characters long; at most {limit}")
        return value
    return check


LABEL_CHARS = 64  # a version or an author, as long as a name may be
DESCRIPTION_CHARS = 200
ShownText = Annotated[StrictStr, AfterValidator(_one_printable_line), AfterValidator(_at_most(LABEL_CHARS))]
Argv = Annotated[list[StrictStr], Field(min_length=1), AfterValidator(_check_argv)]
PathText = Annotated[StrictStr, AfterValidator(_no_nul)]


class BotManifest(Strict):
    """A bot's ``bot.toml`` (reference: protocol/PROTOCOL.md, section bot.toml)."""

    name: Annotated[StrictStr, Field(pattern=r"^[a-z0-9][a-z0-9._-]{0,63}$",
                                     description="Lower-case letters, digits, '.', '_' or '-'.")]
    version: Annotated[StrictStr, BeforeValidator(_quoted_version), AfterValidator(_one_printable_line),
                       AfterValidator(_at_most(LABEL_CHARS))] = Field(
        "0", description="One line of printable text, quoted, at most 64 characters; name@version is the bot's label.")
    author: ShownText = Field("", description="One line of printable text, at most 64 characters.")
    description: Annotated[StrictStr, AfterValidator(_one_printable_line), AfterValidator(_at_most(DESCRIPTION_CHARS))] = Field(
        "", description="One line shown by arena bots, at most 200 characters.")
    command: Argv = Field(description="The program and its arguments; python3 means the arena's choice of "
                                      "interpreter unless `interpreter` or `venv` is set.")
    build: Optional[Argv] = Field(None, description="Run once, in workdir, before the first game.")
    workdir: PathText = Field(".", description="Where command and build run, inside the bot's directory.")
    interpreter: Optional[PathText] = Field(None, description="The program that replaces python3/python in "
                                                                "command (an absolute path, or relative to the bot).")
    venv: Optional[PathText] = Field(None, description="A virtual environment (relative to the bot) whose "
                                                         "bin/python replaces python3/python in command.")
    env: BotEnv = Field(default_factory=dict, description="Extra environment variables; never those the arena sets.")
    limits: LimitsTable = Field(default_factory=LimitsTable)  # type: ignore[valid-type]


# --------------------------------------------------------------------------- loading

class BenchFile(_Shared):
    """A course's bench (docs/FORMATS.md): members play only the reference bots, on the same deals."""

    name: Optional[Annotated[StrictStr, Field(min_length=1)]] = Field(
        None, description="The bench's name and resume key; defaults to the file name.")
    references: Annotated[BotRefs, Field(min_length=1, description="The reference bots, weakest first.")]
    members: Annotated[BotRefs, Field(default_factory=list, description="The members' bot folders.")]
    ladder: Optional[Annotated[StrictStr, Field(min_length=1)]] = Field(
        None, description="Also take as members the active version of every bot on this ladder at the deadline "
                          "(the ladder in ladder_store); needs a deadline.")
    ladder_store: Optional[StrictStr] = Field(None, description="The store that holds `ladder` (default: the "
                                                                "bench's own store).")
    deadline: Optional[StrictStr] = Field(None, description="An ISO 8601 time with its zone: the bench plays "
                                                            "nothing before it, and plays copies of the "
                                                            "members' folders taken at its first run after it.")
    bands: dict[StrictStr, Annotated[float, Field(ge=0, le=1)]] = Field(
        default_factory=lambda: {"pass": 0.5, "fail": 0.0},
        description="Grade -> the lowest score (the share of the points a member could take) that earns it.")
    sandbox: Optional[Literal[True]] = None
    _containment = model_validator(mode="before")(_no_weaker_containment)

    @model_validator(mode="after")
    def _someone(self) -> "BenchFile":
        if not self.members and not self.ladder:
            raise ValueError("members: give the members' folders, or a ladder to take them from")
        if self.ladder and not self.deadline:
            raise ValueError("ladder: the ladder's members are taken at the deadline: give one")
        if self.ladder_store and not self.ladder:
            raise ValueError("ladder_store: is where `ladder` is kept: give the ladder")
        return self


def bench_data(data: dict[str, Any], where: str) -> dict[str, Any]:
    """A bench file's values, validated, with ``[time]`` merged and defaults left out."""
    model = validate(BenchFile, data, where)
    out = model.model_dump(exclude_unset=True, exclude={"time", "options"})
    if "options" in model.model_fields_set:
        out["options"] = _options(model.options)  # type: ignore[attr-defined]
    _merge_clock(model, out, where)
    return out


def toml_error(e: ValueError) -> str:
    """What a TOML file's author is told for a ``ValueError`` of tomllib: its decode error as it is,
    or the bare one of an integer of more digits than Python converts (4,300: a bot.toml holding one
    was an "arena bug", exit 70, and an upload's worker crashed) without Python's advice to raise
    the interpreter's limit."""
    return str(e) if isinstance(e, tomllib.TOMLDecodeError) else str(e).split(";")[0]


def read_toml(path: Path, what: str) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigFileError(f"no {what} at {path}") from None
    except IsADirectoryError:
        raise ConfigFileError(f"{path} is a directory, not a {what}") from None
    except ValueError as e:  # a decode error, bytes not UTF-8, a number past Python's digit limit
        raise ConfigFileError(f"{path}: not valid TOML: {toml_error(e)}") from None


def _table_model(model: type[BaseModel], key: str) -> type[BaseModel] | None:
    field = model.model_fields.get(key)
    if field is None:
        return None
    for arg in typing.get_args(field.annotation) or (field.annotation,):
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            return arg
    return None


_KINDS = {"int_type": "an integer", "int_parsing": "an integer", "int_from_float": "an integer",
          "string_type": "a string", "bool_type": "true or false", "bool_parsing": "true or false",
          "list_type": "a list", "float_type": "a number", "float_parsing": "a number",
          "dict_type": "a table", "model_type": "a table", "model_attributes_type": "a table"}


def _path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not str(part).startswith(("function-", "constrained-", "list[", "str", "int", "float")):
            out += ("." if out else "") + str(part)
    return out


def _shortened(text: str, limit: int = 200) -> str:
    """What a file gave, as an error shows it: one screenful at most (a value may be megabytes)."""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


def explain(error: ValidationError, where: str, model: type[BaseModel]) -> str:
    """One line: ``file: key must be ...; ...`` with the allowed keys or values.

    Inside a table the table leads (``limits: memory_mb must be at least 1``); an
    unknown key lists the keys its table takes; a key under the wrong table says so."""
    unknown: dict[str, list[str]] = {}
    parts = []
    for e in error.errors():
        loc = tuple(e["loc"])
        table, inner = (str(loc[0]), loc[1:]) if len(loc) > 1 and isinstance(loc[0], str) \
            and _table_model(model, str(loc[0])) is not None else ("", loc)
        lead = {"": "", "options": "rules: [options] "}.get(table, f"{table}: ")
        if e["type"] == "extra_forbidden":
            unknown.setdefault(table, []).append(_path(inner))
            continue
        key = _path(inner)
        kind = e["type"]
        ctx = e.get("ctx", {})
        if kind in _KINDS:
            text = f"must be {_KINDS[kind]}"
            if _KINDS[kind] == "a table":
                parts.append(f"{lead}[{key}] must be a table (got {e.get('input')!r})")
                continue
        elif kind == "literal_error":
            text = f"must be one of {ctx.get('expected')}"
        elif kind == "missing":
            parts.append(f"{lead}missing required field {key!r}")
            continue
        elif kind == "greater_than_equal":
            text = f"must be at least {ctx.get('ge')}"
        elif kind == "less_than_equal":
            text = f"must be at most {ctx.get('le')}"
        elif kind == "too_short":
            text = "must not be empty"
        elif kind == "string_pattern_mismatch":
            sub = _table_model(model, table) if table else model
            field = (sub or model).model_fields.get(str(inner[0])) if inner else None
            text = "must be " + ((field.description or "").rstrip(".").lower() if field and field.description
                                  else f"like {ctx.get('pattern')}")
        elif kind == "value_error":
            text = e["msg"].removeprefix("Value error, ")
        else:
            text = e["msg"].lower()
        got = e.get("input")
        shown = "" if isinstance(got, dict) else f" (got {_shortened(repr(got))})"
        parts.append(f"{lead}{key} {text}{shown}" if key else f"{lead}{text}")
    for table, keys in unknown.items():
        sub = _table_model(model, table) if table else model
        allowed = ", ".join(k for k in (sub or model).model_fields if k != "time")
        if table == "time":
            parts.insert(0, f"{', '.join('time.' + k for k in keys)} does not belong under [time], "
                            f"which takes only {', '.join(CLOCK_KEYS)}")
        elif table == "options":
            parts.insert(0, f"rules: unknown option(s) under [options]: {', '.join(keys)}; allowed: {allowed}")
        else:
            lead = f"{table}: " if table else ""
            kind = "" if table else {"TournamentFile": "tournament ", "TournamentFlags": "tournament ",
                                     "LadderFile": "ladder ",
                                     "BotManifest": "bot.toml "}.get(model.__name__, "")
            homes = [] if table else [f"{k} goes under [{t}]" for k in keys for t in model.model_fields
                                      if (sub_t := _table_model(model, t)) and k in sub_t.model_fields]
            parts.insert(0, f"{lead}unknown {kind}field(s): {', '.join(keys)}"
                            + (f" ({'; '.join(homes)})" if homes else "") + f"; allowed: {allowed}"
                            + (", [time]" if not table and "time" in model.model_fields else ""))
    shown = parts[:3]
    more = len(parts) - len(shown)
    return f"{where}: " + "; ".join(shown) + (f"; and {more} more" if more > 0 else "")


def validate(model: type[BaseModel], data: dict[str, Any], where: str) -> BaseModel:
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise ConfigFileError(explain(e, where, model)) from None


def _merge_clock(model: BaseModel, out: dict[str, Any], where: str) -> None:
    """Move ``[time]``'s keys to the top level; a key given in both places is an error."""
    clock = getattr(model, "time", None)
    if clock is None:
        return
    for key, value in clock.model_dump(exclude_none=True).items():
        if key in model.model_fields_set:
            raise ConfigFileError(f"{where}: {key} is given both at the top level and in [time]; keep one")
        out[key] = value


def tournament_data(data: dict[str, Any], where: str, *, flags: bool = False) -> dict[str, Any]:
    """A tournament file's (or, with ``flags``, the command line's) values, validated, with ``[time]``
    merged and defaults left out. Every key has its type here: nothing passes through unchecked."""
    model = validate(TournamentFlags if flags else TournamentFile, data, where)
    out = model.model_dump(exclude_unset=True, exclude={"time", "options", "limits"})
    if "options" in model.model_fields_set:
        out["options"] = _options(model.options)  # type: ignore[attr-defined]
    if "limits" in model.model_fields_set:
        out["limits"] = model.limits.model_dump(exclude_none=True)  # type: ignore[attr-defined]
    _merge_clock(model, out, where)
    return out


def ladder_data(data: dict[str, Any], where: str) -> dict[str, Any]:
    """A ladder file's values, validated, with ``[time]`` merged and defaults left out
    (``matchmaking`` whole, with its defaults)."""
    model = validate(LadderFile, data, where)
    out = model.model_dump(exclude_unset=True, exclude={"time", "options", "matchmaking", "season"})
    if "options" in model.model_fields_set:
        out["options"] = _options(model.options)  # type: ignore[attr-defined]
    out["matchmaking"] = model.matchmaking.model_dump()  # type: ignore[attr-defined]
    out["season"] = model.season.model_dump()  # type: ignore[attr-defined]
    _merge_clock(model, out, where)
    return out


def _options(options: BaseModel) -> dict[str, Any]:
    """Rule options as the engine takes them (lists back to tuples)."""
    out = {}
    for key, value in options.model_dump(exclude_unset=True).items():
        if isinstance(value, list):
            value = tuple(tuple(v) if isinstance(v, list) else v for v in value)
        out[key] = value
    return out


def manifest_data(data: dict[str, Any], where: str) -> BotManifest:
    model = validate(BotManifest, data, where)
    return model  # type: ignore[return-value]


def check_rule_options(options: dict[str, Any], where: str = "options") -> dict[str, Any]:
    """Flag-given rule options checked like a file's: unknown names and bad values named."""
    return _options(validate(RuleOptions, dict(options), where))


# --------------------------------------------------------------------------- names

def rule_label(rules: Rules) -> str:
    """``shithead + seven=at_most``: the preset, then each option that differs from it."""
    base_name = rules.name.rstrip("+")
    base = PRESETS.get(base_name)
    if base is None:
        return rules.name
    changed = [f"{f.name}={option_value(getattr(rules, f.name))}" for f in dataclasses.fields(Rules)
               if f.init and f.name != "name" and getattr(rules, f.name) != getattr(base, f.name)]
    return base_name + (" + " + ", ".join(changed) if changed else "")


# --------------------------------------------------------------------------- schemas

SCHEMAS = {"bot-toml.schema.json": BotManifest, "tournament.schema.json": TournamentFile,
           "ladder.schema.json": LadderFile}


def schema_text(model: type[BaseModel], name: str) -> str:
    schema = model.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"https://palace-arena.invalid/schemas/config/{name}"
    return json.dumps(schema, indent=1, sort_keys=True) + "\n"


def write_schemas(directory: Path = SCHEMA_DIR) -> list[Path]:
    out = []
    for name, model in SCHEMAS.items():
        path = directory / name
        directory.mkdir(parents=True, exist_ok=True)
        path.write_text(schema_text(model, name))
        out.append(path)
    return out


if __name__ == "__main__":  # python -m arena.config: refresh the published schemas
    for p in write_schemas():
        print(p)
