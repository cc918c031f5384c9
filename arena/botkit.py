"""A small harness for Python bots: the protocol loop, so a bot is one ``choose`` function.

Used by the reference bots in ``bots/``. A bot in another language needs none of
this: ``protocol/PROTOCOL.md`` is the whole contract.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any, TextIO

Chooser = Callable[[dict[str, Any]], int]


def serve(choose: Chooser, name: str, version: str = "1.0", *, on_start: Callable[[dict], None] | None = None,
          on_end: Callable[[dict], None] | None = None, stdin: TextIO = sys.stdin,
          stdout: TextIO = sys.stdout) -> None:
    """Answer the referee until it says shutdown or closes stdin."""
    def send(msg: dict[str, Any]) -> None:
        stdout.write(json.dumps(msg, separators=(",", ":")) + "\n")
        stdout.flush()

    for line in stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        kind = msg.get("type")
        if kind == "hello":
            send({"type": "hello", "protocol": 1, "name": name, "version": version})
        elif kind == "request":
            send({"type": "action", "request": msg["id"], "action": int(choose(msg))})
        elif kind == "start" and on_start:
            on_start(msg)
        elif kind == "end" and on_end:
            on_end(msg)
        elif kind == "error":
            print(f"referee says: {msg.get('reason')}: {msg.get('message')}", file=sys.stderr, flush=True)
        elif kind == "shutdown":
            return
