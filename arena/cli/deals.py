"""``arena deals``: make a deal suite, or cut one from stored games (:mod:`arena.tournament.suites`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ..safetext import SafeConsole
from ..tournament.store import DEFAULT_STORE
from .common import ArenaTyper, fail

deals_app = ArenaTyper(help="Deal suites: fixed deals (or mid-game positions) for arena match, tournaments and "
                            "ladders to play instead of fresh ones (kept secret from bots).", no_args_is_help=True,
                       context_settings={"help_option_names": ["-h", "--help"]})
out = SafeConsole(highlight=False, soft_wrap=True)

SECRET_NOTE = "its seeds deal every card: keep it from bots like the store's secret.key (it is written 0600)"


@deals_app.command("make")
def make(file: Annotated[Path, typer.Argument(help="The suite file to write (JSON).")],
         count: Annotated[int, typer.Option("--count", "-n", min=1, help="Number of deals.")] = 100,
         rules_name: Annotated[str, typer.Option("--rules", help="Rule preset.")] = "classic",
         rule: Annotated[Optional[list[str]], typer.Option("--rule", "-r", help="A rule option, name=value.")] = None,
         players: Annotated[int, typer.Option("--players", min=2, help="Players per game.")] = 2,
         force: Annotated[bool, typer.Option("--force", help="Overwrite FILE if it exists.")] = False) -> None:
    """Draw COUNT fresh deals from the system's random source into a suite file."""
    from ..engine import rules_from
    from ..tournament.suites import make_suite, save_suite
    _refuse_overwrite(file, force)
    suite = make_suite(rules_from(rules_name, rule or []), players, count)
    save_suite(file, suite)
    out.print(f"wrote {file}: {count} deals, {suite.rules.name}, {players} players; {SECRET_NOTE}", markup=False)


@deals_app.command("from-games")
def from_games(file: Annotated[Path, typer.Argument(help="The suite file to write (JSON).")],
               tournament: Annotated[Optional[str], typer.Option("--tournament", "-t", help="Only this tournament's games.")] = None,
               bot: Annotated[Optional[str], typer.Option("--bot", help="Only games this bot (name@version) played.")] = None,
               lost_by: Annotated[Optional[str], typer.Option("--lost-by", help="Only games this bot (name@version) "
                                                              "did not win outright.")] = None,
               limit: Annotated[Optional[int], typer.Option("--limit", min=1, help="At most this many deals.")] = None,
               position_at: Annotated[Optional[int], typer.Option(
                   "--position-at", min=1, metavar="T",
                   help="Cut each game just before its T-th decision (counting every seat's): the suite holds "
                        "those mid-game positions, and a game from one starts there. Games that asked fewer, "
                        "or had a forfeit before it, are left out.")] = None,
               store: Annotated[Path, typer.Option("--store", help="The game store.")] = DEFAULT_STORE,
               force: Annotated[bool, typer.Option("--force", help="Overwrite FILE if it exists.")] = False) -> None:
    """Cut a suite from the deals of stored games (each deal once), e.g. every game a bot lost."""
    from ..tournament.store import Store
    from ..tournament.suites import save_suite, suite_from_games
    _refuse_overwrite(file, force)
    db = Store(store, readonly=True)
    try:
        suite = suite_from_games(db, tournament=tournament, bot=bot, lost_by=lost_by, limit=limit,
                                 position_at=position_at)
    finally:
        db.close()
    save_suite(file, suite)
    what = "deals" if position_at is None else f"positions (each before its game's decision {position_at})"
    out.print(f"wrote {file}: {len(suite.deals)} {what} from stored games, {suite.rules.name}, {suite.players} "
              f"players; {SECRET_NOTE}", markup=False)


@deals_app.command("show")
def show(file: Annotated[Path, typer.Argument(help="A suite file.")]) -> None:
    """What a suite holds (rules, players, deals and the games they came from), without its seeds."""
    from ..config import rule_label
    from ..tournament.suites import load_suite
    suite = load_suite(file)
    origins = [g for g in suite.games if g]
    positions = suite.position_count
    out.print(f"{file}: {len(suite.deals)} deals, {rule_label(suite.rules)}, {suite.players} players"
              + (f", {positions} of them mid-game positions" if positions else "")
              + (f"; cut from {len(origins)} stored games" if origins else ""), markup=False)
    for i in range(len(suite.deals)):
        position = suite.position_of(i)
        where = "" if position is None else (f"position after {len(suite.moves_of(i))} moves (turn "
                                             f"{position['turn']}, seat {position['to_move']} to move)")
        if suite.origin(i) or where:
            out.print(f"  #{i + 1}: " + ", ".join(x for x in (suite.origin(i) or "", where) if x), markup=False)


def _refuse_overwrite(file: Path, force: bool) -> None:
    if file.exists() and not force:
        fail(f"{file} exists; pass --force to overwrite it")


def register(app: typer.Typer) -> None:
    app.add_typer(deals_app, name="deals")
