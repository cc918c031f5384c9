"""A fixed-size observation for learning agents, and the action mask over the fixed space
of :mod:`arena.envs.actions`.

Both are built from what a bot is sent (the request's ``view`` and ``actions``), never
from the engine's state, so a policy trained in :mod:`arena.envs` computes the same
inputs when it plays as a bot (``encode_state``, the environments' fast path, is checked
against ``encode``). Needs numpy.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from arena.engine.cards import JOKER, RANK_CHARS, make_deck
from arena.engine.game import effective_top
from arena.engine.resample import card_of
from arena.engine.rules import Rules

from .actions import MAX_SEATS, N_ACTIONS, RANKS, json_index

SEAT_FEATURES = 4 + 2 * RANKS + 2
N_FEATURES = 2 * RANKS + 1 + (RANKS + 1) + 3 + RANKS + RANKS + 5 + RANKS + (MAX_SEATS - 1) * SEAT_FEATURES
_TOP = {ch: r - 1 for r, ch in RANK_CHARS.items()}  # the view's pile_top (a rank letter) -> 1..14


def request_mask(actions: list[dict[str, Any]]) -> tuple[np.ndarray, dict[int, int]]:
    """(mask over the fixed space, index -> the request's action id)."""
    mask = np.zeros(N_ACTIONS, dtype=np.int8)
    ids = {}
    for pos, a in enumerate(actions):
        k = json_index(a, pos)
        mask[k] = 1
        ids[k] = a["id"]
    return mask, ids


def _counts(out: np.ndarray, at: int, cards, scale: float = 0.25) -> None:
    for t in cards:
        out[at + (card_of(t) >> 2) - 2] += scale


def encode(view: dict[str, Any], rules: Rules, players: int) -> np.ndarray:
    """The view as ``N_FEATURES`` floats: card counts by rank (a quarter per card), sizes, flags.

    Seats are listed from the viewer's left, so a policy sees the table the same way
    from every seat. Unseen cards (the deck less everything visible) are counted too.
    """
    out = np.zeros(N_FEATURES, dtype=np.float32)
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
    out[at:at + 5] = (view["stock"] / 16, view["set_aside"] / 16, view["phase"] == "setup",
                      view["phase"] == "play", view["direction"] == 1)
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
        out[at:at + 4] = (1.0, p["place"] is None, view["to_move"] == p["seat"], p["hand_count"] / 8)
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


def encode_state(state, seat: int) -> np.ndarray:
    """:func:`encode` of ``seat_view(state, seat)``, read straight from the engine state (the
    environments' fast path). It reads only what the view shows; a test checks both agree.

    Card counts go into a Python list that becomes an array once (``np.fromiter``): a
    numpy call costs more than counting a few dozen cards.
    """
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
    return np.fromiter(out, np.float32, N_FEATURES)  # several times faster than np.array on a list
