"""The admin's page and acts: suspend or reinstate a person, revoke their tokens, suspend, retire
or reinstate a bot on a ladder, pause or resume a ladder. Admins only; every act is a form with the
session's CSRF token, goes through the same function as its ``arena`` command, and is audited
(who, what, when, from which address) in the transaction that makes it.
"""

from __future__ import annotations

import time
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..store import reads
from ..store.people import PeopleError, Role, Status
from . import auth
from .notify import told
from .pages import redirect, render


async def _with_store(request: Request, fn: Any) -> Any:
    """``fn`` on the store opened as the ladder code opens it (a ``Store``), in a worker thread."""
    from ..tournament.store import Store
    return await auth.db_call(request.app.state.options.store, fn, opener=Store)


async def _ladder_act(request: Request, work: Any) -> Response:
    """An admin's write to a ladder or its members: ``work(store, form, actor)`` in a worker
    thread; a ``LadderError`` it raises is shown on the admin page (400), nothing changed."""
    from ..ladder import Actor, LadderError
    who = await auth.require(request, Role.ADMIN)
    form = await auth.checked_form(request)
    by = Actor(who.id, auth.origin_of(request))
    try:
        await _with_store(request, lambda store: work(store, form, by))
    except LadderError as e:
        return await page(request, 400, str(e).capitalize() + ".")
    told(request.app)  # a member's status told to its owner (a pause tells nobody: a look for nothing)
    return redirect("/admin")


async def page(request: Request, status: int = 200, error: str = "") -> Response:
    """Every account, every ladder member with its status and owner, the ladders, and the latest writes."""
    from ..ladder.tables import roster
    from ..store.people import accounts, audit_rows
    who = await auth.require(request, Role.ADMIN)
    people, audit, ladders = await _with_store(request, lambda s: (accounts(s.db), audit_rows(s.db, 200), roster(s)))
    return render(request, "admin.html", status, title="Admin", who=who, people=people, audit=audit,
                  members=ladders["members"], ladders=ladders["ladders"], csrf=auth.csrf_token(request), error=error)


async def account_act(request: Request) -> Response:
    from ..store.people import revoke_all_tokens, set_status
    who = await auth.require(request, Role.ADMIN)
    form = await auth.checked_form(request)
    act, name = request.path_params["act"], request.path_params["name"]
    if act not in ("suspend", "reinstate", "revoke-tokens"):
        raise HTTPException(404, "A person is suspended, reinstated, or has their tokens revoked.")
    if act != "revoke-tokens" and name.lower() == who.name.lower():
        return await page(request, 400, "An admin does not suspend or reinstate themselves.")
    origin, now = auth.origin_of(request), time.time()
    try:
        if act == "revoke-tokens":
            await auth.with_db(request, lambda db: revoke_all_tokens(db, name, by=who.id, now=now, origin=origin))
        else:
            wanted = Status.SUSPENDED if act == "suspend" else Status.ACTIVE
            await auth.with_db(request, lambda db: set_status(db, name, wanted, by=who.id, origin=origin, now=now,
                                                             reason=form.get("reason", "")))
            told(request.app)
    except PeopleError as e:
        return await page(request, 400, str(e).capitalize() + ".")
    return redirect("/admin")


async def bot_act(request: Request) -> Response:
    """Suspend, retire or reinstate one member of one ladder (its owner is told)."""
    from ..ladder import LadderError, MemberStatus, clear_status, member, take_out

    def work(store: Any, form: Any, by: Any) -> str:
        act, ladder, label = form.get("act", ""), form.get("ladder", ""), form.get("label", "")
        if act == "reinstate":
            if member(store, ladder, label) is None:
                raise LadderError(f"{label} is not a member of ladder {ladder}")
            return "ok" if clear_status(store, ladder, label, by) else "already active"
        if act not in ("suspend", "retire"):
            raise LadderError("a bot is suspended, retired or reinstated")
        status = MemberStatus.SUSPENDED if act == "suspend" else MemberStatus.RETIRED
        return take_out(store, ladder, label, status, form.get("reason", "").strip() or f"{act} by an admin", by)

    return await _ladder_act(request, work)


async def ladder_act(request: Request) -> Response:
    """Pause or resume a ladder: `arena ladder run` plays no batch while it is paused."""
    from ..ladder import pause, resume
    act, name = request.path_params["act"], request.path_params["name"]

    def work(store: Any, form: Any, by: Any) -> None:
        if act not in ("pause", "resume"):
            raise HTTPException(404, "A ladder is paused or resumed.")
        if name not in reads.ladders_with_members(store.db):
            raise HTTPException(404, f"No ladder {name!r} in this store.")
        if act == "pause":
            pause(store, name, form.get("reason", "").strip() or "paused by an admin", by)
        else:
            resume(store, name, by)

    return await _ladder_act(request, work)


def routes() -> list[Route]:
    return [Route("/admin", page, methods=["GET"]),
            Route("/admin/accounts/{name}/{act:str}", account_act, methods=["POST"]),
            Route("/admin/bots", bot_act, methods=["POST"]),
            Route("/admin/ladders/{name}/{act:str}", ladder_act, methods=["POST"])]
