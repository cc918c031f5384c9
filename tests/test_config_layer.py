"""The one config layer (arena.config): every key of every file typed, nothing passed through, and
containment weakened only on the command line, never by a tournament or ladder file."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from arena.bots.containment import Containment
from arena.bots.launch import ContainmentError
from arena.config import LadderFile, TournamentFlags
from arena.ladder.config import Ladder, LadderError, Matchmaking, SeasonRules, list_ladders, load_ladder
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
    assert load_config(f).containment is Containment.BUBBLEWRAP
    assert load_config(f, {"sandbox": False}).containment is Containment.NAMESPACES  # the operator's flag, this run only
    assert load_config(f, {"trusted_bots": True}).containment is Containment.TRUSTED
    assert load_config(_tournament(tmp_path, "")).containment is Containment.AUTO
    g = _tournament(tmp_path, "gvisor = true\n")
    assert load_config(g, {"sandbox": False}).containment is Containment.GVISOR  # never weaker than asked
    with pytest.raises(ContainmentError, match="contradict"):
        load_config(g, {"trusted_bots": True})


@pytest.mark.parametrize("flags", [{"trusted_bots": "yes please"}, {"trusted_bots": 1}, {"sandbox": "off"},
                                   {"no_such_flag": 1}])
def test_flags_are_typed_too(flags: dict) -> None:
    with pytest.raises(ConfigError, match="command line"):
        load_config(None, {"bots": ["random", "lowest"], **flags})


def test_no_setting_goes_around_the_config_layer() -> None:
    """Every setting the runner and the ladder take has a typed field in the one layer: nothing is
    left for a passthrough to carry."""
    made_from = {"containment": {"sandbox", "trusted_bots", "gvisor"}}  # the user's options, made one value once
    assert set(TournamentConfig.__dataclass_fields__) - set(made_from) <= set(TournamentFlags.model_fields)
    assert set().union(*made_from.values()) <= set(TournamentFlags.model_fields)
    # seat_rule: where one_seat_per_author came from, the file's key or the store's default (load_ladder)
    assert set(Ladder.__dataclass_fields__) - {"name", "path", "seat_rule"} <= set(LadderFile.model_fields)
    mm = LadderFile.model_fields["matchmaking"].annotation
    assert {f.name for f in dataclasses.fields(Matchmaking)} == set(mm.model_fields)  # type: ignore[union-attr]
    season = LadderFile.model_fields["season"].annotation
    assert {f.name for f in dataclasses.fields(SeasonRules)} == set(season.model_fields)  # type: ignore[union-attr]
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
        assert load_config(f).containment is not Containment.TRUSTED, f
    ladders = list_ladders()
    assert ladders and all(lad is not None for _, lad, _ in ladders), ladders


# --------------------------------------------------------------------------- published schemas hold the models' bounds

def _models(model: type, seen: dict[str, type]) -> dict[str, type]:
    """Every pydantic model reachable from MODEL's fields, by class name (a schema's $defs key)."""
    import typing

    from pydantic import BaseModel

    def walk(tp: object) -> None:
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            if tp.__name__ not in seen:
                seen[tp.__name__] = tp
                for f in tp.model_fields.values():
                    walk(f.annotation)
        for arg in typing.get_args(tp):
            walk(arg)
    walk(model)
    return seen


def _bound_cases() -> list[tuple[str, str, str, float, bool]]:
    """(schema file, model, field, value, accepted) on both sides of each numeric bound a model declares."""
    import annotated_types as at

    from arena.config import SCHEMAS
    cases = []
    for name, root in SCHEMAS.items():
        for cls_name, cls in _models(root, {}).items():
            for field, info in cls.model_fields.items():
                for m in info.metadata:
                    for kind, edge, inside, outside in (("ge", "ge", 0, -1), ("gt", "gt", 1, 0),
                                                        ("le", "le", 0, 1), ("lt", "lt", -1, 0)):
                        b = getattr(m, edge, None) if isinstance(m, (at.Ge, at.Gt, at.Le, at.Lt)) else None
                        if b is not None:
                            cases.append((name, cls_name, field, b + inside, True))
                            cases.append((name, cls_name, field, b + outside, False))
    return cases


BOUND_CASES = _bound_cases()


def test_the_models_declare_bounds_to_check() -> None:
    fields = {(c[1], c[2]) for c in BOUND_CASES}
    assert ("Matchmaking", "wide_elo") in fields and ("Matchmaking", "suspend_after") in fields, fields


@pytest.mark.parametrize("schema_name, model_name, field, value, accepted", BOUND_CASES,
                         ids=[f"{c[1]}.{c[2]}={c[3]}" for c in BOUND_CASES])
def test_published_schemas_and_models_agree_on_every_bound(schema_name: str, model_name: str, field: str,
                                                           value: float, accepted: bool) -> None:
    """An editor checking a file against protocol/schemas/config/ sees the bound the arena holds:
    a validator on the published schema and the model accept and refuse the same values."""
    import json

    import jsonschema
    from pydantic import ValidationError

    from arena.config import SCHEMA_DIR, SCHEMAS
    published = json.loads((SCHEMA_DIR / schema_name).read_text())
    model = _models(SCHEMAS[schema_name], {})[model_name]
    sub = published if published.get("title") == model_name else published["$defs"][model_name]
    schema = {**sub, "$defs": published.get("$defs", {})}
    validator = jsonschema.Draft202012Validator(schema)
    schema_ok = not [e for e in validator.iter_errors({field: value}) if list(e.absolute_path)[:1] == [field]]
    try:
        model.model_validate({field: value})
        model_ok = True
    except ValidationError as e:
        model_ok = not [err for err in e.errors() if err["loc"][:1] == (field,)]
    assert (schema_ok, model_ok) == (accepted, accepted), (
        f"{model_name}.{field} = {value}: schema {'accepts' if schema_ok else 'refuses'}, "
        f"model {'accepts' if model_ok else 'refuses'}")
