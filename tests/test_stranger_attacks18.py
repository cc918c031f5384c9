"""#35, the sixth outside round (ladders, a cluster worker killed mid-game, the server's log): what a
visitor's numbers do to the server. A whole number past SQLite's 64 bits in a query or a path reached
the store and came back as a 500, with a traceback on the operator's terminal per request: anyone
could fill the server's log for free. Such a number now reads as no number (the page as without it;
a season or a token that cannot exist is not found).
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="arena serve needs the serve extra: pip install 'palace-arena[serve]'")
pytest.importorskip("argon2", reason="accounts need the serve extra: pip install 'palace-arena[serve]'")

from tests.test_serve import LADDER, ServerProc, build_store  # noqa: E402
from tests.test_serve_accounts import MANY_WRITES, invite, sign_up  # noqa: E402

HUGE = "9" * 23  # past 2**63: SQLite cannot hold it


def test_a_visitors_number_past_the_stores_integers_is_no_500_and_no_traceback_in_the_log(tmp_path: Path) -> None:
    store = tmp_path / "data" / "arena.sqlite"
    build_store(store)
    server = ServerProc(store, "--allow-play", *MANY_WRITES)
    try:
        for path in (f"/games?min_turns={HUGE}", f"/games?max_turns=-{HUGE}", f"/games?page={HUGE}",
                     f"/games?page={2**62}", f"/?page={HUGE}"):  # a page times its size past 2**63, too
            status, _, body = server.get(path)
            assert status == 200, (path, status)
            assert b"Traceback" not in body
        for path in (f"/ladders/{LADDER}/seasons/{HUGE}", f"/ladders/{LADDER}/seasons/{HUGE}/commitment.txt"):
            status, _, body = server.get(path)  # a season number past the store's integers: no such season
            assert status == 404, (path, status)
        alice, status, where = sign_up(server, invite(store), "alice-a21d")
        assert (status, where) == (303, "/account")
        for tid in (HUGE, f"-{HUGE}", "x"):  # a logged-in person's revoke with a token id no store holds
            status, _, _ = alice.post(f"/account/tokens/{tid}/revoke", {"csrf": alice.csrf("/account")})
            assert status == 404, (tid, status)
        assert "Traceback" not in server.stderr() and "ERROR" not in server.stderr(), server.stderr()[-3000:]
    finally:
        server.stop()
