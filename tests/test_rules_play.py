"""Scenarios: ordinary play, sets, drawing, picking up, and the three layers (docs/RULES.md, "Play")."""

from __future__ import annotations

import pytest

from arena.engine import IllegalActionError, Play, apply_action, legal_actions, parse_cards
from arena.engine.model import PickUp
from arena.engine.views import event_for
from tests.conftest import can, flip, hand, kinds, log, moves, pick_up, pile, play, show, table

# ---------------------------------------------------------------- equal or higher, sets


def test_equal_or_higher():
    s = table("classic", "4C 9C 9D KH | | 4S", "3H | | 4H", pile="9S")
    assert moves(s) == ["play 9C", "play 9C 9D", "play KH"]  # must_play: no pick-up offered


def test_any_card_on_an_empty_pile():
    s = table("classic", "3C 9C | | 4S", "3H | | 4H")
    assert moves(s) == ["play 3C", "play 9C"]


def test_a_set_is_one_rank_and_names_each_card_once():
    """Decision 16: plays are built from legal_actions; a mixed set or a card named twice is refused."""
    s = table("classic", "2C 5C 5D | | 4S", "3H | | 4H", pile="4C")
    with pytest.raises(IllegalActionError):
        apply_action(s, Play(parse_cards(["2C", "5C"])))
    with pytest.raises(IllegalActionError):
        apply_action(s, Play(parse_cards(["5C", "5C"])))
    assert all(len({c >> 2 for c in a.cards}) == 1 for a in legal_actions(s) if a.kind == "play")


# ---------------------------------------------------------------- drawing (decision 20)


def test_draw_back_to_hand_size_from_the_top_of_the_stock():
    s = table("classic", "9C 9D 5D | | 4S", "3H | | 4H", pile="4C", stock="2S 6H 4H")
    s, ev = play(s, "9C 9D")
    assert hand(s, 0) == "4H 5D 6H" and show(s.stock) == "2S"
    assert log(ev)[-1] == {"kind": "drew", "seat": 0, "count": 2, "cards": ["6H", "4H"]}
    assert event_for(ev[-1], 1) == {"kind": "drew", "seat": 0, "count": 2}


def test_draw_takes_what_is_left_of_the_stock():
    s = table("classic", "9C 9D 5D | | 4S", "3H | | 4H", pile="4C", stock="6H")
    s, ev = play(s, "9C 9D")
    assert hand(s, 0) == "5D 6H" and s.stock == ()


def test_no_draw_when_holding_hand_size_or_more():
    s = table("classic", "9C 5D 6D 7D 8D | | 4S", "3H | | 4H", pile="4C", stock="6H")
    s, ev = play(s, "9C")
    assert "drew" not in kinds(ev) and len(s.stock) == 1


def test_draw_to_four_in_smeghead():
    s = table("smeghead", "9C 5D 6D 7D | | 4S", "3H | | 4H", pile="4C", stock="2S 6H")
    s, ev = play(s, "9C")
    assert len(s.seats[0].hand) == 4 and show(s.stock) == "2S"


# ---------------------------------------------------------------- picking up (decision 12)


def test_pick_up_takes_the_pile_ends_the_turn_and_draws_nothing():
    s = table("shithead", "4C | | 4S", "3H | | 4H", pile="9S KD", stock="5C 5D")
    assert moves(s) == ["pick_up"]
    s, ev = pick_up(s)
    assert log(ev) == [{"kind": "picked_up", "seat": 0, "cards": ["9S", "KD"]}]
    assert hand(s, 0) == "4C 9S KD" and show(s.seats[0].known) == "9S KD" and len(s.stock) == 2
    assert s.to_move == 1 and s.pile == () and can(s, "3H")  # the next player leads


def test_picking_up_an_empty_pile_is_never_offered():
    s = table("shithead", "4C | | 4S", "3H | | 4H", pile="")
    assert "pick_up" not in moves(s)
    with pytest.raises(IllegalActionError):
        apply_action(s, PickUp())


def test_pick_up_by_choice_without_must_play():
    """000, 003: pick up whenever the pile has a card, even holding a legal card."""
    for name in ("powers", "shithead", "smeghead"):
        s = table(name, "KC | | 4S", "3H | | 4H", pile="5S")
        assert moves(s) == ["play KC", "pick_up"]


def test_must_play_offers_pick_up_only_when_nothing_plays():
    """001, 002: you must play a card if you can."""
    for name in ("classic", "skip8"):
        assert moves(table(name, "KC | | 4S", "3H | | 4H", pile="5S")) == ["play KC"]
        assert moves(table(name, "4C | | 4S", "3H | | 4H", pile="5S")) == ["pick_up"]


# ---------------------------------------------------------------- the three layers


def test_hand_first_face_up_out_of_reach_while_holding_cards():
    s = table("shithead", "4C | AS KS | 4S", "3H | | 4H", pile="9C")
    assert moves(s) == ["pick_up"]


def test_face_up_one_card_a_turn():
    """Decision 19 (000/001): one face-up card per turn unless face_up_multi."""
    s = table("classic", "| 5C 5D 9H | 4S", "3H | | 4H", pile="4C")
    assert moves(s) == ["play 5D from face_up", "play 9H from face_up"]


def test_face_up_several_of_one_rank_with_face_up_multi():
    """003: any one, or two or three of one rank together."""
    s = table("shithead", "| 5C 5D 9H | 4S", "3H | | 4H", pile="4C")
    assert moves(s) == ["play 5C from face_up", "play 5C 5D from face_up", "play 9H from face_up", "pick_up"]
    s, ev = play(s, "5C 5D")
    assert log(ev)[0] == {"kind": "played", "seat": 0, "cards": ["5C", "5D"], "zone": "face_up"}
    assert [show(x) for x in s.seats[0].face_up] == ["9H"]


def test_face_up_failure_picks_up_and_leaves_the_row_alone():
    s = table("classic", "| 5C 9H | 4S", "3H | | 4H", pile="KC")
    assert moves(s) == ["pick_up"]
    s, ev = pick_up(s)
    assert hand(s, 0) == "KC" and [show(x) for x in s.seats[0].face_up] == ["5C", "9H"]


def test_harsh_face_up_failure_surrenders_a_chosen_card():
    """Decision 7: one PickUp per distinct face-up rank, naming the card laid first on the pile."""
    s = table("shithead", "| 5C 5D 9H | 4S", "3H | | 4H", pile="KC", harsh_face_up=True)
    assert moves(s) == ["pick_up 5D", "pick_up 9H"]
    s, ev = pick_up(s, "9H")
    assert log(ev) == [{"kind": "surrendered", "seat": 0, "card": "9H"},
                       {"kind": "picked_up", "seat": 0, "cards": ["KC", "9H"]}]
    assert hand(s, 0) == "9H KC" and show(s.seats[0].known) == "9H KC"
    assert [show(x) for x in s.seats[0].face_up] == ["5C", "5D"]


def test_harsh_rule_is_only_for_the_face_up_stage():
    s = table("shithead", "4C | 5C | 4S", "3H | | 4H", pile="KC", harsh_face_up=True)
    assert moves(s) == ["pick_up"]


def test_harsh_choice_also_when_a_card_could_be_played():
    """003: 'cannot or will not cover the pile'."""
    s = table("shithead", "| 5C AH | 4S", "3H | | 4H", pile="KC", harsh_face_up=True)
    assert moves(s) == ["play AH from face_up", "pick_up 5C", "pick_up AH"]


def test_face_down_only_flips_no_pick_up_by_choice():
    """Decisions 6 and 26: a Flip names a position blind; no pick-up in the face-down stage."""
    s = table("powers", "| | 9C 3D 7S", "3H | | 4H", pile="5C")
    assert moves(s) == ["flip 0", "flip 1", "flip 2"]


def test_face_down_positions_are_fixed_by_the_deal():
    s = table("classic", "| | 9C 3D 7S", "3H | | 4H", pile="5C")
    s, ev = flip(s, 0)
    assert log(ev) == [{"kind": "flipped", "seat": 0, "position": 0, "card": "9C", "legal": True}]
    assert pile(s) == "5C 9C" and s.seats[0].face_down[1:] == parse_cards(["3D", "7S"])
    assert s.seats[0].face_down[0] is None and s.to_move == 1
    s = s._replace(to_move=0)
    assert moves(s) == ["flip 1", "flip 2"]


def test_failed_flip_takes_the_card_back_with_the_pile():
    s = table("classic", "| | 9C 3D 7S", "3H | | 4H", pile="5C")
    s, ev = flip(s, 1)
    assert log(ev) == [{"kind": "flipped", "seat": 0, "position": 1, "card": "3D", "legal": False},
                       {"kind": "picked_up", "seat": 0, "cards": ["5C", "3D"]}]
    assert hand(s, 0) == "3D 5C" and show(s.seats[0].known) == "3D 5C" and s.to_move == 1
    s = s._replace(to_move=0)
    assert moves(s) == ["play 3D", "play 5C"]  # the hand again, before the face-down cards


def test_flip_onto_a_seven_is_judged_against_the_seven():
    """Decision 15."""
    s = table("powers", "| | 9C 5S", "3H | | 4H", pile="7C")
    s, ev = flip(s, 0)
    assert log(ev)[0]["legal"] is False
    s = table("powers", "| | 9C 5S", "3H | | 4H", pile="7C")
    s, ev = flip(s, 1)
    assert log(ev)[0]["legal"] is True and pile(s) == "7C 5S"


def test_flip_onto_a_see_through_card_is_judged_against_the_card_under_it():
    s = table("powers", "| | 5S 9S", "3H | | 4H", pile="9C 3D")
    s, ev = flip(s, 0)
    assert log(ev)[0]["legal"] is False
    s = table("powers", "| | 5S 9S", "3H | | 4H", pile="9C 3D")
    s, ev = flip(s, 1)
    assert log(ev)[0]["legal"] is True


def test_flipped_ten_burns_and_plays_again():
    s = table("classic", "| | TS 9S", "3H | | 4H", pile="KC")
    s, ev = flip(s, 0)
    assert kinds(ev) == ["flipped", "burned"] and s.to_move == 0 and s.pile == ()


def test_flipped_last_card_goes_out():
    s = table("classic", "| | - TS -", "3H | | 4H", "3S | | 4D", pile="9C")
    s, ev = flip(s, 1)
    assert kinds(ev)[-2:] == ["went_out", "game_over"] and s.result.winner == 0


# ---------------------------------------------------------------- match_count (decision 3)


def pair_of_fives(rules="skip8", answer="6H 6S 9H 2C TC", **kw):
    s = table(rules, "5C 5D KD | | 4S", answer + " | | 4H", pile="4C", **kw)
    s, _ = play(s, "5C 5D")
    return s


def test_a_pair_must_be_answered_with_a_pair_or_more():
    s = pair_of_fives(answer="6H 6S 6D 9H")
    assert s.need == 2
    assert moves(s) == ["play 6D 6H", "play 6D 6H 6S"]


def test_wild_cards_answer_a_set_singly():
    s = pair_of_fives()
    assert moves(s) == ["play 2C", "play 6H 6S", "play TC"]


def test_every_wild_card_answers_a_set_singly_but_a_see_through_eight_does_not():
    """Decision 3: see-through 3s, glass 7s and jokers are wild; a see-through 8 is not (decision 33)."""
    s = pair_of_fives(answer="3H 7H XR 8H", three="see_through", seven="glass", eight="see_through", jokers=1)
    assert moves(s) == ["play 3H", "play 7H", "play XR"]


def test_fewer_cards_of_a_rank_than_the_set_cannot_answer_it():
    s = pair_of_fives(answer="9H KH")
    assert moves(s) == ["pick_up"]


def test_no_requirement_after_a_two():
    s = pair_of_fives()
    s, _ = play(s, "2C")
    assert s.need == 0 and moves(s) == ["play KD"]


def test_no_requirement_after_a_burn_or_a_pick_up():
    s = pair_of_fives()
    s, _ = play(s, "TC")
    assert s.need == 0 and can(s, "6H")
    s = pair_of_fives(answer="9H KH")
    s, _ = pick_up(s)
    assert s.need == 0 and can(s, "KD")


def test_see_through_three_keeps_the_requirement():
    s = pair_of_fives(answer="3H 6H 6S", three="see_through")
    s, _ = play(s, "3H")
    assert s.need == 2 and moves(s) == ["pick_up"]  # KD alone cannot answer the pair under the 3


def test_face_down_flip_is_judged_on_rank_only():
    s = table("skip8", "| | 6S 4S", "3H | | 4H", pile="5C 5D", need=2)
    s, ev = flip(s, 0)
    assert log(ev)[0]["legal"] is True and s.need == 1


def test_face_up_singles_cannot_answer_a_pair():
    s = table("skip8", "| 6S 6D 9H | 4S", "3H | | 4H", pile="5C 5D", need=2)
    assert moves(s) == ["pick_up"]


# ---------------------------------------------------------------- Smeghead's chore (decision 9)


def test_smeghead_first_clearer_has_no_special_role_in_play():
    """003 records that whoever first clears the pile 'has to clear it away every time': a table
    chore. Any player's burn works the same, and no rule option exists for it."""
    s = table("smeghead", "TC 5D | | 4S", "TH 6H | | 4H", pile="9C")
    s, _ = play(s, "TC")
    s, _ = play(s, "5D")
    s, ev = play(s, "TH")
    assert kinds(ev) == ["played", "burned"] and s.to_move == 1
