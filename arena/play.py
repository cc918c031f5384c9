"""``arena play``: one game in the terminal, with bots and people at the table."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import trio
from rich.console import Console

from .engine import Rules, State
from .launch import Launcher
from .manifest import BotSpec
from .referee import BotPlayer, TimeControl, run_game
from .replay.view import Names, describe_event
from .seeds import deal_seed, load_secret
from .store import Store


class HumanPlayer:
    """A person at the terminal: sees only the request (their seat's view), picks an action."""

    def __init__(self, name: str, console: Console):
        self.name = name
        self.console = console

    async def begin(self, message: dict[str, Any]) -> None:
        self.console.print(f"[bold]You are seat {message['seat']}[/] ({self.name}).")

    async def decide(self, message: dict[str, Any], timeout: float) -> int:
        v = message["view"]
        c = self.console
        c.rule(f"your turn ({message['decision']})")
        c.print(f"pile: {' '.join(v['pile'][-6:]) or '(empty)'}   to beat: {v['pile_top'] or 'anything'}"
                f"   stock: {v['stock']}   burned: {len(v['burned'])}")
        for p in v["players"]:
            if p["seat"] != v["seat"]:
                c.print(f"  seat {p['seat']}: {p['hand_count']} in hand, face-up {p['face_up']}, "
                        f"{sum(p['face_down'])} face-down" + (f", known {p['known_hand']}" if p["known_hand"] else ""))
        c.print(f"[bold]your hand:[/] {' '.join(v['hand'])}   face-up: {v['face_up']}   face-down: {sum(v['face_down'])}")
        for a in message["actions"]:
            c.print(f"  [{a['id']}] " + " ".join(f"{k}={val}" for k, val in a.items() if k != "id"))
        while True:
            text = await trio.to_thread.run_sync(input, "action id> ")
            if text.strip().isdigit() and int(text) < len(message["actions"]):
                return int(text)
            c.print("type one of the ids above")

    async def finish(self, message: dict[str, Any]) -> None:
        pass

    async def fault(self, reason: str, message: str, request_id: int | None) -> None:
        pass

    def take_stderr(self) -> list[str]:
        return []

    async def close(self) -> None:
        pass

    async def shutdown(self) -> None:
        pass


async def play_one(specs: list[BotSpec], rules: Rules, seed: int, move_ms: int, bank_ms: int,
                   max_turns: int, store_path: Path, quiet: bool, console: Console,
                   launcher: Launcher | None = None) -> int:
    clock = TimeControl(move_ms, bank_ms)
    launcher = launcher or Launcher()
    players: list[Any] = [HumanPlayer(f"human{i}", console) if s.human else BotPlayer(s, launcher, clock)
                          for i, s in enumerate(specs)]
    names = [p.name for p in players]
    game_id = f"play-{int(time.time() * 1000)}"

    who = Names(names)

    def show(state: State, e: dict[str, Any]) -> None:
        if e["kind"] != "game_over" and not quiet:
            console.print(f"[dim]{state.turn:4}[/] {describe_event(e, who)[0]}")

    try:
        # --seed names the deal for the operator; the cards come from the store's secret
        record = await run_game(players, rules, deal_seed(load_secret(store_path.parent), seed, 0, 0),
                                game_id=game_id, clock=clock, max_turns=max_turns,
                                on_event=show)
    finally:
        for p in players:
            await p.shutdown()
    res = record.result or {}
    console.rule("result")
    for rank, group in enumerate(res["order"], 1):
        console.print(f"  {rank}. " + ", ".join(who(s) for s in group))
    console.print(f"ended by {res['reason']}" + (" (draw)" if res["draw"] else ""))
    for f in record.faults:
        console.print(f"[red]fault[/] {f['bot']}: {f['reason']}: {f['message']}")
    db = Store(store_path)
    labels = [s.label for s in specs]
    db.begin_tournament("play", {"kind": "single games"}, 0)
    idx = 1 + max(db.done_indexes("play"), default=0)
    db.save_game("play", idx, labels, record.as_json())
    console.print(f"logged as {game_id} in {store_path}")
    return 0
