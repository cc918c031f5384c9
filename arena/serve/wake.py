"""Wake-ups for the server's background workers (the submission queue, the webhook deliverer).

A worker with nothing to do sleeps until whoever gave it work in this process wakes it, so an
upload's check or a notice's delivery starts at once; its poll interval stays only as a safety
net for what no wake-up reaches (another process writing the store, a lease running out).
"""

from __future__ import annotations

import math

import anyio


class Wake:
    """A wake-up that can be given any number of times: :meth:`set` by the giver of work, and
    :meth:`wait` by the worker, which then sleeps until the next :meth:`set`. A ``set`` while the
    worker is busy is kept, so work given meanwhile is looked at before the worker sleeps."""

    def __init__(self) -> None:
        self._event: anyio.Event | None = None

    def _current(self) -> anyio.Event:
        if self._event is None:  # made inside the event loop, on its first use
            self._event = anyio.Event()
        return self._event

    def set(self) -> None:
        self._current().set()

    @property
    def sleeping(self) -> bool:
        """Whether the worker waits now (it has looked and found nothing to do)."""
        return self._event is not None and self._event.statistics().tasks_waiting > 0

    async def wait(self, timeout: float = math.inf) -> bool:
        """Until :meth:`set` (True) or ``timeout`` seconds (False); either way the next wait waits
        for the next ``set``."""
        event = self._current()
        with anyio.move_on_after(timeout):
            await event.wait()
        self._event = None
        return event.is_set()
