"""What a bot knows, and states sampled consistently with it (determinization).

A bot sees the ``start`` message (rules, seat, players) and, per request, the view and
the events since its last request. Card counting is exact from the view alone: every
card of the deck is either visible now (own hand, face-up cards, pile, burned, the
hand cards every player saw picked up: ``known_hand``) or hidden in one of a few
zones whose sizes the view gives (stock, the rest of each hand, face-down cards,
set-aside cards). So the unseen pool is the deck minus the visible cards, and a
determinization deals that pool into the hidden zones. The one thing the view
forgets is a forfeited seat's known cards, which leave the game unseen: the observer
remembers them from its previous view and keeps them in the set-aside zone.

Nothing here touches the real game state; a sample is built only from messages.

:meth:`Observer.resample` is what the search bots use: the engine's resampler
(:mod:`arena.engine.resample`), which also keeps every card out of the hands the event
history rules it out of. :meth:`Observer.sample` is the older uniform deal, kept to
measure what the inferences add.
"""

from __future__ import annotations

import json
import random
from collections import Counter

from arena.engine.cards import make_deck, parse_card
from arena.engine.model import Done, Flip, PickUp, Play, Seat, SetFaceUp, Stack, State
from arena.engine.resample import History, ResampleError, resample
from arena.engine.rules import Rules
from arena.errors import ArenaError

_CARD_CACHE: dict[str, int] = {}


def card(text: str) -> int:
    c = _CARD_CACHE.get(text)
    if c is None:
        c = _CARD_CACHE[text] = parse_card(text)
    return c


def cards(texts) -> tuple[int, ...]:
    return tuple(card(t) for t in texts)


class DeterminizationError(ArenaError, ResampleError):
    """The view does not add up (should not happen); callers fall back to the heuristic."""


class Observer:
    """One seat's memory of one game, fed every ``start`` and ``request`` message."""

    def __init__(self) -> None:
        self.rules: Rules | None = None
        self.seat = 0
        self.players = 0
        self.deck: Counter = Counter()
        self.view: dict | None = None
        self.aside_known: Counter = Counter()  # forfeited seats' cards this seat had seen
        self.progress_turn = 0  # approximate turn of the last burn or player going out
        self.history: History | None = None  # what the events rule out, for resample

    @property
    def stale(self) -> int:
        """Turns since the last burn or player going out, as far as this seat saw."""
        return max(0, self.view["turn"] - self.progress_turn) if self.view is not None else 0

    @property
    def ready(self) -> bool:
        return self.rules is not None and self.view is not None

    def start(self, msg: dict) -> None:
        self.rules = Rules.from_options(msg["rules"])
        self.seat = msg["seat"]
        self.players = msg["players"]
        self.deck = Counter(make_deck(self.rules.decks_for(self.players), self.rules.jokers))
        self.view = None
        self.aside_known = Counter()
        self.progress_turn = 0
        self.history = History(self.rules, self.players, self.seat)

    def update(self, req: dict) -> None:
        """Take in a request: remember forfeited cards and when the pile last burned."""
        view = req["view"]
        prev = self.view
        if self.history is not None:
            self.history.see(req.get("events", ()), view)
        for ev in req.get("events", ()):
            k = ev.get("kind")
            if k in ("burned", "went_out", "forfeited"):
                self.progress_turn = view["turn"] if prev is None else min(view["turn"], prev["turn"] + 1)
            if k == "forfeited" and prev is not None:
                p = prev["players"][ev["seat"]]
                gone = list(p.get("known_hand") or ())
                for st in p.get("face_up") or ():
                    gone.extend(st)
                self.aside_known.update(cards(gone))
        self.view = view
        if self.aside_known:  # keep it consistent with what the current view shows
            pool = self.unseen()
            self.aside_known = self.aside_known & pool
            extra = sum(self.aside_known.values()) - view["set_aside"]
            while extra > 0:
                c = next(iter(self.aside_known))
                self.aside_known[c] -= 1
                self.aside_known += Counter()
                extra -= 1

    def unseen(self) -> Counter:
        """The deck minus every card visible in the current view."""
        v = self.view
        seen = Counter(cards(v["hand"]))
        seen.update(cards(v["pile"]))
        seen.update(cards(v["burned"]))
        for p in v["players"]:
            if p["seat"] != v["seat"]:
                seen.update(cards(p["known_hand"]))
            for st in p["face_up"] or ():
                seen.update(cards(st))
        if v["players"][v["seat"]]["face_up"] is None:
            for st in v["face_up"]:
                seen.update(cards(st))
        pool = self.deck - seen
        if seen - self.deck:
            raise DeterminizationError(f"view shows cards not in the deck: {dict(seen - self.deck)}")
        return pool

    def resample(self, rng: random.Random) -> State:
        """A full game state consistent with the view and every inference the events allow."""
        if self.history is None or self.view is None:
            raise DeterminizationError("no start message or request seen yet")
        return resample(self.view, self.history, rng)

    def sample(self, rng: random.Random) -> State:
        """A full game state consistent with the view, hidden cards dealt uniformly (no inference)."""
        v = self.view
        if self.rules is None or v is None:
            raise DeterminizationError("no start message or request seen yet")
        if v["phase"] != "play":
            raise DeterminizationError("determinization is for the play phase")
        pool_c = self.unseen()
        aside = list((self.aside_known & pool_c).elements())
        pool = list((pool_c - Counter(aside)).elements())
        rng.shuffle(pool)
        need = v["stock"] + v["set_aside"] - len(aside)
        for p in v["players"]:
            need += sum(p["face_down"])
            if p["seat"] != v["seat"]:
                need += p["hand_count"] - len(p["known_hand"])
        if need != len(pool):
            raise DeterminizationError(f"{len(pool)} unseen cards for {need} hidden places")
        me = v["seat"]
        seats = []
        pos = 0
        for p in v["players"]:
            i = p["seat"]
            down = []
            for up in p["face_down"]:
                if up:
                    down.append(pool[pos])
                    pos += 1
                else:
                    down.append(None)
            known = cards(p["known_hand"])
            if i == me:
                hand = tuple(sorted(cards(v["hand"])))
                face_up = tuple(cards(st) for st in v["face_up"])
            else:
                extra = p["hand_count"] - len(known)
                hand = tuple(sorted(known + tuple(pool[pos:pos + extra])))
                pos += extra
                face_up = tuple(cards(st) for st in p["face_up"] or ())
            seats.append(Seat(hand, face_up, tuple(down), tuple(sorted(known)), p["place"], p["forfeit"], ""))
        n_aside = v["set_aside"] - len(aside)
        set_aside = tuple(aside) + tuple(pool[pos:pos + n_aside])
        pos += n_aside
        stock = tuple(pool[pos:pos + v["stock"]])
        turn = v["turn"]
        stale = self.stale
        return State(rules=self.rules, seats=tuple(seats), stock=stock, pile=cards(v["pile"]),
                     burned=cards(v["burned"]), set_aside=set_aside, to_move=v["to_move"],
                     direction=v["direction"], phase="play", turn=turn, stale=stale,
                     need=v["need"], descending=v["descending"],
                     max_turns=turn + 100_000)  # searches cut playouts themselves


# ---------------------------------------------------------------- actions

def action_key(a_json: dict) -> str:
    """A request action's identity, without its id: how engine actions are matched to ids."""
    return json.dumps({k: v for k, v in a_json.items() if k != "id"}, sort_keys=True)


def parse_action(a: dict):
    """An engine action from its protocol JSON (the inverse of ``views.action_json``)."""
    kind = a["kind"]
    if kind == "play":
        return Play(cards(a["cards"]), a["from"], a.get("target"))
    if kind == "pick_up":
        s = a.get("surrender")
        return PickUp(None if s is None else card(s))
    if kind == "flip":
        return Flip(a["position"])
    if kind == "set_face_up":
        return SetFaceUp(tuple(cards(s) for s in a["face_up"]))
    if kind == "stack":
        return Stack(cards(a["cards"]))
    if kind == "done":
        return Done()
    raise ValueError(f"unknown action kind {kind!r}")


def rank_key(a) -> tuple:
    """An engine action by ranks, not suits: comparable across determinizations (ISMCTS)."""
    kind = a.kind
    if kind == "play":
        return ("p", a.cards[0] >> 2, len(a.cards), a.zone, a.target)
    if kind == "pick_up":
        return ("u", None if a.surrender is None else a.surrender >> 2)
    if kind == "flip":
        return ("f", a.position)
    return (kind, repr(a))
