"""``one_seat_per_author`` left out of a ladder file: the store decides. A club's store (one with an
account: docs/CLUB.md) turns it on, so such a ladder needs gVisor, the kernel channels accepted, or
the rule turned off by name; one person's store leaves it off. The terminal (``arena ladder``) and
the server (``arena serve``: its banner, /submit, uploads, the ladder page) resolve one ladder on
one store alike, through the one loader (arena.ladder.config.load_ladder)."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from arena.ladder import LadderError, SeatRule, SeatsRefused, load_ladder
from arena.store.people import Role, create_invitation, sign_up
from arena.tournament.store import Store

FIXTURE_V0 = Path(__file__).resolve().parent / "fixtures" / "store_v0.sqlite"
PLAIN = 'rules = "classic"\nseats = 2\nbots = ["random", "lowest"]\n'


def _club(store: Path, *, account: bool = True) -> Path:
    """A store with one account in it (``account=False``: an invitation only)."""
    db = Store(store)
    try:
        code = create_invitation(db.db, Role.ADMIN, uses=1, hours=1, now=time.time(), by=None, origin="test")
        if account:
            sign_up(db.db, code, "organiser", "not-a-real-hash", now=time.time(), origin="test")
    finally:
        db.close()
    return store


def _ladder(folder: Path, name: str, extra: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.toml"
    path.write_text(PLAIN + extra)
    return path


# --------------------------------------------------------------------------- the loader

def test_left_out_the_rule_is_off_in_ones_own_store_and_on_in_a_clubs(tmp_path: Path) -> None:
    path = _ladder(tmp_path / "ladders", "open")
    plain = Store(tmp_path / "plain" / "arena.sqlite")
    plain.close()
    old = tmp_path / "v0.sqlite"
    old.write_bytes(FIXTURE_V0.read_bytes())
    for store in (tmp_path / "none" / "arena.sqlite", plain.path, old):  # no file, no account, from before accounts
        lad = load_ladder(path, store=store)
        assert (lad.one_seat_per_author, lad.seat_rule) == (False, SeatRule.DESK), store
    assert not (tmp_path / "none").exists()  # asking wrote nothing
    invited = _club(tmp_path / "invited" / "arena.sqlite", account=False)  # an invitation is no account yet
    assert load_ladder(path, store=invited).seat_rule is SeatRule.DESK
    club = _club(tmp_path / "club" / "arena.sqlite")
    with pytest.raises(SeatsRefused) as refused:
        load_ladder(path, store=club)
    assert refused.value.ladder.seat_rule is SeatRule.CLUB and refused.value.ladder.one_seat_per_author


def test_the_clubs_refusal_is_one_line_naming_the_three_ways(tmp_path: Path) -> None:
    path = _ladder(tmp_path / "ladders", "open")
    club = _club(tmp_path / "club" / "arena.sqlite")
    with pytest.raises(LadderError) as refused:
        load_ladder(path, store=club)
    text = str(refused.value)
    assert "\n" not in text
    assert text.startswith(f"{path}: this store is a club's (it has accounts), so one_seat_per_author is on by "
                           "default, and it seats strangers' bots: outside gVisor two seats can still pass bits")
    assert text.endswith("Set one of these in the ladder file: gvisor = true (every seat in its own kernel), "
                         "accept_kernel_channels = true (accept those channels by name), or one_seat_per_author = "
                         "false (the organiser lets one author's bots share a table)")


def test_a_clubs_ladder_is_played_by_each_of_the_three_ways(tmp_path: Path) -> None:
    club = _club(tmp_path / "club" / "arena.sqlite")
    folder = tmp_path / "ladders"
    shared = load_ladder(_ladder(folder, "shared", "one_seat_per_author = false\n"), store=club)
    assert (shared.one_seat_per_author, shared.seat_rule) == (False, SeatRule.FILE)
    assert shared.seat_rule_text == "one_seat_per_author: off (set in the ladder file)"
    accepted = load_ladder(_ladder(folder, "accepted", "accept_kernel_channels = true\n"), store=club)
    assert (accepted.one_seat_per_author, accepted.seat_rule, accepted.channels_accepted) == (True, SeatRule.CLUB, True)
    assert "on (the club's default" in accepted.seat_rule_text
    sealed = load_ladder(_ladder(folder, "sealed", "gvisor = true\n"), store=club)
    assert (sealed.one_seat_per_author, sealed.seat_rule) == (True, SeatRule.CLUB)
    said = load_ladder(_ladder(folder, "said", "one_seat_per_author = true\naccept_kernel_channels = true\n"),
                       store=tmp_path / "plain.sqlite")  # said by the file: the store has no say
    assert (said.one_seat_per_author, said.seat_rule) == (True, SeatRule.FILE)


def test_the_stores_copy_of_the_file_leaves_the_rule_to_the_store_as_the_file_did(tmp_path: Path) -> None:
    from arena.ladder.config import ladder_toml
    club = _club(tmp_path / "club" / "arena.sqlite")
    folder = tmp_path / "ladders"
    lad = load_ladder(_ladder(folder, "open", "gvisor = true\n"), store=club)
    copy = tmp_path / "copy" / "open.toml"
    copy.parent.mkdir()
    copy.write_text(ladder_toml(lad, lad.bots))
    assert "one_seat_per_author" not in copy.read_text()
    assert load_ladder(copy, store=club).seat_rule is SeatRule.CLUB
    assert load_ladder(copy, store=tmp_path / "plain.sqlite").seat_rule is SeatRule.DESK
    shared = load_ladder(_ladder(folder, "shared", "one_seat_per_author = false\n"), store=club)
    copy.write_text(ladder_toml(shared, shared.bots))
    assert load_ladder(copy, store=club).seat_rule is SeatRule.FILE


def test_a_store_that_cannot_be_read_is_said_not_guessed(tmp_path: Path) -> None:
    path = _ladder(tmp_path / "ladders", "open")
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"not a database at all" * 100)
    with pytest.raises(LadderError, match=r"one_seat_per_author is not set, and whether .*bad\.sqlite is a club's "
                                          r"store cannot be read"):
        load_ladder(path, store=bad)
    assert load_ladder(_ladder(tmp_path / "ladders", "shared", "one_seat_per_author = false\n"), store=bad)


# --------------------------------------------------------------------------- the terminal and the server, one store

def _show(ladder: Path, store: Path) -> subprocess.CompletedProcess:
    """``arena ladder show --json``, in this process: what it says (a refused command's exit status
    and one clean line in a real process: the refused server's test below)."""
    from tests.checks import arena_here
    code, out, err = arena_here("ladder", "show", str(ladder), "--store", str(store), "--no-seed", "--json")
    return subprocess.CompletedProcess([], code, out, err)


def _form(server) -> str:
    status, _, page = server.get(f"/submit?token={server.token}")
    assert status == 200, page
    return page.decode()


def _offered(page: str) -> list[str]:
    select = re.search(r'<select name="ladder">(.*?)</select>', page, re.S)
    assert select, page
    return re.findall(r"<option>([^<]+)</option>", select.group(1))


def _upload_raw(server, ladder: str) -> tuple[int, dict[str, str], bytes]:
    """The organiser's upload (the server's token, as the cookie ``?token=`` sets: a club's server
    takes no upload from a sender only its body could name) of a bot that fails its check."""
    from tests.test_serve import multipart, zip_bytes
    body, ctype = multipart({"ladder": ladder},
                            ("bot.zip", zip_bytes({"bot.toml": b'name = "mine"\nversion = "1"\ncommand = ["false"]\n'})))
    return server.request("POST", "/submit", body, {"Content-Type": ctype, "Cookie": f"arena_token={server.token}"})


def _upload(server, ladder: str) -> tuple[int, str]:
    status, _, page = _upload_raw(server, ladder)
    return status, page.decode()


def test_the_terminal_and_the_server_resolve_one_ladder_on_one_store_alike(tmp_path: Path) -> None:
    pytest.importorskip("starlette", reason="arena serve needs the serve extra: pip install 'palace-arena[serve]'")
    from tests.test_serve import LADDER, ServerProc, _finished, build_store
    folder = tmp_path / "ladders"
    open_ = _ladder(folder, "open")  # says nothing: the store decides
    _ladder(folder, "shared", "one_seat_per_author = false\n")
    shown = _ladder(folder, LADDER, "accept_kernel_channels = true\n")  # the ladder with games in the stores
    plain, club = tmp_path / "plain" / "arena.sqlite", tmp_path / "club" / "arena.sqlite"
    build_store(plain)
    build_store(club)
    _club(club)

    # the terminal
    desk = _show(open_, plain)
    assert desk.returncode == 0, desk.stderr
    assert (json.loads(desk.stdout)["one_seat_per_author"], json.loads(desk.stdout)["one_seat_per_author_from"]) == \
        (False, "desk")
    refused = _show(open_, club)
    lines = refused.stderr.strip().splitlines()
    assert refused.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), refused.stderr
    assert "this store is a club's (it has accounts), so one_seat_per_author is on by default" in lines[0]
    on = _show(shown, club)
    assert on.returncode == 0, on.stderr
    assert (json.loads(on.stdout)["one_seat_per_author"], json.loads(on.stdout)["one_seat_per_author_from"]) == \
        (True, "club")

    # the server on the club's store: it starts, says which ladder it cannot play, offers the others
    server = ServerProc(club, "--allow-submit", "--ladders", str(folder))
    try:
        said = [line for line in server.banner if "cannot be played on this store" in line]
        assert len(said) == 1 and said[0].startswith("ladder open ") and "one_seat_per_author = false" in said[0], \
            server.banner
        page = _form(server)
        assert sorted(_offered(page)) == sorted(["shared", LADDER])
        refusal = re.search(r'<section id="submit-refused">(.*?)</section>', page, re.S)
        assert refusal and "<b>open</b>" in refusal.group(1) and "club&#39;s (it has accounts)" in refusal.group(1)
        assert str(folder) not in page  # the server's paths stay hidden
        status, answer = _upload(server, "open")
        assert status == 400 and "ladder &#39;open&#39; takes no submissions: " in answer
        assert "one_seat_per_author = false" in answer
        status, _, ladder_page = server.get(f"/ladders/{LADDER}")
        assert status == 200
        assert "one_seat_per_author: on (the club&#39;s default" in ladder_page.decode()
        status, headers, _ = _upload_raw(server, LADDER)  # its job loads the ladder on the server's store too
        assert status == 303, headers
        job = _finished(server, headers["location"]).decode()
        assert 'data-status="check failed"' in job and "one_seat_per_author: on (the club&#39;s default" in job
    finally:
        server.stop()

    # the server on one person's store: the same files, the rule off where they say nothing
    server = ServerProc(plain, "--allow-submit", "--ladders", str(folder))
    try:
        said = [line for line in server.banner if "cannot be played on this store" in line]
        assert [line.split()[1] for line in said] == [LADDER], server.banner  # acceptance with no strangers
        assert sorted(_offered(_form(server))) == ["open", "shared"]
    finally:
        server.stop()


def test_a_server_started_with_a_refused_ladder_to_play_stops_with_the_reason(tmp_path: Path) -> None:
    pytest.importorskip("starlette", reason="arena serve needs the serve extra: pip install 'palace-arena[serve]'")
    from tests.test_serve import arena_cmd
    folder = tmp_path / "ladders"
    _ladder(folder, "open")
    club = _club(tmp_path / "club" / "arena.sqlite")
    out = subprocess.run(arena_cmd("serve", "--store", str(club), "--port", "0", "--ladders", str(folder),
                                   "--ladder", "open"), capture_output=True, text=True, timeout=120)
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1, out.stderr
    assert lines[0].startswith("error: ") and "club's (it has accounts)" in lines[0] and "Traceback" not in out.stderr


def test_the_initial_bots_a_ladder_file_names_stay_the_organisers(tmp_path: Path) -> None:
    """A member may not take the name of an initial bot that a ladder file names by folder (the
    organiser's, not a bundled one), before the ladder has played: in one person's store, where the
    ladder is offered, and in a club's store, where its seat rule refuses it, since once the
    organiser fixes the file that bot would be theirs (its next version, its private lines)."""
    from arena.serve.submit import _organisers_names
    bot = tmp_path / "club-ref"
    bot.mkdir()
    (bot / "bot.toml").write_text('name = "club-reference"\nversion = "1"\ncommand = ["true"]\n')
    ladders = tmp_path / "ladders"
    ladders.mkdir()
    (ladders / "club.toml").write_text(f'rules = "classic"\nseats = 2\nbots = ["{bot}", "random"]\n')
    names = _organisers_names(ladders, tmp_path / "arena.sqlite")
    assert {"club-reference", "random", "heuristic"} <= names and "club-ref" not in names
    club = _club(tmp_path / "club" / "arena.sqlite")
    with pytest.raises(SeatsRefused):
        load_ladder(ladders / "club.toml", store=club)
    assert "club-reference" in _organisers_names(ladders, club)


def test_club_store_reads_without_writing(tmp_path: Path) -> None:
    from arena.store.games import club_store
    old = tmp_path / "v0.sqlite"
    old.write_bytes(FIXTURE_V0.read_bytes())
    assert club_store(old) is False and old.read_bytes() == FIXTURE_V0.read_bytes()  # not upgraded
    club = _club(tmp_path / "club" / "arena.sqlite")
    assert club_store(club) is True
    conn = sqlite3.connect(club)
    conn.execute("DELETE FROM audit")
    conn.execute("DELETE FROM accounts")
    conn.commit()
    conn.close()
    assert club_store(club) is False


def test_a_run_begun_in_ones_own_store_stops_before_a_batch_once_the_store_is_a_clubs(tmp_path: Path) -> None:
    """An `arena ladder run` (or `arena serve --ladder`) started before the first sign-up played the
    file's silence as "off"; after it, strangers' bots may join, so the run stops before its next
    batch instead of seating them under the rule it began with."""
    import trio

    from arena.ladder import open_store, run_ladder
    from tests.test_ladder import ctx
    path = _ladder(tmp_path / "ladders", "early", f'store = "{tmp_path / "data" / "arena.sqlite"}"\n'
                                                  'max_turns = 200\nconcurrency = 1\ndeals = 1\n')
    ladder = load_ladder(path)
    assert ladder.seat_rule is SeatRule.DESK
    store = open_store(ladder)
    batches: list[int] = []

    def on_batch(summary, table, number: int) -> None:
        batches.append(number)
        if len(batches) == 1:
            _club(store.path)  # the first account, made while the run plays

    try:
        with pytest.raises(LadderError, match=r"this store became a club's .* the run stopped before its next batch"):
            trio.run(lambda: run_ladder(ladder, store, ctx(), games=8, on_batch=on_batch))
    finally:
        store.close()
    assert batches == [0]
