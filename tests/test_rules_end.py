"""Scenarios: going out, results, caps, no-burner-out and forfeits (docs/RULES.md, "End")."""

from __future__ import annotations

import pytest

from arena.engine import PRESETS, forfeit, new_game, preset
from arena.engine.model import GameOver, Result
from arena.engine.views import event_for, seat_view
from tests.conftest import flip, kinds, log, moves, pick_up, play, show, table

# ---------------------------------------------------------------- first out (decision 24)


def test_first_out_wins_and_the_rest_are_unranked():
    s = table("classic", "9C | | -", "3H | | 4H", "3S | | 4S", pile="5C")
    s, ev = play(s, "9C")
    assert log(ev)[1:] == [
        {"kind": "went_out", "seat": 0, "place": 1},
        {"kind": "game_over", "result": {"reason": "first_out", "order": [[0], [1, 2]], "complete": False,
                                         "draw": False, "winner": 0, "loser": None}},
    ]
    assert s.phase == "over" and s.result == Result("first_out", ((0,), (1, 2)), False)


def test_first_out_with_two_players_is_a_complete_result():
    s = table("powers", "9C | | -", "3H | | 4H", pile="5C")
    s, _ = play(s, "9C")
    assert s.result.complete and s.result.winner == 0 and s.result.loser == 1


def test_going_out_needs_every_layer_empty():
    s = table("classic", "9C | | 4D", "3H | | 4H", pile="5C")
    s, ev = play(s, "9C")
    assert "went_out" not in kinds(ev) and s.result is None


# ---------------------------------------------------------------- play on (003, 002)


def test_play_on_until_one_player_is_left_who_loses():
    s = table("shithead", "9C | | -", "3H KH | | -", "3S | | 4S", pile="5C")
    s, ev = play(s, "9C")
    assert log(ev)[-1] == {"kind": "went_out", "seat": 0, "place": 1} and s.result is None
    assert s.to_move == 1
    s, ev = play(s, "KH")
    s, ev = pick_up(s)  # seat 2 cannot beat the king
    s, ev = play(s, "3H")
    assert s.result == Result("played_out", ((0,), (1,), (2,)), True)
    assert s.result.loser == 2 and s.result.winner == 0


# ---------------------------------------------------------------- burning with the last card (decision 11)


def test_burning_with_the_last_card_passes_the_turn_to_the_next_seat_still_in():
    s = table("shithead", "TC | | -", "3H | | 4H", "3S | | 4S", pile="5C")
    s, ev = play(s, "TC")
    assert kinds(ev) == ["played", "burned", "went_out"] and s.to_move == 1 and s.seats[0].place == 1


def test_completing_four_of_a_kind_with_the_last_card_passes_the_turn():
    s = table("shithead", "| 5S | -", "| | -", "3S | | 4S", "3D | | 4D", pile="5C 5D 5H", places={1: 1})
    s, ev = play(s, "5S")
    assert kinds(ev) == ["played", "burned", "went_out"] and s.to_move == 2 and s.seats[0].place == 2


def test_burning_with_the_last_face_down_card_passes_the_turn():
    s = table("shithead", "| | - TC", "3H | | 4H", "3S | | 4S", pile="5C")
    s, ev = flip(s, 1)
    assert kinds(ev) == ["flipped", "burned", "went_out"] and s.to_move == 1


# ---------------------------------------------------------------- no going out on a burner (decision 23)


def test_burner_out_false_refuses_going_out_on_a_ten():
    s = table("shithead", "TC | | -", "3H | | 4H", pile="5C", burner_out=False)
    assert moves(s) == ["pick_up"]


def test_burner_out_false_refuses_going_out_on_four_of_a_kind():
    s = table("shithead", "| 5S | -", "3H | | 4H", pile="5C 5D 5H", burner_out=False)
    assert moves(s) == ["pick_up"]


def test_burner_out_false_still_allows_a_burn_that_is_not_the_last_card():
    s = table("shithead", "TC 9D | | -", "3H | | 4H", pile="5C", burner_out=False)
    assert moves(s) == ["play 9D", "play TC", "pick_up"]


def test_burner_out_false_allows_it_when_nothing_else_is_legal_and_the_pile_is_empty():
    s = table("shithead", "TC | | -", "3H | | 4H", pile="", burner_out=False)
    assert moves(s) == ["play TC"]
    s, ev = play(s, "TC")
    assert s.result.winner == 0


def test_burner_out_false_last_face_down_burner_is_a_failed_flip():
    s = table("shithead", "| | - TC", "3H | | 4H", pile="5C", burner_out=False)
    s, ev = flip(s, 1)
    assert log(ev) == [{"kind": "flipped", "seat": 0, "position": 1, "card": "TC", "legal": False},
                       {"kind": "picked_up", "seat": 0, "cards": ["5C", "TC"]}]
    assert s.to_move == 1 and s.result is None


def test_burner_out_true_default_goes_out_on_a_ten():
    s = table("shithead", "TC | | -", "3H | | 4H", pile="5C")
    assert moves(s) == ["play TC", "pick_up"]


# ---------------------------------------------------------------- every game ends (decision 10)


def test_turn_cap_ends_the_game_as_a_draw():
    s = table("classic", "9C 4D | | 4S", "3H | | 4H", "3S | | 4C", pile="5C", turn=1999)
    s, ev = play(s, "9C")
    assert s.result == Result("turn_cap", ((0, 1, 2),), True, True) and s.result.winner is None
    assert log(ev)[-1]["result"]["reason"] == "turn_cap"


def test_turn_cap_default_is_2000_and_configurable():
    assert new_game(preset("classic"), 2, seed=1).max_turns == 2000
    assert new_game(preset("classic"), 2, seed=1, max_turns=50).max_turns == 50


def test_a_draw_keeps_the_places_already_won():
    """Bug fix: in a play-on game, seats that went out before the cap keep their places; only the
    seats still holding cards are tied."""
    s = table("shithead", "| | -", "9C 4D | | 4S", "3H | | 4H", "3S | | 4C", pile="5C", to_move=1,
              places={0: 1}, turn=1999)
    s, ev = play(s, "9C")
    assert s.result == Result("turn_cap", ((0,), (1, 2, 3)), True, True)


def test_stale_turns_400_without_a_burn_or_anyone_going_out_is_a_draw():
    """000: 400 turns in a row without a pile being burned or a player going out."""
    s = table("powers", "9C 4D | | 4S", "3H | | 4H", pile="5C", stale=399)
    s, ev = play(s, "9C")
    assert s.result == Result("stale_draw", ((0, 1),), True, True)


def test_a_burn_resets_the_stale_count():
    s = table("powers", "TC 4D | | 4S", "3H | | 4H", pile="5C", stale=399)
    s, ev = play(s, "TC")
    assert s.result is None and s.stale == 0


def test_a_pick_up_counts_as_a_stale_turn():
    s = table("powers", "4D | | 4S", "3H | | 4H", pile="5C", stale=10)
    s, _ = pick_up(s)
    assert s.stale == 11


def test_only_powers_has_the_stale_rule():
    assert {n: r.stale_turns for n, r in PRESETS.items()} == {
        "powers": 400, "classic": None, "skip8": None, "shithead": None, "smeghead": None}


# ---------------------------------------------------------------- forfeits (decision 25)


def test_forfeit_removes_the_seat_to_last_place_and_the_others_play_on():
    s = new_game(preset("shithead").replace(setup="none"), 3, seed=5)
    gone = sorted(s.seats[1].hand + s.seats[1].face_up_cards + s.seats[1].face_down)
    s, ev = forfeit(s, 1, "timeout")
    assert log(ev) == [{"kind": "forfeited", "seat": 1, "reason": "timeout"}]
    assert s.seats[1].place == 3 and s.seats[1].card_count == 0 and s.seats[1].forfeit == "timeout"
    assert sorted(s.set_aside) == gone and s.result is None
    assert seat_view(s, 0)["set_aside"] == len(gone)
    assert not set(show(gone).split()) & set(str(seat_view(s, 0)).replace("'", " ").split())
    s, ev = forfeit(s, 2, "crash")
    assert s.result == Result("forfeit", ((0,), (2,), (1,)), True)


def test_forfeit_of_the_player_to_move_passes_the_turn():
    s = table("shithead", "4C | | 4S", "3H | | 4H", "3S | | 4D", pile="5C")
    s, _ = forfeit(s, 0, "illegal")
    assert s.to_move == 1 and moves(s)


def test_forfeit_during_setup():
    s = new_game(preset("shithead"), 3, seed=5)
    s, _ = forfeit(s, 0, "timeout")
    assert s.phase == "setup" and s.to_move == 1


def test_forfeit_with_two_players_ends_the_game():
    s = new_game(preset("shithead"), 2, seed=5)
    s, ev = forfeit(s, 1, "timeout")
    assert s.result == Result("forfeit", ((0,), (1,)), True) and kinds(ev) == ["forfeited", "game_over"]


def test_forfeit_after_finishing_or_after_the_end_does_nothing():
    s = table("shithead", "| | -", "3H | | 4H", "3S | | 4D", places={0: 1}, to_move=1, pile="5C")
    assert forfeit(s, 0, "timeout") == (s, [])


def test_forfeit_keeps_places_already_won():
    s = table("shithead", "| | -", "3H | | 4H", "3S | | 4D", "3C | | 4C", places={0: 1}, to_move=1,
              pile="5C")
    s, _ = forfeit(s, 1, "timeout")
    s, _ = forfeit(s, 2, "timeout")
    assert s.result == Result("forfeit", ((0,), (3,), (2,), (1,)), True)
    assert event_for(GameOver(s.result), None)["result"]["loser"] == 1


@pytest.mark.parametrize("preset_name", ["powers", "classic", "skip8", "shithead", "smeghead"])
@pytest.mark.parametrize("players", [2, 4])
def test_turn_counts_the_action_that_ends_the_game(preset_name: str, players: int) -> None:
    """Decision 37: a finished game's turn is the number of play-phase actions, the last included."""
    import random

    from arena.engine import PRESETS, apply_action, legal_actions, new_game
    for seed in range(5):
        state = new_game(PRESETS[preset_name], players, seed)
        rng = random.Random(seed)
        actions = 0
        while not state.over:
            playing = state.phase == "play"
            acts = legal_actions(state)
            state, _ = apply_action(state, acts[rng.randrange(len(acts))])
            actions += playing
        assert state.turn == actions, (seed, state.result)
