"""#35, an outside round on what the last stop changed: state kept between runs and processes.

What got through on 16c5d2a, each now closed:
- any local user failed every game of every other user's ``--cluster local`` run (root's too) with
  one empty folder: the workers unpacked bots into the machine's bot cache, whose default name
  (``palace-arena-cache-<uid>`` in the temporary directory) is the first user's to make, and a
  folder of hers there was refused on every game ("2 of 2 game(s) could not be played", exit 2);
- a zip of 300 bytes that Python's zipfile cannot read in some way it does not call a bad zip (a
  file name flagged UTF-8 that is not, a "version needed" from the future, an empty file name), or a
  tar with a file name that is not UTF-8, killed the upload's worker: its traceback went raw to the
  server's terminal or log file, past the log's escaping, and the uploader was told "the arena
  failed, not your bot" (500);
- a non-root user's arena stopped at once where another local user had made its run directory
  (``palace-arena-<uid>`` in the temporary directory) first, saying only that it was not hers; it
  now says what to do, as the package copy's refusal does (and since rundir24 the run directory is
  in a folder of the user's own, the temporary folder only where she has none:
  tests/test_arena_places.py);
- the cleanup after a referee killed with ``kill -9`` followed a link in place of a temporary
  directory the dead referee had listed (its name gone from the temporary folder, made again by
  another local user, swapped for a link after the cleanup looked at it): root detached the tmpfs
  of a live build elsewhere, wherever the link led;
- whatever an upload's worker wrote to its error output (a traceback, with what it quoted of the
  archive) reached the server's terminal or log file raw, past the log's escaping;
- a member's webhook address that Python's ``urlsplit`` cannot read (``http://[::1``) was a 500 with a
  traceback in the log; one whose port is no port (``:99999``, ``:x``) was kept and failed every
  delivery.
"""

from __future__ import annotations

import io
import json
import os
import struct
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

WORKERS_CACHE = r"""
import json
from arena.bots import bundles
from arena.tournament import cluster

def main():
    client, local = cluster._connect("local:1")
    try:
        def cache():
            try:
                return str(bundles.cache_root())
            except bundles.BundleError as e:
                return f"refused: {e}"
        print(json.dumps(list(client.run(cache).values())), flush=True)
    finally:
        client.close()
        local.close()

if __name__ == "__main__":
    main()
"""


def test_a_local_users_folder_named_as_the_bot_cache_fails_no_local_cluster(tmp_path: Path) -> None:
    """A local cluster's workers unpack each bot they seat into the bot cache. Its default is a
    folder named by the referee's uid in the temporary directory, which any local user may make
    first: made by another user, it was refused on every game, so a local cluster played none (the
    same as Dask's ``dask-scratch-space`` before the run's private scratch). The workers now keep
    their cache in that scratch, and the other user's folder is left as it was."""
    pytest.importorskip("distributed", reason="clusters need the dask extra")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    tmp.chmod(0o1777)
    squat = tmp / f"palace-arena-cache-{os.geteuid()}"  # another local user's, made before the run
    if os.geteuid() == 0:
        squat.mkdir(mode=0o700)
        os.chown(squat, 65534, 65534)
    else:  # (no other user to be here: a file of that name stands in for her folder)
        squat.write_text("mine\n")
    env = {k: v for k, v in os.environ.items() if k != "PALACE_ARENA_CACHE"}
    env.update(PYTHONPATH=str(ROOT), TMPDIR=str(tmp))
    done = subprocess.run([sys.executable, "-c", WORKERS_CACHE], capture_output=True, text=True, timeout=300,
                          cwd=str(tmp_path), env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    caches = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(caches) == 1 and not caches[0].startswith("refused"), caches
    assert Path(caches[0]).parent.name.startswith("palace-arena-cluster-"), caches  # the run's own scratch
    assert squat.exists() and not list(squat.iterdir() if squat.is_dir() else [])  # hers, untouched
    assert not list(tmp.glob("palace-arena-cluster-*")), list(tmp.iterdir())  # the scratch went with the run


def _flag_names_utf8(data: bytes) -> bytes:
    """``data`` with every central-directory entry's name flagged as UTF-8 (bit 11)."""
    out = bytearray(data)
    at = out.find(b"PK\x01\x02")
    while at >= 0:
        struct.pack_into("<H", out, at + 8, struct.unpack_from("<H", out, at + 8)[0] | 0x800)
        at = out.find(b"PK\x01\x02", at + 4)
    return bytes(out)


def _needs_version(data: bytes, version: int) -> bytes:
    """``data`` with every central-directory entry's "version needed to extract" set to ``version``."""
    out = bytearray(data)
    at = out.find(b"PK\x01\x02")
    while at >= 0:
        struct.pack_into("<H", out, at + 6, version)
        at = out.find(b"PK\x01\x02", at + 4)
    return bytes(out)


def _tar_named(manifest: bytes, name: str) -> bytes:
    """A tar holding ``bot.toml`` and a file ``name`` (surrogates written as the bytes they stand for)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT, errors="surrogateescape") as tf:
        for entry, content in (("bot.toml", manifest), (name, b"x")):
            info = tarfile.TarInfo(entry)
            info.size = len(content)
            tf.addfile(info, io.BytesIO(content))
    return buf.getvalue()


def _unreadable_archives() -> dict[str, tuple[bytes, str]]:
    """What each archive is, its bytes, and the refusal expected."""
    from tests.test_serve import MANIFEST, zip_bytes
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("bot.toml", MANIFEST)
        zf.writestr(zipfile.ZipInfo(""), b"x")
    unreadable = "not a readable zip archive"
    swap = b"NAME-TO-SWAP", b"\xff\xfe\x1b]0;ow\x07\x9b1m"  # (the same length: the archives' sizes hold)
    return {
        "a zip's name flagged UTF-8 that is not": (
            _flag_names_utf8(zip_bytes({"bot.toml": MANIFEST, swap[0].decode(): b"x"}).replace(*swap)), unreadable),
        "a zip's version from the future": (_needs_version(zip_bytes({"bot.toml": MANIFEST}), 175), unreadable),
        "a zip's empty file name": (buf.getvalue(), unreadable),
        "a tar's name that is not UTF-8": (_tar_named(MANIFEST, os.fsdecode(swap[1])), "a file name that is not UTF-8"),
    }


def test_an_archive_python_cannot_read_is_refused_as_the_uploaders_with_no_traceback(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """An upload is unpacked by a worker process whose error output is the server's own (its
    terminal, or the log file a service manager writes). Python's zipfile raises more than
    ``BadZipFile`` on bytes it cannot read, and a tar's name that is not UTF-8 reads as surrogates,
    which no check expected: each escaped the worker, which died with a traceback on the server's
    terminal, outside the log's escaping, and the uploader read that the arena had failed. Each is
    now the uploader's refusal, and the worker writes nothing: each is read by the worker's own
    ``work`` here (what it answers is what the worker prints), the first through a worker as an
    upload is."""
    import trio

    from arena.serve import unpacker
    from arena.serve.upload import UploadError
    from tests.test_serve import LIMITS
    archives = _unreadable_archives()
    for n, (what, (data, reason)) in enumerate(archives.items()):
        answer = unpacker.work(tmp_path / f"read{n}", LIMITS["max_files"], LIMITS["max_bytes"], data)
        assert reason in answer.get("refused", "") and "\x1b" not in answer["refused"], (what, answer)
    data, reason = next(iter(archives.values()))
    with pytest.raises(UploadError, match=reason):
        trio.run(lambda: unpacker.unpack_apart(data, tmp_path / "job", **LIMITS))
    err = capfd.readouterr().err
    assert "Traceback" not in err and not [c for c in err if not c.isprintable() and c != "\n"], err


@pytest.mark.parametrize("url", ["http://[::1", "http://[zz]/hook", "http://example.com:99999/hook",
                                 "http://example.com:x/hook", "https://example.com:-1/"])
def test_a_webhook_address_python_cannot_read_is_refused_with_the_reason(url: str) -> None:
    """The webhook form refuses what ``check_url`` refuses (a ``PeopleError``: 400 with its reason);
    anything else it raised was a 500, and a port it never read was kept and failed at delivery."""
    from arena.store.people import PeopleError, check_url
    with pytest.raises(PeopleError, match="a browser could open"):
        check_url(url)
    assert check_url("https://[2001:db8::1]:8443/hook") == "https://[2001:db8::1]:8443/hook"


HOSTILE = "\x1b]0;owned\x07\x1b[2J\u202e\x9b31m\rforged\x08"  # a title, a cleared screen, bidi, C1 CSI, CR, BS


def test_an_upload_workers_error_output_is_said_in_the_log_escaped_never_raw(
        tmp_path: Path, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker's error output was the server's own, so a worker that died (an arena bug it met
    in a hostile archive) wrote its traceback, and what the traceback quoted of the archive, to
    the operator's terminal raw. It is now kept apart and its end said in the log line that says
    the worker ended, as a text argument: shown escaped whole (:class:`arena.safetext.ShownRecord`),
    its newlines too, so it cannot forge a line either. A worker that writes such words and dies
    stands in for the bug."""
    import logging

    import trio

    from arena.safetext import ShownRecord
    from arena.serve import unpacker
    from tests.test_serve import LIMITS, MANIFEST, zip_bytes
    words = f"Traceback (most recent call last):\n  {HOSTILE}\n2026-01-01 ERROR forged line\n"
    monkeypatch.setattr(unpacker, "WORKER", [sys.executable, "-c", f"import sys; sys.stderr.write({words!r}); sys.exit(1)"])
    with caplog.at_level(logging.WARNING, logger=unpacker.log.name):
        with pytest.raises(unpacker.UnpackerLost, match="exit status 1"):
            trio.run(lambda: unpacker.unpack_apart(zip_bytes({"bot.toml": MANIFEST}), tmp_path / "job", **LIMITS))
    err = capfd.readouterr().err
    assert "owned" not in err and "forged" not in err, err
    said = [ShownRecord(r.name, r.levelno, r.pathname, r.lineno, r.msg, r.args, None).getMessage()
            for r in caplog.records if "without an answer" in str(r.msg)]
    assert len(said) == 1 and "\\x1b]0;owned\\x07" in said[0] and "forged line" in said[0], said
    assert "\n" not in said[0] and not [c for c in said[0] if not c.isprintable()], said


def test_a_run_directory_another_user_made_first_is_refused_saying_what_to_do(tmp_path: Path) -> None:
    """A referee that is not root and has no folder of her own (no runtime folder, no home of hers:
    ``places.arena_place``) keeps its run directory at a name any local user can make first
    (``palace-arena-<uid>`` in the temporary directory): she stops that user's arena. Refused, never
    used (she could read and write the records of every bot it starts); the refusal names the way
    out, which she cannot block: a temporary directory of the user's own."""
    from arena.bots.uids import _private_dir
    squat = tmp_path / f"palace-arena-{os.geteuid()}"
    if os.geteuid() == 0:
        squat.mkdir(mode=0o777)
        os.chown(squat, 65534, 65534)
    else:  # (no other user to be here: a link stands in for her folder)
        (tmp_path / "hers").mkdir()
        squat.symlink_to(tmp_path / "hers")
    with pytest.raises(PermissionError, match="another user made it.*set TMPDIR to a folder of your own"):
        _private_dir(squat)
    assert not list(squat.iterdir())


def test_a_dead_referees_cleanup_detaches_no_tmpfs_through_a_link_swapped_in(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A referee lists each temporary directory it makes (``palace-arena-*`` in the shared
    temporary folder) so that the cleanup after a ``kill -9`` finds them; one it removed itself
    stays listed, its name free for any local user, who sees it there while it lives. She makes a
    folder by that name (the cleanup takes it: a folder, not a link) and swaps it for a link to a
    live build's temporary directory once the cleanup has looked (its list is made first, then
    each is released): the cleanup then detached, as root, the tmpfs the link led to. The swap is
    made here at that moment, as her loop on inotify would."""
    if os.geteuid() != 0:
        pytest.skip("mounting the live build's tmpfs needs root")
    from arena.bots import uids
    from arena.bots.namespaces import BUILD_SPACE, bounded_space
    shared = tmp_path / "tmp"
    shared.mkdir()
    live = shared / "palace-arena-bot-live"  # a live referee's build, its files in a tmpfs
    live.mkdir()
    space = bounded_space(live, 1 << 20, 16)
    assert space is not None and space == live / BUILD_SPACE and os.path.ismount(space)
    try:
        (space / "built").write_text("the build's output\n")
        registry = uids.Registry(tmp_path / "run")
        dead = registry.run_dir / "ref-999999"  # a referee killed -9: its directory, lock free
        dead.mkdir()
        (dead / "lock").touch()
        hers = shared / "palace-arena-bot-gone"  # it listed this one, removed it, then died
        (dead / uids.TEMPS).write_text(f"{hers}\n")
        hers.mkdir()
        kept = uids._kept_temps

        def swapped_after_the_look(listing: Path) -> list[Path]:
            found = kept(listing)
            assert found == [hers]  # a folder, not a link, when looked at
            hers.rmdir()
            hers.symlink_to(live)  # her swap
            return found

        monkeypatch.setattr(uids, "_kept_temps", swapped_after_the_look)
        registry.cleanup_stale(None)
        assert os.path.ismount(space) and (space / "built").read_text() == "the build's output\n"
        assert not dead.exists()  # the dead referee's directory is cleared all the same
    finally:
        if os.path.ismount(space):
            subprocess.run(["umount", "-l", str(space)], check=False)
