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
from .pages import redirect, render


def _store(request: Request) -> Any:
    from ..tournament.store import Store
    return Store(request.app.state.options.store)


async def _with_store(request: Request, fn: Any) -> Any:
    """``fn`` on the store opened as the ladder code opens it, in a worker thread."""
    import anyio  # (a read-only server runs on asyncio, a playing one on trio)

    def work() -> Any:
        store = _store(request)
        try:
            return fn(store)
        finally:
            store.close()

    return await anyio.to_thread.run_sync(work)


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
    except PeopleError as e:
        return await page(request, 400, str(e).capitalize() + ".")
    return redirect("/admin")


async def bot_act(request: Request) -> Response:
    """Suspend, retire or reinstate one member of one ladder (its owner is told)."""
    from ..ladder import Actor, LadderError, MemberStatus, clear_status, member, take_out
    who = await auth.require(request, Role.ADMIN)
    form = await auth.checked_form(request)
    act, ladder, label = form.get("act", ""), form.get("ladder", ""), form.get("label", "")
    by = Actor(who.id, auth.origin_of(request))
    reason = form.get("reason", "").strip() or f"{act} by an admin"

    def work(store: Any) -> str:
        if act == "reinstate":
            if member(store, ladder, label) is None:
                raise LadderError(f"{label} is not a member of ladder {ladder}")
            return "ok" if clear_status(store, ladder, label, by) else "already active"
        if act not in ("suspend", "retire"):
            raise LadderError("a bot is suspended, retired or reinstated")
        status = MemberStatus.SUSPENDED if act == "suspend" else MemberStatus.RETIRED
        return take_out(store, ladder, label, status, reason, by)

    try:
        await _with_store(request, work)
    except LadderError as e:
        return await page(request, 400, str(e).capitalize() + ".")
    return redirect("/admin")


async def ladder_act(request: Request) -> Response:
    """Pause or resume a ladder: `arena ladder run` plays no batch while it is paused."""
    from ..ladder import Actor, pause, resume
    who = await auth.require(request, Role.ADMIN)
    form = await auth.checked_form(request)
    act, name = request.path_params["act"], request.path_params["name"]
    if act not in ("pause", "resume"):
        raise HTTPException(404, "A ladder is paused or resumed.")
    by = Actor(who.id, auth.origin_of(request))

    def work(store: Any) -> None:
        known = reads.ladders_with_members(store.db)
        if name not in known:
            raise HTTPException(404, f"No ladder {name!r} in this store.")
        if act == "pause":
            pause(store, name, form.get("reason", "").strip() or "paused by an admin", by)
        else:
            resume(store, name, by)

    await _with_store(request, work)
    return redirect("/admin")


def routes() -> list[Route]:
    return [Route("/admin", page, methods=["GET"]),
            Route("/admin/accounts/{name}/{act:str}", account_act, methods=["POST"]),
            Route("/admin/bots", bot_act, methods=["POST"]),
            Route("/admin/ladders/{name}/{act:str}", ladder_act, methods=["POST"])]
