"""Fair under load: each client's writes and expensive reads are counted before they are served.

A request must arrive whole within a deadline (:func:`read_deadline`), so a client that sends a
byte a second cannot keep a connection, and what it holds, forever.

For writes a client is its address as the connection shows it (behind a proxy, every visitor is
the proxy: run the arena without one, or give it its own limits), or a logged-in person or a
valid API token is its account instead (``identify``), so a class behind one address shares
nothing. A page the server already keeps for its version costs nothing and is never counted;
building one is, per connection and per address (:class:`BuildLimit`,
:class:`arena.serve.cache.HttpCache`), and so is every request that is not a GET or HEAD.
"""

from __future__ import annotations

import time
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ..errors import ArenaError


@dataclass(frozen=True)
class Rate:
    """``per_s`` requests a second on average, ``burst`` at once."""

    per_s: float
    burst: float


WRITES = Rate(per_s=1.0, burst=10)
BUILDS = Rate(per_s=20.0, burst=60)  # page builds, per connection
BUILDS_PER_ADDRESS = Rate(per_s=200.0, burst=600)  # ... and per address, however many connections it opens


class Buckets:
    """A token bucket per client; the least recently seen clients are forgotten past ``clients``."""

    def __init__(self, rate: Rate, clock: Callable[[], float] = time.monotonic, clients: int = 10_000):
        self.rate = rate
        self.clock = clock
        self.clients = clients
        self.tokens: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def take(self, client: str) -> float:
        """0 when ``client`` may go on (one token taken), else the seconds until it may."""
        now = self.clock()
        tokens, then = self.tokens.pop(client, (self.rate.burst, now))
        tokens = min(self.rate.burst, tokens + (now - then) * self.rate.per_s)
        wait = 0.0
        if tokens >= 1:
            tokens -= 1
        else:
            wait = (1 - tokens) / self.rate.per_s
        self.tokens[client] = (tokens, now)
        while len(self.tokens) > self.clients:
            self.tokens.popitem(last=False)
        return wait


class BuildLimit:
    """Page builds counted per client, a client being one connection (a browser's tab, one of a
    load generator's clients: many share one address), and per address with a bound ten times as
    high, so an address cannot buy builds without end by opening connections."""

    def __init__(self, per_client: Rate = BUILDS, per_address: Rate = BUILDS_PER_ADDRESS,
                 clock: Callable[[], float] = time.monotonic):
        self.clients = Buckets(per_client, clock)
        self.addresses = Buckets(per_address, clock)

    def take(self, scope: dict) -> float:
        """0 when the request may build a page (counted), else the seconds until it may."""
        client = scope.get("client")
        return self.clients.take(f"{client[0]} {client[1]}" if client else "-") or self.addresses.take(client_of(scope))


def client_of(scope: dict) -> str:
    client = scope.get("client")
    return client[0] if client else "-"


async def too_many(send: Callable, wait: float) -> None:
    """``429 Too Many Requests``, with when to come back."""
    body = b"Too many requests: wait a moment and try again."
    await send({"type": "http.response.start", "status": 429, "headers": [
        (b"content-type", b"text/plain; charset=utf-8"), (b"retry-after", str(max(1, round(wait))).encode()),
        (b"cache-control", b"no-store"), (b"x-content-type-options", b"nosniff"),
        (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


class WriteLimit:
    """Every request other than GET and HEAD takes a token from its client's write bucket first,
    but a move in a game being played (``/play/<id>/act``): the game bounds those itself (one
    answer per request of the referee)."""

    def __init__(self, app: Any, buckets: Buckets,
                 identify: Callable[[dict], Awaitable[str | None]] | None = None):
        self.app = app
        self.buckets = buckets
        self.identify = identify  # the person making the request (verified), or None: then the address

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        path = scope.get("path", "")
        move = path.startswith("/play/") and path.endswith("/act") and path.count("/") == 3
        if scope["type"] == "http" and scope["method"] not in ("GET", "HEAD") and not move:
            person = await self.identify(scope) if self.identify is not None else None
            wait = self.buckets.take(person or client_of(scope))
            if wait:
                await too_many(send, wait)
                return
        await self.app(scope, receive, send)


PER_ADDRESS = 64  # connections one address holds open at once: a browser opens six, and one event stream a tab
SERVER_SHARE = 0.5  # of the process's descriptors, what connections may hold: the rest is the server's own
_BUSY_TEXT = b"Too many connections: try again in a moment."
BUSY = (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\nretry-after: 5\r\n"
        b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(_BUSY_TEXT), _BUSY_TEXT))


class Connections:
    """The connections open now, per client address and in all, bounded before any request is read.

    An event stream (``/events``) stays open for as long as its client likes and costs it nothing
    (14 bytes every 15 s never fill a socket's buffers): one visitor that opened 1,100 of them took
    every descriptor of a server under systemd's soft limit of 1,024; no page answered anyone, the
    server's own work had no descriptor either, and the accept loop logged an error ten times a
    second. A connection past ``per_address`` for its address, or past ``share`` of the process's
    descriptors (read at each connection: the limit may change), is answered :data:`BUSY` and
    closed at once; the rest of the descriptors stay the server's (its store, its bots' pipes)."""

    def __init__(self, per_address: int = PER_ADDRESS, share: float = SERVER_SHARE):
        self.per_address = per_address
        self.share = share
        self.open: Counter[str] = Counter()
        self.total = 0

    def bound(self) -> int:
        """How many connections the process may hold open in all."""
        import resource
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        return 1 << 30 if soft == resource.RLIM_INFINITY else max(16, int(soft * self.share))

    def admit(self, address: str) -> bool:
        """Count a new connection from ``address``; False (not counted) when it is one too many."""
        if self.open[address] >= self.per_address or self.total >= self.bound():
            return False
        self.open[address] += 1
        self.total += 1
        return True

    def release(self, address: str) -> None:
        self.total -= 1
        self.open[address] -= 1
        if not self.open[address]:
            del self.open[address]


def peer_address(sock: Any) -> str | None:
    """The client's address of a connected socket, or None when it is gone already."""
    try:
        peer = sock.getpeername()
    except OSError:
        return None
    return str(peer[0]) if isinstance(peer, tuple) and peer else None


MAX_HEAD_BYTES = 64 * 1024  # a request line and headers; a browser's are a few kB


def read_deadline(seconds: float, connections: Connections | None = None) -> type:
    """uvicorn's HTTP protocol (httptools) with a deadline on reading each request, its headers
    and body together: from the connection's opening for its first request, from a request's first
    byte for the next ones (idle keep-alive connections are uvicorn's own ``timeout_keep_alive``).
    A request not read whole by then has its connection closed, and so is one whose request line
    and headers pass ``MAX_HEAD_BYTES`` (httptools sets no bound of its own). This deadline and the
    keep-alive one count again when they find the client's bytes waiting unread: after the loop
    had stopped past them, uvloop ran the timer before reading the request, and dropped it.
    A connection past ``connections``' bounds is answered 503 and closed before it is read."""
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    counted = connections if connections is not None else Connections()

    class Protocol(HttpToolsProtocol):
        _deadline: Any = None
        _in_head = True   # reading a request line and headers, which uvicorn keeps whole in memory
        _head_bytes = 0
        _address: str | None = None  # the client's, while its connection is counted

        def connection_made(self, transport: Any) -> None:  # type: ignore[override]
            super().connection_made(transport)
            peer = transport.get_extra_info("peername")
            address = str(peer[0]) if isinstance(peer, tuple) and peer else None
            if address is None or not counted.admit(address):
                transport.write(BUSY)
                transport.close()
                return
            self._address = address
            self._arm()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self._in_head:
                self._head_bytes += len(data)
                if self._head_bytes > MAX_HEAD_BYTES:
                    self.transport.close()

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._arm()

        def on_headers_complete(self) -> None:
            self._in_head, self._head_bytes = False, 0
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            super().on_message_complete()
            self._in_head = True
            self._disarm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            if self._address is not None:
                counted.release(self._address)
                self._address = None
            super().connection_lost(exc)

        def _arm(self) -> None:
            if self._deadline is None:
                self._deadline = self.loop.call_later(seconds, self._expired)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _expired(self) -> None:
            self._deadline = None
            if self._unread():  # it came while the loop was not running (uvloop runs timers before reading)
                self._arm()
                return
            self.transport.close()

        def timeout_keep_alive_handler(self) -> None:
            if self._unread():  # the same for an idle connection's next request
                self.timeout_keep_alive_task = self.loop.call_later(self.timeout_keep_alive,
                                                                    self.timeout_keep_alive_handler)
                return
            super().timeout_keep_alive_handler()

        def _unread(self) -> bool:
            sock = self.transport.get_extra_info("socket") if self.transport is not None else None
            return sock is not None and sock.fileno() >= 0 and unread_bytes(sock.fileno()) > 0

    return Protocol


IDLE_S = 5.0  # a connection with no request on it, or slow to send a request's headers, is closed
UNREAD = "arena.unread"  # in a request's ASGI state: (bytes waiting unread on its connection, bytes read so far)


def unread_bytes(fd: int) -> int:
    """How many bytes wait in socket ``fd``'s receive queue, sent by the client but not yet read."""
    import fcntl
    import struct
    import termios
    try:
        return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]
    except OSError:  # closed meanwhile
        return 0


def stall_proof_server(connections: Connections | None = None) -> type:
    """hypercorn's trio connection, whose idle deadline judges the client and not the server's stalls.

    hypercorn's idle deadline (``keep_alive_timeout``) runs from a connection's accept, or from its
    last answer, until a request's headers are read, so it is also the guard against slow headers.
    It was a task of its own: when the server's loop had not run for longer than that (a loaded
    machine), the deadline and a request that arrived meanwhile came due in the same tick, and the
    deadline could close the connection with the request unread, or read and not yet parsed:
    dropped, no answer. Here the reader keeps the deadline: a wait for bytes that runs past it
    has read nothing (trio's cancellation), and if the client's bytes are waiting all the same,
    the deadline counts again from then and they are read; a client whose headers are still not
    whole a deadline later is closed, like any slow one (bytes never wait unread long on a running
    loop, so a slow client gains nothing). The reader takes each chunk in one step with no pause
    between the read and its count, so :class:`BodyDeadline` can tell (``UNREAD``) whether its
    connection took in bytes it has not been given yet. A connection past ``connections``' bounds
    is answered 503 and closed before it is read."""
    import os
    from contextlib import suppress
    from math import inf

    import trio
    from hypercorn.events import Closed, RawData, Updated
    from hypercorn.trio.tcp_server import MAX_RECV, TCPServer
    counted = connections if connections is not None else Connections()

    class StallProofServer(TCPServer):
        def __init__(self, app: Any, config: Any, context: Any, state: Any, stream: Any) -> None:
            super().__init__(app, config, context, state, stream)
            self.state = {**state, UNREAD: self._unread}  # this connection's own (hypercorn shares one)
            self.received = 0
            self.deadline = trio.current_time() + config.keep_alive_timeout
            self.waiting = trio.CancelScope()

        async def run(self) -> None:
            address = peer_address(self.stream.socket)
            if address is None or not counted.admit(address):
                with trio.move_on_after(1), suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    await self.stream.send_all(BUSY)
                with trio.CancelScope(shield=True):
                    await self.stream.aclose()
                return
            try:
                await super().run()
            finally:
                counted.release(address)

        def _unread(self) -> tuple[int, int]:
            fd = self.stream.socket.fileno()  # plain TCP (the arena serves no TLS); -1 once closed
            return (unread_bytes(fd) if fd >= 0 else 0), self.received

        async def protocol_send(self, event: Any) -> None:
            if isinstance(event, Updated):  # idle: a request's headers are due within the deadline
                self.deadline = trio.current_time() + self.config.keep_alive_timeout if event.idle else inf
                self.waiting.deadline = self.deadline
            await super().protocol_send(event)

        async def _read_data(self) -> None:
            while (fd := self.stream.socket.fileno()) >= 0:  # -1 once closed (its number may be another's)
                self.waiting = trio.CancelScope(deadline=self.deadline)
                try:
                    with self.waiting:
                        await trio.lowlevel.wait_readable(fd)
                except trio.ClosedResourceError:  # closed meanwhile (at shutdown)
                    break
                if self.waiting.cancelled_caught:  # past the deadline, nothing read
                    if self.context.terminated.is_set() or not unread_bytes(fd):
                        break
                    self.deadline = trio.current_time() + self.config.keep_alive_timeout
                    continue
                try:
                    data = os.read(fd, MAX_RECV)  # no pause between the read and its count
                except BlockingIOError:
                    continue
                except OSError:
                    break
                self.received += len(data)
                await self.protocol.handle(RawData(data))
                if not data:
                    break
            await self.protocol.handle(Closed())
            await self.idle_task.stop()  # nothing more is read: the connection ends with its request

        async def _idle_timeout(self) -> None:  # the reader keeps the deadline; this closes at shutdown
            await self.context.terminated.wait()
            with trio.CancelScope(shield=True):
                await self._initiate_server_close()

    return StallProofServer


class LateBody(ArenaError):
    """A request's body did not arrive whole within its deadline (answered 408 by :class:`BodyDeadline`)."""


LATE = b"Request timeout: the request did not arrive whole in time; nothing was done. Try again."


class BodyDeadline:
    """Every request but a GET or HEAD sends its body whole within ``seconds`` of its headers, or it
    is answered ``408`` and its connection closed: a client sending a form a byte a second held its
    connection, and the request's task, for as long as it liked. Handlers read a body whole before
    they act on it, so a late one leaves nothing done; one that wants its own answer catches
    :class:`LateBody` (an upload does). A deadline that finds the client's bytes waiting unread, or
    read by the connection since the request last waited and not given to it yet (``UNREAD``: the
    server's loop had stopped), counts again from then, as the idle deadline does; so does one that
    had passed before the request asked for more (the server was slow there, not the client)."""

    def __init__(self, app: Any, seconds: float):
        self.app = app
        self.seconds = seconds

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD"):
            await self.app(scope, receive, send)
            return
        import anyio
        from starlette.requests import ClientDisconnect
        deadline = anyio.current_time() + self.seconds
        unread = (scope.get("state") or {}).get(UNREAD)
        whole = answered = False

        async def in_time() -> dict:
            nonlocal deadline, whole
            while not whole:
                seen = unread()[1] if unread else 0
                left = deadline - anyio.current_time()  # none: the request itself was slow to ask, not the client
                with anyio.move_on_after(left):
                    message = await receive()
                    whole = message["type"] != "http.request" or not message.get("more_body", False)
                    return message
                waiting, received = unread() if unread else (0, 0)
                if left > 0 and not waiting and received == seen:  # nothing came that it has not been given
                    raise LateBody
                deadline = anyio.current_time() + min(self.seconds, IDLE_S)  # it is read and given first
            return await receive()  # after the body: a disconnect, whenever it comes

        async def sending(message: dict) -> None:
            nonlocal answered
            answered = answered or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, in_time, sending)
        except ClientDisconnect:  # it left before its body was whole: nothing was done, and no one waits for
            return                # an answer (not the server's failure: no 500, no traceback in its log)
        except LateBody:
            if answered:
                raise
            await send({"type": "http.response.start", "status": 408, "headers": [
                (b"content-type", b"text/plain; charset=utf-8"), (b"connection", b"close"),
                (b"cache-control", b"no-store"), (b"x-content-type-options", b"nosniff"),
                (b"content-length", str(len(LATE)).encode())]})
            await send({"type": "http.response.body", "body": LATE})


class TooLarge(ArenaError):
    """A request's body past what its route takes."""


class LimitedBody:
    """The request's ``receive``, counting body bytes: past ``limit`` it raises :class:`TooLarge`."""

    def __init__(self, receive: Any, limit: int):
        self.receive, self.limit, self.seen, self.more = receive, limit, 0, True

    async def __call__(self) -> dict[str, Any]:
        message = await self.receive()
        if message["type"] == "http.request":
            self.seen += len(message.get("body", b""))
            self.more = message.get("more_body", False)
            if self.seen > self.limit:
                raise TooLarge()
        return message

    async def drain(self, cap: int = 64 * 2**20) -> None:
        """Read (and drop) the rest of an oversized body so the browser gets the answer, up to ``cap``."""
        while self.more and self.seen < cap:
            message = await self.receive()
            if message["type"] != "http.request":
                return
            self.seen += len(message.get("body", b""))
            self.more = message.get("more_body", False)
