"""Submit: upload a bot to a ladder from the browser.

Off unless ``arena serve --allow-submit``; then every upload needs the token
printed at start (:mod:`.guard`). The request body is capped while it is read
(``max_upload_bytes``, whatever Content-Length says), the archive is unpacked by
:mod:`.upload` into a private folder of the closed store (:func:`private_copy_dir`) before
anything reads it, and the bot goes through the same path as ``arena submit``:
``arena check`` first (its report is shown), then the ladder's placement, only
if the check found no fault. Jobs run one at a time in the server's nursery.
"""

from __future__ import annotations

import logging
import secrets
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..bots.launch import ARENA_COPIES
from ..bots.manifest import ManifestError, load_bot
from ..errors import ArenaError
from . import guard
from .pages import redirect, render
from .upload import UploadError, unpack

log = logging.getLogger("arena.serve")


@dataclass
class Job:
    id: str
    ladder: str
    filename: str
    created: float = field(default_factory=time.time)
    status: str = "waiting"  # checking, check failed, placing, placed, failed
    label: str = ""
    lines: list[str] = field(default_factory=list)
    report: dict[str, Any] | None = None
    row: dict[str, Any] | None = None
    error: str = ""

    @property
    def done(self) -> bool:
        return self.status in ("check failed", "placed", "failed")

    def say(self, text: str) -> None:
        self.lines.append(text)
        del self.lines[:-200]


class TooLarge(ArenaError):
    pass


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


def _ladders(request: Request) -> list[str]:
    from ..ladder import list_ladders
    return [name for name, lad, _ in list_ladders(request.app.state.options.ladders_dir) if lad is not None]


def _form(request: Request, status: int = 200, error: str = "") -> Response:
    opts = request.app.state.options
    return render(request, "submit.html", status, title="Submit a bot", ladders=_ladders(request), error=error,
                  has_token=guard.has_token(request), max_mb=opts.max_upload_bytes / 2**20,
                  max_files=opts.max_upload_files, max_unpacked_mb=opts.max_unpacked_bytes / 2**20)


async def form_page(request: Request) -> Response:
    guard.enabled(request, "submit")
    return _form(request)


async def upload(request: Request) -> Response:
    guard.enabled(request, "submit")
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
    guard.require(request, "submit", str(form.get("token", "")) or None)
    ladder = str(form.get("ladder", ""))
    upload = form.get("bot")
    if ladder not in _ladders(request):
        return _form(request, 400, f"no ladder {ladder!r} here")
    if upload is None or isinstance(upload, str):
        return _form(request, 400, "choose a zip or tar.gz of your bot's folder")
    data = await upload.read(opts.max_upload_bytes + 1)
    if len(data) > opts.max_upload_bytes:
        return _form(request, 413, too_big)
    job = Job(secrets.token_urlsafe(9), ladder, str(upload.filename or "upload")[:200])
    dest = private_copy_dir(opts.store) / job.id
    try:
        root = await trio.to_thread.run_sync(lambda: unpack(data, dest, max_files=opts.max_upload_files,
                                                             max_bytes=opts.max_unpacked_bytes))
        spec = load_bot(root)
        if spec.human:
            raise UploadError("a ladder cannot seat a human")
    except (UploadError, ManifestError) as e:
        shutil.rmtree(dest, ignore_errors=True)  # a refused upload leaves nothing behind
        return _form(request, 400, str(e))
    except OSError as e:
        shutil.rmtree(dest, ignore_errors=True)
        return _form(request, 500, f"could not unpack the upload: {e}")
    job.label = spec.label
    request.app.state.submit_jobs[job.id] = job
    request.app.state.nursery.start_soon(run_job, request.app, job, root)
    return redirect(f"/submit/{job.id}")


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


async def run_job(app: Starlette, job: Job, root: Path) -> None:
    """``arena check``, then (only if it passed) the ladder's placement, one job at a time."""
    from ..tournament.check import run_check
    from ..ladder import LadderError, RunContext, load_ladder, open_store, submit
    opts = app.state.options
    async with app.state.submit_lock:
        try:
            ladder = load_ladder(job.ladder, opts.ladders_dir)
            spec = load_bot(root)
            job.status = "checking"
            job.say(f"checking {spec.label} (arena check, {ladder.check_games} game(s) per scenario)")
            report = await run_check(spec, ladder.check_games, ladder.move_ms, rules=ladder.ruleset())
            job.report = report
            if not report.get("ok"):
                job.status = "check failed"
                job.say("the check found faults: the bot was not placed on the ladder")
                return
            job.status = "placing"
            store = open_store(ladder, opts.store)

            async def checked(_spec: Any) -> dict[str, Any]:
                return report  # submit() announces the check again: this one has already run

            try:
                result = await submit(ladder, str(root), store, RunContext(say=job.say, checker=checked))
            finally:
                store.close()
            job.row = result.row.as_json()
            job.status = "placed"
            job.say(f"{result.label}: {result.status}, {result.games_played} game(s) played")
        except (LadderError, ManifestError) as e:
            job.status, job.error = "failed", str(e)
        except Exception as e:  # shown on the job's page; the server keeps serving
            log.exception("submission %s failed", job.id)
            job.status, job.error = "failed", f"{type(e).__name__}: {e}"


async def job_page(request: Request) -> Response:
    guard.enabled(request, "submit")
    job = request.app.state.submit_jobs.get(request.path_params["job"])
    if job is None:
        raise HTTPException(404, "No such submission (they are kept until the server stops).")
    return render(request, "submit_job.html", title=f"Submission {job.label}", job=job)


def routes() -> list[Route]:
    return [Route("/submit", form_page, methods=["GET"]), Route("/submit", upload, methods=["POST"]),
            Route("/submit/{job}", job_page)]


def setup(app: Starlette) -> None:
    app.state.submit_jobs = {}
    app.state.submit_lock = trio.Lock()
