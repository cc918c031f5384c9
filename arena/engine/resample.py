"""Full game states consistent with what one seat has seen: the seat's view plus every
inference its event history allows (OpenSpiel's ``ResampleFromInfostate``).

A seat's view says where every visible card is and how many cards each hidden place
holds (stock, each other hand's unknown part, face-down cards, set-aside cards). The
events it was sent say more: some hidden cards cannot be certain ranks. A
:class:`History` follows the events and keeps, for every other seat, one *slot* per
unknown hand card with the set of ranks that card may have. :func:`resample` deals the
unseen cards into the hidden places so that every slot gets a rank it allows.

Inferences, one by one (each has a test in ``tests/test_resample.py``):

============================  ==========================================================
event                         what it rules out
============================  ==========================================================
``picked_up`` under           The seat held no hand card it could play on that pile
``must_play``, from the hand  (``can_play`` on the pile, need and descending run of that
                              moment): those ranks leave every unknown card it held then.
                              Under ``match_count`` a rank that needed a bigger set caps
                              how many of it the seat held (``need - 1``, known cards
                              counted). Not drawn when ``burner_out=false`` and the seat
                              had no table cards (its only play might have been a
                              forbidden burn-out).
``leads`` (``lowest_card``)   "first face-up R" or "first R in hand": no live seat held
                              a rank that comes before R in the lead order; for "in
                              hand", the seats before the leader held no R either, and
                              the leader held at least one R (one of its slots is R).
failed face-down ``flipped``  Nothing hidden: the card is shown and joins the seat's
                              known hand with the pile (``known_hand``).
``surrendered`` (harsh)       Nothing hidden: the card was face up, it goes under the
                              pile and into the known hand.
``skipped``                   Nothing: the skipped seat made no choice.
``forfeited``                 The seat's cards leave the game unseen; the cards this
                              seat had seen (known hand, face up) stay set aside, and its
                              unknown cards keep their rank limits in the set-aside.
``drew`` (others)             New unknown cards, unconstrained: later limits do not
                              reach back to them, earlier ones do not reach forward.
============================  ==========================================================

How slots stay exact: a limit from time *t* applies to the cards held at *t*, so the
older a slot, the more limits it carries, and the slots of one seat are nested (an
older slot allows a subset of a younger one's ranks). When the seat plays a card that
was not known, the oldest slot that allows its rank is removed; with nested slots that
leaves exactly the union of all the possibilities. A count limit (``match_count``)
covers the slots present when it was made and drops by one when one of them goes.

Samples are built slot by slot, tightest first, each taking a uniformly random
remaining card its slot allows (backtracking on a dead end), and the rest is shuffled
into the unconstrained places. That is a consistent deal, not an exact draw from the
posterior: ranks are not weighted by how likely each history made them.

Pure: no I/O, no global randomness; the caller passes a ``random.Random``.

Over 500 lines because the inferences above are one piece: every event handler of
:class:`History` updates the same slots and caps, and the deal (:class:`_Deal`) reads them;
the table above is the map of the module.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from .cards import JOKER, RANK_NAMES, SEVEN, make_deck, parse_card
from .game import LEAD_ORDER, can_play, effective_top
from .model import Seat, State
from .rules import Rules

ALL_RANKS = tuple(range(2, JOKER + 1))
FULL = sum(1 << r for r in ALL_RANKS)
_NAME_RANK = {name: rank for rank, name in RANK_NAMES.items()}
MAX_STEPS = 20_000  # backtracking budget per sample before limits are relaxed (never reached in tests)


class ResampleError(ValueError):
    """The view does not add up (should not happen): callers fall back to a simpler policy."""


_CARDS: dict[str, int] = {}


def card_of(text: str) -> int:
    c = _CARDS.get(text)
    if c is None:
        c = _CARDS[text] = parse_card(text)
    return c


def cards_of(texts: Iterable[str]) -> tuple[int, ...]:
    return tuple(card_of(t) for t in texts)


class Slot:
    """One unknown hand card: when it arrived, and the ranks it may have (a bit per rank)."""

    __slots__ = ("arrival", "mask")

    def __init__(self, arrival: int, mask: int = FULL):
        self.arrival = arrival
        self.mask = mask

    def __repr__(self) -> str:
        return f"Slot({self.arrival}, {[r for r in ALL_RANKS if self.mask >> r & 1]})"


class Cap:
    """At most ``most`` cards of ``rank`` among a seat's slots that arrived by ``cutoff``."""

    __slots__ = ("cutoff", "rank", "most")

    def __init__(self, cutoff: int, rank: int, most: int):
        self.cutoff, self.rank, self.most = cutoff, rank, most


class History:
    """What one seat has been told in one game, and what follows from it.

    Feed it every request with :meth:`see` (the events since the last request, then
    the view); the events must be the complete stream the referee sends, from the deal.
    """

    def __init__(self, rules: Rules, players: int, seat: int):
        self.rules, self.players, self.seat = rules, players, seat
        self.deck = Counter(make_deck(rules.decks_for(players), rules.jokers))
        self.clock = 0  # events seen: the arrival time of slots
        self.playing = False  # play began (``leads`` seen)
        self.slots: list[list[Slot]] = [[] for _ in range(players)]
        self.caps: list[list[Cap]] = [[] for _ in range(players)]
        self.known: list[Counter] = [Counter() for _ in range(players)]
        self.face_up: list[int | None] = [None] * players  # face-up card counts, once known
        self.face_down: list[int] = [rules.deal_for(players)[0]] * players
        self.live = [True] * players
        self.pile: list[int] = []
        self.need = 0
        self.descending = False
        self.after_flip = False  # the next pick-up follows a failed flip: no choice was made
        self.aside_slots: list[Slot] = []  # a forfeited seat's unknown cards, with their limits
        self.aside_known: Counter = Counter()  # cards this seat saw that a forfeit set aside
        self.view: dict[str, Any] | None = None
        self.progress_turn = 0  # about when the pile last burned or someone went out
        self.inferences: list[tuple[str, int, int]] = []  # (kind, seat, clock): for tests and docs
        self.repairs = 0  # times the view disagreed with the tracked counts (0 outside stacking setups)
        self.deal: _Deal | None = None  # the hidden places of the last view, built on first use

    # ---------------------------------------------------------------- following the game

    def see(self, events: Sequence[dict[str, Any]], view: dict[str, Any]) -> None:
        """Take in one request's events and its view."""
        prev = self.view
        self.deal = None
        for ev in events:
            self._event(ev)
            if ev.get("kind") in ("burned", "went_out", "forfeited"):
                self.progress_turn = view["turn"] if prev is None else min(view["turn"], prev["turn"] + 1)
        self.view = view
        if view.get("phase") == "play":
            self._sync(view)

    @property
    def stale(self) -> int:
        return max(0, self.view["turn"] - self.progress_turn) if self.view is not None else 0

    def _event(self, ev: dict[str, Any]) -> None:
        self.clock += 1
        kind = ev.get("kind")
        j = ev.get("seat")
        if kind == "leads":
            self._begin(j, ev.get("why", ""))
        elif kind == "start_card":
            if not ev["set_aside"]:
                c = card_of(ev["card"])
                self.pile = [c]
                self.descending = c >> 2 == SEVEN and self.rules.seven == "descending"
        elif kind == "drew":
            if self.playing and j != self.seat:
                self.slots[j].extend(Slot(self.clock) for _ in range(ev["count"]))
        elif kind == "played":
            cards = cards_of(ev["cards"])
            if ev["zone"] == "hand" and j != self.seat:
                for c in cards:
                    self._lose(j, c)
            elif ev["zone"] == "face_up" and self.face_up[j] is not None:
                self.face_up[j] = max(0, self.face_up[j] - len(cards))  # type: ignore[operator]
            self._onto_pile(cards)
        elif kind == "flipped":
            self.face_down[j] = max(0, self.face_down[j] - 1)
            if ev["legal"]:
                self._onto_pile((card_of(ev["card"]),))
            else:
                self.after_flip = True
        elif kind == "surrendered":
            if self.face_up[j] is not None:
                self.face_up[j] = max(0, self.face_up[j] - 1)  # type: ignore[operator]
            self.after_flip = True  # a harsh face-up pick-up: table cards, nothing hidden
            self.pile.append(card_of(ev["card"]))
        elif kind == "picked_up":
            cards = cards_of(ev["cards"])
            if not self.after_flip and j != self.seat and self.playing:
                self._no_play(j)
            self.after_flip = False
            self.known[j].update(cards)
            self._clear_pile()
        elif kind == "gave_pile":
            self.known[ev["target"]].update(cards_of(ev["cards"]))
            self._clear_pile()
        elif kind == "burned":
            self._clear_pile()
        elif kind == "went_out":
            self.slots[j], self.caps[j], self.known[j] = [], [], Counter()
            self.live[j] = False
        elif kind == "forfeited":
            self.aside_slots.extend(self.slots[j])
            self.aside_known.update(self.known[j])
            if self.view is not None and self.view.get("phase") == "play":
                for st in self.view["players"][j]["face_up"] or ():
                    self.aside_known.update(cards_of(st))
            self.slots[j], self.caps[j], self.known[j] = [], [], Counter()
            self.live[j] = False

    def _onto_pile(self, cards: tuple[int, ...]) -> None:
        """The pile after a play, as the engine's ``_play`` leaves it unless a burn or gift follows."""
        rules = self.rules
        self.pile.extend(cards)
        rank = cards[0] >> 2
        if rank in rules.see_through:
            self.descending = self.descending and rank not in rules.wild
        elif rank in rules.wild:
            self.need, self.descending = 0, False
        else:
            self.need = len(cards) if rules.match_count else 0
            if rank == SEVEN and rules.seven == "descending":
                self.descending = True

    def _clear_pile(self) -> None:
        self.pile, self.need, self.descending = [], 0, False

    def _begin(self, leader: int, why: str) -> None:
        """Play begins: every other seat's hand is unknown, and the lead may say what it holds."""
        self.playing = True
        hand = self.rules.deal_for(self.players)[2]
        for j in range(self.players):
            if j != self.seat and self.live[j]:
                self.slots[j] = [Slot(0) for _ in range(hand)]
            self.face_up[j] = None if self.rules.stacking else self.rules.deal_for(self.players)[1]
        words = why.split()
        if self.rules.start != "lowest_card" or len(words) < 2 or words[0] != "first" or words[1] == "seat":
            return
        in_hand = words[-1] == "hand"
        rank = _NAME_RANK.get(" ".join(words[1:-2]) if in_hand else " ".join(words[2:]))
        if rank is None:
            return
        earlier = sum(1 << r for r in LEAD_ORDER[:LEAD_ORDER.index(rank)])
        for j in range(self.players):
            if j == self.seat or not self.live[j]:
                continue
            out = earlier | (1 << rank if in_hand and j < leader else 0)
            for s in self.slots[j]:
                s.mask &= ~out
            if in_hand and j == leader and self.slots[j]:
                self.slots[j][0].mask &= 1 << rank
                self.slots[j][0].arrival = -1  # the pinned slot stays the oldest
            self.inferences.append(("lead", j, self.clock))

    def _no_play(self, j: int) -> None:
        """``must_play``: seat ``j`` picked up by choice, so it held no playable hand card."""
        rules = self.rules
        if not rules.must_play or not self.pile:
            return
        slots, known = self.slots[j], self.known[j]
        if not slots and not known:
            return  # playing from the table: its cards are all in view
        if not rules.burner_out and self.face_down[j] == 0 and not self.face_up[j]:
            return  # no table cards (or none known): its only play may have been a forbidden burn-out
        probe = State(rules=rules, seats=(), stock=(), pile=tuple(self.pile), burned=(), set_aside=(),
                      to_move=0, need=self.need, descending=self.descending)
        top = effective_top(rules, probe.pile)
        counted = rules.match_count and self.need > 1
        out = 0
        for r in ALL_RANKS:
            if can_play(probe, r, 1, top):
                out |= 1 << r  # one card of it was a legal play
            elif counted and r not in rules.wild and can_play(probe, r, self.need, top):
                held = sum(n for c, n in known.items() if c >> 2 == r)
                most = self.need - 1 - held  # a set of `need` was a legal play: fewer were held
                if most <= 0:
                    out |= 1 << r
                elif most < len(slots):
                    self.caps[j].append(Cap(self.clock, r, most))
        for s in slots:
            s.mask &= ~out
        self.inferences.append(("must_play", j, self.clock))

    def _lose(self, j: int, c: int) -> None:
        """Seat ``j`` played ``c`` from its hand: a known card if it has one, else its oldest fitting slot."""
        if self.known[j][c] > 0:
            self.known[j][c] -= 1
            if not self.known[j][c]:
                del self.known[j][c]
            return
        slots = self.slots[j]
        r = c >> 2
        k = next((k for k, s in enumerate(slots) if s.mask >> r & 1), None)
        if k is None:  # cannot happen if every inference is sound; stay sound anyway
            self.repairs += 1
            self._forget(j)
            k = len(slots) - 1
            if k < 0:
                return
        gone = slots.pop(k)
        for cap in self.caps[j]:
            if cap.rank == r and gone.arrival <= cap.cutoff:
                cap.most -= 1
        self.caps[j] = [cap for cap in self.caps[j] if cap.most >= 0]

    def _forget(self, j: int) -> None:
        for s in self.slots[j]:
            s.mask = FULL
        self.caps[j] = []

    def _sync(self, view: dict[str, Any]) -> None:
        """Check the tracked hands against the view; repair (dropping limits, never adding) if they differ."""
        for p in view["players"]:
            j = p["seat"]
            if p["face_up"] is not None:
                self.face_up[j] = sum(len(st) for st in p["face_up"])
            self.face_down[j] = sum(p["face_down"])
            if j == self.seat:
                continue
            known = Counter(cards_of(p["known_hand"]))
            if known != self.known[j]:
                self.repairs += 1
                self.known[j] = known
                self._forget(j)
            unknown = p["hand_count"] - len(p["known_hand"])
            slots = self.slots[j]
            if len(slots) != unknown:
                if self.playing and not self.rules.stacking:
                    self.repairs += 1
                    self._forget(j)
                del slots[max(0, unknown):]
                slots.extend(Slot(0) for _ in range(unknown - len(slots)))
        pile = cards_of(view["pile"])
        if tuple(self.pile) != pile or self.need != view["need"] or self.descending != view["descending"]:
            self.repairs += 1
            self.pile, self.need, self.descending = list(pile), view["need"], view["descending"]

    # ---------------------------------------------------------------- what may be true

    def admits(self, state: State) -> bool:
        """Whether ``state`` (a full state matching the current view) breaks none of the inferences.

        The real state always should: tests check it.
        """
        return all(_fits(self._hidden_hand(state, j), self.slots[j], self.caps[j])
                   for j in range(self.players) if j != self.seat and self.slots[j])

    @staticmethod
    def _hidden_hand(state: State, j: int) -> list[int]:
        s = state.seats[j]
        return list((Counter(s.hand) - Counter(s.known)).elements())


def _fits(cards: list[int], slots: list[Slot], caps: list[Cap]) -> bool:
    """Whether ``cards`` can fill ``slots``, each with a rank it allows, within ``caps``.

    A seat's slots are nested (see the module docstring), so filling the tightest slot
    first with any card it allows never blocks a looser one. A cap holds if the cards of
    its rank fit into the slots that arrived after it, less ``most``.
    """
    if len(cards) != len(slots):
        return False
    left = cards[:]
    for s in sorted(slots, key=lambda s: bin(s.mask).count("1")):
        k = next((k for k, c in enumerate(left) if s.mask >> (c >> 2) & 1), None)
        if k is None:
            return False
        left.pop(k)
    for cap in caps:
        held = sum(1 for c in cards if c >> 2 == cap.rank)
        later = sum(1 for s in slots if s.arrival > cap.cutoff and s.mask >> cap.rank & 1)
        if held - later > cap.most:
            return False
    return True


# ---------------------------------------------------------------- sampling

def unseen(view: dict[str, Any], deck: Counter) -> Counter:
    """The deck minus every card visible in ``view``."""
    seen = Counter(cards_of(view["hand"]))
    seen.update(cards_of(view["pile"]))
    seen.update(cards_of(view["burned"]))
    for p in view["players"]:
        if p["seat"] != view["seat"]:
            seen.update(cards_of(p["known_hand"]))
        for st in p["face_up"] or ():
            seen.update(cards_of(st))
    if view["players"][view["seat"]]["face_up"] is None:
        for st in view["face_up"]:
            seen.update(cards_of(st))
    if seen - deck:
        raise ResampleError(f"view shows cards not in the deck: {dict(seen - deck)}")
    return deck - seen


def resample(view: dict[str, Any], history: History, rng: random.Random, *,
             max_turns: int | None = None) -> State:
    """A full play-phase state consistent with ``view`` and every inference ``history`` holds.

    ``view`` must be the one ``history`` saw last. ``max_turns`` defaults to far beyond
    the game's (searches cut their playouts themselves).
    """
    if history.view is not view and history.view != view:
        raise ResampleError("resample needs the view the history saw last")
    if view["phase"] != "play":
        raise ResampleError("resampling is for the play phase")
    deal = history.deal
    if deal is None or deal.view is not view:
        deal = history.deal = _Deal(view, history)
    return deal.draw(rng, max_turns)


class _Deal:
    """The hidden places of one view and the pool that fills them: built once, drawn from many times."""

    def __init__(self, view: dict[str, Any], history: History):
        self.view, self.history = view, history
        pool = unseen(view, history.deck)
        aside = history.aside_known & pool
        self.aside = tuple(aside.elements())[:max(0, view["set_aside"])]
        aside = Counter(self.aside)
        self.pool = list((pool - aside).elements())
        me = view["seat"]
        n_aside = view["set_aside"] - len(self.aside)
        need = view["stock"] + n_aside
        for p in view["players"]:
            need += sum(p["face_down"])
            if p["seat"] != me:
                need += p["hand_count"] - len(p["known_hand"])
        if need != len(self.pool) or n_aside < 0:
            raise ResampleError(f"{len(self.pool)} unseen cards for {need} hidden places")
        # constrained places: (owner, slot); owner -1 is the set-aside
        self.tight: list[tuple[int, Slot]] = []
        for j in range(history.players):
            if j != me:
                self.tight.extend((j, s) for s in history.slots[j] if s.mask != FULL)
        self.tight.extend((-1, s) for s in history.aside_slots[:n_aside] if s.mask != FULL)
        self.tight.sort(key=lambda t: bin(t[1].mask).count("1"))
        self.caps = [(j, cap) for j in range(history.players) for cap in history.caps[j]]
        self.n_aside = n_aside

    def draw(self, rng: random.Random, max_turns: int | None) -> State:
        v, h = self.view, self.history
        pool = self.pool[:]
        rng.shuffle(pool)
        fixed = self._fill(pool)  # id(slot) -> card, for the constrained slots
        me = v["seat"]
        pos = 0
        seats = []
        for p in v["players"]:
            i = p["seat"]
            down: list[int | None] = []
            for present in p["face_down"]:
                if present:
                    down.append(pool[pos])
                    pos += 1
                else:
                    down.append(None)
            known = cards_of(p["known_hand"])
            if i == me:
                hand = tuple(sorted(cards_of(v["hand"])))
                face_up = tuple(cards_of(st) for st in v["face_up"])
            else:
                extra = p["hand_count"] - len(known)
                mine = [fixed[id(s)] for s in h.slots[i] if id(s) in fixed]
                free = extra - len(mine)
                hand = tuple(sorted(known + tuple(mine) + tuple(pool[pos:pos + free])))
                pos += free
                face_up = tuple(cards_of(st) for st in p["face_up"] or ())
            seats.append(Seat(hand, face_up, tuple(down), tuple(sorted(known)), p["place"], p["forfeit"], ""))
        aside_fixed = [fixed[id(s)] for s in h.aside_slots[:self.n_aside] if id(s) in fixed]
        free = self.n_aside - len(aside_fixed)
        set_aside = self.aside + tuple(aside_fixed) + tuple(pool[pos:pos + free])
        pos += free
        stock = tuple(pool[pos:pos + v["stock"]])
        turn = v["turn"]
        return State(rules=h.rules, seats=tuple(seats), stock=stock, pile=cards_of(v["pile"]),
                     burned=cards_of(v["burned"]), set_aside=set_aside, to_move=v["to_move"],
                     direction=v["direction"], phase="play", turn=turn, stale=h.stale,
                     need=v["need"], descending=v["descending"],
                     max_turns=turn + 100_000 if max_turns is None else max_turns)

    def _fill(self, pool: list[int]) -> dict[int, int]:
        """Give every constrained slot a card it allows, removing those cards from ``pool``.

        Backtracking over the slots, tightest first; each takes the first fitting card of
        the shuffled pool, so a uniformly random one. Past MAX_STEPS the caps, then the
        masks, are dropped: still a deal of the right cards, only less informed.
        """
        tight = self.tight
        if not tight:
            return {}
        caps = self.caps
        taken: list[int] = []  # pool indices, per tight slot
        used = [0] * len(caps)
        steps = [0]
        out: dict[int, int] = {}
        free = [True] * len(pool)

        def cap_ok(j: int, s: Slot, r: int) -> bool:
            for k, (cj, cap) in enumerate(caps):
                if cj == j and cap.rank == r and s.arrival <= cap.cutoff and used[k] >= cap.most:
                    return False
            return True

        def go(k: int) -> bool:
            if k == len(tight):
                return True
            steps[0] += 1
            if steps[0] > MAX_STEPS:
                return False
            j, s = tight[k]
            tried = 0
            for idx, c in enumerate(pool):
                r = c >> 2
                if not free[idx] or not s.mask >> r & 1 or tried >> r & 1 or not cap_ok(j, s, r):
                    continue
                free[idx] = False
                hits = [m for m, (cj, cap) in enumerate(caps) if cj == j and cap.rank == r and s.arrival <= cap.cutoff]
                for m in hits:
                    used[m] += 1
                taken.append(idx)
                if go(k + 1):
                    return True
                taken.pop()
                for m in hits:
                    used[m] -= 1
                free[idx] = True
                tried |= 1 << r
            return False

        if not go(0):
            # relax: a shuffled deal into the slots, ignoring limits (counted for tests)
            self.history.repairs += 1
            taken[:] = list(range(len(tight)))
            for idx in range(len(pool)):
                free[idx] = idx >= len(tight)
        for (_, s), idx in zip(tight, taken):
            out[id(s)] = pool[idx]
        rest = [c for idx, c in enumerate(pool) if free[idx]]
        pool[:] = rest
        return out
