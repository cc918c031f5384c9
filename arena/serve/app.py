"""The web application: routes for the read-only pages, and the assembly of the whole app.

Pages are Jinja2 templates with autoescaping on (:mod:`.pages`), so every bot name, tournament
name or stderr line is escaped where it is printed; the only unescaped markup
is the server's own SVG (:mod:`.charts`, which escapes its text itself).
Queries run in worker threads, each on its own read-only connection.
"""

from __future__ import annotations

import logging
import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from . import admin, auth, bench, data, notify, play, privacy, submit, views
from .cache import Assets, HttpCache, StoreVersion, warm
from .limits import WRITES, BodyDeadline, Buckets, BuildLimit, Rate, WriteLimit
from .live import StoreFollower, events
from .pages import message, render, templates

HERE = Path(__file__).resolve().parent
log = logging.getLogger("arena.serve")

CSP = ("default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; script-src 'self'; "
       "connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")


@dataclass
class Options:
    """How ``arena serve`` was started."""

    store: Path
    ladders_dir: Path | None = None
    allow_play: bool = False
    allow_submit: bool = False
    token: str = ""
    loopback_only: bool = True  # bound to 127.0.0.1: refuse other Host headers (DNS rebinding)
    max_upload_bytes: int = 2 * 2**20
    max_upload_files: int = 200
    max_unpacked_bytes: int = 20 * 2**20
    max_queued_per_submitter: int = 2  # submissions not yet finished, per person (or per token)
    max_queued: int = 64               # ... and in all (a class of 30 submitting at once: about 60)
    uploads_at_once: int = 4           # uploads received and unpacked at once (each holds its body)
    max_submissions_per_day: int = 20  # per person: those that passed arena check (arena/store/jobs.py)
    min_free_bytes: int = 256 * 2**20  # the disk space an upload must leave free beside its unpacked size
    read_timeout_s: float = 30.0       # a request read whole (read-only servers), an upload's body (writable)
    poll_s: float = 0.5
    settle_s: float = 1.0  # the pages' version moves at most this often (cache.StoreVersion)
    writes_per_s: float = WRITES.per_s  # per person (or per address when anonymous), with WRITES' burst
    local_webhooks: bool = False       # webhooks may post to this machine or a private network
    webhook_timeout_s: float = 10.0    # one webhook delivery's connect and answer
    benches: dict[str, str] = field(default_factory=dict)  # --bench: a bench's name -> its file (serve.bench)
    queue_look_s: float = 5.0  # an idle queue's look at the store without a wake-up (submit.run_queue)
    password_cost: str = "production"  # auth.PasswordCost: "cheapest" for test servers only

    @property
    def writable(self) -> bool:
        return self.allow_play or self.allow_submit


def new_token() -> str:
    return secrets.token_urlsafe(18)


class PageCache:
    """Page models, one per page, each with the version of what it shows (:meth:`StoreVersion.of`):
    a fit or a log scan runs once per change of what the page shows. A page's model of an older
    version is replaced, not kept beside it: kept per (page, version), the overview's model of each
    of a ladder's stored games (one a second) pushed every other page's out within a minute."""

    def __init__(self, size: int = 256):
        self.size = size
        self.items: OrderedDict[tuple, tuple[Any, Any]] = OrderedDict()  # page -> (version, model)
        self.lock = threading.Lock()

    def get(self, key: tuple, version: Any, make: Callable[[], Any]) -> Any:
        with self.lock:
            kept = self.items.get(key)
            if kept is not None and kept[0] == version:
                self.items.move_to_end(key)
                return kept[1]
        value = make()
        with self.lock:
            self.items[key] = (version, value)
            self.items.move_to_end(key)
            while len(self.items) > self.size:
                self.items.popitem(last=False)
        return value


async def query(request: Request, fn: Callable[[data.ReadStore], Any], cache_key: tuple | None = None) -> Any:
    """Run ``fn`` on a fresh read-only connection in a worker thread; None when there is no store yet."""
    opts: Options = request.app.state.options
    cache: PageCache = request.app.state.cache

    store: StoreVersion = request.app.state.version
    version = None
    if store.current() is not None:
        version = store.of(request.scope["path"], request.scope.get("query_string", b""))

    def work() -> Any:
        db = data.open_read(opts.store)
        if db is None:
            return None
        try:
            if cache_key is None or version is None:
                return fn(db)
            return cache.get(cache_key, version, lambda: fn(db))
        finally:
            db.db.close()

    threads = getattr(request.app.state, "query_threads", None)
    if threads is None:  # made on the event loop's first query (a limiter belongs to its loop)
        threads = request.app.state.query_threads = anyio.CapacityLimiter(QUERY_THREADS)
    return await anyio.to_thread.run_sync(work, limiter=threads)


# Page models built at once in a process. Python runs one thread at a time, so after a change of
# the store the 30-odd pages people have open, built together in 40 threads, all finish late;
# built two at a time, the first asked (the standings a live page fetches) are done first.
QUERY_THREADS = 2


def no_store(request: Request) -> Response:
    return render(request, "message.html", 200, title="No games yet",
                  text=f"There is no store at {request.app.state.options.store} yet. Start a tournament or a "
                       "ladder with this store (--store), and this page fills in as games are played.")


# --------------------------------------------------------------------------- read-only pages

async def home(request: Request) -> Response:
    page_no = max(1, data.int_or_none(request.query_params.get("page")) or 1)
    page = await query(request, lambda db: views.home(db, page_no), ("home", page_no))
    if page is None:
        return no_store(request)
    return render(request, "home.html", page=page, title="Overview")


async def ladder(request: Request) -> Response:
    name = request.path_params["name"]
    page = await query(request, lambda db: views.ladder_page(db, name, request.app.state.options.ladders_dir)
                       if name in data.ladder_names(db) else None, ("ladder", name))
    if page is None:
        return message(request, "No such ladder", f"The store has no ladder {name!r}.", 404)
    return render(request, "ladder.html", page=page, title=f"Ladder {name}")


def _season_or_none(db: data.ReadStore, name: str, number: int) -> Any:
    """Season ``number`` of ladder ``name`` in the store, or None (no such ladder or season)."""
    from ..ladder import LadderError
    from ..ladder.seasons import season
    if name not in data.ladder_names(db) or number > data.QUERY_INT_MAX:  # SQLite raises past 64 bits: a 500
        return None
    try:
        return season(db, name, number)
    except LadderError:
        return None


async def season_page(request: Request) -> Response:
    """One season of a ladder: its table (archived once ended), the published hash, and once it
    has ended the revealed secret. Never the secret of an open season."""
    name, number = request.path_params["name"], request.path_params["number"]

    def build(db: data.ReadStore) -> Any:
        from ..ladder.seasons import seasons, standings_of
        s = _season_or_none(db, name, number)
        if s is None:
            return None
        ladder = views._ladder(db, name, request.app.state.options.ladders_dir)
        return {"s": s, "ladder": name, "rows": standings_of(db, ladder, s),
                "others": [x.number for x in seasons(db, name)], "secret": None if s.secret is None else s.secret.hex()}

    page = await query(request, build, ("season", name, number))
    if page is None:
        return message(request, "No such season", f"The store has no season {number} of a ladder {name!r}.", 404)
    return render(request, "season.html", title=f"Ladder {name}: season {number}", **page)


SEASON_FILES = {"commitment.txt": "text/plain; charset=utf-8", "secret.txt": "text/plain; charset=utf-8",
                "games.jsonl": "application/x-ndjson"}


async def season_file(request: Request) -> Response:
    """What a stranger needs to verify a season with ``python -m arena.replay.verify`` and nothing
    else (docs/SEASONS.md): the hash published at its start, and once it has ended the secret and
    its games (logs without any bot's private lines: :func:`arena.ladder.seasons.public_log`)."""
    name, number, file = request.path_params["name"], request.path_params["number"], request.path_params["file"]
    if file not in SEASON_FILES:
        return message(request, "No such file", f"A season publishes {', '.join(SEASON_FILES)}.", 404)

    def build(db: data.ReadStore) -> Any:
        import json
        from ..ladder.seasons import published_games, reveal
        s = _season_or_none(db, name, number)
        if s is None:
            return None
        if file == "commitment.txt":
            return s.commitment + "\n"
        if s.open:
            return ""
        if file == "secret.txt":
            return reveal(s)["secret"] + "\n"
        ladder = views._ladder(db, name, request.app.state.options.ladders_dir)
        if not ladder.bots:  # neither its file nor the store's copy: its seats and seed would be guessed
            return False
        return "".join(json.dumps(item, separators=(",", ":")) + "\n" for item in published_games(db, ladder, s))

    body = await query(request, build, ("season-file", name, number, file))
    if body is None:
        return message(request, "No such season", f"The store has no season {number} of a ladder {name!r}.", 404)
    if body == "":
        return message(request, "Not yet", f"Season {number} is open: its {file} is published when it ends.", 404)
    if body is False:
        return message(request, "Not available", f"This server cannot read ladder {name!r}'s file, whose seats and "
                       "seed the games are checked by: start it with --ladders where the file is.", 503)
    return Response(body, media_type=SEASON_FILES[file])


async def balance_page(request: Request) -> Response:
    """A ladder's balance audit (as `arena ladder NAME --balance`): games, seats and co-seatings per
    active member, with their spread."""
    name = request.path_params["name"]

    def build(db: data.ReadStore) -> Any:
        from ..ladder.balance import last_joined, ladder_balance, ladder_stated
        if name not in data.ladder_names(db):
            return None
        lad = views._ladder(db, name, request.app.state.options.ladders_dir)
        b = ladder_balance(db, lad)
        return {"ladder": name, "b": b, "seats": len(b.rows[0].seats) if b.rows else 0,
                "stated": ladder_stated(db, lad), "joined": last_joined(db, lad)}

    page = await query(request, build, ("balance", name))
    if page is None:
        return message(request, "No such ladder", f"The store has no ladder {name!r}.", 404)
    return render(request, "balance.html", title=f"Ladder {name}: balance", **page)


async def tournament(request: Request) -> Response:
    tid = request.path_params["tid"]

    def build(db: data.ReadStore) -> Any:
        t = data.tournament(db, tid)
        if t is None:
            return None
        recent, _ = data.search_games(db, tournament=tid, limit=10)
        return {"t": t, "rows": views.tournament_rows(db, tid), "recent": recent}

    page = await query(request, build, ("tournament", tid))
    if page is None:
        return message(request, "No such tournament", f"The store has no tournament {tid!r}.", 404)
    return render(request, "tournament.html", title=f"Tournament {tid}", **page)


async def bracket(request: Request) -> Response:
    """A staged tournament's rounds (a Swiss) or bracket (a knockout, heats), as the report draws them."""
    tid = request.path_params["tid"]

    def build(db: data.ReadStore) -> Any:
        from ..replay.html import stages_html
        from ..store.reads import authors
        from ..tournament.formats import event_view, stored_config, stored_results, winner
        t = db.tournament(tid)
        stored = stored_results(db, tid) if t else {}
        stages = event_view(t["config"], stored) if t else None
        if not stages:
            return None
        fmt = t["config"]["format"]  # type: ignore[index]
        return {"tid": tid, "fmt": fmt, "markup": stages_html(
            fmt, stages, winner(stored_config(t["config"]), stages),
            authors=authors(db.db, list(t["config"].get("order", []))), stored=stored)}

    page = await query(request, build, ("bracket", tid))
    if page is None:
        return message(request, "No stages", f"The store has no Swiss, knockout or heats named {tid!r}.", 404)
    return render(request, "bracket.html", title=f"Tournament {tid}: {'rounds' if page['fmt'] == 'swiss' else 'bracket'}",
                  **page)


async def bot(request: Request) -> Response:
    label = request.path_params["label"]
    page = await query(request, lambda db: views.bot_page(db, label), ("bot", label))
    if page is None:
        return message(request, "No such bot", f"No games or registration for {label!r} in this store.", 404)
    page = privacy.bot_page_for(page, label in await privacy.readable_bots(request, [label]))
    return render(request, "bot.html", page=page, title=f"Bot {label}")


PAGE_SIZE = 100


async def games(request: Request) -> Response:
    wanted, page_no = data.list_query(request.query_params)

    def build(db: data.ReadStore) -> Any:
        rows, total = data.search_games(db, **wanted, limit=PAGE_SIZE, offset=(page_no - 1) * PAGE_SIZE)
        return {"rows": rows, "total": total, "choices": request.app.state.version.choices(db)}

    page = await query(request, build)
    if page is None:
        return no_store(request)
    pages = max(1, -(-page["total"] // PAGE_SIZE))
    args = {k: v for k, v in wanted.items() if v not in ("", None)}
    filters = {k: wanted[k] for k in data.LIST_FILTERS}
    turns = {k: wanted[k] for k in ("min_turns", "max_turns")}
    return render(request, "games.html", title="Games", filters=filters, turns=turns, page_no=page_no,
                  pages=pages, args=args, places=data.places, **page)


async def game(request: Request) -> Response:
    gid = request.path_params["gid"]

    def build(db: data.ReadStore) -> Any:
        from ..replay.simulate import ReplayError, simulate
        from ..replay.view import replay_data
        row = data.game_row(db, gid)
        if row is None:
            return None

        def replay() -> Any:
            record = db.game_record(gid)
            if record is None:
                return None
            try:
                out = replay_data(simulate(record))
            except ReplayError as e:
                return {"row": row, "error": str(e)}
            out["seed"] = str(out.get("seed"))  # 64-bit seeds lose digits as JavaScript numbers
            return {"row": row, "replay": out}

        return data.replay_once(db, row, replay)

    page = await query(request, build, ("game", gid))
    if page is None:
        return message(request, "No such game", f"The store has no game {gid!r}.", 404)
    view = data.int_or_none(request.query_params.get("as"))
    if "replay" in page:
        seats = list(page["row"]["seats"])
        page = dict(page, replay=privacy.replay_for(page["replay"], seats, await privacy.readable_bots(request, seats)))
        page = dict(page, replay=dict(page["replay"], view=view if view is not None and
                                      0 <= view < len(page["replay"]["players"]) else None))
    return render(request, "game.html", title=f"Game {gid}", **page)


async def health(request: Request) -> Response:
    """``/health``: this process answers, and whether the store is there (its version's tag)."""
    from starlette.responses import JSONResponse

    from .cache import tag
    version = request.app.state.version.current()
    return JSONResponse({"status": "ok", "store": "absent" if version is None else tag(version)},
                        headers={"Cache-Control": "no-store"})


# --------------------------------------------------------------------------- assembly

async def not_found(request: Request, exc: Exception) -> Response:
    status = getattr(exc, "status_code", 404)
    return message(request, "Not found" if status == 404 else "Not allowed",
                   getattr(exc, "detail", "") or "There is nothing at this address.", status)


async def server_error(request: Request, exc: Exception) -> Response:
    log.exception("error serving %s", request.url.path, exc_info=exc)
    return message(request, "Something went wrong", "The server could not build this page; its log says why.", 500)


class Headers:
    """Security headers on every response, and the token cookie set from ``?token=``."""

    def __init__(self, app: Any, options: Options):
        self.app = app
        self.options = options

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        token = Request(scope).query_params.get("token", "")
        set_cookie = bool(self.options.token and token and secrets.compare_digest(token, self.options.token))

        async def wrapped(message: dict) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [(b"content-security-policy", CSP.encode()), (b"x-content-type-options", b"nosniff"),
                            (b"referrer-policy", b"same-origin"), (b"x-frame-options", b"DENY")]
                if set_cookie:
                    headers.append((b"set-cookie", f"arena_token={token}; HttpOnly; SameSite=Strict; Path=/".encode()))
                message = dict(message, headers=headers)
            await send(message)

        await self.app(scope, receive, wrapped)


def build_app(options: Options, nursery: Any) -> Starlette:
    """The app; background work (following the store, games in play, submissions) runs in ``nursery``
    (an anyio task group, or a trio nursery: games in play and submissions need trio)."""
    from ..replay import html as replay_html
    version = StoreVersion(options.store, settle=options.settle_s)
    assets = Assets(HERE / "static", {"replay.js": replay_html.JS, "replay.css": replay_html.CSS})
    templates.env.globals["asset"] = assets.url
    routes = [
        Route("/", home),
        Route("/ladders/{name}", ladder),
        Route("/ladders/{name}/seasons/{number:int}", season_page),
        Route("/ladders/{name}/seasons/{number:int}/{file}", season_file),
        Route("/ladders/{name}/balance", balance_page),
        Route("/tournaments/{tid:path}", tournament),
        Route("/brackets/{tid:path}", bracket),
        Route("/benches/{name}", bench.bench_page),
        Route("/benches/{name}/games/{gid:path}", bench.bench_game),
        Route("/bots/{label:path}", bot),
        Route("/games", games),
        Route("/games/{gid:path}", game),
        Route("/events", events, methods=["GET"]),
        Route("/health", health),
        *play.routes(),
        *submit.routes(),
        *auth.routes(),
        *notify.routes(),
        *admin.routes(),
        Route("/static/{name}", assets.route),
    ]
    # Outermost first. The page cache sits outside the session: a response that sets a cookie is
    # never kept, and kept pages are keyed by the request's cookies, so a person's page stays theirs.
    # It also sits outside the security headers, so a kept page is answered with the headers it was
    # built with and no other layer's work (the host check stays in front of it). The body deadline
    # comes first of all, so that it runs from the request's headers, whatever the layers do next.
    key = auth.session_key(options.store)
    identify = auth.write_identity(options.store, key)
    middleware = [Middleware(BodyDeadline, seconds=options.read_timeout_s),
                  Middleware(HttpCache, version=version, builds=BuildLimit()),
                  Middleware(Headers, options=options),
                  Middleware(WriteLimit, buckets=Buckets(Rate(options.writes_per_s, WRITES.burst)),
                             identify=identify),
                  Middleware(SessionMiddleware, secret_key=key,
                             session_cookie=auth.SESSION_COOKIE, max_age=auth.SESSION_DAYS * 86400,
                             same_site="strict")]
    if options.loopback_only:
        middleware.insert(0, Middleware(TrustedHostMiddleware, allowed_hosts=["127.0.0.1", "localhost", "[::1]", "::1"]))
    app = Starlette(routes=routes, middleware=middleware,
                    exception_handlers={HTTPException: not_found, 404: not_found, 500: server_error})
    app.state.options = options
    app.state.identify = identify  # who makes a request, from its headers: the write limit's and uploads' sender
    app.state.cache = PageCache()
    app.state.version = version
    app.state.nursery = nursery
    app.state.follower = StoreFollower(version, options.poll_s)
    nursery.start_soon(app.state.follower.run)
    nursery.start_soon(warm, app, options.store)
    play.setup(app)
    submit.setup(app)
    auth.setup(app)
    notify.setup(app)
    return app

