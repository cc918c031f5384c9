"""A local cluster's connections: Dask's TLS, closed at once to every other local user.

A ``local`` cluster's scheduler, nannies and workers listen on the loopback, where every user of
the machine can connect. The TLS key keeps them out of the cluster, but not off its files: Dask's
TLS handshake has no deadline, so a connection that sends nothing holds a file of the listener for
as long as its maker likes (another user's 1,050 idle connections left a referee at the usual
limit of 1,024 files no file to open). On the loopback the kernel knows who made the other end:
these listeners ask it (``NETLINK_SOCK_DIAG``, one lookup by address and port) and close a
connection whose other end another user owns before reading a byte of it. Every process of a
local cluster runs as the arena's own user, so none of its own connections is refused.

The listeners are a Dask comm backend of their own (:data:`SCHEME`), so a process that has not
loaded this module cannot speak to the cluster at all (it fails, never listens open): the client's
process imports it, and the workers' processes preload it (``distributed.worker.preload``).
This module imports Dask; only a local cluster imports it.
"""

from __future__ import annotations

import os
import socket
import struct
from typing import Any

from distributed.comm import registry
from distributed.comm.tcp import TLSBackend, TLSConnector, TLSListener

SCHEME = "arena-tls"

_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST = 1
_NLMSG_ERROR = 2
_NO_COOKIE = 0xFFFFFFFF
_ALL_STATES = 0xFFFFFFFF
_UID_AT = 16 + 4 + 48 + 12  # nlmsghdr, then inet_diag_msg: 4 bytes, its socket id, expires/rqueue/wqueue


def socket_owner(remote: tuple[Any, ...], local: tuple[Any, ...], family: int) -> int | None:
    """The uid that owns the TCP socket at ``remote`` whose other end is ``local`` (both as
    ``getpeername``/``getsockname`` give them, on this machine's network), or None where the
    kernel does not say (no such socket any more, no socket diagnostics here)."""
    try:
        src = socket.inet_pton(family, remote[0]).ljust(16, b"\0")
        dst = socket.inet_pton(family, local[0]).ljust(16, b"\0")
    except (OSError, ValueError, IndexError):
        return None
    sock_id = struct.pack("!HH16s16s", remote[1], local[1], src, dst) + struct.pack("=III", 0, _NO_COOKIE, _NO_COOKIE)
    request = struct.pack("=BBBBI", family, socket.IPPROTO_TCP, 0, 0, _ALL_STATES) + sock_id
    message = struct.pack("=IHHII", 16 + len(request), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST, 1, 0) + request
    try:
        with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG) as nl:
            nl.settimeout(1.0)
            nl.send(message)
            reply = nl.recv(4096)
    except OSError:
        return None
    if len(reply) < _UID_AT + 4 or struct.unpack_from("=H", reply, 4)[0] == _NLMSG_ERROR:
        return None
    return struct.unpack_from("=I", reply, _UID_AT)[0]


def peer_is_ours(sock: socket.socket) -> bool:
    """Whether the other end of ``sock`` (a loopback TCP connection) belongs to this process's user."""
    try:
        remote, local = sock.getpeername(), sock.getsockname()
    except OSError:
        return False
    return socket_owner(remote, local, sock.family) == os.geteuid()


def check_socket_owners() -> str | None:
    """Why this machine cannot tell who made a loopback connection (then a local cluster is
    refused: it would be open to every local user's idle connections), or None."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        with socket.create_connection(server.getsockname(), timeout=5):
            conn, _ = server.accept()
            with conn:
                if peer_is_ours(conn):
                    return None
    return "the kernel's socket diagnostics (NETLINK_SOCK_DIAG) do not say who owns a loopback connection here"


class OwnersListener(TLSListener):
    """Dask's TLS listener that closes, unread, a connection another user made."""

    prefix = SCHEME + "://"

    async def start(self) -> None:
        await super().start()
        # Checked as each connection is accepted, before the next: in Dask's own handler (a task
        # run later) a burst was all accepted first, 128 files at a time. Nothing ran on the event
        # loop between the listening sockets' start and this line, so no connection went unchecked.
        self.tcp_server.handle_stream = self._owners_only

    def _owners_only(self, stream: Any, address: Any) -> Any:
        if not peer_is_ours(stream.socket):
            stream.close()
            return None
        return self._handle_stream(stream, address)


class OwnersConnector(TLSConnector):
    prefix = SCHEME + "://"


class OwnersBackend(TLSBackend):
    _listener_class = OwnersListener
    _connector_class = OwnersConnector


registry.backends[SCHEME] = OwnersBackend()
