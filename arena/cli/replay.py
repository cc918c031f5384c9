"""``arena replay`` and ``arena report``, added to the main command line by :func:`register`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from ..tournament import DEFAULT_STORE
from .common import fail


def _consoles() -> tuple[Console, Console]:
    out = Console() if sys.stdout.isatty() else Console(width=140)
    return out, Console(stderr=True)


def _fail(err: Console, message: str, code: int = 2) -> None:
    fail(message, code)  # the one error style, the message printed as written


def replay(
    game: Annotated[str, typer.Argument(help="A game id in the store (see `arena games`), or an exported game: "
                                             "a JSON file, or a JSONL export written with --logs (FILE#GAME_ID picks one).")],
    store: Annotated[Path, typer.Option("--store", help="The game store (SQLite).")] = DEFAULT_STORE,
    seat: Annotated[Optional[int], typer.Option("--as", help="Show exactly what this seat was sent at each of its decisions "
                                                          "(with --html: open the page in this seat's view).")] = None,
    verify: Annotated[bool, typer.Option("--verify", help="Only re-simulate and report; exit 1 on any mismatch.")] = False,
    html_out: Annotated[Optional[Path], typer.Option("--html", help="Write a self-contained HTML replay to this file.")] = None,
    plain: Annotated[bool, typer.Option("--plain", help="Print every turn one after the other, even on a terminal.")] = False,
    start: Annotated[int, typer.Option("--from", help="First turn to show (0 is the deal).")] = 0,
    end: Annotated[Optional[int], typer.Option("--to", help="Last turn to print (plain output).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON: the replay's frames, or with --as the "
                                                         "messages that seat was sent, one per line, byte for byte.")] = False,
) -> None:
    """Step through a logged game: every hand, the pile, each action and its effects.

    Every replay first re-simulates the game from its deal and actions and warns if
    the log does not match. Interactive on a terminal (n, p, g N, b, u, q); plain when piped.
    """
    from ..tournament.store import write_private_text
    from ..replay.load import load_game
    from ..replay.simulate import ReplayError, conversation_for, requests_for, simulate
    from ..replay.terminal import (print_verification, run_interactive, run_plain, run_seat_interactive,
                           run_seat_plain)
    from ..replay.view import replay_data
    console, err = _consoles()
    try:
        record = load_game(game, store)
        rp = simulate(record)
    except ReplayError as e:
        _fail(err, str(e))
        raise
    if verify:
        if as_json:
            print(json.dumps({"game": rp.game_id, "ok": rp.ok, "complete": rp.complete, "steps": rp.steps,
                              "mismatches": [m.as_json() for m in rp.mismatches]}, indent=2, default=str))
        else:
            print_verification(console, rp, limit=None)
        raise typer.Exit(0 if rp.ok else 1)
    if not rp.ok:
        print_verification(err, rp)
    if seat is not None and not 0 <= seat < len(rp.players):
        _fail(err, f"--as {seat}: this game has seats 0..{len(rp.players) - 1}")
    data = replay_data(rp)
    if html_out is not None:
        from ..replay.html import replay_html
        if seat is not None:
            data["view"] = seat  # the page opens in that seat's view
        try:
            write_private_text(html_out, replay_html(data))
        except OSError as e:
            _fail(err, f"cannot write {html_out}: {e}")
        console.print(f"wrote {html_out} ({len(rp.frames) - 1} turns); open it in any browser, offline")
        return
    if seat is not None:
        if rp.clock_assumed:
            err.print("[yellow]warning:[/] this log predates stored time controls: the clock in these requests "
                      "assumes the defaults (move 1000 ms, bank 10000 ms)")
        if as_json:
            for msg in conversation_for(rp, seat):
                print(json.dumps(msg, separators=(",", ":")))
            return
        decisions = requests_for(rp, seat)
        if not decisions:
            console.print(f"seat {seat} ({data['labels'][seat]}) was never asked: every move it made was forced")
            return
        if plain or not (sys.stdin.isatty() and sys.stdout.isatty()):
            run_seat_plain(console, data, decisions)
        else:
            run_seat_interactive(console, data, decisions)
        return
    if as_json:
        print(json.dumps(data, separators=(",", ":")))
        return
    if plain or not (sys.stdin.isatty() and sys.stdout.isatty()):
        run_plain(console, data, start, end)
    else:
        run_interactive(console, data, start)


def report(
    tournament: Annotated[str, typer.Argument(help="A tournament in the store (see `arena standings`).")],
    html_out: Annotated[Path, typer.Option("--html", help="The report file to write.")],
    store: Annotated[Path, typer.Option("--store", help="The game store (SQLite).")] = DEFAULT_STORE,
    split: Annotated[bool, typer.Option("--split", help="Write each replay as its own file in a folder beside "
                                                        "the report (FILE stem + '-replays/') instead of embedding them.")] = False,
    limit: Annotated[Optional[int], typer.Option(help="Only the first N games (by schedule index).")] = None,
) -> None:
    """A tournament as one HTML page: standings, and every game with its replay.

    By default every replay is embedded in the one file (compressed; each is decoded and
    drawn only when opened). --split writes them to a folder beside the report instead.
    """
    from ..tournament.store import Store, StoreError, write_private_text
    from ..replay.simulate import ReplayError, simulate
    from ..tournament.standings import from_store
    from ..replay.html import report_html, write_report_folder
    from ..replay.view import replay_data
    console, err = _consoles()
    try:
        db = Store(store, readonly=True)
    except StoreError as e:
        _fail(err, str(e))
        raise
    try:
        t = db.tournament(tournament)
        if t is None:
            known = ", ".join(x["id"] for x in db.tournaments()) or "none"
            _fail(err, f"no tournament {tournament!r} in {store} (known: {known})")
        games = db.games(tournament=tournament, limit=limit if limit is not None else 10**9)
        lines = from_store(db, tournament)
        replays, bad = {}, []
        for g in games:
            rec = db.game_record(g["id"])
            if rec is None:
                continue
            try:
                rp = simulate(rec)
            except ReplayError as e:
                err.print(f"[yellow]warning:[/] {g['id']}: {e}")
                continue
            if not rp.ok:
                bad.append(g["id"])
            replays[g["id"]] = replay_data(rp)
    finally:
        db.close()
    links = write_report_folder(html_out, replays) if split else None
    try:
        write_private_text(html_out, report_html(t, tournament, lines, games, replays, links=links))
    except OSError as e:
        _fail(err, f"cannot write {html_out}: {e}")
    where = (f"; replays in {html_out.with_name(html_out.stem + '-replays')}/" if split else "; replays embedded")
    console.print(f"wrote {html_out}: {len(lines)} bots, {len(games)} games{where}")
    if bad:
        err.print(f"[yellow]warning:[/] {len(bad)} game(s) do not match their logs: {', '.join(bad[:10])}"
                  f"{' ...' if len(bad) > 10 else ''} (arena replay ID --verify)")


def register(app: typer.Typer) -> None:
    app.command("replay")(replay)
    app.command("report")(report)
