"""``arena accounts``: the people of a club server, managed at the server's own terminal.

The first admin is made here and never over the network: ``first-admin`` prints a one-time
sign-up link. The other commands are what an admin can also do on the web; each write is audited
as made from the terminal.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from ..safetext import SafeConsole
from rich.markup import escape
from rich.table import Table

from ..tournament import DEFAULT_STORE
from .common import ArenaTyper

accounts_app = ArenaTyper(help="Accounts of a club server (arena serve): the first admin, invitations, the audit.",
                           no_args_is_help=True)
StoreOpt = Annotated[Path, typer.Option("--store", help="The server's store (SQLite file).")]
UrlOpt = Annotated[str, typer.Option("--url", help="The server's address, as people will open it.")]


def _db(store: Path):  # type: ignore[no-untyped-def]
    from ..tournament.store import Store
    return Store(store)


@accounts_app.command("first-admin")
def first_admin_cmd(store: StoreOpt = DEFAULT_STORE, url: UrlOpt = "http://127.0.0.1:8000",
                    hours: Annotated[float, typer.Option("--hours", help="How long the link works.")] = 1.0) -> None:
    """Print a one-time link that makes the first admin (refused once an admin exists)."""
    from ..store.people import first_admin_link
    db = _db(store)
    try:
        code = first_admin_link(db.db, time.time(), hours)
    finally:
        db.close()
    print(f"open within {hours:g} h, once, to make the first admin: {url.rstrip('/')}/signup?code={code}")


@accounts_app.command("invite")
def invite_cmd(store: StoreOpt = DEFAULT_STORE, url: UrlOpt = "http://127.0.0.1:8000",
               role: Annotated[str, typer.Option("--role", help="admin, organiser or member.")] = "member",
               uses: Annotated[int, typer.Option("--uses", help="How many people may sign up with it.")] = 1,
               hours: Annotated[float, typer.Option("--hours", help="How long it works.")] = 72.0,
               note: Annotated[str, typer.Option("--note", help="Who it is for (shown in the audit).")] = "") -> None:
    """Print an invitation link (and its code) for people to sign up with."""
    from ..store.people import PeopleError, Role, create_invitation
    if role not in {r.value for r in Role}:
        raise PeopleError(f"no role {role!r}: choose admin, organiser or member")
    db = _db(store)
    try:
        code = create_invitation(db.db, Role(role), uses=uses, hours=hours, now=time.time(), by=None,
                                 origin="terminal", note=note)
    finally:
        db.close()
    print(f"invitation for {uses} {role}(s), {hours:g} h: {url.rstrip('/')}/signup?code={code}")


@accounts_app.command("list")
def list_cmd(store: StoreOpt = DEFAULT_STORE) -> None:
    """The accounts: name, role, status."""
    from ..store.people import accounts
    db = _db(store)
    try:
        rows = accounts(db.db)
    finally:
        db.close()
    table = Table("name", "role", "status", "since")
    for a in rows:
        table.add_row(escape(a.name), a.role.value, a.status.value, time.strftime("%Y-%m-%d %H:%M", time.localtime(a.created)))
    SafeConsole(highlight=False).print(table)


@accounts_app.command("audit")
def audit_cmd(store: StoreOpt = DEFAULT_STORE,
              limit: Annotated[int, typer.Option("--limit", min=1, help="How many of the latest writes.")] = 50) -> None:
    """Every write, newest first: when, who, what, on what, from where."""
    import json

    from ..store.people import audit_rows
    db = _db(store)
    try:
        rows = audit_rows(db.db, limit)
    finally:
        db.close()
    table = Table("when", "who", "action", "target", "detail", "from")
    for r in rows:
        table.add_row(time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r["at"])), escape(r["who"]), r["action"],
                      escape(r["target"]), escape(json.dumps(r["detail"])), escape(r["origin"]))
    SafeConsole(highlight=False).print(table)


def _set_status(store: Path, name: str, suspended: bool, reason: str) -> None:
    from ..store.people import Status, set_status
    db = _db(store)
    try:
        who = set_status(db.db, name, Status.SUSPENDED if suspended else Status.ACTIVE, by=None, origin="terminal",
                         now=time.time(), reason=reason)
    finally:
        db.close()
    print(f"{who.name} is {who.status.value}")


@accounts_app.command("suspend")
def suspend_cmd(name: Annotated[str, typer.Argument(help="The account.")],
                reason: Annotated[str, typer.Option("--reason", help="Why (kept in the audit).")],
                store: StoreOpt = DEFAULT_STORE) -> None:
    """Suspend a person: their sessions and API tokens stop working at once."""
    _set_status(store, name, True, reason)


@accounts_app.command("reinstate")
def reinstate_cmd(name: Annotated[str, typer.Argument(help="The account.")],
                  reason: Annotated[str, typer.Option("--reason", help="Why (kept in the audit).")] = "",
                  store: StoreOpt = DEFAULT_STORE) -> None:
    """Reinstate a suspended person."""
    _set_status(store, name, False, reason)


@accounts_app.command("revoke-tokens")
def revoke_tokens_cmd(name: Annotated[str, typer.Argument(help="The account.")],
                      store: StoreOpt = DEFAULT_STORE) -> None:
    """Revoke every API token of a person (their machines stop submitting at once)."""
    from ..store.people import revoke_all_tokens
    db = _db(store)
    try:
        n = revoke_all_tokens(db.db, name, by=None, now=time.time(), origin="terminal")
    finally:
        db.close()
    print(f"revoked {n} token(s) of {name}")


def register(app: typer.Typer) -> None:
    app.add_typer(accounts_app, name="accounts")
