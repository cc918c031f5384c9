"""Scenarios: what each rank does under each option (docs/RULES.md, "Cards")."""

from __future__ import annotations

import pytest

from arena.engine.views import event_for
from tests.conftest import can, flip, hand, kinds, log, moves, pick_up, pile, play, show, table

# ---------------------------------------------------------------- 2: reset


def test_two_goes_on_anything_and_the_next_player_plays_anything():
    s = table("classic", "2C 5D | | 4S", "3H 6H | | 4H", pile="AS")
    s, ev = play(s, "2C")
    assert pile(s) == "AS 2C" and s.to_move == 1  # the 2 stays in the pile
    assert can(s, "3H")


def test_two_by_default_passes_the_turn():
    """Decision 5: 002's rules text (the next person plays anything after a 2)."""
    s = table("skip8", "2C 5D | | 4S", "3H 6H | | 4H", pile="KS")
    s, _ = play(s, "2C")
    assert s.to_move == 1


def test_reset_again_gives_the_turn_back_to_the_player_who_laid_the_two():
    """Decision 5, option reset_again: 002's walkthrough ("You play your 2: reset ... You lead the king")."""
    s = table("skip8", "2C KD | | 4S", "3H 6H | | 4H", pile="KS", reset_again=True)
    s, _ = play(s, "2C")
    assert s.to_move == 0 and can(s, "KD")


def test_reset_again_yields_to_the_burn_rule_when_the_two_completes_four():
    """Added decision: four 2s burn; under burn_next the next player leads, reset_again or not."""
    s = table("classic", "2S KD | | 4S", "3H 6H | | 4H", pile="2C 2D 2H", reset_again=True)
    s, ev = play(s, "2S")
    assert "burned" in kinds(ev) and s.to_move == 1 and s.pile == ()


# ---------------------------------------------------------------- 3: plain or see-through


def test_plain_three_is_the_lowest_ladder_card():
    s = table("classic", "3C 9D | | 4S", "3H | | 4H", pile="5C")
    assert not can(s, "3C") and can(s, "9D")


def test_see_through_three_goes_on_anything_and_is_looked_through():
    s = table("powers", "3C 9D | | 4S", "5H 9H | | 4H", pile="9C")
    s, _ = play(s, "3C")
    assert s.to_move == 1 and not can(s, "5H") and can(s, "9H")


def test_several_see_through_threes_are_all_looked_through():
    s = table("powers", "3C 3D | | 4S", "5H 9H | | 4H", pile="9C")
    s, _ = play(s, "3C 3D")
    assert not can(s, "5H") and can(s, "9H")


def test_a_pile_of_only_threes_takes_anything():
    s = table("powers", "4C | | 4S", "5H | | 4H", pile="3C 3D")
    assert can(s, "4C")


def test_three_on_a_two_leaves_the_pile_open():
    """Decision 13."""
    s = table("powers", "3C | | 4S", "4H | | 4H", pile="KC 2D")
    s, _ = play(s, "3C")
    assert can(s, "4H")


def test_four_threes_burn():
    """Decision 14 (000): a 3 counts as a card for four in a row."""
    s = table("powers", "3S 4C | | 4S", "4H | | 4H", pile="9C 3C 3D 3H")
    s, ev = play(s, "3S")
    assert log(ev)[1] == {"kind": "burned", "cards": ["9C", "3C", "3D", "3H", "3S"], "why": "four_of_a_kind"}


def test_a_three_between_eights_breaks_the_run():
    """Decision 14 (000): the top four cards themselves decide, see-through cards included."""
    s = table("powers", "8S 8H | | 4S", "4H | | 4H", pile="8C 8D 3H")
    s, ev = play(s, "8S 8H")
    assert "burned" not in kinds(ev) and pile(s) == "8C 8D 3H 8H 8S"


# ---------------------------------------------------------------- 7


def test_plain_seven_is_an_ordinary_card():
    s = table("classic", "7C | | 4S", "9H 5H | | 4H", pile="6C")
    s, _ = play(s, "7C")
    assert can(s, "9H") and not can(s, "5H")


def test_sevens_at_most_next_card_seven_or_lower():
    """000 / decision 27: the 7 is played by the usual rule; then 7 or lower, or a 2, 3 or 10."""
    assert not can(table("powers", "7C | | 4S", "5H | | 4H", pile="8C"), "7C")  # a 7 must beat the pile
    s = table("powers", "7C 7D | | 4S", "5H 7S 8H 9H 2H TH 3H | | 4H", pile="6C")
    s, _ = play(s, "7C")
    assert sorted(moves(s)) == ["pick_up", "play 2H", "play 3H", "play 5H", "play 7S", "play TH"]


def test_sevens_at_most_or_8_lets_an_eight_out():
    s = table("classic", "5H 7S 8H 9H | | 4H", "3C | | 4S", pile="7C", seven="at_most_or_8")
    assert can(s, "8H") and can(s, "7S") and can(s, "5H") and not can(s, "9H")


def test_sevens_descending_run_goes_down_until_broken():
    """Decision 21: after a 7 every card must be no higher than the card to beat."""
    s = table("classic", "7C 6S 4S | | 4D", "6H 9H 5D | | 4H", pile="5C", seven="descending")
    s, _ = play(s, "7C")
    assert s.descending and can(s, "6H") and not can(s, "9H")
    s, _ = play(s, "6H")
    assert can(s, "6S") and can(s, "4S")
    s, _ = play(s, "4S")
    assert not can(s, "5D")  # still running down: a 5 may not go on a 4


def test_sevens_descending_seven_itself_follows_the_usual_rule():
    s = table("classic", "7C | | 4D", "6H | | 4H", pile="9C", seven="descending")
    assert not can(s, "7C")


def test_sevens_descending_broken_by_a_two():
    s = table("classic", "2C | | 4D", "9H | | 4H", pile="7C 6D", seven="descending", descending=True)
    s, _ = play(s, "2C")
    assert not s.descending and can(s, "9H")


def test_sevens_descending_broken_by_a_burn_and_by_a_pick_up():
    s = table("classic", "TC 9C | | 4D", "9H | | 4H", pile="7C 6D", seven="descending", descending=True)
    s, _ = play(s, "TC")
    assert not s.descending and can(s, "9C")
    s = table("classic", "KC | | 4D", "9H | | 4H", pile="7C 6D", seven="descending", descending=True)
    assert moves(s) == ["pick_up"]
    s, _ = pick_up(s)
    assert not s.descending and s.pile == () and can(s, "9H")


def test_glass_seven_goes_on_anything_and_is_looked_through():
    s = table("classic", "7C | | 4D", "KH AH | | 4H", pile="AC", seven="glass")
    s, _ = play(s, "7C")
    assert not can(s, "KH") and can(s, "AH")


def test_seven_escapes_two_ten_and_other_wild_cards():
    """Decision 27: under sevens force low, 2, 10 and the see-through 3 all escape a 7."""
    s = table("powers", "2C 3C TC KC | | 4D", "4H | | 4H", pile="7C")
    assert can(s, "2C") and can(s, "3C") and can(s, "TC") and not can(s, "KC")


def test_see_through_three_on_a_seven_still_forces_low():
    """000: the next player plays to the card under the 3."""
    s = table("powers", "9C 5C | | 4D", "4H | | 4H", pile="7C 3D")
    assert can(s, "5C") and not can(s, "9C")


# ---------------------------------------------------------------- 8


def test_eight_skips_the_next_player():
    """Decision 4 (002)."""
    s = table("skip8", "8C 5D | | 4S", "9H | | 4H", "9S | | 4C", pile="6C")
    s, ev = play(s, "8C")
    assert s.to_move == 2 and log(ev)[1] == {"kind": "skipped", "seat": 1}


def test_one_skip_per_eight():
    s = table("skip8", "8C 8D 5D | | 4S", "9H | | 4H", "9S | | 4C", "9D | | 4D", pile="6C")
    s, ev = play(s, "8C 8D")
    assert s.to_move == 3 and [e["seat"] for e in log(ev) if e["kind"] == "skipped"] == [1, 2]


def test_skips_count_only_seats_still_in():
    s = table("skip8", "8C 5D | | 4S", "| | -", "9S | | 4C", "9D | | 4D", pile="6C", places={1: 1})
    s, ev = play(s, "8C")
    assert s.to_move == 3 and [e["seat"] for e in log(ev) if e["kind"] == "skipped"] == [2]


def test_skips_go_round_the_table_past_the_player_who_laid_them():
    """Added decision: skips are counted round the table; with two players two 8s skip the
    opponent and then the player who laid them, so the opponent plays."""
    s = table("skip8", "8C 8D 5D | | 4S", "9H | | 4H", pile="6C")
    s, ev = play(s, "8C 8D")
    assert s.to_move == 1 and [e["seat"] for e in log(ev) if e["kind"] == "skipped"] == [1, 0]


def test_with_two_players_an_eight_gives_the_turn_back():
    s = table("skip8", "8C 5D | | 4S", "9H | | 4H", pile="6C")
    s, _ = play(s, "8C")
    assert s.to_move == 0


def test_eights_that_complete_four_of_a_kind_burn_and_skip_nobody():
    s = table("skip8", "8S 5D | | 4S", "9H | | 4H", "9S | | 4C", pile="8C 8D 8H", four_of_a_kind="burn_next")
    s, ev = play(s, "8S")
    assert "burned" in kinds(ev) and "skipped" not in kinds(ev) and s.to_move == 1


def test_see_through_three_on_an_eight_copies_the_card_but_not_the_skip():
    """Decision 13."""
    s = table("skip8", "3C 5D | | 4S", "7H 9H | | 4H", "9S | | 4C", pile="6D 8C", three="see_through")
    s, ev = play(s, "3C")
    assert s.to_move == 1 and "skipped" not in kinds(ev)
    assert not can(s, "7H") and can(s, "9H")


def test_eight_skip_on_a_face_down_flip():
    """Decision 15: a legal flip has its full effect."""
    s = table("skip8", "| | 8C 4S", "9H | | 4H", "9S | | 4C", pile="6C")
    s, ev = flip(s, 0)
    assert s.to_move == 2 and "skipped" in kinds(ev)


def test_see_through_eight_is_played_by_the_usual_rule_then_looked_through():
    """Added decision: a transparent 8 is not wild (003 gives it no 'on anything' power)."""
    s = table("classic", "8C | | 4S", "6H 4H | | 4H", pile="9C", eight="see_through")
    assert not can(s, "8C")
    s = table("classic", "8C | | 4S", "6H 4H | | 4H", pile="5C", eight="see_through")
    s, _ = play(s, "8C")
    assert can(s, "6H") and not can(s, "4H")


def test_reversing_eight_turns_play_around():
    s = table("classic", "8C 5D | | 4S", "9H | | 4H", "9S | | 4C", pile="6C", eight="reverse")
    s, ev = play(s, "8C")
    assert s.direction == -1 and s.to_move == 2 and log(ev)[1] == {"kind": "reversed", "direction": -1}


def test_two_reversing_eights_cancel():
    """Decision 8: an odd number of reversing cards reverses."""
    s = table("classic", "8C 8D 5D | | 4S", "9H | | 4H", "9S | | 4C", pile="6C", eight="reverse")
    s, ev = play(s, "8C 8D")
    assert s.direction == 1 and s.to_move == 1 and "reversed" not in kinds(ev)


def test_reversing_with_two_players_changes_nothing_about_who_is_next():
    s = table("classic", "8C 5D | | 4S", "9H | | 4H", pile="6C", eight="reverse")
    s, _ = play(s, "8C")
    assert s.to_move == 1


# ---------------------------------------------------------------- 10


def test_ten_burns_and_the_same_player_draws_and_plays_again():
    s = table("classic", "TC 4D 5D | | 4S", "9H | | 4H", pile="AC KD", stock="9S")
    s, ev = play(s, "TC")
    assert log(ev) == [
        {"kind": "played", "seat": 0, "cards": ["TC"], "zone": "hand"},
        {"kind": "burned", "cards": ["AC", "KD", "TC"], "why": "ten"},
        {"kind": "drew", "seat": 0, "count": 1, "cards": ["9S"]},
    ]
    assert s.to_move == 0 and s.pile == () and show(s.burned) == "AC KD TC" and hand(s, 0) == "4D 5D 9S"


def test_ten_on_an_empty_pile_burns_itself():
    s = table("shithead", "TC 4D | | 4S", "9H | | 4H")
    s, ev = play(s, "TC")
    assert show(s.burned) == "TC" and s.to_move == 0


def test_ten_on_court_false_forbids_a_ten_on_jack_queen_king():
    for top in ("JC", "QC", "KC"):
        assert not can(table("classic", "TC | | 4S", "9H | | 4H", pile=top, ten_on_court=False), "TC")
    assert can(table("classic", "TC | | 4S", "9H | | 4H", pile="AC", ten_on_court=False), "TC")
    assert can(table("classic", "TC | | 4S", "9H | | 4H", pile="", ten_on_court=False), "TC")


def test_ten_on_court_is_judged_against_the_effective_top():
    """Decision 27: a see-through 3 on a king still shows a king; a 2 on a king opens the pile."""
    assert not can(table("powers", "TC | | 4S", "9H | | 4H", pile="KC 3D", ten_on_court=False), "TC")
    assert can(table("powers", "TC | | 4S", "9H | | 4H", pile="KC 2D", ten_on_court=False), "TC")


# ---------------------------------------------------------------- jokers


def test_joker_goes_on_anything_is_looked_through_and_reverses():
    """Decision 8 (003): a joker reverses direction; the card to beat is the one under it."""
    s = table("classic", "XR 5D | | 4S", "7H 9H | | 4H", "9S | | 4C", pile="9C", jokers=1)
    s, ev = play(s, "XR")
    assert s.direction == -1 and s.to_move == 2 and "reversed" in kinds(ev)
    assert not can(s, "7H") and can(s, "9S")


def test_two_jokers_do_not_reverse():
    s = table("classic", "XR XB 5D | | 4S", "7H 9H | | 4H", "9S | | 4C", pile="9C", jokers=2)
    s, ev = play(s, "XR XB")
    assert s.direction == 1 and s.to_move == 1


def test_eights_that_complete_four_of_a_kind_burn_and_reverse_nothing():
    """Decision 36: under eight=reverse a burning play of 8s has the burn's effect only, as under eight=skip."""
    for rule, nxt in (("burn_next", 1), ("burn_again", 0)):
        s = table("classic", "8S 5D | | 4S", "9H | | 4H", "9S | | 4C", pile="8C 8D 8H", eight="reverse",
                  four_of_a_kind=rule)
        s, ev = play(s, "8S")
        assert "burned" in kinds(ev) and "reversed" not in kinds(ev)
        assert s.direction == 1 and s.to_move == nxt


def test_an_eight_that_does_not_burn_reverses():
    s = table("classic", "8S 5D | | 4S", "9H | | 4H", "9S | | 4C", pile="8C 8D", eight="reverse")
    s, ev = play(s, "8S")
    assert "reversed" in kinds(ev) and s.direction == -1 and s.to_move == 2


def test_joker_reverse_with_two_players_next_is_still_the_other():
    s = table("classic", "XR 5D | | 4S", "7H 9H | | 4H", pile="9C", jokers=1)
    s, _ = play(s, "XR")
    assert s.to_move == 1


def test_joker_never_combines_with_another_rank():
    s = table("classic", "XR 5D | | 4S", "7H | | 4H", pile="4C", jokers=1)
    assert moves(s) == ["play 5D", "play XR"]  # must_play: no pick-up while a card plays


def test_joker_give_pile_names_a_target_and_the_next_player_leads():
    """Decision 8: the pile, jokers included, goes to the target's hand, public; the player after
    the joker's player leads on an empty pile."""
    s = table("shithead", "XR 5D | | 4S", "7H | | 4H", "9S | | 4C", pile="9C KD", jokers=1, joker="give_pile")
    assert moves(s) == ["play XR to 1", "play XR to 2", "pick_up"]
    s, ev = play(s, "XR", target=2)
    assert log(ev)[1] == {"kind": "gave_pile", "seat": 0, "target": 2, "cards": ["9C", "KD", "XR"]}
    assert hand(s, 2) == "9C 9S KD XR" and show(s.seats[2].known) == "9C KD XR"
    assert s.pile == () and s.to_move == 1 and s.direction == 1
    assert event_for(ev[1], 1)["cards"] == ["9C", "KD", "XR"]


def test_joker_give_pile_targets_only_seats_still_in():
    s = table("shithead", "XR 5D | | 4S", "| | -", "9S | | 4C", pile="9C", jokers=1, joker="give_pile",
              places={1: 1})
    assert moves(s) == ["play XR to 2", "pick_up"]


def test_four_jokers_given_away_burn_nothing():
    """Bug fix: four jokers laid at once hand the pile over; the four-of-a-kind burn (and its
    extra turn) does not also happen."""
    s = table("smeghead", "XR XR XB XB 5D | | 4S", "7H | | 4H", "9S | | 4C", pile="9C", jokers=2,
              joker="give_pile")
    s, ev = play(s, "XR XR XB XB", target=2)
    assert "burned" not in kinds(ev) and s.burned == () and s.to_move == 1
    assert hand(s, 2) == "9C 9S XR XR XB XB"


def test_joker_flipped_face_down_under_give_pile_gives_nothing():
    """Added decision: a blind flip cannot name a target; the joker is simply looked through."""
    s = table("shithead", "| | XR 4S", "7H | | 4H", pile="9C", jokers=1, joker="give_pile")
    s, ev = flip(s, 0)
    assert kinds(ev) == ["flipped"] and pile(s) == "9C XR" and s.to_move == 1
    assert not can(s, "7H")


# ---------------------------------------------------------------- four of a kind


def test_four_of_a_kind_burn_again_same_player_leads():
    """003: exactly like a 10."""
    s = table("shithead", "5S 9D | | 4S", "7H | | 4H", pile="5C 5D 5H")
    s, ev = play(s, "5S")
    assert log(ev)[1]["why"] == "four_of_a_kind" and s.to_move == 0 and s.pile == ()


def test_four_of_a_kind_by_one_player_at_once():
    s = table("shithead", "5C 5D 5H 5S 9D | | 4S", "7H | | 4H", pile="4C")
    s, ev = play(s, "5C 5D 5H 5S")
    assert show(s.burned) == "4C 5C 5D 5H 5S" and s.to_move == 0


def test_four_of_a_kind_burn_next_next_player_leads():
    """000/001: the next player plays any card."""
    s = table("classic", "5S 9D | | 4S", "3H | | 4H", pile="5C 5D 5H")
    s, ev = play(s, "5S")
    assert "burned" in kinds(ev) and s.to_move == 1 and can(s, "3H")


def test_four_of_a_kind_off():
    s = table("skip8", "5S 9D | | 4S", "3H 6H | | 4H", pile="5C 5D 5H")
    s, ev = play(s, "5S")
    assert "burned" not in kinds(ev) and pile(s) == "5C 5D 5H 5S" and not can(s, "3H")


@pytest.mark.parametrize("pile_,cards", [("4C", "5C 5C 5D 5D 5H"), ("5S 5H", "5C 5C 5D")])
def test_several_decks_five_or_more_of_a_rank_burn(pile_, cards):
    """Decision 14: with several decks, five or more laid at once burn; the top four decide."""
    s = table("smeghead", "5C 5C 5D 5D 5H 5S 9D | | 4S", "3H | | 4H", pile=pile_)
    s, ev = play(s, cards)
    assert "burned" in kinds(ev) and s.pile == ()


def test_face_down_flip_can_complete_four_of_a_kind():
    s = table("shithead", "| | 5S 4S", "3H | | 4H", pile="5C 5D 5H")
    s, ev = flip(s, 0)
    assert kinds(ev) == ["flipped", "burned"] and s.to_move == 0
