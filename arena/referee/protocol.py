"""The bot protocol: building the referee's messages and reading the bot's replies.

One JSON object per line, UTF-8, both ways. Every message has a JSON Schema in
``protocol/schemas/``; the bot's messages are validated against them, and the
tests validate every message the referee writes. ``protocol/PROTOCOL.md`` is
the contract a bot author reads.
"""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import orjson
import referencing
from referencing.jsonschema import DRAFT202012

from .. import __version__
from ..faults import BadJson, BadVersion, IllegalAction, SchemaViolation, WrongRequest
from ..faults import ProtocolError  # noqa: F401 - re-exported: every bad line raises a subclass of it

PROTOCOL_VERSION = 1
MAX_LINE_BYTES = 1 << 20  # longest line a bot may send; longer is a fault
MAX_JSON_DEPTH = 32  # deeper nesting is rejected before parsing deeper

REFEREE_MESSAGES = ("hello", "start", "request", "error", "end", "shutdown")
BOT_MESSAGES = ("bot_hello", "action")


def schema_dir() -> Path:
    """``protocol/schemas`` from a source checkout, or the copy installed with the package."""
    here = Path(__file__).resolve().parents[2] / "protocol" / "schemas"
    if here.is_dir():
        return here
    return Path(str(resources.files("arena") / "schemas"))


@cache
def registry() -> referencing.Registry:
    """Every schema file, under its ``$id``, so ``$ref``s between files (``defs.schema.json``) resolve offline."""
    entries = []
    for path in sorted(schema_dir().glob("*.schema.json")):
        schema = json.loads(path.read_text(encoding="utf-8"))
        resource = referencing.Resource.from_contents(schema, default_specification=DRAFT202012)
        entries.append((resource.id() or path.name, resource))
    return referencing.Registry().with_resources(entries).crawl()


@cache
def validator(name: str) -> jsonschema.protocols.Validator:
    schema = json.loads((schema_dir() / f"{name}.schema.json").read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema, registry=registry())


def validate(name: str, message: Any) -> None:
    """Raise ``jsonschema.ValidationError`` if ``message`` does not match schema ``name``."""
    validator(name).validate(message)


# ---------------------------------------------------------------- referee -> bot

def hello() -> dict[str, Any]:
    return {"type": "hello", "protocol": PROTOCOL_VERSION, "arena": __version__}


def start(game: str, seat: int, players: int, names: list[str], rules: dict[str, Any],
          clock: dict[str, int], seed: int) -> dict[str, Any]:
    """``seed`` is for the bot's own randomness: a bot that seeds from it replays identically."""
    return {"type": "start", "game": game, "seat": seat, "players": players, "names": names,
            "rules": rules, "clock": clock, "seed": seed}


def request(request_id: int, game: str, decision: str, view: dict[str, Any],
            events: list[dict[str, Any]], actions: list[dict[str, Any]],
            clock: dict[str, int], *, numbered: bool = False) -> dict[str, Any]:
    """``actions`` get their ids here, unless ``numbered`` says each already starts with ``"id": i``."""
    return {"type": "request", "id": request_id, "game": game, "decision": decision,
            "view": view, "events": events,
            "actions": actions if numbered else [{"id": i, **a} for i, a in enumerate(actions)], "clock": clock}


def error(reason: str, message: str, request_id: int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "error", "reason": reason, "message": message}
    if request_id is not None:
        out["request"] = request_id
    return out


def end(game: str, result: dict[str, Any], reveal: list[dict[str, Any]],
        events: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "end", "game": game, "result": result, "reveal": reveal, "events": events}


def shutdown() -> dict[str, Any]:
    return {"type": "shutdown"}


def encode(message: dict[str, Any]) -> str:
    """One compact line. orjson: a request is built and written once per decision, and the
    standard library's encoder was the referee's largest single cost per request."""
    return orjson.dumps(message).decode()


# ---------------------------------------------------------------- bot -> referee

_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BRACKET = re.compile(r"[][{}]")


def _depth_ok(line: str) -> bool:
    """Reject absurd nesting cheaply, before json.loads recurses into it.

    Brackets inside JSON strings are not nesting: strings are blanked out first.
    """
    if line.count("[") + line.count("{") <= MAX_JSON_DEPTH:  # the common case: cannot be too deep
        return True
    depth = 0
    for m in _BRACKET.finditer(_JSON_STRING.sub('""', line)):
        if m.group() in "[{":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                return False
        else:
            depth -= 1
    return True


def parse_line(line: str) -> Any:
    """A bot's line as JSON, or a ``BadJson`` fault."""
    text = line.strip()
    if not text:
        raise BadJson("empty line")
    if not _depth_ok(text):
        raise BadJson(f"JSON nested deeper than {MAX_JSON_DEPTH}")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as e:
        raise BadJson(f"not JSON: {e}") from None


def read_bot_hello(line: str) -> dict[str, Any]:
    msg = parse_line(line)
    _check("bot_hello", msg)
    if msg["protocol"] != PROTOCOL_VERSION:
        raise BadVersion(f"bot speaks protocol {msg['protocol']}, arena speaks {PROTOCOL_VERSION}")
    return msg


_ID = "(0|[1-9][0-9]{0,17})"
_COMMON_REPLY = re.compile(f'{_ID}|\\{{"type": ?"action", ?"request": ?{_ID}, ?"action": ?{_ID}\\}}')


def read_action(line: str, request_id: int, n_actions: int) -> int:
    """The action id a bot chose: a bare integer line, or an ``action`` message for this request."""
    m = _COMMON_REPLY.fullmatch(line)  # the usual replies, read without a JSON parser; the rest below
    if m is not None:
        bare, req, act = m.groups()
        if bare is None and int(req) != request_id:
            raise WrongRequest(f"reply names request {req}, expected {request_id}")
        action = int(bare if bare is not None else act)
        if not action < n_actions:
            raise IllegalAction(f"action {action} is not one of the {n_actions} offered (0..{n_actions - 1})")
        return action
    return _read_action_json(line, request_id, n_actions)


def _read_action_json(line: str, request_id: int, n_actions: int) -> int:
    msg = parse_line(line)
    if isinstance(msg, int) and not isinstance(msg, bool):
        action = msg
    else:
        if not _plain_action(msg):  # the schema is run only to explain what is wrong
            _check("action", msg)
        if msg["request"] != request_id:
            raise WrongRequest(f"reply names request {msg['request']}, expected {request_id}")
        action = int(msg["action"])  # JSON Schema counts 1.0 as an integer; the referee indexes with it
    if not 0 <= action < n_actions:
        raise IllegalAction(f"action {action} is not one of the {n_actions} offered (0..{n_actions - 1})")
    return action


def _plain_action(msg: Any) -> bool:
    """The common, valid shape of an ``action`` message, checked without jsonschema's overhead.

    It accepts exactly what action.schema.json accepts when it says yes; anything
    else goes through the schema for a precise error.
    """
    return (type(msg) is dict and msg.get("type") == "action"
            and type(msg.get("request")) is int and msg["request"] >= 0
            and type(msg.get("action")) is int and msg["action"] >= 0)


def _check(schema: str, msg: Any) -> None:
    try:
        validate(schema, msg)
    except jsonschema.ValidationError as e:
        where = "/".join(str(p) for p in e.absolute_path) or "message"
        raise SchemaViolation(f"{schema} message invalid at {where}: {e.message}") from None
