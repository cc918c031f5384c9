"""The bot protocol: schemas, examples, every message the referee writes, and reply parsing.

* every message type has a schema (draft 2020-12) and at least one example in
  ``protocol/examples/``, and every example validates;
* full matches run through the referee workers run (:func:`arena.referee.blocking.play_game`
  and its :class:`~arena.referee.blocking.BlockingPlayer`) with in-process bots on a fake
  clock, under every preset and several option sets; every line the
  referee writes is checked against its schema and the protocol's promises
  (censoring, action ids, type-first encoding);
* faults of every kind a bot can cause reach the bot as a valid ``error``;
* :func:`arena.referee.protocol.read_action` / :func:`arena.referee.protocol.read_bot_hello`
  accept good replies and reject bad ones with the documented reason, and a
  fuzz test checks that nothing but a ``ProtocolError`` ever comes out;
* the minimal bots printed in ``protocol/PROTOCOL.md`` play a real game.

``python tests/test_protocol.py`` regenerates ``protocol/examples/`` from real
games (deterministic: fixed seeds, fixed bots).
"""

from __future__ import annotations

import ast
import json
import random
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from arena import faults, strategies
from arena.bots.blocking import BlockingBot
from arena.bots.containment import RunAs
from arena.bots.errors import BotCommandError
from arena.bots.manifest import BotSpec
from arena.bots.start import start_bot
from arena.engine import PRESETS, Rules, apply_action, legal_actions, new_game, preset
from arena.engine import model
from arena.engine.cards import card_str, make_deck
from arena.faults import BotFault, FaultReason
from arena.referee import protocol
from arena.referee import FAULT_REASONS, GameRecord, TimeControl
from arena.referee.blocking import BlockingPlayer, play_game, settle
from arena.referee.protocol import BOT_MESSAGES, REFEREE_MESSAGES, ProtocolError
from arena.referee.testing import FakeClock, MockBot
from tests.schema_memo import SchemaMemo

ROOT = Path(__file__).resolve().parents[1]
SCHEMAS = ROOT / "protocol" / "schemas"
EXAMPLES = ROOT / "protocol" / "examples"
PROTOCOL_MD = ROOT / "protocol" / "PROTOCOL.md"
MESSAGES = REFEREE_MESSAGES + BOT_MESSAGES
READ_ACTION_REASONS = {"bad_json", "schema", "wrong_request", "illegal_action"}
DRAFT = "https://json-schema.org/draft/2020-12/schema"


def defs() -> dict[str, Any]:
    return json.loads((SCHEMAS / "defs.schema.json").read_text(encoding="utf-8"))["$defs"]


def kind_branches(d: dict[str, Any], name: str) -> dict[str, dict[str, Any]]:
    """``event`` / ``action_any`` dispatch on ``kind`` with if/then: {kind: the branch's definition}."""
    out = {}
    for rule in d[name]["allOf"]:
        kind = rule["if"]["properties"]["kind"]["const"]
        out[kind] = d[rule["then"]["$ref"].split("/")[-1]]
        assert out[kind]["properties"]["kind"]["const"] == kind
    return out


def example_files() -> list[Path]:
    return sorted(EXAMPLES.glob("*.json"))


def schema_of_example(path: Path) -> str:
    """``request.json`` and ``request-setup.json`` are both ``request`` examples."""
    return path.stem.split("-")[0]


# ====================================================================== fake bots

Bot = Callable[[dict[str, Any]], "str | BotFault | None"]  # a message in, a reply line (or a fault, or nothing) out


class CheckedBot(MockBot):
    """A bot that is a Python function; every line the referee sends is checked and logged."""

    def __init__(self, bot: Bot, log: list[dict[str, Any]], seat: int):
        super().__init__(lambda msg: [] if (reply := bot(msg)) is None else [reply], transcript=log, label=seat)

    def send_line(self, text: str | bytes, *, timeout: float = 10.0) -> None:
        assert not self.closed, "the referee wrote to a closed bot"
        if isinstance(text, bytes):  # a request line, as the core encoded it
            text = text.decode("utf-8")
        assert "\n" not in text and "\r" not in text
        text.encode("utf-8")  # always encodable
        kind = json.loads(text)["type"]
        assert text.startswith('{"type":"%s"' % kind), "type must come first, unspaced"
        super().send_line(text, timeout=timeout)


def hello_line(name: str, protocol_version: int = 1) -> str:
    return json.dumps({"type": "hello", "protocol": protocol_version, "name": name, "version": "1.0"})


def policy_bot(name: str, choose: Callable[[dict[str, Any]], int], style: str = "mixed") -> Bot:
    """A well-behaved bot: bare integers, action messages, or alternating (``mixed``)."""
    count = 0

    def bot(msg: dict[str, Any]) -> str | None:
        nonlocal count
        if msg["type"] == "hello":
            return hello_line(name)
        if msg["type"] == "request":
            count += 1
            k = choose(msg)
            if style == "bare" or (style == "mixed" and count % 2):
                return str(k)
            return json.dumps({"type": "action", "request": msg["id"], "action": k})
        return None
    return bot


def faulty_bot(name: str, fault: str, at: int = 2) -> Bot:
    """Plays lowest-first, then commits ``fault`` from its ``at``-th request on (or at the handshake)."""
    count = 0

    def bot(msg: dict[str, Any]) -> str | BotFault | None:
        nonlocal count
        if msg["type"] == "hello":
            if fault == "bad_version":
                return hello_line(name, 99)
            if fault == "handshake":
                return json.dumps({"type": "hello", "protocol": 1})  # no name
            return hello_line(name)
        if msg["type"] != "request":
            return None
        count += 1
        if count < at:
            return str(strategies.lowest_first(msg))
        return {
            "bad_json": "{'action': 0}",
            "schema": json.dumps({"type": "action", "request": msg["id"], "action": "0"}),
            "wrong_request": json.dumps({"type": "action", "request": msg["id"] + 1, "action": 0}),
            "illegal_action": str(len(msg["actions"])),
            "timeout": None,
            "crash": faults.Crash("bot exited with status 1"),
            "closed_input": faults.ClosedInput("the bot closed its stdin"),
            "line_too_long": faults.LineTooLong(f"line longer than {protocol.MAX_LINE_BYTES} bytes"),
            "bad_encoding": faults.BadEncoding("line is not UTF-8"),
        }[fault]
    return bot


class Match:
    """Seats of in-process bots playing several games in one 'process' each, through BlockingPlayer."""

    def __init__(self, bots: list[Bot], names: list[str] | None = None, *, clock: TimeControl = TimeControl(),
                 fail_start: set[int] = frozenset()):
        self.log: list[dict[str, Any]] = []
        self.records: list[GameRecord] = []
        self.launches = [0] * len(bots)
        self.players: list[BlockingPlayer] = []
        self.clock = clock
        self.timer = FakeClock()
        names = names or [f"bot{i}" for i in range(len(bots))]
        for seat, bot in enumerate(bots):
            self.players.append(BlockingPlayer(self._spec(names[seat]), self._launcher(seat, bot, seat in fail_start),
                                               clock, timer=self.timer))

    @staticmethod
    def _spec(name: str) -> BotSpec:
        return BotSpec(name=name, version="1.0", command=("fake",), workdir=ROOT, root=ROOT)

    def _launcher(self, seat: int, bot: Bot, fail: bool):
        def launch(spec: BotSpec) -> CheckedBot:
            self.launches[seat] += 1
            if fail:
                raise BotCommandError("command not found: 'fake'")  # as spawn says it
            bot_ = CheckedBot(bot, self.log, seat)
            bot_.clock = self.timer
            return bot_
        return launch

    def run(self, rules: Rules, seeds: list[int], max_turns: int = 2000) -> Match:
        """Play ``seeds`` on the blocking referee (the workers' own), on a fake clock."""
        for seed in seeds:
            game_id = f"{rules.name.rstrip('+')}-{len(self.records) + 1:06d}"  # like a tournament's ids
            self.records.append(play_game(self.players, rules, seed, game_id=game_id, clock=self.clock,
                                          max_turns=max_turns, timer=self.timer))
        for p in self.players:
            p.shutdown()
        return self

    def sent(self, kind: str | None = None) -> list[dict[str, Any]]:
        """Messages the referee sent (each with ``seat`` added under ``_seat``), optionally of one type."""
        return [{**e["msg"], "_seat": e["bot"]} for e in self.log
                if "msg" in e and (kind is None or e["msg"]["type"] == kind)]


SCHEMAS_SEEN = SchemaMemo()  # one for the module: what it remembers is valid for every test


def strip_seat(msg: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in msg.items() if k != "_seat"}


def check_conversation(match: Match) -> None:
    """Every referee line valid against its schema, in a lawful order, with correct censoring."""
    per_seat: dict[int, list[dict[str, Any]]] = {}
    for entry in match.log:
        if "msg" in entry:
            msg = entry["msg"]
            assert msg["type"] in REFEREE_MESSAGES, msg["type"]
            SCHEMAS_SEEN.validate(msg["type"], msg)
            per_seat.setdefault(entry["bot"], []).append(msg)
        else:
            per_seat.setdefault(entry["bot"], []).append({"type": "<reply>", "line": entry["reply"]})
    for seat, msgs in per_seat.items():
        check_lifecycle(seat, msgs)


def check_lifecycle(seat: int, msgs: list[dict[str, Any]]) -> None:
    state = "new"  # new -> greeted -> in_game -> between -> ... ; error -> new ; shutdown -> done
    game = None
    last_id = 0
    for msg in msgs:
        t = msg["type"]
        if t == "hello":
            assert state == "new", (seat, state, t)
            state = "hello_sent"
        elif t == "<reply>":
            assert state in ("hello_sent", "asked"), (seat, state)
            state = "greeted" if state == "hello_sent" else "in_game"
        elif t == "start":
            assert state in ("greeted", "between"), (seat, state, t)
            assert msg["seat"] == seat and msg["names"][seat] and len(msg["names"]) == msg["players"]
            game, last_id, state = msg["game"], 0, "in_game"
            assert msg["clock"]["handshake_ms"] >= 0
        elif t == "request":
            assert state == "in_game" and msg["game"] == game, (seat, state, t)
            assert msg["id"] > last_id
            last_id = msg["id"]
            check_request(seat, msg)
            state = "asked"
        elif t == "end":
            assert state == "in_game" and msg["game"] == game, (seat, state, t)
            assert msg["events"] and msg["events"][-1]["kind"] == "game_over"
            assert msg["result"]["order"] == msg["events"][-1]["result"]["order"]
            check_events(seat, msg["events"])
            state = "between"
        elif t == "error":
            assert state in ("asked", "in_game", "hello_sent", "greeted", "between"), (seat, state, t)
            state = "new"  # the process is stopped; a new one gets hello
        elif t == "shutdown":
            assert state in ("between", "greeted"), (seat, state, t)
            state = "done"
    assert state in ("done", "new"), (seat, state)


def check_request(seat: int, msg: dict[str, Any]) -> None:
    view = msg["view"]
    assert view["seat"] == seat and view["to_move"] == seat
    assert [a["id"] for a in msg["actions"]] == list(range(len(msg["actions"])))
    assert len(msg["actions"]) >= 2, "a forced move must not be asked"
    assert len(view["players"]) >= 2 and view["players"][seat]["seat"] == seat
    me = view["players"][seat]
    assert me["hand_count"] == len(view["hand"]) and me["face_up"] == view["face_up"]
    assert me["face_down"] == view["face_down"]
    kinds = {a["kind"] for a in msg["actions"]}
    decision = msg["decision"]
    if decision == "setup":
        assert view["phase"] == "setup" and kinds <= {"set_face_up", "stack", "done"}
        for i, p in enumerate(view["players"]):
            assert (p["face_up"] is None) == (i != seat), "others' face-up cards are hidden during setup"
    else:
        assert view["phase"] == "play"
        assert kinds <= {"play", "pick_up", "flip"}
        zone = {"play_hand": "hand", "play_face_up": "face_up"}.get(decision)
        for a in msg["actions"]:
            if a["kind"] == "play":
                assert a["from"] == zone and len({c[0] for c in a["cards"]}) == 1
        if decision == "flip_face_down":
            assert kinds == {"flip"} and not view["hand"] and not view["face_up"]
        elif decision == "play_face_up":
            assert not view["hand"]
        else:
            assert view["hand"]
    check_events(seat, msg["events"])


def check_events(seat: int, events: list[dict[str, Any]]) -> None:
    for e in events:
        if e["kind"] == "drew":
            assert ("cards" in e) == (e["seat"] == seat), "only the drawing seat sees what it drew"
            if "cards" in e:
                assert len(e["cards"]) == e["count"]
        if e["kind"] == "setup":
            assert ("face_up" in e) == (e["seat"] == seat), "setup choices are private until play begins"


# ====================================================================== schemas and examples

@pytest.mark.parametrize("name", MESSAGES)
def test_every_message_type_has_a_schema(name: str) -> None:
    path = SCHEMAS / f"{name}.schema.json"
    assert path.is_file(), f"protocol/schemas/{name}.schema.json is missing"
    schema = json.loads(path.read_text(encoding="utf-8"))
    assert schema["$schema"] == DRAFT
    assert schema["$id"].endswith(f"/{name}.schema.json")
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema.get("additionalProperties", True) is True, "messages stay open for new fields"
    assert "type" in schema["required"]
    protocol.validator(name)  # builds, refs resolve


@pytest.mark.parametrize("name", MESSAGES)
def test_every_message_type_has_an_example(name: str) -> None:
    assert any(schema_of_example(p) == name for p in example_files()), f"no protocol/examples/{name}.json"


def test_every_schema_file_is_a_message_or_defs() -> None:
    files = {p.name.removesuffix(".schema.json") for p in SCHEMAS.glob("*.schema.json")}
    assert files == set(MESSAGES) | {"defs"}
    jsonschema.Draft202012Validator.check_schema(json.loads((SCHEMAS / "defs.schema.json").read_text()))


def test_all_refs_resolve() -> None:
    """Walk every $ref in every schema and resolve it through the registry the validator uses."""
    registry = protocol.registry()
    for path in SCHEMAS.glob("*.schema.json"):
        schema = json.loads(path.read_text(encoding="utf-8"))
        resolver = registry.resolver(base_uri=schema["$id"])
        stack = [schema]
        while stack:
            node = stack.pop()
            if isinstance(node, dict):
                if "$ref" in node:
                    resolver.lookup(node["$ref"])
                stack.extend(node.values())
            elif isinstance(node, list):
                stack.extend(node)


@pytest.mark.parametrize("path", example_files(), ids=lambda p: p.name)
def test_example_validates(path: Path) -> None:
    name = schema_of_example(path)
    assert name in MESSAGES, f"{path.name}: no message type {name!r}"
    msg = json.loads(path.read_text(encoding="utf-8"))
    protocol.validate(name, msg)
    if name in REFEREE_MESSAGES:
        assert msg["type"] == name
        assert len(protocol.encode(msg).encode()) < protocol.MAX_LINE_BYTES


def test_examples_cover_every_decision_and_the_special_actions() -> None:
    requests = [json.loads(p.read_text()) for p in example_files() if schema_of_example(p) == "request"]
    assert {r["decision"] for r in requests} >= {"setup", "play_hand", "play_face_up", "flip_face_down"}
    actions = [a for r in requests for a in r["actions"]]
    assert any(a["kind"] == "pick_up" and "surrender" in a for a in actions), "a harsh pick-up example"
    assert any(a["kind"] == "play" and "target" in a for a in actions), "a joker target example"


def test_example_bot_replies_are_accepted() -> None:
    hello = json.loads((EXAMPLES / "bot_hello.json").read_text())
    assert protocol.read_bot_hello(json.dumps(hello))["name"] == hello["name"]
    action = json.loads((EXAMPLES / "action.json").read_text())
    assert protocol.read_action(json.dumps(action), action["request"], action["action"] + 1) == action["action"]


def _mutated_request(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    msg = json.loads((EXAMPLES / "request.json").read_text())
    change(msg)
    return msg


BAD_MESSAGES = {  # the schemas are strict where a bot author relies on them
    "bad card": ("request", lambda m: m["view"]["hand"].__setitem__(0, "10H")),
    "joker of a suit": ("request", lambda m: m["view"]["pile"].append("XH")),
    "unknown decision": ("request", lambda m: m.__setitem__("decision", "think")),
    "no view field": ("request", lambda m: m["view"].pop("pile_top")),
    "extra view field": ("request", lambda m: m["view"].__setitem__("hands", [])),
    "player without known_hand": ("request", lambda m: m["view"]["players"][0].pop("known_hand")),
    "unknown event kind": ("request", lambda m: m["events"].append({"kind": "sneezed", "seat": 0})),
    "drew without count": ("request", lambda m: m["events"][1].pop("count")),
    "played from face_down": ("request", lambda m: m["events"][0].__setitem__("zone", "face_down")),
    "event extra field": ("request", lambda m: m["events"][0].__setitem__("hidden", True)),
    "unknown action kind": ("request", lambda m: m["actions"].append({"id": 3, "kind": "cheat"})),
    "action without id": ("request", lambda m: m["actions"][0].pop("id")),
    "play without cards": ("request", lambda m: m["actions"][0].__setitem__("cards", [])),
    "action extra field": ("request", lambda m: m["actions"][0].__setitem__("score", 3)),
    "no actions": ("request", lambda m: m.__setitem__("actions", [])),
    "request id 0": ("request", lambda m: m.__setitem__("id", 0)),
    "clock in seconds": ("request", lambda m: m["clock"].__setitem__("move_ms", 1.5)),
}


@pytest.mark.parametrize("case", BAD_MESSAGES)
def test_schemas_reject_wrong_messages(case: str) -> None:
    name, change = BAD_MESSAGES[case]
    with pytest.raises(jsonschema.ValidationError):
        protocol.validate(name, _mutated_request(change))


@pytest.mark.parametrize("name, msg", [
    ("error", {"type": "error", "reason": "tired", "message": "x"}),
    ("error", {"type": "error", "reason": "timeout"}),
    ("start", {"type": "start", "game": "g", "seat": 0, "players": 2, "names": ["a", "b"], "rules": {},
               "clock": {"move_ms": 1, "bank_ms": 1, "handshake_ms": 1}, "seed": 1}),
    ("end", {**json.loads((EXAMPLES / "end.json").read_text()), "result": {"reason": "first_out"}}),
    ("hello", {"type": "hello", "protocol": 1}),
    ("shutdown", {"type": "shut_down"}),
])
def test_schemas_reject_wrong_envelopes(name: str, msg: dict[str, Any]) -> None:
    with pytest.raises(jsonschema.ValidationError):
        protocol.validate(name, msg)


def test_messages_accept_new_fields() -> None:
    """Forward compatibility: a message may carry fields this version does not know."""
    protocol.validate("request", _mutated_request(lambda m: m.__setitem__("hint", "new in 1.x")))
    protocol.validate("shutdown", {"type": "shutdown", "reason": "match over"})
    protocol.validate("start", {**json.loads((EXAMPLES / "start.json").read_text()),
                                "rules": {**Rules().options(), "new_option": True}})


def test_card_pattern_matches_the_engine() -> None:
    d = defs()
    pattern = d["card"]["pattern"]
    assert d["cards"]["items"]["pattern"] == d["cards1"]["items"]["pattern"] == pattern  # inlined copies
    names = {card_str(c) for c in make_deck(1, 2)}
    assert len(names) == 54 and all(re.fullmatch(pattern, n) for n in names)
    assert not any(re.fullmatch(pattern, n) for n in ("10H", "1H", "XC", "X", "7h", "AHS", ""))


def named_values() -> dict[str, set[str]]:
    """The protocol's named values by the field that holds them (the engine's phase "over" is its
    state after the end, never shown in a view)."""
    d = defs()
    zones = set(d["play_zone"]["enum"]) | {model.HAND, model.FACE_UP, model.FACE_DOWN}
    return {"phase": set(d["view"]["properties"]["phase"]["enum"]) | {"over"},
            "decision": set(d["decision"]["enum"]),
            "reason": set(d["result"]["properties"]["reason"]["enum"]) | set(d["fault_reason"]["enum"]),
            "zone": zones, "from": zones}


def compared_names(path: Path) -> list[tuple[int, str, str]]:
    """(line, field, text) for each string a field of ``named_values`` is compared with: ``x["phase"] ==
    "play"``, ``a.zone != "hand"``, ``zone in ("hand", ...)``, ``v.get("phase") == ...``."""
    def field(node: ast.AST) -> str | None:
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            return node.slice.value if isinstance(node.slice.value, str) else None
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "get" and node.args \
                and isinstance(node.args[0], ast.Constant):
            return node.args[0].value
        return getattr(node, "attr", None) or getattr(node, "id", None)

    def texts(node: ast.AST) -> list[str]:
        items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
        return [i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)]

    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            for a, b in zip(sides, sides[1:]):
                for x, y in ((a, b), (b, a)):
                    found += [(node.lineno, field(x), t) for t in texts(y) if field(x) in named_values()]
    return found


def test_code_compares_phases_zones_reasons_and_decisions_only_with_names_the_protocol_has() -> None:
    """The code writes these values as the JSON strings they are (the engine, compiled by mypyc,
    compares plain strings); this test stands where an enum would, so a typo fails here."""
    names = named_values()
    seen = [(path, *hit) for path in sorted((ROOT / "arena").rglob("*.py")) for hit in compared_names(path)]
    assert len(seen) > 20  # the comparisons are found: phases in the bots and envs, zones, end reasons
    wrong = [f"{p.relative_to(ROOT)}:{line}: {f} compared with {t!r}" for p, line, f, t in seen if t not in names[f]]
    assert not wrong, "\n".join(wrong)
    state = new_game(preset("classic"), players=2, seed=3)
    for _ in range(5000):
        if state.result is not None:
            break
        state, _ = apply_action(state, legal_actions(state)[0])
    assert state.phase == "over" and state.result.reason in names["reason"]


def test_schema_enums_match_the_code() -> None:
    d = defs()
    assert d["fault_reason"]["enum"] == list(FAULT_REASONS) == [str(r) for r in FaultReason]
    assert set(d["play_zone"]["enum"]) < {model.HAND, model.FACE_UP, model.FACE_DOWN}
    assert json.dumps([FaultReason.CPU_LIMIT]) == '["cpu_limit"]'  # the JSON is unchanged
    assert protocol.encode(protocol.error(FaultReason.TIMEOUT, "x")) == '{"type":"error","reason":"timeout","message":"x"}'
    # every rule option the engine has is described (start.rules lists them all)
    fields = set(Rules().options())
    described = set(d["rules"]["properties"])
    assert fields == described, f"rule options not in defs.schema.json: {fields - described}; stale: {described - fields}"
    assert set(d["rules"]["required"]) == fields
    protocol.validate("start", {**json.loads((EXAMPLES / "start.json").read_text()), "rules": Rules().options()})
    # every event and action kind of the engine has its branch, with every field of the tuple
    for union, union_def, renames in ((model.Event, "event", {}),
                                      (model.Action, "action_any", {"zone": "from", "stacks": "face_up"})):
        branches = kind_branches(d, union_def)
        assert set(d[union_def]["properties"]["kind"]["enum"]) == set(branches)
        for cls in union.__args__:
            kind = cls._field_defaults["kind"]
            assert kind in branches, f"{cls.__name__}: no {kind!r} branch in defs.schema.json#/$defs/{union_def}"
            props = set(branches[kind]["properties"])
            for f in cls._fields:
                assert renames.get(f, f) in props, f"{cls.__name__}.{f} is not in the {kind!r} branch"
        assert len(branches) == len(union.__args__)


# ====================================================================== full games through the referee

def rules(name: str, **options: Any) -> Rules:
    r = preset(name)
    return r.replace(name=r.name + "+", **options) if options else r


POLICIES = {
    "lowest": lambda seat: strategies.lowest_first,
    "heuristic": lambda seat: strategies.heuristic,
    "random": lambda seat: strategies.random_policy(random.Random(seat)),
}

# (id, rules, players, seeds, max_turns). jsonschema needs a few ms per request, so the
# games are few and short: every preset at its smallest and largest table, and option sets, one
# deal each but the no-setup set's two (a bot's second game in one process, after "end", is the
# lifecycle the fault tests below also walk, each over two deals).
GAMES = [
    *[(f"{name}-{n}p", r, n, seeds, turns)
      for name, r in PRESETS.items() for n, seeds, turns in ((r.min_players, [1], 300), (r.max_players, [3], 150))],
    ("jokers-give_pile", rules("classic", jokers=2, joker="give_pile"), 3, [3], 300),
    ("jokers-reverse", rules("shithead", jokers=1), 4, [4], 300),
    ("harsh_face_up", rules("shithead", harsh_face_up=True), 3, [1], 300),
    ("stacking", rules("classic", stacking=True), 3, [1], 300),
    ("stacking-swap", rules("shithead", stacking=True), 4, [3], 300),
    ("match_count", rules("powers", match_count=True), 3, [1], 300),
    ("everything", rules("shithead", jokers=2, joker="give_pile", harsh_face_up=True, match_count=True,
                         eight="skip", seven="descending", reset_again=True, burner_out=False), 4, [7], 300),
    ("no-setup", rules("classic", setup="none", start="lowest_card", stale_turns=30), 2, [1, 2], 300),
]


@pytest.mark.parametrize("game_id, rule_set, players, seeds, max_turns", GAMES, ids=[g[0] for g in GAMES])
def test_every_referee_message_validates(game_id: str, rule_set: Rules, players: int, seeds: list[int],
                                         max_turns: int) -> None:
    kinds = list(POLICIES)
    bots = [policy_bot(f"p{seat}", POLICIES[kinds[seat % len(kinds)]](seat), ("mixed", "bare", "message")[seat % 3])
            for seat in range(players)]
    match = Match(bots).run(rule_set, seeds, max_turns)
    check_conversation(match)
    assert not any(r.faults for r in match.records), [r.faults for r in match.records]
    assert match.launches == [1] * players, "a healthy bot keeps its process for the whole match"
    assert len(match.sent("end")) == players * len(seeds)
    assert len(match.sent("shutdown")) == players
    assert match.sent("request"), "some decision was asked"


def test_ask_forced_and_every_decision_is_seen() -> None:
    """Across the option sets every decision kind occurs; forced moves are never asked."""
    seen: set[str] = set()
    for _, rule_set, players, seeds, max_turns in GAMES[-8:]:
        bots = [policy_bot(f"p{i}", strategies.lowest_first) for i in range(players)]
        match = Match(bots).run(rule_set, seeds[:1], max_turns)
        seen |= {m["decision"] for m in match.sent("request")}
        forced = [s for r in match.records for s in r.steps if s.get("forced")]
        asked = {s["request"] for r in match.records for s in r.steps if "request" in s}
        assert asked == {m["id"] for m in match.sent("request") if m["game"] == match.records[0].game_id}
        assert all("request" not in s for s in forced)
    assert seen == {"setup", "play_hand", "play_face_up", "flip_face_down"}


FAULTS = ["bad_json", "schema", "wrong_request", "illegal_action", "timeout", "crash", "closed_input",
          "line_too_long", "bad_encoding", "bad_version", "handshake", "start_failed"]


@pytest.mark.parametrize("fault", FAULTS)
def test_faults_reach_the_bot_as_error_and_forfeit(fault: str) -> None:
    assert fault in FAULT_REASONS
    bots = [faulty_bot("faulty", fault), policy_bot("a", strategies.lowest_first), policy_bot("b", strategies.heuristic)]
    clock = TimeControl(move_ms=500, bank_ms=500) if fault == "timeout" else TimeControl()  # a timeout waits it out
    match = Match(bots, ["faulty", "a", "b"], clock=clock, fail_start={0} if fault == "start_failed" else set())
    match.run(rules("classic"), [11, 12], max_turns=60)
    check_conversation(match)
    for rec in match.records:
        assert [(f["seat"], f["reason"]) for f in rec.faults] == [(0, fault)]
        assert rec.result["forfeits"] == {"0": fault}
        assert rec.result["order"][-1] == [0], "a forfeit is placed last"
        assert rec.result["reason"] != "forfeit", "with three seats the others play on"
    errors = match.sent("error")
    if fault == "start_failed":
        assert errors == [], "no process, nobody to tell"
    else:
        assert [e["reason"] for e in errors] == [fault, fault]
        assert all(e["_seat"] == 0 for e in errors)
        at_handshake = fault in ("bad_version", "handshake")
        assert all(("request" in e) != at_handshake for e in errors), "a reply's fault names its request"
    assert match.launches[0] == 2, "the faulty bot is restarted for the next game"
    assert match.launches[1:] == [1, 1]
    for seat in (1, 2):  # the others are told
        forfeits = [e for m in match.sent() if m["_seat"] == seat and m["type"] in ("request", "end")
                    for e in m["events"] if e["kind"] == "forfeited"]
        assert {(e["seat"], e["reason"]) for e in forfeits} == {(0, fault)}


def test_two_seat_forfeit_ends_the_game() -> None:
    match = Match([policy_bot("a", strategies.lowest_first), faulty_bot("b", "illegal_action", at=3)])
    match.run(rules("shithead"), [5])
    check_conversation(match)
    rec = match.records[0]
    assert rec.result["reason"] == "forfeit" and rec.result["order"] == [[0], [1]]
    end = match.sent("end")
    assert [m["_seat"] for m in end] == [0]
    assert end[0]["result"]["forfeits"] == {"1": "illegal_action"}


# ====================================================================== reading the bot's lines

def action_line(request: int, action: Any, **extra: Any) -> str:
    return json.dumps({"type": "action", "request": request, "action": action, **extra})


@pytest.mark.parametrize("line, expected", [
    ("2", 2), ("0\n", 0), ("  1  \r\n", 1), ("\t2", 2),
    (action_line(5, 2), 2), (action_line(5, 0, note="lowest card", think_ms=3), 0),
    ('{"action":1,"request":5,"type":"action"}', 1),
    (action_line(5, 1.0), 1),  # JSON Schema counts 1.0 as an integer; the referee gets an int
    ('{"type":"action","request":5,"action":2,"debug":{"a":"' + "[" * 100 + '"}}', 2),  # brackets in strings
])
def test_read_action_accepts(line: str, expected: int) -> None:
    got = protocol.read_action(line, 5, 3)
    assert got == expected and type(got) is int


@pytest.mark.parametrize("line, reason", [
    ("", "bad_json"), ("   \n", "bad_json"), ("two", "bad_json"), ("{'action': 1}", "bad_json"),
    ('{"type":"action","request":5,', "bad_json"), ("1 2", "bad_json"), ("0x1", "bad_json"),
    ("[" * 10_000 + "]" * 10_000, "bad_json"), ("[" * 33 + "]" * 33, "bad_json"),
    ('{"a":' * 40 + "1" + "}" * 40, "bad_json"),
    ("2.0", "schema"), ("true", "schema"), ("null", "schema"), ('"2"', "schema"), ("[2]", "schema"),
    ("NaN", "schema"), ("{}", "schema"), ('{"type":"action","request":5}', "schema"),
    ('{"type":"action","action":1}', "schema"), ('{"type":"move","request":5,"action":1}', "schema"),
    (action_line(5, "1"), "schema"), (action_line(5, -1), "schema"), (action_line(5, True), "schema"),
    (action_line(5, 1.5), "schema"), (action_line("5", 1), "schema"), (action_line(5, None), "schema"),
    (action_line(4, 1), "wrong_request"), (action_line(6, 1), "wrong_request"), (action_line(0, 1), "wrong_request"),
    ("3", "illegal_action"), ("-1", "illegal_action"), ("99999999999999999999", "illegal_action"),
    (action_line(5, 3), "illegal_action"), (action_line(5, 10**30), "illegal_action"),
])
def test_read_action_rejects(line: str, reason: str) -> None:
    with pytest.raises(ProtocolError) as info:
        protocol.read_action(line, 5, 3)
    assert info.value.reason == reason, str(info.value)
    assert str(info.value)


def test_depth_limit_is_exact() -> None:
    deepest = "[" * (protocol.MAX_JSON_DEPTH - 1) + "1" + "]" * (protocol.MAX_JSON_DEPTH - 1)
    ok = '{"type":"action","request":5,"action":1,"x":' + deepest + "}"  # exactly MAX_JSON_DEPTH deep
    assert protocol.read_action(ok, 5, 3) == 1
    too_deep = '{"type":"action","request":5,"action":1,"x":[' + deepest + "]}"
    with pytest.raises(ProtocolError) as info:
        protocol.read_action(too_deep, 5, 3)
    assert info.value.reason == "bad_json"


@pytest.mark.parametrize("line", [
    hello_line("my-bot"), '{"type":"hello","protocol":1,"name":"x"}',
    json.dumps({"type": "hello", "protocol": 1, "name": "b", "version": "2.1", "author": "me", "lang": "ocaml"}),
    json.dumps({"type": "hello", "protocol": 1, "name": "[" * 40}),
])
def test_read_bot_hello_accepts(line: str) -> None:
    assert protocol.read_bot_hello(line)["type"] == "hello"


@pytest.mark.parametrize("line, reason", [
    ("", "bad_json"), ("hello", "bad_json"), ("{" * 50, "bad_json"),
    ("1", "schema"), ('{"type":"hello","protocol":1}', "schema"), ('{"type":"hello","name":"x"}', "schema"),
    ('{"type":"bot_hello","protocol":1,"name":"x"}', "schema"),
    ('{"type":"hello","protocol":"1","name":"x"}', "schema"),
    ('{"type":"hello","protocol":1,"name":""}', "schema"),
    (json.dumps({"type": "hello", "protocol": 1, "name": "x" * 65}), "schema"),
    ('{"type":"hello","protocol":2,"name":"x"}', "bad_version"),
    ('{"type":"hello","protocol":0,"name":"x"}', "bad_version"),
])
def test_read_bot_hello_rejects(line: str, reason: str) -> None:
    with pytest.raises(ProtocolError) as info:
        protocol.read_bot_hello(line)
    assert info.value.reason == reason, str(info.value)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20)
action_like = st.fixed_dictionaries(
    {"type": st.sampled_from(["action", "hello", "Action"]) | st.text(max_size=6)},
    optional={"request": st.integers(-3, 12) | json_values, "action": st.integers(-3, 12) | json_values,
              "extra": json_values}).map(json.dumps)
lines = st.one_of(
    st.text(max_size=200),
    st.binary(max_size=200).map(lambda b: b.decode("utf-8", "replace")),
    st.binary(max_size=200).map(lambda b: b.decode("latin-1")),
    json_values.map(lambda v: json.dumps(v)),
    action_like,
    st.integers().map(str),
    st.lists(st.sampled_from(list('[]{}",:0 \\')), max_size=120).map("".join),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(line=lines, request_id=st.integers(1, 10), n=st.integers(1, 10))
def test_read_action_fuzz(line: str, request_id: int, n: int) -> None:
    try:
        got = protocol.read_action(line, request_id, n)
    except ProtocolError as e:
        assert e.reason in READ_ACTION_REASONS, e.reason
        assert e.reason in FAULT_REASONS
    else:
        assert type(got) is int and 0 <= got < n


def _outcome(read: Callable[[str, int, int], int], line: str, request_id: int, n: int) -> Any:
    try:
        return read(line, request_id, n)
    except ProtocolError as e:
        return e.reason


reply_like = st.one_of(
    st.integers(-2, 10 ** 20).map(str),
    st.builds(lambda r, a, sp: json.dumps({"type": "action", "request": r, "action": a},
                                          separators=(",", ":") if sp else None),
              st.integers(-2, 10 ** 19), st.integers(-2, 10 ** 19), st.booleans()),
    st.sampled_from(["007", "1.0", "-0", "0 ", " 1", "1e2", '{"type":"action","request":1,"action":01}',
                     '{"type":"action","request":1,"action":1,"x":0}', '{"request":1,"type":"action","action":1}',
                     '{"type":"action","request":1,"action":1}\n', '{"type":"action" ,"request":1,"action":1}']),
)


def plain_replies(request_id: int) -> st.SearchStrategy:
    """The starters' own reply to ``request_id``, which is read with string methods before the
    regular expression: its numbers as digits a slip would let through (leading zeros, another
    script's digits, too many), and what may follow the action in place of its closing brace."""
    return st.builds(
        lambda r, a, tail: f'{{"type":"action","request":{r},"action":{a}{tail}',
        st.just(str(request_id)) | st.sampled_from([f"0{request_id}", f"{request_id} ", "\u0661"]),
        st.integers(0, 12).map(str) | st.sampled_from(["00", "01", "007", "\u0663", "1\u0663", "9" * 18]),
        st.sampled_from(["}", "", "0}", " }", "}}", "} "]))


replies_to_requests = st.one_of(
    st.tuples(st.one_of(reply_like, lines), st.integers(0, 10)),
    st.integers(0, 10).flatmap(lambda r: st.tuples(plain_replies(r), st.just(r))))


@settings(max_examples=400, deadline=None)
@given(reply=replies_to_requests, n=st.integers(1, 10))
@example(reply=('{"type":"action","request":1,"action":\u0663}', 1), n=5)  # another script's digit
@example(reply=('{"type":"action","request":1,"action":01}', 1), n=5)  # a leading zero
@example(reply=('{"type":"action","request":1,"action":12', 1), n=5)  # no closing brace
@example(reply=('{"type":"action","request":2,"action":1}', 1), n=5)  # another request's reply
@example(reply=('{"type": "action", "request": 1, "action": 01}', 1), n=5)  # the same, past the string path
def test_read_action_fast_path_agrees_with_the_parser(reply: tuple[str, int], n: int) -> None:
    """The usual replies are read by a regular expression (the starters' own by string methods):
    each decides exactly as the JSON path does."""
    line, request_id = reply
    assert _outcome(protocol.read_action, line, request_id, n) == \
        _outcome(lambda *a: protocol._read_action_json(*a)[0], line, request_id, n)


@settings(max_examples=100, deadline=None)
@given(line=lines)
def test_read_bot_hello_fuzz(line: str) -> None:
    try:
        protocol.read_bot_hello(line)
    except ProtocolError as e:
        assert e.reason in {"bad_json", "schema", "bad_version"}


# ====================================================================== the bots printed in PROTOCOL.md

def doc_block(marker: str, lang: str) -> str:
    text = PROTOCOL_MD.read_text(encoding="utf-8")
    for block in re.findall(r"```" + lang + r"\n(.*?)```", text, re.S):
        if marker in block:
            return block
    raise AssertionError(f"PROTOCOL.md has no ```{lang} block containing {marker!r}")


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash not installed")
def test_doc_bots_play_a_match(tmp_path: Path) -> None:
    py = tmp_path / "bot.py"
    py.write_text(doc_block("minimal-py", "python"))
    sh = tmp_path / "bot.sh"
    sh.write_text(doc_block("minimal-bash", "bash"))
    argvs = [[sys.executable, str(py)], ["bash", str(sh)]]
    bots: list[BlockingBot] = []

    def launcher(argv: list[str]):
        def launch(spec: BotSpec) -> BlockingBot:  # our own doc bots: no sandbox, the referee's uid
            bots.append(start_bot(argv, tmp_path, run_as=RunAs.REFEREE, cgroup=False))
            return bots[-1]
        return launch

    clock = TimeControl(move_ms=5000, bank_ms=5000, handshake_ms=10_000)
    players = [BlockingPlayer(Match._spec(n), launcher(a), clock) for n, a in zip(("py", "sh"), argvs)]
    recs = [play_game(players, rules("classic"), seed, game_id=f"doc-{seed}", clock=clock, max_turns=500)
            for seed in (1, 2)]
    for p in players:
        p.shutdown()  # sends shutdown; the bots exit by themselves within their grace
    settle()
    exits = [b.returncode for b in bots]
    for rec in recs:
        assert rec.faults == [], rec.faults
        assert rec.result is not None and sum(rec.decisions) > 0
    assert exits == [0, 0], "both bots exit 0 on shutdown, once each for the whole match"


def test_protocol_md_names_everything() -> None:
    text = PROTOCOL_MD.read_text(encoding="utf-8")
    d = defs()
    names = [*FAULT_REASONS, *REFEREE_MESSAGES, *d["decision"]["enum"],
             *kind_branches(d, "event"), *kind_branches(d, "action_any"),
             *d["view"]["properties"], *d["player"]["properties"]]
    missing = sorted({n for n in names if f"`{n}`" not in text})
    assert not missing, f"PROTOCOL.md does not mention: {missing}"
    assert f"{protocol.MAX_LINE_BYTES}" in text or "1 MiB" in text
    tc = TimeControl()
    for value in (tc.move_ms, tc.bank_ms, tc.handshake_ms):
        assert f"{value:,}".replace(",", "") in text.replace(",", "").replace("_", "")


# ====================================================================== regenerating the examples

def _pretty(value: Any, indent: int = 0, width: int = 100, lead: int = 0) -> str:
    """JSON with short arrays and objects on one line, longer ones one item per line."""
    flat = json.dumps(value, ensure_ascii=False)
    if indent + lead + len(flat) <= width or not isinstance(value, (dict, list)) or not value:
        return flat
    pad = " " * (indent + 2)
    if isinstance(value, dict):
        items = [f"{pad}{json.dumps(k)}: {_pretty(v, indent + 2, width, len(json.dumps(k)) + 2)}"
                 for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"
    if all(not isinstance(v, (dict, list)) for v in value):  # a long list of scalars: fill the lines
        rows, row = [], pad
        for v in value:
            item = json.dumps(v, ensure_ascii=False) + ","
            if len(row) + len(item) + 1 > width and row.strip():
                rows.append(row.rstrip())
                row = pad
            row += item + " "
        rows.append(row.rstrip().rstrip(","))
        return "[\n" + "\n".join(rows) + "\n" + " " * indent + "]"
    return "[\n" + ",\n".join(pad + _pretty(v, indent + 2, width) for v in value) + "\n" + " " * indent + "]"


def _size(msg: dict[str, Any]) -> int:
    return len(json.dumps(msg))


def _find(match: Callable[[], Match], rule_set: Rules, want: Callable[[dict[str, Any]], bool],
          seeds: range = range(1, 60)) -> dict[str, Any]:
    """The smallest request matching ``want`` in the first game (by seed) that has one."""
    for seed in seeds:
        found = [m for m in match().run(rule_set, [seed]).sent("request") if want(m)]
        if found:
            return strip_seat(min(found, key=_size))
    raise AssertionError(f"no request of the wanted shape in {len(seeds)} games of {rule_set.name}")


def build_examples() -> dict[str, Any]:
    """Real messages from real games (fixed seeds and bots), picked to show each case."""
    out: dict[str, Any] = {}
    names = ["alice", "bob", "carol"]
    table_of = lambda policy: (lambda: Match([policy_bot(n, policy) for n in names], names))  # noqa: E731
    duel = lambda: Match([policy_bot(n, strategies.heuristic) for n in names[:2]], names[:2])  # noqa: E731
    has = lambda m, kind: any(e["kind"] == kind for e in m["events"])  # noqa: E731

    main = table_of(strategies.heuristic)().run(rules("classic"), [2026])
    out["hello"] = strip_seat(main.sent("hello")[0])
    out["bot_hello"] = json.loads(next(e["reply"] for e in main.log if "reply" in e))
    out["start"] = strip_seat(main.sent("start")[1])
    out["request"] = _find(table_of(strategies.heuristic), rules("classic"), lambda m: (
        m["decision"] == "play_hand" and m["view"]["pile"] and len(m["actions"]) >= 3
        and has(m, "drew") and has(m, "played")), range(2026, 2100))
    out["request-setup"] = _find(table_of(strategies.heuristic), rules("classic"),
                                 lambda m: m["decision"] == "setup" and m["_seat"] == 1, range(2026, 2100))
    out["action"] = {"type": "action", "request": out["request"]["id"], "action": 1}
    out["action-info"] = {**out["action"], "info": {"eval": 0.18, "win_prob": 0.62, "iterations": 412,
                                                    "nodes": 20600, "text": "keep the 2s for later"}}
    out["end"] = strip_seat(main.sent("end")[0])
    out["shutdown"] = strip_seat(main.sent("shutdown")[0])
    out["request-play_face_up"] = _find(duel, rules("classic"), lambda m: (
        m["decision"] == "play_face_up" and len(m["actions"]) >= 3 and m["view"]["pile"]), range(3, 60))
    out["request-flip_face_down"] = _find(duel, rules("classic"), lambda m: m["decision"] == "flip_face_down",
                                          range(3, 60))
    out["request-harsh_pick_up"] = _find(table_of(strategies.lowest_first), rules("shithead", harsh_face_up=True),
                                         lambda m: any("surrender" in a for a in m["actions"]) and len(m["actions"]) <= 4,
                                         range(7, 60))
    out["request-joker_target"] = _find(table_of(strategies.heuristic), rules("classic", jokers=2, joker="give_pile"),
                                        lambda m: any("target" in a for a in m["actions"]), range(3, 60))
    faulty = Match([policy_bot("alice", strategies.heuristic), faulty_bot("bob", "illegal_action", at=4),
                    policy_bot("carol", strategies.heuristic)], names).run(rules("classic"), [5])
    out["error"] = strip_seat(faulty.sent("error")[0])
    out["end-forfeit"] = strip_seat(faulty.sent("end")[0])
    return out


def write_examples() -> None:
    EXAMPLES.mkdir(parents=True, exist_ok=True)
    for name, msg in build_examples().items():
        protocol.validate(name.split("-")[0], msg)
        (EXAMPLES / f"{name}.json").write_text(_pretty(msg) + "\n", encoding="utf-8")
        print(f"protocol/examples/{name}.json  {len(protocol.encode(msg))} bytes on the wire")


def test_examples_can_be_regenerated() -> None:
    """The generator still finds every case (it is what produced protocol/examples/)."""
    built = build_examples()
    assert {schema_of_example(Path(k + ".json")) for k in built} == set(MESSAGES)
    for name, msg in built.items():
        protocol.validate(name.split("-")[0], msg)


if __name__ == "__main__":
    write_examples()


def test_mypy_rejects_a_fault_reason_given_as_a_string(tmp_path: Path) -> None:
    """The core takes a FaultReason, so a reason the schema does not know (the environment once
    recorded ``"illegal"``) is a type error, not a record no reader understands."""
    probe = tmp_path / "probe.py"
    probe.write_text("from arena.faults import FaultReason\n"
                     "from arena.referee.core import Faulted, RefereeCore\n\n\n"
                     "def seat_out(core: RefereeCore) -> Faulted:\n"
                     "    core.fault(FaultReason.ILLEGAL_ACTION, '', 0.0)\n"
                     "    core.start_fault(0, 'illegal', '')\n"
                     "    return Faulted('timeout', '', 0.0)\n")
    out = subprocess.run([sys.executable, "-m", "mypy", "--follow-imports=silent", "--ignore-missing-imports",
                          "--no-incremental", "--no-error-summary", "--cache-dir", str(tmp_path / "mypy-cache"),
                          str(probe)],
                         capture_output=True, text=True, cwd=ROOT, timeout=600)
    errors = [line.split(": error: ")[0].rsplit(":", 1)[-1] for line in out.stdout.splitlines() if ": error: " in line]
    assert errors == ["7", "8"], out.stdout  # the two strings, not the enum


def near(longest: int) -> st.SearchStrategy:
    """Texts short, empty and at the schema's length limit (one under, at, one over), or no text."""
    return st.text(max_size=3) | st.text(min_size=longest - 1, max_size=longest + 1) | json_values


hello_like = st.fixed_dictionaries(
    {"type": st.just("hello") | json_values, "protocol": st.integers(-1, 3) | json_values, "name": near(64)},
    optional={"version": near(64), "author": near(128), "lang": json_values}) | json_values


@settings(max_examples=50, deadline=None)  # each planted off-by-one or type slip failed at 25, ten runs of ten
@given(msg=hello_like)
def test_the_plain_hello_check_says_yes_only_where_the_schema_does(msg: Any) -> None:
    """A bot's hello is checked without jsonschema in its usual shape (so a referee need not import it):
    every answer that check accepts, the schema accepts too; what it passes on, the schema decides."""
    if protocol._plain_hello(msg):
        protocol.validate("bot_hello", msg)


def test_a_referee_whose_bots_answer_plainly_never_imports_jsonschema() -> None:
    """jsonschema is a fifth of a start's CPU: the usual hello and action are read without it, and
    it is imported the first time a message needs the schema's precise error."""
    code = ("import sys; from arena.referee import protocol; "
            "protocol.read_bot_hello('{\"type\":\"hello\",\"protocol\":1,\"name\":\"b\",\"version\":\"1\",\"author\":\"me\"}'); "
            "protocol.read_action('{\"type\":\"action\",\"request\":3,\"action\":1}', 3, 2); "
            "assert 'jsonschema' not in sys.modules, 'imported early'\n"
            "try: protocol.read_bot_hello('{\"type\":\"hello\",\"protocol\":1,\"name\":\"\"}')\n"
            "except protocol.ProtocolError as e: assert e.reason == 'schema', e\n"
            "assert 'jsonschema' in sys.modules")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
