"""People on a club server, in the store (arena/store/people.py): invitations, sign-up and the
audit. Each refusal says why and changes nothing."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from arena.store import migrate
from arena.store.people import (PeopleError, Role, Status, account, accounts, audit_rows, create_invitation,
                                first_admin_link, set_status, sign_up)

NOW = 1_800_000_000.0


@pytest.fixture
def db(tmp_path: Path):
    conn = sqlite3.connect(tmp_path / "s.sqlite", isolation_level=None)
    migrate(conn)
    yield conn
    conn.close()


def _state(db: sqlite3.Connection) -> tuple:
    return (db.execute("SELECT * FROM accounts ORDER BY id").fetchall(),
            db.execute("SELECT * FROM invitations ORDER BY code_hash").fetchall(),
            db.execute("SELECT * FROM audit ORDER BY id").fetchall())


def test_an_invitation_signs_up_as_many_people_as_it_allows(db: sqlite3.Connection) -> None:
    code = create_invitation(db, Role.MEMBER, uses=2, hours=1, now=NOW, by=None, origin="terminal")
    assert db.execute("SELECT COUNT(*) FROM invitations WHERE code_hash=?", (code,)).fetchone()[0] == 0  # hashed
    a = sign_up(db, code, "ada", "h1", now=NOW + 1, origin="10.0.0.1")
    b = sign_up(db, code, "bob", "h2", now=NOW + 2, origin="10.0.0.2")
    assert (a.role, b.role, a.status) == (Role.MEMBER, Role.MEMBER, Status.ACTIVE)
    before = _state(db)
    with pytest.raises(PeopleError, match="used as many times as it allows"):
        sign_up(db, code, "cy", "h3", now=NOW + 3, origin="10.0.0.3")
    assert _state(db) == before
    assert [r["action"] for r in audit_rows(db)] == ["sign-up", "sign-up", "invite"]
    assert audit_rows(db)[0]["origin"] == "10.0.0.2" and audit_rows(db)[0]["who"] == "bob"


@pytest.mark.parametrize("case", ["expired", "unknown", "duplicate", "duplicate-case", "bad-name"])
def test_a_refused_sign_up_says_why_and_changes_nothing(db: sqlite3.Connection, case: str) -> None:
    code = create_invitation(db, Role.MEMBER, uses=5, hours=1, now=NOW, by=None, origin="terminal")
    sign_up(db, code, "ada", "h", now=NOW + 1, origin="x")
    before = _state(db)
    name, use, when, why = "bob", code, NOW + 2, ""
    if case == "expired":
        when, why = NOW + 3601, "expired"
    elif case == "unknown":
        use, why = code + "x", "not valid"
    elif case == "duplicate":
        name, why = "ada", "taken"
    elif case == "duplicate-case":
        name, why = "ADA", "taken"
    else:
        name, why = "<b>", "letters, digits"
    with pytest.raises(PeopleError, match=why):
        sign_up(db, use, name, "h", now=when, origin="x")
    assert _state(db) == before


def test_the_first_admin_link_is_refused_once_an_admin_exists(db: sqlite3.Connection) -> None:
    code = first_admin_link(db, NOW)
    assert sign_up(db, code, "root", "h", now=NOW + 1, origin="x").role == Role.ADMIN
    with pytest.raises(PeopleError, match="admin already"):
        first_admin_link(db, NOW + 2)


def test_suspension_is_audited_with_its_reason(db: sqlite3.Connection) -> None:
    code = create_invitation(db, Role.MEMBER, uses=1, hours=1, now=NOW, by=None, origin="terminal")
    sign_up(db, code, "ada", "h", now=NOW + 1, origin="x")
    assert set_status(db, "ada", Status.SUSPENDED, by=None, origin="terminal", now=NOW + 2,
                      reason="spam").status == Status.SUSPENDED
    assert audit_rows(db)[0] == {"at": NOW + 2, "who": "terminal", "action": "suspend", "target": "account:ada",
                                 "detail": {"reason": "spam"}, "origin": "terminal"}
    with pytest.raises(PeopleError, match="no account"):
        set_status(db, "nobody", Status.SUSPENDED, by=None, origin="terminal", now=NOW, reason="")
    assert [a.name for a in accounts(db)] == ["ada"] and account(db, "ADA") is not None


@pytest.mark.parametrize("uses, hours", [(0, 1), (1001, 1), (1, 0), (1, -1)])
def test_an_invitation_out_of_bounds_is_refused(db: sqlite3.Connection, uses: int, hours: float) -> None:
    with pytest.raises(PeopleError):
        create_invitation(db, Role.MEMBER, uses=uses, hours=hours, now=NOW, by=None, origin="terminal")
    assert _state(db) == ([], [], [])
