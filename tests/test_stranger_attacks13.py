"""#35, a fourth round on the upload worker: whom it runs as under bubblewrap, and what of the host
it sees where bubblewrap does not run it.

As in tests/test_stranger_attacks10.py, an attacker's program takes the upload worker's place and
answers with what it managed, as a refusal the server passes on.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from tests.test_stranger_attacks10 import READ_JOB, _refusal, _view

OWNER_READS = READ_JOB + """
try:  # (SECRET set first: a file of root's, 0600, in a folder bound into the worker's view)
    with open(SECRET, "rb") as f:
        got = f.read().decode()
except OSError as e:
    got = type(e).__name__
answer({"got": got, "uid": os.getuid()})
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="a root server's worker needs a root test")
def test_a_root_servers_worker_under_bubblewrap_is_no_owner_of_roots_files_in_its_view(
        monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    """Under bubblewrap a root server's worker was uid 0 in a user namespace mapped to root: without a
    capability and with a read-only view, but the owner of every file of root's in that view, which
    its owner's bits then let it read (a 0600 file where the server's Python or import path lies,
    say). On the old code: read. Now bubblewrap is started as a private uid of the arena's pool,
    leased for the worker alone, which it maps to itself, its tmpfs that uid's: refused, and the
    worker is that uid. Planted (bubblewrap started as root): read, uid 0."""
    from arena.bots.uids import uid_in_pool
    from arena.serve import unpacker
    from tests.test_serve import LIMITS
    _view("under bubblewrap", monkeypatch)
    if not os.access("/run", os.W_OK):
        pytest.skip("a folder outside /tmp (which a private uid's worker does not see) is made in /run")
    above = Path(tempfile.mkdtemp(prefix="a20-view-", dir="/run"))  # 0700, root's, as /root is
    store = Path(tempfile.mkdtemp(prefix="a20-arena-data-", dir="/run"))
    request.addfinalizer(lambda: [shutil.rmtree(p, ignore_errors=True) for p in (above, store)])
    (store / "uploads").mkdir(mode=0o700)
    view = above / "lib"
    view.mkdir(mode=0o755)
    secret = view / "secret"
    secret.write_text("root's own")
    secret.chmod(0o600)
    reads = unpacker.worker_reads
    monkeypatch.setattr(unpacker, "worker_reads", lambda: [*reads(), str(view)])
    found = _refusal(monkeypatch, f"SECRET = {str(secret)!r}\n" + OWNER_READS, store / "uploads" / "job", LIMITS)
    assert found["got"] == "PermissionError" and uid_in_pool(found["uid"]), found


LOOKER = READ_JOB + """
import glob
try:  # (NOTE, MARK and PID set first: a world-readable file of the host, a secret on a command line
    # (written backwards in this program's own), its pid)
    with open(NOTE, "rb") as f:
        note = f.read().decode()
except OSError as e:
    note = type(e).__name__
lines = []
for path in glob.glob("/proc/[0-9]*/cmdline"):
    try:
        with open(path, "rb") as f:
            if MARK.encode() in f.read():
                lines.append(path)
    except OSError:
        pass
try:
    os.kill(PID, 0)
    seen = "signalled"
except OSError as e:
    seen = type(e).__name__
answer({"note": note, "lines": lines, "seen": seen, "home": os.path.exists("/home"), "etc": sorted(os.listdir("/etc"))})
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="a root server's worker needs a root test")
@pytest.mark.parametrize("view", ["under bubblewrap", "where bubblewrap cannot start"])
def test_an_upload_worker_sees_no_host_file_and_no_process_beside_what_it_needs(
        view: str, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    """Without bubblewrap, a root server's worker ran as a private uid, but in the host's file system
    and pid namespace: it read every world-readable file (another member's bot, ``/etc``, a note
    in ``/run``) and every process's ``/proc/<pid>/cmdline`` (a server started with a secret on
    its command line), and learnt which pids live. On the old code: the note read, the secret
    found, the process there (EPERM). Now it has a root of its own holding only what it needs
    (the system's ``/usr``, its Python, the arena, ``ld.so.cache``), and a pid namespace of its
    own with its ``/proc``, as bubblewrap gives it (whose view never had them: it passed there on
    the old code too). Planted (the old view, the host's root with its tmpfs over ``/tmp``): the
    note, ``/home`` and the secret found; (no pid namespace, so its ``/proc`` the host's,
    ``hidepid=2``): the process there."""
    from tests.test_serve import LIMITS
    _view(view, monkeypatch)
    if not os.access("/run", os.W_OK):
        pytest.skip("a folder outside /tmp (which a private uid's worker does not see) is made in /run")
    mark = f"a20-{uuid.uuid4().hex}"
    above = Path(tempfile.mkdtemp(prefix="a20-host-", dir="/run"))
    request.addfinalizer(lambda: shutil.rmtree(above, ignore_errors=True))
    above.chmod(0o755)
    note = above / "note"
    note.write_text(mark)
    note.chmod(0o644)
    (above / "store").mkdir(mode=0o700)
    (above / "store" / "uploads").mkdir(mode=0o700)
    secret = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()", mark], stdin=subprocess.PIPE)
    try:
        found = _refusal(monkeypatch, f"NOTE, MARK, PID = {str(note)!r}, {mark[::-1]!r}[::-1], {secret.pid}\n" + LOOKER,
                         above / "store" / "uploads" / "job", LIMITS)
    finally:
        secret.communicate(b"")
    assert found["note"] == "FileNotFoundError" and found["lines"] == [], found
    assert found["seen"] == "ProcessLookupError", found
    assert not found["home"] and set(found["etc"]) <= {"ld.so.cache"}, found


READER = READ_JOB + """
with open(READ) as f:  # (READ set first: a file where the server's Python would lie)
    got = f.read()
answer({"got": got, "free": os.statvfs(header["dest"]).f_favail, "uid": os.getuid()})
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="a root server's worker needs a root test")
@pytest.mark.parametrize("view", ["under bubblewrap", "where bubblewrap cannot start"])
def test_a_servers_python_below_its_own_folder_in_tmp_is_seen_and_costs_the_upload_no_inode(
        view: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    """CI keeps the checkout and its virtual environment below a 0700 folder of ``/tmp``, where a root
    server's worker has its own tmpfs: what it reads there is made reachable inside that tmpfs
    (folders made in it to bind them on), and those folders were inodes of the upload's bound.
    Now they come on top of it, and the worker still reads what it needs there. Planted (none
    added): 99 of 100 inodes left under bubblewrap, 97 without; (/tmp itself on the import path,
    as a script run from there puts it, bound): without bubblewrap the worker's tmpfs covered by
    the host's ``/tmp`` and the worker lost (under bubblewrap its tmpfs made read-only, which this
    reader does not see)."""
    from arena.bots.uids import uid_in_pool
    from arena.serve import unpacker
    from tests.test_serve import LIMITS
    _view(view, monkeypatch)
    top = Path(tempfile.mkdtemp(prefix="a20-python-"))  # 0700, root's, in /tmp
    request.addfinalizer(lambda: shutil.rmtree(top, ignore_errors=True))
    lib = top / "lib" / "deep"
    lib.mkdir(parents=True, mode=0o755)
    (lib / "x.py").write_text("seen")
    reads = unpacker.worker_reads
    monkeypatch.setattr(unpacker, "worker_reads", lambda: [*reads(), str(lib), "/tmp"])
    (tmp_path / "uploads").mkdir()
    found = _refusal(monkeypatch, f"READ = {str(lib / 'x.py')!r}\n" + READER, tmp_path / "uploads" / "job", LIMITS)
    whole = unpacker.worker_space(**LIMITS).inodes - 2  # but the tmpfs's root and its folder
    assert found["got"] == "seen" and found["free"] == whole and uid_in_pool(found["uid"]), found
