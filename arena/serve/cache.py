"""Responses that cost nothing when nothing changed: the store's version, whole pages kept per
version, ETags with ``304 Not Modified``, gzip, and static files under content-hashed names.

The store's version is known with one query: ``PRAGMA data_version`` on a connection this
process keeps open changes whenever another connection commits (every writer is another
connection), and only then are the counts that make the version read again
(:func:`arena.serve.data.version`). The version is the same in every server process on one
store, so the ETags of several reader processes agree.
"""

from __future__ import annotations

import gzip
import hashlib
import logging
import mimetypes
import re
import sqlite3
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import Response

from ..errors import ArenaError
from ..store import reads
from . import data
from .limits import BuildLimit, too_many

log = logging.getLogger("arena.serve")

# Read-only pages built from the store alone (and the server's fixed options): kept per version.
PAGE_PREFIXES = ("/ladders/", "/tournaments/", "/bots/", "/games")
COMPRESSIBLE = re.compile(rb"^(text/|application/(json|javascript)|image/svg)")
IMMUTABLE = "public, max-age=31536000, immutable"
STAMPED = ("game", "games", "bot")  # pages kept by a stamp of their own (StoreVersion.of)
STAMPS_KEPT = 4096  # per-page stamps (:meth:`StoreVersion.of`) read since the version last moved
STATIC_KEPT = 64  # static answers kept (only files that exist answer 200, so this is every one)
WARM = "arena.warm"  # a scope key no client can set: a page built at the process's start (:func:`warm`)
WARM_BOTS = 64  # members' pages built at start, at most


class StoreVersion:
    """The store's version, checked with ``PRAGMA data_version`` on one kept connection.

    The version the pages are kept by moves at most once every ``settle`` seconds: a ladder that
    stores a game a second would otherwise have every page (the standings' fit among them) built
    again for each game. The first change after a quiet spell is taken at once, and one that
    arrives within ``settle`` of the last is taken ``settle`` after it, on the next look, so a page
    shows a stored game at most ``settle`` plus a look of the watcher (``poll``) late.

    Used from the event loop's thread only (the check reads SQLite's shared memory, no table)."""

    def __init__(self, path: Path, settle: float = 1.0, clock: Callable[[], float] = time.monotonic):
        self.path = path
        self.settle = settle
        self.clock = clock
        self._db: data.ReadStore | None = None
        self._seen: int | None = None
        self._looked: int | None = None  # the data version :meth:`look` last read
        self._latest: tuple | None = None  # (store version, ladder parts) as last read
        self._moved = -float("inf")        # when ``value`` last moved
        self.value: tuple | None = None    # the version pages are kept by
        self.parts: dict[str, tuple] = {}  # ... and each ladder's own ("" the games of no ladder)
        self._stamps: dict[tuple, Any] = {}  # what :meth:`of` read for this value of the version

    def current(self) -> tuple | None:
        """The version pages are kept by now; None while there is no store. The counts are read
        only when the version could move: a change within ``settle`` of the last move waits for
        the first look after it (a ladder commits several times a second; each read is ~20 ms)."""
        try:
            if self._db is None:
                self._db = data.open_read(self.path)
                if self._db is None:
                    return None
                self._seen = self._looked = None
            seen = reads.data_version(self._db.db)
            if self._latest is None or (seen != self._seen and self.clock() - self._moved >= self.settle):
                self._latest = (data.version(self._db), reads.ladder_parts(self._db.db))
                self._seen = seen
        except sqlite3.Error:  # a store being created or replaced: look again next time
            self.close()
        if self._latest is not None and self._latest != (self.value, self.parts):
            now, first = self.clock(), self.value is None
            if first or now - self._moved >= self.settle:
                self.value, self.parts = self._latest
                self._stamps.clear()
                if not first:  # the first look is no move
                    self._moved = now
        return self.value

    def look(self, after: int | None, limit: int) -> tuple[dict[str, tuple], list[tuple]] | None:
        """The ladders' parts as committed now, not held back by ``settle``, and the newest ``limit``
        ladder games stored after row ``after`` (:func:`arena.store.reads.ladder_games_after`; none
        when ``after`` is None, a first look, which only learns where the games stand): the
        live events' news, which costs no page build, so it need not wait for the pages' version.
        None when nothing was committed since the last look (one ``PRAGMA data_version``) or there is
        no store. Call :meth:`current` first (it opens the connection)."""
        if self._db is None:
            return None
        try:
            seen = reads.data_version(self._db.db)
            if seen == self._looked:
                return None
            parts = self._latest[1] if seen == self._seen and self._latest is not None else \
                reads.ladder_parts(self._db.db)
            games = [] if after is None else reads.ladder_games_after(self._db.db, after, limit)
        except sqlite3.Error:  # a store being created or replaced: look again next time
            self.close()
            return None
        self._looked = seen
        return parts, games

    def of(self, path: str, query: bytes = b"") -> tuple | None:
        """The version of what the page at ``path`` (with ``query``) shows, so a stored game builds
        again only the pages that show it. Call :meth:`current` first.

        - a game's page: that game's row and finish (a stored game never changes);
        - the game list: how many games its filters match and the highest of them (any page of
          it moves with a new matching game only), and its menus' values;
        - a bot's page: the seats, snapshots, statuses, registrations and owner of its name
          (:func:`arena.store.reads.bot_stamp`): a game it did not play moves none of it;
        - a ladder's pages: that ladder's own version;
        - every other page (the overview): the whole store's.

        Each stamp is one indexed query, read once per move of the version."""
        if self.value is None:
            return None
        if path.startswith("/ladders/"):
            name = path[len("/ladders/"):].split("/", 1)[0]
            return ("ladder", name, self.parts.get(name))
        if path.startswith("/bots/") and "/" not in path[len("/bots/"):]:
            label = path[len("/bots/"):]
            return ("bot", label, self._stamp(("bot", label), lambda db: reads.bot_stamp(db.db, label)))
        if path.startswith("/games/") and "/" not in path[len("/games/"):]:
            gid = path[len("/games/"):]
            return ("game", gid, self._stamp(("game", gid), lambda db: reads.game_stamp(db.db, gid)))
        if path == "/games":  # kept per query string too: a kept list costs no parse of its query
            return self._stamp(("list", query), lambda db: self._list_version(query))
        return self.value

    def _list_version(self, query: bytes) -> tuple:
        wanted, _ = data.list_query(QueryParams(query))
        key = tuple(sorted(wanted.items()))
        choices = self._stamp(("choices",), data.filter_choices)
        return ("games", self._stamp(("games", key), lambda db: data.list_stamp(db, **wanted)),
                self._stamp(("choices tag",), lambda db: tag(choices)))

    def _stamp(self, key: tuple, read: Callable[[data.ReadStore], Any]) -> Any:
        """``read`` of the kept connection, once per move of the version (at most ``STAMPS_KEPT``)."""
        if key not in self._stamps:
            if self._db is None:
                return self.value
            if len(self._stamps) >= STAMPS_KEPT:
                self._stamps.clear()
            try:
                self._stamps[key] = read(self._db)
            except sqlite3.Error:
                return self.value
        return self._stamps[key]

    def choices(self, db: data.ReadStore) -> dict[str, list[str]]:
        """The game list's menus as :meth:`of` read them for this version (so the page shows what
        it is kept by), or read now from ``db`` when the version has moved since."""
        kept = self._stamps.get(("choices",))
        return kept if isinstance(kept, dict) else data.filter_choices(db)

    def tags(self) -> dict[str, str]:
        """Each ladder's version and the games of no ladder's (``""``), named short for the live events."""
        return {k: tag(v) for k, v in self.parts.items()}

    def close(self) -> None:
        if self._db is not None:
            self._db.db.close()
            self._db = None


def tag(version: tuple | None) -> str:
    """A short name for a version, for the live stream's events."""
    return hashlib.blake2b(repr(version).encode(), digest_size=6).hexdigest()


# --------------------------------------------------------------------------- warm at start

def warm_paths(db: data.ReadStore) -> list[str]:
    """The pages a room opens first: the overview, each ladder's standings, its members' pages."""
    bots = list(dict.fromkeys(label for label, _ in reads.member_refs(db.db)))[:WARM_BOTS]
    return ["/", *(f"/ladders/{name}" for name in data.ladder_names(db)), *(f"/bots/{label}" for label in bots)]


async def warm(app: Any, store: Path) -> int:
    """Build :func:`warm_paths` once each, one after another, through the whole app (so the page
    models and the kept pages are both made), as the anonymous visitor whose pages they are, not
    counted against any client's builds. Each serving process does it at its start: otherwise the
    first visitor of each page in each process pays for its build (on a store of 20 members about
    3 s of CPU a process), which a room opening the pages together all waits for. A page that
    fails is skipped (its visitor sees why). Returns how many were built."""
    def paths() -> list[str]:
        db = data.open_read(store)
        if db is None:
            return []
        try:
            return warm_paths(db)
        finally:
            db.db.close()

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def discard(message: dict) -> None:
        pass

    try:
        todo = await anyio.to_thread.run_sync(paths)
    except (sqlite3.Error, ArenaError):
        return 0
    built = 0
    for path in todo:
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
                 "scheme": "http", "path": path, "raw_path": quote(path).encode(), "root_path": "",
                 "query_string": b"", "headers": [(b"host", b"127.0.0.1")], WARM: True}
        try:
            await app(scope, receive, discard)
            built += 1
        except Exception:  # a bug in one page's build: its visitor gets the error page and the log
            log.debug("warming %s failed", path, exc_info=True)
    return built


# --------------------------------------------------------------------------- static files

class Assets:
    """The files of ``static/`` (and extra named texts), read once; each also under a name with
    its content's hash (``site.3f2a9c1b.css``), served with a year's cache lifetime."""

    def __init__(self, folder: Path, extra: dict[str, str] | None = None):
        self.files: dict[str, tuple[bytes, str]] = {}
        self.hashed: dict[str, str] = {}
        texts = {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}
        texts.update({k: v.encode() for k, v in (extra or {}).items()})
        for name, body in texts.items():
            media = mimetypes.guess_type(name)[0] or "application/octet-stream"
            if media.startswith("text/") or media.endswith("javascript"):
                media += "; charset=utf-8"
            stem, dot, ext = name.rpartition(".")
            hashed = f"{stem}.{hashlib.sha256(body).hexdigest()[:10]}.{ext}" if dot else name
            self.files[name] = (body, media)
            self.hashed[name] = hashed

        self.by_hashed = {h: n for n, h in self.hashed.items()}

    def url(self, name: str) -> str:
        """The address a page links to: the hashed name, so a changed file is a new address."""
        return "/static/" + self.hashed.get(name, name)

    async def route(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name in self.by_hashed:
            body, media = self.files[self.by_hashed[name]]
            return Response(body, media_type=media, headers={"Cache-Control": IMMUTABLE})
        if name in self.files:  # the plain name: revalidated by its ETag
            body, media = self.files[name]
            return Response(body, media_type=media, headers={"Cache-Control": "no-cache"})
        return Response("There is no such file.", status_code=404, media_type="text/plain")


# --------------------------------------------------------------------------- the middleware

class Entry:
    """One finished response: its status and headers, its body, and the body gzipped (once)."""

    __slots__ = ("status", "headers", "body", "etag", "_gz")

    def __init__(self, status: int, headers: list[tuple[bytes, bytes]], body: bytes):
        self.status = status
        self.body = body
        self.etag = b'"' + hashlib.blake2b(body, digest_size=12).hexdigest().encode() + b'"'
        skip = {b"content-length", b"etag", b"content-encoding"}
        self.headers = [(k, v) for k, v in headers if k.lower() not in skip]
        if not any(k.lower() == b"cache-control" for k, _ in self.headers):
            self.headers.append((b"cache-control", b"no-cache"))  # keep it, but ask each time (ETag)
        self.headers += [(b"etag", self.etag), (b"vary", b"Accept-Encoding")]
        self._gz: bytes | None = None

    def compressible(self) -> bool:
        media = next((v for k, v in self.headers if k.lower() == b"content-type"), b"")
        return len(self.body) >= 512 and bool(COMPRESSIBLE.match(media))

    def gz(self) -> bytes:
        if self._gz is None:
            self._gz = gzip.compress(self.body, compresslevel=6, mtime=0)
        return self._gz

    def size(self) -> int:
        return len(self.body) + len(self._gz or b"") + 200


def _header(scope: dict, name: bytes) -> bytes:
    for k, v in scope.get("headers", ()):
        if k == name:
            return v
    return b""


def _matches(if_none_match: bytes, etag: bytes) -> bool:
    given = [t.strip().removeprefix(b"W/") for t in if_none_match.split(b",")]
    return etag in given or b"*" in given


class HttpCache:
    """ETag, ``304`` and gzip on every complete GET response; the read-only pages kept whole per
    version of what they show (:meth:`StoreVersion.of`), and per cookie, so a page shown to
    someone signed in is shown to them only.

    A response that sets a cookie, or streams (the live events), passes through untouched."""

    def __init__(self, app: Any, version: StoreVersion, max_bytes: int = 64 * 2**20,
                 builds: BuildLimit | None = None):
        self.app = app
        self.version = version
        self.builds = builds  # each connection's and address's page builds, counted before they run
        self.max_bytes = max_bytes
        self.pages: OrderedDict[tuple, Entry] = OrderedDict()
        self.bytes = 0
        self.pages_version: tuple | None = None
        self.building: dict[tuple, anyio.Event] = {}
        self.static: dict[str, Entry] = {}  # /static/ answers: fixed while the process lives

    def _key(self, scope: dict) -> tuple | None:
        path = scope["path"]
        if scope["method"] != "GET" or not (path == "/" or path.startswith(PAGE_PREFIXES)):
            return None
        version = self.version.current()
        if version is None:
            return None
        query = scope.get("query_string", b"")
        if version != self.pages_version:  # the store changed: drop the pages whose part did
            # (a page kept by its own stamp is left to the byte bound: a stamp is a query)
            for old in [k for k in self.pages if k[-1][0] not in STAMPED and k[-1] != self.version.of(*k[:2])]:
                self.bytes -= self.pages.pop(old).size()
            self.pages_version = version
        return (path, query, _header(scope, b"cookie"), _header(scope, b"authorization"), self.version.of(path, query))

    def _keep(self, key: tuple, entry: Entry) -> None:
        if key[-1] != self.version.of(*key[:2]) or entry.size() > self.max_bytes // 8:
            return
        self.pages[key] = entry
        self.bytes += entry.size()
        while self.bytes > self.max_bytes:
            _, old = self.pages.popitem(last=False)
            self.bytes -= old.size()

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http" or scope["method"] != "GET":
            await self.app(scope, receive, send)
            return
        key = self._key(scope)
        if key is not None:
            while key not in self.pages and key in self.building:  # one build per page and version
                await self.building[key].wait()
            if key in self.pages:
                self.pages.move_to_end(key)
                await self._answer(scope, send, self.pages[key])
                return
            wait = self.builds.take(scope) if self.builds is not None and not scope.get(WARM) else 0.0
            if wait:
                await too_many(send, wait)
                return
            done = self.building[key] = anyio.Event()
            try:
                entry = await self._capture(scope, receive, send)
                if entry is not None and entry.status == 200:
                    self._keep(key, entry)
                    if entry.compressible():
                        entry.gz()
            finally:
                del self.building[key]
                done.set()
            if entry is not None:
                await self._answer(scope, send, entry)
            return
        static = scope["path"].startswith("/static/")
        if static and scope["path"] in self.static:
            await self._answer(scope, send, self.static[scope["path"]])
            return
        entry = await self._capture(scope, receive, send)
        if entry is not None:
            if static and entry.status == 200 and len(self.static) < STATIC_KEPT:
                self.static[scope["path"]] = entry  # its gzip made once, not on every request
            await self._answer(scope, send, entry)

    async def _capture(self, scope: dict, receive: Callable, send: Callable) -> Entry | None:
        """Run the app and collect its response; a streaming or cookie-setting one is sent on
        as it comes (and None returned)."""
        start: dict | None = None
        chunks: list[bytes] = []
        passing = False

        async def collect(message: dict) -> None:
            nonlocal start, passing
            if message["type"] == "http.response.start":
                headers = message.get("headers", [])
                media = next((v for k, v in headers if k.lower() == b"content-type"), b"")
                passing = (media.startswith(b"text/event-stream") or message["status"] != 200
                           or any(k.lower() in (b"set-cookie", b"content-encoding") for k, _ in headers))
                if passing:
                    await send(message)
                else:
                    start = message
            elif passing:
                await send(message)
            else:
                chunks.append(message.get("body", b""))

        await self.app(scope, receive, collect)
        if passing or start is None:
            return None
        return Entry(start["status"], list(start.get("headers", [])), b"".join(chunks))

    async def _answer(self, scope: dict, send: Callable, entry: Entry) -> None:
        if _matches(_header(scope, b"if-none-match"), entry.etag):
            headers = [(k, v) for k, v in entry.headers if k.lower() != b"content-type"]
            await send({"type": "http.response.start", "status": 304, "headers": headers})
            await send({"type": "http.response.body", "body": b""})
            return
        body, headers = entry.body, list(entry.headers)
        if entry.compressible() and b"gzip" in _header(scope, b"accept-encoding"):
            body = entry.gz()
            headers.append((b"content-encoding", b"gzip"))
        headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": entry.status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
