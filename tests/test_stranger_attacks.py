"""What a stranger on a club server tried, each held by a test that failed before its fix.

The attacks of the last walk (issue 35) that got through: a bot name of the server's own ladders
claimed by a member before the ladder had played a game.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="arena serve needs the serve extra: pip install 'palace-arena[serve]'")
pytest.importorskip("argon2", reason="accounts need the serve extra: pip install 'palace-arena[serve]'")

from tests.test_serve_accounts import _rows, _upload, submit_club  # noqa: F401  (the fixture)

OWNERS = "SELECT b.name, a.name FROM bot_owners b JOIN accounts a ON a.id=b.account ORDER BY b.name"


def test_a_member_cannot_claim_a_reference_bot_of_a_ladder_not_yet_played(submit_club) -> None:  # noqa: F811
    """The server offers classic-2p (random, lowest, highest, heuristic), which has played no game in
    this store. A member who uploaded a bot named ``heuristic`` became the owner of that name: its
    next version on the standings, the reference bot's private lines on every game page. Each name
    a ladder file of the server lists, and each bundled bot's, is the organiser's."""
    store, _, _, bob = submit_club
    uploads = store.parent / "uploads"
    for name in ("heuristic", "random", "ismcts"):  # on classic-2p; bundled but on no ladder here
        status, _, page = _upload(bob, name, "9.0", "bob")
        assert status == 403 and "not yours" in page, (name, status, page[-2000:])
    assert _rows(store, OWNERS) == []
    assert not [p.name for p in uploads.iterdir() if not p.name.startswith(".")]  # nothing of them kept
    status, _, page = _upload(bob, "bobs-own", "1.0", "bob")  # a name nobody has is still his to take
    assert status == 303, page[-2000:]
    assert _rows(store, OWNERS) == [("bobs-own", "bob")]
