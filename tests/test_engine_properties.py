"""Property tests: random games under every preset, player count and some random option sets.

A "random game" is a seeded uniform choice among ``legal_actions`` at every step
(optionally, most of the time, the lowest plain play instead, so that games
reach their endgames within a short cap). At every step the invariants below are checked against the full state:

* the game ends, within ``max_turns`` actions of play;
* every card is somewhere: hands, face-up, face-down, pile, stock, burned and
  set-aside together are exactly the deck that was shuffled;
* ``legal_actions`` is never empty while the game is on, and no two legal actions
  have the same JSON (the protocol names actions by JSON);
* a seat's view shows only what that seat may see: it equals the view of any state
  that differs only in cards hidden from that seat (shuffled among themselves), and
  every card it names is in a zone the seat may see;
* ``event_for(event, seat)`` never shows another seat's drawn cards or setup
  choice, and every card it names is visible to that seat afterwards;
* ``known`` (the publicly seen hand cards) follows from public events alone;
* ``to_position``/``from_position`` round-trip, through JSON text;
* the same seed and the same choices give the same game.
"""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arena.engine import PRESETS, Rules, apply_action, legal_actions, new_game
from arena.engine.cards import card_str, make_deck
from arena.engine.model import HAND, State
from arena.engine.rules import RulesError
from arena.engine.views import action_json, event_for, from_position, seat_view, to_position

FAST = settings(max_examples=12, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow])

# Every preset at every player count it allows, plus the 003 six-player jokers deal.
CONFIGS = [(name, n) for name, r in PRESETS.items() for n in range(r.min_players, r.max_players + 1)]
SIX_JOKERS = PRESETS["shithead"].replace(name="shithead+jokers", jokers=2, max_players=6)


def _all_cards(s: State) -> Counter:
    cards = [*s.stock, *s.pile, *s.burned, *s.set_aside]  # one Counter of one list: checked every step
    for seat in s.seats:
        cards += seat.hand
        cards += seat.face_up_cards
        cards += [x for x in seat.face_down if x is not None]
    return Counter(cards)


def _view_cards(view: dict) -> Counter:
    """Every card string a seat view names."""
    out: Counter = Counter()

    def walk(x):
        if isinstance(x, str):
            if len(x) == 2 and x != "up" and x[0] in "23456789TJQKAX":
                out[x] += 1
        elif isinstance(x, dict):
            for k, v in x.items():
                if k not in ("phase", "pile_top", "zone", "why", "reason", "kind", "forfeit", "from"):
                    walk(v)
        elif isinstance(x, (list, tuple)):
            for v in x:
                walk(v)
    if "players" in view:  # a seat view: its own entry in "players" repeats its face-up and known cards
        for p in view["players"]:
            if p["seat"] != view["seat"]:
                walk(p["face_up"])
                walk(p["known_hand"])
        assert set(view) == _VIEW_KEYS, "a new view field: teach _view_cards about it"
        walk([view["hand"], view["face_up"], view["pile"], view["burned"]])
        return out
    walk(view)
    return out


_VIEW_KEYS = {"seat", "phase", "to_move", "turn", "direction", "hand", "face_up", "face_down", "players",
              "pile", "pile_top", "need", "descending", "stock", "burned", "set_aside"}


def _visible(s: State, seat: int) -> Counter:
    """The cards ``seat`` may see now, as a multiset."""
    me = s.seats[seat]
    cards = [*me.hand, *me.face_up_cards, *s.pile, *s.burned]
    for j, other in enumerate(s.seats):
        if j != seat:
            cards += other.known
            if s.phase != "setup":
                cards += other.face_up_cards
    return Counter({card_str(k): v for k, v in Counter(cards).items()})


def _shuffle_hidden(s: State, seat: int, rng: random.Random) -> State:
    """The same state with every card hidden from ``seat`` dealt again among the hidden places."""
    hidden: list[int] = list(s.stock) + list(s.set_aside)
    for j, other in enumerate(s.seats):
        hidden += [c for c in other.face_down if c is not None]
        if j != seat:
            rest = Counter(other.hand) - Counter(other.known)
            hidden += list(rest.elements())
            if s.phase == "setup":
                hidden += list(other.face_up_cards)
    rng.shuffle(hidden)
    it = iter(hidden)
    seats = []
    for j, other in enumerate(s.seats):
        down = tuple(None if c is None else next(it) for c in other.face_down)
        hand, up = other.hand, other.face_up
        if j != seat:
            n = len(other.hand) - len(other.known)
            hand = tuple(sorted(other.known + tuple(next(it) for _ in range(n))))
            if s.phase == "setup":
                up = tuple(tuple(next(it) for _ in st_) for st_ in other.face_up)
        seats.append(other._replace(hand=hand, face_up=up, face_down=down))
    stock = tuple(next(it) for _ in s.stock)
    aside = tuple(next(it) for _ in s.set_aside)
    return s._replace(seats=tuple(seats), stock=stock, set_aside=aside)


def _track_known(known: list[Counter], events) -> None:
    """What everyone has seen arrive in each hand, from the public record alone."""
    for e in events:
        if e.kind == "picked_up":
            known[e.seat].update(e.cards)
        elif e.kind == "gave_pile":
            known[e.target].update(e.cards)
        elif e.kind == "played" and e.zone == HAND:
            known[e.seat] -= Counter(e.cards)
        elif e.kind in ("went_out", "forfeited"):
            known[e.seat] = Counter()


def _check_step(s: State, deck: Counter, rng: random.Random, visible: list[Counter] | None = None) -> None:
    """``visible``: each seat's ``_visible(s, seat)``, where the caller has them already."""
    assert _all_cards(s) == deck, "cards appeared or vanished"
    assert s.turn <= s.max_turns
    for seat in s.seats:
        assert not Counter(seat.known) - Counter(seat.hand), "known cards not in hand"
        assert all(stack and len({c >> 2 for c in stack}) == 1 for stack in seat.face_up)
    # positions round-trip, through JSON text
    text = json.dumps(to_position(s))
    assert from_position(json.loads(text)) == s
    # views
    for i in range(s.players):
        view = seat_view(s, i)
        assert not _view_cards(view) - (_visible(s, i) if visible is None else visible[i]), \
            f"seat {i} sees a hidden card"
        assert view["hand"] == [card_str(c) for c in s.seats[i].hand]
        if s.phase == "setup":
            assert all(p["face_up"] is None for p in view["players"] if p["seat"] != i)
        assert seat_view(_shuffle_hidden(s, i, rng), i) == view, f"seat {i}'s view depends on hidden cards"


def _choose(state: State, acts, rng: random.Random, eager: float) -> int:
    """Uniform with ``eager=0``; otherwise, with probability ``eager``, the lowest plain play
    (a sensible player's habit, so that games reach their endgames within a short cap)."""
    if rng.random() < eager:
        wild = state.rules.wild
        plays = [(a.cards[0] >> 2 in wild, a.cards[0] >> 2, rng.random(), k)
                 for k, a in enumerate(acts) if a.kind == "play"]
        if plays:
            return min(plays)[3]
    return rng.randrange(len(acts))


def play_random(rules: Rules, players: int, seed: int, choices: int, *, eager: float = 0.0,
                max_turns: int = 2000, check: bool = True):
    """Play one random game; return (final state, choice indices, omniscient log)."""
    state = new_game(rules, players, seed, max_turns=max_turns)
    deck = Counter(make_deck(rules.decks_for(players), rules.jokers))
    rng = random.Random(choices)
    known = [Counter() for _ in range(players)]
    picks: list[int] = []
    record: list[dict] = []
    steps = 0
    visible: list[Counter] = []  # what each seat may see of the state now, computed once for its checks
    if check:
        visible = [_visible(state, i) for i in range(players)]
        _check_step(state, deck, rng, visible)
    while not state.over:
        acts = legal_actions(state)
        assert acts, "no legal action in an unfinished game"
        k = _choose(state, acts, rng, eager)
        picks.append(k)
        state, events = apply_action(state, acts[k], check=False)
        record += [event_for(e, None) for e in events]
        steps += 1
        assert steps <= max_turns + players * 20, "the game does not end"
        if not check:
            continue
        assert len({json.dumps(action_json(a), sort_keys=True) for a in acts}) == len(acts)
        _track_known(known, events)
        assert [Counter(s.known) for s in state.seats] == [+k_ for k_ in known]
        visible_before, visible = visible, [_visible(state, i) for i in range(players)]
        _check_step(state, deck, rng, visible)
        for i in range(players):
            seen = visible[i] | visible_before[i]
            for e in events:
                j = event_for(e, i)
                if e.kind == "drew" and e.seat != i:
                    assert "cards" not in j
                if e.kind == "setup" and e.seat != i:
                    assert "face_up" not in j
                assert not _view_cards(j) - seen, f"event {j} shows seat {i} a hidden card"
    assert state.turn <= max_turns
    assert sorted(x for g in state.result.order for x in g) == list(range(players))
    return state, picks, record


def replay(rules: Rules, players: int, seed: int, picks: list[int], max_turns: int = 2000):
    state = new_game(rules, players, seed, max_turns=max_turns)
    record = []
    for k in picks:
        state, events = apply_action(state, legal_actions(state)[k])
        record += [event_for(e, None) for e in events]
    return state, record


# ---------------------------------------------------------------- every preset, every size

@pytest.mark.parametrize("name,players", CONFIGS, ids=[f"{n}-{p}" for n, p in CONFIGS])
@FAST
@given(seed=st.integers(0, 2**32 - 1), choices=st.integers(0, 2**32 - 1))
def test_random_games_end(name, players, seed, choices):
    """Uniformly random play always ends within the cap, with a result naming every seat once."""
    rules = PRESETS[name]
    state, _, _ = play_random(rules, players, seed, choices, check=False)
    assert state.over and state.turn <= state.max_turns
    assert state.result.reason in ("first_out", "played_out", "stale_draw", "turn_cap")
    if state.result.reason in ("stale_draw", "turn_cap"):
        assert state.result.draw
    if state.result.reason == "stale_draw":
        assert rules.stale_turns is not None


@pytest.mark.parametrize("name,players", CONFIGS, ids=[f"{n}-{p}" for n, p in CONFIGS])
@settings(FAST, max_examples=1)
@given(seed=st.integers(0, 2**32 - 1), choices=st.integers(0, 2**32 - 1),
       eager=st.sampled_from([0.0, 0.9]))
def test_invariants_every_step(name, players, seed, choices, eager):
    """Cards, views, events, positions and determinism, checked after every action. One game a
    preset and size (these checks are most of the file's time; test_random_option_sets plays 30
    more games under them). Each bug planted to size this failed games here with one example:
    a whole hand shown in another seat's view (21 of the 23 games of this test and the next), a
    multi-card draw left unredacted (17), the stale-turn count lost in a position's round trip
    (23), a card lost from a two-card draw near the stock's end (4)."""
    rules = PRESETS[name]
    state, picks, record = play_random(rules, players, seed, choices, eager=eager, max_turns=250)
    again, record2 = replay(rules, players, seed, picks, max_turns=250)
    assert again == state and record2 == record


@settings(FAST, max_examples=2)
@given(seed=st.integers(0, 2**32 - 1), choices=st.integers(0, 2**32 - 1))
def test_six_players_with_jokers(seed, choices):
    """003's six-player table: two jokers in, 54 cards, 9 each and no stock."""
    state = new_game(SIX_JOKERS, 6, seed)
    assert len(state.stock) == 0 and len(state.set_aside) == 0
    play_random(SIX_JOKERS, 6, seed, choices, eager=0.9, max_turns=250)


# ---------------------------------------------------------------- random option sets

@st.composite
def option_sets(draw):
    opts = dict(
        setup=draw(st.sampled_from(["choose", "swap", "none"])),
        stacking=draw(st.booleans()),
        start=draw(st.sampled_from(["stock_card", "left_of_dealer", "lowest_card"])),
        three=draw(st.sampled_from(["plain", "see_through"])),
        seven=draw(st.sampled_from(["plain", "at_most", "at_most_or_8", "descending", "glass"])),
        eight=draw(st.sampled_from(["plain", "skip", "see_through", "reverse"])),
        jokers=draw(st.sampled_from([0, 1, 2])),
        joker=draw(st.sampled_from(["reverse", "give_pile"])),
        ten_on_court=draw(st.booleans()),
        four_of_a_kind=draw(st.sampled_from(["off", "burn_next", "burn_again"])),
        reset_again=draw(st.booleans()),
        match_count=draw(st.booleans()),
        must_play=draw(st.booleans()),
        face_up_multi=draw(st.booleans()),
        harsh_face_up=draw(st.booleans()),
        burner_out=draw(st.booleans()),
        play_on=draw(st.booleans()),
        stale_turns=draw(st.sampled_from([None, 60])),
        decks=draw(st.sampled_from([1, 1, 2])),
    )
    base = PRESETS[draw(st.sampled_from(sorted(PRESETS)))]
    rules = None
    for fallback in ({}, {"max_players": 5}, {"max_players": 5, "decks": 2}):
        try:
            rules = base.replace(name="random", **{**opts, **fallback})
            break
        except RulesError:  # a deck too small for the table: fewer players, then one more deck
            continue
    assert rules is not None
    players = draw(st.integers(rules.min_players, rules.max_players))
    return rules, players


@settings(FAST, max_examples=30)
@given(rp=option_sets(), seed=st.integers(0, 2**32 - 1), choices=st.integers(0, 2**32 - 1),
       eager=st.sampled_from([0.0, 0.9]))
def test_random_option_sets(rp, seed, choices, eager):
    rules, players = rp
    state, picks, record = play_random(rules, players, seed, choices, eager=eager, max_turns=200)
    again, record2 = replay(rules, players, seed, picks, max_turns=200)
    assert again == state and record2 == record


def test_option_sets_end_uncapped_by_test():
    """A few option sets played to the real cap (2000): the game still ends, by rule or by cap."""
    rng = random.Random(5)
    names = sorted(PRESETS)
    for k in range(6):
        base = PRESETS[names[k % len(names)]]
        rules = base.replace(name="random", three="see_through", seven="descending", eight="skip",
                             jokers=1, joker=rng.choice(["reverse", "give_pile"]), harsh_face_up=True)
        state, _, _ = play_random(rules, 2 + k % 3, k, k + 100, check=False)
        assert state.over and state.turn <= 2000


# ---------------------------------------------------------------- forfeits in random games

@settings(FAST, max_examples=8)
@given(seed=st.integers(0, 2**32 - 1), choices=st.integers(0, 2**32 - 1),
       name=st.sampled_from(sorted(PRESETS)), players=st.integers(3, 5),
       when=st.integers(0, 60))
def test_random_forfeits_keep_the_books(seed, choices, name, players, when):
    """A seat removed mid-game: its cards go to set_aside, the rest play on, every card is kept."""
    from arena.engine import forfeit
    rules = PRESETS[name]
    state = new_game(rules, players, seed, max_turns=300)
    deck = Counter(make_deck(rules.decks_for(players), rules.jokers))
    rng = random.Random(choices)
    victim = rng.randrange(players)
    steps = 0
    while not state.over:
        if steps == when:
            state, events = forfeit(state, victim, "timeout")
            assert state.seats[victim].place is not None
            _check_step(state, deck, rng)
        acts = legal_actions(state)
        assert acts
        state, _ = apply_action(state, rng.choice(acts), check=False)
        steps += 1
        _check_step(state, deck, rng)
        if steps > when:
            assert state.seats[victim].place is not None
            assert state.over or state.to_move != victim
    assert sorted(x for g in state.result.order for x in g) == list(range(players))


# ------------------------------------------------------- hot-path helpers against plain versions

def _remove_each_present(cards: tuple[int, ...], gone: tuple[int, ...]) -> tuple[int, ...]:
    """The obvious version of game._drop: remove one copy of each gone card that is there."""
    out = list(cards)
    for c in gone:
        if c in out:
            out.remove(c)
    return tuple(out)


# several decks: the same card number can appear more than once in a hand
_CARD = st.integers(min_value=8, max_value=59)


@FAST
@given(st.lists(_CARD, max_size=30), st.lists(_CARD, min_size=1, max_size=5))
def test_drop_removes_one_copy_of_each_card_like_list_remove(cards, gone):
    from arena.engine.game import _drop
    cards, gone = tuple(sorted(cards)), tuple(sorted(gone))
    assert _drop(cards, gone) == _remove_each_present(cards, gone)


@FAST
@given(st.lists(_CARD, max_size=12), st.integers(min_value=0, max_value=6))
def test_drop_of_a_hand_run_leaves_the_rest_of_the_hand(cards, start):
    from arena.engine.game import _drop
    hand = tuple(sorted(cards))
    run = hand[start:start + 2]
    if run:
        assert sorted(_drop(hand, run) + run) == list(hand)


@FAST
@given(st.lists(_CARD, min_size=1, max_size=9), st.integers(min_value=0, max_value=4), st.booleans())
def test_face_up_choices_by_shape_match_the_choices_over_the_cards(cards, slots, stacking):
    from itertools import groupby

    from arena.engine.game import _face_up_choices, _face_up_patterns
    visible = tuple(sorted(cards))
    groups = [tuple(g) for _, g in groupby(visible, key=lambda c: c >> 2)]
    sizes = tuple(len(g) for g in groups)
    by_shape = [tuple(tuple(visible[p] for p in stack) for stack in choice)
                for choice in _face_up_patterns(sizes, slots, stacking)]
    assert by_shape == list(_face_up_choices(groups, slots, stacking))


def test_replacing_a_seat_keeps_the_others_at_every_table_size():
    from arena.engine.game import _set
    from arena.engine.model import Seat
    new = Seat((99,), (), ())
    for n in range(2, 7):
        seats = tuple(Seat((i,), (), ()) for i in range(n))
        for i in range(n):
            assert _set(seats, i, new) == seats[:i] + (new,) + seats[i + 1:]
