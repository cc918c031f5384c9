"""Live updates: follow the store and tell every open page when it changed.

The games may be played by this process (Play, Submit) or by another one
(``arena tournament``, ``arena ladder run`` in another terminal); either way
they end up in the SQLite store, so one poller reading a cheap version key
(:class:`arena.serve.cache.StoreVersion`) covers both. Pages subscribe with
server-sent events (``/events``) and re-fetch their live regions.

Each event also carries the news a ladder's page shows at once: every ladder's game count and the
results of its games stored since the last event. Those cost two indexed reads a look, once per
process for every stream, and no page build, so they go out on the next look rather than when the
pages' version next moves (at most once a ``settle``): beside a playing ladder and a flood of
clients a page's own fetch waits for its build (the standings' fit, 0.2 s of CPU on a 10,000-game
ladder, stretched to seconds under the pages' CPU ceiling), while the news reaches it in about a look.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

import anyio

from ..store.reads import LADDER_PREFIX
from .cache import StoreVersion, tag

log = logging.getLogger("arena.serve")


LATEST = 5  # a ladder's newest results an event carries


class StoreFollower:
    """The process's one watcher of the store: looks at its version every ``interval`` seconds
    (one ``PRAGMA data_version``, :class:`~arena.serve.cache.StoreVersion`); ``serial`` counts the
    changes seen, and every open stream waits on the same event. An event goes out when the pages'
    version moves (pages fetch what changed) or a ladder's game count does (the news, shown from
    the event itself): at most one a look."""

    def __init__(self, version: StoreVersion, interval: float = 0.5):
        self.store = version
        self.interval = interval
        self.version: tuple = ()
        self._parts: dict[str, tuple] = {}
        self._counts: dict[str, int] = {}  # every ladder's game count, as last sent
        self._games = 0  # the store's
        self._after: int | None = None  # the newest game's row (any game's) a look has seen
        self.serial = 0
        self.event = ""  # the store event of this version, written once for every open stream
        self._changed = anyio.Event()

    def _read(self) -> tuple:
        return self.store.current() or self.version

    def _news(self) -> dict[str, list[dict]] | None:
        """Each ladder's results stored since the last look, newest first, when a count moved; None
        when nothing did (the first look only learns where the games stand)."""
        looked = self.store.look(self._after, LATEST)
        if looked is None:
            return None
        parts, rows = looked
        counts = {name: p[0] for name, p in parts.items() if name}
        # every game's row, a ladder's or not, so the next look reads only rows stored since; the
        # rows are read after the parts: a game stored between is in the rows, not yet counted
        top = max([p[1] for p in parts.values()] + [r[0] for r in rows], default=0)
        games = sum(p[0] for p in parts.values())
        first, self._after = self._after is None, max(self._after or 0, top)
        moved = (counts, games) != (self._counts, self._games)
        self._counts, self._games = counts, games
        if first or not moved:
            return None
        latest: dict[str, list[dict]] = {}
        for _, gid, tid, seats, result in rows:
            try:
                shown = result_of(gid, seats, result)
            except (ValueError, TypeError, LookupError):  # a row this arena did not write: its count
                log.warning("a stored game's result could not be read for the live news: %r", gid)
                continue                                     # is news, its result is left out
            latest.setdefault(tid[len(LADDER_PREFIX):].split(":", 1)[0], []).append(shown)
        return latest

    async def run(self) -> None:
        while True:
            version = self._read()
            parts = self.store.parts
            latest = self._news()
            moved = (version, parts) != (self.version, self._parts)  # a status or pause moves a ladder's part alone
            if moved or latest is not None:
                self.version, self._parts = version, parts
                self.serial += 1
                news = {"serial": self.serial, "games": self._games or (version[0] if version else 0),
                        "version": tag(version),
                        "parts": self.store.tags(),  # each ladder's own version: its pages skip the rest
                        "moved": moved,  # False: news alone, nothing for a page to fetch
                        "ladders": self._counts, "latest": latest or {}}
                self.event = f"event: store\ndata: {json.dumps(news)}\n\n"
                changed, self._changed = self._changed, anyio.Event()
                changed.set()
            await anyio.sleep(self.interval)

    async def wait(self, serial: int, timeout: float) -> int:
        """The serial once it differs from ``serial``, or ``serial`` after ``timeout`` seconds."""
        if self.serial != serial:
            return self.serial
        with anyio.move_on_after(timeout):
            await self._changed.wait()
        return self.serial

    def close(self) -> None:
        self.store.close()


def result_of(gid: str, seats: str, result: str) -> dict:
    """A stored game's result as a ladder's page shows it from an event: its id, the seats' labels
    by place (a group shares a place), whether it was a draw and who forfeited. Labels are any
    text a bot was named: the page writes them as text (``live.js``), never as markup."""
    labels, res = json.loads(seats), json.loads(result)
    return {"game": gid, "places": [[labels[s] for s in group] for group in res.get("order", [])],
            "draw": bool(res.get("draw")), "out": [labels[int(s)] for s in res.get("forfeits", {})]}


STALL_S = 10.0  # a stream whose client takes no event within this (its buffers full) is closed
KEEPALIVE_S = 15.0


class EventStream:
    """``/events``: one ``store`` event per change of the store, a comment every 15 s to keep it open.

    Each event is handed on within ``stall_s`` or the stream ends and its connection is closed: a
    client that stops reading fills its socket's buffers, and then its stream (and the memory it
    holds) goes, while every other stream, each waiting on its own send, goes on. A disconnect
    ends the stream at once."""

    def __init__(self, stall_s: float = STALL_S, keepalive_s: float = KEEPALIVE_S):
        self.stall_s = stall_s
        self.keepalive_s = keepalive_s

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        follower: StoreFollower = scope["app"].state.follower
        stalled = False
        async with anyio.create_task_group() as group:

            async def until_disconnect() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                group.cancel_scope.cancel()

            group.start_soon(until_disconnect)
            await self._stream(follower, send)
            stalled = True
            group.cancel_scope.cancel()
        if stalled:  # returning without the response's end makes the server close the connection
            log.info("closed a live stream whose client read nothing for %.0f s", self.stall_s)

    async def _send(self, send: Callable, message: dict) -> bool:
        """Hand ``message`` on; False when the client has not taken it within ``stall_s``."""
        with anyio.move_on_after(self.stall_s) as sending:
            await send(message)
        return not sending.cancelled_caught

    async def _stream(self, follower: StoreFollower, send: Callable) -> None:
        """Send events until a send stalls."""
        headers = [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-store"),
                   (b"x-accel-buffering", b"no")]
        serial = follower.serial
        chunk = f"retry: 2000\nevent: hello\ndata: {serial}\n\n"
        if not await self._send(send, {"type": "http.response.start", "status": 200, "headers": headers}):
            return
        while await self._send(send, {"type": "http.response.body", "body": chunk.encode(), "more_body": True}):
            new = await follower.wait(serial, self.keepalive_s)
            chunk = ": still here\n\n" if new == serial else follower.event
            serial = new


events = EventStream()
