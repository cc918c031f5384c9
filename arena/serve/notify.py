"""What a person is told, on the web: their /notifications page (their own only), their webhook,
and the deliverer that posts the store's outbox (arena/store/notes.py) to it.

A delivery is a JSON POST signed with the person's secret (``X-Arena-Signature``: HMAC-SHA256 of
``X-Arena-Timestamp``, a dot and the body), made in a worker thread with a timeout, so a slow or
dead receiver never holds up a page. A failed one is retried with a doubling wait from the
persistent outbox. Redirects are not followed, and an address that resolves to this machine or a
private network is refused unless ``arena serve --local-webhooks`` (a member could otherwise make
the server post to services only it can reach); the address checked is the one connected to,
with any IPv4 address it carries (:func:`public`).
"""

from __future__ import annotations

import http.client
import ipaddress
import logging
import math
import socket
import ssl
import threading
import time
from typing import Any
from urllib.parse import urlsplit

import anyio
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..errors import ArenaError
from ..store.notes import Delivery, delivered, failed, mark_seen, notes, outbox_rows, signature, take_due, webhook
from ..store.people import PeopleError, clear_webhook, set_webhook
from . import auth
from .pages import redirect, render
from .wake import Wake

log = logging.getLogger("arena.serve")


class Refused(ArenaError, ValueError):
    """The webhook's address may not be posted to."""


NAT64 = ipaddress.ip_network("64:ff9b::/96")  # RFC 6052's well-known prefix: the IPv4 address in the last 32 bits
IPV4_COMPATIBLE = ipaddress.ip_network("::/96")


def public(address: str) -> bool:
    """Whether an address the server connects to lies on the public internet: global, and so is
    every IPv4 address an IPv6 one carries for a translator or tunnel (IPv4-mapped, IPv4-compatible,
    6to4, Teredo, NAT64's ``64:ff9b::/96``), since that is where the packets end. Python's
    ``is_global`` takes ``64:ff9b::a9fe:a9fe`` as public, and on an IPv6-only host with a NAT64
    gateway (an IPv6-only cloud's) it reaches 169.254.169.254, the metadata service."""
    ip = ipaddress.ip_address(address)
    if not ip.is_global:
        return False
    if isinstance(ip, ipaddress.IPv4Address):
        return True
    carried = [ip.ipv4_mapped, ip.sixtofour, *(ip.teredo or ())]
    if ip in NAT64 or ip in IPV4_COMPATIBLE:
        carried.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    return all(v4 is None or v4.is_global for v4 in carried)


HANGING_LOOKUPS = 16  # name lookups given up on that may still be waiting for their resolver (a thread each)
_lookups = threading.BoundedSemaphore(HANGING_LOOKUPS)


def resolve(host: str, port: int, timeout_s: float) -> list:
    """``socket.getaddrinfo`` within ``timeout_s``. The C resolver takes no deadline, and a webhook's
    name whose servers never answer held one of the posting threads for good (and with it every
    later batch of everyone's deliveries): the lookup runs in a thread of its own, and the
    delivery stops waiting for it at the deadline. A lookup given up on keeps its thread until
    the resolver answers; past ``HANGING_LOOKUPS`` of them, no more are started."""
    if not _lookups.acquire(blocking=False):
        raise TimeoutError(f"{HANGING_LOOKUPS} webhook addresses are still being looked up: {host} is tried later")
    found: list = []

    def lookup() -> None:
        try:
            found.append(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except Exception as e:  # noqa: BLE001 - raised in the delivery's thread (an OSError, or a name idna refuses)
            found.append(e)
        finally:
            _lookups.release()

    thread = threading.Thread(target=lookup, name=f"webhook lookup {host}", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if not found:
        raise TimeoutError(f"{host} did not resolve within {timeout_s:g} s")
    if isinstance(found[0], Exception):
        raise found[0]
    return found[0]


def post(delivery: Delivery, allow_local: bool, now: float, timeout_s: float = 10.0) -> int:
    """POST one delivery, all of it (the lookup of its address too) within ``timeout_s``; the
    receiver's status. Connects to the address it checked."""
    parts = urlsplit(delivery.url)
    https = parts.scheme == "https"
    port = parts.port or (443 if https else 80)
    host = parts.hostname or ""
    deadline = time.monotonic() + timeout_s
    infos = resolve(host, port, timeout_s)
    address = str(infos[0][4][0])
    if not allow_local and not public(address):
        raise Refused(f"refused: {host} is this machine or a private network ({address})")
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError(f"the receiver did not answer within {timeout_s:g} s")
    conn: http.client.HTTPConnection = (http.client.HTTPSConnection if https else http.client.HTTPConnection)(
        host, port, timeout=left)
    sock = socket.create_connection((address, port), timeout=left)
    # the whole exchange within timeout_s, not each read: a receiver that sends its answer a byte
    # every few seconds kept the one deliverer, and every other person's deliveries, for hours
    cut = _Cut(sock)
    timer = threading.Timer(max(0.0, deadline - time.monotonic()), cut)
    timer.start()
    body = delivery.body.encode()
    stamp = str(int(now))
    try:
        try:
            if https:  # (the TLS socket takes the connection's descriptor over: it is the one to shut)
                cut.sock = conn.sock = ssl.create_default_context().wrap_socket(sock, server_hostname=host)
            else:
                conn.sock = sock
            conn.request("POST", (parts.path or "/") + (f"?{parts.query}" if parts.query else ""), body=body,
                         headers={"Content-Type": "application/json", "User-Agent": "palace-arena-webhook",
                                  "X-Arena-Timestamp": stamp, "X-Arena-Signature": signature(delivery.secret, stamp,
                                                                                             body),
                                  "X-Arena-Delivery": str(delivery.id)})
            status = conn.getresponse().status
        except (OSError, http.client.HTTPException, ValueError):
            if not cut.fired:
                raise
        if cut.fired:  # (an answer cut short may read as whole: its headers end where the socket did)
            raise TimeoutError(f"the receiver did not answer within {timeout_s:g} s")
        return status
    finally:
        timer.cancel()
        conn.close()
        sock.close()


class _Cut:
    """A delivery's deadline: its socket shut when the time is up, so the read waiting on it ends."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.fired = False

    def __call__(self) -> None:
        self.fired = True
        try:  # (the plain socket's own call: a TLS socket's would drop its state under the reader)
            socket.socket.shutdown(self.sock, socket.SHUT_RDWR)
        except OSError:
            pass


POSTING_AT_ONCE = 8  # deliveries posted at once (a thread each), each to another person's receiver


async def deliver_due(app: Any) -> int:
    """Post the deliveries whose time has come, one per person (:func:`take_due`), up to
    ``POSTING_AT_ONCE`` at once: a receiver that never answers holds its own person's delivery
    for the timeout, never another's; how many were tried."""
    opts = app.state.options
    todo = await auth.db_call(opts.store, lambda db: take_due(db, time.time()))
    posting = anyio.CapacityLimiter(POSTING_AT_ONCE)

    async def one(d: Delivery) -> None:
        async with posting:
            await _deliver(app, d)

    async with anyio.create_task_group() as tasks:
        for d in todo:
            tasks.start_soon(one, d)
    return len(todo)


async def _deliver(app: Any, d: Delivery) -> None:
    """Post one delivery and write what came of it."""
    opts = app.state.options
    try:
        status = await anyio.to_thread.run_sync(post, d, opts.local_webhooks, time.time(), opts.webhook_timeout_s,
                                                abandon_on_cancel=True)
        error = "" if 200 <= status < 300 else f"the receiver answered {status}"
    except (OSError, http.client.HTTPException, Refused, ValueError) as e:
        error = str(e) or type(e).__name__
    if error:
        await auth.db_call(opts.store, lambda db: failed(db, d.id, error, time.time()))
    else:
        await auth.db_call(opts.store, lambda db: delivered(db, d.id, time.time()))


IDLE_S = 2.0  # how often an idle deliverer looks at the outbox unwoken: a notice another process stored


def told(app: Any) -> None:
    """Wake the deliverer: this process just stored a notice (its webhook delivery is due now)."""
    app.state.outbox_wake.set()


async def deliverer(app: Any, idle_s: float = IDLE_S) -> None:
    """The server's webhook deliverer. It posts what is due, then sleeps until this process stores
    a notice (:func:`told`), the store moves under another writer (:func:`store_moved`: an
    ``arena ladder run`` suspending a bot), or ``idle_s`` passes (what neither reaches: another
    process's notice that moves no page, a failed delivery's retry coming due)."""
    wake = app.state.outbox_wake
    while True:
        tried = 0
        if app.state.options.store.exists():
            try:
                tried = await deliver_due(app)
            except Exception:  # the store busy or unreadable: try again later, keep serving
                log.exception("webhook deliveries failed")
        if not tried:
            await wake.wait(idle_s)


async def store_moved(app: Any) -> None:
    """Wake the deliverer whenever the store's follower sees the store move (it looks anyway, for
    the pages): a cheap nudge from the other processes that write it."""
    follower = app.state.follower
    serial = follower.serial
    while True:
        serial = await follower.wait(serial, math.inf)
        told(app)


# --------------------------------------------------------------------------- pages

async def page(request: Request, status: int = 200, secret: str = "", error: str = "") -> Response:
    """The logged-in person's own notifications (seen once shown), their webhook and its deliveries."""
    who = await auth.require(request)

    def read(db: Any) -> Any:
        found = notes(db, who.id), webhook(db, who.id), outbox_rows(db, who.id)
        mark_seen(db, who.id)
        return found

    items, hook, deliveries = await auth.with_db(request, read)
    return render(request, "notifications.html", status, title="Notifications", who=who, items=items, hook=hook,
                  deliveries=deliveries, secret=secret, error=error, csrf=auth.csrf_token(request))


async def set_hook(request: Request) -> Response:
    who = await auth.require(request)
    form = await auth.checked_form(request)
    try:
        secret = await auth.with_db(request, lambda db: set_webhook(db, who, form.get("url", ""), now=time.time(),
                                                                    origin=auth.origin_of(request)))
    except PeopleError as e:
        return await page(request, 400, error=str(e).capitalize() + ".")
    return await page(request, 201, secret=secret)


async def clear_hook(request: Request) -> Response:
    who = await auth.require(request)
    await auth.checked_form(request)
    await auth.with_db(request, lambda db: clear_webhook(db, who, now=time.time(), origin=auth.origin_of(request)))
    return redirect("/notifications")


def routes() -> list[Route]:
    return [Route("/notifications", page, methods=["GET"]),
            Route("/notifications/webhook", set_hook, methods=["POST"]),
            Route("/notifications/webhook/clear", clear_hook, methods=["POST"])]


def setup(app: Any) -> None:
    app.state.outbox_wake = Wake()
    app.state.nursery.start_soon(deliverer, app)
    app.state.nursery.start_soon(store_moved, app)
