"""#35, the loose ends the fourth round left: what the upload worker's view binds of the server's
import path, a gVisor seat whose bot runs in a folder below its root, and the primary-group test's
own strength.

As in tests/test_stranger_attacks13.py, an attacker's program takes the upload worker's place and
answers with what it managed, as a refusal the server passes on.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from tests.test_stranger_attacks10 import READ_JOB, _refusal, _view

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="a root server's worker needs a root test")

# -- the upload worker's view of the server's import path ----------------------------------------------

NOSY = READ_JOB + """
found = {}
for name, path in PATHS.items():  # (PATHS set first: files of the operator's working folder)
    try:
        with open(path, "rb") as f:
            found[name] = f.read().decode()
    except OSError as e:
        found[name] = type(e).__name__
answer(found)
"""


@as_root
@pytest.mark.parametrize("view", ["under bubblewrap", "where bubblewrap cannot start"])
def test_an_upload_worker_sees_nothing_of_the_folder_the_server_was_started_from(
        view: str, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    """``python -m arena serve`` (or ``PYTHONPATH=.``) puts the working folder on the server's import
    path, and the worker's view bound every entry of that path whole: the operator's folder (its
    notes, another store's files, whatever lies there) was readable by the worker that unpacks a
    stranger's upload. On the old code: both files read, in both views. Now the view holds only
    what the worker's imports load (Python's own folders, the site-packages they come from, and
    each package itself where it lies elsewhere): neither is there."""
    from tests.test_serve import LIMITS
    _view(view, monkeypatch)
    if not os.access("/run", os.W_OK):
        pytest.skip("a folder outside /tmp (which a private uid's worker does not see) is made in /run")
    started = Path(tempfile.mkdtemp(prefix="a21-started-", dir="/run"))  # where the operator ran the server
    store = Path(tempfile.mkdtemp(prefix="a21-store-", dir="/run"))
    request.addfinalizer(lambda: [shutil.rmtree(p, ignore_errors=True) for p in (started, store)])
    started.chmod(0o755)
    (started / "notes.txt").write_text("the operator's notes")
    (started / "other-arena-data").mkdir(mode=0o755)
    (started / "other-arena-data" / "ladder.toml").write_text("another arena's ladder")
    for p in (started / "notes.txt", started / "other-arena-data" / "ladder.toml"):
        p.chmod(0o644)
    (store / "uploads").mkdir(mode=0o700)
    monkeypatch.syspath_prepend(str(started))  # as `python -m` puts the working folder first
    paths = {"notes": str(started / "notes.txt"), "ladder": str(started / "other-arena-data" / "ladder.toml")}
    found = _refusal(monkeypatch, f"PATHS = {paths!r}\n" + NOSY, store / "uploads" / "job", LIMITS)
    assert found == {"notes": "FileNotFoundError", "ladder": "FileNotFoundError"}, found


PLUGIN = {  # an upload that is also a distribution with a pydantic plugin, which pydantic loads at its first model
    "bot.toml": b'name = "upl"\nversion = "1.0"\ncommand = ["python3", "bot.py"]\n',
    "bot.py": b"",
    "upl_plugin-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: upl-plugin\nVersion: 1.0\n",
    "upl_plugin-1.0.dist-info/entry_points.txt": b"[pydantic]\nupl = upl_plugin\n",
    "upl_plugin.py": b"import json\nprint(json.dumps({'refused': 'the upload ran in its worker'}), flush=True)\n",
}


@pytest.mark.parametrize("view", ["under bubblewrap", "where bubblewrap cannot start"])
def test_a_relative_entry_of_the_servers_pythonpath_never_imports_from_the_upload(
        view: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A server started with ``PYTHONPATH=.`` passed that entry on to the worker as it was: relative,
    so the worker's own folder, where it unpacks the upload, was on its import path. pydantic
    looks for plugins in every distribution on that path when the manifest's model is first
    built, after the upload is unpacked: an upload holding a ``.dist-info`` with a ``pydantic``
    entry point had its module run in the worker, which answered for it. On the old code: the
    upload's answer, in both views. Now the worker gets the entry made absolute (the server's
    folder, as the server's own import path has it): the upload is read as any other."""
    import trio

    from arena.serve import unpacker
    from tests.test_serve import LIMITS, zip_bytes
    _view(view, monkeypatch)
    monkeypatch.setenv("PYTHONPATH", ".")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "uploads").mkdir()
    got = trio.run(lambda: unpacker.unpack_apart(zip_bytes(PLUGIN), tmp_path / "uploads" / "job", **LIMITS))
    assert (got.name, got.label) == ("upl", "upl@1.0")
