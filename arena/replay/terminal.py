"""The replay in a terminal, drawn with rich.

On a TTY it is interactive: line commands step through the game (``n``ext,
``p``revious, ``g N`` to go to turn N, ``b`` next burn, ``u`` next pick-up,
``q``uit). Piped, it prints the turns one after the other. ``--as SEAT``
shows each request that seat was sent, rebuilt exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from .simulate import Decision, Replay
from .view import Names, describe_action, describe_event, thought_text

SUITS = {"C": "♣", "D": "♦", "H": "♥", "S": "♠"}
HELP = ("[n]ext (Enter)  [p]revious  [g N] go to turn N  [b] next burn  [u] next pick-up  "
        "[f] next forfeit  [s]tart  [e]nd  [q]uit")


def card_text(c: str | None, *, down: bool = False) -> Text:
    """A card as ``7♥`` in red or ``10♠``; a joker as ``JKR``; a played face-down place as ``·``."""
    if c is None:
        return Text("·", style="dim")
    if c[0] == "X":
        t = Text("JKR", style="bold red" if c[1] == "R" else "bold")
    else:
        rank = "10" if c[0] == "T" else c[0]
        t = Text(rank + SUITS.get(c[1], c[1]), style="red" if c[1] in "DH" else "")
    if down:
        t.stylize("dim italic")
    return t


def cards_text(cards: list[str | None], *, down: bool = False, empty: str = "-") -> Text:
    if not cards:
        return Text(empty, style="dim")
    return Text(" ").join(card_text(c, down=down) for c in cards)


def pile_text(s: dict[str, Any], limit: int = 14) -> Text:
    pile, top = s["pile"], s["top"]
    out = Text()
    start = max(0, len(pile) - limit)
    if start:
        out.append(f"({start} more) ", style="dim")
    for i in range(start, len(pile)):
        t = card_text(pile[i])
        if i == top:
            t = Text("[") + t + Text("]")
            t.stylize("bold")
        elif top is None or i > top:
            t.stylize("dim")  # see-through cards above the card that counts
        out.append_text(t)
        out.append(" ")
    if not pile:
        out.append("(empty)", style="dim")
    return out


def _beat(s: dict[str, Any]) -> str:
    if not s["pile"]:
        return "anything (empty pile)"
    if s["beat"] is None:
        return "anything (a 2 or only see-through cards)"
    text = f"{s['beat']}"
    if s["top"] is not None and s["top"] < len(s["pile"]) - 1:
        text += f" (the {s['pile'][s['top']]} under {len(s['pile']) - 1 - s['top']} see-through)"
    if s["descending"]:
        text += ", descending: at most that"
    if s["need"] > 1:
        text += f", at least {s['need']} cards"
    return text


def seats_table(data: dict[str, Any], s: dict[str, Any]) -> Table:
    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
    for col in ("", "seat", "bot", "hand", "face-up", "face-down", ""):
        table.add_column(col)
    for i, seat in enumerate(s["seats"]):
        mover = not s["over"] and s["to_move"] == i
        status = ""
        if seat["forfeit"]:
            status = f"forfeited: {seat['forfeit']}"
        elif seat["place"] is not None:
            status = f"out: place {seat['place']}"
        elif seat["setup"]:
            status = f"setup: {seat['setup'].replace('_', '-')}"
        hand = cards_text(seat["hand"])
        if seat["known"]:
            hand.append("  (all know ", style="dim")
            hand.append_text(cards_text(seat["known"]))
            hand.append(")", style="dim")
        up = Text(" | ").join(cards_text(st) for st in seat["up"]) if seat["up"] else Text("-", style="dim")
        table.add_row("▶" if mover else "", str(i), escape(data["labels"][i]), hand, up,
                      cards_text(seat["down"], down=True), status)
    return table


def render_frame(data: dict[str, Any], k: int) -> RenderableType:
    """Turn ``k`` (0: the deal): what was done, its effects, and the table after it."""
    frames = data["frames"]
    f = frames[k]
    s, info = f["s"], f["i"]
    parts: list[RenderableType] = []
    last = len(frames) - 1
    if info["kind"] == "deal":
        head = f"Turn 0/{last} · the deal · {data['rules']} · seed {data['seed']}"
    else:
        head = f"Turn {k}/{last} · {info['phase']} · {info['name']} (seat {info['seat']})"
    parts.append(Text(head, style="bold reverse"))
    if info["kind"] != "deal":
        line = Text()
        style = "bold red" if info["kind"] == "fault" else "bold"
        line.append(f"{info['name']}: ", style="bold")
        line.append(info["text"], style=style)
        extra = []
        if info.get("ms") is not None and info["kind"] != "forced":
            extra.append(f"{info['ms']:.3f} ms")
        if info["kind"] == "action" and info.get("choice") is not None:
            extra.append(f"action {info['choice']} of {info['of']}")
        if extra:
            line.append(f"   ({', '.join(extra)})", style="dim")
        parts.append(line)
        parts += thought_lines(info.get("thought"), info.get("thought_warning"))
    for text, _owner, _public in info["events"]:
        style = "bold yellow" if text.startswith("burn!") else ("red" if "forfeit" in text else "")
        parts.append(Text("  " + text, style=style))
    for err_line in info.get("stderr", []):
        parts.append(Text(f"  stderr| {err_line}", style="dim cyan"))
    for m in info.get("mismatch", []):
        parts.append(Text(f"  MISMATCH {m}", style="bold red"))
    pile = Text("Pile: ")
    pile.append_text(pile_text(s))
    pile.append(f"   to beat: {_beat(s)}")
    parts.append(pile)
    direction = "ascending seats" if s["direction"] > 0 else "descending seats"
    nxt = "game over" if s["over"] else f"to move: {data['labels'][s['to_move']]} (seat {s['to_move']})"
    parts.append(Text(f"Stock {s['stock']} · burned {s['burned']} · set aside {s['set_aside']} · "
                      f"{direction} · {nxt}", style="dim"))
    parts.append(seats_table(data, s))
    if s["over"]:
        parts.append(Text(f"Result: {data['result_text']}", style="bold green"))
    return Group(*parts)


def thought_lines(thought: dict[str, Any] | None, warning: str | None) -> list[Text]:
    """The bot's own ``info`` for a decision, and the referee's warning about it."""
    out = []
    if thought:
        out.append(Text(f"  thinking: {thought_text(thought)}", style="magenta"))
    if warning:
        out.append(Text(f"  info warning: {warning}", style="yellow"))
    return out


def render_decision(data: dict[str, Any], d: Decision, number: int, total: int) -> RenderableType:
    """One rebuilt request as the seat saw it, with the actions offered and the one it answered."""
    req = d.request
    v = req["view"]
    who = Names(data["players"])
    parts: list[RenderableType] = []
    parts.append(Text(f"Decision {number}/{total} of {data['labels'][v['seat']]} (seat {v['seat']}) · "
                      f"turn {d.step} · request {req['id']} · {req['decision']} · clock: move "
                      f"{req['clock']['move_ms']} ms, bank {req['clock']['bank_ms']} ms", style="bold reverse"))
    parts.append(Text("Events since its last request:", style="bold"))
    for e in req["events"]:
        parts.append(Text("  " + describe_event(e, who)[0]))
    if not req["events"]:
        parts.append(Text("  (none)", style="dim"))
    pile = Text("Pile: ")
    pile.append_text(cards_text(v["pile"][-14:], empty="(empty)"))
    pile.append(f"   to beat: {v['pile_top'] or 'anything'}   stock {v['stock']} · burned {len(v['burned'])}")
    parts.append(pile)
    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
    for col in ("seat", "bot", "hand", "face-up", "face-down", ""):
        table.add_column(col)
    for p in v["players"]:
        i = p["seat"]
        if i == v["seat"]:
            hand = cards_text(v["hand"])
        else:
            hand = Text(f"{p['hand_count']} cards")
            if p["known_hand"]:
                hand.append(" (known: ")
                hand.append_text(cards_text(p["known_hand"]))
                hand.append(")")
        up = (Text("(hidden during setup)", style="dim") if p["face_up"] is None
              else Text(" | ").join(cards_text(st) for st in p["face_up"]) if p["face_up"] else Text("-", style="dim"))
        down = Text(" ".join("▮" if x else "·" for x in p["face_down"]) or "-")
        status = f"forfeited: {p['forfeit']}" if p["forfeit"] else (f"out: place {p['place']}" if p["place"] else "")
        table.add_row(str(i), escape(data["labels"][i]) + (" (you)" if i == v["seat"] else ""), hand, up, down, status)
    parts.append(table)
    parts.append(Text("Actions offered:", style="bold"))
    for a in req["actions"]:
        chosen = d.choice == a["id"]
        body = {k: val for k, val in a.items() if k != "id"}
        t = Text(f" {'▶' if chosen else ' '} [{a['id']}] {describe_action(body, who)}", style="bold" if chosen else "")
        parts.append(t)
    if d.fault:
        parts.append(Text(f"  no valid answer: forfeit ({d.fault}) after {d.ms} ms", style="bold red"))
    else:
        parts.append(Text(f"  answered {d.choice} in {d.ms} ms", style="dim"))
        parts += thought_lines(d.info, d.info_warning)
    for err_line in d.stderr:
        parts.append(Text(f"  stderr| {err_line}", style="dim cyan"))
    return Group(*parts)


def find(data: dict[str, Any], k: int, flag: str) -> int | None:
    """The next turn after ``k`` whose effects include ``flag`` (burn, pickup, forfeit ...)."""
    for j in range(k + 1, len(data["frames"])):
        if flag in data["frames"][j]["i"]["flags"]:
            return j
    return None


def navigate(command: str, k: int, data: dict[str, Any], last: int | None = None) -> tuple[int | None, str]:
    """The turn a command leads to from ``k`` (None: quit), and a message for the user."""
    last = len(data["frames"]) - 1 if last is None else last
    c = command.strip().lower()
    if c in ("", "n", "next", "j"):
        return (min(k + 1, last), "" if k < last else "already at the last turn")
    if c in ("p", "prev", "previous", "k"):
        return (max(k - 1, 0), "" if k > 0 else "already at the deal")
    if c in ("q", "quit", "exit"):
        return None, ""
    if c in ("s", "start", "home"):
        return 0, ""
    if c in ("e", "end"):
        return last, ""
    if c in ("b", "u", "f"):
        flag = {"b": "burn", "u": "pickup", "f": "forfeit"}[c]
        j = find(data, k, flag)
        word = {"burn": "burn", "pickup": "pick-up", "forfeit": "forfeit"}[flag]
        return (k, f"no {word} after turn {k}") if j is None else (j, "")
    parts = c.split()
    if parts and parts[0] in ("g", "go", "goto") and len(parts) == 2 and parts[1].lstrip("-").isdigit():
        c = parts[1]
    if c.lstrip("-").isdigit():
        n = int(c)
        if 0 <= n <= last:
            return n, ""
        return k, f"turns run from 0 to {last}"
    return k, f"unknown command {command!r}: {HELP}"


def run_plain(console: Console, data: dict[str, Any], start: int = 0, end: int | None = None) -> None:
    last = len(data["frames"]) - 1
    end = last if end is None else min(end, last)
    for k in range(max(0, start), end + 1):
        console.print(render_frame(data, k))
        console.print()


def run_interactive(console: Console, data: dict[str, Any], start: int = 0,
                    ask: Callable[[str], str] = input) -> None:
    k = max(0, min(start, len(data["frames"]) - 1))
    message = ""
    while True:
        console.clear()
        console.print(render_frame(data, k))
        if message:
            console.print(Text(message, style="yellow"))
        console.print(Text(HELP, style="dim"))
        try:
            command = ask("> ")
        except (EOFError, KeyboardInterrupt):
            return
        nk, message = navigate(command, k, data)
        if nk is None:
            return
        k = nk


def run_seat_plain(console: Console, data: dict[str, Any], decisions: list[Decision]) -> None:
    for i, d in enumerate(decisions, 1):
        console.print(render_decision(data, d, i, len(decisions)))
        console.print()


def run_seat_interactive(console: Console, data: dict[str, Any], decisions: list[Decision],
                         ask: Callable[[str], str] = input) -> None:
    """Step through one seat's decisions; ``g N`` goes to decision N (1-based)."""
    if not decisions:
        console.print("this seat was never asked: every move it made was forced")
        return
    k, message = 0, ""
    fake = {"frames": [{"i": {"flags": []}}] * len(decisions)}
    while True:
        console.clear()
        console.print(render_decision(data, decisions[k], k + 1, len(decisions)))
        if message:
            console.print(Text(message, style="yellow"))
        console.print(Text("[n]ext  [p]revious  [g N] decision N  [s]tart  [e]nd  [q]uit", style="dim"))
        try:
            command = ask("> ")
        except (EOFError, KeyboardInterrupt):
            return
        c = command.strip().lower().split()
        if c and c[0] in ("g", "go", "goto") and len(c) == 2 and c[1].isdigit():
            command = str(int(c[1]) - 1)
        elif command.strip().isdigit():
            command = str(int(command) - 1)
        nk, message = navigate(command, k, fake)
        if nk is None:
            return
        k = nk


def print_verification(console: Console, replay: Replay, *, limit: int | None = 20) -> None:
    """The verdict of the re-simulation: ok, or each mismatch (up to ``limit``)."""
    if replay.ok:
        console.print(f"[green]ok[/] {escape(replay.game_id)}: {replay.steps} steps re-simulated; "
                      "actions, events and result match the log")
        return
    console.print(f"[bold red]MISMATCH[/] {escape(replay.game_id)}: {len(replay.mismatches)} difference(s) "
                  "between the re-simulation and the log" + ("" if replay.complete else
                                                             "; the replay stops where the log cannot be followed"))
    shown = replay.mismatches if limit is None else replay.mismatches[:limit]
    for m in shown:
        console.print("  " + escape(str(m)))
    if len(shown) < len(replay.mismatches):
        console.print(f"  ... and {len(replay.mismatches) - len(shown)} more (--verify lists them all)")
