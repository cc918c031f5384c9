"""The ``arena`` command line."""

from __future__ import annotations

import csv
import json
import sys
from functools import partial
from pathlib import Path
from typing import Annotated, Optional

import trio
import typer
from rich.console import Console

from .engine import PRESETS, RulesError, rules_from
from .manifest import ManifestError, bundled_bots, load_bot
from .store import DEFAULT_STORE, Store, StoreError
from .tournament import ConfigError

app = typer.Typer(help="Palace Arena: referee, tournaments, ladders and replays for Palace bots.",
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
console = Console() if sys.stdout.isatty() else Console(width=140)
err = Console(stderr=True)

StoreOpt = Annotated[Path, typer.Option("--store", help="The game store (SQLite).")]
RuleOpt = Annotated[Optional[list[str]], typer.Option("--rule", "-r", help="Rule option override, name=value (repeatable).")]


def fail(message: str, code: int = 2) -> None:
    err.print(f"[red]error:[/] {message}")
    raise typer.Exit(code)


@app.command()
def rules(name: Annotated[Optional[str], typer.Argument(help="A preset; omit to list them all.")] = None,
          rule: RuleOpt = None, as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """List the rule presets and options, or print one rule set in plain words."""
    from .engine.describe import OPTION_HELP, describe
    if name is None:
        console.print("[bold]Presets[/]")
        for key, r in PRESETS.items():
            console.print(f"  {key:10} {r.min_players}-{r.max_players} players")
        console.print("\n[bold]Options[/] (use with --rule name=value)")
        for key, text in OPTION_HELP.items():
            console.print(f"  {key:16} {text}")
        return
    try:
        r = rules_from(name, rule or [])
    except RulesError as e:
        fail(str(e))
    if as_json:
        print(json.dumps(r.options(), indent=2))
    else:
        console.print(describe(r))


@app.command()
def play(bots: Annotated[list[str], typer.Argument(help="Two to six bots (manifest, directory, bundled name, or 'human').")],
         rules_name: Annotated[str, typer.Option("--rules", help="Rule preset.")] = "classic",
         rule: RuleOpt = None, seed: Annotated[int, typer.Option(help="Deal seed.")] = 1,
         move_ms: Annotated[int, typer.Option(help="Time per decision.")] = 1000,
         bank_ms: Annotated[int, typer.Option(help="Time bank for overruns.")] = 10_000,
         max_turns: Annotated[int, typer.Option(help="Adjudication cap.")] = 2000,
         store: StoreOpt = DEFAULT_STORE, quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False) -> None:
    """Play one game, shown turn by turn, and log it to the store."""
    from .play import play_one
    try:
        r = rules_from(rules_name, rule or [])
        specs = [load_bot(b) for b in bots]
    except (RulesError, ManifestError) as e:
        fail(str(e))
    if not r.min_players <= len(specs) <= r.max_players:
        fail(f"{r.name} is for {r.min_players}-{r.max_players} players, not {len(specs)}")
    try:
        code = trio.run(play_one, specs, r, seed, move_ms, bank_ms, max_turns, store, quiet, console)
    except StoreError as e:
        fail(str(e))
    raise typer.Exit(code)


@app.command()
def check(bot: Annotated[str, typer.Argument(help="The bot to check.")],
          games: Annotated[int, typer.Option(help="Games per preset.")] = 2,
          move_ms: Annotated[int, typer.Option()] = 1000,
          as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Conformance run: the bot plays every preset and every kind of decision; exit 1 on any fault."""
    from .check import run_check
    try:
        spec = load_bot(bot)
    except ManifestError as e:
        fail(str(e))
    report = trio.run(run_check, spec, games, move_ms)
    if as_json:
        print(json.dumps(report, indent=2))
    else:
        from .check import print_report
        print_report(report, console)
    raise typer.Exit(0 if report["ok"] else 1)


@app.command()
def tournament(file: Annotated[Optional[Path], typer.Argument(help="Tournament file (TOML); omit for the demo.")] = None,
               name: Annotated[Optional[str], typer.Option(help="Tournament name (also the resume key).")] = None,
               bots: Annotated[Optional[list[str]], typer.Option("--bot", help="A bot (repeatable).")] = None,
               rules_name: Annotated[Optional[str], typer.Option("--rules")] = None, rule: RuleOpt = None,
               seats: Annotated[Optional[int], typer.Option()] = None,
               deals: Annotated[Optional[int], typer.Option(help="Deals per table, each played in every seat rotation.")] = None,
               seed: Annotated[Optional[int], typer.Option()] = None,
               concurrency: Annotated[Optional[int], typer.Option("--concurrency", "-j")] = None,
               move_ms: Annotated[Optional[int], typer.Option()] = None,
               max_turns: Annotated[Optional[int], typer.Option()] = None,
               sandbox: Annotated[Optional[bool], typer.Option("--sandbox/--no-sandbox")] = None,
               store: Annotated[Optional[Path], typer.Option("--store")] = None,
               cluster: Annotated[Optional[str], typer.Option("--cluster", metavar="tcp://HOST:PORT",
                                  help="Play the games on a Dask cluster (needs palace-arena[dask]; see docs/CLUSTER.md).")] = None,
               plain: Annotated[bool, typer.Option("--plain", help="Log lines instead of a live display.")] = False) -> None:
    """Run a tournament (resumes it if it was interrupted) and print the standings."""
    from .live import PlainReporter, RichReporter, standings_table
    from .standings import standings
    from .tournament import load_config, run_tournament
    overrides = {"name": name, "bots": bots, "rules": rules_name, "seats": seats, "deals": deals, "seed": seed,
                 "concurrency": concurrency, "move_ms": move_ms, "max_turns": max_turns, "sandbox": sandbox,
                 "store": str(store) if store else None, "cluster": cluster}
    if rule:
        from .engine.rules import parse_option
        try:
            overrides["options"] = dict(parse_option(o) for o in rule)
        except RulesError as e:
            fail(str(e))
    try:
        cfg = load_config(file, overrides)
        db = Store(cfg.store)
    except (ConfigError, StoreError) as e:
        fail(str(e))
    reporter = PlainReporter() if plain or not sys.stdout.isatty() else RichReporter(console)
    try:
        trio.run(partial(run_tournament, collect=False), cfg, db, reporter)
    except KeyboardInterrupt:
        err.print(f"interrupted: finished games are stored in {cfg.store}; run the same command to resume")
        raise typer.Exit(130)
    except (ConfigError, StoreError) as e:
        fail(str(e))
    lines = standings(db.results(cfg.name))
    console.print(standings_table(lines, f"Standings: {cfg.name} ({len(db.results(cfg.name))} games)"))
    console.print(f"games stored in {cfg.store}; list them with: arena games --tournament {cfg.name}"
                  f"{'' if cfg.store == str(DEFAULT_STORE) else ' --store ' + cfg.store}, then: arena replay ID")


def _open(store: Path) -> Store:
    try:
        return Store(store, readonly=True)
    except StoreError as e:
        fail(str(e))
        raise


@app.command("standings")
def standings_cmd(tournament_name: Annotated[Optional[str], typer.Argument(metavar="TOURNAMENT")] = None,
                  store: StoreOpt = DEFAULT_STORE, as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Standings of a stored tournament (or of every game in the store)."""
    from .live import standings_table
    from .standings import standings
    db = _open(store)
    if tournament_name and db.tournament(tournament_name) is None:
        known = ", ".join(t["id"] for t in db.tournaments()) or "none"
        fail(f"no tournament {tournament_name!r} in {store} (known: {known})")
    lines = standings(db.results(tournament_name))
    if as_json:
        print(json.dumps([l.as_json() for l in lines], indent=2))
    else:
        console.print(standings_table(lines, f"Standings: {tournament_name or 'all games'}"))


@app.command()
def games(tournament_name: Annotated[Optional[str], typer.Option("--tournament", "-t")] = None,
          bot: Annotated[Optional[str], typer.Option(help="Games this bot played.")] = None,
          reason: Annotated[Optional[str], typer.Option(help="End reason: first_out, played_out, turn_cap, forfeit ...")] = None,
          fault: Annotated[Optional[str], typer.Option(help="A seat forfeited for this reason: timeout, crash ...")] = None,
          min_turns: Annotated[Optional[int], typer.Option()] = None,
          max_turns: Annotated[Optional[int], typer.Option()] = None,
          limit: Annotated[int, typer.Option()] = 50, store: StoreOpt = DEFAULT_STORE,
          as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """List stored games, filtered; replay any of them with: arena replay ID."""
    from rich.table import Table
    db = _open(store)
    rows = db.games(tournament=tournament_name, bot=bot, reason=reason, fault=fault,
                    min_turns=min_turns, max_turns=max_turns, limit=limit)
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    table = Table(title=f"{len(rows)} game(s)", title_justify="left")
    for col in ("game", "seats", "end", "order", "turns", "faults"):
        table.add_column(col)
    for g in rows:
        forf = g["result"].get("forfeits", {})
        table.add_row(g["id"], " ".join(g["seats"]), g["reason"], str(g["result"]["order"]), str(g["turns"]),
                      ", ".join(f"{g['seats'][int(s)]}:{r}" for s, r in forf.items()))
    console.print(table)
    if rows:
        where = "" if store == DEFAULT_STORE else f" --store {store}"
        console.print(f"replay one with: arena replay {rows[0]['id']}{where}   (--as SEAT for a seat's view, --html FILE)")


@app.command()
def export(out: Annotated[Path, typer.Argument(help="Output file (.jsonl or .csv).")],
           tournament_name: Annotated[Optional[str], typer.Option("--tournament", "-t")] = None,
           logs: Annotated[bool, typer.Option("--logs", help="JSONL only: include each game's full log.")] = False,
           store: StoreOpt = DEFAULT_STORE) -> None:
    """Write stored games as JSONL (one game per line) or CSV (one seat per row)."""
    db = _open(store)
    rows = db.games(tournament=tournament_name, limit=10**9)
    if out.suffix == ".csv":
        with out.open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["game", "tournament", "index", "seed", "seat", "bot", "place", "forfeit", "reason", "draw", "turns"])
            for g in rows:
                order = g["result"]["order"]
                for seat, bot_label in enumerate(g["seats"]):
                    place = next(1 + sum(len(x) for x in order[:k]) for k, grp in enumerate(order) if seat in grp)
                    w.writerow([g["id"], g["tournament"], g["index"], g["seed"], seat, bot_label, place,
                                g["result"].get("forfeits", {}).get(str(seat), ""), g["reason"], int(g["draw"]), g["turns"]])
    else:
        with out.open("w") as f:
            for g in rows:
                if logs:
                    g["log"] = db.game_record(g["id"])
                f.write(json.dumps(g, separators=(",", ":")) + "\n")
    console.print(f"wrote {len(rows)} game(s) to {out}")


@app.command("bots")
def bots_cmd() -> None:
    """List the bundled reference bots."""
    for name in bundled_bots():
        spec = load_bot(name)
        console.print(f"{spec.label:24} {' '.join(spec.command)}")


def main() -> None:  # pragma: no cover
    app()


def _register_more() -> None:
    """Replays and ladders live in their own packages; they add their commands here."""
    from .ladder_cli import register as register_ladders
    from .replay.cli import register as register_replays
    from .serve.cli import register as register_serve
    register_replays(app)
    register_ladders(app)
    register_serve(app)


_register_more()
