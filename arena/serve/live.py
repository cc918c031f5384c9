"""Live updates: follow the store and tell every open page when it changed.

The games may be played by this process (Play, Submit) or by another one
(``arena tournament``, ``arena ladder run`` in another terminal); either way
they end up in the SQLite store, so one poller reading a cheap version key
(:class:`arena.serve.cache.StoreVersion`) covers both. Pages subscribe with
server-sent events (``/events``) and re-fetch their live regions.
"""

from __future__ import annotations

import json

import anyio
from starlette.requests import Request
from starlette.responses import StreamingResponse

from .cache import StoreVersion, tag


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


async def events(request: Request) -> StreamingResponse:
    """``/events``: one ``store`` event per change of the store, a comment every 15 s to keep it open."""
    follower: StoreFollower = request.app.state.follower

    async def stream():
        serial = follower.serial
        yield f"retry: 2000\nevent: hello\ndata: {serial}\n\n"
        while True:
            new = await follower.wait(serial, 15.0)
            if new == serial:
                yield ": still here\n\n"
                continue
            serial = new
            yield follower.event

    return StreamingResponse(stream(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})
