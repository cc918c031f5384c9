"""#35: the arena's own folders on a machine (its run directory, the package copies contained
Python bots import, the workers' bot cache) lie where no other local user can write.

Each had a name any local user could make first in the shared temporary folder
(``palace-arena-<uid>``, ``palace-arena-package-<uid>``, ``palace-arena-cache-<uid>``): a folder of
hers there was refused (never used: she could have read or changed what it holds), so one empty
folder stopped that user's arena: every contained Python bot, root's too after a reboot; every game
of a remote cluster worker; every command of a non-root user. Each attack here is made by a real
other local user (``mallory``) in a temporary folder (sticky, open to all, as ``/tmp`` is) that the
arena is given as ``TMPDIR``, and the arena, run as root or as another user (``bob``), must go on.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

ROOT = Path(__file__).resolve().parents[1]
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="acting as other local users needs root")


def _user(name: str) -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        pytest.skip(f"no local user {name!r} (useradd {name})")


def _as(user: str, argv: list[str]) -> subprocess.CompletedProcess:
    """``argv`` run as ``user``."""
    who = _user(user)
    return subprocess.run(["setpriv", f"--reuid={who.pw_uid}", f"--regid={who.pw_gid}", "--clear-groups", "--",
                           *argv], capture_output=True, text=True, timeout=120, cwd="/")


def _places(user: str | None, env: dict[str, str]) -> dict[str, str]:
    """Where an arena process of ``user`` (None: root) with ``env`` in its environment keeps its
    run directory, package copies and bot cache (or why it refused one). Forked, not run: the
    test's Python may lie where other users cannot run it."""
    from arena.bots import bundles, launch, uids
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        try:
            os.close(read)
            for name in ("TMPDIR", "HOME", "XDG_RUNTIME_DIR", bundles.CACHE_ENV):
                os.environ.pop(name, None)
            os.environ.update(env)
            tempfile.tempdir = None
            if user is not None:
                who = _user(user)
                os.setgroups([])
                os.setresgid(who.pw_gid, who.pw_gid, who.pw_gid)
                os.setresuid(who.pw_uid, who.pw_uid, who.pw_uid)
            out = {}
            def run_dir() -> Path:
                registry = uids.Registry()
                registry._at_exit()  # its referee directory goes, as at a normal exit (this one ends in _exit)
                return registry.run_dir

            for name, place in (("run", run_dir), ("package", launch.package_copies),
                                ("cache", bundles.cache_root)):
                try:
                    out[name] = str(place())
                except Exception as e:
                    out[name] = f"refused: {type(e).__name__}: {e}"
            os.write(write, json.dumps(out).encode())
        except BaseException as e:
            os.write(write, json.dumps(repr(e)).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as f:
        got = json.loads(f.read() or "null")
    os.waitpid(child, 0)
    assert isinstance(got, dict), got
    return got


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A temporary folder every local user may write, as ``/tmp`` is (sticky, 1777)."""
    tmp = Path(tempfile.mkdtemp(prefix="arena-shared-tmp-"))
    tmp.chmod(0o1777)
    yield tmp
    shutil.rmtree(tmp, ignore_errors=True)


def _squat(tmp: Path, names: list[str]) -> list[Path]:
    """``mallory`` makes each of ``names`` in ``tmp``, as a folder of hers, before the arena runs."""
    made = [tmp / n for n in names]
    done = _as("mallory", ["mkdir", "-m", "0777", *map(str, made)])
    assert done.returncode == 0, done.stderr
    assert all(p.is_dir() and p.stat().st_uid == _user("mallory").pw_uid for p in made)
    return made


def _kept_out(places: dict[str, str], squats: list[Path]) -> None:
    """Each place usable, none in her folders, and hers left empty."""
    assert not [p for p in places.values() if p.startswith("refused")], places
    assert not [p for p in places.values() for s in squats if Path(p).is_relative_to(s)], places
    assert [sorted(os.listdir(s)) for s in squats] == [[] for _ in squats]


@needs_root
def test_another_users_folders_in_the_temp_folder_stop_no_root_arena(shared_tmp: Path) -> None:
    """Root's package copies (every contained Python bot's ``arena`` package) and bot cache (every
    bot a cluster worker seats) were ``palace-arena-package-0`` and ``palace-arena-cache-0`` in the
    temporary folder: after a reboot emptied it, the first local user to make them stopped every
    contained Python bot, or every game of a remote worker. Root keeps them, and its run directory,
    in the machine's own folders (``/run``, ``/var/cache``)."""
    squats = _squat(shared_tmp, ["palace-arena-0", "palace-arena-package-0", "palace-arena-cache-0"])
    places = _places(None, {"TMPDIR": str(shared_tmp)})
    _kept_out(places, squats)
    assert not [p for p in places.values() if Path(p).is_relative_to(shared_tmp)], places
    for name, place in places.items():
        st = os.lstat(place)
        assert st.st_uid == 0 and not st.st_mode & 0o022, (name, place, oct(st.st_mode))


@needs_root
@pytest.mark.parametrize("runtime", [False, True], ids=["home", "XDG_RUNTIME_DIR"])
def test_another_users_folders_in_the_temp_folder_stop_no_other_users_arena(shared_tmp: Path,
                                                                            runtime: bool) -> None:
    """A user who is not root kept all three in the temporary folder (``palace-arena-<uid>`` was
    her run directory: every ``arena`` command stopped at once). She keeps them in a folder of her
    own: her runtime folder (``XDG_RUNTIME_DIR``, the run directory) or ``~/.cache/palace-arena``."""
    bob = _user("bob")
    squats = _squat(shared_tmp, [f"palace-arena-{bob.pw_uid}", f"palace-arena-package-{bob.pw_uid}",
                                 f"palace-arena-cache-{bob.pw_uid}"])
    home = shared_tmp / "bob-home"  # (hers, as her home is: the test leaves the real one alone)
    home.mkdir(mode=0o755)
    os.chown(home, bob.pw_uid, bob.pw_gid)
    env = {"TMPDIR": str(shared_tmp), "HOME": str(home)}
    if runtime:
        env["XDG_RUNTIME_DIR"] = str(shared_tmp / "bob-runtime")
        os.mkdir(env["XDG_RUNTIME_DIR"], 0o700)
        os.chown(env["XDG_RUNTIME_DIR"], bob.pw_uid, bob.pw_gid)
    places = _places("bob", env)
    _kept_out(places, squats)
    assert [p for p in places.values() if not p.startswith(str(shared_tmp / "bob-"))] == [], places
    run = Path(places["run"])
    assert run.is_relative_to(env.get("XDG_RUNTIME_DIR", home)) and os.stat(run).st_uid == bob.pw_uid, places
    assert oct(os.stat(run).st_mode & 0o777) == oct(0o700)


@needs_root
@pytest.mark.parametrize("unfit", ["another user's", "open to all"])
def test_a_runtime_folder_or_home_that_is_not_the_users_own_is_passed_over(shared_tmp: Path, unfit: str) -> None:
    """``XDG_RUNTIME_DIR`` and ``HOME`` come from the environment: one that names a folder another
    user owns or may write is not hers to keep her files in. Passed over for the next
    place (her temporary folder here), never used."""
    bob = _user("bob")
    hers = shared_tmp / "hers"
    hers.mkdir(mode=0o700)
    if unfit == "another user's":
        os.chown(hers, _user("mallory").pw_uid, _user("mallory").pw_gid)
    else:
        os.chown(hers, bob.pw_uid, bob.pw_gid)
        hers.chmod(0o777)
    own = shared_tmp / "own-tmp"
    own.mkdir(mode=0o700)
    os.chown(own, bob.pw_uid, bob.pw_gid)
    places = _places("bob", {"TMPDIR": str(own), "HOME": str(hers), "XDG_RUNTIME_DIR": str(hers)})
    assert not [p for p in places.values() if p.startswith("refused")], places
    assert [Path(p).parent for p in places.values()] == [own] * 3, places


def test_a_bot_s_traceback_through_the_package_copy_names_no_path_of_the_server() -> None:
    """What a contained Python bot says (a traceback through the arena package it imports) reaches
    an uploader's page with the server's paths hidden: the copies' own place included."""
    from arena.bots import launch
    from arena.serve.submit import SERVER_PATH, hide_paths
    entry = launch._package_copy()
    said = hide_paths(f'File "{entry}/arena/botkit.py", line 3, in <module>', [])
    assert said == f'File "{SERVER_PATH}/arena/botkit.py", line 3, in <module>', said


@needs_root
def test_root_arenas_share_one_run_directory_whatever_their_tmpdir_where_run_is_read_only(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Every root arena on a machine leases bot uids from one pool, locked in its run directory
    (``Registry.pool``). Where ``/run`` cannot be written, that directory was ``$TMPDIR``'s: two root
    arenas with different ``TMPDIR`` s kept two pools, each free to lease (and first kill the
    processes of) a uid the other's live bot held. It is the machine's ``/var/cache`` instead."""
    from arena.bots import places
    monkeypatch.setattr(places, "_writable", lambda folder: folder != places.MACHINE_RUN.parent)
    seen = set()
    for tmp in ("/tmp", "/var/tmp"):
        monkeypatch.setenv("TMPDIR", tmp)
        monkeypatch.setattr(tempfile, "tempdir", None)
        seen.add(places.arena_place(places.RUN))
    assert seen == {places.MACHINE_CACHE / "run"}, seen


@needs_root
def test_a_closed_machine_cache_is_refused_naming_it_and_the_mode_to_give_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Root's package copies lie in ``/var/cache/palace-arena``, which a bot's own uid must enter.
    Made 0700 (by hand, or a hardening script), the refusal told the operator to set TMPDIR, which
    changes nothing for root: it names the folder, its mode, and the mode it needs."""
    from arena.bots import launch, places
    top = Path(tempfile.mkdtemp(dir="/tmp"))  # not below pytest's 0700 folders: only the cache is closed
    try:
        top.chmod(0o755)
        cache = top / "palace-arena"
        cache.mkdir(mode=0o700)
        cache.chmod(0o700)
        monkeypatch.setattr(places, "MACHINE_CACHE", cache)
        with pytest.raises(launch.ContainmentError) as e:
            launch.package_copies()
        text = str(e.value)
        assert f"{cache} is mode 0700" in text and f"chmod 0755 {cache}" in text, text
        assert "TMPDIR" not in text, text
    finally:
        shutil.rmtree(top)
