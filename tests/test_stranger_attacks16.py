"""#35, a sixth round (attack21): an outside round on the last round's changes.

A local user of the machine (Eve) and a bot author with the docs and the code but not the tests.
Each test is an attack that succeeded on 236f6b8.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from arena.bots.containment import Containment
from tests.checks import bwrap_or_skip
from tests.test_stranger_attacks10 import EVE, _as_eve

SECRET = "member's strategy 8472"

BOT_SH = "exec cat secret.txt\n"
"""The bot: it says its secret file, so the test sees its seat read its copy."""


def _bot(request: pytest.FixtureRequest, *, member: bool, build: bool = False) -> Path:
    """A bash bot holding :data:`SECRET` in ``secret.txt``: a ladder member's (``member``: in a folder the
    arena keeps, 0700, the marker of its copies above it, as a store's snapshots and uploads are), or a
    user's, reachable by the seat's private uid but its secret ``0600`` (with ``build``: one that builds)."""
    from arena.bots.launch import ARENA_COPIES
    home = Path(tempfile.mkdtemp(prefix="a21-"))
    request.addfinalizer(lambda: shutil.rmtree(home, ignore_errors=True))
    bot = home / "bot"
    bot.mkdir()
    manifest = 'name = "member"\nversion = "1.0"\ncommand = ["bash", "bot.sh"]\n'
    (bot / "bot.toml").write_text(manifest + ('build = ["true"]\n' if build else ""))
    (bot / "bot.sh").write_text(BOT_SH)
    (bot / "secret.txt").write_text(SECRET + "\n")
    if member:
        (home / ARENA_COPIES).touch()
        home.chmod(0o700)
    else:
        for p in (home, bot, *bot.iterdir()):
            p.chmod(0o755)
        (bot / "secret.txt").chmod(0o600)
    return bot


def _eve_reads(folder: Path) -> list[str]:
    """What Eve, another local user, can do with a seat's folder: list the folder that holds it, read
    its secret."""
    done = []
    if _as_eve(lambda: 0 if os.listdir(folder.parent) else 1) == 0:
        done.append("listed")
    if _as_eve(lambda: 0 if Path(folder, "secret.txt").read_text().startswith(SECRET) else 1) == 0:
        done.append("read")
    return done


@pytest.mark.parametrize("mode", ["bubblewrap", "namespaces"])
@pytest.mark.parametrize("whose", ["member", "user's built"])
def test_a_seats_copy_of_its_bot_is_read_by_the_seat_and_by_no_other_local_user(
        mode: str, whose: str, request: pytest.FixtureRequest) -> None:
    """A seat runs from the arena's copy of its bot (``launch.runnable``; with a ``build``, the build's
    copy). On 236f6b8 each copy lay in ``/tmp/palace-arena-bot-*`` (or ``-build-*``), 0755, its files
    0644: while a ladder ran, every local user listed and read every member's source (a store's
    snapshot, an upload: 0700 where the arena keeps them), and a user's ``0600`` file in a bot with a
    ``build``. `arena submit` of a 0700 bot: ``runuser -u nobody -- cat /tmp/palace-arena-bot-*/...``
    printed it. Now the copies' folder is root's and the bots' group's (0750): the seat still reads
    its copy, Eve reads nothing."""
    from arena.bots.launch import Launcher
    from arena.bots.manifest import load_bot
    if os.geteuid() != 0:
        pytest.skip("private uids and another local user need a root referee")
    if mode == "bubblewrap":
        bwrap_or_skip()
    containment = Containment.BUBBLEWRAP if mode == "bubblewrap" else Containment.NAMESPACES
    spec = load_bot(_bot(request, member=whose == "member", build=whose != "member"))
    spec.files_hash()  # the run reads it
    launcher = Launcher(containment=containment)
    request.addfinalizer(launcher.release_builds)
    plan = launcher.plan_now(launcher.build_now(spec))
    assert plan.workdir != spec.root
    with plan.start() as seat:
        assert seat.receive_line(10.0) == SECRET  # the seat reads its copy
        assert _eve_reads(plan.workdir) == []


def test_the_bot_an_upload_holds_is_read_by_the_server_never_taken_from_its_unpacking_process(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """An upload's worker reads hostile bytes (the docs' reason it runs apart: code a decompressor's bug
    ran in it). On 236f6b8 the server took the bot's name and label from the worker's answer: it
    claimed that name for the uploader's account (``people.claim_bot``) and queued that label, while
    the job then placed the bot its manifest named. A worker answering ``eves`` for a bot.toml naming
    ``alice`` had Eve's account claim a free name and place a version of Alice's bot (her account's
    owner check never saw ``alice``). Now the server reads the manifest it wrote to the disk, and a
    worker whose answer differs is lost (the arena's failure: nothing kept)."""
    import trio

    from arena.serve import unpacker
    from tests.test_serve import LIMITS, zip_bytes
    told = unpacker._answer

    def lying(stdout: bytes) -> dict | None:  # the worker's answer, as code a hostile archive ran would write it
        answer = told(stdout)
        if answer is not None and "name" in answer:
            answer.update(name="eves", label="eves@1.0")
        return answer
    monkeypatch.setattr(unpacker, "_answer", lying)
    alices = b'name = "alice"\nversion = "2.0"\ncommand = ["python3", "bot.py"]\n'
    try:
        got = trio.run(lambda: unpacker.unpack_apart(zip_bytes({"bot.toml": alices, "bot.py": b"print(1)\n"}),
                                                     tmp_path / "job", **LIMITS))
    except unpacker.UnpackerLost as e:
        assert "another bot" in str(e)
    else:
        assert (got.name, got.label) == ("alice", "alice@2.0")


def test_a_workers_bot_cache_is_read_by_its_seats_and_by_no_other_local_user(
        request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Dask worker (``arena tournament --cluster``, ``arena ladder run --cluster``) unpacks every bot it
    seats into its cache, kept between runs (``bundles.cache_root``: ``/var/cache/palace-arena/bots`` as root).
    On 236f6b8 the cache and each entry were 0755 ("readable by the bots' uid"): every local user of
    a worker's machine listed and read every ladder member it had ever seated. Since attack20 a
    seat runs from the arena's own copy, not from the cache: the cache is now 0700 and marked as
    the arena's copies, and its seat still plays its bot."""
    from arena.bots import bundles
    from arena.bots.launch import Launcher
    from arena.bots.manifest import load_bot
    if os.geteuid() != 0:
        pytest.skip("private uids and another local user need a root referee")
    bwrap_or_skip()
    spec = load_bot(_bot(request, member=False))
    (spec.root / "secret.txt").chmod(0o644)  # its author's file: the arena keeps what it packed
    blob = bundles.pack_bot(spec)
    shared = Path(tempfile.mkdtemp(prefix="a21-cache-"))
    request.addfinalizer(lambda: shutil.rmtree(shared, ignore_errors=True))
    shared.chmod(0o755)  # as /tmp is: every user may walk it
    monkeypatch.setenv(bundles.CACHE_ENV, str(shared / "cache"))
    monkeypatch.setattr(bundles, "_PREPARED", {})
    unpacked = bundles.prepare_bot(spec.files_hash(), "bot.toml", blob)
    assert _eve_reads(unpacked.root) == []
    launcher = Launcher(containment=Containment.BUBBLEWRAP)
    request.addfinalizer(launcher.release_builds)
    with launcher.plan_now(unpacked).start() as seat:
        assert seat.receive_line(10.0) == SECRET


def test_a_copys_modes_show_nothing_of_where_a_folder_swapped_for_a_link_leads(
        request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A user's bot's copy keeps no more of the other users' bits than its entries have in her folder
    (``launch._others_no_wider``), read after the copy from her live folder. On 236f6b8 each entry was
    looked up there by path, following links: a folder she swapped for a link to a folder of root's
    (0700) gave the copy the modes of root's files there, so her bot, reading its copy's modes,
    learnt whether a name existed below a folder it may not enter. Now her folder is walked by
    descriptors and a link counts as gone."""
    from arena.bots import launch
    from arena.bots.manifest import load_bot
    if os.geteuid() != 0:
        pytest.skip("a copy for private uids is a root referee's")
    roots = Path(tempfile.mkdtemp(prefix="a21-roots-"))  # 0700: root's alone
    request.addfinalizer(lambda: shutil.rmtree(roots, ignore_errors=True))
    (roots / "f").write_text("root's\n")
    (roots / "f").chmod(0o644)
    bot = _bot(request, member=False)
    (bot / "sub").mkdir(mode=0o755)
    (bot / "sub" / "f").write_text("hers\n")
    (bot / "sub" / "f").chmod(0o600)
    spec = load_bot(bot)
    spec.files_hash()  # the run reads it
    copied = launch.chown_tree

    def then_swapped(*args, **kw):  # her move, between the copy and the look at her folder's modes
        (bot / "sub").rename(bot / "sub.old")
        (bot / "sub").symlink_to(roots)
        return copied(*args, **kw)
    monkeypatch.setattr(launch, "chown_tree", then_swapped)
    copy = launch.runnable(spec, {})
    assert (copy.root / "sub" / "f").stat().st_mode & 0o007 == 0  # hers had none; root's o+r is not shown


def test_the_bots_group_is_nobodys_else() -> None:
    """The one supplementary group of every private uid's process (``procs.BOTS_GID``) opens the folders of
    the arena's copies of bots: no private uid has it as its own gid, nor any user or group here."""
    import grp
    import pwd

    from arena.bots.procs import BOTS_GID
    from arena.bots.uids import uid_in_pool
    assert not uid_in_pool(BOTS_GID)
    assert BOTS_GID not in {g.gr_gid for g in grp.getgrall()} | {p.pw_gid for p in pwd.getpwall()}


INTRUDER = """
import sys
import distributed
from arena.tournament import cluster
port = sys.argv[1]
for address, security in ((f"tcp://127.0.0.1:{port}", lambda: None),  # Dask's default: plain TCP, anyone's client
                          (f"tls://127.0.0.1:{port}", lambda: cluster._local_tls(distributed))):  # a key of her own
    try:
        client = distributed.Client(address, security=security(), timeout=5, set_as_default=False)
        print("ran as", client.run(lambda: __import__("os").getuid()), flush=True)
    except Exception as e:  # noqa: BLE001  refused: said
        print("refused:", type(e).__name__, flush=True)
"""
"""Another local user's program: the scheduler's port (listed by ``ss -ltn`` to every user) is all she needs."""


def test_a_local_clusters_scheduler_runs_nobody_elses_code(tmp_path: Path) -> None:
    """``--cluster local`` starts a Dask scheduler and workers on 127.0.0.1, as the arena's user. On
    236f6b8 they spoke Dask's plain ``tcp://``, which takes any client: while a root ``arena tournament
    --cluster local:2`` ran, ``nobody`` connected to its scheduler's port and ran code in its
    workers as uid 0 (``/etc/shadow`` read; the store's secret, every deal, every game were hers
    too). Now a local cluster speaks TLS with a key made for the run and held in memory: a client
    without it, plain or with a key of its own, is refused; the arena's own client still plays.
    Nor are Dask's HTTP pages served (they were, in plain HTTP, to anyone): the workers' logs (a task
    that raised is logged with its arguments, the deal seed its retry plays again), their call
    stacks, the games they play."""
    import subprocess
    import sys
    import urllib.error
    import urllib.request

    from arena.tournament import cluster
    client, local = cluster._connect("local:1")
    try:
        port = local.scheduler_address.rsplit(":", 1)[1]
        assert client.run(lambda: 42)  # the arena's own client reaches its workers
        tried = subprocess.run([sys.executable, "-c", INTRUDER, port], capture_output=True, text=True, timeout=120,
                               cwd=str(tmp_path), env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})
        assert "ran as" not in tried.stdout and tried.stdout.count("refused:") == 2, tried.stdout + tried.stderr[-2000:]
        worker = urllib.request.quote(next(iter(client.scheduler_info()["workers"])), safe="")
        for page in ("info/main/workers.html", f"info/logs/{worker}.html", f"info/call-stacks/{worker}.html"):
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(f"http://127.0.0.1:{local.scheduler.http_server.port}/{page}", timeout=30)
            assert refused.value.code == 404, page
    finally:
        client.close()
        local.close()
