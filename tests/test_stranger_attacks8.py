"""#35 again, as an attacking author with the docs and the code: what was still unattacked.

The upload workers (``arena/serve/unpacker.py``): a process for each upload that reads its hostile archive with C
decompressors. What an archive can make them do is held in test_uploads.py; here, what a worker
could reach if an archive ever made it run code of its own (a decompressor's bug), and a second
round of hostile archives through the confined worker. Then the per-seat copies of the shared
folders a gVisor seat is served from (``gvisor.seat_copy``): the files are hard links to the
shared originals, one inode, so a seat that could write, chmod or link through its copy would
reach every other seat.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tarfile
import tempfile
import textwrap
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="arena serve needs the serve extra: pip install 'palace-arena[serve]'")

from arena.serve import unpacker
from arena.serve.upload import UploadError, unpack
from tests.checks import bwrap_or_skip
from tests.test_serve import LIMITS, MANIFEST, zip_bytes

# What the probe tries; written here, not read from the confinement's own argv.
REACH = textwrap.dedent("""\
    import json, os, socket, sys
    header = json.loads(sys.stdin.buffer.readline())
    sys.stdin.buffer.read(header["size"])
    reach = {}
    def tried(name, fn):
        try:
            fn()
            reach[name] = "done"
        except OSError as e:
            reach[name] = e.strerror or type(e).__name__
    tried("store secret", lambda: open(SECRET).read())
    tried("store database", lambda: open(DATABASE, "rb").read())
    tried("another folder, read", lambda: open(os.path.join(ELSEWHERE, "notes.txt")).read())
    tried("another folder, write", lambda: open(os.path.join(ELSEWHERE, "planted"), "w").write("x"))
    tried("network", lambda: socket.create_connection(("127.0.0.1", PORT), timeout=5).close())
    tried("another upload, read", lambda: open(os.path.join(OTHER, "bot.toml")).read())
    tried("another upload, write", lambda: open(os.path.join(OTHER, "bot.py"), "w").write("planted"))
    tried("its own upload", lambda: open(header["dest"] + "/f", "w").write("x"))
    reach["server's token"] = "done" if "ARENA_TOKEN" in os.environ else "absent"
    print(json.dumps({"refused": json.dumps(reach)}), flush=True)
""")


def test_an_upload_worker_reaches_nothing_but_its_own_uploads_folder(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker's own program swapped for one that tries what code run by a hostile archive would
    try, started as the server starts its workers. It may write its upload's folder and nothing
    else: not read the store's secret key or database beside the uploads folder, not read or write
    another member's upload waiting beside it, nor another folder of the server's user, not connect
    to a port on the host, not see the server's environment. Planted (``confined`` returning the
    worker's argv as it is): every one of them was done; planted (the whole uploads folder bound,
    as it once was): the other upload was read and written."""
    import trio
    store = tmp_path / "arena-data"
    uploads = store / "uploads"
    uploads.mkdir(parents=True)
    (store / "secret.key").write_text("the deals' secret")
    (store / "arena.sqlite").write_bytes(b"SQLite format 3\0")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "notes.txt").write_text("the server user's own files")
    listener = socket.create_server(("127.0.0.1", 0))
    listener.setblocking(False)
    port = listener.getsockname()[1]
    other = uploads / "other-job"  # another member's upload, waiting in the queue
    other.mkdir()
    (other / "bot.toml").write_text("name = 'victim'\n")
    code = f"SECRET, DATABASE, ELSEWHERE, OTHER, PORT = {str(store / 'secret.key')!r}, " \
           f"{str(store / 'arena.sqlite')!r}, {str(elsewhere)!r}, {str(other)!r}, {port}\n" + REACH
    monkeypatch.setattr(unpacker, "WORKER", [sys.executable, "-c", code])
    monkeypatch.setenv("ARENA_TOKEN", "the organiser's token")
    bwrap_or_skip("bubblewrap cannot run here: the worker runs as the server's user (the log says so)")

    async def main() -> str:
        with pytest.raises(UploadError) as answer:
            await unpacker.unpack_apart(zip_bytes({"bot.toml": MANIFEST}), uploads / "job", **LIMITS)
        return str(answer.value)
    reach = json.loads(trio.run(main))
    try:
        listener.accept()[0].close()
        connected = True
    except BlockingIOError:
        connected = False
    finally:
        listener.close()
    assert reach.pop("its own upload") == "done"
    # a worker writes into a tmpfs of its own (no upload is taken where none can be made), read back
    # only from an answered bot
    assert not (uploads / "job" / "f").exists()
    assert {k: v for k, v in reach.items() if v == "done"} == {} and not connected, reach
    assert not (elsewhere / "planted").exists() and not (other / "bot.py").exists()
    assert (store / "secret.key").read_text() == "the deals' secret"


def _many_entries(n: int) -> bytes:
    """A zip whose central directory names ``n`` entries, every one pointing at the same local
    header: 47 bytes an entry, so a 2 MB upload is 40,000 of them for zipfile to parse."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("a", b"")
    data = buf.getvalue()
    at = data.find(b"PK\x01\x02")
    local, one = data[:at], data[at:data.find(b"PK\x05\x06")]
    entries = one * n
    end = struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, min(n, 0xFFFF), min(n, 0xFFFF), len(entries), len(local), 0)
    return local + entries + end


def _zip(files: list[tuple[str, bytes]], method: int = zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", method) as zf:
        for name, content in files:
            zf.writestr(name, content)
    return buf.getvalue()


def _tar(files: list[tuple[str, bytes]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for name, content in files:
            info = tarfile.TarInfo(name)
            info.size = len(content)
            tf.addfile(info, io.BytesIO(content))
    return buf.getvalue()


HOSTILE = {  # what each must be refused for, in the unpacker's words
    "bzip2 bomb": (_zip([("bot.toml", MANIFEST), ("big", b"\0" * (3 << 20))], zipfile.ZIP_BZIP2), "once unpacked"),
    "lzma bomb": (_zip([("bot.toml", MANIFEST), ("big", b"\0" * (3 << 20))], zipfile.ZIP_LZMA), "once unpacked"),
    "40,000 entries": (_many_entries(40_000), "more than 50 files"),
    "a name twice, once as ./": (_zip([("bot.toml", MANIFEST), ("b.py", b"1"), ("./b.py", b"2")]), "appears twice"),
    "a folder, then a file of its name": (_zip([("bot.toml", MANIFEST), ("a/b", b"1"), ("a", b"2")]),
                                          "appears twice"),
    "a file, then a folder of its name": (_zip([("bot.toml", MANIFEST), ("a", b"1"), ("a/b", b"2")]),
                                          "inside a file"),
    "zip cut short": (_zip([("bot.toml", MANIFEST), ("b.py", os.urandom(5000))])[:-100], "not a readable zip"),
    "tar cut short": (_tar([("bot.toml", MANIFEST), ("b.py", os.urandom(5000))])[:3000], "damaged"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_more_hostile_archives_are_refused_by_the_confined_worker_as_in_process(tmp_path: Path, case: str) -> None:
    """Bombs in the other two compressions zipfile reads, a central directory of 40,000 entries,
    names that collide once normalised or as file and folder, archives cut short: each one refusal
    in the unpacker's words from the worker (under bubblewrap where it runs), the same in process,
    and nothing left of it."""
    import trio
    archive, words = HOSTILE[case]
    with pytest.raises(UploadError, match=words) as here:
        unpack(archive, tmp_path / "here", **LIMITS)
    with pytest.raises(UploadError) as apart:
        trio.run(lambda: unpacker.unpack_apart(archive, tmp_path / "job", **LIMITS))
    assert str(apart.value) == str(here.value)
    assert not (tmp_path / "here").exists()
    assert not (tmp_path / "job").exists() or not any((tmp_path / "job").iterdir())  # the caller removes it


LONG_NUMBER = b'name = "upl"\nversion = "1.0"\ncommand = ["python3", "bot.py"]\nx = ' + b"9" * 4400 + b"\n"


def test_a_number_past_pythons_digit_limit_in_bot_toml_is_the_bots_refusal(tmp_path: Path) -> None:
    """tomllib converts an integer with ``int()``, which refuses more than 4,300 digits with a bare
    ``ValueError`` that the manifest's reader did not catch: ``arena check`` said "an arena bug"
    (exit 70), and an upload's worker crashed on it (the arena's 500, the worker killed). Now it is
    the manifest's refusal, in one line, through the worker as in process. Planted (the reader's
    ``except ValueError`` removed): the check exits 70 and the worker is lost."""
    import subprocess

    import trio
    bot = tmp_path / "bot"
    bot.mkdir()
    (bot / "bot.toml").write_bytes(LONG_NUMBER)
    (bot / "bot.py").write_text("print(1)\n")
    checked = subprocess.run([sys.executable, "-m", "arena.cli", "check", str(bot)], capture_output=True,
                             text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})
    assert checked.returncode == 2, checked.stderr
    assert checked.stderr.strip().splitlines() == [
        f"error: {bot / 'bot.toml'}: not valid TOML: Exceeds the limit (4300 digits) for integer string conversion: "
        "value has 4400 digits"], checked.stderr
    archive = zip_bytes({"bot.toml": LONG_NUMBER, "bot.py": b"print(1)\n"})
    with pytest.raises(UploadError, match=r"bot.toml: not valid TOML: Exceeds the limit \(4300 digits\)"):
        trio.run(lambda: unpacker.unpack_apart(archive, tmp_path / "job", **LIMITS))


def _gvisor_problem() -> str | None:
    from arena.bots import probes
    return probes.gvisor_problem_now()


needs_gvisor = pytest.mark.skipif(_gvisor_problem() is not None, reason="gVisor cannot run here")

THROUGH_THE_LINK = textwrap.dedent("""\
    import json, os, sys
    out = {}
    for t in sys.argv[1:]:
        tried = out[t] = {}
        def attempt(name, fn):
            try:
                fn()
                tried[name] = "done"
            except OSError as e:
                tried[name] = e.strerror
        attempt("append", lambda: open(t, "ab").write(b"x"))
        attempt("truncate", lambda: os.truncate(t, 0))
        attempt("chmod", lambda: os.chmod(t, 0o777))
        attempt("set its times", lambda: os.utime(t, (0, 0)))
        attempt("rename", lambda: os.rename(t, t + ".moved"))
        attempt("unlink", lambda: os.unlink(t))
        attempt("link it into /tmp", lambda: os.link(t, "/tmp/kept"))
        attempt("link it beside", lambda: os.link(t, t + ".2"))
        attempt("set an attribute", lambda: os.setxattr(t, "user.mark", b"1"))
    print(json.dumps(out), flush=True)
""")


@needs_gvisor
def test_a_gvisor_seat_cannot_write_through_its_hard_linked_view(tmp_path: Path) -> None:
    """A seat's copy of a shared folder is its own folders holding hard links to the shared files:
    one inode with the original and every other seat's copy. From inside the seat, every way to
    change a file through its link (write, truncate, chmod, times, rename, unlink, another link
    to it, an attribute) is refused, for a system file and for a file of a shared folder, and the
    originals are as they were, the shared folder's link count back to one when the seat is gone (a
    system file's is every live gVisor seat's on the machine, another test's too)."""
    from arena.bots.containment import Containment
    from arena.bots.start import start_bot
    from tests.checks import reachable
    shared = tmp_path / "shared"
    (shared / "sub").mkdir(parents=True)
    (shared / "sub" / "module.py").write_text("x = 1\n")
    bot = tmp_path / "bot"
    bot.mkdir()
    (bot / "probe.py").write_text(THROUGH_THE_LINK)
    bot, shared = reachable(bot), reachable(shared)
    targets = ["/usr/lib/python3.11/os.py", str(shared / "sub" / "module.py")]
    def state(t: str) -> tuple:  # a system file's link count moves with every gVisor seat on the machine
        st = os.stat(t)
        return Path(t).read_bytes(), st.st_mode, st.st_mtime_ns, st.st_nlink if t.startswith(str(shared)) else 0
    before = {t: state(t) for t in targets}
    with start_bot(["python3", "probe.py", *targets], bot, containment=Containment.GVISOR, ro_binds=[shared]) as proc:
        status, lines = proc.run_to_end(60)
    assert len(lines) == 1, (status, lines)
    done = {(t, what) for t, tried in json.loads(lines[0]).items() for what, how in tried.items() if how == "done"}
    assert done == set() and len(json.loads(lines[0])) == 2
    assert {t: state(t) for t in targets} == before


ATIME = textwrap.dedent("""\
    import os, sys
    def times():
        return " ".join(str(os.stat(k).st_atime_ns) for k in ("k0", "k1"))
    if sys.argv[1] == "send":
        sys.stdin.readline()
        open("k1").read()  # a 1 on k1, a 0 on k0
        print("sent", flush=True)
    else:
        print(times(), flush=True)
        sys.stdin.readline()
        print(times(), flush=True)
    sys.stdin.readline()
""")


@needs_gvisor
def test_two_gvisor_seats_of_one_bot_pass_nothing_through_their_folders_access_times(tmp_path: Path) -> None:
    """Every process of one bot in a run is served from the same copy of its folder (one copy a
    referee process). gVisor's gofer reads it through the host's files, and the bundle's read-only
    bind of it is gVisor's own: the host kernel moved a file's access time at the first read
    (relatime) and the bot's other processes saw it, a bit a file (10,000 files a folder may hold),
    kept after the reader's exit. That is what the pool's rule (no process sees a deal twice)
    stands against: duplicate deals replay a deal with the seats swapped, and the process in the
    second game would read the hand its twin held in the first, now its opponent's. The folder is
    now bound read-only on the host too, like the shared view: a seat reads k1 and its other seat
    sees the same times before and after. Planted (the bot's own bind left out of
    ``shared_binds``): k1's time moved."""
    import time

    from arena.bots.containment import Containment
    from arena.bots.start import start_bot
    from tests.checks import reachable
    bot = tmp_path / "bot"
    bot.mkdir()
    (bot / "seat.py").write_text(ATIME)
    for k in ("k0", "k1"):
        (bot / k).write_text("x")
        old = time.time() - 3 * 86400
        os.utime(bot / k, (old, old + 60))  # read since it was written: a read moves it under relatime too
    bot = reachable(bot)
    mine = f"palace-arena-home-r{os.getpid()}-"
    others = set(Path(tempfile.gettempdir()).glob(f"{mine}*gvisor*"))  # (another test's, if any)
    with start_bot(["python3", "seat.py", "receive"], bot, containment=Containment.GVISOR) as receiver, \
         start_bot(["python3", "seat.py", "send"], bot, containment=Containment.GVISOR) as sender:
        seen = receiver.receive_line(60)
        sender.send_line("go")
        assert sender.receive_line(60) == "sent"
        receiver.send_line("look")
        assert receiver.receive_line(60) == seen
        homes = sorted(set(Path(tempfile.gettempdir()).glob(f"{mine}*gvisor*")) - others)
        assert len(homes) == 2
        folders = {os.stat(home / "own").st_ino for home in homes} | {os.stat(bot).st_ino}
        assert len(folders) == 3, "two processes of one bot are served from one folder"
        for home in homes:  # each its own folder, of its own files with the same bytes
            assert os.stat(home / "own" / "k1").st_ino != os.stat(bot / "k1").st_ino
            assert (home / "own" / "k1").read_text() == "x"
        # and the bot's own files keep one name each while its seats live: the folder's reader
        # refuses a file with a second name, and a read of this folder now (another lane's check on
        # arrival, an `arena check`) refused the bot while the copies were hard links
        assert [os.stat(bot / k).st_nlink for k in ("seat.py", "k0", "k1")] == [1, 1, 1]


def test_a_seats_own_copy_follows_no_link_swapped_in_and_falls_back_whole(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The names a folder lacks, looked up, stay in the host's dentry cache keyed by that folder:
    two processes of one bot served from its one folder passed 0.2-0.5 bits/s through it
    (``bench_dentry_channel.py 80 200 600 --gvisor --median --own``: 0.946-0.957 after a 1, 0.968-1.000 after a 0),
    a store that outlives the sender, as the access times were. Each gVisor seat is now served its
    own copy (``gvisor.own_copy``: folders anew, files copied; the test above holds that two
    seats get two), walked by descriptors from the checked folder: a folder swapped for a link to
    a private folder after the check is copied as that link, never followed; and a copy that
    cannot be made (a full disk) leaves nothing, the seat then served the checked folder."""
    import errno

    from arena.bots import gvisor
    from arena.bots.filesystem import open_bot_dir
    bot, private = tmp_path / "bot", tmp_path / "private"
    (bot / "sub").mkdir(parents=True)
    (bot / "sub" / "a.py").write_text("a")
    private.mkdir(mode=0o700)
    (private / "secret").write_text("s")
    fd = open_bot_dir(bot)
    try:
        os.rename(bot / "sub", tmp_path / "sub-moved")  # the swap, after the check (the descriptor)
        os.symlink(private, bot / "sub")
        (tmp_path / "one").mkdir()
        own = gvisor.own_copy(fd, tmp_path / "one")
        assert own == tmp_path / "one" / "own"
        assert os.path.islink(own / "sub") and os.readlink(own / "sub") == str(private)
        assert not any(p.name == "secret" for p in own.rglob("*"))

        def refused(*args: object, **kwargs: object) -> None:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        monkeypatch.setattr(os, "sendfile", refused)
        (bot / "c.py").write_text("c")
        (tmp_path / "two").mkdir()
        assert gvisor.own_copy(fd, tmp_path / "two") is None
        assert list((tmp_path / "two").iterdir()) == []
    finally:
        os.close(fd)


# -- a local lane with no game left ------------------------------------------------------------------


def test_a_bot_retired_on_a_local_lane_is_finished_before_its_game_returns(monkeypatch: pytest.MonkeyPatch) -> None:
    """The local twin of the worker's case (test_stranger_attacks7): each lane of ``-j N`` keeps its
    pooled bots on its own hub. A bot retired at a game's start (its process saw the deal) is thawed
    and given its grace, which only that hub's waits end; a game shorter than the grace returned
    with the bot still closing, and a lane given no game after it (the run's last games on the other
    lanes) waited on its queue while a bot that ignores ``shutdown`` spun, unfrozen, beside the other
    lanes' games until the run's end. Now a lane finishes the bots a game retired before it hands
    the game back. Planted (no settle in the lane): the retired bot was alive after its game."""
    import trio

    from arena.bots.containment import Containment
    from arena.tournament.config import TournamentConfig
    from arena.tournament.executors import BotSetup, GameTask, open_in_process
    from tests import test_stranger_attacks6
    from tests.test_stranger_attacks6 import _alive, worker_run
    from tests.test_stranger_attacks7 import SLEEPING_LINGER
    if os.geteuid() != 0:
        pytest.skip("the namespaces mode of the lingering bot's run needs a root referee")
    # when the retired bot ends is what counts here: a spinning one spent its grace's CPU for nothing
    monkeypatch.setattr(test_stranger_attacks6, "LINGER", SLEEPING_LINGER)
    _, specs, cache, bot = worker_run(monkeypatch, grace=2.0)  # past a 30-turn game with its bots started
    cfg = TournamentConfig()
    setup = BotSetup.of({s.label: s for s in specs}, rules=cfg.ruleset(), clock=cfg.clock(),
                        containment=Containment.NAMESPACES)
    labels = tuple(s.label for s in specs)

    async def main() -> tuple[list[int], int, list[str]]:
        async with open_in_process(setup, capacity=1) as ex:
            lane = ex._lanes[0]
            await ex.play(GameTask("a-000000", 5, labels, 30))  # two deals, ordered by seat rotation
            await ex.play(GameTask("a-000001", 6, labels, 30))
            retired = await lane.run(lambda on: [p.conn.pid for p in on.pool.info if p.spec.name == "linger"])
            await ex.play(GameTask("a-000002", 5, labels[::-1], 30))  # a deal it saw, not its latest: retired
            return retired, lane.hub.closing, _alive(retired)
    try:
        retired, closing, alive = trio.run(main)
        assert len(retired) == 1
        assert closing == 0, "a bot retired by the game was still in its grace when the game returned"
        assert alive == [], "the retired bot outlived its game"
    finally:
        shutil.rmtree(cache, ignore_errors=True)
        shutil.rmtree(bot.parent, ignore_errors=True)
