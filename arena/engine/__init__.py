"""The Palace rules engine: pure functions over immutable data, no I/O.

Typical use::

    state = new_game(preset("classic"), players=2, seed=7)
    while not state.over:
        action = choose(legal_actions(state))
        state, events = apply_action(state, action)

The hot modules may be compiled by mypyc (see ``compiled.py``); ``IMPLEMENTATION`` says
which engine is running ("compiled" or "python"). Both play identical games.
"""

from .compiled import IMPLEMENTATION  # first: it decides where the modules below come from
from .cards import card_str, cards_str, parse_card, parse_cards
from .game import (
    DEFAULT_MAX_TURNS, IllegalActionError, apply_action, can_play, effective_top, forfeit,
    legal_actions, new_game, start_game,
)
from .model import (
    Action, Done, Event, Flip, PickUp, Play, Result, Seat, SetFaceUp, Stack, State,
)
from .rules import PRESETS, Rules, RulesError, parse_option, preset, rules_from, with_options

__all__ = [
    "DEFAULT_MAX_TURNS", "IMPLEMENTATION", "PRESETS", "Action", "Done", "Event", "Flip", "IllegalActionError",
    "PickUp", "Play", "Result", "Rules", "RulesError", "Seat", "SetFaceUp", "Stack", "State",
    "apply_action", "can_play", "card_str", "cards_str", "effective_top", "forfeit",
    "legal_actions", "new_game", "parse_card", "parse_cards", "parse_option", "preset",
    "rules_from", "start_game", "with_options",
]
