"""Submit: upload a bot to a ladder from the browser.

Off unless ``arena serve --allow-submit``; then every upload needs the token
printed at start (:mod:`.guard`). The request body is capped while it is read
(``max_upload_bytes``, whatever Content-Length says), the archive is unpacked by
:mod:`.upload`, in a process of its own (:mod:`.unpacker`), into a private folder of the closed store (:func:`private_copy_dir`) before
anything reads it, and the bot goes through the same path as ``arena submit``:
``arena check`` first (its report is shown), then the ladder's placement, only
if the check found no fault. Jobs wait in the store's queue (:mod:`arena.store.jobs`), so a
restart loses none, and run one at a time in the server's nursery.
"""

from __future__ import annotations

import logging
import re
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import trio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..bots.filesystem import remove_tree
from ..bots.launch import ARENA_COPIES
from ..bots.manifest import ManifestError, bundled_bots, load_bot
from ..bots.places import PACKAGE, arena_place
from ..errors import ArenaError
from ..store import reads
from ..store import jobs as queue
from ..store.jobs import Job, Limits, Outcome, QueueFull
from ..store.people import PeopleError, Scope, claim_bot
from . import auth, guard
from .notify import told
from .limits import LateBody, LimitedBody, TooLarge, client_of
from .pages import redirect, render
from .unpacker import UnpackerLost, unpack_apart
from .upload import UploadError
from .wake import Wake

log = logging.getLogger("arena.serve")


def _ladders(request: Request) -> tuple[list[str], dict[str, str]]:
    """The ladders this server offers, and those it does not with why (a file's error, e.g. strangers
    outside gVisor, with the server's paths hidden), each loaded on the server's store."""
    from ..ladder import list_ladders
    from ..ladder.config import LADDER_DIR
    opts = request.app.state.options
    hidden = [(opts.ladders_dir or LADDER_DIR, SERVER_PATH), (opts.store.resolve().parent, SERVER_PATH)]
    offered, refused = [], {}
    for name, lad, error in list_ladders(opts.ladders_dir, store=opts.store):
        if lad is None:
            refused[name] = hide_paths(error, hidden)
        else:
            offered.append(name)
    return offered, refused


def _not_offered(refused: dict[str, str], ladder: str) -> str:
    """Why ``ladder`` takes no upload: none of that name, or why its file cannot be played here."""
    if ladder not in refused:
        return f"no ladder {ladder!r} here"
    return f"ladder {ladder!r} takes no submissions: {refused[ladder]}"


def _form(request: Request, status: int = 200, error: str = "") -> Response:
    opts = request.app.state.options
    offered, refused = _ladders(request)
    return render(request, "submit.html", status, title="Submit a bot", ladders=offered, refused=refused, error=error,
                  has_token=guard.has_token(request), max_mb=opts.max_upload_bytes / 2**20,
                  person="uid" in request.session, csrf=auth.csrf_token(request), max_files=opts.max_upload_files, max_unpacked_mb=opts.max_unpacked_bytes / 2**20)


async def form_page(request: Request) -> Response:
    guard.enabled(request, "submit")
    return _form(request)


BUSY_RETRY_S = 5


VISITOR_SLOTS = 1  # of the upload slots, what senders nobody knows yet may hold at once


async def upload(request: Request) -> Response:
    """An upload, when one of ``uploads_at_once`` slots is free: each holds its body in memory and an
    unpacking process, so many at once would take the server's memory and its threads. Beyond
    them the answer is at once a 503 with Retry-After (the body read and dropped, within the read
    deadline, so a browser shows it; one not whole by then is answered 408). A slot is held at most for the read deadline while its body
    arrives, and one sender (the account, or the address of a visitor) holds at most one: four
    connections sending a byte a second held every slot for as long as they liked. A sender with
    neither an account's session, an API token nor the server's token cookie (only a token field
    in its body, read last, could let it in) is refused on a club's server before it holds anything
    (one such visitor held the visitors' place for the read deadline again and again), and on one
    person's server holds one of ``VISITOR_SLOTS`` besides: four visitors at four addresses, with
    no account, held every slot and refused every member's upload."""
    guard.enabled(request, "submit")
    opts = request.app.state.options
    person = await request.app.state.identify(request.scope)
    sender = person or client_of(request.scope)
    known = person is not None or guard.has_token(request)
    if not known and request.headers.get("authorization"):  # an unknown or revoked API token: refused as such
        await LimitedBody(request.receive, opts.max_upload_bytes).drain(cap=opts.max_upload_bytes + 64 * 1024)
        await auth.bearer(request, Scope.SUBMIT)
    if not known and _club_server(opts.store):  # (one small read, on the loop: no thread to wait for)
        await LimitedBody(request.receive, opts.max_upload_bytes).drain(cap=opts.max_upload_bytes + 64 * 1024)
        return _form(request, 403, "refused: on a club's server an upload is a person's: log in first, or send it "
                                   "with an API token (arena submit --server); the server's token is for its "
                                   "organiser, who opens the server's address with ?token=... first")
    sending: set[str] = request.app.state.sending
    if sender in sending:
        busy = _form(request, 429, "refused: an upload of yours is still being received; send the next when it is in")
        busy.headers["Retry-After"] = str(BUSY_RETRY_S)
        return busy
    state = request.app.state
    if getattr(state, "uploads", None) is None:
        state.uploads = trio.CapacityLimiter(opts.uploads_at_once)
        state.visitor_uploads = trio.CapacityLimiter(min(VISITOR_SLOTS, opts.uploads_at_once))
    held = [state.uploads] if known else [state.visitor_uploads, state.uploads]
    taken: list[trio.CapacityLimiter] = []
    try:
        for slots in held:
            slots.acquire_nowait()
            taken.append(slots)
    except trio.WouldBlock:
        for slots in taken:
            slots.release()
        # read within the body deadline, then answered; a body late past it is answered 408 (BodyDeadline)
        await LimitedBody(request.receive, opts.max_upload_bytes).drain(cap=opts.max_upload_bytes + 64 * 1024)
        why = (f"the server is receiving {opts.uploads_at_once} uploads already" if slots is state.uploads else
               "the server is receiving another upload from someone not logged in (log in, or open the server's "
               "address with ?token=..., to use the other places)")
        busy = _form(request, 503, f"{why}: try again in {BUSY_RETRY_S} seconds")
        busy.headers["Retry-After"] = str(BUSY_RETRY_S)
        return busy
    sending.add(sender)
    try:
        return await _upload(request)
    finally:
        sending.discard(sender)
        for slots in taken:
            slots.release()


def _club_server(store: Path) -> bool:
    """Whether the server's store is a club's (anyone has an account); an unreadable one is taken as
    a club's, so an upload nobody can be named for is refused rather than let in."""
    from ..store.games import StoreError, club_store
    try:
        return club_store(store)
    except StoreError:
        return True


async def _upload(request: Request) -> Response:
    opts = request.app.state.options
    limit = opts.max_upload_bytes + 64 * 1024  # the form's other fields and multipart headers
    body = LimitedBody(request.receive, limit)
    too_big = f"refused: the upload is larger than {opts.max_upload_bytes / 2**20:g} MB"
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        await body.drain()
        return _form(request, 413, too_big)
    try:
        form = await Request(request.scope, body).form(max_files=1, max_fields=10)
    except TooLarge:
        await body.drain()
        return _form(request, 413, too_big)
    except LateBody:  # limits.BodyDeadline's, from the request's headers
        return _form(request, 408, f"refused: the upload did not arrive within {opts.read_timeout_s:g} seconds; "
                                   "nothing was kept")
    who = await auth.bearer(request, Scope.SUBMIT)  # a person's machine: no cookie, so no CSRF to check
    if who is not None:
        guard.enabled(request, "submit")
    elif (who := await auth.current(request)) is not None:
        auth.check_form(request, str(form.get("csrf", "")))
    else:  # the organiser's token, as before accounts
        guard.require(request, "submit", str(form.get("token", "")) or None)
    submitter = "token" if who is None else f"account:{who.id}"
    limits = limits_of(opts)
    why = await auth.with_db(request, lambda db: queue.refusal(db, submitter, limits, time.time()))
    refused = (429, why) if why is not None else await trio.to_thread.run_sync(disk_refusal, opts)
    if refused is not None:
        return _form(request, refused[0], refused[1])
    ladder = str(form.get("ladder", ""))
    upload = form.get("bot")
    offered, refused = _ladders(request)
    if ladder not in offered:
        return _form(request, 400, _not_offered(refused, ladder))
    if upload is None or isinstance(upload, str):
        return _form(request, 400, "choose a zip or tar.gz of your bot's folder")
    data = await upload.read(opts.max_upload_bytes + 1)
    if len(data) > opts.max_upload_bytes:
        return _form(request, 413, too_big)
    job_id = queue.new_id()
    dest = private_copy_dir(opts.store) / job_id

    try:  # in a process of its own: its Python work would hold the serving loop (serve/unpacker.py)
        spec = await unpack_apart(data, dest, max_files=opts.max_upload_files, max_bytes=opts.max_unpacked_bytes)
        if spec.human:
            raise UploadError("a ladder cannot seat a human")
        if who is not None:
            reserved = await trio.to_thread.run_sync(_organisers_names, opts.ladders_dir, opts.store, opts.benches)
            await auth.with_db(request, lambda db: claim_bot(
                db, spec.name, who, taken=spec.name in reserved or _known(db, spec.name), now=time.time(),
                origin=auth.origin_of(request)))
        job = Job(job_id, submitter, ladder, spec.label, str(upload.filename or "upload")[:200], str(spec.root))
        await queue_job(request.app, job, limits)
    except QueueFull as e:
        remove_tree(dest)
        return _form(request, 429, str(e))
    except PeopleError as e:
        remove_tree(dest)
        return _form(request, 403, str(e))
    except (UploadError, ManifestError) as e:
        remove_tree(dest)  # a refused upload leaves nothing behind
        return _form(request, 400, hide_paths(str(e), [(dest, YOUR_BOT)]))
    except OSError as e:
        remove_tree(dest)
        return _form(request, 500, f"could not unpack the upload: {e.strerror}")
    except UnpackerLost as e:
        remove_tree(dest)
        return _form(request, 500, f"could not unpack the upload: {e}; the arena failed, not your bot, and "
                                   "nothing was kept. Try again later")
    except BaseException:
        remove_tree(dest)
        raise
    return redirect(f"/submit/{job.id}")


async def queue_job(app: Starlette, job: Job, limits: Limits) -> None:
    """Add ``job`` to the store's queue and wake this server's queue runner, so an idle queue starts
    its check at once rather than at its next look."""
    await _db(app, lambda db: queue.enqueue(db, job, limits, time.time()))
    app.state.queue_wake.set()


def limits_of(opts: Any) -> Limits:
    return Limits(per_submitter=opts.max_queued_per_submitter, total=opts.max_queued,
                  per_day=opts.max_submissions_per_day)


def disk_refusal(opts: Any) -> tuple[int, str] | None:
    """(507, why) when the store's disk could not hold one more unpacked upload and keep its
    reserve free, else None."""
    free = shutil.disk_usage(opts.store.resolve().parent if opts.store.parent.exists() else Path.cwd()).free
    if free < opts.max_unpacked_bytes + opts.min_free_bytes:
        return 507, "refused: the server is short of disk space; nothing was kept. Try again later"
    return None


def _organisers_names(ladders_dir: Path | None, store: Path, benches: dict[str, str] | None = None) -> set[str]:
    """Bot names that are the organiser's before any game is stored: every bundled bot's and every
    initial bot's of a ladder file of this server, offered or refused for its seats (a member who
    took ``heuristic`` before its ladder was seeded owned the reference bot's name: its next
    version, its private lines; one who took a refused ladder's bot would own it once it is fixed),
    and every member and reference folder's of a bench it shows (``benches``: name -> file). A
    bench shows a member's grade, games and logs to the account owning its name: one who uploaded
    a bot named as a student's folder read that student's games and stderr."""
    from ..ladder import LadderError, SeatsRefused, list_ladders, load_ladder
    from ..tournament.bench import load_bench
    from ..tournament.config import ConfigError
    initial = []
    for name, file in (benches or {}).items():
        try:
            bench = load_bench(Path(file))
        except ConfigError:  # its names unknown now: none is claimed meanwhile (fail closed)
            raise PeopleError(f"the server cannot read its bench {name}'s file now, whose bots' names are the "
                              "organiser's: try again later") from None
        initial += [*bench.references, *bench.members]
    for name, lad, _ in list_ladders(ladders_dir, store=store):
        if lad is None:
            try:
                lad = load_ladder(name, ladders_dir, check_bots=False, store=store)
            except SeatsRefused as e:
                lad = e.ladder
            except LadderError:
                continue
        initial += lad.bots
    names = set()
    for ref in [*bundled_bots(), *initial]:
        try:
            names.add(load_bot(ref).name)
        except (ArenaError, OSError):  # a bot that cannot load now is still the organiser's
            names.add(Path(ref).name)
    return names


def _known(db: Any, name: str) -> bool:
    """Whether bot ``name`` has played or joined a ladder on this server (so it is someone's already)."""
    return reads.name_known(db, name)


def private_copy_dir(store: Path) -> Path:
    """``<store dir>/uploads``: where each upload is unpacked, its private copy, before anything reads
    it. The store's directory is 0700 from its first moment (a fresh server has none yet), and so
    is this one; contained bots run from a readable copy of their own (the marker file)."""
    from ..tournament.store import private_store_dir
    parent = store.resolve().parent
    private_store_dir(parent)
    uploads = parent / "uploads"
    uploads.mkdir(mode=0o700, exist_ok=True)
    uploads.chmod(0o700)
    (uploads / ARENA_COPIES).touch()
    return uploads


async def _db(app: Starlette, fn: Any) -> Any:
    return await auth.db_call(app.state.options.store, fn)


QUEUE_RETRY_S = 5.0


async def run_queue(app: Starlette) -> None:
    """The server's one queue runner: first put back what a dead server left running (and remove
    uploads no job holds), then run the waiting jobs in the store's fair order, one at a time.
    While idle it looks again every ``queue_look_s`` seconds, for what no wake-up of this process
    reaches: a job whose server died after this one started (its lease passed, or its process is
    gone) is put back, and one that another process ended or queued is seen."""
    opts = app.state.options
    wake: Wake = app.state.queue_wake
    me = queue.server_id()
    if opts.store.exists():
        await _db(app, lambda db: _recover(db, opts.store.resolve().parent / "uploads", me))
    while True:
        try:
            job = await _db(app, lambda db: _next(db, me)) if opts.store.exists() else None
        except Exception:  # the store locked or unreadable for now: the server keeps serving, and retries
            log.exception("could not read the submission queue; trying again")
            await trio.sleep(QUEUE_RETRY_S)
            continue
        if job is None:
            await wake.wait(opts.queue_look_s)
            continue
        try:
            await run_job(app, job)
        except Exception:  # one job's failure ends that job, never the server or the jobs behind it
            log.exception("submission %s ended with an error of the arena; the queue goes on", job.id)
            await _refund_broken(app, job)


async def _refund_broken(app: Starlette, job: Job) -> None:
    """End a job whose run raised: refunded (the arena failed, not the bot), its owner told if the
    account still exists, its upload removed. If even that cannot be written, the job stays
    running until this queue's next step puts it back (or refunds it: :func:`_next`)."""
    job.error = ("the arena failed, not your bot: this submission does not count against your quota; "
                 "submit it again")
    try:
        with trio.CancelScope(shield=True):
            await _db(app, lambda db: queue.finish(db, job, Outcome.REFUNDED, time.time()))
            told(app)
            remove_tree(private_copy_dir(app.state.options.store) / job.id)
    except Exception:
        log.exception("could not end submission %s; the queue puts it back before its next job", job.id)


def _next(db: Any, me: str) -> Job | None:
    """The next job to run here, once every job whose owner is gone, or that this server could not
    end (it runs none now), is back in the queue."""
    for gone in queue.recover(db, time.time(), me, idle=True):
        remove_tree(gone.upload)  # refunded: its upload is not run again
    return queue.claim(db, time.time(), owner=me)


def _recover(db: Any, uploads: Path, me: str) -> None:
    """At start: put back what dead servers left running, and remove the upload folders no job
    holds, unless younger than the lease (another server on the store may be unpacking it now,
    before its job is added)."""
    now = time.time()
    queue.recover(db, now, me)
    keep = {Path(p) for p in queue.open_uploads(db)}
    for folder in uploads.iterdir() if uploads.is_dir() else ():
        if (folder.is_dir() and not any(p == folder or folder in p.parents for p in keep)
                and folder.stat().st_mtime < now - queue.LEASE_S):
            remove_tree(folder)  # an upload no job holds: a leftover


async def run_job(app: Starlette, job: Job) -> None:
    """``arena submit``'s path for one claimed job: ``arena check`` on the ladder's copy of the
    bot, then (only if it passed) the placement. What the uploader sees names no path of the
    server: the bot's folder reads ``[your bot]``, the server's own files ``[server path]``.
    The upload's own copy is removed when the job ends, however it ends (a placed bot lives on
    in the ladder's snapshot, made before its check). A server stopped mid-job puts the job
    back as it was, upload and all, for the next start. The job's heartbeat is renewed
    throughout (outside the job's own cancellation handling: a nursery groups what it raises); if
    another server took the job back meanwhile (this one stalled past the lease), it is dropped here."""
    async with trio.open_nursery() as beats:
        with trio.CancelScope() as work:
            beats.start_soon(_heartbeat, app, job, work)
            try:
                await _run_claimed(app, job)
            finally:
                beats.cancel_scope.cancel()


async def _run_claimed(app: Starlette, job: Job) -> None:
    root = Path(job.upload)
    hidden = [(root, YOUR_BOT)]
    app.state.running[job.id] = job

    def say(text: str) -> None:
        job.say(hide_paths(text, hidden))

    try:  # a job run again says so once: queue.recover wrote that line when it put the job back
        outcome = await _run_job(app, job, root, hidden, say)
    except trio.Cancelled:
        with trio.CancelScope(shield=True):
            await _db(app, lambda db: queue.requeue(db, job))
        raise
    finally:
        app.state.running.pop(job.id, None)
    with trio.CancelScope(shield=True):
        await _db(app, lambda db: queue.finish(db, job, outcome, time.time()))
        told(app)
        remove_tree(private_copy_dir(app.state.options.store) / job.id)


async def _heartbeat(app: Starlette, job: Job, work: trio.CancelScope) -> None:
    """Renew the job's heartbeat while it runs, so no other server on the store takes it back; once
    the job is no longer this server's, cancel ``work`` (its new owner runs it)."""
    while True:
        await trio.sleep(queue.HEARTBEAT_S)
        try:
            mine = await _db(app, lambda db: queue.heartbeat(db, job, time.time()))
        except Exception:  # a locked store now: the lease is six beats long
            log.exception("could not renew the heartbeat of submission %s", job.id)
            continue
        if not mine:
            log.warning("submission %s was put back by another server (its lease passed): stopped here", job.id)
            work.cancel()
            return


async def _run_job(app: Starlette, job: Job, root: Path, hidden: list[tuple[Path, str]], say: Any) -> Outcome:
    from ..tournament.check import run_check
    from ..ladder.placement import check_containment
    from ..ladder import CheckFailed, LadderError, RunContext, load_ladder, open_store, submit
    opts = app.state.options
    if not root.is_dir():
        job.error = ("the server lost this upload; the arena failed, not your bot: it does not count against your "
                     "quota. Submit it again")
        return Outcome.REFUNDED
    try:
        ladder = load_ladder(job.ladder, opts.ladders_dir, store=opts.store)
        if ladder.one_seat_per_author:
            say(ladder.seat_rule_text)
        hidden += [(opts.store.resolve().parent, SERVER_PATH), (opts.ladders_dir or ladder.path.parent,
                                                                SERVER_PATH)]
        job.phase = "checking"
        await _db(app, lambda db: queue.progress(db, job))

        async def checked(copy: Any) -> dict[str, Any]:
            hidden.insert(0, (copy.root, YOUR_BOT))  # the check runs on the ladder's own copy
            report = await run_check(copy, ladder.check_games, ladder.move_ms, rules=ladder.ruleset(),
                                     **check_containment(ladder))  # the ladder's containment
            job.report = hide_paths(report, hidden)
            if report.get("ok"):
                job.phase, job.passed_check = "placing", True
                await _db(app, lambda db: queue.progress(db, job))
            return report

        store = open_store(ladder, opts.store)
        try:
            result = await submit(ladder, str(root), store, RunContext(say=say, checker=checked))
        finally:
            store.close()
        job.row = result.row.as_json()
        say(f"{result.label}: {result.status}, {result.games_played} game(s) played")
        return Outcome.PLACED
    except CheckFailed:
        say("the check found faults: the bot was not placed on the ladder")
        return Outcome.CHECK_FAILED
    except (LadderError, ManifestError) as e:
        job.error = hide_paths(str(e), hidden)
        return Outcome.FAILED
    except Exception as e:  # the arena's failure, not the bot's: refunded, and the server keeps serving
        log.exception("submission %s failed", job.id)
        job.error = hide_paths(f"the arena failed, not your bot ({type(e).__name__}: {e}): this submission does "
                               "not count against your quota; submit it again", hidden)
        return Outcome.REFUNDED


YOUR_BOT = "[your bot]"
SERVER_PATH = "[server path]"
_BOT_COPY = re.compile(r"/[^\s'\"]*?/palace-arena-bot-\w+/[^/\s'\"]+")  # the readable copy a bot runs from
_ARENA_TEMP = re.compile(r"/[^\s'\"]*?/palace-arena-[\w.-]+")  # a temporary copy of the arena, or the package's copies
_PACKAGE_ENTRY = re.compile(rf"{re.escape(SERVER_PATH)}/[0-9a-f]{{64}}(?![0-9a-f])")  # the package copy's own folder in them


def hide_paths(value: Any, hidden: list[tuple[Path, str]]) -> Any:
    """``value`` (a string, or a report made of lists and dicts) with the server's paths replaced:
    each of ``hidden`` (the more specific first), then the arena's Python and its temporary
    copies, and the package copies a Python bot imports (``launch._package_copy``, in this user's
    place for them or the temporary folder), down to the folder of each. An uploader learns nothing of how the server's disk is laid out."""
    if isinstance(value, dict):
        return {k: hide_paths(v, hidden) for k, v in value.items()}
    if isinstance(value, list):
        return [hide_paths(v, hidden) for v in value]
    if not isinstance(value, str):
        return value
    arena_root = Path(__file__).resolve().parent.parent.parent
    pairs = [*hidden, (arena_root, SERVER_PATH), (arena_place(PACKAGE), SERVER_PATH)]
    if sys.prefix != sys.base_prefix:  # a virtual environment's path is the server's; /usr/bin/python3 is not
        pairs += [(Path(sys.executable), SERVER_PATH), (Path(sys.prefix), SERVER_PATH)]
    for path, name in pairs:
        for form in dict.fromkeys((str(path), str(Path(path).resolve()))):
            if form.startswith("/") and len(form) > 1:
                value = value.replace(form, name)
            elif form not in ("", "."):  # relative (`--ladders lad`): a whole path's start only, not in "ladder"
                value = re.sub(rf"(?<![\w./-]){re.escape(form)}(?=/|[\s'\"]|$)", name, value)
    return _PACKAGE_ENTRY.sub(SERVER_PATH, _ARENA_TEMP.sub(SERVER_PATH, _BOT_COPY.sub(YOUR_BOT, value)))


async def job_page(request: Request) -> Response:
    guard.enabled(request, "submit")
    job_id = request.path_params["job"]
    found = await auth.with_db(request, lambda db: (queue.get(db, job_id), queue.ahead(db, job_id))) \
        if request.app.state.options.store.exists() else (None, 0)
    job, ahead = request.app.state.running.get(job_id) or found[0], found[1]
    if job is None:
        raise HTTPException(404, "No such submission.")
    if request.query_params.get("format") == "json":  # what `arena submit --server` reads
        return JSONResponse({"id": job.id, "label": job.label, "ladder": job.ladder, "status": job.status,
                             "done": job.done, "ahead": ahead, "lines": job.lines, "report": job.report,
                             "row": job.row, "error": job.error}, headers={"Cache-Control": "no-store"})
    return render(request, "submit_job.html", title=f"Submission {job.label}", job=job, ahead=ahead)


def routes() -> list[Route]:
    return [Route("/submit", form_page, methods=["GET"]), Route("/submit", upload, methods=["POST"]),
            Route("/submit/{job}", job_page)]


def setup(app: Starlette) -> None:
    app.state.sending = set()  # who is sending an upload now: an account, or a visitor's address
    app.state.running = {}  # the job this process runs now, by id: its lines as they come
    app.state.queue_wake = Wake()
    if app.state.options.allow_submit:
        app.state.nursery.start_soon(run_queue, app)
