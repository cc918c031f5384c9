"""The protocol loop, so that a Python bot is one ``choose`` function."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any, TextIO

from .types import Request

Chooser = Callable[[Any], "int | tuple[int, dict[str, Any] | None]"]


def serve(choose: Chooser, name: str, version: str = "1.0", *, on_start: Callable[[dict], None] | None = None,
          on_end: Callable[[dict], None] | None = None, typed: bool = False, stdin: TextIO | None = None,
          stdout: TextIO | None = None) -> None:
    """Answer the referee until it says shutdown or closes stdin.

    ``choose`` gets each request as the decoded dict, or with ``typed=True`` as a
    :class:`~arena.botkit.types.Request`, and returns an action id, or ``(id, info)`` to say
    what it was thinking (``eval``, ``win_prob``, ``nodes``, ``iterations``, ``text``: see
    protocol/PROTOCOL.md; the referee records it with the decision). While serving,
    ``print`` goes to stderr, so a stray debug print cannot break the protocol.
    """
    stdin = sys.stdin if stdin is None else stdin
    out = sys.stdout if stdout is None else stdout
    saved, sys.stdout = sys.stdout, sys.stderr

    def send(msg: dict[str, Any]) -> None:
        out.write(json.dumps(msg, separators=(",", ":")) + "\n")
        out.flush()

    try:
        for line in stdin:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if not isinstance(msg, dict):
                continue
            kind = msg.get("type")
            if kind == "hello":
                send({"type": "hello", "protocol": 1, "name": name, "version": version})
            elif kind == "request":
                chosen = choose(Request(msg) if typed else msg)
                info = None
                if isinstance(chosen, tuple):
                    chosen, info = chosen
                reply: dict[str, Any] = {"type": "action", "request": msg.get("id"), "action": int(chosen)}
                if info:
                    reply["info"] = info
                send(reply)
            elif kind == "start" and on_start:
                on_start(msg)
            elif kind == "end" and on_end:
                on_end(msg)
            elif kind == "error":
                print(f"referee says: {msg.get('reason')}: {msg.get('message')}", file=sys.stderr, flush=True)
            elif kind == "shutdown":
                return
    finally:
        sys.stdout = saved
