"""A fast heuristic over engine states and actions: the rollout policy of the search bots
and the play of the ``heuristic-setup`` bot.

It reads only what the seat to move could see (its own hand, table cards, counts, the
pile), so running it on a determinized state gives the same choice as on the real one.
It is called for every move of every simulated game, hence the plain loops and the
per-rules cache instead of anything clever.
"""

from __future__ import annotations

from arena.engine.game import can_play

from .setup_table import SetupTable, default_table

JOKER, TEN, TWO = 15, 10, 2

# Weights of the play score. Tried against lowest-first on duplicate deals: none of the
# variations measured (see docs/BOTS.md) moved the result beyond noise except 'stuck',
# which removed the turn-cap draws that deterministic play falls into.
W = {
    "low": 10.0,      # per keep step: lower cards go first
    "multi": 3.0,     # per card laid: sets leave together
    "power": 100.0,   # penalty for spending a 2, 10 or joker
    "ten_pile": 6.0,  # per pile card (up to 12) when a 10 would burn it
    "block": 150.0,   # the next player's face-up cards cannot answer this play
    "blind": 8.0,     # per keep step when the next player must flip blind
    "trap": 40.0,     # no card the next player is known to hold answers this play
    "four": 250.0,    # completing four of a kind
    "endgame": 4.0,   # per hand card laid once the stock is empty
    "stuck": 60,      # turns without a burn or anyone out before play turns random-ish
}

_CACHE: dict[int, tuple] = {}


def _keep_values(rules) -> tuple:
    """(rules, keep[rank]) where keep orders cards from 'play first' to 'save for later'.

    Ladder cards keep their rank; cards that go on anything (2, 10, jokers, see-through
    threes, glass sevens) sit above the ladder because they rescue a hopeless pile.
    """
    hit = _CACHE.get(id(rules))
    if hit is not None and hit[0] is rules:
        return hit
    keep = [0] * 16
    for r in range(3, 15):
        keep[r] = r - 2  # 1 .. 12
    for r in rules.wild:
        keep[r] = 15
    keep[TWO] = 16
    keep[TEN] = 17
    keep[JOKER] = 18
    hit = (rules, keep)
    if len(_CACHE) > 64:
        _CACHE.clear()
    _CACHE[id(rules)] = hit
    return hit


def _next_active(state, i: int) -> int:
    n, d, seats = len(state.seats), state.direction, state.seats
    j = i
    for _ in range(n):
        j = (j + d) % n
        if seats[j].place is None:
            return j
    return i


def heuristic_action(state, actions, table: SetupTable | None = None):
    """The heuristic's choice among ``actions`` (the engine's legal actions for ``state``)."""
    if len(actions) == 1:
        return actions[0]
    first = actions[0]
    kind = first.kind
    if kind in ("set_face_up", "stack", "done"):
        return setup_choice(state.rules, actions, table)
    if kind == "flip":
        return first  # blind: every position is alike to the player
    if state.stale > W["stuck"]:
        # deterministic play can cycle (pick up, play back, pick up...): vary it a little,
        # pseudo-randomly by turn so that the same position is not answered the same way
        h = (state.turn * 2654435761) & 0xFFFFFF
        if h % 3 == 0:
            return actions[(h >> 4) % len(actions)]
    rules, keep = _keep_values(state.rules)
    me = state.to_move
    pile = state.pile
    nxt = state.seats[_next_active(state, me)]
    block = not nxt.hand  # the next player plays from the table: make the pile hard
    nxt_up = {st[0] >> 2 for st in nxt.face_up} if block else ()
    known_frac = len(nxt.known) / len(nxt.hand) if nxt.hand and W["trap"] else 0.0
    nxt_known = {c >> 2 for c in nxt.known} if known_frac else ()
    stock_left = len(state.stock)
    burn4 = rules.four_of_a_kind != "off"
    run_rank = pile[-1] >> 2 if pile else -1
    run = 0
    if burn4 and pile:
        for c in reversed(pile):
            if c >> 2 != run_rank:
                break
            run += 1
    best = None
    best_score = -1e9
    pickup = None
    for a in actions:
        if a.kind != "play":
            if a.kind == "pick_up":
                # harsh rule: surrender the lowest face-up card (it comes back to hand anyway)
                if pickup is None or (a.surrender is not None and keep[a.surrender >> 2] < keep[pickup.surrender >> 2]):
                    pickup = a
            continue
        cards = a.cards
        r = cards[0] >> 2
        k = len(cards)
        kv = keep[r]
        s = -kv * W["low"] + k * W["multi"]
        if kv >= 15:  # a power card: worth spending on a big pile, otherwise keep it
            s -= W["power"]
            if r == TEN:
                s += min(len(pile), 12) * W["ten_pile"]
        if known_frac and kv < 15 and not any(can_play(state, q, 1, r) for q in nxt_known):
            s += W["trap"] * known_frac * known_frac
        if kv < 15 and block:
            if nxt_up:
                if not any(can_play(state, q, 1, r) for q in nxt_up):
                    s += W["block"]
            elif nxt.face_down_count:
                s += kv * W["blind"]
        if burn4 and r == run_rank and run + k >= 4:
            s += W["four"] if kv < 15 else W["four"] * 0.25
        if not stock_left and a.zone == "hand":
            s += k * W["endgame"]
        if a.target is not None:  # give the pile to whoever is closest to going out
            t = state.seats[a.target]
            s += 30.0 - t.card_count
        if s > best_score:
            best, best_score = a, s
    if best is None:
        return pickup if pickup is not None else first
    return best


def setup_choice(rules, actions, table: SetupTable | None = None):
    """Setup decisions need no state: the table picks face-up cards; stacking takes all it can."""
    if actions[0].kind == "set_face_up":
        return (table or default_table()).choose_face_up(rules, actions)
    stacks = [a for a in actions if a.kind == "stack"]
    return max(stacks, key=lambda a: len(a.cards)) if stacks else actions[-1]


def make_policy(table: SetupTable | None = None):
    """``policy(state, actions) -> action`` bound to a setup table."""
    def policy(state, actions):
        return heuristic_action(state, actions, table)
    return policy

