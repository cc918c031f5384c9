"""The one config layer (arena.config): every key of every file typed, nothing passed through, and
containment weakened only on the command line, never by a tournament or ladder file."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from arena.config import LadderFile, TournamentFlags
from arena.ladder.config import Ladder, LadderError, Matchmaking, list_ladders, load_ladder
from arena.tournament.config import ConfigError, TournamentConfig, load_config

ROOT = Path(__file__).resolve().parents[1]


def _tournament(tmp_path: Path, text: str) -> Path:
    f = tmp_path / "t.toml"
    f.write_text('bots = ["random", "lowest"]\ndeals = 1\n' + text)
    return f


def _ladder(tmp_path: Path, text: str) -> Path:
    f = tmp_path / "lad.toml"
    f.write_text('bots = ["random", "lowest"]\n' + text)
    return f


@pytest.mark.parametrize("line, flag", [
    ('trusted_bots = "yes please"', "--trusted-bots"),
    ("trusted_bots = true", "--trusted-bots"),
    ("trusted_bots = false", "--trusted-bots"),
    ("sandbox = false", "--no-sandbox"),
    ('sandbox = "no"', "--no-sandbox"),
])
def test_a_tournament_file_cannot_weaken_containment(tmp_path: Path, line: str, flag: str) -> None:
    with pytest.raises(ConfigError) as e:
        load_config(_tournament(tmp_path, line + "\n"))
    text = str(e.value)
    assert str(tmp_path / "t.toml") in text and "only the command line" in text and flag in text


@pytest.mark.parametrize("line", ["trusted_bots = true", 'trusted_bots = "yes please"', "sandbox = false"])
def test_a_ladder_file_cannot_weaken_containment(tmp_path: Path, line: str) -> None:
    with pytest.raises(LadderError, match="only the command line"):
        load_ladder(_ladder(tmp_path, line + "\n"), check_bots=False)


def test_other_spellings_of_trust_are_unknown_keys(tmp_path: Path) -> None:
    for line in ("trusted = true", "no_sandbox = true", "unsandboxed = true", "[trusted_bots]\nall = true"):
        with pytest.raises(ConfigError, match="unknown|only the command line"):
            load_config(_tournament(tmp_path, line + "\n"))


def test_a_file_may_ask_for_more_containment_and_flags_decide(tmp_path: Path) -> None:
    f = _tournament(tmp_path, "sandbox = true\n")
    assert load_config(f).sandbox is True
    assert load_config(f, {"sandbox": False}).sandbox is False  # the operator's flag, this run only
    assert load_config(f, {"trusted_bots": True}).trusted_bots is True
    assert load_config(_tournament(tmp_path, "")).trusted_bots is False


@pytest.mark.parametrize("flags", [{"trusted_bots": "yes please"}, {"trusted_bots": 1}, {"sandbox": "off"},
                                   {"no_such_flag": 1}])
def test_flags_are_typed_too(flags: dict) -> None:
    with pytest.raises(ConfigError, match="command line"):
        load_config(None, {"bots": ["random", "lowest"], **flags})


def test_no_setting_goes_around_the_config_layer() -> None:
    """Every setting the runner and the ladder take has a typed field in the one layer: nothing is
    left for a passthrough to carry."""
    assert set(TournamentConfig.__dataclass_fields__) <= set(TournamentFlags.model_fields)
    assert set(Ladder.__dataclass_fields__) - {"name", "path"} <= set(LadderFile.model_fields)
    mm = LadderFile.model_fields["matchmaking"].annotation
    assert {f.name for f in dataclasses.fields(Matchmaking)} == set(mm.model_fields)  # type: ignore[union-attr]
    for model in (TournamentFlags, LadderFile, mm):
        for name, field in model.model_fields.items():  # type: ignore[union-attr]
            assert field.annotation not in (None, object) and "Any" not in str(field.annotation), name


@pytest.mark.parametrize("table, words", [
    ("[matchmaking]\nsuspend_after = true\n", "matchmaking: suspend_after must be an integer"),
    ("[matchmaking]\nsuspend_after = 0\n", "matchmaking: suspend_after must be at least 1"),
    ('[matchmaking]\nwide_elo = "100"\n', "matchmaking: wide_elo"),
    ("[matchmaking]\nnope = 1\n", "matchmaking: unknown field(s): nope"),
    ("matchmaking = 3\n", "[matchmaking] must be a table"),
])
def test_matchmaking_goes_through_the_config_layer(tmp_path: Path, table: str, words: str) -> None:
    with pytest.raises(LadderError) as e:
        load_ladder(_ladder(tmp_path, table), check_bots=False)
    assert words in str(e.value)


def test_matchmaking_values_and_defaults(tmp_path: Path) -> None:
    lad = load_ladder(_ladder(tmp_path, "[matchmaking]\nsuspend_after = 5\nwide_elo = 80.5\n"), check_bots=False)
    assert lad.matchmaking == Matchmaking(suspend_after=5, wide_elo=80.5)
    assert load_ladder(_ladder(tmp_path, ""), check_bots=False).matchmaking == Matchmaking()


def test_every_example_and_ladder_file_loads() -> None:
    for f in sorted((ROOT / "examples" / "tournaments").glob("*.toml")):
        assert load_config(f).trusted_bots is False, f
    ladders = list_ladders()
    assert ladders and all(lad is not None for _, lad, _ in ladders), ladders
