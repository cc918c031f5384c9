"""The ``arena`` command line."""

from __future__ import annotations

import csv
import json
import sys
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.markup import escape

from ..safetext import SafeConsole, printable
from .. import __version__
from ..tournament import DEFAULT_STORE
from .accounts import register as register_accounts
from .audit import register as register_audits
from .bench import register as register_bench
from .common import ArenaTyper, GvisorOpt, SystemOpt, fail, gvisor_system, progress
from .deals import register as register_deals
from .ladder import register as register_ladders
from .replay import register as register_replays
from .serve import register as register_serve

if TYPE_CHECKING:
    from ..tournament.store import Store

# Commands import what they run (trio, the engine, the tournament machinery) inside their bodies:
# every ``arena`` command, ``--help`` included, loads this module (bench/bench_cli.py).

app = ArenaTyper(help="Palace Arena: referee, tournaments, ladders and replays for Palace bots.",
                 no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                 context_settings={"help_option_names": ["-h", "--help"]})
console = SafeConsole(highlight=False) if sys.stdout.isatty() else SafeConsole(width=140, highlight=False)
err_console = SafeConsole(stderr=True, highlight=False)

# One spelling per argument, shared by every command that takes it.
StoreOpt = Annotated[Path, typer.Option("--store", help="The game store (SQLite file).")]
RuleOpt = Annotated[Optional[list[str]], typer.Option("--rule", "-r", help="A rule option, name=value (repeatable).")]
RulesOpt = Annotated[str, typer.Option("--rules", help="Rule preset (arena rules lists them).")]
SeedOpt = Annotated[int, typer.Option("--seed", help="Deal seed.")]
MoveMsOpt = Annotated[int, typer.Option("--move-ms", min=1, help="Milliseconds per decision.")]
BankMsOpt = Annotated[int, typer.Option("--bank-ms", min=0, help="Time bank in ms, drawn on when a decision runs over.")]
MaxTurnsOpt = Annotated[int, typer.Option("--max-turns", min=1, help="Turn cap: a game still running then is a draw.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output on stdout.")]
TournamentOpt = Annotated[Optional[str], typer.Option("--tournament", "-t", help="Only the games of this tournament.")]


def _version(value: bool) -> None:
    if value:
        print(f"palace-arena {__version__}")
        raise typer.Exit(0)


@app.callback()
def _main(version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                                help="Print the version and exit.")] = False) -> None:
    """Palace Arena: referee, tournaments, ladders and replays for Palace bots."""


@app.command()
def rules(name: Annotated[Optional[str], typer.Argument(help="A preset; omit to list them all.")] = None,
          rule: RuleOpt = None, as_json: JsonOpt = False) -> None:
    """List the rule presets and options, or print one rule set in plain words."""
    from ..engine import PRESETS, RulesError, rules_from
    from ..engine.describe import OPTION_HELP, describe
    if name is None:
        console.print("[bold]Presets[/]")
        for key, r in PRESETS.items():
            console.print(f"  {key:10} {r.min_players}-{r.max_players} players")
        console.print("\n[bold]Options[/] (use with --rule name=value)")
        for key, text in OPTION_HELP.items():
            console.print(f"  {key:16} {escape(text)}")
        return
    try:
        r = rules_from(name, rule or [])
    except RulesError as e:
        fail(str(e))
    if as_json:
        print(json.dumps(r.options(), indent=2))
    else:
        console.print(describe(r), markup=False)


@app.command()
def play(bots: Annotated[list[str], typer.Argument(help="Two to six bots (manifest, directory, bundled name, or 'human').")],
         rules_name: RulesOpt = "classic", rule: RuleOpt = None, seed: SeedOpt = 1,
         move_ms: MoveMsOpt = 1000, bank_ms: BankMsOpt = 10_000, max_turns: MaxTurnsOpt = 2000,
         store: StoreOpt = DEFAULT_STORE,
         quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only the result, not every move.")] = False,
         sandbox: Annotated[Optional[bool], typer.Option("--sandbox/--no-sandbox", help="Contain bots with bubblewrap (the default where it works).")] = None,
         trusted_bots: Annotated[bool, typer.Option("--trusted-bots", help="Run bots as your own user, uncontained, on purpose.")] = False,
         gvisor: GvisorOpt = False, system: SystemOpt = None) -> None:
    """Play one game, shown turn by turn, and log it to the store."""
    from ..bots.manifest import ManifestError, load_bot
    from ..engine import RulesError, rules_from
    from .play import play_one
    try:
        r = rules_from(rules_name, rule or [])
        specs = [load_bot(b) for b in bots]
    except (RulesError, ManifestError) as e:
        fail(str(e))
    if not r.min_players <= len(specs) <= r.max_players:
        from ..config import rule_label
        fail(f"{rule_label(r)} is for {r.min_players}-{r.max_players} players, not {len(specs)}")
    progress.message = "\ninterrupted: the game was not stored"  # after a prompt left mid-line
    from ..bots.launch import Launcher, containment_for
    code = play_one(specs, r, seed, move_ms, bank_ms, max_turns, store, quiet, console,
                    launcher=Launcher(containment=containment_for(sandbox, trusted_bots, gvisor),
                                      system=gvisor_system(system, gvisor, store)))
    raise typer.Exit(code)


@app.command()
def check(bot: Annotated[str, typer.Argument(help="The bot: a bot.toml, a directory holding one, or a bundled name.")],
          games: Annotated[int, typer.Option("--games", min=1, help="Games per scenario.")] = 2,
          rules_name: Annotated[Optional[str], typer.Option("--rules", help="Only this preset (the rules the bot "
                                                            "is meant for); default: every preset.")] = None,
          rule: RuleOpt = None, move_ms: MoveMsOpt = 1000,
          bank_ms: Annotated[Optional[int], typer.Option("--bank-ms", min=0, help="Time bank in ms "
                                                         "(default: five moves' time).")] = None,
          limit: Annotated[Optional[list[str]], typer.Option("--limit", "-L", metavar="KEY=VALUE",
                                                             help="A resource limit, e.g. memory_mb=256 (repeatable; "
                                                                  "keys as in bot.toml's [limits]).")] = None,
          all_games: Annotated[bool, typer.Option("--all", help="Play every scenario even after a fault repeats.")] = False,
          sandbox: Annotated[Optional[bool], typer.Option("--sandbox/--no-sandbox", help="Contain the bot with bubblewrap (the default where it works); --no-sandbox: private uid and namespaces only.")] = None,
          trusted_bots: Annotated[bool, typer.Option("--trusted-bots", help="Run bots as your own user, uncontained, on purpose.")] = False,
          gvisor: GvisorOpt = False, system: SystemOpt = None,
          as_json: JsonOpt = False) -> None:
    """A bot author's debugger: plays every kind of decision and explains each fault; exit 1 on any fault."""
    from ..bots.manifest import load_bot
    from ..engine import rules_from
    from ..tournament.check import check_bot, print_report
    from ..bots.launch import Launcher, containment_for
    from ..limits import Limits
    spec = load_bot(bot)
    if spec.human:
        fail("arena check takes a bot, not 'human'")
    ruleset = None
    if rules_name is not None or rule:
        ruleset = rules_from(rules_name or "classic", rule or [])
    limits = Limits(**_limits(limit or []))
    seat_system = gvisor_system(system, gvisor)
    out = err_console  # progress on stderr; the report on stdout
    progress.set(0, None, resumable=False)

    def say(text: str) -> None:
        progress.set(progress.done or 0, None, resumable=False)
        out.print(escape(text), style="dim")

    def tick(text: str) -> None:
        if text.startswith("["):
            progress.set((progress.done or 0) + 1, None, resumable=False)
        say(text)

    report = check_bot(spec, games, move_ms, bank_ms=bank_ms, rules=ruleset, limits=limits, all_faults=all_games,
                       progress=tick, launcher=Launcher(limits, containment_for(sandbox, trusted_bots, gvisor),
                                                         system=seat_system))
    if as_json:
        print(json.dumps(report, indent=2))
    else:
        print_report(report, console)
    raise typer.Exit(0 if report["ok"] else 1)


def _limits(items: list[str]) -> dict[str, int]:
    """``--limit key=value`` flags, checked like bot.toml's [limits]."""
    from ..config import LimitsTable, validate
    raw: dict[str, object] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not value.strip().lstrip("-").isdigit():
            fail(f"--limit takes KEY=VALUE with a whole number, got {item!r}")
        raw[key.strip()] = int(value)
    return validate(LimitsTable, raw, "--limit").model_dump(exclude_none=True)


class _Quiet:
    """Wraps a tournament reporter: counts for the interrupt line, and no 'interrupted' line of its own
    (the command prints one line, and only once it knows whether it was an interrupt or an error)."""

    def __init__(self, inner) -> None:
        self.inner = inner

    def started(self, cfg, total: int, done: int) -> None:
        progress.set(done, total)
        if done:
            err_console.print(f"resuming: {done} of {total} games already stored")
        self.inner.started(cfg, total, done)

    def game_done(self, game, record) -> None:
        self.inner.game_done(game, record)
        progress.set((progress.done or 0) + 1, progress.total)

    def incident(self, text: str) -> None:  # a referee worker died: said as it happens, the run goes on
        self.inner.incident(text)

    def stage(self, title: str, text: str) -> None:  # a Swiss round or a bracket's next round begins
        self.inner.stage(title, text)

    def finished(self, interrupted: bool) -> None:
        from ..tournament.live import RichReporter
        if not interrupted or isinstance(self.inner, RichReporter):
            self.inner.finished(False)  # a live display is stopped either way


@app.command()
def tournament(file: Annotated[Optional[Path], typer.Argument(help="Tournament file (TOML); omit for the demo.")] = None,
               name: Annotated[Optional[str], typer.Option("--name", help="Tournament name (also the resume key).")] = None,
               bots: Annotated[Optional[list[str]], typer.Option("--bot", help="A bot (repeatable).")] = None,
               rules_name: Annotated[Optional[str], typer.Option("--rules", help="Rule preset (arena rules lists them).")] = None,
               rule: RuleOpt = None,
               seats: Annotated[Optional[int], typer.Option("--seats", help="Players per game.")] = None,
               deals: Annotated[Optional[int], typer.Option("--deals", help="Deals per table, each played in every seat rotation.")] = None,
               suite: Annotated[Optional[Path], typer.Option("--suite", metavar="SUITE.json", help="Play this deal suite's "
                                                             "deals at every table (arena deals make / from-games).")] = None,
               seed: Annotated[Optional[int], typer.Option("--seed", help="Base deal seed.")] = None,
               concurrency: Annotated[Optional[int], typer.Option("--concurrency", "-j", help="Games at a time (default: cores).")] = None,
               move_ms: Annotated[Optional[int], typer.Option("--move-ms", min=1, help="Milliseconds per decision.")] = None,
               bank_ms: Annotated[Optional[int], typer.Option("--bank-ms", min=0, help="Time bank in ms, drawn on when a decision runs over.")] = None,
               max_turns: Annotated[Optional[int], typer.Option("--max-turns", min=1, help="Turn cap: a game still running then is a draw.")] = None,
               sandbox: Annotated[Optional[bool], typer.Option("--sandbox/--no-sandbox", help="Contain bots with bubblewrap (the default where it works); --no-sandbox: private uid and namespaces only (docs/SANDBOX.md).")] = None,
               trusted_bots: Annotated[bool, typer.Option("--trusted-bots", help="Run bots as your own user, uncontained, on purpose.")] = False,
               gvisor: GvisorOpt = False,
               accept_kernel_channels: Annotated[bool, typer.Option(
                   "--accept-kernel-channels", help="With one_seat_per_author outside gVisor: accept, by name, that "
                   "two seats can pass bits through counters the host kernel shares; stored with the run and shown "
                   "with its settings (docs/SANDBOX.md). Without it or --gvisor such a run is refused.")] = False,
               system: SystemOpt = None,
               store: Annotated[Optional[Path], typer.Option("--store", help="The game store (SQLite file).")] = None,
               cluster: Annotated[Optional[str], typer.Option("--cluster", metavar="tcp://HOST:PORT",
                                  help="Play the games on a Dask cluster (needs palace-arena[dask]; see docs/CLUSTER.md).")] = None,
               plain: Annotated[bool, typer.Option("--plain", help="Log lines instead of a live display.")] = False) -> None:
    """Run a tournament (resumes it if it was interrupted) and print the standings."""
    from ..tournament.store import Store
    import trio
    from ..tournament.live import PlainReporter, RichReporter
    from ..tournament.tables import standings_table
    from ..tournament.standings import from_store
    from ..tournament.config import load_config
    from ..tournament.run import run_tournament
    overrides = {"name": name, "bots": bots, "rules": rules_name, "seats": seats, "deals": deals, "seed": seed,
                 "concurrency": concurrency, "move_ms": move_ms, "bank_ms": bank_ms, "max_turns": max_turns,
                 "sandbox": sandbox, "trusted_bots": trusted_bots or None, "gvisor": gvisor or None, "accept_kernel_channels": accept_kernel_channels or None, "system": system or None, "suite": str(suite) if suite else None, "store": str(store) if store else None, "cluster": cluster}
    if rule:
        from ..engine.rules import parse_option
        overrides["options"] = dict(parse_option(o) for o in rule)
    cfg = load_config(file, overrides)
    from ..tournament.config import ACCEPTED_CHANNELS
    accepted = ACCEPTED_CHANNELS if cfg.channels_accepted else None
    if accepted is not None:
        err_console.print(f"[yellow]warning:[/] {escape(accepted)}", highlight=False, soft_wrap=True)
    if cfg.suite:
        from ..tournament.suites import exposure_warning
        if (exposed := exposure_warning(cfg.suite)) is not None:
            err_console.print(f"[yellow]warning:[/] {escape(exposed)}", highlight=False, soft_wrap=True)
    db = Store(cfg.store)
    inner = PlainReporter() if plain or not sys.stdout.isatty() else RichReporter(console)
    trio.run(partial(run_tournament, collect=False), cfg, db, _Quiet(inner))
    lines = from_store(db, cfg.name)
    console.print(standings_table(lines, f"Standings: {escape(cfg.name)} ({db.count_games(tournament=cfg.name)} games)"))
    _print_stages(db, cfg.name)
    if accepted is not None:
        console.print(escape(accepted), highlight=False, soft_wrap=True)
    console.print(escape(f"games stored in {cfg.store}; list them with: arena games --tournament {cfg.name}"
                         f"{'' if cfg.store == str(DEFAULT_STORE) else ' --store ' + cfg.store}, then: arena replay ID"))


def _print_stages(db: Store, name: str) -> None:
    """A Swiss's rounds, a knockout's or heats' bracket, and the winner; nothing for other formats."""
    from ..tournament.formats import event_view, stored_config, stored_results, winner
    from ..tournament.tables import stages_table
    t = db.tournament(name)
    stages = event_view(t["config"], stored_results(db, name)) if t else None
    if not stages:
        return
    fmt = t["config"]["format"]
    console.print(stages_table(fmt, stages, "Rounds" if fmt == "swiss" else "Bracket"))
    champion = winner(stored_config(t["config"]), stages)
    if champion:
        console.print(f"winner: [bold]{escape(champion)}[/]", highlight=False)


def _open(store: Path) -> Store:
    """Reading commands open the store read-only: they work on read-only media and never change it."""
    from ..tournament.store import Store
    return Store(store, readonly=True)


def _need_tournament(db: Store, name: str | None, store: Path) -> None:
    if name and db.tournament(name) is None:
        fail(f"no tournament {name!r} in {store} (known: {db.known_tournaments()})")


@app.command("standings")
def standings_cmd(tournament_name: Annotated[Optional[str], typer.Argument(metavar="TOURNAMENT",
                                                                            help="A tournament; omit for every game.")] = None,
                  store: StoreOpt = DEFAULT_STORE, as_json: JsonOpt = False,
                  as_csv: Annotated[bool, typer.Option("--csv", help="The standings as CSV on stdout (the --json fields).")] = False,
                  calibration: Annotated[bool, typer.Option("--calibration", help="Add each bot's Brier score: its "
                                                            "info.win_prob against how its games ended (reads every "
                                                            "game's log).")] = False) -> None:
    """Standings of a stored tournament (or of every game in the store)."""
    from ..tournament.tables import standings_table
    from ..tournament.standings import from_store
    db = _open(store)
    _need_tournament(db, tournament_name, store)
    lines = from_store(db, tournament_name)
    briers = {}
    if calibration:
        from ..tournament.calibration import stored_calibration
        briers = stored_calibration(db, tournament_name)
    if as_json:
        rows = [l.as_json() for l in lines]
        if calibration:
            for row in rows:
                c = briers.get(row["bot"])
                row["calibration"] = c.as_json() if c is not None else None
        print(json.dumps(rows, indent=2))
        return
    if as_csv:
        rows = [l.as_json() for l in lines]
        w = csv.writer(sys.stdout)
        fields = list(rows[0]) if rows else ["bot"]
        w.writerow(fields)
        for r in rows:
            w.writerow([printable(";".join(f"{k} {v}" for k, v in sorted(r[f].items()))) if isinstance(r[f], dict)
                        else "" if r[f] is None else printable(r[f]) if isinstance(r[f], str) else r[f]
                        for f in fields])
        return
    table = standings_table(lines, f"Standings: {escape(tournament_name or 'all games')}")
    if calibration:
        from rich.table import Column
        cells = [f"{briers[l.bot].brier:.3f} ({briers[l.bot].decisions:,})" if l.bot in briers else "-" for l in lines]
        table.columns.append(Column(header="Brier (decisions)", justify="right", _cells=cells))
    console.print(table)
    stored = db.tournament(tournament_name) if tournament_name else None
    if stored is not None and stored["config"].get("accept_kernel_channels"):
        from ..tournament.config import ACCEPTED_CHANNELS
        console.print(escape(ACCEPTED_CHANNELS), highlight=False, soft_wrap=True)
    if calibration:
        console.print("Brier: the mean of (win_prob - won)² over a bot's decisions that carried a win_prob; "
                      "0 is perfect, 0.25 is always saying 50%.", style="dim")


@app.command()
def games(tournament_name: TournamentOpt = None,
          bot: Annotated[Optional[str], typer.Option("--bot", help="Games this bot played.")] = None,
          lost_by: Annotated[Optional[str], typer.Option("--lost-by", help="Games this bot did not win outright "
                                                         "(name or name@version).")] = None,
          reason: Annotated[Optional[str], typer.Option("--reason", help="End reason: first_out, played_out, turn_cap, forfeit ...")] = None,
          fault: Annotated[Optional[str], typer.Option("--fault", help="A seat forfeited for this reason: timeout, crash ...")] = None,
          min_turns: Annotated[Optional[int], typer.Option("--min-turns", min=0, help="At least this many turns.")] = None,
          max_turns: Annotated[Optional[int], typer.Option("--max-turns", min=0, help="At most this many turns.")] = None,
          limit: Annotated[int, typer.Option("--limit", min=1, help="Show at most this many games.")] = 50,
          store: StoreOpt = DEFAULT_STORE, as_json: JsonOpt = False) -> None:
    """List stored games, filtered; replay any of them with: arena replay ID."""
    from rich.table import Table
    db = _open(store)
    _need_tournament(db, tournament_name, store)
    filters = dict(tournament=tournament_name, bot=bot, reason=reason, fault=fault, min_turns=min_turns,
                   max_turns=max_turns, lost_by=lost_by)
    rows = db.games(**filters, limit=limit)
    total = db.count_games(**filters)
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    shown = f"showing {len(rows)} of {total} game(s)" + (" (--limit for more)" if total > len(rows) else "")
    table = Table(title=shown, title_justify="left")
    for col in ("game", "seats", "end", "order", "turns", "faults"):
        table.add_column(col)
    for g in rows:
        forf = g["result"].get("forfeits", {})
        order = " > ".join("=".join(g["seats"][s] for s in group) for group in g["result"]["order"])
        table.add_row(escape(g["id"]), escape(" ".join(g["seats"])), g["reason"], escape(order), str(g["turns"]),
                      escape(", ".join(f"{g['seats'][int(s)]}:{r}" for s, r in forf.items())))
    console.print(table)
    if rows:
        where = "" if store == DEFAULT_STORE else f" --store {store}"
        console.print(escape(f"replay one with: arena replay {rows[0]['id']}{where}   (--as SEAT for a seat's view, --html FILE)"))


EXPORT_FORMATS = (".jsonl", ".csv")


@app.command()
def export(out: Annotated[Path, typer.Argument(help="Output file: .jsonl (one game per line) or .csv (one seat per row).")],
           tournament_name: TournamentOpt = None,
           logs: Annotated[bool, typer.Option("--logs", help="JSONL only: include each game's full log.")] = False,
           store: StoreOpt = DEFAULT_STORE) -> None:
    """Write stored games as JSONL (one game per line) or CSV (one seat per row)."""
    from ..tournament.store import open_private
    if out.suffix not in EXPORT_FORMATS:
        fail(f"cannot export to {out.name!r}: the file name must end in {' or '.join(EXPORT_FORMATS)}")
    if logs and out.suffix == ".csv":
        fail("--logs needs a .jsonl file: CSV has no room for game logs")
    db = _open(store)
    _need_tournament(db, tournament_name, store)
    rows = db.games(tournament=tournament_name, limit=10**9)
    if out.suffix == ".csv":
        with open_private(out, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["game", "tournament", "index", "seed", "seat", "bot", "place", "forfeit", "reason", "draw", "turns"])
            for g in rows:
                order = g["result"]["order"]
                for seat, bot_label in enumerate(g["seats"]):
                    # tied seats share the average of the places they span, as in every standings table
                    place = next(1 + sum(len(x) for x in order[:k]) + (len(grp) - 1) / 2
                                 for k, grp in enumerate(order) if seat in grp)
                    place = int(place) if place == int(place) else place
                    w.writerow([g["id"], g["tournament"], g["index"], g["seed"], seat, bot_label, place,
                                g["result"].get("forfeits", {}).get(str(seat), ""), g["reason"], int(g["draw"]), g["turns"]])
    else:
        with open_private(out, "w") as f:
            for g in rows:
                if logs:
                    g["log"] = db.game_record(g["id"])
                f.write(json.dumps(g, separators=(",", ":")) + "\n")
    console.print(escape(f"wrote {len(rows)} game(s) to {out}"))


@app.command("bots")
def bots_cmd(as_json: JsonOpt = False) -> None:
    """List the bundled reference bots: what each does and how strong it measured (docs/BOTS.md)."""
    from ..bots.manifest import bundled_bots, load_bot
    from ..strategies import STRENGTH
    rows = []
    for name in bundled_bots():
        spec = load_bot(name)
        rows.append({"bot": spec.label, "description": spec.description, "strength": STRENGTH.get(spec.name, ""),
                     "command": list(spec.command)})
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    from rich.table import Table
    table = Table(title="Bundled bots (use by name: arena play NAME ...)", title_justify="left")
    for col in ("bot", "what it does", "measured strength"):
        table.add_column(col)
    for r in rows:
        table.add_row(escape(r["bot"]), escape(r["description"] or "-"), escape(r["strength"] or "-"))
    console.print(table)


# the replay and the web arena own their commands; the ladder commands are in .ladder and .match
register_replays(app)
register_ladders(app)
register_serve(app)
register_deals(app)
register_audits(app)
register_bench(app)
register_accounts(app)
