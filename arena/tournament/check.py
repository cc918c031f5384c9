"""``arena check``: a bot author's debugger, a conformance run through every kind of request.

The bot plays each preset, plus option sets that produce the rarer decisions (stacking at
setup, the harsh face-up pick-up, a joker's target), against the random reference bot; or
only the rule set it is meant for (``--rules``). Faults are grouped by kind, each with
where it first happened and the last lines the bot wrote to stderr then; a line on stdout
that is not the protocol is quoted; the clock is explained in words. A check stops at the
second fault of one kind (the rest would repeat it) unless ``--all``.

Its deals come from a secret made for the run (:func:`.seeds.run_secret`), like
a tournament's: with fixed deal seeds a bot could find the deal by trying its ``start.seed``
against each of them, and a check is also the entry test of ``arena submit`` and web uploads.
"""

from __future__ import annotations

import math
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict
from functools import partial
from typing import Any

import trio

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..bots.containment import Containment, process_registry
from ..bots.launch import BuildError, Launcher, python_for
from ..bots.manifest import BotSpec, load_bot
from ..bots.spawn import HOST_ENV
from ..config import BOT_TOML_DOC, rule_label
from ..engine import PRESETS, Rules, rules_from
from ..limits import Limits
from ..referee.blocking import BlockingLaunch, BlockingPlayer, play_game
from ..referee.blocking import settle as settle_bots
from ..referee.core import TimeControl
from .seeds import deal_seed, run_secret

SCENARIOS: list[tuple[str, Rules, int]] = [
    *[(name, r, 2) for name, r in PRESETS.items()],
    ("classic, 4 seats", PRESETS["classic"], 4),
    ("shithead + stacking", rules_from("shithead", {"stacking": True}), 2),
    ("shithead + harsh face-up", rules_from("shithead", {"harsh_face_up": True}), 3),
    ("shithead + jokers giving the pile", rules_from("shithead", {"jokers": 2, "joker": "give_pile", "max_players": 6}), 3),
    ("skip8 at six", PRESETS["skip8"], 6),
]
STDERR_LINES = 8
STDERR_CHARS = 300  # of each line kept in a report: a server keeps every upload's check report


def _stderr_tail(lines: list[str]) -> list[str]:
    """The last :data:`STDERR_LINES` lines, each cut to :data:`STDERR_CHARS` (a bot's one line of
    64 kB made a failed upload's stored report 65.7 kB; 4.1 kB cut)."""
    return [line if len(line) <= STDERR_CHARS else line[:STDERR_CHARS] + "…" for line in lines[-STDERR_LINES:]]
FLUSH_HINT = ("not one complete line arrived: if the bot did print its answer, its output was probably "
              "buffered. Flush stdout after every line (Python: print(..., flush=True) or run python3 -u; "
              "C/C++: fflush(stdout) or setvbuf(stdout, NULL, _IOLBF, 0); Java: System.out.flush(); "
              "Rust: std::io::stdout().flush(); Go: use fmt.Println on os.Stdout, or Flush a bufio.Writer; "
              "Node: process.stdout.write is fine) and end every line with a newline")
STDOUT_HINT = ("stdout is for protocol lines only: write logs and debugging output to stderr "
               "(Python: print(..., file=sys.stderr))")


def scenarios_for(rules: Rules | None) -> list[tuple[str, Rules, int]]:
    """Every preset and rare decision, or the one rule set a bot is meant for at 2 and more seats."""
    if rules is None:
        return SCENARIOS
    label = rule_label(rules)
    out = [(f"{label}, 2 seats", rules, 2)]
    if rules.max_players >= 4:
        out.append((f"{label}, 4 seats", rules, 4))
    elif rules.max_players >= 3:
        out.append((f"{label}, 3 seats", rules, 3))
    return out


def interpreter_note(spec: BotSpec, launcher: Launcher) -> str | None:
    """Which program runs ``python3`` in the bot's command, and why, in words."""
    if not spec.command or spec.command[0] not in ("python3", "python"):
        return None
    if spec.python:
        return f"{spec.command[0]} runs {spec.python} (set by bot.toml)"
    found = python_for(launcher.containment is not Containment.TRUSTED)
    if found is None:
        return f"{spec.command[0]}: no Python 3.11+ that an isolated bot may run"
    path = found[0]
    try:
        version = process_registry().run([path, "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
                                         text=True, timeout=10, env=HOST_ENV).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        version = "?"
    if path == sys.executable:
        why = "the arena's own interpreter, with the same packages"
    else:
        why = (f"a contained bot sees only the system's Python, not the arena's {sys.executable} "
               f"and its packages. Set interpreter or venv in bot.toml ({BOT_TOML_DOC})")
    return f"{spec.command[0]} runs {path} (Python {version}): {why}"


def clock_words(move_ms: int, bank_ms: int) -> str:
    bank = f"{bank_ms / 1000:g} s" if bank_ms >= 1000 else f"{bank_ms} ms"
    return f"{move_ms:,} ms per move + {bank} bank"


def _place_words(result: dict[str, Any], seat: int, seats: int) -> str:
    forfeits = result.get("forfeits", {})
    if str(seat) in forfeits:
        return f"forfeit ({forfeits[str(seat)]})"
    place = 1
    for group in result["order"]:
        if seat in group:
            if result.get("draw"):
                return "draw"
            if len(group) > 1:
                return f"tied {place}-{place + len(group) - 1} of {seats}"
            return "won" if place == 1 else f"{place} of {seats}"
        place += len(group)
    return "?"


async def run_check(spec: BotSpec, games: int = 2, move_ms: int = 1000, opponent: str = "random",
                    **kw: Any) -> dict[str, Any]:
    """:func:`check_bot` for a caller inside an event loop (ladder placement, web submit): the
    whole check on the blocking shell in one worker thread, so the loop serves others meanwhile."""
    return await trio.to_thread.run_sync(partial(check_bot, spec, games, move_ms, opponent, **kw))


def check_bot(spec: BotSpec, games: int = 2, move_ms: int = 1000, opponent: str = "random", *,
              bank_ms: int | None = None, rules: Rules | None = None, limits: Limits | None = None,
              all_faults: bool = False, progress: Callable[[str], None] | None = None,
              launcher: Launcher | None = None) -> dict[str, Any]:
    """Run the check on the blocking shell, no event loop; returns a JSON-able report
    (``print_report`` shows it). A folder the bot may not have (:mod:`arena.bots.folder`) is
    refused first, as a ``FolderError`` naming the file. The check's bots are this thread's: each
    is finished before this returns."""
    spec.files_hash()  # the run's one reading of the folder, which every copy is checked against
    clock = TimeControl(move_ms=move_ms, bank_ms=move_ms * 5 if bank_ms is None else bank_ms)
    launcher = launcher or Launcher(limits or Limits())
    say = progress or (lambda text: None)
    scenarios = scenarios_for(rules)
    secret = run_secret()  # this run's deals: no bot can rebuild them, no later run repeats them
    total = len(scenarios) * games
    report: dict[str, Any] = {
        "bot": spec.label, "interpreter": interpreter_note(spec, launcher), "clock": asdict(clock),
        "clock_words": clock_words(clock.move_ms, clock.bank_ms), "reference": BOT_TOML_DOC,
        "scenarios": [], "faults": {}, "decisions": {}, "planned": total, "played": 0, "stopped": None,
        "requests": 0, "ms": {}, "slow": None, "limits": {}}
    decisions: Counter = Counter()
    times: list[float] = []
    if spec.build is not None:
        say(f"building {spec.label}: {' '.join(spec.build)}")
        try:
            launcher.build_now(spec)
        except BuildError as e:
            head, *tail = str(e).splitlines()
            report["faults"]["build"] = {"count": 1, "first": {"where": "the build", "message": head[:300],
                                                               "stderr": _stderr_tail(tail)}}
            report["stopped"] = "the build failed: nothing to check until it builds"
            report["ok"] = False
            return report
    opp = load_bot(opponent)
    launch = BlockingLaunch(launcher)
    me = BlockingPlayer(spec, launch, clock)
    others: list[BlockingPlayer] = []
    try:
        for number, (label, rule_set, seats) in enumerate(scenarios):
            for g in range(games):
                my_seat = g % seats
                table: list[Any] = []
                for s in range(seats):
                    if s == my_seat:
                        table.append(me)
                    else:
                        while len(others) < s + 1:
                            others.append(BlockingPlayer(opp, launch, clock))
                        table.append(others[s])
                rec = play_game(table, rule_set, deal_seed(secret, 0, number, g),
                                     game_id=f"check-{label}-{g}", clock=clock, max_turns=600)
                report["played"] += 1
                mine = [st for st in rec.steps if st["seat"] == my_seat and "request" in st]
                answered = [st for st in mine if "fault" not in st]
                for st in answered:
                    decisions[st["act"]["kind"]] += 1
                    times.append(st["ms"])
                report["requests"] += len(mine)
                _note_info(report, answered, label, g)
                _note_slow(report, answered, clock)
                for f in rec.faults:
                    if f["seat"] == my_seat:
                        _add_fault(report, f, rec, label, g, my_seat, mine, me.last_line, clock)
                assert rec.result is not None
                report["scenarios"].append({"scenario": label, "game": g + 1, "seat": my_seat, "seats": seats,
                                            "decisions": len(answered),
                                            "opponents": [opp.label] * (seats - 1),
                                            "result": _place_words(rec.result, my_seat, seats)})
                status = "ok" if not any(f["seat"] == my_seat for f in rec.faults) else \
                    ", ".join(sorted({f["reason"] for f in rec.faults if f["seat"] == my_seat}))
                say(f"[{report['played']}/{total}] {label}, game {g + 1}: {status}, {len(answered)} decisions")
                repeated = [k for k, v in report["faults"].items() if v["count"] >= 2]
                if repeated and not all_faults:
                    report["stopped"] = f"stopped after a repeated {repeated[0]} fault"
                    report["stopped_at_repeat"] = True  # the command line adds how to play on (--all)
                    break
            if report["stopped"]:
                break
        usage = getattr(me.conn, "resource_usage", None)
        if callable(usage):
            u = usage()
            report["resources"] = {"peak_memory_mb": None if u.peak_memory_bytes is None
                                   else round(u.peak_memory_bytes / 2**20, 1),
                                   "cpu_seconds": None if u.cpu_seconds is None else round(u.cpu_seconds, 2),
                                   "source": u.source}
    finally:
        me.shutdown()
        for p in others:
            p.shutdown()
        settle_bots()
        launcher.release_builds()  # its bots are finished: the build's copy goes with them
    report["decisions"] = dict(decisions)
    if times:
        ordered = sorted(times)
        report["ms"] = {"mean": round(sum(times) / len(times), 1),
                        "p95": round(ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)], 1),
                        "max": round(ordered[-1], 1)}
    report["limits"] = asdict(launcher.limits)
    report["containment"] = launcher.describe_now()
    report["ok"] = not report["faults"] and report["requests"] > 0
    return report


def _note_slow(report: dict[str, Any], answered: list[dict[str, Any]], clock: TimeControl) -> None:
    """Moves over move_ms draw on the bank: remember the worst game's story."""
    slow = [st["ms"] for st in answered if st["ms"] > clock.move_ms]
    if not slow:
        return
    drawn, used_up_after = 0.0, None
    for i, ms in enumerate(slow, 1):
        drawn += ms - clock.move_ms
        if drawn >= clock.bank_ms and used_up_after is None:
            used_up_after = i
    prev = report["slow"]
    if prev is None or len(slow) > prev["moves"]:
        report["slow"] = {"moves": len(slow), "slowest_ms": round(max(slow)), "bank_used_up_after": used_up_after}


def _note_info(report: dict[str, Any], answered: list[dict[str, Any]], label: str, g: int) -> None:
    """Count the decisions that sent an info, and the referee's warnings about it (never a fault)."""
    info = report.setdefault("info", {"sent": 0, "warnings": 0, "first_warning": None})
    for st in answered:
        info["sent"] += "info" in st or "info_warning" in st
        if "info_warning" in st:
            info["warnings"] += 1
            if info["first_warning"] is None:
                info["first_warning"] = f"{label}, game {g + 1}, request {st.get('request')}: {st['info_warning']}"


def _add_fault(report: dict[str, Any], f: dict[str, Any], rec: Any, label: str, g: int, seat: int,
               mine: list[dict[str, Any]], last_line: str | None, clock: TimeControl) -> None:
    kind = f["reason"]
    entry = report["faults"].get(kind)
    if entry is not None:
        entry["count"] += 1
        return
    step = next((st for st in mine if "fault" in st), None)
    decision = None if step is None else 1 + mine.index(step)
    stderr = (step or {}).get("stderr") or rec.stderr[seat] or []
    first: dict[str, Any] = {"where": f"{label}, game {g + 1}, "
                                      + (f"decision {decision}" if decision else "at start"),
                             "message": f["message"], "stderr": _stderr_tail(stderr)}
    if kind in ("bad_json", "schema", "handshake") and last_line:  # "" is end of output: nothing to quote
        first["line"] = last_line[:120] + ("..." if len(last_line) > 120 else "")
        first["hint"] = STDOUT_HINT
    if kind == "timeout":
        slow = [st["ms"] for st in mine if "fault" not in st and st["ms"] > clock.move_ms]
        left = (step or {}).get("ms")
        if left is not None:
            first["message"] = f"no answer within the {left:,.0f} ms it had left"
        answered = [st for st in mine if "fault" not in st]
        first["hint"] = (f"{clock_words(clock.move_ms, clock.bank_ms)}; bank used up after {len(slow)} slow "
                         f"move(s), slowest {max(slow):,.0f} ms" if slow else
                         FLUSH_HINT if not answered else
                         f"{clock_words(clock.move_ms, clock.bank_ms)}; one move took longer than all of it")
    if any("ModuleNotFoundError" in line or "ImportError" in line for line in stderr):
        first["hint"] = ("an import failed: check which interpreter runs the bot (the header says) "
                         f"and name the one with your packages with interpreter or venv in bot.toml ({BOT_TOML_DOC})")
    report["faults"][kind] = {"count": 1, "first": first}


def _grouped(faults: Any) -> dict[str, Any]:
    """Faults by kind; a list of single faults (an older report, a test's fake) is grouped here."""
    if isinstance(faults, dict):
        return faults
    out: dict[str, Any] = {}
    for f in faults or []:
        entry = out.setdefault(f["reason"], {"count": 0, "first": {
            "where": f"{f.get('scenario', '?')}, game {f.get('game', '?')}", "message": f.get("message", ""),
            "stderr": f.get("stderr", [])}})
        entry["count"] += 1
    return out


def fault_total(faults: Any) -> int:
    """How many faults a report holds, whichever form its ``faults`` take (see :func:`_grouped`)."""
    return sum(entry["count"] for entry in _grouped(faults).values())


def _against(opponents: list[str]) -> str:
    """``random@1.0``, or ``3 × random@1.0`` for three seats of one bot; ``-`` in an older report."""
    counts = Counter(opponents)
    return ", ".join(label if n == 1 else f"{n} × {label}" for label, n in counts.items()) or "-"


def print_report(report: dict[str, Any], console: Console) -> None:
    report = {"decisions": {}, "scenarios": [], "played": len(report.get("scenarios", [])),
              "planned": len(report.get("scenarios", [])), "reference": BOT_TOML_DOC, **report}
    report["faults"] = _grouped(report.get("faults"))
    report["scenarios"] = [{"decisions": s.get("requests", 0), **s,
                            "result": s["result"] if isinstance(s.get("result"), str) else "-"}
                           for s in report["scenarios"]]
    p = console.print
    p(f"[bold]arena check {escape(report['bot'])}[/]  clock: {escape(report.get('clock_words', ''))}")
    if report.get("interpreter"):
        p(f"  {escape(report['interpreter'])}")
    table = Table(title_justify="left", show_edge=False)
    for col in ("scenario", "game", "seat", "decisions", "result", "against"):
        table.add_column(col, justify="right" if col in ("game", "seat", "decisions") else "left")
    for s in report["scenarios"]:
        table.add_row(escape(s["scenario"]), str(s["game"]), str(s["seat"]), str(s["decisions"]), escape(s["result"]),
                      escape(_against(s.get("opponents") or [])))
    if report["scenarios"]:
        p(table)
    p(f"containment: {escape(str(report.get('containment', '?')))}")
    if report["decisions"]:
        kinds = Table(show_edge=False, title_justify="left")
        kinds.add_column("decision")
        kinds.add_column("answered", justify="right")
        for kind, n in sorted(report["decisions"].items()):
            kinds.add_row(kind, f"{n:,}")
        p(kinds)
    ms = report.get("ms") or {}
    if ms:
        p(f"time per decision: mean {ms['mean']:,.1f} ms, p95 {ms['p95']:,.1f} ms, slowest {ms['max']:,.0f} ms "
          f"({escape(report.get('clock_words', ''))})")
    info = report.get("info") or {}
    if info.get("sent"):
        line = f"info: sent with {info['sent']:,} decision(s)"
        if info["warnings"]:
            line = (f"[yellow]info:[/] {info['warnings']:,} of {info['sent']:,} had a problem (dropped or cut; "
                    f"never a fault), first at {escape(info['first_warning'])}")
        p(line)
    slow = report.get("slow")
    if slow and "timeout" not in report["faults"]:
        text = f"{slow['moves']} slow move(s) in one game drew on the bank, slowest {slow['slowest_ms']:,} ms"
        if slow["bank_used_up_after"]:
            text = (f"{escape(report['clock_words'])}; bank used up after {slow['bank_used_up_after']} slow moves, "
                    f"slowest {slow['slowest_ms']:,} ms")
        p(f"[yellow]clock:[/] {text}")
    if "resources" in report:
        r, lim = report["resources"], report["limits"]
        mem = "?" if r["peak_memory_mb"] is None else f"{r['peak_memory_mb']:,} MB"
        cpu = "?" if r["cpu_seconds"] is None else f"{r['cpu_seconds']:.2f} s"
        p(f"resources ({escape(str(r['source']))}): peak memory {mem} of {lim.get('memory_mb')} MB; CPU {cpu}")
    for kind, entry in report["faults"].items():
        first = entry["first"]
        p(f"[red]{escape(kind)} ×{entry['count']}[/], first at {escape(first['where'])}: {escape(first['message'])}")
        if first.get("line") is not None:
            p(f"  the bot wrote: {escape(repr(first['line']))}")
        if first.get("hint"):
            p(f"  hint: {escape(first['hint'])}")
        if first.get("stderr"):
            p("  last lines on stderr:")
            for line in first["stderr"]:
                p(f"    {escape(line)}")
    if report.get("stopped"):
        more = " (pass --all to play every scenario anyway)" if report.get("stopped_at_repeat") else ""
        p(f"[yellow]{escape(report['stopped'] + more)}[/]")
    if report["faults"]:
        p(f"[red]{fault_total(report['faults'])} fault(s)[/] in {report['played']} of "
          f"{report['planned']} games; bot.toml reference: {escape(report['reference'])}")
    elif report["requests"] == 0:
        p("[red]the bot was never asked a question[/]")
    else:
        p(f"[green]no faults[/] in {report['played']} games")
