"""Attacks of a bot author with the docs and the code, fifth round: the HTTP upload path of a real
club server and ``arena tournament --cluster``. Each test is an attack that worked before its fix,
written from the attacker's side.

* A slow upload: headers and the start of a multipart body, then one byte a second. The server
  took one of its ``--uploads-at-once`` (4) slots before reading the body and read it with no
  deadline, so four such connections, from one address and with no account, held every slot
  for as long as they liked: every member's upload was answered 503 (seen on a real ``arena
  serve --allow-submit``, three honest uploads over 45 s, all 503). Now one sender (account, or
  address when anonymous) holds at most one slot, and an upload's body must arrive within the
  read deadline (``--read-timeout``) or it is answered 408 and its slot given back.
* A version holding ``@``. A bot's name may not hold one, but its version may (any printable
  text), and the owner of a label was looked up by the text before its *last* ``@``. A member
  who owns ``a1`` and uploads ``yy`` at version ``1@mallory`` with ``author = "mallory"`` (placed
  on a real server: label ``yy@1@mallory``) had that bot counted as mallory's under
  ``one_seat_per_author``, so two of one person's bots could share a strangers' table; the same
  lookup kept the owner from the bot's private lines, its bench rows and its notifications. The
  name of a label is now the text before its first ``@``, in one function every lookup uses.
* A full disk while a submission ran (a real server whose store's disk filled during the check):
  the check failed with "database or disk is full", and so did the write that ends the job, so
  it stayed ``running``, owned by a live server. A server never takes back its own job, and one
  job runs at a time on a store: once the disk was free again, another member's upload waited
  "1 ahead" for good, until the server was restarted. Between jobs, a job the server itself
  still holds as running is now one it failed to end, and is put back (or refunded) like a dead
  server's.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import trio
import trio.testing

from arena.serve.app import Options, build_app
from arena.store.people import Role, claim_bot, create_invitation, sign_up

BOUNDARY = "xx7MA4YWxk"
HEAD = (f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="bot"; filename="a.zip"\r\n'
        f"Content-Type: application/zip\r\n\r\n").encode()


def _scope(address: str) -> dict:
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
            "scheme": "http", "path": "/submit", "raw_path": b"/submit", "query_string": b"", "root_path": "",
            "client": (address, 40000), "server": ("127.0.0.1", 8000),
            "headers": [(b"host", b"127.0.0.1:8000"),
                        (b"content-type", f"multipart/form-data; boundary={BOUNDARY}".encode()),
                        (b"content-length", b"200000")]}


async def trickle(app, answers: dict[str, list[int]], name: str, address: str, chunks: list[bytes], pause: float,
                  headers: list[tuple[bytes, bytes]] | None = None) -> None:
    """An upload from ``address`` sent straight to the ASGI ``app``: ``chunks`` one by one, ``pause``
    seconds apart, then silence; each status it is answered is added to ``answers[name]``."""
    async def receive() -> dict:
        if not chunks:
            await trio.sleep_forever()
        if pause:
            await trio.sleep(pause)
        chunk = chunks.pop(0)
        return {"type": "http.request", "body": chunk, "more_body": bool(chunks) or pause > 0}

    async def send(message: dict) -> None:
        if message["type"] == "http.response.start":
            answers.setdefault(name, []).append(message["status"])
    scope = _scope(address)
    scope["headers"] = scope["headers"] + (headers or [])
    await app(scope, receive, send)


def _honest_body() -> bytes:
    return (f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="token"\r\n\r\nwrong\r\n'.encode() + HEAD
            + b"PK\x03\x04" + b"\r\n" + f"--{BOUNDARY}--\r\n".encode())


def test_slow_uploads_cannot_hold_the_upload_slots(tmp_path: Path) -> None:
    """What must be refused: a second upload still arriving from a sender that is sending one (429
    at once, holding no slot), and an upload whose body has not arrived within the read deadline
    (408, its slot given back). Four trickling senders, one of them opening four connections;
    an honest upload from a fifth address must be read (its wrong token: 403), not 503."""
    options = Options(store=tmp_path / "data" / "arena.sqlite", allow_submit=True, token="right",
                      read_timeout_s=30.0)
    answers: dict[str, list[int]] = {}
    app: list = []

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            app.append(build_app(options, nursery))
            for i in range(4):  # one address, four connections
                nursery.start_soon(trickle, app[0], answers, "same-address", "10.0.0.1", [HEAD] + [b"A"] * 100_000, 1.0)
            await trio.sleep(0.5)  # first: senders with no account share one slot (test_stranger_attacks21)
            for i in range(2, 5):  # three more addresses
                nursery.start_soon(trickle, app[0], answers, f"address-{i}", f"10.0.0.{i}", [HEAD] + [b"A"] * 100_000, 1.0)
            await trio.sleep(5)
            assert answers.get("same-address") == [429, 429, 429], answers  # the others held no slot
            nursery.start_soon(trickle, app[0], answers, "honest-early", "10.0.0.9", [_honest_body()], 0.0)
            await trio.sleep(1)
            assert answers.get("honest-early") == [503], answers  # four slots held, for now
            await trio.sleep(30)  # past the read deadline: each trickle is answered and its slot freed
            for i in range(2, 5):
                assert answers.get(f"address-{i}") == [408], answers
            assert answers["same-address"] == [429, 429, 429, 408], answers
            nursery.start_soon(trickle, app[0], answers, "honest", "10.0.0.10", [_honest_body()], 0.0)
            await trio.sleep(5)
            assert answers.get("honest") == [403], answers  # read and judged, not turned away
            nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))



def _bot(folder: Path, name: str, version: str, author: str) -> str:
    folder.mkdir()
    (folder / "bot.toml").write_text(f'name = "{name}"\nversion = "{version}"\nauthor = "{author}"\n'
                                     'command = ["python3", "bot.py"]\n')
    (folder / "bot.py").write_text("")
    return str(folder)


def test_a_version_with_an_at_sign_is_still_its_owners_bot(tmp_path: Path) -> None:
    """What must hold: every version of a name alice owns counts as alice's at a strangers' table,
    whatever its version text or manifest author, and its private lines are hers to read."""
    from arena.serve.privacy import label_readable
    from arena.tournament.config import load_bots, load_config
    from arena.tournament.run import table_authors
    from arena.tournament.schedule import schedule
    from arena.tournament.store import Store
    bots = [_bot(tmp_path / "a", "a1", "1", "alice"), _bot(tmp_path / "y", "yy", "1@mallory", "mallory"),
            _bot(tmp_path / "b", "b1", "1", "bob")]
    store = Store(tmp_path / "s.sqlite")
    try:
        code = create_invitation(store.db, Role.MEMBER, uses=1, hours=1, now=1.0, by=None, origin="test")
        alice = sign_up(store.db, code, "alice", "h", now=2.0, origin="test")
        for name in ("a1", "yy"):
            claim_bot(store.db, name, alice, taken=False, now=3.0, origin="test")
        cfg = load_config(None, {"bots": bots, "one_seat_per_author": True, "accept_kernel_channels": True,
                                 "seats": 2})
        specs = load_bots(cfg)
        authors = table_authors(specs, store)
    finally:
        store.close()
    assert authors == {"a1@1": "alice", "yy@1@mallory": "alice", "b1@1": "bob"}
    tables = {frozenset(g.seats) for g in schedule(cfg, {r: s.label for r, s in specs.items()}, b"k" * 32, authors)}
    assert frozenset({"a1@1", "yy@1@mallory"}) not in tables
    assert label_readable("yy@1@mallory", {"yy": "alice"}, "alice")
    assert not label_readable("yy@1@mallory", {"yy": "alice", "yy@1": "bob"}, "bob")


def test_a_job_the_server_could_not_end_does_not_stop_the_queue(tmp_path: Path) -> None:
    """What must hold: between jobs, a job this server left running (its end not written: the disk
    was full) is put back and run again, and the next member's job runs after it; it never holds
    the queue while the server lives."""
    from arena.serve.submit import _next
    from arena.store import jobs as queue
    from arena.store.schema import connect
    from arena.tournament.store import create_private_store
    store = tmp_path / "data" / "arena.sqlite"
    create_private_store(store)
    db = connect(store)
    limits = queue.Limits(per_submitter=2, total=10, per_day=10)
    me = queue.server_id()
    try:
        for i, who in enumerate(("account:1", "account:2")):
            queue.enqueue(db, queue.Job(f"job{i}", who, "tiny", f"b{i}@1", "b.zip", str(tmp_path / f"u{i}")),
                          limits, float(i))
        stuck = queue.claim(db, time.time(), owner=me)  # a fresh heartbeat: its lease has not passed
        assert stuck is not None and stuck.id == "job0"
        # its run ended and the write that ends it failed: nothing more is written for it
        again = _next(db, me)
        assert again is not None and again.id == "job0" and again.attempts == 2, again
        queue.finish(db, again, queue.Outcome.PLACED, time.time())
        after = _next(db, me)
        assert after is not None and after.id == "job1"
    finally:
        db.close()


def _tar(*members: tuple[object, bytes], gz: bool = True) -> bytes:
    import gzip
    import io
    import tarfile
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo("bot.toml")
        manifest = b'name = "t"\ncommand = ["python3", "bot.py"]\n'
        info.size = len(manifest)
        tar.addfile(info, io.BytesIO(manifest))
        for info, data in members:
            tar.addfile(info, io.BytesIO(data))  # type: ignore[arg-type]
    raw = out.getvalue()
    return gzip.compress(raw) if gz else raw


def _gnu_sparse(real_size: int) -> bytes:
    """A GNU sparse entry: 512 bytes of data that unpack to ``real_size`` bytes."""
    import gzip
    import tarfile
    head = _tar(gz=False)[:1024]  # bot.toml's header and its one block of data
    info = tarfile.TarInfo("sparse")
    info.size, info.type = 512, tarfile.GNUTYPE_SPARSE
    block = bytearray(info.tobuf(tarfile.GNU_FORMAT))
    block[386:398] = b"%011o\0" % (real_size - 512)  # one run of data, at the end
    block[398:410] = b"%011o\0" % 512
    block[483:495] = b"%011o\0" % real_size           # the size it unpacks to
    block[148:156] = b" " * 8
    block[148:156] = b"%06o\0 " % sum(block[:512])
    return gzip.compress(head + bytes(block) + b"x" * 512 + b"\0" * 1024)


def _pax(name: str, headers: dict[str, str], data: bytes) -> tuple[object, bytes]:
    import tarfile
    info = tarfile.TarInfo(name)
    info.size, info.pax_headers = len(data), headers
    return info, data


@pytest.mark.parametrize("archive, said", [
    (_gnu_sparse(2**30), "more than 20 MB once unpacked"),
    (_tar(_pax("ok", {"path": "../../out"}, b"x")), "leaves its folder"),
    (_tar(_pax("lie", {"size": str(2**40)}, b"12345")), "more than 20 MB once unpacked"),
], ids=["gnu-sparse-1GiB", "pax-path-dotdot", "pax-size-1TiB"])
def test_tar_headers_that_lie_are_refused_before_anything_is_written(tmp_path: Path, archive: bytes,
                                                                     said: str) -> None:
    """Held on a real server (kept as a cheap regression): what a tar's later headers say (a GNU
    sparse map, a pax path or size) is judged like its plain header, before anything is written."""
    from arena.serve.upload import UploadError, unpack
    with pytest.raises(UploadError, match=said):
        unpack(archive, tmp_path / "u", max_files=200, max_bytes=20 * 2**20)
    assert not (tmp_path / "u").exists() and not (tmp_path.parent / "out").exists()
