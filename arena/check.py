"""``arena check``: a conformance run that puts a bot through every kind of request.

The bot plays each preset, plus option sets that produce the rarer decisions
(stacking at setup, the harsh face-up pick-up, a joker's target), against the
random reference bot. Any fault is reported with its reason; timing per
decision is measured by the referee as in a tournament.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict
from typing import Any

from rich.console import Console
from rich.table import Table

from .engine import PRESETS, Rules, rules_from
from .launch import Launcher
from .manifest import BotSpec, load_bot
from .referee import BotPlayer, TimeControl, run_game

SCENARIOS: list[tuple[str, Rules, int]] = [
    *[(name, r, 2) for name, r in PRESETS.items()],
    ("classic, 4 seats", PRESETS["classic"], 4),
    ("shithead + stacking", rules_from("shithead", {"stacking": True}), 2),
    ("shithead + harsh face-up", rules_from("shithead", {"harsh_face_up": True}), 3),
    ("shithead + jokers giving the pile", rules_from("shithead", {"jokers": 2, "joker": "give_pile", "max_players": 6}), 3),
    ("skip8 at six", PRESETS["skip8"], 6),
]


async def run_check(spec: BotSpec, games: int = 2, move_ms: int = 1000,
                    opponent: str = "random", launcher: Launcher | None = None) -> dict[str, Any]:
    clock = TimeControl(move_ms=move_ms, bank_ms=move_ms * 5)
    launcher = launcher or Launcher()
    opp = load_bot(opponent)
    report: dict[str, Any] = {"bot": spec.label, "scenarios": [], "faults": [], "decisions": Counter(),
                              "max_ms": 0.0, "total_ms": 0.0, "requests": 0, "starts": 0}
    me = BotPlayer(spec, launcher, clock)
    others: list[BotPlayer] = []
    try:
        for label, rules, seats in SCENARIOS:
            for g in range(games):
                my_seat = g % seats
                table: list[Any] = []
                for s in range(seats):
                    if s == my_seat:
                        table.append(me)
                    else:
                        while len(others) < s + 1:
                            others.append(BotPlayer(opp, launcher, clock))
                        table.append(others[s])
                rec = await run_game(table, rules, 1000 + g, game_id=f"check-{label}-{g}", clock=clock,
                                     max_turns=600)
                mine = [st for st in rec.steps if st["seat"] == my_seat and "request" in st]
                for st in mine:
                    report["decisions"][st.get("act", {}).get("kind", st.get("fault", "?"))] += 1
                    report["max_ms"] = max(report["max_ms"], st["ms"])
                    report["total_ms"] += st["ms"]
                report["requests"] += len(mine)
                for f in rec.faults:
                    if f["seat"] == my_seat:
                        report["faults"].append({"scenario": label, "game": g, **f})
                report["scenarios"].append({"scenario": label, "game": g, "seat": my_seat,
                                            "result": rec.result, "requests": len(mine)})
        report["starts"] = me.starts
        usage = getattr(me.conn, "resource_usage", None)
        if callable(usage):
            u = usage()
            report["resources"] = {"peak_memory_mb": None if u.peak_memory_bytes is None
                                   else round(u.peak_memory_bytes / 2**20, 1),
                                   "cpu_seconds": u.cpu_seconds, "source": u.source,
                                   "cpu_ms_per_decision": None if u.cpu_seconds is None or not report["requests"]
                                   else round(1000 * u.cpu_seconds / report["requests"], 3)}
    finally:
        await me.shutdown()
        for p in others:
            await p.shutdown()
    report["decisions"] = dict(report["decisions"])
    report["mean_ms"] = report["total_ms"] / report["requests"] if report["requests"] else 0.0
    report["limits"] = {"move_ms": clock.move_ms, "bank_ms": clock.bank_ms, **asdict(launcher.limits)}
    report["containment"] = await launcher.describe()
    report["ok"] = not report["faults"] and report["requests"] > 0
    return report


def print_report(report: dict[str, Any], console: Console) -> None:
    table = Table(title=f"arena check {report['bot']}", title_justify="left")
    for col in ("scenario", "game", "seat", "requests", "result"):
        table.add_column(col)
    for s in report["scenarios"]:
        res = s["result"] or {}
        table.add_row(s["scenario"], str(s["game"]), str(s["seat"]), str(s["requests"]),
                      f"{res.get('reason')} {res.get('order')}")
    console.print(table)
    console.print(f"containment: {report.get('containment', '?')}", markup=False)
    console.print(f"decisions answered: {report['decisions']}")
    console.print(f"time per decision: mean {report['mean_ms']:.1f} ms, max {report['max_ms']:.1f} ms "
                  f"(limit {report['limits'].get('move_ms', '?')} ms + bank)")
    if "resources" in report:
        r, lim = report["resources"], report["limits"]
        console.print(f"resources ({r['source']}): peak memory {r['peak_memory_mb']} MB of {lim['memory_mb']} MB; "
                      f"CPU {r['cpu_seconds']} s in all ({r['cpu_ms_per_decision']} ms per decision), "
                      + (f"limit {lim['cpu_seconds']} s per game" if lim["cpu_seconds"] else "per-game limit from the clock"))
    if report["faults"]:
        console.print(f"[red]{len(report['faults'])} fault(s):[/]")
        for f in report["faults"]:
            console.print(f"  {f['scenario']} game {f['game']}: {f['reason']}: {f['message']}")
    else:
        console.print("[green]no faults[/]")
