"""The bot protocol: building the referee's messages and reading the bot's replies.

One JSON object per line, UTF-8, both ways. Every message has a JSON Schema in
``protocol/schemas/``; the bot's messages are validated against them, and the
tests validate every message the referee writes. ``protocol/PROTOCOL.md`` is
the contract a bot author reads.
"""

from __future__ import annotations

import json
import math
import re
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from .. import __version__
from ..faults import BadJson, BadVersion, BotFault, IllegalAction, SchemaViolation, WrongRequest
from ..faults import ProtocolError  # noqa: F401 - re-exported: every bad line raises a subclass of it

if TYPE_CHECKING:
    import jsonschema
    import referencing

PROTOCOL_VERSION = 1
MAX_LINE_BYTES = 1 << 20  # longest line a bot may send; longer is a fault
MAX_JSON_DEPTH = 32  # deeper nesting is refused

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
    """Every schema file, under its ``$id``, so ``$ref``s between files (``defs.schema.json``) resolve offline.

    jsonschema and referencing are imported here and in :func:`validator`, when a message is first
    checked against a schema, not with this module: they are a fifth of an ``arena serve``
    start's CPU, and a process that starts no bot (the pages, most commands) never needs them."""
    import referencing
    from referencing.jsonschema import DRAFT202012

    entries = []
    for path in sorted(schema_dir().glob("*.schema.json")):
        schema = json.loads(path.read_text(encoding="utf-8"))
        resource = referencing.Resource.from_contents(schema, default_specification=DRAFT202012)
        entries.append((resource.id() or path.name, resource))
    return referencing.Registry().with_resources(entries).crawl()


@cache
def validator(name: str) -> jsonschema.protocols.Validator:
    import jsonschema

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
            clock: dict[str, int]) -> dict[str, Any]:
    """``actions`` get their ids here."""
    return {"type": "request", "id": request_id, "game": game, "decision": decision,
            "view": view, "events": events,
            "actions": [{"id": i, **a} for i, a in enumerate(actions)], "clock": clock}


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

MAX_JSON_PARTS = 4096
"""Brackets and commas a bot's line may hold, counted in its text (strings too): an answer is a
handful of values, and the count bounds what the parser builds. A 1 MiB line of arrays nested 31
deep took the referee about 250 ms to read, which on a fixed schedule moved the other seat's next
request by as much: a bit a decision (docs/SANDBOX.md)."""


MAX_INT_DIGITS = 100
"""Digits of an integer in a bot's line: Python reads a long integer in time that grows with the
square of its digits (240 integers of 4,300 digits, within the caps above, took 22 ms)."""


def _int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise BadJson(f"an integer of more than {MAX_INT_DIGITS} digits")
    return int(digits)


def _depth(value: Any) -> int:
    """How deep arrays and objects nest in a parsed line (a scalar is 0)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            v = v.values()
        elif not isinstance(v, list):
            continue
        deepest = max(deepest, d)
        stack.extend((x, d + 1) for x in v if isinstance(x, (dict, list)))
    return deepest


def parse_line(line: str) -> Any:
    """A bot's line as JSON, or a ``BadJson`` fault. The line's brackets and commas are counted
    before it is parsed (:data:`MAX_JSON_PARTS`), so no line costs the referee more than a
    millisecond or so, whatever it holds; nesting past :data:`MAX_JSON_DEPTH` is refused."""
    text = line.strip()
    if not text:
        raise BadJson("empty line")
    if text.count("[") + text.count("{") + text.count(",") > MAX_JSON_PARTS:
        raise BadJson(f"more than {MAX_JSON_PARTS} brackets and commas in one line (an answer holds a few values)")
    try:
        value = json.loads(text, parse_int=_int)
    except RecursionError:
        raise BadJson(f"JSON nested deeper than {MAX_JSON_DEPTH}") from None
    except ValueError as e:
        raise BadJson(f"not JSON: {e}") from None
    if _depth(value) > MAX_JSON_DEPTH:
        raise BadJson(f"JSON nested deeper than {MAX_JSON_DEPTH}")
    return value


HELLO_HINT = ("the first line a bot prints must be its hello answer; write banners, logs and debugging "
              "output to stderr (Python: print(..., file=sys.stderr))")


def read_bot_hello(line: str) -> dict[str, Any]:
    """The bot's ``hello`` answer; a bad one names the line it got (a banner, a log line) and what to do."""
    try:
        msg = parse_line(line)
        if not _plain_hello(msg):
            _check("bot_hello", msg)
    except BotFault as e:  # not JSON, or no hello: the same fault, with the line and a hint
        raise type(e)(f"{e}; the bot's first line was {_quote(line.rstrip(chr(10)), 80)}; hint: {HELLO_HINT}") from None
    if msg["protocol"] != PROTOCOL_VERSION:
        raise BadVersion(f"bot speaks protocol {msg['protocol']}, arena speaks {PROTOCOL_VERSION}")
    return msg


_ID = "(0|[1-9][0-9]{0,17})"
_COMMON_REPLY = re.compile(f'{_ID}|\\{{"type": ?"action", ?"request": ?{_ID}, ?"action": ?{_ID}\\}}')
# Its most common form, without spaces, for this request: checked with string methods first.
_PLAIN_HEAD = '{"type":"action","request":'
_PLAIN_SKIP = len(_PLAIN_HEAD)
_PLAIN_MID = ',"action":'


def read_action(line: str, request_id: int, n_actions: int) -> int:
    """The action id a bot chose: a bare integer line, or an ``action`` message for this request."""
    return read_reply(line, request_id, n_actions)[0]


def read_reply(line: str, request_id: int, n_actions: int) -> tuple[int, dict[str, Any] | None]:
    """The action id a bot chose, and what to record of its ``info`` (:func:`check_info`): None
    when the reply has none. A bad ``info`` is never a fault: it is dropped with a warning."""
    if line.startswith(_PLAIN_HEAD):  # the reply the starter bots write, read with no regex or parser
        req, mid, act = line[_PLAIN_SKIP:].partition(_PLAIN_MID)
        digits = act[:-1]
        if (mid and req == str(request_id) and act[-1:] == "}" and digits.isdigit() and digits.isascii()
                and len(digits) <= 18 and (digits[0] != "0" or digits == "0")):
            action = int(digits)  # a match of _COMMON_REPLY, read as it reads it; the rest goes on below
            if action < n_actions:
                return action, None
    m = _COMMON_REPLY.fullmatch(line)  # the usual replies, read without a JSON parser; the rest below
    if m is not None:
        bare, req, act = m.groups()
        if bare is None and int(req) != request_id:
            raise WrongRequest(f"reply names request {req}, expected {request_id}")
        action = int(bare if bare is not None else act)
        if not action < n_actions:
            raise IllegalAction(f"action {action} is not one of the {n_actions} offered (0..{n_actions - 1})")
        return action, None
    return _read_action_json(line, request_id, n_actions)


def _read_action_json(line: str, request_id: int, n_actions: int) -> tuple[int, dict[str, Any] | None]:
    msg = parse_line(line)
    note = None
    if isinstance(msg, int) and not isinstance(msg, bool):
        action = msg
    else:
        if not _plain_action(msg):  # the schema is run only to explain what is wrong
            _check("action", {k: v for k, v in msg.items() if k != "info"} if type(msg) is dict else msg)
        if msg["request"] != request_id:
            raise WrongRequest(f"reply names request {msg['request']}, expected {request_id}")
        action = int(msg["action"])  # JSON Schema counts 1.0 as an integer; the referee indexes with it
        if "info" in msg:
            note = check_info(msg["info"])
    if not 0 <= action < n_actions:
        raise IllegalAction(f"action {action} is not one of the {n_actions} offered (0..{n_actions - 1})")
    return action, note


# What a bot may say it was thinking (``info`` in an ``action``): field -> (check, what it must be).
MAX_INFO_BYTES = 1024  # an info whose JSON is longer is dropped whole
MAX_INFO_TEXT = 200  # characters of ``text`` kept
_MAX_INT = 2**53  # counts above this lose precision in JSON readers; nobody searches that many nodes

def _number(v: Any) -> bool:
    return type(v) in (int, float) and math.isfinite(v) and abs(v) <= 1e12


def _count(v: Any) -> bool:
    return type(v) is int and 0 <= v <= _MAX_INT


INFO_FIELDS: dict[str, tuple[Any, str]] = {
    "eval": (_number, "a finite number"),
    "win_prob": (lambda v: _number(v) and 0 <= v <= 1, "a number from 0 to 1"),
    "nodes": (_count, "a whole number from 0"),
    "iterations": (_count, "a whole number from 0"),
    "text": (lambda v: type(v) is str, "a string"),
}


def _quote(value: Any, limit: int = 40) -> str:
    """A short, safe rendering of what a bot sent, for a warning."""
    text = json.dumps(value, ensure_ascii=True) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


def check_info(raw: Any) -> dict[str, Any]:
    """What to record of a reply's ``info``: ``{"info": kept fields}`` and, when anything was
    dropped or cut, ``{"info_warning": why}``. Checked field by field, so that one wrong field
    costs only itself; the size cap bounds what a game record keeps per decision."""
    if type(raw) is not dict:
        return {"info_warning": f"info must be an object, got {type(raw).__name__}; dropped"}
    # surrogatepass: JSON may escape a lone surrogate (\ud800), which strict UTF-8 cannot encode;
    # the text check below replaces it, and the size must not raise over it
    size = len(json.dumps(raw, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass"))
    if size > MAX_INFO_BYTES:
        return {"info_warning": f"info is {size:,} bytes, more than {MAX_INFO_BYTES}; dropped"}
    kept: dict[str, Any] = {}
    problems: list[str] = []
    for key, value in raw.items():
        check = INFO_FIELDS.get(key)
        if check is None:
            problems.append(f"unknown field {_quote(key)}")
        elif not check[0](value):
            problems.append(f"{key} must be {check[1]}, got {_quote(value)}")
        elif key == "text":
            clean = "".join(c if c.isprintable() else " " for c in value)  # no terminal escapes in replays
            if clean != value:
                problems.append("text had control characters, replaced by spaces")
            if len(clean) > MAX_INFO_TEXT:
                clean = clean[:MAX_INFO_TEXT]
                problems.append(f"text cut to {MAX_INFO_TEXT} characters")
            kept[key] = clean
        else:
            kept[key] = value
    out: dict[str, Any] = {"info": kept} if kept else {}
    if problems:
        shown = problems[:3] + ([f"{len(problems) - 3} more"] if len(problems) > 3 else [])
        out["info_warning"] = "; ".join(shown) + (" (dropped)" if len(kept) < len(raw) else "")
    return out


def _plain_action(msg: Any) -> bool:
    """The common, valid shape of an ``action`` message, checked without jsonschema's overhead.

    It accepts exactly what action.schema.json accepts when it says yes; anything
    else goes through the schema for a precise error.
    """
    return (type(msg) is dict and msg.get("type") == "action"
            and type(msg.get("request")) is int and msg["request"] >= 0
            and type(msg.get("action")) is int and msg["action"] >= 0)


def _plain_hello(msg: Any) -> bool:
    """The usual, valid ``hello`` answer, checked without jsonschema: a referee whose bots all answer
    so never imports it (a fifth of a command's start). Says yes only where bot_hello.schema.json
    does; anything else goes through the schema for a precise error."""
    def text(key: str, longest: int, shortest: int = 0) -> bool:
        return type(value := msg.get(key)) is str and shortest <= len(value) <= longest

    return (type(msg) is dict and msg.get("type") == "hello" and type(msg.get("protocol")) is int
            and text("name", 64, 1) and ("version" not in msg or text("version", 64))
            and ("author" not in msg or text("author", 128)))


def _check(schema: str, msg: Any) -> None:
    import jsonschema

    try:
        validate(schema, msg)
    except jsonschema.ValidationError as e:
        where = "/".join(str(p) for p in e.absolute_path) or "message"
        raise SchemaViolation(f"{schema} message invalid at {where}: {e.message}") from None
