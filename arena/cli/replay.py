"""``arena replay`` and ``arena report``, added to the main command line by :func:`register`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Console
from rich.markup import escape

from ..safetext import SafeConsole
from ..tournament import DEFAULT_STORE
from .common import GvisorOpt, SystemOpt, fail, gvisor_system


def _consoles() -> tuple[Console, Console]:
    out = SafeConsole() if sys.stdout.isatty() else SafeConsole(width=140)
    return out, SafeConsole(stderr=True)


def _fail(err: Console, message: str, code: int = 2) -> None:
    fail(message, code)  # the one error style, the message printed as written


def _load_and_simulate(game: str, store: Path):
    """The game's record and its re-simulation; a game that cannot be read is one error line."""
    from ..replay.load import load_game
    from ..replay.simulate import ReplayError, simulate
    try:
        record = load_game(game, store)
    except ReplayError as e:
        fail(str(e))
        raise
    try:
        return record, simulate(record)
    except ReplayError as e:
        fail(f"{game}: {e}")  # the file or game id the user named
        raise


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
    secret: Annotated[Optional[str], typer.Option("--secret", help="With --verify: GAME is a season's export; the "
                                                                  "secret revealed at its end (hex, or a file).")] = None,
    commitment: Annotated[Optional[str], typer.Option("--commitment", help="With --secret: the hash published at "
                                                                          "the season's start (hex, or a file).")] = None,
) -> None:
    """Step through a logged game: every hand, the pile, each action and its effects.

    Every replay first re-simulates the game from its deal and actions and warns if
    the log does not match. Interactive on a terminal (n, p, g N, b, u, q); plain when piped.
    """
    from ..tournament.store import write_private_text
    from ..replay.simulate import conversation_for, requests_for
    from ..replay.terminal import (print_verification, run_interactive, run_plain, run_seat_interactive,
                           run_seat_plain)
    from ..replay.view import replay_data
    console, err = _consoles()
    if secret is not None or commitment is not None:
        _verify_season(console, game, secret, commitment, verify, as_json)
    record, rp = _load_and_simulate(game, store)
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
            console.print(f"seat {seat} ({data['labels'][seat]}) was never asked: every move it made was forced",
                          markup=False)
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


def _verify_season(console: Any, export: str, secret: str | None, published: str | None, verify: bool,
                   as_json: bool) -> None:
    """``arena replay EXPORT --verify --secret S --commitment H``: a whole season (arena.replay.verify)."""
    from ..replay.verify import read_export, report, value, verify_season
    if not verify or secret is None or published is None:
        fail("--secret and --commitment go together, with --verify, on a season's export")
    try:
        items = read_export(Path(export))
        key = bytes.fromhex(value(secret))  # type: ignore[arg-type]
        check = verify_season(items, key, value(published))  # type: ignore[arg-type]
    except (OSError, ValueError) as e:
        fail(f"cannot verify {export}: {e}")
    if as_json:
        print(json.dumps(check.as_json(), indent=2))
    else:
        console.print(report(check), highlight=False, markup=False, soft_wrap=True)
    raise typer.Exit(0 if check.ok else 1)


def _stages_html(db: Any, t: dict[str, Any]) -> str:
    """A Swiss's rounds or a bracket for the report; "" for the other formats."""
    from ..replay.html import stages_html
    from ..tournament.formats import event_view, stored_config, stored_results, winner
    from ..store.reads import authors
    stored = stored_results(db, t["id"])
    stages = event_view(t["config"], stored)
    if not stages:
        return ""
    return stages_html(t["config"]["format"], stages, winner(stored_config(t["config"]), stages),
                       authors=authors(db.db, list(t["config"].get("order", []))), stored=stored)


def report(
    tournament: Annotated[str, typer.Argument(help="A tournament in the store (see `arena standings`).")],
    html_out: Annotated[Path, typer.Option("--html", help="The report file to write.")],
    store: Annotated[Path, typer.Option("--store", help="The game store (SQLite).")] = DEFAULT_STORE,
    split: Annotated[bool, typer.Option("--split", help="Write each replay as its own file in a folder beside "
                                                        "the report (FILE stem + '-replays/') instead of embedding them.")] = False,
    limit: Annotated[Optional[int], typer.Option(help="Only the first N games (by schedule index).")] = None,
    private: Annotated[bool, typer.Option("--private", help="Keep every bot's stderr, info lines and fault "
                                                            "messages in the replays (for your own eyes: by default "
                                                            "they are left out, as arena serve leaves them out for "
                                                            "all but a bot's owner; docs/CLUB.md).")] = False,
) -> None:
    """A tournament as one HTML page: standings, and every game with its replay.

    By default every replay is embedded in the one file (compressed; each is decoded and
    drawn only when opened). --split writes them to a folder beside the report instead.
    A report is made to be shared, so the bots' private lines stay out unless --private.
    """
    from ..tournament.store import Store, StoreError, write_private_text
    from ..replay.simulate import ReplayError, simulate
    from ..tournament.standings import from_store
    from ..replay.html import report_html, write_report_folder
    from ..replay.view import replay_data
    from ..serve.privacy import replay_for
    console, err = _consoles()
    try:
        db = Store(store, readonly=True)
    except StoreError as e:
        _fail(err, str(e))
        raise
    try:
        t = db.tournament(tournament)
        if t is None:
            _fail(err, f"no tournament {tournament!r} in {store} (known: {db.known_tournaments()})")
        games = db.games(tournament=tournament, limit=limit if limit is not None else 10**9)
        lines = from_store(db, tournament)
        stages = _stages_html(db, t)
        replays, bad = {}, []
        for g in games:
            rec = db.game_record(g["id"])
            if rec is None:
                continue
            try:
                rp = simulate(rec)
            except ReplayError as e:
                err.print(f"[yellow]warning:[/] {escape(g['id'])}: {escape(str(e))}")  # a ladder's ids hold labels
                continue
            if not rp.ok:
                bad.append(g["id"])
            replays[g["id"]] = replay_data(rp) if private else replay_for(replay_data(rp), g["seats"], set())
    finally:
        db.close()
    links = write_report_folder(html_out, replays) if split else None
    try:
        from importlib.resources import files
        site_css = files("arena.serve").joinpath("static/site.css").read_text(encoding="utf-8")
        write_private_text(html_out, report_html(t, tournament, lines, games, replays, links=links, stages=stages,
                                                 stylesheet=site_css))
    except OSError as e:
        _fail(err, f"cannot write {html_out}: {e}")
    where = (f"; replays in {html_out.with_name(html_out.stem + '-replays')}/" if split else "; replays embedded")
    console.print(f"wrote {html_out}: {len(lines)} bots, {len(games)} games{where}")
    if bad:
        err.print(f"[yellow]warning:[/] {len(bad)} game(s) do not match their logs: {escape(', '.join(bad[:10]))}"
                  f"{' ...' if len(bad) > 10 else ''} (arena replay ID --verify)")


def debug(
    game: Annotated[str, typer.Argument(help="A game id in the store (see `arena games`), or an exported game file.")],
    bot: Annotated[str, typer.Argument(help="The build to test: a bot directory, a bot.toml or a bundled name.")],
    seat: Annotated[int, typer.Option("--seat", help="The seat whose recorded requests are fed to BOT.")],
    start: Annotated[int, typer.Option("--from", min=1, help="Start at this decision of the seat (1 is its first; "
                                                             "the numbers of `arena replay GAME --as SEAT`).")] = 1,
    store: Annotated[Path, typer.Option("--store", help="The game store (SQLite).")] = DEFAULT_STORE,
    sandbox: Annotated[Optional[bool], typer.Option("--sandbox/--no-sandbox", help="Contain the bot with bubblewrap "
                                                    "(the default where it works); --no-sandbox: private uid and "
                                                    "namespaces only.")] = None,
    trusted_bots: Annotated[bool, typer.Option("--trusted-bots", help="Run the bot as your own user, uncontained, "
                                                                      "on purpose.")] = False,
    gvisor: GvisorOpt = False, system: SystemOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="The outcome as JSON on stdout.")] = False,
    play_on: Annotated[bool, typer.Option("--continue", help="After a divergence, play the game out live against "
                                                            "the recorded opponents' bots (found in the store by "
                                                            "label, or bundled) and show the result.")] = False,
) -> None:
    """Feed a seat's recorded requests to another build of its bot and stop where it chooses differently.

    The bot gets the seat's start message and then each request exactly as the referee wrote it, on the recorded clock, in its sandbox like any bot. At the first decision where it answers otherwise than the record (or faults), it shows that decision's view, both choices and what the bot wrote to stderr so far. A bot that seeds its randomness from start.seed chooses the same again. Exit status: 0 no divergence, 1 diverged, 2 an error (no such game or seat, a bot that cannot start).
    """  # noqa: E501 - one line: the help keeps the docstring's line breaks

    from ..bots.launch import Launcher, containment_for
    from ..bots.manifest import ManifestError, load_bot
    from ..replay.debug import debug_seat
    from ..replay.simulate import ReplayError
    from ..replay.terminal import render_decision, thought_lines
    from ..replay.view import Names, describe_action, replay_data
    console, err = _consoles()
    seat_system = gvisor_system(system, gvisor, store)
    record, rp = _load_and_simulate(game, store)
    if not 0 <= seat < len(rp.players):
        _fail(err, f"--seat {seat}: this game has seats 0..{len(rp.players) - 1}")
    if not rp.ok:
        from ..replay.terminal import print_verification
        print_verification(err, rp)
        _fail(err, "the log does not match its re-simulation: its requests cannot be rebuilt faithfully")
    try:
        spec = load_bot(bot)
    except ManifestError as e:
        _fail(err, str(e))
        raise
    if spec.human:
        _fail(err, "arena debug takes a bot, not 'human'")
    who = Names(rp.players)
    recorded_bot = who.labels[seat]
    if not as_json:
        err.print(f"feeding seat {seat}'s recorded requests ({recorded_bot} in {rp.game_id}) to {spec.label}",
                  highlight=False, markup=False)
    opponents = _opponents(rp, seat, game, store) if play_on else None
    try:
        result = debug_seat(rp, seat, spec, Launcher(containment=containment_for(sandbox, trusted_bots, gvisor),
                                                     system=seat_system),
                            start=start,
                            opponents=opponents)
    except ReplayError as e:
        _fail(err, str(e))
        raise
    d = result.divergence
    if as_json:
        print(json.dumps({"game": rp.game_id, "seat": seat, "recorded_bot": recorded_bot, "bot": spec.label,
                          "decisions": result.decisions, "from": result.first, "agreed": result.agreed,
                          "diverged": result.diverged, "divergence": None if d is None else d.as_json(),
                          "stderr": result.stderr[-200:],
                          "continued": None if result.live is None else _live_json(result.live)}, indent=2))
        raise typer.Exit(1 if d is not None else 0)
    out = lambda text, style=None: console.print(text, style=style, highlight=False, markup=False,  # noqa: E731
                                                 soft_wrap=True)
    if d is None:
        out(f"no divergence: {spec.label} chose as recorded at all {result.agreed} decisions "
            f"{result.first}..{result.decisions} of seat {seat}")
        raise typer.Exit(0)
    from dataclasses import replace
    data = replay_data(rp)
    console.print(render_decision(data, replace(d.recorded, stderr=[]), d.number, result.decisions))
    for line in d.recorded.stderr:
        out(f"  recorded stderr| {line}", "dim")
    req = d.recorded.request
    name = lambda k: describe_action({x: v for x, v in req["actions"][k].items() if x != "id"}, who)  # noqa: E731
    out(f"diverged at decision {d.number} of {result.decisions} (turn {d.recorded.step}, request {req['id']}), "
        f"after {result.agreed} decision(s) chosen as recorded:", "bold")
    if d.recorded.choice is not None:
        out(f"  recorded ({recorded_bot}): [{d.recorded.choice}] {name(d.recorded.choice)}")
    else:
        out(f"  recorded ({recorded_bot}): no valid answer: forfeit ({d.recorded.fault})")
    if d.fault is not None:
        out(f"  {spec.label}: no valid answer: {d.fault[0]}: {d.fault[1]}", "bold red")
    else:
        out(f"  {spec.label}: [{d.choice}] {name(d.choice)}   ({d.ms} ms)", "bold")
        for line in thought_lines(d.info, d.info_warning):
            console.print(line)
    out(f"stderr of {spec.label} up to here ({len(result.stderr)} line(s)):" if result.stderr
        else f"stderr of {spec.label} up to here: (nothing)")
    for line in result.stderr[-40:]:
        out(f"  stderr| {line}", "dim cyan")
    if len(result.stderr) > 40:
        out(f"  ({len(result.stderr) - 40} earlier line(s) not shown; --json has up to 200)", "dim")
    if result.live is not None:
        from ..replay.view import result_text
        live = result.live
        out(f"played on from decision {d.number}, {spec.label} in seat {seat} against the recorded opponents: "
            f"{len(live.steps)} steps; "
            f"result: {result_text(live.result or {}, Names(live.players))}"
            f" (recorded: {result_text(rp.result or record.get('result') or {}, who)})", "bold")
    raise typer.Exit(1)


def _live_json(rec) -> dict:
    return {"steps": len(rec.steps), "result": rec.result, "faults": rec.faults}


def _opponents(rp, seat: int, game: str, store: Path) -> dict:
    """The recorded opponents' bots: by the store's seat labels (a ladder member, a registered
    bot, a bundled one), else by the names in the log."""
    from ..bots.manifest import ManifestError, load_bot
    from ..ladder.match import resolve_bot
    from ..tournament.store import Store, StoreError
    labels: list[str] = list(rp.players)
    db = None
    try:
        db = Store(store, readonly=True)
        labels = db.game_seats(game) or labels
    except (StoreError, OSError, ValueError):
        pass
    out = {}
    try:
        for s, label in enumerate(labels):
            if s == seat:
                continue
            try:
                out[s] = resolve_bot(label, db)
            except ManifestError as e:
                try:  # a bundled bot, named by its label
                    spec = load_bot(label.partition("@")[0])
                except ManifestError:
                    spec = None
                if spec is None or spec.label != label:
                    fail(f"--continue: cannot find seat {s}'s bot {label}: {e}")
                out[s] = spec
    finally:
        if db is not None:
            db.close()
    return out


def register(app: typer.Typer) -> None:
    app.command("replay")(replay)
    app.command("report")(report)
    app.command("debug")(debug)
