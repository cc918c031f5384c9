"""The rules of play: deal, legal actions, and the pure transition function.

``new_game`` deals from a seed; ``legal_actions`` lists what the player to move
may do; ``apply_action`` returns the next state and the events that happened.
Nothing here does I/O or touches global randomness.

Over 500 lines because its three sections (legality, transitions, setup) are one state
machine: they share the private helpers that build a seat and a state, and the ``Final``
constants of the compiled hot path. The golden tests pin what it does.
"""

from __future__ import annotations

import random
from itertools import combinations, groupby
from typing import Final

from .cards import COURT, JOKER, SEVEN, TEN, TWO, make_deck
from .model import (
    FACE_DOWN, FACE_UP, HAND, Action, Burned, Done, Drew, Event, Flip, Flipped, Forfeited,
    GameOver, GavePile, Leads, PickedUp, PickUp, Play, Played, Result, Reversed, Seat,
    SetFaceUp, SetupChosen, Skipped, Stack, StartCard, State, Surrendered, WentOut,
)
from .records import build
from .rules import Rules, RulesError

DEFAULT_MAX_TURNS: Final = 2000
LEAD_ORDER: Final = (3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 2, JOKER)


class IllegalActionError(ValueError):
    """A well-formed action that the rules do not allow in this state."""


def new_game(rules: Rules, players: int, seed: int, *, max_turns: int = DEFAULT_MAX_TURNS) -> State:
    """Shuffle with ``random.Random(seed)`` and deal; the same inputs give the same game anywhere."""
    return start_game(rules, players, seed, max_turns=max_turns)[0]


def start_game(rules: Rules, players: int, seed: int, *,
               max_turns: int = DEFAULT_MAX_TURNS) -> tuple[State, list[Event]]:
    """:func:`new_game` plus the events of the deal itself (a start card turned, who leads)."""
    if not rules.min_players <= players <= rules.max_players:
        raise RulesError(f"{rules.name} is for {rules.min_players}-{rules.max_players} players, not {players}")
    deck = make_deck(rules.decks_for(players), rules.jokers)
    random.Random(seed).shuffle(deck)
    down, up, hand, has_stock = rules.deal_for(players)
    face_down = [[deck.pop() for _ in range(down)] for _ in range(players)]
    face_up = [[deck.pop() for _ in range(up)] for _ in range(players)]
    hands = [[deck.pop() for _ in range(hand)] for _ in range(players)]
    decide = rules.setup != "none" or rules.stacking
    seats = []
    for i in range(players):
        if rules.setup == "choose":
            seat = Seat(tuple(sorted(hands[i] + face_up[i])), (), tuple(face_down[i]))
        else:
            seat = Seat(tuple(sorted(hands[i])), tuple((c,) for c in face_up[i]), tuple(face_down[i]))
        seats.append(seat._replace(setup="face_up" if decide else ""))
    rest = tuple(deck)
    state = State(rules=rules, seats=tuple(seats), stock=rest if has_stock else (), pile=(), burned=(),
                  set_aside=() if has_stock else rest, to_move=0, phase="setup",
                  max_turns=max_turns, seed=seed)
    if decide:
        return state, []
    return _begin_play(state, [])


# ---------------------------------------------------------------- legality

def effective_top(rules: Rules, pile: tuple[int, ...]) -> int | None:
    """Rank of the card to beat: the topmost card that is not see-through, or None (anything goes)."""
    see = rules.see_through
    for c in reversed(pile):
        r = c >> 2
        if r not in see:
            return None if r == TWO else r
    return None


def can_play(state: State, rank: int, count: int, top: int | None, *, blind: bool = False) -> bool:
    """Whether ``count`` cards of ``rank`` may go on the pile whose card to beat is ``top``.

    ``blind`` is a face-down flip, judged on rank alone (a set-size requirement cannot apply to one card).
    """
    rules = state.rules
    if rank == TEN:
        return rules.ten_on_court or top not in COURT
    if rank in rules.wild or top is None:
        return True
    if rules.match_count and not blind and count < state.need:
        return False
    if state.descending:
        return rank <= top
    if top == SEVEN and rules.seven in ("at_most", "at_most_or_8", "descending"):
        return rank <= SEVEN or (rank == 8 and rules.seven == "at_most_or_8")
    return rank >= top


def _burns(state: State, cards: tuple[int, ...]) -> str | None:
    """Why laying ``cards`` burns the pile, or None."""
    rank = cards[0] >> 2
    if rank == TEN:
        return "ten"
    if state.rules.four_of_a_kind != "off":
        below = 4 - len(cards)  # pile cards that must match to make four (cards are one rank)
        pile = state.pile
        if below <= 0 or (len(pile) >= below and all(c >> 2 == rank for c in pile[-below:])):
            return "four_of_a_kind"
    return None


def legal_actions(state: State) -> tuple[Action, ...]:
    """Everything the player to move may do, in a stable order. Empty only when the game is over."""
    if state.result is not None:
        return ()
    if state.phase == "setup":
        return _setup_actions(state)
    seat = state.seats[state.to_move]
    rules = state.rules
    top = effective_top(rules, state.pile)
    if not seat.hand and not seat.face_up:
        return tuple(_FLIPS[i] for i, c in enumerate(seat.face_down) if c is not None)
    plays: list[Play] = []
    if seat.hand:
        zone = HAND
        hand = seat.hand
        counted = rules.match_count and state.need > 1  # only then does a set's size matter
        i, n = 0, len(hand)
        while i < n:  # hands are sorted, so each rank is one run
            rank = hand[i] >> 2
            j = i + 1
            while j < n and hand[j] >> 2 == rank:
                j += 1
            if counted and rank not in rules.wild:
                run = _run_plays(hand[i:j])
                for k in range(1, j - i + 1):
                    if can_play(state, rank, k, top):
                        plays.append(run[k - 1])
            elif can_play(state, rank, 1, top):
                plays.extend(_run_plays(hand[i:j]))
            i = j
    else:
        zone = FACE_UP
        for rank, group in groupby(sorted(seat.face_up), key=lambda s: s[0] >> 2):
            stacks = list(group)
            choices: list[tuple[int, ...]] = []
            if rules.face_up_multi:  # any one stack or several together: one play per card count
                by_count: dict[int, tuple[int, ...]] = {}
                for m in range(1, len(stacks) + 1):
                    for combo in combinations(sorted(stacks, key=len), m):
                        cards = tuple(c for s in combo for c in s)
                        by_count.setdefault(len(cards), cards)
                choices = list(by_count.values())
            else:
                choices = list({len(s): s for s in stacks}.values())
            for cards in choices:
                if can_play(state, rank, len(cards), top):
                    plays.append(Play(cards, FACE_UP))
    if not rules.burner_out:
        allowed = [p for p in plays if not (len(p.cards) == seat.card_count and _burns(state, p.cards))]
        if allowed or state.pile:
            plays = allowed
    if rules.jokers and rules.joker == "give_pile":
        plays = [q for p in plays for q in _joker_targets(state, p)]
    if state.pile and (not plays or not rules.must_play):
        out: list[Action] = list(plays)
        if zone == FACE_UP and rules.harsh_face_up:
            ranks = {s[0] >> 2: s[0] for s in seat.face_up}
            out.extend(PickUp(c) for c in sorted(ranks.values()))
        else:
            out.append(_PICK_UP)
        return tuple(out)
    return tuple(plays)


# Final module constants live in C statics once compiled, not in the module's dict.
_BUILD: Final = build  # NamedTuple's own __new__ is interpreted Python: every field is passed, kind too
# The classes built every turn, as Final aliases: a C static each, not a module-dict lookup per use.
_SEAT: Final = Seat
_STATE: Final = State
_PLAYED: Final = Played
_DREW: Final = Drew
_BURNED: Final = Burned
_PICKED_UP: Final = PickedUp
_RUN_PLAYS: Final[dict[tuple[int, ...], tuple[Play, ...]]] = {}
_FACE_UP_PATTERNS: Final[dict[tuple[tuple[int, ...], int, bool], tuple[tuple[tuple[int, ...], ...], ...]]] = {}
_PICK_UP: Final = PickUp()
_FLIPS: Final = tuple(Flip(i) for i in range(64))


def _with_hand(seat: Seat, hand: tuple[int, ...], known: tuple[int, ...]) -> Seat:
    """``seat`` with a new hand and known cards: built with records.build, as it happens every turn."""
    return _BUILD(_SEAT, hand, seat.face_up, seat.face_down, known, seat.place, seat.forfeit, seat.setup)


def _run_plays(run: tuple[int, ...]) -> tuple[Play, ...]:
    """The hand plays of one same-rank run: one card, two, ... all of them.

    Plays are immutable and few, so each is built once and shared.
    """
    plays = _RUN_PLAYS.get(run)
    if plays is None:
        plays = _RUN_PLAYS[run] = tuple(Play(run[:k], HAND) for k in range(1, len(run) + 1))
    return plays


def _joker_targets(state: State, play: Play) -> list[Play]:
    if play.cards[0] >> 2 != JOKER:
        return [play]
    return [play._replace(target=i) for i, s in enumerate(state.seats)
            if s.active and i != state.to_move]


def _setup_actions(state: State) -> tuple[Action, ...]:
    seat = state.seats[state.to_move]
    if seat.setup == "stack":
        ranks = {s[0] >> 2 for s in seat.face_up}
        out: list[Action] = []
        for rank, group in groupby(seat.hand, key=lambda c: c >> 2):
            if rank in ranks:
                cards = tuple(group)
                out.extend(Stack(cards[:n]) for n in range(1, len(cards) + 1))
        out.append(Done())
        return tuple(out)
    visible = tuple(sorted(seat.hand + seat.face_up_cards))
    slots = state.rules.deal_for(state.players)[1]
    sizes = tuple(len(tuple(g)) for _, g in groupby(visible, key=lambda c: c >> 2))
    stacking = state.rules.stacking and len(sizes) >= slots  # too few ranks for one stack each: singles
    return tuple(SetFaceUp(tuple(tuple(visible[p] for p in stack) for stack in choice))
                 for choice in _face_up_patterns(sizes, slots, stacking))


def _face_up_patterns(sizes: tuple[int, ...], slots: int, stacking: bool) -> tuple[tuple[tuple[int, ...], ...], ...]:
    """:func:`_face_up_choices` over positions in the sorted visible cards, for rank groups of ``sizes``.

    Every deal of a rule set has the same few shapes, so each is enumerated once.
    """
    key = (sizes, slots, stacking)
    hit = _FACE_UP_PATTERNS.get(key)
    if hit is None:
        groups, start = [], 0
        for size in sizes:
            groups.append(tuple(range(start, start + size)))
            start += size
        hit = _FACE_UP_PATTERNS[key] = tuple(_face_up_choices(groups, slots, stacking))
    return hit


def _face_up_choices(groups: list[tuple[int, ...]], slots: int, stacking: bool):
    """Every distinct way (by rank) to fill ``slots`` face-up places from the visible cards."""
    if slots == 0:
        yield ()
        return
    if not groups:
        return
    first, rest = groups[0], groups[1:]
    if stacking:  # one stack per rank, any number of its cards
        yield from _face_up_choices(rest, slots, stacking)
        for n in range(1, len(first) + 1):
            for tail in _face_up_choices(rest, slots - 1, stacking):
                yield (first[:n],) + tail
    else:  # singles: take 0..n cards of this rank
        for n in range(0, min(len(first), slots) + 1):
            for tail in _face_up_choices(rest, slots - n, stacking):
                yield tuple((c,) for c in first[:n]) + tail


# ---------------------------------------------------------------- transitions

def apply_action(state: State, action: Action, *, check: bool = True) -> tuple[State, list[Event]]:
    """The state after ``action`` and the events it caused.

    ``check=False`` skips the legality test for callers that took ``action`` from
    :func:`legal_actions` themselves (the referee and simulations).
    """
    if check and action not in legal_actions(state):
        raise IllegalActionError(f"{action!r} is not legal for seat {state.to_move} now")
    events: list[Event] = []
    if isinstance(action, Play):
        state = _play(state, action.cards, action.zone, action.target, events)
    elif isinstance(action, PickUp):
        state = _pick_up(state, action.surrender, events)
    elif isinstance(action, Flip):
        state = _flip(state, action.position, events)
    else:
        state = _setup(state, action, events)
    return state, events


def _remove(cards: tuple[int, ...], gone: tuple[int, ...]) -> tuple[int, ...]:
    out = list(cards)
    for c in gone:
        out.remove(c)
    return tuple(out)


def _drop(cards: tuple[int, ...], gone: tuple[int, ...]) -> tuple[int, ...]:
    """Sorted ``cards`` less one copy of each card of sorted ``gone`` that it holds.

    One pass over the cards, one slice-and-join: it runs on every play, on hands and
    known cards that random play grows to dozens.
    """
    lo, n = 0, len(cards)
    first, last = gone[0], gone[-1]
    while lo < n and cards[lo] < first:
        lo += 1
    keep: list[int] = []
    hi, g, m = lo, 0, len(gone)
    while hi < n and cards[hi] <= last:
        c = cards[hi]
        while g < m and gone[g] < c:
            g += 1
        if g < m and gone[g] == c:
            g += 1
        else:
            keep.append(c)
        hi += 1
    if len(keep) == hi - lo:
        return cards
    return cards[:lo] + tuple(keep) + cards[hi:]


def _take_face_up(face_up: tuple[tuple[int, ...], ...], cards: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    left = list(face_up)
    for c in cards:
        for k, s in enumerate(left):
            if c in s:
                left[k] = _remove(s, (c,))
                break
    return tuple(s for s in left if s)


def _draw(state: State, seat: Seat, i: int, events: list[Event]) -> tuple[State, Seat]:
    n = state.rules.hand_size - len(seat.hand)
    if n <= 0 or not state.stock:
        return state, seat
    drawn = state.stock[-n:]
    events.append(Drew(i, drawn))
    return state._replace(stock=state.stock[:-n]), seat._replace(hand=tuple(sorted(seat.hand + drawn)))


def _play(state: State, cards: tuple[int, ...], zone: str, target: int | None,
          events: list[Event], flipped: bool = False) -> State:
    # The hot path of every simulation: fields are computed first and the state is
    # rebuilt once in _next_turn, rather than copied after each change.
    rules = state.rules
    i = state.to_move
    seats = state.seats
    seat = seats[i]
    hand, face_up, known = seat.hand, seat.face_up, seat.known  # the seat is rebuilt once, below
    if zone == HAND:
        hand = _drop(hand, cards)
        if len(hand) + len(cards) != len(seat.hand):
            raise IllegalActionError(f"seat {i} does not hold {cards}")
        if known:
            known = _drop(known, cards)
    elif zone == FACE_UP:
        face_up = _take_face_up(face_up, cards)
    if not flipped:
        events.append(_BUILD(_PLAYED, i, cards, zone, "played"))
    rank = cards[0] >> 2
    burn = _burns(state, cards)
    pile = state.pile + cards
    need, descending, burned = state.need, state.descending, state.burned
    if rank == JOKER and target is not None:
        t = seats[target]
        seats = _set(seats, target, t._replace(hand=tuple(sorted(t.hand + pile)), known=tuple(sorted(t.known + pile))))
        events.append(GavePile(i, target, pile))
        pile, need, descending, burn = (), 0, False, None  # the pile went to a hand: nothing burned
    elif burn:
        events.append(_BUILD(_BURNED, pile, burn, "burned"))
        burned = burned + pile
        pile, need, descending = (), 0, False
    elif rank in rules.see_through:
        descending = descending and rank not in rules.wild
    elif rank in rules.wild:
        need, descending = 0, False
    else:
        need = len(cards) if rules.match_count else 0
        if rank == SEVEN and rules.seven == "descending":
            descending = True
    stock = state.stock
    short = rules.hand_size - len(hand)
    if short > 0 and stock:
        drawn = stock[-short:]
        stock = stock[:-short]
        events.append(_BUILD(_DREW, i, drawn, "drew"))
        hand = tuple(sorted(hand + drawn))
    went_out = not hand and not face_up and seat.face_down_count == 0
    place = seat.place
    if went_out:
        place = _next_place(state)
        known = ()
        events.append(WentOut(i, place))
    if went_out or hand is not seat.hand or face_up is not seat.face_up:
        seat = _BUILD(_SEAT, hand, face_up, seat.face_down, known, place, seat.forfeit, seat.setup)
        seats = _set(seats, i, seat)
    if went_out:
        state = state._replace(seats=seats, pile=pile, burned=burned, stock=stock, need=need,
                               descending=descending)
        if _finished(state):  # the action that ends the game counts as a turn like any other
            return _end(state._replace(turn=state.turn + 1), events, "first_out" if not rules.play_on else "played_out")
    again = (burn == "ten" or (burn == "four_of_a_kind" and rules.four_of_a_kind == "burn_again")
             or (rank == TWO and rules.reset_again and not burn))
    skips = 0
    direction = state.direction
    if not burn and target is None:
        if rank in rules.skip:
            skips = len(cards)
        if rank in rules.reverse and len(cards) % 2:
            direction = -direction
            events.append(Reversed(direction))
    if again and not went_out:
        nxt = i
    else:
        nxt = _advance(seats, direction, i, 1)
        for _ in range(skips):
            events.append(Skipped(nxt))
            nxt = _advance(seats, direction, nxt, 1)
    return _next_turn(state, nxt, bool(burn) or went_out, events, seats=seats, pile=pile, burned=burned,
                      stock=stock, need=need, descending=descending, direction=direction)


def _pick_up(state: State, surrender: int | None, events: list[Event]) -> State:
    i = state.to_move
    seat = state.seats[i]
    pile = state.pile
    if surrender is not None:
        seat = seat._replace(face_up=_take_face_up(seat.face_up, (surrender,)))
        events.append(Surrendered(i, surrender))
        pile = pile + (surrender,)
    seat = _with_hand(seat, tuple(sorted(seat.hand + pile)), tuple(sorted(seat.known + pile)))
    events.append(_BUILD(_PICKED_UP, i, pile, "picked_up"))
    return _next_turn(state, _advance(state.seats, state.direction, i, 1), False, events,
                      seats=_set(state.seats, i, seat), pile=(), need=0, descending=False)


def _flip(state: State, position: int, events: list[Event]) -> State:
    i = state.to_move
    seat = state.seats[i]
    c = seat.face_down[position]
    assert c is not None
    seat = seat._replace(face_down=seat.face_down[:position] + (None,) + seat.face_down[position + 1:])
    state = state._replace(seats=_set(state.seats, i, seat))
    legal = can_play(state, c >> 2, 1, effective_top(state.rules, state.pile), blind=True)
    if legal and not state.rules.burner_out and seat.card_count == 0 and _burns(state, (c,)):
        legal = False
    events.append(Flipped(i, position, c, legal))
    if legal:
        return _play(state, (c,), FACE_DOWN, None, events, flipped=True)
    taken = state.pile + (c,)
    seat = seat._replace(hand=tuple(sorted(seat.hand + taken)), known=tuple(sorted(seat.known + taken)))
    events.append(PickedUp(i, taken))
    state = state._replace(seats=_set(state.seats, i, seat), pile=(), need=0, descending=False)
    return _next_turn(state, _advance(state.seats, state.direction, i, 1), False, events)


def _next_turn(state: State, nxt: int, progress: bool, events: list[Event], *, seats: tuple[Seat, ...] | None = None,
               pile: tuple[int, ...] | None = None, burned: tuple[int, ...] | None = None,
               stock: tuple[int, ...] | None = None, need: int | None = None,
               descending: bool | None = None, direction: int | None = None) -> State:
    stale = 0 if progress else state.stale + 1
    # built directly: NamedTuple._replace costs several times a constructor call, on every turn
    state = _BUILD(_STATE, state.rules, state.seats if seats is None else seats,
                   state.stock if stock is None else stock, state.pile if pile is None else pile,
                   state.burned if burned is None else burned, state.set_aside, nxt,
                   state.direction if direction is None else direction, state.phase, state.turn + 1, stale,
                   state.need if need is None else need, state.descending if descending is None else descending,
                   state.max_turns, state.result, state.seed)
    limit = state.rules.stale_turns
    if limit is not None and stale >= limit:
        return _end(state, events, "stale_draw")
    if state.turn >= state.max_turns:
        return _end(state, events, "turn_cap")
    return state


def _set(seats: tuple[Seat, ...], i: int, seat: Seat) -> tuple[Seat, ...]:
    if len(seats) == 2:  # the most common table, in one allocation instead of three
        return (seat, seats[1]) if i == 0 else (seats[0], seat)
    return seats[:i] + (seat,) + seats[i + 1:]


def _advance(seats: tuple[Seat, ...], d: int, frm: int, steps: int) -> int:
    """The ``steps``-th seat still in the game after ``frm`` in direction ``d``."""
    n = len(seats)
    j = frm
    for _ in range(steps):
        for _ in range(n):
            j = (j + d) % n
            if seats[j].place is None:
                break
    return j


def _next_place(state: State) -> int:
    return 1 + sum(1 for s in state.seats if s.place is not None and s.forfeit is None)


def _finished(state: State) -> bool:
    active = sum(1 for s in state.seats if s.place is None)
    if active <= 1:
        return True
    return not state.rules.play_on and any(s.place is not None and s.forfeit is None for s in state.seats)


def _end(state: State, events: list[Event], reason: str) -> State:
    """Close the game: players still holding cards share the places between the finished and the forfeited."""
    draw = reason in ("stale_draw", "turn_cap")
    placed = sorted((s.place, i) for i, s in enumerate(state.seats) if s.place is not None)
    top = tuple((i,) for p, i in placed if state.seats[i].forfeit is None)
    bottom = tuple((i,) for p, i in placed if state.seats[i].forfeit is not None)
    left = tuple(i for i, s in enumerate(state.seats) if s.place is None)
    order = top + ((left,) if left else ()) + bottom
    # A draw ties the seats still holding cards (every place is then known); a first-out
    # game leaves them unranked among themselves.
    complete = draw or len(left) <= 1
    result = Result(reason, order, complete, draw)
    events.append(GameOver(result))
    return state._replace(phase="over", result=result)


def forfeit(state: State, seat: int, reason: str) -> tuple[State, list[Event]]:
    """Remove a seat whose bot failed: it takes the last place still free; the others play on.

    Its cards leave the game unseen. This is the referee's tool; the rules never call it.
    """
    s = state.seats[seat]
    if state.result is not None or s.place is not None:
        return state, []
    events: list[Event] = [Forfeited(seat, reason)]
    gone = s.hand + s.face_up_cards + tuple(c for c in s.face_down if c is not None)
    fallen = sum(1 for x in state.seats if x.forfeit is not None)
    s = Seat((), (), tuple(None for _ in s.face_down), (), state.players - fallen, reason, "")
    state = state._replace(seats=_set(state.seats, seat, s), set_aside=state.set_aside + gone)
    if sum(1 for x in state.seats if x.place is None) <= 1:
        return _end(state, events, "forfeit"), events
    if state.phase == "setup":
        if state.to_move == seat:
            return _next_setup(state, events), events
        return state, events
    if state.to_move == seat:
        state = state._replace(to_move=_advance(state.seats, state.direction, seat, 1))
    return state, events


# ---------------------------------------------------------------- setup

def _setup(state: State, action: Action, events: list[Event]) -> State:
    i = state.to_move
    seat = state.seats[i]
    if isinstance(action, SetFaceUp):
        chosen = tuple(c for s in action.stacks for c in s)
        visible = tuple(sorted(seat.hand + seat.face_up_cards))
        seat = seat._replace(hand=_remove(visible, chosen), face_up=action.stacks)
        events.append(SetupChosen(i, action.stacks))
    elif isinstance(action, Stack):
        rank = action.cards[0] >> 2
        stacks = list(seat.face_up)
        k = next(k for k, s in enumerate(stacks) if s[0] >> 2 == rank)  # the first stack of that rank
        stacks[k] += action.cards
        seat = seat._replace(hand=_remove(seat.hand, action.cards), face_up=tuple(stacks))
        events.append(SetupChosen(i, seat.face_up))
    elif isinstance(action, Done):
        state = state._replace(seats=_set(state.seats, i, seat._replace(setup="")))
        return _next_setup(state, events)
    if state.rules.stacking:
        state, seat = _draw(state, seat, i, events)
        stack_ranks = {s[0] >> 2 for s in seat.face_up}
        more = any(c >> 2 in stack_ranks for c in seat.hand)
        seat = seat._replace(setup="stack" if more else "")
    else:
        seat = seat._replace(setup="")
    state = state._replace(seats=_set(state.seats, i, seat))
    return _next_setup(state, events)


def _next_setup(state: State, events: list[Event]) -> State:
    for j in range(state.players):
        k = (state.to_move + j) % state.players
        if state.seats[k].setup and state.seats[k].place is None:
            return state._replace(to_move=k)
    state, _ = _begin_play(state, events)
    return state


def _begin_play(state: State, events: list[Event]) -> tuple[State, list[Event]]:
    rules = state.rules
    state = state._replace(phase="play", to_move=_first_active(state, 0))
    if rules.start == "stock_card":
        stock, burned = state.stock, state.burned
        while stock:
            c = stock[-1]
            stock = stock[:-1]
            gone = (c >> 2) in (TEN, JOKER)
            events.append(StartCard(c, gone))
            if gone:
                burned += (c,)
                continue
            state = state._replace(pile=(c,), descending=(c >> 2 == SEVEN and rules.seven == "descending"))
            break
        state = state._replace(stock=stock, burned=burned)
        events.append(Leads(state.to_move, "left of the dealer, on the start card"))
    elif rules.start == "lowest_card":
        seat, why = _lowest_card_leader(state)
        state = state._replace(to_move=seat)
        events.append(Leads(seat, why))
    else:
        events.append(Leads(state.to_move, "left of the dealer"))
    return state, events


def _first_active(state: State, frm: int) -> int:
    for j in range(state.players):
        if state.seats[(frm + j) % state.players].place is None:
            return (frm + j) % state.players
    return frm


def _lowest_card_leader(state: State) -> tuple[int, str]:
    """003: the first face-up 3 leads, else the first 3 in hand, then the same on 4s and up."""
    from .cards import RANK_NAMES
    live = [i for i, s in enumerate(state.seats) if s.place is None]
    for rank in LEAD_ORDER:
        for i in live:
            if any(c >> 2 == rank for c in state.seats[i].face_up_cards):
                return i, f"first face-up {RANK_NAMES[rank]}"
        for i in live:
            if any(c >> 2 == rank for c in state.seats[i].hand):
                return i, f"first {RANK_NAMES[rank]} in hand"
    return live[0], "first seat"
