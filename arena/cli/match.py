"""``arena match``: the command line of :func:`arena.ladder.match.run_match`, usable as a CI gate.

With ``--sprt`` the exit status is the verdict (:data:`EXIT_STATUS`), distinct from errors (2),
an interrupt (130) and an arena bug (70), and ``--summary`` writes it as Markdown for a
pull-request comment. Kept free of numpy/scipy imports at module level: every ``arena`` command
loads it.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.markup import escape

from ..safetext import SafeConsole
from ..tournament import DEFAULT_STORE
from .common import GvisorOpt, SystemOpt, gvisor_system, is_interrupt

if TYPE_CHECKING:
    from ..ladder.match import MatchProgress

PAIR_NAMES = ("LL", "LD", "DD/WL", "WD", "WW")  # as arena.ratings.PAIR_NAMES, without importing numpy here

# The verdict of an SPRT as the exit status: a CI job passes only when H1 is accepted.
EXIT_STATUS = {"accept_h1": 0, "accept_h0": 1, "max_games": 3}  # by ratings.Verdict (not imported at start-up)

def _fail(message: str, code: int = 2) -> None:
    SafeConsole(stderr=True).print(f"[red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def _parse_sprt(text: str) -> tuple[float, float]:
    try:
        lo, hi = (float(x) for x in text.split(","))
    except ValueError:
        _fail(f"--sprt takes two Elo values 'elo0,elo1' (e.g. 0,10), got {text!r}")
    if not hi > lo:
        _fail(f"--sprt: elo1 must be above elo0, got {text!r}")
    return lo, hi


def match_line(p: "MatchProgress") -> str:
    """One progress line: games, W/D/L, pair counts, Elo from pairs, win rate over deals, LOS, LLR."""
    from ..ladder.match import elo_text
    from ..ratings import pair_elo
    pairs = " ".join(f"{n} {c}" for n, c in zip(PAIR_NAMES, p.pairs))
    rate, lo, hi = p.win_rate()
    text = (f"{p.games:5d} games  +{p.wins} ={p.draws} -{p.losses}  pairs {pairs}  Elo {elo_text(pair_elo(p.pairs))}  "
            f"win {100 * rate:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}]  LOS {100 * p.los():.1f}%")
    if p.sprt is not None:
        s = p.sprt
        text += f"  LLR {s.llr:+.2f} [{s.lower:+.2f}, {s.upper:+.2f}]"
    return text + f"  {p.status}"


def match_cmd(a: Annotated[str, typer.Argument(metavar="A", help="Bot A (the candidate, e.g. the new version): a path, a bundled "
                                                    "name, or a ladder label name@version from the store.")],
              b: Annotated[str, typer.Argument(metavar="B", help="Bot B (the baseline), the same way.")],
              rules_name: Annotated[Optional[str], typer.Option("--rules", help="Rule preset (default classic; "
                                                                "a --suite sets its own).")] = None,
              rule: Annotated[Optional[list[str]], typer.Option("--rule", "-r", help="Rule option, name=value.")] = None,
              sprt: Annotated[Optional[str], typer.Option(help="elo0,elo1: stop when the SPRT (pentanomial, on deal "
                                                          "pairs) accepts H0 (A - B = elo0) or H1 (A - B = elo1).")] = None,
              alpha: Annotated[float, typer.Option(help="SPRT false-positive rate.")] = 0.05,
              beta: Annotated[float, typer.Option(help="SPRT false-negative rate.")] = 0.05,
              max_games: Annotated[int, typer.Option(help="Stop here if the SPRT has not decided (or without --sprt); "
                                                          "whole deal pairs, so an odd number plays one game fewer.")] = 1000,
              seed: Annotated[int, typer.Option(help="Base deal seed.")] = 1,
              deals: Annotated[Optional[Path], typer.Option("--suite", metavar="SUITE.json",
                                                            help="Play this deal suite's deals, in order, instead of "
                                                                 "fresh ones (arena deals make / from-games); after the "
                                                                 "match, the deals that flipped.")] = None,
              move_ms: Annotated[int, typer.Option(help="Time per decision, ms.")] = 1000,
              bank_ms: Annotated[int, typer.Option(help="Time bank for overruns, ms.")] = 10_000,
              max_turns: Annotated[int, typer.Option(help="Turn cap: a longer game is adjudicated a draw.")] = 2000,
              concurrency: Annotated[int, typer.Option("--concurrency", "-j", help="Games at a time (0: cores). "
                                                       "-j 1 plays a deal's two games one after the other, so "
                                                       "bots that search on the clock never share a core.")] = 0,
              every: Annotated[int, typer.Option(help="Print a progress line every N games.")] = 10,
              cluster: Annotated[Optional[str], typer.Option("--cluster", metavar="tcp://HOST:PORT",
                                 help="Play the games on a Dask cluster (needs palace-arena[dask]; see docs/CLUSTER.md).")] = None,
              store: Annotated[Path, typer.Option("--store", help="The game store.")] = DEFAULT_STORE,
              no_store: Annotated[bool, typer.Option("--no-store", help="Do not store the games.")] = False,
              as_json: Annotated[bool, typer.Option("--json", help="The final result as JSON on stdout.")] = False,
              summary: Annotated[Optional[Path], typer.Option("--summary", metavar="FILE.md",
                                                              help="Also write the result as Markdown (for a "
                                                                   "pull-request comment or a CI job summary).")] = None,
              sandbox: Annotated[Optional[bool], typer.Option("--sandbox/--no-sandbox", help="Contain bots with "
                                                              "bubblewrap (the default where it works); --no-sandbox: "
                                                              "private uid and namespaces only.")] = None,
              trusted_bots: Annotated[bool, typer.Option("--trusted-bots", help="Run bots as your own user, "
                                                         "uncontained, on purpose.")] = False,
              gvisor: GvisorOpt = False, system: SystemOpt = None) -> None:
    """Head-to-head of two bots on duplicate deals (each deal twice, seats swapped) until an SPRT decides.

    Exit status with --sprt: 0 H1 accepted (A is better by elo1), 1 H0 accepted (it is not), 3 undecided when --max-games ran out; without --sprt 0 once the games are played. Either way 2 means an error (bad arguments, a bot that cannot start), 130 an interrupt, 70 an arena bug.
    """  # noqa: E501 - one line: the help keeps the docstring's line breaks
    from ..tournament.store import Store, StoreError
    from ..bots.manifest import ManifestError
    import trio
    from ..engine import RulesError, rules_from
    from ..ratings import PairSprt
    from ..referee import TimeControl
    from ..ladder.config import LadderError
    from ..ladder.match import MatchProgress, match_games, resolve_bot, run_match
    out = SafeConsole() if sys.stdout.isatty() else SafeConsole(width=160)
    progress = SafeConsole(stderr=True) if as_json else out
    if max_games < 2 or concurrency < 0 or every < 1:
        _fail("--max-games must be at least 2, --every at least 1 and --concurrency not negative")
    from ..bots.launch import containment_for
    containment = containment_for(sandbox, trusted_bots, gvisor)  # a contradiction: before the store opens
    db = None
    if not no_store:
        try:
            db = Store(store)
        except StoreError as e:
            _fail(str(e))
    suite = None
    try:
        if deals is not None:
            from ..tournament.suites import exposure_warning, load_suite
            if rules_name is not None or rule:
                _fail("--suite: the suite sets the rules; drop --rules and --rule")
            suite = load_suite(deals)
            r = suite.rules
            if (exposed := exposure_warning(deals)) is not None:
                SafeConsole(stderr=True).print(f"[yellow]warning:[/] {escape(exposed)}", highlight=False,
                                               soft_wrap=True)
        else:
            r = rules_from(rules_name or "classic", rule or [])
        spec_a, spec_b = resolve_bot(a, db), resolve_bot(b, db)
        if deals is not None:
            from ..tournament.suites import check_hidden
            check_hidden(deals, {spec_a.label: spec_a.root, spec_b.label: spec_b.root})
    except (RulesError, ManifestError, StoreError) as e:
        _fail(str(e))
    if spec_a.human or spec_b.human:
        _fail("a match is between two bots")
    seat_system = gvisor_system(system, gvisor, store)
    concurrency = concurrency or os.cpu_count() or 1
    test = None
    if sprt is not None:
        elo0, elo1 = _parse_sprt(sprt)
        try:
            test = PairSprt(elo0, elo1, alpha, beta)
        except ValueError as e:
            _fail(f"--sprt: {e}")
    clock = TimeControl(move_ms, bank_ms)
    planned = match_games(max_games)
    if suite is not None:
        planned = min(planned, 2 * len(suite.deals))
    head = f"match {spec_a.label} vs {spec_b.label}, {r.name}, duplicate deals (each deal twice, seats swapped)"
    if suite is not None:
        head += f" from the suite {deals} ({len(suite.deals)} deals)"
    if test is not None:
        head += (f", SPRT on deal pairs H0: Elo {test.elo0:g}  H1: Elo {test.elo1:g} "
                 f"(alpha {alpha:g}, beta {beta:g})")
    head += f", at most {planned} games ({planned // 2} deals)"
    if suite is None and planned != max_games:
        head += f"; --max-games {max_games} is rounded down to whole deal pairs"
    elif suite is not None and planned < 2 * len(suite.deals):
        head += f"; --max-games {max_games} leaves the suite's last {len(suite.deals) - planned // 2} deals out"
    progress.print(head, highlight=False, markup=False, soft_wrap=True)
    last = {"printed": 0}

    def on_resume(stored: int, total: int) -> None:
        progress.print(f"resuming: {stored} of {total} games already stored in {store} (same bots, files in their "
                       "directories, rules, seed and turn cap); they are counted, not replayed", highlight=False,
                       markup=False, soft_wrap=True)

    def on_pair(p: MatchProgress) -> None:
        if p.games // every > last["printed"] // every or p.status != "continue":
            progress.print(match_line(p), highlight=False, markup=False, soft_wrap=True)
            last["printed"] = p.games

    def on_incident(text: str) -> None:  # a referee worker died: replaced, its games played again
        progress.print(f"arena: {text}", highlight=False, markup=False, soft_wrap=True)

    from ..tournament.executors import ExecutorBroken, ExecutorError
    try:
        result, tid = trio.run(lambda: run_match(spec_a, spec_b, r, sprt=test, max_games=max_games, seed=seed,
                                                 clock=clock, max_turns=max_turns, concurrency=concurrency,
                                                 store=db, on_pair=on_pair, on_resume=on_resume,
                                                 containment=containment, system=seat_system, suite=suite,
                                                 cluster=cluster or "", on_incident=on_incident))
    except ExecutorBroken as e:  # the cluster is gone, say: what was played is kept
        _fail(f"{e}" + (f"; the games played are stored in {store}: run the same command again to resume"
                        if db else ""))
    except (LadderError, StoreError, ExecutorError) as e:
        _fail(str(e))
    except BaseException as e:
        if is_interrupt(e):
            _fail("interrupted" + (f": the games played are stored in {store}; the same command resumes"
                                   if db else ""), 130)
        raise
    if test is None:
        verdict = f"{result.games} games played"
    else:
        verdict = {"accept_h1": f"H1 accepted: {spec_a.label} - {spec_b.label} is nearer {test.elo1:g} Elo than {test.elo0:g}",
                   "accept_h0": f"H0 accepted: {spec_a.label} - {spec_b.label} is nearer {test.elo0:g} Elo than {test.elo1:g}",
                   "max_games": f"no SPRT decision within {planned} games"}[result.status]
    code = EXIT_STATUS[result.status] if test is not None else 0
    data = result.as_json()
    if suite is not None:
        data["deals_report"] = deal_report(result.deal_pairs, suite.games)
    if summary is not None:
        try:
            summary.write_text(summary_markdown(data, verdict, head, tid if db else None))
        except OSError as e:
            _fail(f"--summary: cannot write {summary}: {e.strerror or e}")
    if as_json:
        print(json.dumps({**data, "tournament": tid if db else None, "verdict": verdict, "exit_status": code}, indent=2))
        raise typer.Exit(code)
    fmt = lambda x: "-" if x is None else f"{x:+.1f}"  # noqa: E731
    out.print(verdict, highlight=False, markup=False, soft_wrap=True)
    out.print("pairs (A's two games of a deal): " + ", ".join(f"{k} {v}" for k, v in data["pairs"].items())
              + f"; +{data['wins']} ={data['draws']} -{data['losses']}; Elo {data['elo_text']} from pairs, "
              f"normalized Elo {fmt(data['normalized_elo'])}; A's win rate {100 * data['win_rate']:.1f}% "
              f"[{100 * data['win_rate_low']:.1f}, {100 * data['win_rate_high']:.1f}] (95% over deals)",
              highlight=False, markup=False, soft_wrap=True)
    if suite is not None:
        for line in flip_lines(data["deals_report"], spec_a.label, spec_b.label):
            out.print(line, highlight=False, markup=False, soft_wrap=True)
    if db is not None:
        out.print(f"games stored in {store}: arena games --tournament {tid!r}", highlight=False, markup=False, soft_wrap=True)
    if summary is not None:
        out.print(f"summary written to {summary}", highlight=False, markup=False, soft_wrap=True)
    raise typer.Exit(code)


def deal_report(pairs: list[int], games: tuple[str | None, ...]) -> list[dict]:
    """Each suite deal played: its number in the suite, the game it was cut from, A's pair outcome."""
    return [{"deal": i + 1, "game": games[i] if i < len(games) else None, "pair": PAIR_NAMES[p]}
            for i, p in enumerate(pairs)]


def flip_lines(report: list[dict], a: str, b: str) -> list[str]:
    """Which deals flipped between the two bots. In LL, B won the deal from both seats and A lost
    it from both: the deal flipped from a win (B's) to a loss (A's); WW the other way round. In
    WL/DD the seat decided the deal, whoever held it."""
    def names(pair: str) -> str:
        hit = [r for r in report if r["pair"] == pair]
        return ", ".join(f"#{r['deal']}" + (f" ({r['game']})" if r["game"] else "") for r in hit[:30]) + \
            (f" and {len(hit) - 30} more" if len(hit) > 30 else "") if hit else "none"
    same = sum(r["pair"] in ("DD/WL", "LD", "WD") for r in report)
    return [f"per deal of the suite ({len(report)} played):",
            f"  flipped from a win to a loss (LL: {b} won it from both seats, {a} lost it from both): {names('LL')}",
            f"  flipped from a loss to a win (WW: {a} won it from both seats, {b} lost it from both): {names('WW')}",
            f"  the rest: {same} (WL or DD: the seat decided it; LD or WD: a draw in one seat)"]


def summary_markdown(data: dict, verdict: str, head: str, tournament: str | None = None) -> str:
    """The result of a match as a short Markdown report (from :meth:`MatchProgress.as_json`)."""
    icon = {"accept_h1": "✅", "accept_h0": "❌", "max_games": "⚠️"}.get(data["status"], "ℹ️") if "sprt" in data else "ℹ️"
    lines = [f"### {icon} {data['a']} vs {data['b']}: {verdict}", "", head, "",
             "| | |", "|---|---|",
             f"| Elo (A − B, from deal pairs, 95%) | {data['elo_text']} |",
             f"| LOS | {100 * data['los']:.1f}% |",
             f"| games | {data['games']} ({data['deals']} deals): +{data['wins']} ={data['draws']} -{data['losses']} |",
             f"| A's win rate | {100 * data['win_rate']:.1f}% [{100 * data['win_rate_low']:.1f}, "
             f"{100 * data['win_rate_high']:.1f}] |"]
    s = data.get("sprt")
    if s is not None:
        lines.append(f"| SPRT ({s['model']}) | LLR {s['llr']:+.2f} in [{s['lower']:+.2f}, {s['upper']:+.2f}], "
                     f"H0 Elo {s['elo0']:g}, H1 Elo {s['elo1']:g}, α {s['alpha']:g}, β {s['beta']:g} |")
    lines += ["", "Deal pairs (A's two games of a deal, pentanomial):", "",
              "| " + " | ".join(data["pairs"]) + " |", "|" + "---|" * len(data["pairs"]),
              "| " + " | ".join(str(v) for v in data["pairs"].values()) + " |"]
    if "deals_report" in data:
        lines += [""] + [ln.replace("  ", "- ", 1) if ln.startswith("  ") else ln
                         for ln in flip_lines(data["deals_report"], data["a"], data["b"])]
    if tournament:
        lines += ["", f"Games: `arena games --tournament '{tournament}'`"]
    return "\n".join(lines) + "\n"


__all__ = ["EXIT_STATUS", "match_cmd", "match_line", "summary_markdown"]
