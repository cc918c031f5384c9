"""The observation of :mod:`arena.envs` as plain floats: standard library only.

Built from what a bot is sent (the request's ``view``), so a policy trained in the
environments computes the same inputs when it plays as a bot, even under a Python without
numpy (the sandbox's). ``state_features`` is the environments' fast path from the engine
state; a test checks it equals ``view_features`` of the seat's view. The environments and the
learned bot (:mod:`.learned`) share it, so it sits here, below the environments.

Every feature is bounded (``HIGH``): card counts are a quarter per card, and the action
space already limits a table to ``MAX_DECKS`` decks (``MAX_COUNT`` cards of a rank).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from arena.engine.cards import JOKER, RANK_CHARS, make_deck
from arena.engine.game import effective_top
from arena.engine.resample import card_of
from arena.engine.rules import Rules

from .actions import MAX_COUNT, MAX_SEATS, RANKS

SEAT_FEATURES = 4 + 2 * RANKS + 2
N_FEATURES = 2 * RANKS + 1 + (RANKS + 1) + 3 + RANKS + RANKS + 5 + RANKS + (MAX_SEATS - 1) * SEAT_FEATURES
_TOP = {ch: r - 1 for r, ch in RANK_CHARS.items()}  # the view's pile_top (a rank letter) -> 1..14
MAX_DECKS = MAX_COUNT // 4  # the action space counts at most this many cards of one rank
MAX_CARDS = MAX_DECKS * 54  # three decks with two jokers each


# What each index of ``view_features`` holds: (first index, length, meaning), in order. A block
# "by rank" has RANKS entries for 2, 3, ..., 10, J, Q, K, A and the joker, a quarter per card.
_SEAT_BLOCKS = (("present (1; 0 for a seat the table lacks)", 1), ("still playing (no place yet)", 1),
                ("to move", 1), ("hand size / 8", 1), ("cards known to be in its hand, by rank", RANKS),
                ("face-up cards, by rank", RANKS), ("face-down cards / 4", 1),
                ("its place / seats (0 while playing)", 1))
_BLOCKS = (("own hand, by rank", RANKS), ("own face-up cards, by rank", RANKS), ("own face-down cards / 4", 1),
           ("pile top: empty, then its rank 2..joker (one-hot)", RANKS + 1), ("pile size / 16", 1),
           ("need / 4 (match_count: the fewest cards the next play must hold)", 1),
           ("descending (seven = descending: plays must be at most the top)", 1),
           ("pile, by rank", RANKS), ("burned, by rank", RANKS), ("stock size / 16", 1), ("set aside / 16", 1),
           ("phase is setup", 1), ("phase is play", 1), ("direction is +1", 1),
           ("unseen cards (the deck less all it can see), by rank", RANKS))


def _layout() -> tuple[tuple[int, int, str], ...]:
    out, at = [], 0
    blocks = list(_BLOCKS) + [(f"seat +{k} from the viewer's left: {what}", n)
                              for k in range(1, MAX_SEATS) for what, n in _SEAT_BLOCKS]
    for what, n in blocks:
        out.append((at, n, what))
        at += n
    return tuple(out)


LAYOUT = _layout()  # docs/BOTS.md prints it as a table


def check_table(rules: Rules, players: int) -> None:
    """A table the fixed spaces cannot describe (more than ``MAX_DECKS`` decks) is refused."""
    if rules.decks_for(players) > MAX_DECKS:
        raise ValueError(f"{rules.name} with {players} players uses {rules.decks_for(players)} decks; "
                         f"the learning environments hold at most {MAX_DECKS}")


def _high() -> list[float]:
    """The largest value of each feature (the layout of ``view_features``)."""
    count, size = MAX_COUNT / 4, MAX_CARDS / 16
    hi = [count] * (2 * RANKS) + [MAX_CARDS / 4] + [1.0] * (RANKS + 1) + [size, count, 1.0]
    hi += [count] * (2 * RANKS) + [size, size, 1.0, 1.0, 1.0] + [count] * RANKS
    seat = [1.0, 1.0, 1.0, MAX_CARDS / 8] + [count] * (2 * RANKS) + [MAX_CARDS / 4, 1.0]
    hi += seat * (MAX_SEATS - 1)
    assert len(hi) == N_FEATURES
    return hi


HIGH = _high()


def _counts(out: list[float], at: int, cards, scale: float = 0.25) -> None:
    for t in cards:
        out[at + (card_of(t) >> 2) - 2] += scale


def view_features(view: dict[str, Any], rules: Rules, players: int) -> list[float]:
    """The view as ``N_FEATURES`` floats: card counts by rank (a quarter per card), sizes, flags.

    Seats are listed from the viewer's left, so a policy sees the table the same way
    from every seat. Unseen cards (the deck less everything visible) are counted too.
    """
    out = [0.0] * N_FEATURES
    me = view["seat"]
    _counts(out, 0, view["hand"])
    for st in view["face_up"]:
        _counts(out, RANKS, st)
    at = 2 * RANKS
    out[at] = sum(view["face_down"]) / 4
    at += 1
    top = view["pile_top"]
    out[at + (0 if top is None else _TOP[top])] = 1
    at += RANKS + 1
    out[at:at + 3] = (len(view["pile"]) / 16, view["need"] / 4, float(view["descending"]))
    at += 3
    _counts(out, at, view["pile"])
    at += RANKS
    _counts(out, at, view["burned"])
    at += RANKS
    out[at:at + 5] = (view["stock"] / 16, view["set_aside"] / 16, float(view["phase"] == "setup"),
                      float(view["phase"] == "play"), float(view["direction"] == 1))
    at += 5
    seen = Counter(card_of(t) >> 2 for t in view["hand"] + view["pile"] + view["burned"])
    for p in view["players"]:
        for st in (p["face_up"] or ()):
            seen.update(card_of(t) >> 2 for t in st)
        if p["seat"] != me:
            seen.update(card_of(t) >> 2 for t in p["known_hand"])
    if view["players"][me]["face_up"] is None:
        for st in view["face_up"]:
            seen.update(card_of(t) >> 2 for t in st)
    deck = _deck_ranks(rules, players)
    for r in range(2, JOKER + 1):
        out[at + r - 2] = max(0, deck[r - 2] - seen[r]) / 4
    at += RANKS
    n = len(view["players"])
    for k in range(1, min(n, MAX_SEATS)):
        p = view["players"][(me + k) % n]
        out[at:at + 4] = (1.0, float(p["place"] is None), float(view["to_move"] == p["seat"]), p["hand_count"] / 8)
        _counts(out, at + 4, p["known_hand"])
        for st in (p["face_up"] or ()):
            _counts(out, at + 4 + RANKS, st)
        out[at + 4 + 2 * RANKS] = sum(p["face_down"]) / 4
        out[at + 5 + 2 * RANKS] = 0 if p["place"] is None else p["place"] / n
        at += SEAT_FEATURES
    return out


_DECKS: dict[tuple[int, int], list[int]] = {}


def _deck_ranks(rules: Rules, players: int) -> list[int]:
    key = (rules.decks_for(players), rules.jokers)
    d = _DECKS.get(key)
    if d is None:
        counts = Counter(c >> 2 for c in make_deck(*key))
        d = _DECKS[key] = [counts[r] for r in range(2, JOKER + 1)]
    return d


def state_features(state, seat: int) -> list[float]:
    """:func:`view_features` of ``seat_view(state, seat)``, read straight from the engine state
    (the environments' fast path). It reads only what the view shows; a test checks both agree."""
    me = state.seats[seat]
    setup = state.phase == "setup"
    out = [0.0] * N_FEATURES
    unseen = _deck_ranks(state.rules, state.players)[:]
    for c in me.hand:
        r = (c >> 2) - 2
        out[r] += 0.25
        unseen[r] -= 1
    for st in me.face_up:
        for c in st:
            r = (c >> 2) - 2
            out[RANKS + r] += 0.25
            unseen[r] -= 1
    at = 2 * RANKS
    out[at] = me.face_down_count / 4
    top = effective_top(state.rules, state.pile)
    out[at + 1 + (0 if top is None else top - 1)] = 1.0
    at += 2 + RANKS
    out[at] = len(state.pile) / 16
    out[at + 1] = state.need / 4
    out[at + 2] = 1.0 if state.descending else 0.0
    at += 3
    for c in state.pile:
        r = (c >> 2) - 2
        out[at + r] += 0.25
        unseen[r] -= 1
    at += RANKS
    for c in state.burned:
        r = (c >> 2) - 2
        out[at + r] += 0.25
        unseen[r] -= 1
    at += RANKS
    out[at] = len(state.stock) / 16
    out[at + 1] = len(state.set_aside) / 16
    out[at + 2] = 1.0 if setup else 0.0
    out[at + 3] = 1.0 if state.phase == "play" else 0.0
    out[at + 4] = 1.0 if state.direction == 1 else 0.0
    unseen_at = at + 5
    at = unseen_at + RANKS
    n = state.players
    for k in range(1, n):
        i = (seat + k) % n
        s = state.seats[i]
        show = k < MAX_SEATS
        if show:
            out[at] = 1.0
            out[at + 1] = 1.0 if s.place is None else 0.0
            out[at + 2] = 1.0 if state.to_move == i else 0.0
            out[at + 3] = len(s.hand) / 8
            out[at + 4 + 2 * RANKS] = s.face_down_count / 4
            out[at + 5 + 2 * RANKS] = 0.0 if s.place is None else s.place / n
        for c in s.known:
            r = (c >> 2) - 2
            unseen[r] -= 1
            if show:
                out[at + 4 + r] += 0.25
        if not setup:
            for st in s.face_up:
                for c in st:
                    r = (c >> 2) - 2
                    unseen[r] -= 1
                    if show:
                        out[at + 4 + RANKS + r] += 0.25
        at += SEAT_FEATURES
    for r in range(RANKS):
        if unseen[r] > 0:
            out[unseen_at + r] = unseen[r] / 4
    return out
