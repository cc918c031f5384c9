"""In-process stand-ins for bot processes, so referee and tournament tests need no subprocesses.

A ``ScriptedConnection`` runs a Python function as the bot: it receives each line the
referee writes and returns the lines the bot would print (or raises to act out a fault).
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable

import trio

from arena import strategies


class FakeExit(Exception):
    reason = "crash"


class FakeTimeout(Exception):
    reason = "timeout"


class ScriptedConnection:
    def __init__(self, respond: Callable[[str], list[str] | None], *, delay: float = 0.0):
        self.respond = respond
        self.delay = delay
        self.out: deque[str] = deque()
        self.sent: list[str] = []
        self.closed = False
        self.stderr: list[str] = []

    async def send_line(self, text: str) -> None:
        if self.closed:
            raise FakeExit("bot is gone")
        self.sent.append(text)
        replies = self.respond(text)
        if replies is None:
            self.closed = True
            return
        self.out.extend(replies)

    async def receive_line(self, timeout: float) -> str:
        if self.delay:
            if self.delay > timeout:
                await trio.sleep(timeout)
                raise FakeTimeout(f"no reply within {timeout:.3f}s")
            await trio.sleep(self.delay)
        if not self.out:
            if self.closed:
                raise FakeExit("bot exited")
            await trio.sleep(timeout)
            raise FakeTimeout(f"no reply within {timeout:.3f}s")
        return self.out.popleft()

    def take_stderr(self) -> list[str]:
        out, self.stderr = self.stderr, []
        return out

    async def aclose(self) -> None:
        self.closed = True


def policy_bot(choose: Callable[[dict], int], name: str = "fake") -> Callable[[str], list[str] | None]:
    """A well-behaved bot around a request -> action id function."""
    def respond(line: str) -> list[str] | None:
        msg = json.loads(line)
        if msg["type"] == "hello":
            return [json.dumps({"type": "hello", "protocol": 1, "name": name, "version": "1"})]
        if msg["type"] == "request":
            return [json.dumps({"type": "action", "request": msg["id"], "action": choose(msg)})]
        if msg["type"] == "shutdown":
            return None
        return []
    return respond


POLICIES = {
    "random": lambda: strategies.random_policy(__import__("random").Random(0)),
    "lowest": lambda: strategies.lowest_first,
    "highest": lambda: strategies.highest_first,
    "heuristic": lambda: strategies.heuristic,
}


def policy_launcher(starts: list[str] | None = None):
    """A tournament launcher that runs bundled bots' policies in-process by bot name."""
    async def launch(spec):
        if starts is not None:
            starts.append(spec.label)
        return ScriptedConnection(policy_bot(POLICIES[spec.name](), spec.name))
    return launch
