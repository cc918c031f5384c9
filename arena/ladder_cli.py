"""``arena submit``, ``arena ladder`` and ``arena match``: added to the main app by :func:`register`."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import trio
import typer
from rich.console import Console, Group
from rich.table import Table

if TYPE_CHECKING:
    from .ladder import LadderStandings, MatchProgress

from .live import PlainReporter, RichReporter
from .manifest import ManifestError, load_bot
from .standings import outcomes
from .store import DEFAULT_STORE, Store, StoreError

# arena.ladder (numpy, scipy, openskill) is imported inside the commands: every ``arena`` command
# loads this module, and only these three need the ratings.

StoreOpt = Annotated[Optional[Path], typer.Option("--store", help="The game store (default: the ladder file's, "
                                                                  f"else {DEFAULT_STORE}).")]
PlainOpt = Annotated[bool, typer.Option("--plain", help="Log lines instead of a live display.")]
JobsOpt = Annotated[Optional[int], typer.Option("--concurrency", "-j", help="Games at a time (default: cores).")]


def _consoles(to_stderr: bool) -> tuple[Console, Console]:
    """(where results go, where progress goes): progress goes to stderr when stdout is JSON."""
    out = Console() if sys.stdout.isatty() else Console(width=160)
    err = Console(stderr=True) if sys.stderr.isatty() else Console(stderr=True, width=160)
    return out, (err if to_stderr else out)


def _fail(message: str, code: int = 2) -> None:
    from .cli_common import fail
    fail(message, code)  # the one error style, the message printed as written


# --------------------------------------------------------------------------- live display

class _Provisional:
    """Live openskill ratings (clearly provisional) fed with the ladder's games so far, then each new one."""

    def _prov_init(self, focus: str | None, history: list) -> None:
        from .ratings import ProvisionalRatings
        self.focus = focus
        self.prov = ProvisionalRatings()
        for o in outcomes(history):
            self.prov.update(o)

    def _prov_add(self, seats: list[str], result: dict[str, Any]) -> None:
        self.prov.update(outcomes([(seats, result)])[0])

    def _prov_text(self) -> str:
        rows = self.prov.table()
        if self.focus is not None:
            rows = [r for r in rows if r.name == self.focus]
        shown = ", ".join(f"{r.name} ~{r.elo:.0f} (conservative {r.elo_ordinal:.0f}, {r.games} games)"
                          for r in rows[:6])
        return f"provisional rating (live openskill estimate, not the ladder's fitted Elo): {shown}"

    def _prov_table(self) -> Table:
        table = Table(title="Provisional ratings (live openskill estimate; the ladder table is refitted at the end)",
                      title_justify="left")
        for col, just in (("bot", "left"), ("Elo~ (provisional)", "right"), ("conservative", "right"),
                          ("games", "right")):
            table.add_column(col, justify=just)  # type: ignore[arg-type]
        for r in self.prov.table():
            style = "bold yellow" if r.name == self.focus else None
            table.add_row(r.name, f"{r.elo:.0f}", f"{r.elo_ordinal:.0f}", str(r.games), style=style)
        return table


class PlainLadderReporter(_Provisional, PlainReporter):
    def __init__(self, focus: str | None, history: list, stream=None, every: int = 50) -> None:
        PlainReporter.__init__(self, every=every, stream=stream)
        self._prov_init(focus, history)

    def game_done(self, game, record) -> None:
        super().game_done(game, record)
        self._prov_add(list(game.seats), record.result or {})
        if self.done % self.every == 0 or self.done == self.total:
            print(self._prov_text(), file=self.out, flush=True)


class RichLadderReporter(_Provisional, RichReporter):
    def __init__(self, focus: str | None, history: list, console: Console) -> None:
        self._prov_init(focus, history)
        RichReporter.__init__(self, console)

    def game_done(self, game, record) -> None:
        self._prov_add(list(game.seats), record.result or {})
        super().game_done(game, record)

    def _render(self) -> Group:
        return Group(self.progress, self._prov_table())


def _context(progress: Console, plain: bool):
    from .ladder import RunContext
    stream = progress.file
    rich = not plain and progress.is_terminal

    def reporter(title: str, focus: str | None, history: list):
        if rich:
            return RichLadderReporter(focus, history, progress)
        return PlainLadderReporter(focus, history, stream=stream)

    return RunContext(reporter=reporter, say=lambda text: progress.print(text, highlight=False))


# --------------------------------------------------------------------------- tables

def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def ladder_table(st: "LadderStandings", highlight: str | None = None) -> Table:
    lad = st.ladder
    gauge = (f"{st.anchor} fixed at {lad.anchor_elo:.0f}" if st.anchor else f"pool mean {lad.anchor_elo:.0f}")
    table = Table(title=f"Ladder {lad.name}: {lad.rules}, {lad.seats} seats, {st.games} games, {len(st.rows)} bots",
                  title_justify="left",
                  caption=f"Elo: one Plackett-Luce fit over all games of the ladder ({gauge}); ± is the 95% "
                          "interval. LOS↓: likelihood of superiority over the next bot down.",
                  caption_justify="left")
    for col in ("#", "bot", "version", "Elo ± 95%", "games", "win %", "avg place", "draw %", "faults", "LOS↓"):
        table.add_column(col, justify="left" if col in ("bot", "version") else "right",
                         no_wrap=col in ("bot", "Elo ± 95%", "LOS↓"), min_width=6 if col == "LOS↓" else None)
    for r in st.rows:
        elo = "-" if r.elo is None else f"{r.elo:.0f} ± {r.margin:.0f}"
        faults = ", ".join(f"{k} {v}" for k, v in sorted(r.faults.items())) or "0"
        style = "bold yellow" if r.label == highlight else None
        table.add_row(str(r.rank), r.name, r.version, elo, str(r.games), _pct(r.win_rate if r.games else None),
                      f"{r.avg_place:.2f}" if r.games else "-", _pct(r.draw_rate if r.games else None), faults,
                      "-" if r.los_next is None else f"{100 * r.los_next:.1f}%", style=style)
    return table


def matrix_table(st: "LadderStandings") -> Table:
    assert st.matrix is not None
    order = [r.label for r in st.rows]
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
        table.add_row(str(i), a, *cells)
    return table


# --------------------------------------------------------------------------- commands

def _load(ref: str, store: Path | None, jobs: int | None):
    from .ladder import LadderError, load_ladder, open_store
    try:
        ladder = load_ladder(ref)
    except LadderError as e:
        _fail(str(e))
    if jobs is not None:
        ladder.concurrency = jobs
    try:
        db = open_store(ladder, store)
    except StoreError as e:
        _fail(str(e))
    return ladder, db


def submit_cmd(bot: Annotated[str, typer.Argument(help="The bot: a bot.toml, a directory holding one, or a bundled name.")],
               ladder_name: Annotated[str, typer.Option("--ladder", "-l", help="Ladder name (ladders/NAME.toml) or file.")],
               store: StoreOpt = None, concurrency: JobsOpt = None, plain: PlainOpt = False,
               as_json: Annotated[bool, typer.Option("--json", help="The refreshed standings as JSON on stdout.")] = False) -> None:
    """Check a bot, add it to a ladder, play its placement games and show where it stands."""
    from .ladder import CheckFailed, LadderError, submit
    ladder, db = _load(ladder_name, store, concurrency)
    out, progress = _consoles(as_json)
    ctx = _context(progress, plain)
    try:
        result = trio.run(submit, ladder, bot, db, ctx)
    except CheckFailed as e:
        from .check import print_report
        print_report(e.report, progress)
        _fail(str(e), 1)
    except KeyboardInterrupt:
        _fail(f"interrupted: finished games are stored in {db.path}; submit the same bot again to finish "
              "its placement", 130)
    except (LadderError, StoreError, ManifestError) as e:
        _fail(str(e))
    st = result.standings
    row = result.row
    if as_json:
        print(json.dumps({"submitted": row.label, "status": result.status, "games_played": result.games_played,
                          "place": row.rank, **st.as_json()}, indent=2))
        return
    out.print(ladder_table(st, highlight=row.label))
    elo = "unrated" if row.elo is None else f"Elo {row.elo:.0f} ± {row.margin:.0f} (95%)"
    out.print(f"{row.label} is #{row.rank} of {len(st.rows)} on {ladder.name}: {elo} after {row.games} games "
              f"({result.games_played} played now). Games: arena games --tournament "
              f"{ladder.placement_id(row.label)!r} --store {db.path}", highlight=False)


def ladder_cmd(name: Annotated[Optional[str], typer.Argument(help="A ladder; omit to list them.")] = None,
               store: StoreOpt = None, concurrency: JobsOpt = None, plain: PlainOpt = False,
               as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output on stdout.")] = False,
               matrix: Annotated[bool, typer.Option("--matrix", help="Add the head-to-head matrix.")] = False,
               seed: Annotated[bool, typer.Option("--seed/--no-seed",
                                                  help="Play the initial bots' round-robin if the ladder has no games yet.")] = True) -> None:
    """List the ladders, or show one ladder's standings (Elo with 95% intervals)."""
    from .ladder import LadderError, ensure_seeded, ladder_standings
    out, progress = _consoles(as_json)
    if name is None:
        _list(out, store, as_json)
        return
    ladder, db = _load(name, store, concurrency)
    try:
        if seed:
            trio.run(ensure_seeded, ladder, db, _context(progress, plain))
        st = ladder_standings(ladder, db, matrix=matrix)
    except KeyboardInterrupt:
        _fail(f"interrupted: finished games are stored in {db.path}; run the same command to resume", 130)
    except (LadderError, StoreError, ManifestError) as e:
        _fail(str(e))
    if as_json:
        print(json.dumps(st.as_json(), indent=2))
        return
    out.print(ladder_table(st))
    if matrix:
        out.print(matrix_table(st))


def _list(out: Console, store: Path | None, as_json: bool) -> None:
    from .ladder import list_ladders, members
    rows = []
    for name, lad, error in list_ladders():
        item: dict[str, Any] = {"name": name, "error": error or None}
        if lad is not None:
            item.update(description=lad.description, rules=lad.rules, seats=lad.seats, initial_bots=len(lad.bots),
                        members=None, games=None, store=str(store or lad.store))
            path = Path(item["store"])
            if path.exists():
                try:
                    db = Store(path, readonly=True)
                    item["members"] = len(members(db, lad.name))
                    item["games"] = db.db.execute("SELECT COUNT(*) FROM games WHERE substr(tournament,1,?)=?",
                                                  (len(lad.prefix), lad.prefix)).fetchone()[0]
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
    table = Table(title="Ladders", title_justify="left", caption="arena ladder NAME shows one; "
                  "arena submit BOT --ladder NAME joins one", caption_justify="left")
    for col in ("ladder", "rules", "seats", "members", "games", "description"):
        table.add_column(col)
    for r in rows:
        if r["error"]:
            table.add_row(r["name"], "[red]broken[/]", "", "", "", r["error"])
        else:
            dash = lambda x: "-" if x is None else str(x)  # noqa: E731
            table.add_row(r["name"], r["rules"], str(r["seats"]), dash(r["members"]), dash(r["games"]),
                          r["description"])
    out.print(table)


def _parse_sprt(text: str) -> tuple[float, float]:
    try:
        lo, hi = (float(x) for x in text.split(","))
    except ValueError:
        _fail(f"--sprt takes two Elo values 'elo0,elo1' (e.g. 0,10), got {text!r}")
    if not hi > lo:
        _fail(f"--sprt: elo1 must be above elo0, got {text!r}")
    return lo, hi


def match_line(p: "MatchProgress") -> str:
    elo, margin = p.elo()
    e = f"{elo:+.1f}" if math.isfinite(elo) else ("+inf" if elo > 0 else "-inf")
    m = f"{margin:.1f}" if math.isfinite(margin) else "inf"
    text = f"{p.games:5d} games  +{p.wins} ={p.draws} -{p.losses}  Elo {e} ± {m}  LOS {100 * p.los():.1f}%"
    if p.sprt is not None:
        s = p.sprt
        text += f"  LLR {s.llr:+.2f} [{s.lower:+.2f}, {s.upper:+.2f}]"
    return text + f"  {p.status}"


def match_cmd(a: Annotated[str, typer.Argument(help="Bot A (the candidate, e.g. the new version).")],
              b: Annotated[str, typer.Argument(help="Bot B (the baseline).")],
              rules_name: Annotated[str, typer.Option("--rules", help="Rule preset.")] = "classic",
              rule: Annotated[Optional[list[str]], typer.Option("--rule", "-r", help="Rule option, name=value.")] = None,
              sprt: Annotated[Optional[str], typer.Option(help="elo0,elo1: stop when the SPRT accepts H0 (A - B = elo0) "
                                                          "or H1 (A - B = elo1).")] = None,
              alpha: Annotated[float, typer.Option(help="SPRT false-positive rate.")] = 0.05,
              beta: Annotated[float, typer.Option(help="SPRT false-negative rate.")] = 0.05,
              max_games: Annotated[int, typer.Option(help="Stop here if the SPRT has not decided (or without --sprt).")] = 1000,
              seed: Annotated[int, typer.Option(help="Base deal seed.")] = 1,
              move_ms: Annotated[int, typer.Option()] = 1000, bank_ms: Annotated[int, typer.Option()] = 10_000,
              max_turns: Annotated[int, typer.Option()] = 2000,
              concurrency: Annotated[int, typer.Option("--concurrency", "-j", help="Deal pairs at a time (0: cores).")] = 0,
              every: Annotated[int, typer.Option(help="Print a progress line every N games.")] = 10,
              store: Annotated[Path, typer.Option("--store", help="The game store.")] = DEFAULT_STORE,
              no_store: Annotated[bool, typer.Option("--no-store", help="Do not store the games.")] = False,
              as_json: Annotated[bool, typer.Option("--json", help="The final result as JSON on stdout.")] = False) -> None:
    """Head-to-head of two bots on duplicate deals (each deal twice, seats swapped) until an SPRT decides."""
    from .engine import RulesError, rules_from
    from .ladder import LadderError, MatchProgress, run_match
    from .ratings import Sprt
    out, progress = _consoles(as_json)
    try:
        r = rules_from(rules_name, rule or [])
        spec_a, spec_b = load_bot(a), load_bot(b)
    except (RulesError, ManifestError) as e:
        _fail(str(e))
    if spec_a.human or spec_b.human:
        _fail("a match is between two bots")
    if max_games < 2 or concurrency < 0 or every < 1:
        _fail("--max-games must be at least 2, --every at least 1 and --concurrency not negative")
    concurrency = concurrency or os.cpu_count() or 1
    test = None
    if sprt is not None:
        elo0, elo1 = _parse_sprt(sprt)
        try:
            test = Sprt(elo0, elo1, alpha, beta)
        except ValueError as e:
            _fail(f"--sprt: {e}")
    from .referee import TimeControl
    clock = TimeControl(move_ms, bank_ms)
    db = None
    if not no_store:
        try:
            db = Store(store)
        except StoreError as e:
            _fail(str(e))
    head = f"match {spec_a.label} vs {spec_b.label}, {r.name}, duplicate deals (each deal twice, seats swapped)"
    if test is not None:
        head += f", SPRT H0: Elo {test.elo0:g}  H1: Elo {test.elo1:g} (alpha {alpha:g}, beta {beta:g})"
    progress.print(head + f", at most {max_games} games", highlight=False)
    last = {"printed": 0}

    def on_pair(p: MatchProgress) -> None:
        if p.games // every > last["printed"] // every or p.status != "continue":
            progress.print(match_line(p), highlight=False)
            last["printed"] = p.games

    try:
        result, tid = trio.run(lambda: run_match(spec_a, spec_b, r, sprt=test, max_games=max_games, seed=seed,
                                                 clock=clock, max_turns=max_turns, concurrency=concurrency,
                                                 store=db, on_pair=on_pair))
    except KeyboardInterrupt:
        _fail("interrupted" + (f": the games played are stored in {store}; the same command resumes" if db else ""), 130)
    except (LadderError, StoreError) as e:
        _fail(str(e))
    if test is None:
        verdict = f"{result.games} games played"
    else:
        verdict = {"accept_h1": f"H1 accepted: {spec_a.label} - {spec_b.label} is nearer {test.elo1:g} Elo than {test.elo0:g}",
                   "accept_h0": f"H0 accepted: {spec_a.label} - {spec_b.label} is nearer {test.elo0:g} Elo than {test.elo1:g}",
                   "max_games": f"no SPRT decision within {max_games} games"}[result.status]
    if as_json:
        print(json.dumps({**result.as_json(), "tournament": tid if db else None, "verdict": verdict}, indent=2))
        return
    out.print(verdict, highlight=False)
    if db is not None:
        out.print(f"games stored in {store}: arena games --tournament {tid!r}", highlight=False)


def register(app: typer.Typer) -> None:
    """Add ``submit``, ``ladder`` and ``match`` to the ``arena`` app."""
    app.command("submit")(submit_cmd)
    app.command("ladder")(ladder_cmd)
    app.command("match")(match_cmd)


__all__ = ["ladder_table", "match_line", "matrix_table", "register"]
