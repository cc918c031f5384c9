"""``arena replay FILE`` on an exported game edited by hand: every one-field edit is either
replayed (a changed event or action is a reported mismatch) or refused in one line naming the
file and the field, exit 2; never an "arena bug" (exit 70) or a traceback.

The edits are a fixed, seeded set over a real export (``arena export --logs`` of a game the
referee played, a forfeit in it): for every field of the file, by its place with list indices
folded (``log.steps[].act.cards``), one occurrence gets a value of another JSON type, one gets
an edge value (a seat past the table, a negative or huge number, an empty container), and
object fields are also deleted. Random edits of a 174-step export found nine ways to exit 70
(wrong types in ``face_up``, ``players``, ``ms``, ``result.order``, ...), all in the replay
after the file was read: the record's shape is now checked where the file is read
(protocol/schemas/records/game.schema.json).
"""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from arena.cli.main import app
from arena.engine import preset
from tests.test_replay import mixed_bots, play, store_games

OTHER_TYPE = {bool: ["x", 0, None], int: ["7", None, [1], 1.5], float: ["x", None, {}], str: [1, None, ["x"]],
              list: [1, "x", {"a": 1}], dict: [[], "x", 3], type(None): [{}, "x"]}
EDGE = [-1, 7, 10**30, "", [], {}, ["x"], [[1]]]


def _places(obj: Any, at: tuple = ()) -> dict[str, list[tuple]]:
    """Every field of ``obj`` by its place with list indices folded, each with all its occurrences."""
    out: dict[str, list[tuple]] = {}

    def walk(node: Any, path: tuple) -> None:
        if path:
            out.setdefault("".join("[]" if isinstance(p, int) else f".{p}" for p in path), []).append(path)
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for k, v in items:
            walk(v, path + (k,))
    walk(obj, at)
    return out


def _edits(line: dict[str, Any], seed: int = 24) -> list[tuple[str, dict[str, Any]]]:
    rng = random.Random(seed)
    out = []
    for place, paths in sorted(_places(line).items()):
        for how in ("type", "edge", "delete"):
            path = rng.choice(paths)
            if how == "delete" and not isinstance(path[-1], str):
                continue
            edited = copy.deepcopy(line)
            parent = edited
            for k in path[:-1]:
                parent = parent[k]
            if how == "delete":
                del parent[path[-1]]
                value: Any = "<deleted>"
            else:
                pool = OTHER_TYPE[type(parent[path[-1]])] if how == "type" else EDGE
                value = parent[path[-1]] = rng.choice(pool)
            out.append((f"{place} {how} {json.dumps(value)[:30]}", edited))
    return out


@pytest.fixture(scope="module")
def export_line(tmp_path_factory) -> dict[str, Any]:
    """One line of a real ``arena export --logs``: three seats, one forfeit, a short game."""
    tmp = tmp_path_factory.mktemp("export")
    game = play(preset("classic"), 5, mixed_bots(3, 5, garbage_at=3), max_turns=12)
    store_games(tmp / "s.sqlite", [game]).close()
    out = tmp / "e.jsonl"
    res = CliRunner().invoke(app, ["export", str(out), "--tournament", "t", "--logs", "--store", str(tmp / "s.sqlite")])
    assert res.exit_code == 0, res.output
    (line,) = out.read_text().splitlines()
    return json.loads(line)


def test_the_unedited_export_replays(export_line, tmp_path: Path) -> None:
    f = tmp_path / "game.json"
    f.write_text(json.dumps(export_line))
    res = CliRunner().invoke(app, ["replay", str(f), "--plain"])
    assert res.exit_code == 0 and "Result:" in res.stdout, res.output


def test_no_one_field_edit_is_an_arena_bug(export_line, tmp_path: Path) -> None:
    edits = _edits(export_line)
    assert len(edits) > 100  # every field of the file, three ways
    f = tmp_path / "edited.json"
    bugs, refusals = [], 0
    for k, (what, edited) in enumerate(edits):
        f.write_text(json.dumps(edited))
        args = ["replay", str(f), "--plain"] if k % 2 == 0 else ["replay", str(f), "--as", "1", "--json"]
        res = CliRunner().invoke(app, args)
        if res.exit_code not in (0, 1, 2) or "Traceback" in res.output:
            bugs.append(f"{what}: exit {res.exit_code}: {res.stderr.strip()[-200:]}")
        elif res.exit_code == 2:
            lines = [x for x in res.stderr.splitlines() if x.strip()]
            assert len(lines) == 1 and lines[0].startswith(f"error: {f}"), (what, res.stderr)
            refusals += 1
    assert not bugs, "\n".join(bugs)
    assert refusals > 20  # wrong types are refused, not all replayed as mismatches


@pytest.mark.parametrize("field, value, named", [
    (("log", "players"), ["bot0", 1, "bot2"], "log.players[1]"),
    (("log", "steps", 3, "ms"), "AS", "log.steps[3].ms"),
    (("log", "result", "order"), [[1], "x"], "log.result.order[1]"),
    (("log", "steps", 0, "act", "face_up", 1, 0), 7, "log.steps[0].act"),
])
def test_a_wrong_type_is_refused_naming_the_file_and_the_field(export_line, tmp_path: Path, field, value,
                                                                named) -> None:
    edited = copy.deepcopy(export_line)
    parent = edited
    for k in field[:-1]:
        parent = parent[k]
    parent[field[-1]] = value
    f = tmp_path / "edited.json"
    f.write_text(json.dumps(edited))
    res = CliRunner().invoke(app, ["replay", str(f)])
    assert res.exit_code == 2, res.output
    assert res.stderr.startswith(f"error: {f}: not a game record") and named in res.stderr, res.stderr


def test_a_file_nested_too_deep_is_refused(tmp_path: Path) -> None:
    """Python's JSON reader raised RecursionError (exit 70) on a file nested past its limit."""
    for name, text in (("deep.json", "[" * 100_000 + "]" * 100_000), ("deep.jsonl", '{"a": 1}\n' + "[" * 100_000)):
        f = tmp_path / name
        f.write_text(text)
        res = CliRunner().invoke(app, ["replay", str(f)])
        assert res.exit_code == 2 and res.stderr.startswith(f"error: {f}") and "nested too deep" in res.stderr, \
            res.output


def test_edits_past_a_type_that_the_seats_view_met_are_refused(export_line, tmp_path: Path) -> None:
    """Two edits of the right type that ``--as SEAT`` (rebuilding the requests through the referee's
    core) met as an arena bug: a clock past what a request can carry (an integer over 64 bits), and
    a ``given`` opening naming an action the deal does not have."""
    f = tmp_path / "edited.json"
    for field, value, named in ((("clock", "bank_ms"), 10**30, "log.clock.bank_ms"),
                                (("given",), [3, 99], "given opening cannot be played again")):
        edited = copy.deepcopy(export_line)
        parent = edited["log"]
        for k in field[:-1]:
            parent = parent[k]
        parent[field[-1]] = value
        f.write_text(json.dumps(edited))
        res = CliRunner().invoke(app, ["replay", str(f), "--as", "1", "--json"])
        assert res.exit_code == 2 and named in res.stderr and "arena bug" not in res.stderr, res.output
        assert len(res.stderr.strip().splitlines()) == 1, res.stderr
