"""Uploads (``arena serve --allow-submit``): unpacked into a private copy inside a store directory
that is 0700 from its first moment, before anything reads them; a damaged archive is one clear
refusal that leaves nothing behind, directly and over HTTP."""

from __future__ import annotations

import gzip
import io
import os
import stat
import struct
import tarfile
import time
import tracemalloc
import zipfile
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="arena serve needs the serve extra: pip install 'palace-arena[serve]'")

from arena.serve.submit import private_copy_dir
from arena.serve.upload import UploadError, unpack
from tests.test_serve import LIMITS, MANIFEST, ServerProc, multipart, zip_bytes

BOT_PY = b"print('hello')\n" * 40


def _lying_size() -> bytes:
    """bot.py stored (not compressed) with both headers claiming it is 50 bytes: reading stops early
    and its CRC cannot match (zipfile raises BadZipFile)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("bot.toml", MANIFEST)
        zf.writestr("bot.py", BOT_PY)
    data = bytearray(buf.getvalue())
    for sig, at in ((b"PK\x03\x04", (18, 22)), (b"PK\x01\x02", (20, 24))):
        start = 0
        while (i := data.find(sig, start)) >= 0:
            start = i + 4
            name_at = i + (30 if sig == b"PK\x03\x04" else 46)
            if bytes(data[name_at:name_at + 6]) == b"bot.py":
                for off in at:
                    data[i + off:i + off + 4] = struct.pack("<I", 50)
    return bytes(data)


def _bad_deflate() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("bot.toml", MANIFEST)
        zf.writestr("bot.py", os.urandom(2000))
    data = bytearray(buf.getvalue())
    i = data.find(b"PK\x03\x04", 4)  # the second entry's local header, then its data
    body = i + 30 + 6
    data[body:body + 64] = b"\xff" * 64
    return bytes(data)


def _unknown_method() -> bytes:
    data = bytearray(zip_bytes({"bot.toml": MANIFEST, "bot.py": BOT_PY}))
    for sig, off in ((b"PK\x03\x04", 8), (b"PK\x01\x02", 10)):
        start = 0
        while (i := data.find(sig, start)) >= 0:
            start = i + 4
            data[i + off:i + off + 2] = struct.pack("<H", 99)  # AES: zipfile cannot read it
    return bytes(data)


DAMAGED = [pytest.param(_lying_size(), id="size-lies"), pytest.param(_bad_deflate(), id="bad-deflate"),
           pytest.param(_unknown_method(), id="unknown-method")]


@pytest.mark.parametrize("archive", DAMAGED)
def test_a_damaged_archive_is_one_refusal_that_leaves_nothing(tmp_path: Path, archive: bytes) -> None:
    dest = tmp_path / "job"
    with pytest.raises(UploadError, match="refused: the archive is damaged|not a readable zip"):
        unpack(archive, dest, **LIMITS)
    assert not dest.exists() and list(tmp_path.iterdir()) == []


def _inflating_tar(header_mib: int) -> bytes:
    """A tar.gz whose first header is a pax header of ``header_mib`` MiB of zeros (about a
    thousandth of that once gzipped), then a valid bot.toml: tarfile reads a pax header whole
    into memory before the entry it describes can be counted."""
    buf = io.BytesIO()
    pax = tarfile.TarInfo("././@PaxHeader")
    pax.type, pax.size = tarfile.XHDTYPE, header_mib << 20
    manifest = tarfile.TarInfo("bot.toml")
    manifest.size = len(MANIFEST)
    with gzip.GzipFile(fileobj=buf, mode="wb", compresslevel=9) as gz:
        gz.write(pax.tobuf(format=tarfile.USTAR_FORMAT))
        for _ in range(header_mib):
            gz.write(bytes(1 << 20))
        gz.write(manifest.tobuf(format=tarfile.USTAR_FORMAT) + MANIFEST + bytes(-len(MANIFEST) % 512 + 1024))
    return buf.getvalue()


def test_a_tar_that_inflates_past_the_limit_is_refused_before_it_is_held(tmp_path: Path) -> None:
    """An attacker's 33 KB upload inflating to 32 MiB (2 GB from the 2 MB the server takes) was
    accepted, and the server held all of it at once; now it is refused having held little more
    than the limit."""
    archive = _inflating_tar(32)
    assert len(archive) < LIMITS["max_bytes"] // 16
    dest = tmp_path / "job"
    tracemalloc.start()
    try:
        with pytest.raises(UploadError, match="once unpacked"):
            unpack(archive, dest, **LIMITS)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * LIMITS["max_bytes"], peak
    assert not dest.exists() and list(tmp_path.iterdir()) == []
    small = _inflating_tar(0)  # the same shape within the limit is a bot
    assert (unpack(small, tmp_path / "ok", **LIMITS) / "bot.toml").read_bytes() == MANIFEST


def test_the_lying_zip_is_damaged_only_past_its_first_file(tmp_path: Path) -> None:
    """The size-lies archive gets as far as writing bot.toml: the refusal must undo that."""
    zf = zipfile.ZipFile(io.BytesIO(_lying_size()))
    assert zf.read("bot.toml") == MANIFEST
    with pytest.raises(zipfile.BadZipFile):
        zf.read("bot.py")


def test_an_unpacked_bot_is_private(tmp_path: Path) -> None:
    root = unpack(zip_bytes({"bot.toml": MANIFEST, "bot.py": BOT_PY}), tmp_path / "job", **LIMITS)
    assert stat.S_IMODE(root.stat().st_mode) == 0o700


def test_the_store_dir_and_uploads_are_0700_from_their_first_moment(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Every directory made for a fresh server's first upload is 0700 the moment it exists (with a
    umask of 0, a plain mkdir would make it 0777 until something tightened it)."""
    store = tmp_path / "fresh" / "arena-data" / "arena.sqlite"
    made: dict[Path, int] = {}
    real_mkdir = os.mkdir

    def mkdir(path, mode=0o777, *a, **kw):
        real_mkdir(path, mode, *a, **kw)
        made[Path(path)] = stat.S_IMODE(os.stat(path).st_mode)
    monkeypatch.setattr(os, "mkdir", mkdir)
    old = os.umask(0)
    try:
        uploads = private_copy_dir(store)
        unpack(zip_bytes({"bot.toml": MANIFEST}), uploads / "job", **LIMITS)
    finally:
        os.umask(old)
    private = [p for p in made if p == store.parent or store.parent in p.parents]
    assert {store.parent, uploads, uploads / "job"} <= set(private)
    assert {p: made[p] for p in private} == {p: 0o700 for p in private}
    assert stat.S_IMODE(store.parent.stat().st_mode) == 0o700


def test_a_fresh_servers_uploads_are_refused_cleanly_in_a_closed_store(tmp_path: Path) -> None:
    """A server with no store directory yet: a damaged zip and a folder without bot.toml are each
    a 400 that says why, the store directory is 0700, and no upload folder is left."""
    store = tmp_path / "arena-data" / "arena.sqlite"
    server = ServerProc(store, "--allow-submit")
    try:
        for archive, why in ((_lying_size(), b"the archive is damaged"), (zip_bytes({"readme.txt": b"hi"}), b"no bot.toml"),
                             (zip_bytes({"bot.toml": b"name = 3\n"}), b"bot.toml"),
                             (zip_bytes({"bot.toml": MANIFEST, "../escape.py": b"x"}), b"leaves its folder")):
            body, ctype = multipart({"ladder": "classic-2p", "token": server.token}, ("b.zip", archive))
            status, _, text = server.request("POST", "/submit", body, {"Content-Type": ctype})
            assert status == 400 and why in text, text[-2000:]
        assert "Traceback" not in server.stderr()
        assert stat.S_IMODE(store.parent.stat().st_mode) == 0o700
        uploads = store.parent / "uploads"
        assert stat.S_IMODE(uploads.stat().st_mode) == 0o700
        assert [p.name for p in uploads.iterdir()] == [".arena-bot-copies"]
        assert not (store.parent / "escape.py").exists()
    finally:
        server.stop()


# ---------------------------------------------------------------- arena submit: checked from the ladder's copy

def test_a_bot_swapped_after_its_check_never_reaches_the_ladder(tmp_path: Path) -> None:
    """The check runs on the ladder's copy, made first inside the closed store: a bot directory
    whose files are swapped while (or after) it is checked joins with the files that were checked."""
    import trio

    from arena.bots.manifest import load_bot
    from arena.ladder import load_ladder, members, open_store, snapshot_dir, submit
    from tests.test_ladder import bot_copy, ctx, write_ladder

    ladder = load_ladder(write_ladder(tmp_path, store=str(tmp_path / "s.sqlite")))
    store = open_store(ladder)
    bot = bot_copy(tmp_path, "random", "9")
    honest = load_bot(bot).files_hash()
    checked: list[Path] = []

    async def swapping_check(spec):
        checked.append(spec.root)
        (bot / "bot.py").write_text("import os  # the cheat, swapped in once the check has begun\n")
        return {"ok": True, "bot": spec.label, "faults": {}}
    try:
        trio.run(submit, ladder, str(bot), store, ctx(checker=swapping_check))
        copy = snapshot_dir(store, ladder, "random@9")
        assert checked == [copy] and store.path.resolve().parent in copy.parents
        m = next(m for m in members(store, ladder.name) if m.label == "random@9")
        assert m.hash == honest and load_bot(m.ref).files_hash() == honest
        assert "the cheat" not in (copy / "bot.py").read_text()
    finally:
        store.close()


def test_a_refused_submission_leaves_no_copy(tmp_path: Path) -> None:
    import trio

    from arena.ladder import CheckFailed, load_ladder, open_store, snapshot_dir, submit
    from tests.test_ladder import bot_copy, ctx, write_ladder

    ladder = load_ladder(write_ladder(tmp_path, store=str(tmp_path / "s.sqlite")))
    store = open_store(ladder)

    async def faulty(spec):
        return {"ok": False, "bot": spec.label, "faults": [{"reason": "timeout", "message": "no reply"}]}
    try:
        with pytest.raises(CheckFailed):
            trio.run(submit, ladder, str(bot_copy(tmp_path, "random", "9")), store, ctx(checker=faulty))
        assert not snapshot_dir(store, ladder, "random@9").exists()
        assert not (store.path.resolve().parent / "ladder-bots").exists()
    finally:
        store.close()


def test_a_link_out_of_a_submitted_bot_is_refused_by_name_and_nothing_is_copied(tmp_path: Path) -> None:
    """A bot folder holding a link to a file its author may not read (here: the store's secret deal
    key) is refused, naming the link: followed, the file's bytes would enter the ladder's copy;
    kept, it would still lead the bot (or a later reader) out of its folder."""
    import trio

    from arena.ladder import load_ladder, open_store, snapshot_dir, submit
    from arena.bots.manifest import ManifestError
    from tests.test_ladder import bot_copy, ctx, write_ladder

    ladder = load_ladder(write_ladder(tmp_path, store=str(tmp_path / "s.sqlite")))
    store = open_store(ladder)
    from arena.tournament.seeds import load_secret
    load_secret(store.path.resolve().parent)  # made 0600 on first use, as a tournament would
    secret = store.path.resolve().parent / "secret.key"
    assert secret.exists()
    bot = bot_copy(tmp_path, "random", "9")
    (bot / "loot").symlink_to(secret)

    async def passing(spec):
        return {"ok": True, "bot": spec.label, "faults": {}}
    try:
        with pytest.raises(ManifestError, match=r"loot: a link to .*outside the bot's folder"):
            trio.run(submit, ladder, str(bot), store, ctx(checker=passing))
        assert not snapshot_dir(store, ladder, "random@9").exists()
    finally:
        store.close()


@pytest.mark.parametrize("name", ["a" * 256, "d/" * 600 + "x", "é" * 128])
def test_a_name_the_file_system_cannot_hold_is_the_uploads_fault(tmp_path: Path, name: str) -> None:
    """A file name over 255 bytes (or a path over 1,024) failed the write with ENAMETOOLONG, which the
    server answered as its own error (500); it is a refusal of the upload like any other."""
    dest = tmp_path / "job"
    with pytest.raises(UploadError, match="longer than"):
        unpack(zip_bytes({"bot.toml": MANIFEST, name: b"x"}), dest, **LIMITS)
    assert not dest.exists()


# ---------------------------------------------------------------- the unpacking process (serve/unpacker.py)

def _apart(archive: bytes, dest: Path, **limits):
    import trio

    from arena.serve.unpacker import unpack_apart
    return trio.run(lambda: unpack_apart(archive, dest, **(limits or LIMITS)))


def test_the_worker_unpacks_and_reads_the_bot_as_the_server_did(tmp_path: Path) -> None:
    got = _apart(zip_bytes({"mybot/bot.toml": MANIFEST, "mybot/bot.py": BOT_PY}), tmp_path / "job")
    assert got.root == tmp_path / "job" / "mybot" and (got.root / "bot.py").read_bytes() == BOT_PY
    assert (got.name, got.label, got.human) == ("upl", "upl@1.0", False)


@pytest.mark.parametrize("archive", [
    zip_bytes({"bot.toml": MANIFEST, "../escape.py": b"x"}),
    zip_bytes({"bot.toml": MANIFEST}, links={"secret": "/etc/passwd"}),
    zip_bytes({f"f{i}.txt": b"" for i in range(60)}),
    zip_bytes({"bot.toml": MANIFEST, "big.bin": b"\0" * (2 << 20)}),
    _lying_size(),
    zip_bytes({"readme.txt": b"hi"}),
    zip_bytes({"bot.toml": b"name = 3\n"}),
], ids=["dotdot", "link", "files", "bytes", "damaged", "no-manifest", "bad-manifest"])
def test_a_hostile_upload_is_refused_by_the_worker_in_the_servers_own_words(tmp_path: Path, archive: bytes) -> None:
    """The worker's refusal is the one the unpacker and the manifest's reader give in-process, word
    for word (its limits included), and it leaves what they leave: nothing of an archive refused."""
    from arena.bots.manifest import ManifestError, load_bot
    with pytest.raises((UploadError, ManifestError)) as here:
        load_bot(unpack(archive, tmp_path / "here", **LIMITS)).files_hash()
    with pytest.raises(UploadError) as apart:
        _apart(archive, tmp_path / "job")
    assert str(apart.value) == str(here.value).replace(str(tmp_path / "here"), str(tmp_path / "job"))
    # the worker wrote into a tmpfs of its own (every way it runs has one, or no upload is taken:
    # unpacker.NO_SPACE), so nothing of a refused upload is left on the disk
    assert _left(tmp_path / "job") == []
    assert not (tmp_path / "escape.py").exists()


def _left(folder: Path) -> list[str]:
    """What a refused upload left in ``folder`` (nothing, where the folder itself is gone)."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) if folder.exists() else []


def test_every_upload_gets_a_worker_of_its_own_that_is_gone_after_it(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker that read one archive is never handed the next: each upload starts one, and it is
    ended (and reaped) once it answered, a refusal or a bot alike."""
    import trio

    from arena.serve import unpacker
    started: list = []
    real = trio.lowlevel.open_process

    async def spied(*a, **kw):
        started.append(await real(*a, **kw))
        return started[-1]
    monkeypatch.setattr(trio.lowlevel, "open_process", spied)

    async def main() -> None:
        good = zip_bytes({"bot.toml": MANIFEST, "bot.py": BOT_PY})
        await unpacker.unpack_apart(good, tmp_path / "a", **LIMITS)
        with pytest.raises(UploadError, match="leaves its folder"):
            await unpacker.unpack_apart(zip_bytes({"bot.toml": MANIFEST, "../x": b"x"}), tmp_path / "b", **LIMITS)
        assert (await unpacker.unpack_apart(good, tmp_path / "c", **LIMITS)).root == tmp_path / "c"
    trio.run(main)
    assert len(started) == 3 and len({p.pid for p in started}) == 3
    assert all(p.returncode is not None for p in started)  # each one ended and reaped


@pytest.mark.parametrize("when", ["before reading", "after reading"])
def test_a_worker_killed_during_an_upload_is_the_arenas_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               when: str) -> None:
    """A worker killed while it has the upload gives no answer: the upload is not refused for it,
    the arena says it failed, and the worker is not kept."""
    import sys

    import trio

    from arena.serve import unpacker
    read = "h = sys.stdin.buffer.readline(); sys.stdin.buffer.read(json.loads(h)['size']); " \
        if when == "after reading" else ""
    monkeypatch.setattr(unpacker, "WORKER", [sys.executable, "-c", f"import json, os, signal, sys; {read}"
                                                                 "os.kill(os.getpid(), signal.SIGKILL)"])

    async def main() -> None:
        with pytest.raises(unpacker.UnpackerLost, match=r"stopped \(SIGKILL\)"):
            await unpacker.unpack_apart(zip_bytes({"bot.toml": MANIFEST, "big.bin": os.urandom(1 << 19)}),
                                        tmp_path / "job", **LIMITS)
    trio.run(main)


def test_a_worker_that_answers_nothing_readable_is_lost(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from arena.serve import unpacker
    monkeypatch.setattr(unpacker, "WORKER", [sys.executable, "-c", "print('not json')"])
    with pytest.raises(unpacker.UnpackerLost, match=r"failed \(exit status 0\)"):
        _apart(zip_bytes({"bot.toml": MANIFEST}), tmp_path / "job")


def test_a_full_disk_in_the_worker_is_the_systems_error_and_leaves_nothing(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker's own file system (its tmpfs, which the server reads back) bounded at 64 KiB and a
    300 kB bot: the write fails for want of space, the caller gets that OSError (the server's 500
    says "No space left on device") and nothing is left in the upload's folder; a 40 kB bot fits in
    a file system of the same size. (This test once put a small tmpfs of bubblewrap's over the
    worker's folder, which the server never reads back: the server took the worker's word for a
    bot it never saw, until attack21 had it read the manifest it wrote.)"""
    import errno
    import shutil

    import trio

    from arena.serve import unpacker
    if shutil.which("bwrap") is None:
        pytest.skip("needs bubblewrap for a small file system of its own")
    uploads = tmp_path / "uploads"
    uploads.mkdir()
    monkeypatch.setattr(unpacker, "worker_space",
                        lambda max_files, max_bytes: unpacker.WorkerSpace(bytes=64 << 10, inodes=2 * max_files + 2))

    async def main() -> None:
        with pytest.raises(OSError) as full:
            await unpacker.unpack_apart(zip_bytes({"bot.toml": MANIFEST, "big.bin": os.urandom(300_000)}),
                                        uploads / "a", **LIMITS)
        assert full.value.errno == errno.ENOSPC and full.value.strerror == os.strerror(errno.ENOSPC)
        assert _left(uploads / "a") == []
        small = await unpacker.unpack_apart(zip_bytes({"bot.toml": MANIFEST, "small.bin": os.urandom(40_000)}),
                                            uploads / "b", **LIMITS)
        assert small.root == uploads / "b"
    trio.run(main)


def test_a_stuck_worker_is_stopped_at_the_deadline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from arena.serve import unpacker
    monkeypatch.setattr(unpacker, "WORKER", [sys.executable, "-c", "import time; time.sleep(600)"])
    monkeypatch.setattr(unpacker, "UNPACK_S", 0.5)
    with pytest.raises(unpacker.UnpackerLost, match="longer than 0.5 seconds"):
        _apart(zip_bytes({"bot.toml": MANIFEST}), tmp_path / "job")


def _unpackers_of(pid: int) -> list[int]:
    """The unpacking workers among ``pid``'s descendants: the Python processes that unpack (below
    bubblewrap's where it runs them)."""
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            try:
                argv = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if os.path.basename(argv[0]) == b"bwrap":  # bubblewrap around the worker, and its init inside
                found += _unpackers_of(int(child))
            elif b"arena.serve.unpacker" in argv:
                found.append(int(child))
    return found


def test_a_worker_killed_with_an_upload_in_hand_is_a_500_that_keeps_nothing(tmp_path: Path) -> None:
    """On a real server: an upload's worker caught waiting for the rest of its upload, and killed.
    The server is stopped the moment its worker is seen, so it writes nothing more; the worker runs
    until it waits on its stdin (or answers), and one that waits without having answered has not
    had its whole upload (a condition, never a race with the worker's reading). The uploader is
    told the arena failed (500, not a refusal of the bot), nothing of that upload is left, and the
    next upload is unpacked as ever."""
    import fcntl
    import signal
    import termios
    import threading

    store = tmp_path / "arena-data" / "arena.sqlite"
    server = ServerProc(store, "--allow-submit", "--writes-per-minute", "6000")
    good = zip_bytes({"bot.toml": MANIFEST, "bot.py": BOT_PY})
    uploads = store.parent / "uploads"

    def post(archive: bytes) -> tuple[int, bytes]:
        body, ctype = multipart({"ladder": "classic-2p", "token": server.token}, ("b.zip", archive))
        status, _, text = server.request("POST", "/submit", body, {"Content-Type": ctype})
        return status, text

    def unread(pid: int, fd: int) -> int:
        queued = bytearray(4)
        held = os.open(f"/proc/{pid}/fd/{fd}", os.O_RDONLY | os.O_NONBLOCK)  # the worker's pipe
        try:
            fcntl.ioctl(held, termios.FIONREAD, queued)
        finally:
            os.close(held)
        return int.from_bytes(queued, "little")

    def waits_on_stdin(pid: int) -> bool:
        """Blocked in read(0, ...), or gone: /proc/PID/syscall is the call's number and arguments."""
        try:
            call = Path(f"/proc/{pid}/syscall").read_text().split()
        except OSError:
            return True
        return call[:2] == ["0", "0x0"]
    try:
        assert post(good)[0] == 303
        kept = {p.name for p in uploads.iterdir()}
        for _ in range(20):  # until a worker is seen before it answers (nearly always the first)
            answer: list[tuple[int, bytes]] = []
            sender = threading.Thread(target=lambda: answer.append(post(zip_bytes({"bot.toml": MANIFEST,
                                                                                     "big.bin": os.urandom(1 << 18)}))))
            sender.start()
            workers: list[int] = []
            while sender.is_alive() and not workers:
                workers = _unpackers_of(server.proc.pid)
            if not workers:  # it was unpacked before it was seen: kept, as any upload
                sender.join()
                kept = {p.name for p in uploads.iterdir()}
                continue
            [worker] = workers
            os.kill(server.proc.pid, signal.SIGSTOP)
            try:
                deadline = time.monotonic() + 60  # a bound on a hang, never the condition itself
                while not waits_on_stdin(worker) and time.monotonic() < deadline:
                    time.sleep(0.005)
                try:
                    in_hand = waits_on_stdin(worker) and unread(worker, 1) == 0  # waiting, not answered
                except OSError:
                    in_hand = False
                if in_hand:
                    os.kill(worker, signal.SIGKILL)
            finally:
                os.kill(server.proc.pid, signal.SIGCONT)
            sender.join(60)
            if in_hand:
                break
            kept = {p.name for p in uploads.iterdir()}
        else:
            pytest.fail("no worker was seen before it answered in 20 uploads")
        [(status, text)] = answer
        said = text[text.find(b'id="submit-error"'):][:600]  # the page's own error, not its tail
        assert status == 500 and b"the arena failed, not your bot" in said and b"SIGKILL" in said, (status, said)
        assert {p.name for p in uploads.iterdir()} == kept  # the killed upload's folder removed
        assert post(good)[0] == 303
        assert "Traceback" not in server.stderr()
    finally:
        server.stop()


def test_a_server_started_outside_the_checkout_unpacks_in_its_confined_worker(tmp_path: Path) -> None:
    """A server whose import path lacks the checkout (an editable install, started from another
    folder) finds the arena through the install's finder; the engine's compiled runtime lies beside
    the package, not in it, and a worker's view without it failed every upload ("No module named
    arena_engine__mypyc", the arena's 500) while the start-up try, of the worker's module alone,
    passed. Run from a fresh folder with no PYTHONPATH, as such a server is."""
    import subprocess
    import sys

    script = ("import sys, trio\n"
              "from pathlib import Path\n"
              "from arena.serve.unpacker import unpack_apart\n"
              "got = trio.run(lambda: unpack_apart(sys.stdin.buffer.read(), Path('uploads/job').resolve(),"
              " max_files=50, max_bytes=1 << 20))\n"
              "print(got.label)\n")
    (tmp_path / "uploads").mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, timeout=120,
                          input=zip_bytes({"bot.toml": MANIFEST, "bot.py": BOT_PY}))
    assert done.returncode == 0 and done.stdout.decode().strip() == "upl@1.0", done.stderr.decode()[-2000:]
