"""Scenarios: the deal, the setup choices, stacking, and who starts (docs/RULES.md, "Setup")."""

from __future__ import annotations

from collections import Counter

import pytest

from arena.engine import PRESETS, apply_action, legal_actions, new_game, parse_card, preset
from arena.engine.cards import JOKER, rank_of
from arena.engine.views import event_for, seat_view
from tests.conftest import can, choose, done, hand, kinds, log, moves, pile, play, show, stack, table


def apply_first(s):
    """Take the first legal action (for setup steps whose choice does not matter)."""
    return apply_action(s, legal_actions(s)[0])


def parse(c):
    return parse_card(c)


def can_any(s, cards):
    """Whether any one of these cards may be played alone."""
    return any(can(s, c) for c in cards.split())


# ---------------------------------------------------------------- the deal


@pytest.mark.parametrize("name,players,cards", [
    ("powers", 2, 52), ("powers", 3, 104), ("powers", 5, 104),
    ("classic", 2, 52), ("classic", 3, 104), ("classic", 5, 104),
    ("skip8", 2, 52), ("skip8", 6, 52),
    ("shithead", 2, 52), ("shithead", 5, 52),
    ("smeghead", 2, 104), ("smeghead", 4, 104), ("smeghead", 5, 156), ("smeghead", 6, 156),
])
def test_decks_by_player_count(name, players, cards):
    """000/001: two decks from three players; 002/003: one deck; Smeghead: several packs."""
    s = new_game(preset(name), players, seed=1)
    total = len(s.stock) + len(s.set_aside) + sum(x.card_count for x in s.seats)
    assert total == cards


def test_jokers_option_puts_jokers_in_each_deck():
    s = new_game(preset("smeghead").replace(jokers=2), 2, seed=3)
    everything = list(s.stock) + [c for x in s.seats for c in x.hand + x.face_up_cards + x.face_down]
    assert sum(rank_of(c) == JOKER for c in everything) == 4  # two decks, two jokers each


@pytest.mark.parametrize("name,down,up,hand_", [
    ("shithead", 3, 3, 3), ("skip8", 3, 3, 3), ("smeghead", 4, 4, 4)])
def test_swap_deal_is_down_up_hand(name, down, up, hand_):
    s = new_game(preset(name), 2, seed=2)
    assert s.phase == "setup"
    for seat in s.seats:
        assert (len(seat.face_down), len(seat.face_up_cards), len(seat.hand)) == (down, up, hand_)


@pytest.mark.parametrize("name", ["powers", "classic"])
def test_choose_deal_gives_six_to_hand_and_nothing_face_up(name):
    """000/001: three down, six dealt; the player lays three of the six face up."""
    s = new_game(preset(name), 2, seed=2)
    assert all(len(x.hand) == 6 and x.face_up == () and len(x.face_down) == 3 for x in s.seats)
    s, ev = apply_first(s)
    assert len(s.seats[0].hand) == 3 and len(s.seats[0].face_up) == 3


def test_skip8_six_players_short_deal_sets_four_cards_aside_unseen():
    """Decision 2: at six players 002 deals 3 down, 3 up, 2 in hand; the 4 left over are set aside."""
    s = new_game(preset("skip8"), 6, seed=9)
    assert s.stock == () and len(s.set_aside) == 4
    assert all((len(x.face_down), len(x.face_up_cards), len(x.hand)) == (3, 3, 2) for x in s.seats)
    view = seat_view(s, 0)
    assert view["set_aside"] == 4 and view["stock"] == 0
    assert not set(show(s.set_aside).split()) & set(str(view).replace("'", " ").split())  # one deck: unique


def test_short_deal_means_no_drawing():
    s = table("skip8", "4C 9D | 5S 6S 7S | 2C 3C 4H", "KD KS | 8S 9S JS | 2D 3D 4S", pile="")
    s, ev = play(s, "4C")
    assert hand(s, 0) == "9D" and "drew" not in kinds(ev)


def test_setup_none_starts_play_at_once():
    s = new_game(preset("shithead").replace(setup="none"), 3, seed=4)
    assert s.phase == "play"
    assert all(len(x.hand) == 3 and len(x.face_up) == 3 for x in s.seats)


# ---------------------------------------------------------------- setup choices (decision 17)

def test_setup_choose_from_six():
    s = table("classic", "3C 5D 9H JS KD AC | | 2C 2D 2H", "4C 5C 6C | 7C 8C 9C | 3D 3H 3S",
              phase="setup", deciding=(0, 1), stock="4D 4H")
    assert len(moves(s)) == 20  # six different ranks: choose any three
    s, ev = choose(s, "JS KD AC")
    assert hand(s, 0) == "3C 5D 9H" and s.seats[0].face_up == ((parse("JS"),), (parse("KD"),), (parse("AC"),))
    assert s.to_move == 1 and s.phase == "setup"  # seats decide in seat order


def test_setup_swap_may_take_face_up_cards_into_hand():
    """003/002: swap freely between hand and face-up before the first card."""
    s = table("shithead", "3C 4D 5H | AC KD 2S | 6C 6D 6H", "4C 5C 6C | 7C 8C 9C | 3D 3H 3S",
              phase="setup", deciding=(0, 1))
    s, ev = choose(s, "3C 4D 5H")
    assert hand(s, 0) == "2S KD AC"


def test_setup_choices_are_hidden_from_other_seats_until_play():
    """Decision 17: the engine takes choices in seat order, but a seat cannot see another's face-up
    cards (dealt or chosen) until play starts, as if everyone chose at once."""
    s = new_game(preset("shithead"), 3, seed=11)
    assert s.to_move == 0
    assert seat_view(s, 1)["players"][0]["face_up"] is None
    assert seat_view(s, 0)["players"][0]["face_up"] is not None
    s, ev = apply_first(s)
    assert event_for(ev[0], 1) == {"kind": "setup", "seat": 0}
    assert "face_up" in event_for(ev[0], 0) and "face_up" in event_for(ev[0], None)
    assert s.to_move == 1 and seat_view(s, 1)["players"][0]["face_up"] is None
    s, _ = apply_first(s)
    s, _ = apply_first(s)
    assert s.phase == "play"
    assert seat_view(s, 1)["players"][0]["face_up"] == [[c] for c in show(s.seats[0].face_up_cards).split()]


# ---------------------------------------------------------------- stacking (decision 18)

def test_stacking_lays_a_stack_then_refills_and_may_stack_again():
    r = preset("shithead").replace(stacking=True)
    s = table(r, "JH 4C 9D | JD 5S KC | 2C 2D 2H", "4H 5H 6H | 7H 8H 9H | 3D 3H 3S",
              phase="setup", deciding=(0, 1), stock="8C JS JC")
    s, ev = choose(s, "JH+JD 5S KC")
    # two cards left the hand for one place: draw back to three, and the draw holds a jack
    assert hand(s, 0) == "4C 9D JC" and log(ev)[1] == {"kind": "drew", "seat": 0, "count": 1, "cards": ["JC"]}
    assert s.to_move == 0 and s.seats[0].setup == "stack"
    assert moves(s) == ["stack JC", "done"]
    s, ev = stack(s, "JC")
    assert [show(x) for x in s.seats[0].face_up] == ["5S", "JD JH JC", "KC"]
    assert hand(s, 0) == "4C 9D JS"  # drew again, and again a jack
    s, ev = stack(s, "JS")
    assert hand(s, 0) == "4C 8C 9D" and s.seats[0].setup == ""  # nothing more to stack: done
    assert s.to_move == 1
    assert sorted(len(x) for x in s.seats[0].face_up) == [1, 1, 4]


def test_stacking_done_stops_stacking():
    r = preset("shithead").replace(stacking=True)
    s = table(r, "JH 4C 9D | JD 5S KC | 2C 2D 2H", "4H 5H 6H | 7H 8H 9H | 3D 3H 3S",
              phase="setup", deciding=(0, 1), stock="8C JS JC")
    s, _ = choose(s, "JH+JD 5S KC")
    s, ev = done(s)
    assert hand(s, 0) == "4C 9D JC" and s.to_move == 1


def test_stacking_with_fewer_ranks_than_places_falls_back_to_single_cards():
    """Added decision: six visible cards of only two ranks cannot fill three places with one stack
    per rank; the seat then lays single cards (two places may share a rank)."""
    r = preset("shithead").replace(stacking=True)
    s = table(r, "JH JD JC | JS 5H 5D | 2C 2D 2H", "4H 5C 6H | 7H 8H 9H | 3D 3H 3S",
              phase="setup", deciding=(0, 1), stock="8C 9C TC")
    assert moves(s) == ["set_face_up JC JD JH", "set_face_up 5D JC JD", "set_face_up 5D 5H JC"]
    s, ev = choose(s, "5D JC JD")
    assert hand(s, 0) == "5H JH JS" and s.seats[0].setup == "stack"
    assert moves(s) == ["stack 5H", "stack JH", "stack JH JS", "done"]
    s, ev = stack(s, "JH JS")
    assert [show(x) for x in s.seats[0].face_up] == ["5D", "JC JH JS", "JD"]  # the first jack place only
    assert hand(s, 0) == "5H 9C TC"  # the top of the stock is its last card


def test_stacks_are_played_as_a_group():
    s = table("shithead", "| JH+JD 5S KC | 2C 2D 2H", "4H 5H | 7H | 3D", pile="9C", stacking=True,
              face_up_multi=False)
    assert moves(s) == ["play JD JH from face_up", "play KC from face_up", "pick_up"]  # no single jack
    s, ev = play(s, "JD JH")
    assert pile(s) == "9C JD JH"


def test_several_same_rank_stacks_go_together_with_face_up_multi():
    """Bug fix: any one stack, or several together (before, the pair alone was not offered)."""
    s = table("shithead", "| JH+JD JS 5S | 2C 2D 2H", "4H 5H | 7H | 3D", pile="9C", stacking=True)
    assert moves(s) == ["play JS from face_up", "play JD JH from face_up", "play JS JD JH from face_up",
                        "pick_up"]


# ---------------------------------------------------------------- who starts

def finish_setup(rules, seat0, seat1, choice, **kw):
    """Seat 0 has chosen; seat 1 makes ``choice`` and play begins."""
    s = table(rules, seat0, seat1, phase="setup", deciding=(1,), to_move=1, **kw)
    return choose(s, choice)


def test_start_card_seat_zero_plays_on_it():
    """001: the first player turns the start card and must beat it."""
    s, ev = finish_setup("classic", "4C 5C 6C | 7C 8C 9C | 2D 3D 4D", "4H 5H 6H JH QH KH | | 2S 3S 4S",
                         "JH QH KH", stock="3C 9S")
    assert pile(s) == "9S" and s.to_move == 0 and s.stock == (parse("3C"),)
    assert log(ev)[-2:] == [{"kind": "start_card", "card": "9S", "set_aside": False},
                            {"kind": "leads", "seat": 0, "why": "left of the dealer, on the start card"}]
    assert not can_any(s, "4C 5C 6C")


@pytest.mark.parametrize("name", ["powers", "classic"])
def test_start_card_ten_is_set_aside_and_the_next_turned(name):
    """Decision 1 (000; 001 silent, same answer): a 10 turned is set aside, seen, into burned."""
    s, ev = finish_setup(name, "4C 5C 6C | 7C 8C 9C | 2D 3D 4D", "4H 5H 6H JH QH KH | | 2S 3S 4S",
                         "JH QH KH", stock="3C 5S TD TS")
    assert show(s.burned) == "TS TD" and pile(s) == "5S"
    assert [e["kind"] for e in log(ev)].count("start_card") == 3


def test_start_card_joker_is_set_aside():
    s, ev = finish_setup(preset("classic").replace(jokers=1), "4C 5C 6C | 7C 8C 9C | 2D 3D 4D",
                         "4H 5H 6H JH QH KH | | 2S 3S 4S", "JH QH KH", stock="3C 5S XR")
    assert show(s.burned) == "XR" and pile(s) == "5S"


def test_start_card_two_means_anything_goes():
    s, ev = finish_setup("classic", "4C 5C 6C | 7C 8C 9C | 2D 3D 4D", "4H 5H 6H JH QH KH | | 2S 3S 4S",
                         "JH QH KH", stock="3C 2S")
    assert pile(s) == "2S" and can_any(s, "4C") and can_any(s, "5C")


def test_start_card_see_through_three_is_looked_through():
    s, ev = finish_setup("powers", "4C 5C 6C | 7C 8C 9C | 2D 3D 4D", "4H 5H 6H JH QH KH | | 2S 3S 4S",
                         "JH QH KH", stock="3C 3S")
    assert pile(s) == "3S" and can_any(s, "4C")  # a pile of nothing but 3s: anything goes


def test_start_card_seven_forces_low_under_sevens_force_low():
    s, ev = finish_setup("powers", "4C 9C 6C | 7C 8C 9D | 2D 3D 4D", "4H 5H 6H JH QH KH | | 2S 3S 4S",
                         "JH QH KH", stock="3C 7S")
    assert pile(s) == "7S" and can_any(s, "4C") and not can_any(s, "9C")


def test_start_card_seven_starts_a_descending_run():
    s, ev = finish_setup(preset("classic").replace(seven="descending"), "4C 9C 6C | 7C 8C 9D | 2D 3D 4D",
                         "4H 5H 6H JH QH KH | | 2S 3S 4S", "JH QH KH", stock="3C 7S")
    assert s.descending and can_any(s, "6C") and not can_any(s, "9C")


def test_start_card_eight_skips_nobody_and_reverses_nothing():
    """Decision 1: turn-order powers of the start card do not apply; nobody played it."""
    for eight in ("skip", "reverse"):
        s, ev = finish_setup(preset("classic").replace(eight=eight), "4C 9C 6C | 7C 8C 9D | 2D 3D 4D",
                             "4H 5H 6H JH QH KH | | 2S 3S 4S", "JH QH KH", stock="3C 8S")
        assert s.to_move == 0 and s.direction == 1 and "skipped" not in kinds(ev) and "reversed" not in kinds(ev)


def test_start_card_sets_no_count_requirement():
    s, ev = finish_setup(preset("classic").replace(match_count=True), "4C 9C 6C | 7C 8C 9D | 2D 3D 4D",
                         "4H 5H 6H JH QH KH | | 2S 3S 4S", "JH QH KH", stock="3C 8S")
    assert s.need == 0 and can_any(s, "9C")


def test_left_of_dealer_leads_any_card_on_an_empty_pile():
    """002: the player left of the dealer (seat 0) leads any card."""
    s, ev = finish_setup("skip8", "4C 9C 6C | 7C 8C 9D | 2D 3D 4D", "4H 5H 6H | JH QH KH | 2S 3S 4S",
                         "JH QH KH")
    assert s.to_move == 0 and s.pile == () and log(ev)[-1] == {"kind": "leads", "seat": 0, "why": "left of the dealer"}
    assert sorted(moves(s)) == ["play 4C", "play 6C", "play 9C"]


def test_lowest_card_first_face_up_three_leads():
    """Decision 22 (003): the first face-up 3 leads, before any 3 in hand."""
    s, ev = finish_setup("shithead", "3C 9C 6C | 7C 8C 9D | 2D 3D 4D", "4H 5H 6H | 3H QH KH | 2S 3S 4S",
                         "3H QH KH")
    assert s.to_move == 1 and log(ev)[-1]["why"] == "first face-up 3"


def test_lowest_card_else_first_three_in_hand_from_seat_zero():
    s, ev = finish_setup("shithead", "5C 9C 3C | 7C 8C 9D | 2D 3D 4D", "4H 3H 6H | 5H QH KH | 2S 3S 4S",
                         "5H QH KH")
    assert s.to_move == 0 and log(ev)[-1]["why"] == "first 3 in hand"


def test_lowest_card_is_judged_after_the_swap():
    """Seat 1 was dealt a face-up 3 but took it into hand; seat 0 has a face-up 4."""
    s, ev = finish_setup("shithead", "5C 9C 6C | 4C 8C 9D | 2D 3D 4D", "4H 7H 6H | 3H QH KH | 2S 3S 4S",
                         "4H QH KH")
    assert s.to_move == 1 and log(ev)[-1]["why"] == "first 3 in hand"


def test_lowest_card_moves_up_the_ranks_then_to_twos_then_jokers():
    s, ev = finish_setup("shithead", "AC 9C 6C | TC 8C 9D | 2D 3D 4D", "AH 9H 6H | 5H QH KH | 2S 3S 4S",
                         "5H QH KH")
    assert s.to_move == 1 and log(ev)[-1]["why"] == "first face-up 5"
    s, ev = finish_setup(preset("shithead").replace(jokers=1), "XR 2C 2H | 2D 2S XR | 2D 3D 4D",
                         "XR 2C 2H | XR XR XR | 2S 3S 4S", "XR XR XR")
    assert s.to_move == 0 and log(ev)[-1]["why"] == "first face-up 2"
    s, ev = finish_setup(preset("shithead").replace(jokers=1), "XR XR XR | XR XR XR | 2D 3D 4D",
                         "XR XR XR | XR XR XR | 2S 3S 4S", "XR XR XR")
    assert s.to_move == 0 and log(ev)[-1]["why"] == "first face-up joker"


def test_every_preset_deals_each_seat_the_same_count():
    for name, r in PRESETS.items():
        for n in range(r.min_players, r.max_players + 1):
            s = new_game(r, n, seed=n)
            assert len(Counter(x.card_count for x in s.seats)) == 1


def test_stacking_with_setup_none_still_lays_out_the_face_up_places():
    """Added decision 34: stacking is itself a setup choice."""
    s = new_game(preset("shithead").replace(setup="none", stacking=True), 2, seed=8)
    assert s.phase == "setup" and moves(s)[0].startswith("set_face_up")


def test_start_card_with_no_stock_leads_on_an_empty_pile():
    """Added decision 35: a short deal leaves no stock to turn a start card from."""
    s = new_game(preset("skip8").replace(start="stock_card", setup="none"), 6, seed=8)
    assert s.phase == "play" and s.pile == () and s.to_move == 0 and s.burned == ()
