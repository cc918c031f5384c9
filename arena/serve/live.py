"""Live updates: follow the store and tell every open page when it changed.

The games may be played by this process (Play, Submit) or by another one
(``arena tournament``, ``arena ladder run`` in another terminal); either way
they end up in the SQLite store, so one poller reading a cheap version key
(:func:`arena.serve.data.version`) covers both. Pages subscribe with
server-sent events (``/events``) and re-fetch their live regions.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import trio
from starlette.requests import Request
from starlette.responses import StreamingResponse

from . import data


class StoreFollower:
    """Polls the store's version every ``interval`` seconds; ``serial`` counts the changes seen."""

    def __init__(self, path: Path, interval: float = 0.5):
        self.path = path
        self.interval = interval
        self.version: tuple = ()
        self.serial = 0
        self._changed = trio.Event()
        self._db: data.ReadStore | None = None

    def _read(self) -> tuple:
        if self._db is None:
            self._db = data.open_read(self.path)
        try:
            return data.version(self._db)
        except sqlite3.Error:  # a store being created, or replaced: try again next time
            if self._db is not None:
                self._db.db.close()
            self._db = None
            return self.version

    async def run(self) -> None:
        while True:
            version = await trio.to_thread.run_sync(self._read)
            if version != self.version:
                self.version = version
                self.serial += 1
                changed, self._changed = self._changed, trio.Event()
                changed.set()
            await trio.sleep(self.interval)

    async def wait(self, serial: int, timeout: float) -> int:
        """The serial once it differs from ``serial``, or ``serial`` after ``timeout`` seconds."""
        if self.serial != serial:
            return self.serial
        with trio.move_on_after(timeout):
            await self._changed.wait()
        return self.serial

    def close(self) -> None:
        if self._db is not None:
            self._db.db.close()
            self._db = None


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
            games = follower.version[0] if follower.version else 0
            yield f"event: store\ndata: {json.dumps({'serial': serial, 'games': games})}\n\n"

    return StreamingResponse(stream(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})
