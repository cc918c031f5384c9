"""The presets' defining rules, option parsing, and the generated rule text (arena.engine.describe)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from arena.engine import PRESETS, Rules, RulesError, new_game, parse_option, preset, rules_from
from arena.engine.describe import OPTION_HELP, describe
from tests.conftest import moves, play, table

INIT_FIELDS = [f.name for f in dataclasses.fields(Rules) if f.init]
DEFAULT = Rules()

# What makes each preset what it is, from its seed document (docs/RULES.md, "Presets").
DEFINING = {
    "powers": dict(min_players=2, max_players=5, decks=1, extra_deck_at=(3,), setup="choose",
                   start="stock_card", three="see_through", seven="at_most", four_of_a_kind="burn_next",
                   must_play=False, face_up_multi=False, play_on=False, stale_turns=400),
    "classic": dict(min_players=2, max_players=5, decks=1, extra_deck_at=(3,), setup="choose",
                    start="stock_card", three="plain", seven="plain", eight="plain",
                    four_of_a_kind="burn_next", must_play=True, play_on=False, stale_turns=None),
    "skip8": dict(min_players=2, max_players=6, decks=1, short_deal=((6, 3, 3, 2),), setup="swap",
                  start="left_of_dealer", eight="skip", four_of_a_kind="off", match_count=True,
                  must_play=True, play_on=True, reset_again=False),
    "shithead": dict(min_players=2, max_players=5, decks=1, face_down=3, face_up=3, hand_size=3,
                     setup="swap", start="lowest_card", four_of_a_kind="burn_again", must_play=False,
                     face_up_multi=True, play_on=True, jokers=0),
    "smeghead": dict(min_players=2, max_players=6, decks=2, extra_deck_at=(5,), face_down=4, face_up=4,
                     hand_size=4, setup="swap", start="lowest_card", four_of_a_kind="burn_again",
                     face_up_multi=True, play_on=True),
}


@pytest.mark.parametrize("name", sorted(DEFINING))
def test_preset_defining_rules(name):
    r = preset(name)
    for field, value in DEFINING[name].items():
        assert getattr(r, field) == value, field


def test_aliases_name_the_seed_documents():
    assert [preset(a).name for a in ("000", "001", "002", "003", "palace", "karma")] == [
        "powers", "classic", "skip8", "shithead", "classic", "shithead"]
    with pytest.raises(RulesError):
        preset("whist")


def test_classic_only_two_and_ten_are_special():
    """001: the published rules; a 7 is an ordinary card and you must play if you can."""
    s = table("classic", "3C 7C 8C | | 4S", "3H 9H | | 4H", "3D | | 4D", pile="5C")
    assert moves(s) == ["play 7C", "play 8C"]
    s, _ = play(s, "7C")
    assert s.to_move == 1 and moves(s) == ["play 9H"]


def test_powers_story():
    """000 in one round: a 7 forces low, then four in a row burn and the next player leads."""
    s = table("powers", "7C 4C | | 4S", "5H 9H | | 4H", "5C 5D 5S KS | | 4D", pile="6C")
    s, _ = play(s, "7C")
    assert moves(s) == ["play 5H", "pick_up"]
    s, _ = play(s, "5H")
    assert moves(s) == ["play 5C", "play 5C 5D", "play 5C 5D 5S", "play KS", "pick_up"]
    s, ev = play(s, "5C 5D 5S")
    assert [e.kind for e in ev] == ["played", "burned"] and s.to_move == 0 and s.pile == ()


def test_skip8_story():
    """002 at a table of four: pairs answered by pairs, an 8 skips, last with cards loses."""
    s = table("skip8", "5C 5D 8C | | -", "6H 6S | | 4H", "KS | | 4D", "9D 9S | | 4C", pile="4C")
    s, _ = play(s, "5C 5D")
    assert s.need == 2 and moves(s) == ["play 6H 6S"]
    s, _ = play(s, "6H 6S")
    assert s.to_move == 2 and moves(s) == ["pick_up"]  # one king cannot answer a pair


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_preset_player_range_is_enforced(name):
    r = preset(name)
    with pytest.raises(RulesError):
        new_game(r, r.max_players + 1, seed=1)
    with pytest.raises(RulesError):
        new_game(r, 1, seed=1)


def test_rule_sets_that_cannot_be_dealt_are_refused():
    with pytest.raises(RulesError):
        preset("shithead").replace(max_players=6)  # 54 cards for 52
    assert preset("shithead").replace(max_players=6, jokers=2).max_players == 6  # 003: jokers make six


def test_bad_choice_values_are_refused():
    with pytest.raises(RulesError):
        Rules(seven="sometimes")
    with pytest.raises(RulesError):
        Rules(jokers=3)


# ---------------------------------------------------------------- options


@pytest.mark.parametrize("text,expected", [
    ("must_play=true", ("must_play", True)), ("play_on=off", ("play_on", False)),
    ("stale_turns=none", ("stale_turns", None)), ("stale_turns=250", ("stale_turns", 250)),
    ("decks=2", ("decks", 2)), ("extra_deck_at=3,5", ("extra_deck_at", (3, 5))),
    ("short_deal=6:3:3:2", ("short_deal", ((6, 3, 3, 2),))), ("seven=glass", ("seven", "glass")),
])
def test_parse_option(text, expected):
    assert parse_option(text) == expected


def test_unknown_or_malformed_options_are_refused():
    for text in ("sevens=glass", "must_play", "must_play=maybe"):
        with pytest.raises(RulesError):
            parse_option(text)


def test_options_mark_the_name_and_round_trip():
    r = rules_from("classic", ["seven=glass", "jokers=1"])
    assert r.name == "classic+" and r.seven == "glass" and r.jokers == 1
    for p in list(PRESETS.values()) + [r]:
        assert Rules.from_options(p.options()) == p


# ---------------------------------------------------------------- describe


def test_every_option_has_help_text():
    assert set(OPTION_HELP) == set(INIT_FIELDS)
    assert all(text and "\n" not in text for text in OPTION_HELP.values())


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_describe_has_the_four_sections(name):
    text = describe(preset(name))
    assert text.startswith(f"# {name}\n")
    assert [line for line in text.splitlines() if line.startswith("## ")] == [
        "## Setup", "## Cards", "## Play", "## End"]


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_describe_mentions_each_non_default_option(name):
    """Every option the preset changes is named with its value, and the prose depends on it."""
    r = preset(name)
    text = describe(r)
    for field in INIT_FIELDS:
        if field == "name" or getattr(r, field) == getattr(DEFAULT, field):
            continue
        assert f"`{field}=" in text, field
        try:
            back = r.replace(**{field: getattr(DEFAULT, field)})
        except RulesError:
            continue  # (skip8 without its short deal cannot seat six)
        assert describe(back) != text, field


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_describe_tags_parse_back_to_the_rules(name):
    """Each `name=value` in the text is what the command line takes, and is the rule's value."""
    r = rules_from(name, ["jokers=1", "joker=give_pile", "stacking=true"] if name == "shithead" else [])
    tags = re.findall(r"`(\w+=[^`]*)`", describe(r))
    assert tags
    for tag in tags:
        field, value = parse_option(tag)
        assert getattr(r, field) == value, tag


def test_describe_follows_options():
    assert "may not go on a jack" in describe(rules_from("classic", ["ten_on_court=false"]))
    assert "hands the pile" not in describe(preset("shithead"))
    assert "target" in describe(rules_from("shithead", ["jokers=1", "joker=give_pile"]))


# ---------------------------------------------------------------- docs/RULES.md


def test_rules_doc_names_only_tests_that_exist():
    """Every test docs/RULES.md cites for a decision exists, in a file that decision links."""
    root = Path(__file__).resolve().parents[1]
    doc = (root / "docs" / "RULES.md").read_text()
    defs = {path.stem: set(re.findall(r"^def (test_\w+)", path.read_text(), re.M))
            for path in (root / "tests").glob("test_*.py")}
    items = re.split(r"\n(?=\d+\. \*\*)", doc.split("## Decisions", 1)[1])[1:]
    assert len(items) >= 27
    cited = 0
    for item in items:
        files = re.findall(r"\(\.\./tests/(\w+)\.py\)", item)
        names = set(re.findall(r"\b(test_\w+)", item)) - set(defs)
        assert files and names, item[:60]
        known = set().union(*(defs[f] for f in files))
        assert not names - known, (item[:40], sorted(names - known))
        cited += len(names)
    assert cited > 100


def test_rules_doc_lists_every_option_and_preset():
    doc = (Path(__file__).resolve().parents[1] / "docs" / "RULES.md").read_text()
    for field in INIT_FIELDS:
        assert f"`{field}`" in doc, field
    for name in PRESETS:
        assert f"`{name}`" in doc, name
