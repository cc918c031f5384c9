"""Live updates: follow the store and tell every open page when it changed.

The games may be played by this process (Play, Submit) or by another one
(``arena tournament``, ``arena ladder run`` in another terminal); either way
they end up in the SQLite store, so one poller reading a cheap version key
(:class:`arena.serve.cache.StoreVersion`) covers both. Pages subscribe with
server-sent events (``/events``) and re-fetch their live regions.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

import anyio

from .cache import StoreVersion, tag

log = logging.getLogger("arena.serve")


class StoreFollower:
    """The process's one watcher of the store: looks at its version every ``interval`` seconds
    (one ``PRAGMA data_version``, :class:`~arena.serve.cache.StoreVersion`); ``serial`` counts the
    changes seen, and every open stream waits on the same event."""

    def __init__(self, version: StoreVersion, interval: float = 0.5):
        self.store = version
        self.interval = interval
        self.version: tuple = ()
        self._parts: dict[str, tuple] = {}
        self.serial = 0
        self.event = ""  # the store event of this version, written once for every open stream
        self._changed = anyio.Event()

    def _read(self) -> tuple:
        return self.store.current() or self.version

    async def run(self) -> None:
        while True:
            version = self._read()
            parts = self.store.parts
            if (version, parts) != (self.version, self._parts):  # a status or pause moves a ladder's alone
                self.version, self._parts = version, parts
                self.serial += 1
                news = {"serial": self.serial, "games": version[0] if version else 0, "version": tag(version),
                        "parts": self.store.tags()}  # each ladder's own version: its pages skip the rest
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
