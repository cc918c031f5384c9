"""``arena play``: one game in the terminal, with bots and people at the table."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from ..bots.launch import Launcher
from ..bots.manifest import BotSpec
from ..engine import Rules, State
from ..referee import TimeControl
from ..referee.blocking import BlockingPlayer, PersonSeat, blocking_launch, play_game, settle
from ..replay.view import Names, _cards, _stacks, describe_action, describe_event, pretty
from ..tournament.seeds import deal_seed, load_secret
from ..tournament.store import Store


def ask(prompt: str) -> str:
    """Read one line from the person at the terminal (tests replace this)."""
    return input(prompt)


SETUP_HELP = ("Setup: choose which cards lie face up in front of you. You play them once your hand and "
              "the stock are empty, then your face-down cards blind. Strong cards (2s, 10s, aces) face up "
              "are a common choice; the rest stay in your hand.")


def _face_up(stacks: list[list[str]] | None) -> str:
    return "(not chosen yet)" if stacks is None else _stacks(stacks)


class HumanPlayer(PersonSeat):
    """A person at the terminal. Everything shown comes from the messages this seat is sent, exactly
    what a bot in the seat would read: its view, the events since its last turn, its actions. The
    game runs in the main thread: Ctrl-C interrupts ``input()`` or a bot's wait alike."""

    def __init__(self, name: str, console: Console):
        self.name = name
        self.console = console
        self.who = Names([name])
        self.explained_setup = False

    def begin(self, message: dict[str, Any]) -> None:
        self.who = Names(list(message.get("names") or []))
        self.console.print(f"[bold]You are seat {message['seat']}[/] ({escape(self.name)}) of "
                           f"{message['players']}: " + escape(", ".join(self.who.labels)))

    def _events(self, events: list[dict[str, Any]]) -> None:
        for e in events:
            if e.get("kind") != "game_over":
                self.console.print(f"  [dim]{escape(describe_event(e, self.who)[0])}[/]")

    def choose(self, message: dict[str, Any], timeout: float) -> int:
        v = message["view"]
        c = self.console
        self._events(message.get("events", []))
        c.rule(f"your turn ({escape(message['decision'])})")
        if message["decision"] == "setup" and not self.explained_setup:
            c.print(escape(SETUP_HELP))
            self.explained_setup = True
        top = pretty(v["pile_top"]) if v.get("pile_top") else "anything"
        c.print(escape(f"pile: {_cards(v['pile'][-6:]) or '(empty)'}   to beat: {top}   stock: {v['stock']}   "
                       f"burned: {len(v['burned'])}"))
        for pl in v["players"]:
            if pl["seat"] != v["seat"]:
                known = f", known in hand: {_cards(pl['known_hand'])}" if pl.get("known_hand") else ""
                c.print(escape(f"  {self.who(pl['seat'])}: {pl['hand_count']} in hand, face-up {_face_up(pl['face_up'])}, "
                               f"{sum(pl['face_down'])} face-down{known}"))
        c.print("[bold]you:[/] " + escape(f"hand {_cards(v['hand']) or '(empty)'}   face-up {_face_up(v['face_up'])}   "
                                          f"face-down {sum(v['face_down'])}"))
        for a in message["actions"]:
            c.print(escape(f"  [{a['id']}] {describe_action(a, self.who)}"))
        while True:
            text = ask("action id> ")
            if text.strip().isdigit() and int(text) < len(message["actions"]):
                return int(text)
            c.print("type one of the ids above (Ctrl-C to stop)")

    def finish(self, message: dict[str, Any]) -> None:
        self._events(message.get("events", []))


def play_one(specs: list[BotSpec], rules: Rules, seed: int, move_ms: int, bank_ms: int,
             max_turns: int, store_path: Path, quiet: bool, console: Console,
             launcher: Launcher | None = None) -> int:
    clock = TimeControl(move_ms, bank_ms)
    launch = blocking_launch(launcher or Launcher())
    players: list[Any] = [HumanPlayer(f"human{i}", console) if s.human else BlockingPlayer(s, launch, clock)
                          for i, s in enumerate(specs)]
    names = [p.name for p in players]
    game_id = f"play-{int(time.time() * 1000)}"

    who = Names(names)

    def show(state: State, e: dict[str, Any]) -> None:
        if e["kind"] != "game_over" and not quiet:
            console.print(f"[dim]{state.turn:4}[/] {escape(describe_event(e, who)[0])}")

    from ..config import rule_label
    console.print(escape(f"{rule_label(rules)}, seed {seed}: {', '.join(who.labels)}"))
    # with a person at the table, the only events shown are those their seat is sent
    spectator = None if any(s.human for s in specs) else show
    try:
        # --seed names the deal for the operator; the cards come from the store's secret
        record = play_game(players, rules, deal_seed(load_secret(store_path.parent), seed, 0, 0),
                           game_id=game_id, clock=clock, max_turns=max_turns, on_event=spectator)
    finally:  # on Ctrl-C too: the bots are told, given their grace, and gone before we return
        for p in players:
            p.shutdown()
        settle()
    res = record.result or {}
    console.rule("result")
    for rank, group in enumerate(res["order"], 1):
        console.print(escape(f"  {rank}. " + ", ".join(who(s) for s in group)))
    console.print(f"ended by {res['reason']}" + (" (draw)" if res["draw"] else ""))
    for f in record.faults:
        console.print("[red]fault[/] " + escape(f"{f['bot']}: {f['reason']}: {f['message']}"))
    db = Store(store_path)
    labels = [s.label for s in specs]
    db.begin_tournament("play", {"kind": "single games"}, 0)
    idx = 1 + max(db.done_indexes("play"), default=0)
    db.save_game("play", idx, labels, record.as_json())
    console.print(f"logged as {game_id} in {store_path}")
    return 0
