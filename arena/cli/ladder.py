"""``arena submit``, ``arena ladder [show|run|retire|suspend|reinstate|pause|resume]`` and
``arena match``: added to the main app by :func:`register` (the match command lives in
:mod:`arena.cli.match`)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperGroup

if TYPE_CHECKING:
    from rich.table import Table

    import threading

    from ..ladder import LadderStandings

from ..safetext import SafeConsole, printable
from ..tournament import DEFAULT_STORE
from .common import fail, is_interrupt
from .match import match_cmd

# Every ``arena`` command loads this module, so the ladder machinery (numpy, scipy, openskill, trio,
# the tournament runner and its live display in .ladder_live) is imported inside the commands.

StoreOpt = Annotated[Optional[Path], typer.Option("--store", help="The game store (default: the ladder file's, "
                                                                  f"else {DEFAULT_STORE}).")]
PlainOpt = Annotated[bool, typer.Option("--plain", help="Log lines instead of a live display.")]
JobsOpt = Annotated[Optional[int], typer.Option("--concurrency", "-j", help="Games at a time (default: cores).")]


def _consoles(to_stderr: bool) -> tuple[Console, Console]:
    """(where results go, where progress goes): progress goes to stderr when stdout is JSON."""
    out = SafeConsole() if sys.stdout.isatty() else SafeConsole(width=160)
    err = SafeConsole(stderr=True) if sys.stderr.isatty() else SafeConsole(stderr=True, width=160)
    return out, (err if to_stderr else out)


def _context(progress: Console, plain: bool):
    from ..ladder import RunContext
    from .ladder_live import PlainLadderReporter, RichLadderReporter
    stream = progress.file
    rich = not plain and progress.is_terminal

    def reporter(title: str, focus: str | None, history: list):
        if rich:
            return RichLadderReporter(focus, history, progress)
        return PlainLadderReporter(focus, history, stream=stream)

    return RunContext(reporter=reporter, say=lambda text: progress.print(text, highlight=False, markup=False, soft_wrap=True))


# --------------------------------------------------------------------------- tables

def ladder_table(st: "LadderStandings", highlight: str | None = None) -> Table:
    from ..ladder.tables import MemberStatus
    from ..tournament.standings import elo_text, los_text, rate_text
    lad = st.ladder
    gauge = (f"{st.anchor} fixed at {lad.anchor_elo:.0f}" if st.anchor else f"pool mean {lad.anchor_elo:.0f}")
    from rich.table import Table
    table = Table(title=f"Ladder {lad.name}: {lad.rules}, {lad.seats} seats, {st.games} games, {len(st.rows)} bots",
                  title_justify="left",
                  caption=f"Elo: one Plackett-Luce fit with ties over all games of the ladder ({gauge}); ± and "
                          "[ ] are 95% intervals (rates: Wilson, over deals). LOS↓: likelihood of superiority over "
                          "the next bot down.",
                  caption_justify="left")
    view = st.last_view is not None or st.history or any(r.status is not MemberStatus.ACTIVE for r in st.rows)
    cols = ["#", "bot", "version", "Elo ± 95%", "games", "win % [95%]", "avg place", "draw % [95%]", "faults", "LOS↓",
            "ms/decision"]
    if view:
        cols += ["trend", "last hour", "status"]
    for col in cols:
        table.add_column(col, justify="left" if col in ("bot", "version", "status") else "right",
                         no_wrap=col in ("bot", "Elo ± 95%", "LOS↓"), min_width=6 if col == "LOS↓" else None)
    for r in st.rows:
        elo = elo_text(r.elo, r.elo_low, r.elo_high, r.rated, r.games)
        if r.wide and r.elo is not None and r.rated:
            elo += " (wide)"
        faults = ", ".join(f"{k} {v}" for k, v in sorted(r.faults.items())) or "0"
        style = "bold yellow" if r.label == highlight else "dim" if r.status is not MemberStatus.ACTIVE else None
        cells = [str(r.rank), escape(r.name), escape(r.version), elo, str(r.games),
                 rate_text(r.win_rate, r.win_low, r.win_high, r.games), f"{r.avg_place:.2f}" if r.games else "-",
                 rate_text(r.draw_rate, r.draw_low, r.draw_high, r.games), faults, los_text(r.los_next),
                 f"{r.ms_per_decision:,.1f}" if r.decisions else "-"]
        if view:
            cells += [r.trend or "-", str(r.last_hour), r.status]
        table.add_row(*cells, style=style)
    return table


def view_lines(st: "LadderStandings") -> list[str]:
    """What `arena ladder NAME` says under the table: games since the last view, wide intervals,
    suspended bots with their last stderr lines."""
    from ..ladder.tables import MemberStatus
    from ..ladder import SeatRule
    from ..tournament.config import ACCEPTED_CHANNELS
    out = [] if st.ladder.seat_rule is SeatRule.DESK else [st.ladder.seat_rule_text]
    out += [ACCEPTED_CHANNELS] if st.ladder.channels_accepted else []
    if st.last_view is None:
        out.append("first view of this ladder from this store: the next view says how many games were played since")
    else:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(st.last_view))
        out.append(f"{st.since_last_view} game(s) since the last view ({when})")
    wide = [r.label for r in st.rows if r.wide and r.status is MemberStatus.ACTIVE]
    if wide:
        out.append(f"intervals still wider than ±{st.ladder.matchmaking.wide_elo:g} Elo: {', '.join(wide)} "
                   "(`arena ladder run` plays these first)")
    for m in st.misfits:
        out.append(f"{m['a']} scored {100 * m['score']:.0f}% [{100 * m['score_low']:.0f}, {100 * m['score_high']:.0f}] "
                   f"against {m['b']} in {m['games']} games, where their ratings predict {100 * m['predicted']:.0f}%: "
                   "one rating per bot does not fit this pair (see --matrix)")
    for label, detail in st.suspensions.items():
        out.append(f"suspended {label}: {detail.get('reason', '')}; last fault {detail.get('last_reason', '')} "
                   f"{detail.get('last_message', '')} (game {detail.get('last_game', '')})".rstrip())
        for line in detail.get("stderr", [])[-10:]:
            out.append(f"    {line}")
    return out


def matrix_table(st: "LadderStandings") -> Table:
    assert st.matrix is not None
    order = [r.label for r in st.rows]
    from rich.table import Table
    table = Table(title="Head to head", title_justify="left",
                  caption="score of row vs column over the games where both sat (finished ahead = 1, same place "
                          "or a draw = ½) / number of those games", caption_justify="left")
    table.add_column("#", justify="right")
    table.add_column("bot", no_wrap=True)
    for i in range(1, len(order) + 1):
        table.add_column(str(i), justify="right", no_wrap=True)
    for i, a in enumerate(order, 1):
        cells = []
        for b in order:
            c = st.matrix.get(a, {}).get(b)
            cells.append("" if a == b else "-" if c is None or not c.games else f"{100 * c.score:.0f}% /{c.games}")
        table.add_row(str(i), escape(a), *cells)
    return table


# --------------------------------------------------------------------------- commands

def _load(ref: str, store: Path | None, jobs: int | None):
    from ..tournament.store import StoreError
    from ..ladder import LadderError, load_ladder, open_store
    try:  # a name not in ladders/ may be a ladder whose store (and its copy of the file) was moved here
        ladder = load_ladder(ref, store_dir=(store or DEFAULT_STORE).resolve().parent, store=store)
    except LadderError as e:
        fail(str(e))
    if jobs is not None:
        ladder.concurrency = jobs
    try:
        db = open_store(ladder, store)
    except StoreError as e:
        fail(str(e))
    return ladder, db


def submit_cmd(bot: Annotated[str, typer.Argument(help="The bot: a bot.toml, a directory holding one, or a bundled name.")],
               ladder_name: Annotated[str, typer.Option("--ladder", "-l", help="Ladder name (ladders/NAME.toml) or file.")],
               store: StoreOpt = None, concurrency: JobsOpt = None, plain: PlainOpt = False,
               as_json: Annotated[bool, typer.Option("--json", help="The refreshed standings as JSON on stdout.")] = False,
               server: Annotated[Optional[str], typer.Option("--server", metavar="URL", help="Upload to this club "
                                 "server (arena serve) instead; the API token from ARENA_TOKEN or --token-file.")] = None,
               token_file: Annotated[Optional[Path], typer.Option("--token-file", help="A file (mode 600) holding "
                                     "the API token for --server.")] = None) -> None:
    """Check a bot, add it to a ladder, play its placement games and show where it stands."""
    if server is not None:
        _submit_remote(bot, ladder_name, server, token_file, as_json)
        return
    from ..tournament.store import StoreError
    import trio
    from ..bots.manifest import ManifestError
    from ..ladder import CheckFailed, LadderError, submit
    ladder, db = _load(ladder_name, store, concurrency)
    out, progress = _consoles(as_json)
    ctx = _context(progress, plain)
    try:
        result = trio.run(submit, ladder, bot, db, ctx)
    except CheckFailed as e:
        from ..tournament.check import print_report
        print_report(e.report, progress)
        fail(str(e), 1)
    except (LadderError, StoreError, ManifestError) as e:
        fail(str(e))
    except BaseException as e:
        if is_interrupt(e):
            fail(f"interrupted: finished games are stored in {db.path}; submit the same bot again to finish "
                  "its placement", 130)
        raise
    st = result.standings
    row = result.row
    if as_json:
        print(json.dumps({"submitted": row.label, "status": result.status, "games_played": result.games_played,
                          "place": row.rank, **st.as_json()}, indent=2))
        return
    out.print(ladder_table(st, highlight=row.label))
    if ladder.one_seat_per_author:
        out.print(ladder.seat_rule_text, highlight=False, markup=False, soft_wrap=True)
    elo = ("unrated" if row.elo is None else f"too few games to rate ({row.games})" if not row.rated
           else f"Elo {row.elo:.0f} ± {row.margin:.0f} (95%)")
    out.print(f"{row.label} is #{row.rank} of {len(st.rows)} on {ladder.name}: {elo} after {row.games} games "
              f"({result.games_played} played now). Games: arena games --tournament "
              f"{ladder.placement_id(row.label)!r} --store {db.path}", highlight=False, markup=False)


def _submit_remote(bot: str, ladder: str, server: str, token_file: Path | None, as_json: bool) -> None:
    """``arena submit --server``: upload, follow the check and placement, print the outcome."""

    from .remote import follow, read_token, upload
    token = read_token(token_file)
    folder = Path(bot)
    folder = folder.parent if folder.name == "bot.toml" else folder
    if not (folder / "bot.toml").is_file():
        fail(f"{bot} is no bot folder (no bot.toml): --server uploads a folder of your own")
    out, progress = _consoles(as_json)
    url = upload(server, token, ladder, folder)
    progress.print(f"uploaded: {escape(url.split('?')[0])}", highlight=False)
    job = follow(url, lambda line: progress.print(escape(str(line)), highlight=False))
    if as_json:
        print(json.dumps(job, indent=2))
    if job.get("report") and not job["report"].get("ok"):
        from ..tournament.check import print_report
        print_report(job["report"], progress)
    if job["status"] == "placed" and job.get("row"):
        row = job["row"]
        out.print(f"{row.get('label', job['label'])} is #{row.get('rank')} on {ladder} after {row.get('games')} games",
                  highlight=False, markup=False)
    elif job["status"] == "check failed":
        fail(f"{job['label']} failed arena check on the server: not placed", 1)
    elif job["status"] != "placed":
        fail(f"the submission failed: {job.get('error') or job['status']}")


class _LadderGroup(TyperGroup):
    """``arena ladder NAME`` shows a ladder: a first word that is not a subcommand means ``show``."""

    def parse_args(self, ctx, args):  # type: ignore[no-untyped-def]
        if len(args) >= 2 and args[1] == "season" and args[0] not in self.commands:
            args = ["season", args[0], *args[2:]]  # arena ladder NAME season ACTION
        elif not args or (args[0] not in self.commands and args[0] not in ("--help", "-h")):
            args = ["show", *args]
        return super().parse_args(ctx, args)


ladder_app = typer.Typer(cls=_LadderGroup, add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None,
                         help="List ladders, show one (arena ladder NAME), keep one playing (arena ladder run NAME), "
                              "retire, suspend or reinstate a member, pause or resume a ladder.")


@ladder_app.command("show")
def ladder_cmd(name: Annotated[Optional[str], typer.Argument(help="A ladder; omit to list them.")] = None,
               store: StoreOpt = None, concurrency: JobsOpt = None, plain: PlainOpt = False,
               as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output on stdout (with the "
                                                                    "rating history).")] = False,
               matrix: Annotated[bool, typer.Option("--matrix", help="Add the head-to-head matrix.")] = False,
               balance: Annotated[bool, typer.Option("--balance", help="Games, seats and co-seatings per active "
                                                                       "member, with their spread, instead of the "
                                                                       "table.")] = False,
               window: Annotated[int, typer.Option("--window", min=0, help="With --balance: only the last N games "
                                                                           "(0: all).")] = 0,
               history_of: Annotated[Optional[str], typer.Option("--history", metavar="BOT",
                                                                 help="One bot's rating over time (name or "
                                                                      "name@version) instead of the table.")] = None,
               seed: Annotated[bool, typer.Option("--seed/--no-seed",
                                                  help="Play the initial bots' round-robin if the ladder has no games yet.")] = True) -> None:
    """List the ladders, or show one ladder's standings (Elo with 95% intervals, trends, recent games)."""
    from ..tournament.store import StoreError
    import trio
    from ..bots.manifest import ManifestError
    from ..ladder import LadderError, ensure_seeded, ladder_standings, rating_history
    out, progress = _consoles(as_json)
    if name is None:
        _list(out, store, as_json)
        return
    ladder, db = _load(name, store, concurrency)
    if history_of is not None:
        rows = rating_history(db, ladder.name, history_of)
        _show_history(out, ladder.name, history_of, rows, as_json)
        return
    if balance:
        from ..ladder.balance import last_joined, ladder_balance, ladder_stated
        _show_balance(out, ladder.name, ladder_balance(db, ladder, window), as_json, ladder_stated(db, ladder),
                      last_joined(db, ladder), window)
        return
    try:
        if seed:
            trio.run(ensure_seeded, ladder, db, _context(progress, plain))
        st = ladder_standings(ladder, db, matrix=matrix, view=True)
    except (LadderError, StoreError, ManifestError) as e:
        fail(str(e))
    except BaseException as e:
        if is_interrupt(e):
            fail(f"interrupted: finished games are stored in {db.path}; run the same command to resume", 130)
        raise
    if as_json:
        print(json.dumps(st.as_json(), indent=2))
        return
    out.print(ladder_table(st))
    for line in view_lines(st):
        out.print(line, highlight=False, markup=False, soft_wrap=True)
    if matrix:
        out.print(matrix_table(st))


def _show_balance(out: Console, name: str, b: Any, as_json: bool, stated: Any, joined: Any, window: int) -> None:
    if as_json:
        print(json.dumps({"ladder": name, "games_spread": b.games_spread, "seat_spread": b.seat_spread,
                          "pair_low": b.pair_low, "pair_high": b.pair_high,
                          "stated": {"batch": stated.batch, "games": stated.games, "together": stated.together,
                                     "within": stated.holds(b)},
                          "last_joined": None if joined is None else {"bot": joined.bot, "games": joined.games},
                          "bots": [{"bot": r.bot, "games": r.games, "seats": list(r.seats), "together": r.together}
                                   for r in b.rows]}, indent=2))
        return
    from rich.table import Table
    table = Table(title=f"Balance: {escape(name)} (active members)", title_justify="left",
                  caption="seat N: games in that seat; together: fewest-most games shared with another member",
                  caption_justify="left")
    table.add_column("bot", no_wrap=True)
    table.add_column("games", justify="right")
    for s in range(len(b.rows[0].seats) if b.rows else 0):
        table.add_column(f"seat {s + 1}", justify="right")
    table.add_column("together", justify="right")
    for r in b.rows:
        shared = list(r.together.values()) or [0]
        table.add_row(escape(r.bot), str(r.games), *map(str, r.seats), f"{min(shared)}-{max(shared)}")
    out.print(table)
    out.print(f"spread: games {b.games_spread}, seats {b.seat_spread} (largest per bot), games together "
              f"{b.pair_low}-{b.pair_high} ({b.pair_spread})", highlight=False)
    out.print(f"stated spread of the balanced policy: games {stated.games}, games together {stated.together} "
              f"(B = {stated.batch}), seats even: {'within' if stated.holds(b) else 'OUTSIDE'} (members present "
              "over the whole window; --window N for the games since the last one joined)", highlight=False)
    if joined is not None and (window == 0 or window > joined.games):
        out.print(f"{escape(joined.bot)} joined last: every member was present for the last {joined.games} games "
                  f"(after its placement); arena ladder {escape(name)} --balance --window {joined.games} audits them",
                  highlight=False)


def _show_history(out: Console, ladder: str, bot: str, rows: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        print(json.dumps({"ladder": ladder, "bot": bot, "history": rows}, indent=2))
        return
    if not rows:
        out.print(f"no rating snapshots of {escape(bot)} on {ladder} yet (`arena ladder run {ladder}` and "
                  "`arena submit` take them)", highlight=False)
        return
    from rich.table import Table
    table = Table(title=f"Rating history of {escape(bot)} on {ladder}", title_justify="left",
                  caption="one row per snapshot: the maximum-likelihood fit over the ladder's games at that time",
                  caption_justify="left")
    for col in ("taken", "ladder games", "bot", "Elo", "95% interval", ""):
        table.add_column(col, justify="left" if col in ("taken", "bot", "") else "right")
    lo = min(r["lo"] for r in rows)
    hi = max(r["hi"] for r in rows)
    for r in rows:
        table.add_row(time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r["taken_at"])), str(r["games"]),
                      escape(r["bot"]), f"{r['elo']:.0f}", f"{r['lo']:.0f} .. {r['hi']:.0f}",
                      _bar(r["lo"], r["elo"], r["hi"], lo, hi))
    out.print(table)


def _bar(lo: float, mid: float, hi: float, left: float, right: float, width: int = 30) -> str:
    """The interval as a text bar on a common scale (the estimate is the ●)."""
    span = max(right - left, 1e-9)
    pos = lambda x: min(width - 1, max(0, int(round((x - left) / span * (width - 1)))))  # noqa: E731
    cells = [" "] * width
    for i in range(pos(lo), pos(hi) + 1):
        cells[i] = "─"
    cells[pos(mid)] = "●"
    return "".join(cells)


def _stop_on_sigterm(progress: Any) -> threading.Event:
    """SIGTERM (a server stopping, a service manager) asks the run to stop once the batch being
    played is finished, losing no game; Ctrl-C still stops at once (the batch resumes next run)."""
    import signal
    import threading
    asked = threading.Event()

    def on_term(signum: int, frame: object) -> None:
        if not asked.is_set():
            progress.print("stopping after the batch being played (SIGTERM)", highlight=False, markup=False)
        asked.set()

    signal.signal(signal.SIGTERM, on_term)
    return asked


@ladder_app.command("run")
def run_cmd(name: Annotated[str, typer.Argument(help="The ladder (ladders/NAME.toml, a file, or one kept in the store).")],
            store: StoreOpt = None, concurrency: JobsOpt = None,
            games: Annotated[Optional[int], typer.Option("--games", help="Stop after this many games "
                                                                          "(whole batches: it may play a few more).")] = None,
            hours: Annotated[Optional[float], typer.Option("--hours", help="Stop after this long (at the end of the "
                                                                              "batch then playing).")] = None,
            cluster: Annotated[Optional[str], typer.Option("--cluster", metavar="tcp://HOST:PORT",
                                                           help="Play the games on a Dask cluster (docs/CLUSTER.md).")] = None,
            plain: PlainOpt = False,
            as_json: Annotated[bool, typer.Option("--json", help="The run's summary as JSON on stdout.")] = False) -> None:
    """Keep a ladder playing the tables where a game teaches the most, until Ctrl-C, --games or --hours; resumes where it stopped."""
    from ..tournament.store import StoreError
    import trio
    from ..bots.manifest import ManifestError
    from ..ladder import LadderError, RunSummary, ladder_standings, run_ladder
    if games is not None and games < 1 or hours is not None and hours <= 0:
        fail("--games must be at least 1 and --hours above 0")
    ladder, db = _load(name, store, concurrency)
    out, progress = _consoles(as_json)
    ctx = _context(progress, True)
    summary = RunSummary()
    every = {"next": 0.0}

    def on_batch(s: "RunSummary", table, number: int) -> None:
        now = time.monotonic()
        if now < every["next"] and not plain:
            return
        every["next"] = now + 5.0
        progress.print(f"batch {number} ({table.why}): {table.focus} vs {', '.join(table.field)} | "
                       f"{s.games} games this run, {s.games_per_hour:,.0f}/h, ladder overhead "
                       f"{100 * s.overhead_share:.1f}% of wall time", highlight=False, markup=False, soft_wrap=True)

    bounds = ", ".join(x for x in (f"{games} games" if games else "", f"{hours:g} h" if hours else "") if x)
    progress.print(f"running ladder {ladder.name} in {db.path} until {bounds or 'Ctrl-C'}", highlight=False,
                   markup=False, soft_wrap=True)
    if ladder.one_seat_per_author:
        progress.print(ladder.seat_rule_text, highlight=False, markup=False, soft_wrap=True)
    if ladder.channels_accepted:
        from ..tournament.config import ACCEPTED_CHANNELS
        progress.print(f"warning: {ACCEPTED_CHANNELS}", highlight=False, markup=False, soft_wrap=True)
    interrupted = False
    asked = _stop_on_sigterm(progress)
    try:
        trio.run(lambda: run_ladder(ladder, db, ctx, games=games, hours=hours, cluster=cluster or "",
                                    on_batch=on_batch, summary=summary, stop=asked.is_set))
    except (LadderError, StoreError, ManifestError) as e:
        fail(str(e))
    except BaseException as e:  # Ctrl-C (possibly inside an exception group), or a cluster that cannot run it
        if is_interrupt(e):
            interrupted = True
            summary.stopped = "interrupted"
        else:
            from ..tournament.cluster import ClusterError
            if isinstance(e, ClusterError):
                fail(str(e))
            raise
    line = (f"{summary.games} games in {summary.wall_s:.0f} s ({summary.games_per_hour:,.0f} games/h), "
            f"{summary.batches} batch(es) this run, {summary.snapshots} rating snapshot(s); ladder overhead "
            f"{summary.overhead_s:.2f} s = {100 * summary.overhead_share:.2f}% of wall time")
    if as_json:
        print(json.dumps({"ladder": ladder.name, **summary.as_json()}, indent=2))
    elif not interrupted:
        out.print(ladder_table(ladder_standings(ladder, db, view=True)))  # with last hour and trend, as ladder show
        out.print(line, highlight=False, markup=False, soft_wrap=True)
    if interrupted:  # the summary once, as the interrupted line (not an error)
        progress.print(f"interrupted: {line}; `arena ladder run {ladder.name}` continues where it stopped",
                       highlight=False, markup=False, soft_wrap=True)
        raise typer.Exit(130)


@ladder_app.command("retire")
def retire_cmd(name: Annotated[str, typer.Argument(help="The ladder.")],
               bot: Annotated[str, typer.Argument(help="The member to retire, name@version.")],
               store: StoreOpt = None) -> None:
    """Take a member out of matchmaking (a running `arena ladder run` sees it at its next batch)."""
    from ..ladder import LadderError, retire
    ladder, db = _load(name, store, None)
    try:
        print(printable(retire(db, ladder, bot)))
    except LadderError as e:
        fail(str(e))


@ladder_app.command("reinstate")
def reinstate_cmd(name: Annotated[str, typer.Argument(help="The ladder.")],
                  bot: Annotated[str, typer.Argument(help="A retired or suspended member, name@version.")],
                  store: StoreOpt = None) -> None:
    """Put a retired or suspended member back into matchmaking."""
    from ..ladder import clear_status, member
    ladder, db = _load(name, store, None)
    if member(db, ladder.name, bot) is None:
        fail(f"{bot} is not a member of ladder {ladder.name}")
    if clear_status(db, ladder.name, bot):
        print(printable(f"reinstated {bot} on {ladder.name}"))
    else:
        print(printable(f"{bot} is already active on {ladder.name}"))


@ladder_app.command("suspend")
def suspend_cmd(name: Annotated[str, typer.Argument(help="The ladder.")],
                bot: Annotated[str, typer.Argument(help="The member to suspend, name@version.")],
                reason: Annotated[str, typer.Option("--reason", help="Why (its owner is told; kept in the audit).")],
                store: StoreOpt = None) -> None:
    """Take a member out of matchmaking until reinstated; on a club server its owner is told why."""
    from ..ladder import LadderError, MemberStatus, take_out
    ladder, db = _load(name, store, None)
    try:
        print(printable(take_out(db, ladder.name, bot, MemberStatus.SUSPENDED, reason)))
    except LadderError as e:
        fail(str(e))


@ladder_app.command("pause")
def pause_cmd(name: Annotated[str, typer.Argument(help="The ladder.")],
              reason: Annotated[str, typer.Option("--reason", help="Why (shown by ladder run; kept in the audit).")],
              store: StoreOpt = None) -> None:
    """Pause a ladder: `arena ladder run` plays no new batch until `arena ladder resume`."""
    from ..ladder import pause
    ladder, db = _load(name, store, None)
    pause(db, ladder.name, reason)
    print(printable(f"paused {ladder.name}: {reason}"))


@ladder_app.command("resume")
def resume_cmd(name: Annotated[str, typer.Argument(help="The ladder.")], store: StoreOpt = None) -> None:
    """Resume a paused ladder."""
    from ..ladder import resume
    ladder, db = _load(name, store, None)
    print(printable(f"resumed {ladder.name}" if resume(db, ladder.name) else f"{ladder.name} was not paused"))


SEASON_ACTIONS = ("start", "end", "show")


@ladder_app.command("season")
def season_cmd(name: Annotated[str, typer.Argument(help="The ladder.")],
               action: Annotated[str, typer.Argument(help="start (freeze the ladder and publish the hash of the "
                                                          "season's deal secret), end (archive its standings and "
                                                          "reveal the secret) or show.")] = "show",
               number: Annotated[Optional[int], typer.Argument(help="With show: the season (default: the open "
                                                                    "one, else the last).")] = None,
               store: StoreOpt = None,
               export: Annotated[Optional[Path], typer.Option("--export", help="With show: write the season's "
                                                                              "games for anyone to verify (JSONL).")] = None,
               as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False) -> None:
    """Seasons: arena ladder NAME season start|end|show [N] (docs/SEASONS.md)."""
    from ..ladder import LadderError
    from ..ladder.seasons import (current, end_season, published_games, reveal, season, seasons, standings_of,
                                  start_season)
    from ..tournament.store import open_private
    if action not in SEASON_ACTIONS:
        fail(f"season {action!r}: expected one of {', '.join(SEASON_ACTIONS)}")
    out, _ = _consoles(as_json)
    ladder, db = _load(name, store, None)
    try:
        if action == "start":
            s = start_season(db, ladder)
        elif action == "end":
            s = end_season(db, ladder)
        elif number is not None:
            s = season(db, ladder.name, number)
        else:
            s = current(db, ladder.name) or next(iter(reversed(seasons(db, ladder.name))), None)
            if s is None:
                fail(f"ladder {ladder.name} has no seasons yet (start one: arena ladder {ladder.name} season start)")
        rows = standings_of(db, ladder, s)
    except LadderError as e:
        fail(str(e))
    if export is not None:
        if s.open:
            fail(f"season {s.number} is still open: export it once it has ended and its secret is revealed")
        try:
            with open_private(export, "w") as f:
                for item in published_games(db, ladder, s):
                    f.write(json.dumps(item, separators=(",", ":")) + "\n")
        except OSError as e:
            fail(f"cannot write {export}: {e}")
    if as_json:
        print(json.dumps({**s.as_json(), "standings": [r.as_json() for r in rows]}, indent=2))
        return
    when = lambda t: time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t))  # noqa: E731
    ends = [f"on {when(s.ends_at)}" if s.ends_at else "", f"after {s.end_games} games" if s.end_games else ""]
    state = (f"ended {when(s.ended)}" if s.ended else
             "open, ends " + (" or ".join(x for x in ends if x) or "when ended by hand"))
    out.print(f"Season {s.number} of {ladder.name}: {state}; {len(s.members)} members", highlight=False)
    out.print(f"deal secret sha256 (published at the start): {s.commitment}", highlight=False)
    if not s.open:
        out.print(f"deal secret (revealed at the end): {reveal(s)['secret']}", highlight=False)
    from rich.table import Table
    table = Table(title=f"Season {s.number}" + (" (archived)" if not s.open else ""), title_justify="left",
                  caption="Elo: the season's games and the seasons before, each season back weighed by carry "
                          f"= {s.frozen.get('carry')}; a bot changes division only when its 95% interval clears "
                          "the boundary", caption_justify="left")
    for col in ("#", "division", "bot", "Elo [95%]", "games"):
        table.add_column(col, justify="left" if col == "bot" else "right")
    for r in rows:
        elo = "-" if r.elo is None else f"{r.elo:.0f} [{r.lo:.0f}, {r.hi:.0f}]"
        table.add_row(str(r.rank), str(r.division + 1), escape(r.bot), elo, str(r.games))
    out.print(table)
    if export is not None:
        out.print(f"wrote {export}: anyone can check it with python -m arena.replay.verify {export} --secret "
                  f"{reveal(s)['secret']} --commitment {s.commitment}", highlight=False, soft_wrap=True)


def _list(out: Console, store: Path | None, as_json: bool) -> None:
    from ..ladder import list_ladders, members
    from ..store.reads import prefix_counts
    from ..tournament.store import Store, StoreError
    rows = []
    for name, lad, error in list_ladders(store=store):
        item: dict[str, Any] = {"name": name, "error": error or None}
        if lad is not None:
            item.update(description=lad.description, rules=lad.rules, seats=lad.seats, initial_bots=len(lad.bots),
                        members=None, games=None, store=str(store or lad.store),
                        one_seat_per_author=lad.one_seat_per_author, one_seat_per_author_from=lad.seat_rule.value,
                        accept_kernel_channels=lad.channels_accepted)
            path = Path(item["store"])
            if path.exists():
                try:
                    db = Store(path, readonly=True)
                    item["members"] = len(members(db, lad.name))
                    item["games"] = prefix_counts(db.db, lad.prefix)[0]
                    db.close()
                except (StoreError, Exception):  # a listing never fails on one unreadable store
                    pass
        rows.append(item)
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    if not rows:
        out.print("no ladders (add ladders/NAME.toml; see ladders/README.md)")
        return
    from rich.table import Table
    table = Table(title="Ladders", title_justify="left", caption="arena ladder NAME shows one; "
                  "arena submit BOT --ladder NAME joins one", caption_justify="left")
    for col in ("ladder", "rules", "seats", "members", "games", "description"):
        table.add_column(col)
    for r in rows:
        if r["error"]:
            table.add_row(r["name"], "[red]broken[/]", "", "", "", r["error"])
        else:
            dash = lambda x: "-" if x is None else str(x)  # noqa: E731
            accepted = " [yellow](kernel channels accepted)[/]" if r["accept_kernel_channels"] else ""
            if r["one_seat_per_author"]:
                from ..ladder import SeatRule
                club = r["one_seat_per_author_from"] == SeatRule.CLUB
                accepted += " (one seat per author" + (": the club's default)" if club else ")")
            table.add_row(r["name"], r["rules"], str(r["seats"]), dash(r["members"]), dash(r["games"]),
                          escape(r["description"]) + accepted)
    out.print(table)


def register(app: typer.Typer) -> None:
    """Add ``submit``, ``ladder`` and ``match`` to the ``arena`` app."""
    app.command("submit")(submit_cmd)
    app.add_typer(ladder_app, name="ladder")
    app.command("match")(match_cmd)


__all__ = ["ladder_app", "ladder_table", "matrix_table", "register", "view_lines"]
