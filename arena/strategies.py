"""Simple playing policies over protocol requests, shared by the reference bots.

Each policy takes a request (the JSON a bot receives) and returns an action id.
They see only the request, as any bot does.
"""

from __future__ import annotations

import random
from typing import Any

LADDER = "3456789TJQKA"
SPECIAL = {"2": 20, "T": 21, "X": 22}  # powers are worth most: keep them
LONG_GAME = 400  # turns; most games end well before

# What `arena bots` says of each bundled bot's strength: figures measured in docs/BOTS.md (2 players).
STRENGTH = {
    "random": "baseline: lowest beats it 93.7% (classic)",
    "highest": "",
    "lowest": "93.7% vs random (classic); 99.7% (shithead)",
    "heuristic": "46.6% vs lowest (classic)",
    "heuristic-setup": "55.4% vs heuristic, 51.6% vs lowest (classic)",
    "learned": "68.2% vs heuristic, 64.4% vs lowest (classic)",
    "montecarlo": "83.2% vs heuristic-setup at 10 ms per decision (classic)",
    "ismcts": "76.3% vs heuristic-setup at 10 ms; 91.0% vs heuristic at 1 s (classic)",
}


def rank(card: str) -> str:
    return card[0]


def value(card: str, see_through: bool = False) -> int:
    """Ladder position, with 2, 10 and jokers (and see-through 3s) above every ladder card."""
    r = rank(card)
    if r in SPECIAL:
        return SPECIAL[r]
    if r == "3" and see_through:
        return 19
    return LADDER.index(r) + 3



def random_policy(rng: random.Random):
    def choose(req: dict[str, Any]) -> int:
        return rng.randrange(len(req["actions"]))
    return choose


def _setup_score(action: dict[str, Any]) -> float:
    return sum(value(c) for stack in action.get("face_up", []) for c in stack)


def lowest_first(req: dict[str, Any]) -> int:
    """Play the lowest card (as many of that rank as allowed); pick up only when nothing else is legal."""
    acts = req["actions"]
    plays = [a for a in acts if a["kind"] == "play"]
    if plays:
        return min(plays, key=lambda a: (value(a["cards"][0]), -len(a["cards"])))["id"]
    setups = [a for a in acts if a["kind"] == "set_face_up"]
    if setups:
        return max(setups, key=_setup_score)["id"]
    dones = [a for a in acts if a["kind"] == "done"]
    if dones:
        return dones[0]["id"]
    return acts[0]["id"]


def highest_first(req: dict[str, Any]) -> int:
    """A deliberately bad policy: the highest card first, power cards included."""
    acts = req["actions"]
    plays = [a for a in acts if a["kind"] == "play"]
    if plays:
        return max(plays, key=lambda a: (value(a["cards"][0]), len(a["cards"])))["id"]
    return acts[0]["id"]


def heuristic(req: dict[str, Any]) -> int:
    """Keep 2s, 10s and jokers for piles that need them, finish burns, dump low cards early,
    block a next player down to table cards when none of their face-up cards can answer,
    never pick up by choice when a cheap play exists, and break pick-up cycles in long games."""
    acts = req["actions"]
    view = req["view"]
    kinds = {a["kind"] for a in acts}
    if "set_face_up" in kinds:
        return max((a for a in acts if a["kind"] == "set_face_up"), key=_setup_score)["id"]
    if "stack" in kinds or "done" in kinds:
        stacks = [a for a in acts if a["kind"] == "stack"]
        return max(stacks, key=lambda a: len(a["cards"]))["id"] if stacks else acts[-1]["id"]
    plays = [a for a in acts if a["kind"] == "play"]
    if not plays:
        flips = [a for a in acts if a["kind"] == "flip"]
        return (flips or acts)[0]["id"]
    turn = view.get("turn", 0)
    if turn > LONG_GAME:
        # two deterministic players can cycle (pick up, play back) until the turn cap:
        # past a normal game's length, vary a third of the moves, pseudo-randomly by turn
        h = (turn * 2654435761) & 0xFFFFFF
        if h % 3 == 0:
            return acts[(h >> 4) % len(acts)]["id"]
    pile = view["pile"]
    top = view.get("pile_top")
    nxt = _next_seat(view)
    opp = view["players"][nxt] if nxt is not None else None
    opp_on_table = opp is not None and opp["hand_count"] == 0
    stock = view["stock"]

    def completes_four(a: dict[str, Any]) -> bool:
        r = rank(a["cards"][0])
        run = 0
        for c in reversed(pile):
            if rank(c) != r:
                break
            run += 1
        return run + len(a["cards"]) >= 4 and r not in SPECIAL

    def score(a: dict[str, Any]) -> float:
        r = rank(a["cards"][0])
        v = value(a["cards"][0])
        s = -v * 10 + len(a["cards"]) * 3
        if completes_four(a):
            s += 200
        if r in SPECIAL:
            # a burn is worth it on a big pile or when nothing else goes
            s = -250 + (len(pile) * 8 if r == "T" else 0)
        if opp_on_table and r not in SPECIAL:
            # block only when it works: no face-up card of theirs answers it (a blind flip
            # is a gamble, worth a little); blocking at any cost spends high cards for
            # nothing and can loop (pick up, play back) until the turn cap
            ups = [c for st in (opp.get("face_up") or []) for c in st]
            if ups and all(rank(c) not in SPECIAL and value(c) < v for c in ups):
                s += 150
            elif not ups:
                s += v * 4
        if stock == 0 and a.get("from") == "hand" and r not in SPECIAL:
            s += len(a["cards"]) * 5
        return s

    best = max(plays, key=score)
    if rank(best["cards"][0]) in SPECIAL and top is None and len(plays) > 1:
        best = max((p for p in plays if rank(p["cards"][0]) not in SPECIAL), key=score, default=best)
    return best["id"]


def _next_seat(view: dict[str, Any]) -> int | None:
    n = len(view["players"])
    i = view["seat"]
    for _ in range(n):
        i = (i + view["direction"]) % n
        if i == view["seat"]:
            return None
        if view["players"][i]["place"] is None:
            return i
    return None
