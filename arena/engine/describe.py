"""A rule set in plain English, generated from its option fields.

``describe(rules)`` writes every rule of a :class:`~arena.engine.rules.Rules` as
short markdown (sections Setup, Cards, Play, End). Each sentence is built from
the field it describes and ends with that field's setting in backticks, written
the way ``arena ... -o name=value`` accepts it, so the text cannot drift from
the code and a reader can see which option to change. ``OPTION_HELP`` has one
line per option for ``--help`` texts and the docs.
"""

from __future__ import annotations

from typing import Any

from .game import DEFAULT_MAX_TURNS
from .rules import Rules

__all__ = ["OPTION_HELP", "describe", "option_value"]

OPTION_HELP: dict[str, str] = {
    "name": "the rule set's name (a preset's name; '+' is added once options change it)",
    "min_players": "the fewest players the rule set is for (2 or more)",
    "max_players": "the most players the rule set is for (8 at most)",
    "decks": "how many 52-card decks are shuffled together",
    "extra_deck_at": "player counts from which one more deck is shuffled in, e.g. 3 (two decks from 3 players)",
    "jokers": "jokers per deck: 0, 1 or 2",
    "face_down": "face-down cards dealt to each player",
    "face_up": "face-up places per player",
    "hand_size": "cards dealt to the hand, and the number a player draws back up to",
    "short_deal": "players:down:up:hand for a table the deck cannot fill: no stock, the rest set aside unseen",
    "setup": "choose (face-up cards chosen from a hand of up+hand) | swap (swap hand and face-up freely) | none",
    "stacking": "stack same-rank cards on one face-up place at setup, drawing back up and stacking again",
    "start": "stock_card (seat 0 beats a card turned from the stock) | left_of_dealer (seat 0 leads) "
             "| lowest_card (the first face-up 3, else first 3 in hand, and so on up, leads)",
    "three": "plain | see_through (a 3 goes on anything; the next player beats the card under it)",
    "seven": "plain | at_most (next card 7 or lower) | at_most_or_8 (an 8 also escapes) "
             "| descending (after a 7 play runs downward until a wild card) | glass (7 on anything, looked through)",
    "eight": "plain | skip (each 8 skips a player) | see_through (looked through) | reverse (turns play around)",
    "joker": "reverse (a joker turns play around and is looked through) | give_pile (hands the pile to a chosen seat)",
    "ten_on_court": "whether a 10 may be played on a jack, queen or king",
    "four_of_a_kind": "off | burn_next (four of a rank on top burn; the next player leads) "
                      "| burn_again (burn like a 10; the same player leads again)",
    "reset_again": "the player who lays a 2 plays again (002's walkthrough) instead of the next player",
    "match_count": "a set of N cards must be answered with at least N cards (wild cards may go singly)",
    "must_play": "a player who can play must; pick up only when no card can be played",
    "face_up_multi": "several same-rank face-up cards (or stacks) may be played in one turn",
    "harsh_face_up": "failing from the face-up row costs one face-up card, laid on the pile before picking it up",
    "burner_out": "whether a player may go out on a 10 or a four-of-a-kind burn",
    "play_on": "play on after the first player is out until one is left (the loser); false: first out wins",
    "stale_turns": "this many turns in a row without a burn or anyone going out end the game as a draw (none: off)",
}


def option_value(value: Any) -> str:
    """A value as ``name=value`` takes it on the command line (see ``rules.parse_option``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "none"
    if isinstance(value, tuple):
        return ",".join(":".join(map(str, v)) if isinstance(v, tuple) else str(v) for v in value)
    return str(value)


def _tag(r: Rules, *names: str) -> str:
    shown = [f"`{n}={option_value(getattr(r, n))}`" for n in names if getattr(r, n) != ()]
    return " (" + ", ".join(shown) + ")" if shown else ""


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _setup(r: Rules) -> list[str]:
    out = [f"{r.min_players} to {r.max_players} players." + _tag(r, "min_players", "max_players")]
    decks = _plural(r.decks, "deck") + " of 52 cards"
    if r.extra_deck_at:
        more = ", ".join(str(n) for n in r.extra_deck_at)
        decks += f", and one more deck from {more} players on"
    out.append(decks + "." + _tag(r, "decks", "extra_deck_at"))
    if r.jokers:
        out.append(f"Each deck keeps {_plural(r.jokers, 'joker')}." + _tag(r, "jokers"))
    else:
        out.append("Jokers are taken out." + _tag(r, "jokers"))
    out.append(f"Each player is dealt {r.face_down} cards face down in a row, unseen even by their owner; "
               f"{r.face_up} face-up places go on top of them and {r.hand_size} cards go to the hand. "
               "The rest is the stock." + _tag(r, "face_down", "face_up", "hand_size"))
    if r.short_deal:
        for n, down, up, hand in r.short_deal:
            out.append(f"With {n} players the deal is {down} down, {up} up and {hand} in hand; there is no "
                       "stock, and the cards left over are set aside unseen." + _tag(r, "short_deal"))
    else:
        out.append("Every table size gets the full deal." + _tag(r, "short_deal"))
    setup = {
        "choose": f"All {r.face_up + r.hand_size} cards not face down are dealt to the hand; each player "
                  f"chooses {r.face_up} of them to lay face up and keeps the rest.",
        "swap": "Before the first card each player may swap freely between hand and face-up cards; "
                "face-down cards are never touched.",
        "none": "The face-up cards stay as dealt; nobody swaps.",
    }[r.setup]
    out.append(setup + " Players decide in seat order, and nobody sees another player's face-up cards "
               "until play starts." + _tag(r, "setup"))
    if r.stacking:
        out.append("Cards of one rank may be stacked on one face-up place; the player then draws back up to "
                   f"{r.hand_size} and may stack any drawn card of a stacked rank, again and again. A stack is "
                   "played as one group." + _tag(r, "stacking"))
    else:
        out.append("Each face-up place holds one card." + _tag(r, "stacking"))
    start = {
        "stock_card": "The top card of the stock is turned face up to start the pile (a 10 or a joker turned "
                      "there is set aside and the next one turned); seat 0, left of the dealer, must beat it. "
                      "Its effect on the pile counts (a 2 opens it, a 7 may force low), its effect on the turn "
                      "order (skip, reverse) does not.",
        "left_of_dealer": "Seat 0, left of the dealer, leads any card on an empty pile.",
        "lowest_card": "The first seat (from seat 0) with a face-up 3 leads, else the first with a 3 in hand; "
                       "if nobody has a 3, the same on 4s, and so on up to aces, then 2s, then jokers.",
    }[r.start]
    out.append(start + _tag(r, "start"))
    return out


def _cards(r: Rules) -> list[str]:
    out = ["Ranks run 3 (low) to ace (high); the 2 and the 10 stand outside that ladder. Suits never matter. "
           "A card must be equal to or higher than the card to beat."]
    two = "A 2 goes on anything and resets: the 2 stays in the pile and the next card may be anything. "
    two += ("The player who laid it plays again." if r.reset_again else "The next player plays on it.")
    out.append(two + _tag(r, "reset_again"))
    out.append({
        "plain": "The 3 is an ordinary card, the lowest on the ladder.",
        "see_through": "A 3 goes on anything and is see-through: the next player beats the card under it "
                       "(several 3s are all looked through; on a pile of only 3s anything goes).",
    }[r.three] + _tag(r, "three"))
    out.append({
        "plain": "The 7 is an ordinary card.",
        "at_most": "A 7 is played by the usual rule, and the next card must be a 7 or lower "
                   "(a 2, a 10 or another wild card escapes it).",
        "at_most_or_8": "A 7 is played by the usual rule, and the next card must be a 7 or lower, or an 8 "
                        "(a 2, a 10 or another wild card escapes it too).",
        "descending": "A 7 is played by the usual rule and starts a descending run: every following card must "
                      "be no higher than the card to beat, until a wild card or an empty pile ends the run.",
        "glass": "A 7 is glass: it goes on anything and is see-through, so the next player beats the card "
                 "under it.",
    }[r.seven] + _tag(r, "seven"))
    out.append({
        "plain": "The 8 is an ordinary card.",
        "skip": "Each 8 played skips one player still in the game (with two players an 8 gives the turn "
                "back); 8s that complete a four-of-a-kind burn skip nobody.",
        "see_through": "An 8 is played by the usual rule and is then see-through: the next player beats the "
                       "card under it.",
        "reverse": "An odd number of 8s turns the direction of play around.",
    }[r.eight] + _tag(r, "eight"))
    ten = "A 10 goes on anything, even an empty pile, and burns the pile with itself; the same player draws " \
          "back up and plays again."
    if not r.ten_on_court:
        ten += " But a 10 may not go on a jack, queen or king (judged on the card to beat)."
    out.append(ten + _tag(r, "ten_on_court"))
    if r.jokers:
        out.append({
            "reverse": "A joker goes on anything, singly or several together, is see-through, and an odd "
                       "number of jokers turns the direction of play around.",
            "give_pile": "A joker goes on anything and names a target player: the whole pile, jokers included, "
                         "goes into the target's hand, and the player after the joker's player leads on an "
                         "empty pile. A joker turned face down gives nothing and is see-through.",
        }[r.joker] + _tag(r, "joker"))
    else:
        out.append("No jokers are in play, so the joker rule does not arise." + _tag(r, "joker"))
    out.append({
        "off": "Four of a kind has no power.",
        "burn_next": "When the top four cards of the pile share a rank (laid by one player or several, "
                     "see-through cards counted as cards), the pile burns and the next player leads.",
        "burn_again": "When the top four cards of the pile share a rank (laid by one player or several, "
                      "see-through cards counted as cards), the pile burns like a 10 and the same player "
                      "leads again.",
    }[r.four_of_a_kind] + _tag(r, "four_of_a_kind"))
    return out


def _play(r: Rules) -> list[str]:
    out = ["Play goes to the left (seat order). On your turn play one card, or several of one rank, from "
           "your hand; then draw back up to the hand size while the stock lasts. Nothing is drawn on a "
           "pick-up." + _tag(r, "hand_size")]
    if r.match_count:
        out.append("A set of N cards must be answered with at least N cards of one rank; a 2, a 10 or "
                   "another wild card may still go singly on any set, and after a 2, a burn or a pick-up "
                   "there is no requirement." + _tag(r, "match_count"))
    else:
        out.append("Any number of cards may answer a set." + _tag(r, "match_count"))
    if r.must_play:
        out.append("You must play if you can; you pick up the pile only when no card can go."
                   + _tag(r, "must_play"))
    else:
        out.append("You may pick up the pile instead of playing whenever it has a card (not in the "
                   "face-down stage)." + _tag(r, "must_play"))
    out.append("Picking up takes the whole pile into your hand, seen by all, and ends your turn; the next "
               "player leads on an empty pile. An empty pile is never picked up.")
    out.append("Hand first: while you hold cards in hand you play only from it. Then come the face-up cards, "
               + ("several of one rank (or several stacks) in one turn if you like."
                  if r.face_up_multi else "one card (or one stack) a turn.") + _tag(r, "face_up_multi"))
    if r.harsh_face_up:
        out.append("Failing from the face-up row is harsh: you lay one face-up card of your choice on the "
                   "pile and then take the lot." + _tag(r, "harsh_face_up"))
    else:
        out.append("Failing from the face-up row: pick up the pile and keep the row." + _tag(r, "harsh_face_up"))
    out.append("Last, the face-down cards: pick a position blind and turn it over. If it is legal on the card "
               "to beat it is played with its full effect; if not, it goes into your hand with the pile.")
    return out


def _end(r: Rules) -> list[str]:
    out = []
    if r.play_on:
        out.append("A player with no cards left is out and takes the next place; play goes on until one "
                   "player is left holding cards, who comes last." + _tag(r, "play_on"))
    else:
        out.append("The first player with no cards left wins and the game ends; the others are unranked."
                   + _tag(r, "play_on"))
    if r.burner_out:
        out.append("Going out on a 10 or a four-of-a-kind burn is allowed; the next player still in leads."
                   + _tag(r, "burner_out"))
    else:
        out.append("You may not go out on a 10 or a four-of-a-kind burn (unless nothing else is legal and the "
                   "pile is empty); a last face-down card that would burn is a failed flip."
                   + _tag(r, "burner_out"))
    if r.stale_turns is not None:
        out.append(f"{r.stale_turns} turns in a row without a burn or anyone going out end the game as a draw."
                   + _tag(r, "stale_turns"))
    else:
        out.append("There is no stale-game draw rule." + _tag(r, "stale_turns"))
    out.append(f"Every game ends: after {DEFAULT_MAX_TURNS} turns of play (the referee's cap, adjustable per "
               "game) the game is adjudicated a draw among the players still holding cards.")
    return out


def describe(rules: Rules) -> str:
    """The rule set in plain English, as markdown."""
    parts = [f"# {rules.name}", ""]
    for title, lines in (("Setup", _setup(rules)), ("Cards", _cards(rules)), ("Play", _play(rules)),
                         ("End", _end(rules))):
        parts += [f"## {title}", ""] + [f"- {line}" for line in lines] + [""]
    return "\n".join(parts)


if __name__ == "__main__":  # python -m arena.engine.describe [preset] [name=value ...]
    import sys

    from .rules import rules_from
    print(describe(rules_from(sys.argv[1] if len(sys.argv) > 1 else "classic", sys.argv[2:])))
